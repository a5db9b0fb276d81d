// A core event: the backend's native event plus the flags and record state the core checks.
#pragma once

#include <atomic>
#include <memory>

#include "backends/backend.hpp"

namespace rt {

class CoreDevice;

class Event {
public:
    Event(CoreDevice& device, std::unique_ptr<backend::Event> impl, unsigned flags)
        : device_(device), impl_(std::move(impl)), flags_(flags) {}

    CoreDevice& device() const { return device_; }
    backend::Event& impl() const { return *impl_; }
    bool timing() const { return (flags_ & RT_EVENT_DISABLE_TIMING) == 0; }
    bool recorded() const { return recorded_.load(std::memory_order_acquire); }
    void mark_recorded() { recorded_.store(true, std::memory_order_release); }

private:
    CoreDevice& device_;
    std::unique_ptr<backend::Event> impl_;
    unsigned flags_;
    std::atomic<bool> recorded_{false};
};

}  // namespace rt
