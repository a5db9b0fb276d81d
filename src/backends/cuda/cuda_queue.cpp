// cuda streams and events: CUstream operations, host functions via cuLaunchHostFunc, asynchronous fault reports.
#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_backend.hpp"
#include "core/error.hpp"
#include "observe/log.hpp"

namespace rt::cuda {

namespace {

/// Runs queued host work on the driver's callback thread, then lets the device forget and free it. The thread is
/// marked a driver thread meanwhile: CUDA calls from the work are refused (NOT_PERMITTED) instead of deadlocking,
/// and releases it asks for are handed to the timeline's thread.
void CUDA_CB host_work_trampoline(void* p) {
    DriverThread driver_thread;
    auto* work = static_cast<HostWork*>(p);
    if (work->is_copy) {
        std::memmove(work->copy.dst, work->copy.src, work->copy.bytes);  // H2H, in stream order
    } else if (work->internal) {
        work->internal();
    } else {
        backend::run_host_call(work->call);
    }
    if (work->pending) work->pending->fetch_sub(1);
    work->device->forget_host_work(work);
}

}  // namespace

// ------------------------------------------------------------------------------------------------ events

std::shared_ptr<CudaRecord> CudaEvent::record() const {
    std::lock_guard lock(mutex_);
    return record_;
}

void CudaEvent::set_record(std::shared_ptr<CudaRecord> r) {
    std::lock_guard lock(mutex_);
    record_ = std::move(r);
}

rtError_t CudaEvent::failure_impl(std::string* message) {
    std::shared_ptr<CudaRecord> r = record();
    if (!r) return RT_SUCCESS;
    std::lock_guard lock(r->mutex);
    if (r->code != RT_SUCCESS) *message = r->message;
    return r->code;
}

CudaEvent::CudaEvent(CudaDevice& device, bool timing, bool blocking_sync) : device_(device) {
    unsigned flags = (timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING) | (blocking_sync ? CU_EVENT_BLOCKING_SYNC : 0);
    CU_DEVICE_CHECK(device_, cuEventCreate(&event_, flags));
}

CudaEvent::~CudaEvent() {
    device_.enter_quietly();
    device_.driver().cuEventDestroy(event_);
}

bool CudaEvent::query_impl() {
    device_.enter();
    CUresult r = device_.driver().cuEventQuery(event_);
    if (r == CUDA_SUCCESS) {
        carry_assert();
        return true;
    }
    if (r == CUDA_ERROR_NOT_READY) return false;
    device_.check(r, "cuEventQuery");
    return true;
}

void CudaEvent::synchronize_impl() {
    device_.enter();
    device_.check(device_.driver().cuEventSynchronize(event_), "cuEventSynchronize");
    carry_assert();
}

void CudaEvent::carry_assert() {
    // A failed rt_assert the device recorded (not yet reported by a stream) may be of a kernel this record captured:
    // the event carries it; the stream that launched it still reports it at its synchronize.
    std::shared_ptr<CudaRecord> r = record();
    if (!r || !r->after_launch) return;
    std::string what;
    if (!device_.read_assert(&what, /*take=*/false)) return;
    std::lock_guard lock(r->mutex);
    if (r->code == RT_SUCCESS) {
        r->code = RT_ERROR_LAUNCH_FAILED;
        r->message = "a kernel on " + device_.info().name + ": " + what;
    }
}

float CudaEvent::elapsed_ms_impl(backend::Event& end) {
    device_.enter();
    float ms = 0;
    CU_DEVICE_CHECK(device_, cuEventElapsedTime(&ms, event_, static_cast<CudaEvent&>(end).event_));
    return ms;
}

// ------------------------------------------------------------------------------------------------ queues

CudaQueue::CudaQueue(CudaDevice& device, int priority) : device_(device), d_(device.driver()) {
    if (priority != 0 && d_.cuStreamCreateWithPriority)  // the core admits priorities only where the device has them
        CU_DEVICE_CHECK(device_, cuStreamCreateWithPriority(&stream_, CU_STREAM_NON_BLOCKING, priority));
    else
        CU_DEVICE_CHECK(device_, cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
}

void CudaQueue::copy_2d_impl(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                             backend::CopyKind kind, const trace::Key& traced) {
    if (!d_.cuMemcpy2DAsync || kind == backend::CopyKind::host_to_host) {  // pageable H2H: the row copies' path
        backend::Queue::copy_2d_impl(dst, dpitch, src, spitch, width, height, kind, traced);
        return;
    }
    device_.enter();
    // Unified addressing: the driver tells host and device memory apart, as copy() relies on.
    CUDA_MEMCPY2D p{};
    p.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    p.srcDevice = reinterpret_cast<CUdeviceptr>(src);
    p.srcPitch = spitch;
    p.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    p.dstDevice = reinterpret_cast<CUdeviceptr>(dst);
    p.dstPitch = dpitch;
    p.WidthInBytes = width;
    p.Height = height;
    timed(traced, [&] { CU_DEVICE_CHECK(device_, cuMemcpy2DAsync(&p, stream_)); });
    enqueued();
}

void CudaQueue::prefetch_impl(const void* ptr, size_t bytes, int device, const trace::Key& traced) {
    device_.enter();
    if (!d_.cuMemPrefetchAsync) {  // a hint: without the call the memory migrates on demand
        timed(traced, [] {});
        return;
    }
    CUmemLocation where{};
    where.type = device < 0 ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    where.id = device < 0 ? 0 : device;
    timed(traced, [&] {
        CU_DEVICE_CHECK(device_, cuMemPrefetchAsync(reinterpret_cast<CUdeviceptr>(ptr), bytes, where, 0, stream_));
    });
    enqueued();
}

CudaQueue::~CudaQueue() {
    device_.enter_quietly();
    d_.cuStreamSynchronize(stream_);  // the core synchronized already; failures were reported there
    // The last spans, complete now, are stamped by the resolver's last call; no writer pass runs from here on.
    trace::remove_resolver(trace_resolver_);
    if (trace_dropped_)
        RT_LOG(backend, info, "trace: %llu operations of a stream of %s were left out of traces (too many awaited "
               "their timing events)", static_cast<unsigned long long>(trace_dropped_), device_.info().name.c_str());
    for (CUevent ev : trace_events_) d_.cuEventDestroy(ev);
    for (auto& [pos, ev] : marks_) d_.cuEventDestroy(ev);
    for (CUevent ev : spare_marks_) d_.cuEventDestroy(ev);
    d_.cuStreamDestroy(stream_);
}

void CudaQueue::copy_impl(void* dst, const void* src, size_t bytes, backend::CopyKind kind, const trace::Key& traced) {
    device_.enter();
    timed(traced, [&] { copy(dst, src, bytes, kind); });
    enqueued();
}

void CudaQueue::copy(void* dst, const void* src, size_t bytes, backend::CopyKind kind) {
    auto D = [](const void* p) { return reinterpret_cast<CUdeviceptr>(p); };
    switch (kind) {
        case backend::CopyKind::host_to_device:
        case backend::CopyKind::device_to_host:
        case backend::CopyKind::device_to_device:
            // Unified addressing: the driver tells pinned, pageable and device memory (of any GPU) apart. Pageable
            // host memory is staged by the driver (H2D returns once the source was read, D2H once it arrived).
            CU_DEVICE_CHECK(device_, cuMemcpyAsync(D(dst), D(src), bytes, stream_));
            break;
        case backend::CopyKind::host_to_host: {
            // Between two blocks of pinned memory a copy engine does it in stream order (unified addressing), and the
            // callback thread, shared by every stream's host functions, stays free.
            if (is_pinned_host(dst, bytes) && is_pinned_host(src, bytes)) {
                CU_DEVICE_CHECK(device_, cuMemcpyAsync(D(dst), D(src), bytes, stream_));
                break;
            }
            // Pageable memory: cuMemcpyAsync would copy it at the call, synchronously (behind a blocked stream the
            // caller would wait): the copy runs in stream order on the callback thread instead.
            auto work = std::make_unique<HostWork>();
            work->is_copy = true;
            work->copy = {dst, src, bytes};
            launch_host_work(std::move(work), "cuLaunchHostFunc (host-to-host copy)");
            break;
        }
    }
}

void CudaQueue::fill_impl(void* dst, uint8_t value, size_t bytes, const trace::Key& traced) {
    device_.enter();
    timed(traced, [&] { CU_DEVICE_CHECK(device_, cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(dst), value, bytes, stream_)); });
    enqueued();
}

void CudaQueue::native_work(const std::function<void(CUstream)>& work) {
    device_.enter();
    work(stream_);
    enqueued();
}

void CudaQueue::host_call_impl(const backend::HostCall& call, const trace::Key& traced) {
    device_.enter();
    auto work = std::make_unique<HostWork>();
    work->call = call;
    if (call.slot) work->pending = &pending_host_calls_;
    if (work->pending) pending_host_calls_.fetch_add(1);
    try {
        timed(traced, [&] { launch_host_work(std::move(work), "cuLaunchHostFunc"); });
    } catch (...) {
        if (call.slot) pending_host_calls_.fetch_sub(1);
        throw;
    }
    enqueued();
}

void CudaQueue::launch_host_work(std::unique_ptr<HostWork> work, const char* what) {
    work->device = &device_;
    HostWork* p = device_.track_host_work(std::move(work));
    CUresult r = d_.cuLaunchHostFunc(stream_, host_work_trampoline, p);
    if (r != CUDA_SUCCESS) {
        device_.forget_host_work(p);
        device_.check(r, what);
    }
}

// ------------------------------------------------------------------------------------------------ tracing

CudaQueue::TracedOp CudaQueue::trace_before(const trace::Key& key) noexcept {
    TracedOp op;
    op.key = key;
    try {
        // Registered outside trace_mutex_: the writer takes the registry's lock, then (in the resolver) trace_mutex_.
        std::call_once(trace_registered_, [this] {
            trace_resolver_ =
                trace::add_resolver([this](trace::Sink& sink, bool final) { return resolve_traced(sink, final); });
        });
        op.anchor = device_.trace_anchor();
    } catch (...) {  // a driver failure, or out of memory: stamped at its enqueue
        trace::finish(key, key.enqueue_ns, key.enqueue_ns, trace::Status::ok);
        return {};
    }
    bool dropped = false, first_drop = false, created = true;
    {
        std::lock_guard lock(trace_mutex_);
        if (outstanding_ >= kMaxTraced) {
            dropped = true;
            first_drop = trace_dropped_++ == 0;
        } else {
            ++outstanding_;  // trace_recycle gives it back, the resolver once it stamped the pair
            try {
                for (CUevent* ev : {&op.before, &op.after}) {
                    if (!trace_spare_.empty()) {
                        *ev = trace_spare_.back();
                        trace_spare_.pop_back();
                        continue;
                    }
                    // The pushes below, and every return to the spare list, cannot throw.
                    trace_events_.reserve(trace_events_.size() + 1);
                    trace_spare_.reserve(trace_events_.size() + 1);
                    if (d_.cuEventCreate(ev, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {  // timing (no DISABLE_TIMING)
                        *ev = nullptr;
                        created = false;
                        break;
                    }
                    trace_events_.push_back(*ev);
                }
            } catch (...) {
                created = false;
            }
        }
    }
    if (dropped) {
        trace::withdraw(key);  // left out of the trace, not placed at a wrong time
        if (first_drop)
            RT_LOG(backend, warn,
                   "trace: %zu operations of a stream of %s await their timing events (the GPU is behind): later ones "
                   "are left out of the trace until it catches up",
                   kMaxTraced, device_.info().name.c_str());
        return {};
    }
    if (!created || d_.cuEventRecord(op.before, stream_) != CUDA_SUCCESS) {
        trace_recycle(op);
        trace::finish(key, key.enqueue_ns, key.enqueue_ns, trace::Status::ok);  // stamped at its enqueue
        return {};
    }
    return op;
}

void CudaQueue::trace_after(TracedOp op) noexcept {
    const trace::Key key = op.key;
    if (d_.cuEventRecord(op.after, stream_) != CUDA_SUCCESS) {
        trace_recycle(op);
        trace::finish(key, key.enqueue_ns, key.enqueue_ns, trace::Status::failed);  // queued, never timed
        return;
    }
    std::lock_guard lock(trace_mutex_);
    try {
        traced_.push_back(std::move(op));
    } catch (...) {  // out of memory: the events are lost to the pool until the queue goes
        --outstanding_;
    }
}

void CudaQueue::trace_recycle(TracedOp& op) noexcept {
    std::lock_guard lock(trace_mutex_);
    // trace_events_ holds every event of the pool, so the spare list's capacity suffices (no throw).
    for (CUevent ev : {op.before, op.after})
        if (ev) trace_spare_.push_back(ev);
    op.before = op.after = nullptr;
    --outstanding_;
}

size_t CudaQueue::resolve_traced(trace::Sink& sink, bool final) noexcept {
    std::deque<TracedOp> batch;
    {
        std::lock_guard lock(trace_mutex_);
        batch.swap(traced_);  // enqueuing threads go on with an empty list meanwhile
    }
    if (batch.empty()) return 0;
    device_.enter_quietly();
    const double ns_per_tick = trace::ns_per_tick();
    auto at = [&](const TraceAnchor& a, CUevent ev, int64_t* ticks) {
        float ms = 0;
        if (d_.cuEventElapsedTime(&ms, a.event, ev) != CUDA_SUCCESS) return false;
        *ticks = a.ticks + static_cast<int64_t>(static_cast<double>(ms) * 1e6 / ns_per_tick);
        return true;
    };
    size_t done = 0;
    for (; done < batch.size(); ++done) {
        TracedOp& op = batch[done];
        const CUresult r = d_.cuEventQuery(op.after);
        if (r == CUDA_ERROR_NOT_READY && !final) break;  // later ones are behind it on the stream
        int64_t start = 0, end = 0;
        // The failure the stream's slot holds (a host function's, a dependency's), read once the GPU passed the
        // operation: a failure earlier in stream order is seen (the slot was set before the stream went on).
        trace::Status s = slot_ && slot_->failed() ? trace::Status::failed : trace::Status::ok;
        if (r != CUDA_SUCCESS || !at(*op.anchor, op.before, &start) || !at(*op.anchor, op.after, &end)) {
            // Never seen complete (a stop while the GPU runs it), or the context failed: a point in stream order.
            start = end = std::max(op.key.enqueue_ns, trace_last_end_);
            s = r == CUDA_ERROR_NOT_READY ? trace::Status::skipped : trace::Status::failed;
        } else if (start < trace_last_end_) {
            // Rounding, or a renewed anchor (each is off by its own error): the stream ran them in order, so the span
            // moves after its predecessor, keeping its duration.
            end += trace_last_end_ - start;
            start = trace_last_end_;
        }
        end = std::max(end, start);
        sink.finish(op.key, start, end, s);
        trace_last_end_ = end;
    }
    std::lock_guard lock(trace_mutex_);
    for (size_t i = 0; i < done; ++i) {
        trace_spare_.push_back(batch[i].before);
        trace_spare_.push_back(batch[i].after);
    }
    outstanding_ -= done;
    // What the GPU has not passed goes back in front of what was queued meanwhile.
    try {
        traced_.insert(traced_.begin(), std::make_move_iterator(batch.begin() + static_cast<ptrdiff_t>(done)),
                       std::make_move_iterator(batch.end()));
    } catch (...) {
        outstanding_ -= batch.size() - done;  // out of memory: those spans are lost
    }
    return outstanding_;
}

void CudaQueue::record_impl(backend::Event& event, const trace::Key& traced) {
    auto& e = static_cast<CudaEvent&>(event);
    if (&e.device() != &device_)
        fail(RT_ERROR_INVALID_VALUE, "an event of %s cannot be recorded on a stream of %s (CUDA records an event only "
             "on streams of its own device; create the event on the stream's device)",
             e.device().info().name.c_str(), device_.info().name.c_str());
    device_.enter();
    timed(traced, [&] { record(e); });
}

void CudaQueue::record(CudaEvent& e) {
    // The record carries the stream's failure not yet reported: known now, or — with user host functions still in
    // flight — captured in stream order just before the CUevent.
    auto r = std::make_shared<CudaRecord>();
    r->after_launch = launched_.load(std::memory_order_relaxed);
    if (slot_ && slot_->failed()) {
        r->code = slot_->peek(&r->message);
    } else if (slot_ && pending_host_calls_.load() > 0) {
        r->capturing = true;
        auto work = std::make_unique<HostWork>();
        work->internal = [r, slot = slot_] {
            std::lock_guard lock(r->mutex);
            if (slot->failed()) r->code = slot->peek(&r->message);
        };
        launch_host_work(std::move(work), "cuLaunchHostFunc (event record)");
        enqueued();  // positions taken from now on come after the capture
    }
    CU_DEVICE_CHECK(device_, cuEventRecord(e.handle(), stream_));
    e.set_record(std::move(r));
}

void CudaQueue::wait_native_impl(void* native) {
    device_.enter();
    wait_native(native);
    enqueued();
}

void CudaQueue::wait_native(void* native) {
    // An event of our own recorded on the foreign stream, waited for here; destroying it at once is allowed (the
    // queued wait keeps what it needs: CUDA releases a recorded event's resources once it has completed).
    CUevent ev = nullptr;
    CU_DEVICE_CHECK(device_, cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CUresult r = d_.cuEventRecord(ev, static_cast<CUstream>(native));
    const char* what = "cuEventRecord (on the foreign stream)";
    if (r == CUDA_SUCCESS) {
        r = d_.cuStreamWaitEvent(stream_, ev, 0);
        what = "cuStreamWaitEvent";
    }
    d_.cuEventDestroy(ev);
    device_.check(r, what);
}

void CudaQueue::wait_impl(backend::Event& event, const trace::Key& traced) {
    device_.enter();
    timed(traced, [&] { wait(static_cast<CudaEvent&>(event)); });
    enqueued();
}

void CudaQueue::wait(CudaEvent& e) {
    CU_DEVICE_CHECK(device_, cuStreamWaitEvent(stream_, e.handle(), 0));
    // A failed producer fails this stream, in stream order: its later host functions are skipped and its next
    // synchronize reports "dependency failed" (its kernels and copies are already the GPU's).
    std::shared_ptr<CudaRecord> r = e.record();
    if (!r || !slot_) return;
    bool check;
    {
        std::lock_guard lock(r->mutex);
        check = r->capturing || r->code != RT_SUCCESS;
    }
    if (!check) return;
    auto work = std::make_unique<HostWork>();
    work->internal = [r, slot = slot_] {
        std::lock_guard lock(r->mutex);
        if (r->code != RT_SUCCESS && !slot->failed())
            slot->set(r->code, "dependency failed: this stream waited for an event recorded behind a failure on " +
                                   r->message);
    };
    // Counted like a user host function: an event recorded behind this check must capture what it finds, so a
    // failure travels on to the next stream too.
    work->pending = &pending_host_calls_;
    pending_host_calls_.fetch_add(1);
    try {
        launch_host_work(std::move(work), "cuLaunchHostFunc (event wait)");
    } catch (...) {
        pending_host_calls_.fetch_sub(1);
        throw;
    }
}

LaunchParams::LaunchParams(const CudaFunction& f, const backend::LaunchShape& shape, void* const* args)
    : extent_{{shape.global[0], shape.global[1], shape.global[2]}}, params_(const_cast<void**>(args)) {
    if (f.bounded()) {
        const size_t n = f.num_args() > 0 ? static_cast<size_t>(f.num_args()) : 0;
        void** p = inline_;
        if (n + 1 > kInline) {
            heap_.resize(n + 1);
            p = heap_.data();
        }
        p[0] = &extent_;
        for (size_t i = 0; i < n; ++i) p[i + 1] = args[i];
        params_ = p;
        return;
    }
    for (int d = 0; d < 3; ++d)
        if (shape.global[d] != 1ull * shape.grid[d] * shape.block[d])
            fail(RT_ERROR_NOT_SUPPORTED,
                 "kernel '%s' was not built by the runtime (a module loaded from a foreign cubin or PTX file), so it "
                 "runs whole work-groups: an exact global size (%llu x %llu x %llu) cannot be honoured; launch it over "
                 "grid x block, or build it with runtime-compile --backend cuda",
                 f.name().c_str(), shape.global[0], shape.global[1], shape.global[2]);
}

void CudaQueue::launch_impl(const std::shared_ptr<backend::Function>& function, const backend::LaunchShape& shape,
                            void* const* args, const backend::LaunchReport& report, const trace::Key& traced) {
    device_.enter();
    auto& f = static_cast<CudaFunction&>(*function);
    // The values are copied by cuLaunchKernel before it returns.
    LaunchParams params(f, shape, args);
    timed(traced, [&] {
        CUresult r = d_.cuLaunchKernel(f.handle(), shape.grid[0], shape.grid[1], shape.grid[2], shape.block[0],
                                       shape.block[1], shape.block[2], static_cast<unsigned>(shape.shared_bytes),
                                       stream_, params.get(), nullptr);
        if (r != CUDA_SUCCESS) {
            if (is_sticky(r)) device_.mark_lost(describe(d_, r));
            throw Error(translate(r) == RT_ERROR_UNKNOWN ? RT_ERROR_LAUNCH_FAILED : translate(r),
                        "cuLaunchKernel of kernel '" + f.name() + "' failed: " + describe(d_, r));
        }
    });
    std::shared_ptr<backend::Function> previous;  // released after the lock (it may hold the last reference)
    std::shared_ptr<const GraphKernels> previous_graph;
    {
        // Remember the kernel for a fault reported later; the reference is swapped only when it changes.
        std::lock_guard lock(last_lock_);
        if (last_fn_.get() != function.get()) {
            previous = std::exchange(last_fn_, function);
            if (!previous) released_name_.clear();
        }
        if (last_is_graph_) {
            previous_graph = std::move(last_graph_);
            last_is_graph_ = false;
        }
        last_op_ = report.op_index;
    }
    launched_.store(true, std::memory_order_relaxed);
    enqueued();
}

void CudaQueue::launch_graph_impl(const std::shared_ptr<backend::GraphExecutable>& graph,
                                  const backend::LaunchReport& report, const trace::Key& traced) {
    device_.enter();
    auto& g = static_cast<CudaGraph&>(*graph);  // the core passes only executables of this queue's device
    timed(traced, [&] { g.launch(stream_, report, &pending_host_calls_); });
    enqueued();
    if (std::shared_ptr<const GraphKernels> kernels = g.kernels()) {
        // Its kernel nodes name a fault reported later (a graph without kernels leaves the last kernel named).
        std::shared_ptr<const GraphKernels> previous;  // released after the lock
        {
            std::lock_guard lock(last_lock_);
            previous = std::exchange(last_graph_, std::move(kernels));
            last_is_graph_ = true;
            last_op_ = report.op_index;
        }
        launched_.store(true, std::memory_order_relaxed);
    }
}

void CudaQueue::release_kernels_impl() {
    // The driver keeps nothing of a launch's function: the module's unload waits for the streams itself
    // (ModuleImage). Only the name stays, for a fault reported later.
    std::shared_ptr<backend::Function> previous;
    {
        std::lock_guard lock(last_lock_);
        if (!last_fn_) return;
        released_name_ = last_fn_->name();
        previous = std::move(last_fn_);
    }
}

std::string CudaQueue::describe_last_launch(const FaultSite* site, const char* seen) {
    std::string kernel;
    std::shared_ptr<const GraphKernels> graph;
    uint64_t op = 0;
    {
        std::lock_guard lock(last_lock_);
        if (last_is_graph_) graph = last_graph_;
        else kernel = last_fn_ ? last_fn_->name() : released_name_;
        op = last_op_;
    }
    if (graph) return graph->describe(op, site, format("the last launch on it before the %s was seen", seen).c_str());
    if (kernel.empty()) return {};
    return format("kernel '%s' (operation #%llu on the stream, the last kernel launched on it before the %s was seen)",
                  kernel.c_str(), static_cast<unsigned long long>(op), seen);
}

void CudaQueue::report_async(CUresult r, const char* what) noexcept {
    try {
        const std::string subject = describe_last_launch(nullptr, "fault");
        std::string msg = describe(d_, r);
        std::string full =
            subject.empty()
                ? format("queued work on %s failed (%s): %s", device_.info().name.c_str(), what, msg.c_str())
                : format("%s failed on %s: %s", subject.c_str(), device_.info().name.c_str(), msg.c_str());
        if (is_sticky(r)) {
            device_.mark_lost(full);
            full += " (the CUDA context is lost: later operations on this device fail; rtFinalize + rtInit recovers)";
        }
        rtError_t code = is_sticky(r) || translate(r) == RT_ERROR_UNKNOWN ? RT_ERROR_LAUNCH_FAILED : translate(r);
        if (slot_) slot_->set(code, full);
    } catch (...) {
        device_.mark_lost("an asynchronous CUDA error (reporting it ran out of memory)");
    }
}

void CudaQueue::report_assert() noexcept {
    if (!slot_ || !launched_.load(std::memory_order_relaxed)) return;  // a stream without kernels cannot have failed one
    try {
        std::string what;
        FaultSite site{};
        if (!device_.read_assert(&what, /*take=*/true, &site)) return;
        slot_->set(RT_ERROR_LAUNCH_FAILED,
                   format("%s %s on %s; that thread ended there, the launch's other threads ran on, and the device "
                          "stays usable",
                          describe_last_launch(&site, "failure").c_str(), what.c_str(), device_.info().name.c_str()));
    } catch (...) {
        slot_->set(RT_ERROR_LAUNCH_FAILED, {});
    }
}

void CudaQueue::synchronize_impl() {
    device_.enter_for_release();
    CUresult r = d_.cuStreamSynchronize(stream_);
    if (r != CUDA_SUCCESS) report_async(r, "cuStreamSynchronize");
    else report_assert();
}

bool CudaQueue::query_impl() {
    device_.enter();
    CUresult r = d_.cuStreamQuery(stream_);
    if (r == CUDA_SUCCESS) {
        report_assert();
        return true;
    }
    if (r == CUDA_ERROR_NOT_READY) return false;
    report_async(r, "cuStreamQuery");
    return true;
}

uint64_t CudaQueue::position_impl() {
    std::lock_guard lock(marks_mutex_);
    if (!dirty_.exchange(false, std::memory_order_relaxed)) return next_position_;  // nothing new since the last mark
    // A lost device completes nothing more, and records nothing: what was queued counts as reached, so frees
    // of every device (which take the positions of every stream) go on.
    auto give_up = [&] {
        reached_.store(next_position_, std::memory_order_release);
        return next_position_;
    };
    if (device_.lost()) return give_up();
    device_.enter();
    CUevent ev = nullptr;
    if (!spare_marks_.empty()) {
        ev = spare_marks_.back();
        spare_marks_.pop_back();
    } else if (CUresult r = d_.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS) {
        dirty_.store(true, std::memory_order_relaxed);
        if (is_sticky(r)) device_.mark_lost("cuEventCreate returned " + describe(d_, r));
        if (device_.lost()) return give_up();
        throw_driver_error(d_, r, "cuEventCreate (stream position)");
    }
    CUresult r = d_.cuEventRecord(ev, stream_);
    if (r != CUDA_SUCCESS) {
        spare_marks_.push_back(ev);
        dirty_.store(true, std::memory_order_relaxed);
        if (is_sticky(r)) device_.mark_lost("cuEventRecord returned " + describe(d_, r));
        if (device_.lost()) return give_up();
        throw_driver_error(d_, r, "cuEventRecord (stream position)");
    }
    marks_.emplace_back(++next_position_, ev);
    return next_position_;
}

bool CudaQueue::reached_impl(uint64_t position) {
    if (position <= reached_.load(std::memory_order_acquire)) return true;
    std::lock_guard lock(marks_mutex_);
    device_.enter_for_release();
    while (!marks_.empty()) {
        CUresult r = d_.cuEventQuery(marks_.front().second);
        if (r == CUDA_ERROR_NOT_READY) break;
        // Complete, or failed (a lost context never completes anything: treat it as reached so memory can go).
        if (marks_.front().first > reached_.load(std::memory_order_relaxed))
            reached_.store(marks_.front().first, std::memory_order_release);
        spare_marks_.push_back(marks_.front().second);
        marks_.pop_front();
    }
    return position <= reached_.load(std::memory_order_acquire);
}

}  // namespace rt::cuda
