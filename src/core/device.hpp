// A core device: one backend device, its index in the runtime, its streams and its memory manager.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/device_memory.hpp"
#include "core/spin_lock.hpp"
#include "core/stream.hpp"

namespace rt {

class CoreDevice {
public:
    /// `per_thread_default`: the null stream is a stream of the calling thread's own (rtInit's
    /// default_stream=per-thread) instead of the legacy default stream.
    CoreDevice(int index, std::unique_ptr<backend::Device> impl, bool per_thread_default = false);
    ~CoreDevice();

    int index() const { return index_; }
    backend::Device& impl() const { return *impl_; }
    const backend::DeviceInfo& info() const { return impl_->info(); }
    /// "cpu:0", "cuda:1": the backend and the ordinal within it.
    const std::string& label() const { return label_; }
    /// The stream the null handle means on the calling thread: the legacy default stream, or (default_stream=
    /// per-thread) the calling thread's own stream of this device, created on first use and kept until the device
    /// goes (rtFinalize).
    const std::shared_ptr<Stream>& default_stream() const {
        return per_thread_default_ ? thread_default_stream() : default_stream_;
    }
    /// The device's legacy default stream (with default_stream=per-thread: reached by no handle, orders nothing).
    const std::shared_ptr<Stream>& legacy_stream() const { return default_stream_; }
    bool per_thread_default() const { return per_thread_default_; }
    /// Listed streams that take part in the legacy default stream's ordering (Stream::joined_legacy).
    uint32_t legacy_blocking_streams() const { return legacy_blocking_.load(std::memory_order_relaxed); }
    DeviceMemory& memory() { return *memory_; }

    /// Every live stream of the device, the default stream first. Thread-safe snapshot.
    std::vector<std::shared_ptr<Stream>> streams() const;
    /// Calls fn(const std::shared_ptr<Stream>&) for each live stream, under the list's lock (fn must not
    /// create or destroy streams).
    template <class F>
    void for_each_stream(F&& fn) const {
        std::lock_guard lock(streams_mutex_);
        for (const auto& s : streams_) fn(s);
    }
    /// Lists a stream made for this device; a blocking one joins the legacy default stream's ordering (unless the
    /// null stream is per-thread).
    void add_stream(std::shared_ptr<Stream> stream);
    /// Unlists the stream; its operations and kernels stay counted in stream_counts().
    void remove_stream(const Stream* stream);

    struct StreamCounts {
        uint32_t streams = 0;           ///< listed streams, the default stream included
        uint64_t operations = 0;        ///< queued on every stream since the device was created
        uint64_t kernels_launched = 0;  ///< among them, kernel launches (each kernel node of a graph launch)
    };
    /// Thread-safe snapshot (rtDeviceGetUsage).
    StreamCounts stream_counts() const;

    /// Enables this device's access to `peer` (rtDeviceEnablePeerAccess, checked by the caller): false, doing
    /// nothing, when it was enabled already. Thread-safe.
    bool enable_peer(CoreDevice& peer);

private:
    const std::shared_ptr<Stream>& thread_default_stream() const;

    int index_;
    std::unique_ptr<backend::Device> impl_;
    std::string label_;
    std::shared_ptr<Stream> default_stream_;
    mutable SpinLock streams_mutex_;  // held for a copy or a scan of a short list
    std::vector<std::shared_ptr<Stream>> streams_;
    uint64_t retired_operations_ = 0;  // of unlisted streams (streams_mutex_)
    uint64_t retired_kernels_ = 0;
    std::unique_ptr<DeviceMemory> memory_;
    std::mutex peers_mutex_;
    std::vector<const CoreDevice*> peers_;  // peer access enabled (rtDeviceEnablePeerAccess)
    const bool per_thread_default_;
    std::atomic<uint32_t> legacy_blocking_{0};
    const uint64_t serial_;  // process-wide number of this device object (the per-thread streams' cache key)
    mutable std::mutex thread_streams_mutex_;
    mutable std::deque<std::shared_ptr<Stream>> thread_streams_;  // per-thread default streams, never removed
};

}  // namespace rt
