// A core stream: the backend's native queue plus what the core owns about it (device, async errors, op count).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "backends/backend.hpp"
#include "core/error.hpp"
#include "observe/trace.hpp"

namespace rt {

class CoreDevice;
namespace graph {
class Capture;
}

class Stream {
public:
    /// `flags`: rtStreamCreateWithFlags's (RT_STREAM_NON_BLOCKING: the stream does not wait for the default stream).
    /// `priority`: rtStreamCreateWithPriority's, already clamped to the device's range (0: the default).
    Stream(CoreDevice& device, std::unique_ptr<backend::Queue> queue, bool is_default, unsigned flags = 0,
           int priority = 0)
        : device_(device), queue_(std::move(queue)), is_default_(is_default), flags_(flags), priority_(priority) {
        queue_->bind_error_slot_impl(&errors_);
    }

    CoreDevice& device() const { return device_; }
    backend::Queue& queue() const { return *queue_; }
    AsyncErrorSlot& errors() { return errors_; }
    bool is_default() const { return is_default_; }
    /// Created without RT_STREAM_NON_BLOCKING: CUDA's legacy default stream waits for it, so using the default
    /// stream while it captures is an implicit dependency on the capture (RT_ERROR_STREAM_CAPTURE_IMPLICIT).
    bool blocking() const { return (flags_ & RT_STREAM_NON_BLOCKING) == 0; }
    int priority() const { return priority_; }
    /// Non-null while the stream takes part in a stream capture (graph/capture.hpp) — and, on the default stream,
    /// while a blocking stream of its device does. Every enqueue path branches on it once, before anything else;
    /// written by capture only, under its lock.
    graph::Capture* capture() const { return capture_.load(std::memory_order_acquire); }
    void set_capture(graph::Capture* capture) { capture_.store(capture, std::memory_order_release); }
    /// Numbers the operations queued on this stream, for error messages ("operation #12"). Called by every enqueue
    /// path (outside capture) just before it queues the operation, so it is also where the legacy default stream's
    /// implicit ordering is queued: a blocking stream's operation after the default stream's latest, the default
    /// stream's after every blocking stream's pending work. A blocking stream pays one look at the default
    /// stream's queued count (Queue::queued_impl, read after the fact: a count taken before an operation is in the
    /// queue would let a later operation miss it) when the default stream queued nothing since it last looked.
    uint64_t next_op() {
        if (legacy_default_ && legacy_default_->queue_->queued_impl() != legacy_seen_.load(std::memory_order_relaxed))
            order_after_legacy_default();
        else if (orders_blocking_)
            order_after_blocking_streams();
        return ops_.fetch_add(1, std::memory_order_relaxed) + 1;
    }
    /// Makes this (blocking, non-default) stream take part in `legacy_default`'s implicit ordering (CoreDevice,
    /// before the stream is listed; once).
    void join_legacy(Stream* legacy_default) { legacy_default_ = legacy_default; }
    /// Makes this default stream the legacy default stream of its device (CoreDevice's constructor; once).
    void make_legacy_default() { orders_blocking_ = true; }
    /// Whether this stream's operations are ordered with the legacy default stream's (a blocking stream of a
    /// device whose default stream is the legacy one).
    bool joined_legacy() const { return legacy_default_ != nullptr; }
    /// Counts kernel launches queued (rtDeviceGetUsage): `n` kernel nodes of a graph launch, else one.
    void count_kernels(uint64_t n = 1) { kernels_.fetch_add(n, std::memory_order_relaxed); }
    uint64_t operations() const { return ops_.load(std::memory_order_relaxed); }
    uint64_t kernels_launched() const { return kernels_.load(std::memory_order_relaxed); }

    /// The stream's track in traces: its tid, and its number in the track's name ("cpu:0 stream 3"; the default
    /// stream's is 0). Process-wide, never reused.
    uint32_t trace_track() const { return trace_track_; }
    /// The trace that named this stream's track (observe/trace.cpp; 0: none yet).
    std::atomic<uint64_t> trace_named_{0};

    /// Waits for the queued work, then reports (and clears) the first asynchronous failure.
    void synchronize();
    /// True if idle; reports a pending asynchronous failure first.
    bool query();
    /// synchronize() that gives up after `timeout_ns` (< 0: never): false when the work has not completed by then
    /// (nothing reported, nothing cleared); polls the queue, so it suits waits of milliseconds and more.
    bool synchronize_for(int64_t timeout_ns);
    /// Waits for the queued work without reporting failures (teardown, memory pressure). Refused
    /// (NOT_PERMITTED) in queue context.
    void wait_idle();

private:
    /// The slow paths of next_op (stream.cpp).
    void order_after_legacy_default();
    void order_after_blocking_streams();
    /// Queues "work queued on this stream from now on waits for everything queued so far on `last`" through
    /// `last`'s internal event (its legacy_mutex_ held meanwhile, so the record the wait sees is its own).
    void wait_for_queued_work_of(Stream& last);

    CoreDevice& device_;
    AsyncErrorSlot errors_;  // before queue_: the queue's destructor may still run work that reports into it
    std::unique_ptr<backend::Queue> queue_;
    std::atomic<uint64_t> ops_{0};
    std::atomic<uint64_t> kernels_{0};
    std::atomic<graph::Capture*> capture_{nullptr};
    bool is_default_;
    unsigned flags_;
    int priority_;
    // The legacy default stream's implicit ordering (next_op). legacy_default_/orders_blocking_ are set before the
    // stream is used. legacy_seen_: the default stream's queued_impl() when this stream last ordered itself after
    // it. legacy_waited_: this stream's queued_impl() when the default stream last ordered itself after it. legacy_event_: created on first
    // use, recorded and waited for under legacy_mutex_.
    Stream* legacy_default_ = nullptr;
    bool orders_blocking_ = false;
    std::atomic<uint64_t> legacy_seen_{0};
    std::atomic<uint64_t> legacy_waited_{0};
    std::mutex legacy_mutex_;
    std::unique_ptr<backend::Event> legacy_event_;
    const uint32_t trace_track_ = trace::next_track();
};

/// Polls `done` until it returns true (true) or `timeout_ns` has passed (false): the waits with a timeout
/// (rtStreamSynchronizeWithTimeout, rtEventSynchronizeWithTimeout).
bool poll_until(const std::function<bool()>& done, int64_t timeout_ns);

/// Called by rtHostFuncSetError: records a failure for the host function running on this thread.
/// Returns false when no host function is running on this thread.
bool set_host_call_error(rtError_t code, const char* message);

}  // namespace rt
