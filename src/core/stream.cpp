// Core stream semantics: synchronize/query report asynchronous failures; host functions run through a trampoline.
#include "core/stream.hpp"

#include <chrono>
#include <cstring>
#include <thread>

#include "core/runtime.hpp"
#include "core/timeline.hpp"
#include "graph/capture.hpp"

namespace rt {

void Stream::synchronize() {
    if (capture()) graph::refuse_on_capturing(*this, "synchronizing the stream");
    refuse_wait_in_queue_context("rtStreamSynchronize");
    queue_->synchronize_impl();
    runtime().timeline().run_due();  // what waited for this work is done when synchronize returns
    device().memory().after_synchronize();  // memory pools' release thresholds
    errors_.take_and_throw();
}

bool Stream::query() {
    if (capture()) graph::refuse_on_capturing(*this, "querying the stream");
    // The queue first: a failure it finds now (an asynchronous fault) is reported by this very call.
    bool idle = false;
    try {
        idle = queue_->query_impl();
    } catch (...) {
        errors_.take_and_throw();  // a failure the stream already had is the one to report
        throw;
    }
    errors_.take_and_throw();
    return idle;
}

bool Stream::synchronize_for(int64_t timeout_ns) {
    if (timeout_ns < 0) {
        synchronize();
        return true;
    }
    if (capture()) graph::refuse_on_capturing(*this, "synchronizing the stream");
    refuse_wait_in_queue_context("rtStreamSynchronizeWithTimeout");
    if (!poll_until([this] { return queue_->query_impl(); }, timeout_ns)) return false;
    runtime().timeline().run_due();
    device().memory().after_synchronize();
    errors_.take_and_throw();
    return true;
}

bool poll_until(const std::function<bool()>& done, int64_t timeout_ns) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::nanoseconds(timeout_ns);
    // Spin briefly (a hand-off takes microseconds), then sleep with a growing interval capped at 1 ms: a
    // millisecond-grained timeout costs at most a millisecond more and the poller no core.
    auto pause = std::chrono::microseconds(20);
    for (int spins = 0;; ++spins) {
        if (done()) return true;
        if (clock::now() >= deadline) return done();
        if (spins < 64) {
            std::this_thread::yield();
            continue;
        }
        std::this_thread::sleep_for(std::min<clock::duration>(pause, deadline - clock::now()));
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
}

void Stream::wait_idle() {
    refuse_wait_in_queue_context("a call that waits for queued work");
    queue_->synchronize_impl();
}

// The legacy default stream (CUDA's): a blocking stream's operation waits for the default stream's queued work, and
// the default stream's for every blocking stream's. Each side waits through the other's internal event, recorded at
// the moment of the wait, only when the other queued something since the last wait: streams that never meet the
// default stream pay one look at its queued count. A capturing stream never gets here (its operations are nodes;
// the default stream refuses work while a blocking stream captures: RT_ERROR_STREAM_CAPTURE_IMPLICIT).
void Stream::wait_for_queued_work_of(Stream& last) {
    std::lock_guard lock(last.legacy_mutex_);
    if (!last.legacy_event_) last.legacy_event_ = last.device_.impl().create_event_impl(false, false);
    last.queue_->record_impl(*last.legacy_event_, trace::Key{});
    queue_->wait_impl(*last.legacy_event_, trace::Key{});
}

void Stream::order_after_legacy_default() {
    Stream& d = *legacy_default_;
    // Read before the record: an operation queued meanwhile is waited for now and again next time (never missed).
    const uint64_t queued = d.queue_->queued_impl();
    wait_for_queued_work_of(d);
    legacy_seen_.store(queued, std::memory_order_relaxed);
}

void Stream::order_after_blocking_streams() {
    CoreDevice& dev = device_;
    if (dev.legacy_blocking_streams() == 0) return;
    // Collected under the list's spin lock, waited for outside it (a record takes the queue's own locks).
    thread_local std::vector<std::shared_ptr<Stream>> due;
    due.clear();
    dev.for_each_stream([&](const std::shared_ptr<Stream>& s) {
        if (s.get() != this && s->joined_legacy() &&
            s->queue_->queued_impl() != s->legacy_waited_.load(std::memory_order_relaxed))
            due.push_back(s);
    });
    for (const auto& s : due) {
        const uint64_t queued = s->queue_->queued_impl();
        wait_for_queued_work_of(*s);
        s->legacy_waited_.store(queued, std::memory_order_relaxed);
    }
    due.clear();  // no stream kept alive by this thread
}

namespace {
/// The failure reported by rtHostFuncSetError inside the host function running on this thread.
struct HostCallFailure {
    rtError_t code = RT_SUCCESS;
    std::string message;
};
thread_local HostCallFailure* t_host_call = nullptr;
}  // namespace

bool set_host_call_error(rtError_t code, const char* message) {
    if (!t_host_call) return false;
    if (t_host_call->code == RT_SUCCESS) {
        t_host_call->code = code;
        t_host_call->message = message ? message : "";
    }
    return true;
}

namespace backend {
void Queue::wait_native_impl(void* native) {
    (void)native;
    fail(RT_ERROR_NOT_SUPPORTED, "this device's backend has no native streams to wait for (only cuda has: a CUstream)");
}

void Queue::copy_2d_impl(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         CopyKind kind, const trace::Key& traced) {
    // The trace key goes with the last row, the one whose completion completes the operation.
    for (size_t row = 0; row < height; ++row)
        copy_impl(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch, width, kind,
                  row + 1 == height ? traced : trace::Key{});
}

void Queue::launch_graph_impl(const std::shared_ptr<GraphExecutable>& graph, const LaunchReport& report,
                              const trace::Key& traced) {
    (void)graph;
    (void)report;
    (void)traced;
    fail(RT_ERROR_NOT_SUPPORTED, "this device's backend does not launch lowered graphs");
}

void Queue::joint_impl(const std::shared_ptr<JointStep>& step, int participant, const trace::Key& traced) {
    (void)step;
    (void)participant;
    (void)traced;
    fail(RT_ERROR_NOT_SUPPORTED, "this device's backend cannot run in-process collectives (its queues cannot park)");
}

void notify_timeline() noexcept {
    if (Runtime* r = detail::g_runtime.load(std::memory_order_acquire)) r->timeline().wake();
}

bool defer_after_queued_work(std::function<void()> action) noexcept {
    try {
        // No runtime: none is being built or torn down past its final wait (rtFinalize waited for all work).
        if (Runtime* r = detail::g_runtime.load(std::memory_order_acquire))
            r->timeline().defer(unfinished_points(), std::move(action));
        else
            action();
        return true;
    } catch (...) {
        return false;
    }
}

std::string describe_operation(uint64_t op_index, const char* graph_node) {
    const auto op = static_cast<unsigned long long>(op_index);
    if (!graph_node) return format("operation #%llu on the stream", op);
    // The label's node part ("node 3" of "node 3 (kernel 'scale')"): the message names the kind and name itself.
    const char* detail = std::strstr(graph_node, " (");
    const int node_chars = detail ? static_cast<int>(detail - graph_node) : static_cast<int>(std::strlen(graph_node));
    return format("%.*s of the graph launched as operation #%llu on the stream", node_chars, graph_node, op);
}

void run_host_call(const HostCall& call) noexcept {
    if (!call.slot) {  // internal bookkeeping: never skipped, cannot fail
        call.fn(call.user_data);
        return;
    }
    if (call.slot->failed()) {  // work queued behind a pending failure does not run
        call.slot->count_skipped();
        return;
    }
    QueueContext context;
    HostCallFailure failure;
    HostCallFailure* outer = t_host_call;  // host functions do not nest, but stay correct if a backend does
    t_host_call = &failure;
    try {
        call.fn(call.user_data);
    } catch (const std::exception& e) {
        if (failure.code == RT_SUCCESS) {
            failure.code = RT_ERROR_LAUNCH_FAILED;
            failure.message = std::string("threw: ") + e.what();
        }
    } catch (...) {
        if (failure.code == RT_SUCCESS) {
            failure.code = RT_ERROR_LAUNCH_FAILED;
            failure.message = "threw an exception of unknown type";
        }
    }
    t_host_call = outer;
    if (failure.code != RT_SUCCESS) {
        try {
            call.slot->set(failure.code,
                           format("host function %p (%s) failed: %s", reinterpret_cast<void*>(call.fn),
                                  describe_operation(call.op_index, call.graph_node).c_str(), failure.message.c_str()));
        } catch (...) {
            // Out of memory while reporting: the code alone still reaches the stream.
            call.slot->set(failure.code, {});
        }
    }
}
}  // namespace backend

}  // namespace rt
