// A core stream: the backend's native queue plus what the core owns about it (device, async errors, op count).
#pragma once

#include <atomic>
#include <memory>

#include "backends/backend.hpp"
#include "core/error.hpp"

namespace rt {

class CoreDevice;

class Stream {
public:
    Stream(CoreDevice& device, std::unique_ptr<backend::Queue> queue, bool is_default)
        : device_(device), queue_(std::move(queue)), is_default_(is_default) {
        queue_->bind_error_slot_impl(&errors_);
    }

    CoreDevice& device() const { return device_; }
    backend::Queue& queue() const { return *queue_; }
    AsyncErrorSlot& errors() { return errors_; }
    bool is_default() const { return is_default_; }
    /// Numbers the operations queued on this stream, for error messages ("operation #12").
    uint64_t next_op() { return ops_.fetch_add(1, std::memory_order_relaxed) + 1; }

    /// Waits for the queued work, then reports (and clears) the first asynchronous failure.
    void synchronize();
    /// True if idle; reports a pending asynchronous failure first.
    bool query();
    /// Waits for the queued work without reporting failures (teardown, memory pressure). Refused
    /// (NOT_PERMITTED) in queue context.
    void wait_idle();

private:
    CoreDevice& device_;
    AsyncErrorSlot errors_;  // before queue_: the queue's destructor may still run work that reports into it
    std::unique_ptr<backend::Queue> queue_;
    std::atomic<uint64_t> ops_{0};
    bool is_default_;
};

/// Called by rtHostFuncSetError: records a failure for the host function running on this thread.
/// Returns false when no host function is running on this thread.
bool set_host_call_error(rtError_t code, const char* message);

}  // namespace rt
