// A core device: one backend device, its index in the runtime and its default stream.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.hpp"
#include "core/stream.hpp"

namespace rt {

class CoreDevice {
public:
    CoreDevice(int index, std::unique_ptr<backend::Device> impl);

    int index() const { return index_; }
    backend::Device& impl() const { return *impl_; }
    const backend::DeviceInfo& info() const { return impl_->info(); }
    /// "cpu:0", "cuda:1": the backend and the ordinal within it.
    const std::string& label() const { return label_; }
    const std::shared_ptr<Stream>& default_stream() const { return default_stream_; }

private:
    int index_;
    std::unique_ptr<backend::Device> impl_;
    std::string label_;
    std::shared_ptr<Stream> default_stream_;
};

}  // namespace rt
