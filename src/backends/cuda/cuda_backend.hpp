// The cuda backend's classes: device (a primary context), queue (a CUstream), event (a CUevent), module and function.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/cuda_fault_record.h"
#include "backends/cuda/cuda_graph.hpp"
#include "backends/cuda/cuda_target.hpp"
#include "core/spin_lock.hpp"
#include "core/timeline.hpp"
#include "observe/trace.hpp"

namespace rt::cuda {

/// Makes `ctx` current on the calling thread if it is not (a TLS read in the driver when it already is).
/// Not restored on exit, like the CUDA runtime's device selection.
inline void make_current(const Driver& d, CUcontext ctx) {
    CUcontext cur = nullptr;
    if (d.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx) CU_CHECK(d, cuCtxSetCurrent(ctx));
}

/// make_current for teardown: never throws (a failure leaves the next call to fail on the wrong context).
inline void make_current_quietly(const Driver& d, CUcontext ctx) noexcept {
    CUcontext cur = nullptr;
    if (d.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx) d.cuCtxSetCurrent(ctx);
}

class CudaDevice;

/// True when [ptr, ptr+bytes) lies in one block of host memory the backend page-locked (cuMemHostAlloc, PORTABLE:
/// pinned for every context): a copy between two such blocks can run on a copy engine in stream order. Thread-safe.
bool is_pinned_host(const void* ptr, size_t bytes);

/// One host function or host-to-host copy queued with cuLaunchHostFunc. The driver does not call host functions
/// queued behind a context error ("the function will not be called in the event of an error in the CUDA
/// context"), so the device owns what was queued: the trampoline that runs it has the device forget (free) it,
/// and the device frees what the driver never ran when its context is released.
struct HostWork {
    CudaDevice* device = nullptr;
    bool is_copy = false;
    backend::HostCall call{};
    std::function<void()> internal;          ///< set: runtime bookkeeping in stream order (never skipped)
    std::atomic<int>* pending = nullptr;    ///< a user host call: the queue's count of those not run yet
    struct {
        void* dst;
        const void* src;
        size_t bytes;
    } copy{};
};

/// A loaded CUmodule, shared by the module object and every function taken from it, so a function (and a
/// queue's last launched function) keeps the code loaded. The last reference unloads it once every stream has run
/// what was queued before (launches of it may be queued: the driver does not keep the module for them), without
/// waiting: on the core timeline.
struct ModuleImage {
    const Driver& driver;
    CUcontext ctx;
    CUmodule module = nullptr;
    ~ModuleImage();
};

class CudaFunction final : public backend::Function {
public:
    /// `bounded`: the kernel was built by the cuda target and takes the launch's extent first (cuda_target.hpp).
    /// `ptx`: the module's PTX text, if it is one (parameter sizes on drivers that cannot report them).
    /// `symbol`: its name in the image (the lowered name of a kernel instantiation; else `name`).
    CudaFunction(std::shared_ptr<ModuleImage> image, CUfunction fn, std::string name, bool bounded, const std::string& ptx,
                 const std::string& symbol);
    const std::string& name() const override { return name_; }
    /// From cuFuncGetParamInfo (driver 12.4+), the extent of a bounded kernel not counted; -1 (launches not
    /// arity-checked) on older drivers.
    int num_args() const override { return num_args_; }
    const std::vector<size_t>& arg_sizes() const override { return sizes_; }
    CUfunction handle() const { return fn_; }
    bool bounded() const { return bounded_; }
    /// (work-groups) Marked by the cuda target (kGroupKernelPrefix); its __shared__ bytes from the driver
    /// (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES; 0 where it cannot say).
    bool uses_barriers() const override { return groups_; }
    size_t static_local_bytes() const override { return static_local_bytes_; }
    void set_groups(bool groups) { groups_ = groups; }

private:
    std::shared_ptr<ModuleImage> image_;
    CUfunction fn_;
    std::string name_;
    int num_args_ = -1;
    std::vector<size_t> sizes_;
    bool bounded_;
    bool groups_ = false;
    size_t static_local_bytes_ = 0;
};

/// CUDA's parameter array for a launch of `f` over `shape` (args[i] points at argument i), as cuLaunchKernel and a
/// graph's kernel nodes take it: a kernel the cuda target bounded gets the launch's exact global size first
/// (cuda_target.hpp). A kernel of a foreign module runs whole work-groups: an exact global size other than
/// grid x block is NOT_SUPPORTED. The array points into this object and `args`: keep both until the driver read them.
class LaunchParams {
public:
    LaunchParams(const CudaFunction& f, const backend::LaunchShape& shape, void* const* args);
    LaunchParams(const LaunchParams&) = delete;
    LaunchParams& operator=(const LaunchParams&) = delete;
    void** get() const { return params_; }

private:
    struct {
        unsigned long long global[3];
    } extent_;
    static constexpr size_t kInline = 16;
    void* inline_[kInline];
    std::vector<void*> heap_;
    void** params_;
};

class CudaModule final : public backend::Module {
public:
    /// Loads `image` (cubin, PTX with its NUL, or fatbin) into `ctx`. Its kernels are enumerated from the module
    /// (driver 12.4+) or the PTX text; it is bounded when it holds kBoundedMarker (built by the cuda target), and then
    /// its rt_assert record pointer (RT_CUDA_FAULT_RECORD_SYMBOL) is set to `fault_record` (a device address; 0: not).
    /// `meta`: what the cuda target recorded beside the image (kernel instantiations' lowered names, globals).
    CudaModule(const Driver& d, CUcontext ctx, const std::string& image, CUdeviceptr fault_record = 0,
               ImageMeta meta = {});
    std::shared_ptr<backend::Function> get_function_impl(const std::string& name) override;
    std::vector<std::string> kernel_names() const override { return names_; }
    /// cuModuleGetGlobal; in a module the cuda target built, only the names it recorded (its RT_GLOBALs).
    bool find_global(const std::string& name, GlobalSymbol& out) override;
    std::vector<std::string> global_names() const override { return meta_.globals; }

private:
    std::shared_ptr<ModuleImage> image_;
    std::vector<std::string> names_;
    std::mutex mutex_;
    std::unordered_map<std::string, std::shared_ptr<CudaFunction>> functions_;
    bool bounded_ = false;
    std::string ptx_;  // the image, when it is PTX text
    ImageMeta meta_;
};

/// A timing event of a device and the trace clock's time (trace::now() ticks) the GPU passed it: recorded on the
/// device's own idle stream between two host readings of the clock, `ticks` their midpoint, `error` half their distance
/// (the GPU's timestamp lies between the two readings: `ticks` is off by at most `error`). Spans of traced operations
/// are placed after it with cuEventElapsedTime (CudaQueue::resolve_traced).
struct TraceAnchor {
    TraceAnchor(const Driver& driver, CUcontext context) : d(driver), ctx(context) {}
    ~TraceAnchor();
    TraceAnchor(const TraceAnchor&) = delete;
    TraceAnchor& operator=(const TraceAnchor&) = delete;
    const Driver& d;
    CUcontext ctx;
    CUevent event = nullptr;
    int64_t ticks = 0;
    int64_t error = 0;
    int64_t renew_at = 0;  ///< trace::now() after which the device takes a new anchor (kAnchorLifetimeNs)
};

/// The failure one record of a cuda event carries: its stream's pending failure, captured in stream order by an
/// internal host function before the CUevent is recorded (only when the stream has user host functions in flight,
/// the failures a CUDA stream can recover from; a faulting kernel loses the whole context instead).
struct CudaRecord {
    std::mutex mutex;
    rtError_t code = RT_SUCCESS;
    std::string message;
    bool capturing = false;  ///< a capture is queued: waits must check in stream order too
    bool after_launch = false;  ///< its stream had launched kernels: a failed rt_assert found later is carried too
};

class CudaEvent final : public backend::Event {
public:
    CudaEvent(CudaDevice& device, bool timing, bool blocking_sync);
    ~CudaEvent() override;
    bool query_impl() override;
    void synchronize_impl() override;
    float elapsed_ms_impl(backend::Event& end) override;
    rtError_t failure_impl(std::string* message) override;
    CUevent handle() const { return event_; }
    CudaDevice& device() const { return device_; }
    /// The latest record (replaced by each record_impl).
    std::shared_ptr<CudaRecord> record() const;
    void set_record(std::shared_ptr<CudaRecord> r);

private:
    /// After the record completed: a failed rt_assert on the device, when the record's stream had launched kernels.
    void carry_assert();

    CudaDevice& device_;
    CUevent event_ = nullptr;
    mutable std::mutex mutex_;
    std::shared_ptr<CudaRecord> record_;
};

/// A core stream on cuda: one non-blocking CUstream (never the legacy NULL stream, which would serialise
/// with every other stream of the context).
class CudaQueue final : public backend::Queue {
public:
    /// `priority`: cuStreamCreateWithPriority's (0: cuStreamCreate).
    CudaQueue(CudaDevice& device, int priority);
    ~CudaQueue() override;
    void copy_impl(void* dst, const void* src, size_t bytes, backend::CopyKind kind, const trace::Key& traced) override;
    void fill_impl(void* dst, uint8_t value, size_t bytes, const trace::Key& traced) override;
    void copy_2d_impl(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                      backend::CopyKind kind, const trace::Key& traced) override;
    void prefetch_impl(const void* ptr, size_t bytes, int device, const trace::Key& traced) override;
    void host_call_impl(const backend::HostCall& call, const trace::Key& traced) override;
    void record_impl(backend::Event& event, const trace::Key& traced) override;
    void wait_impl(backend::Event& event, const trace::Key& traced) override;
    void wait_native_impl(void* native) override;
    void launch_impl(const std::shared_ptr<backend::Function>& function, const backend::LaunchShape& shape,
                     void* const* args, const backend::LaunchReport& report, const trace::Key& traced) override;
    /// One cuGraphLaunch of a CudaGraph. The queue keeps nothing of it: the driver keeps what a launch in flight
    /// runs (an executable graph destroyed meanwhile is freed once it completed) and the device keeps its host
    /// nodes' data (GraphHostNodes), so updates of the executable graph never wait for its launches.
    void launch_graph_impl(const std::shared_ptr<backend::GraphExecutable>& graph,
                           const backend::LaunchReport& report, const trace::Key& traced) override;
    void synchronize_impl() override;
    /// At most this many traced operations await their timing events per queue; more are not timed (dropped from
    /// the trace, counted, one warning): the enqueuing thread never waits for the GPU or the trace writer.
    static constexpr size_t kMaxTraced = 4096;
    bool query_impl() override;
    /// Positions are marker events recorded on the stream (only when work was queued since the last one).
    uint64_t position_impl() override;
    uint64_t queued_impl() override { return queued_.load(std::memory_order_acquire); }
    bool reached_impl(uint64_t position) override;
    void bind_error_slot_impl(AsyncErrorSlot* slot) override { slot_ = slot; }
    /// Drops the function kept for naming faults (its name stays).
    void release_kernels_impl() override;
    CUstream handle() const { return stream_; }
    /// Runs `work` now with the device's context current and this queue's CUstream, for a library that queues its
    /// own work on it (NCCL): later operations of the queue are ordered after it.
    void native_work(const std::function<void(CUstream)>& work);

private:
    // The driver calls of the *_impl of the same name, between traced()'s timing events.
    void copy(void* dst, const void* src, size_t bytes, backend::CopyKind kind);
    void record(CudaEvent& e);
    void wait(CudaEvent& e);
    void wait_native(void* native);
    /// Queues `work` with cuLaunchHostFunc, owned by the device until it ran; throws (freeing it) on failure.
    void launch_host_work(std::unique_ptr<HostWork> work, const char* what);
    /// A failed synchronize/query: stores the failure in the stream's slot naming the last kernel launched,
    /// and marks the device lost when the error is sticky. Never throws (called from destructors too).
    void report_async(CUresult r, const char* what) noexcept;
    /// Every *_impl that queued work calls it last: positions must record a new mark.
    void enqueued() {
        dirty_.store(true, std::memory_order_relaxed);
        queued_.fetch_add(1, std::memory_order_release);
    }

    // ---- tracing (docs/observability.md, "cuda spans"): a traced operation's work is queued between two timing
    // events of the queue's pool; the trace writer's resolver reads them once the GPU passed them. No host function.
    // Read by the writer's poll rather than at synchronize: programs that never synchronize a stream (or only the
    // device) still get their spans, a synchronize costs nothing more, and the enqueuing thread never reads events.
    struct TracedOp {
        trace::Key key;
        CUevent before = nullptr, after = nullptr;
        std::shared_ptr<const TraceAnchor> anchor;
    };
    /// Queues `work` (the *_impl's driver calls), between timing events when the core handed the operation a trace
    /// key: the one test of the untraced path here (the core's test of the trace flag chose the key).
    template <class Work>
    void timed(const trace::Key& traced, Work&& work) {
        if (traced) [[unlikely]] {
            // One traced operation of this queue at a time (its before event, its work, its after event): two threads
            // queuing on one stream cannot interleave their pairs (overlapping spans).
            std::lock_guard order(trace_order_mutex_);
            TracedOp op = trace_before(traced);
            if (!op.before) {
                work();
                return;
            }
            struct Undo {  // the work threw: its events go back (the core withdraws the record)
                CudaQueue& q;
                TracedOp* op;
                ~Undo() {
                    if (op) q.trace_recycle(*op);
                }
            } undo{*this, &op};
            work();
            undo.op = nullptr;
            trace_after(std::move(op));
            return;
        }
        work();
    }
    /// Takes a pair of timing events (and the device's anchor) for `key` and records the first on the stream; a
    /// TracedOp without events when the operation cannot be timed: the queue's kMaxTraced reached (its record is
    /// withdrawn), or a driver failure (it is stamped as complete at its enqueue).
    TracedOp trace_before(const trace::Key& key) noexcept;
    /// Records the second event behind the work just queued and hands the pair to the resolver.
    void trace_after(TracedOp op) noexcept;
    /// Returns the pair's events to the pool (trace_mutex_ not held).
    void trace_recycle(TracedOp& op) noexcept;
    /// The resolver (trace.hpp): stamps the pairs the GPU passed, in stream order; `final`: the rest as skipped.
    size_t resolve_traced(trace::Sink& sink, bool final) noexcept;

    std::mutex trace_order_mutex_;        // held by timed() across a traced operation (never by the resolver)
    std::mutex trace_mutex_;              // the members below; held for O(1) work by enqueuing threads
    std::deque<TracedOp> traced_;         // queued, in stream order, not yet taken by a resolver pass
    size_t outstanding_ = 0;              // pairs queued and not yet stamped (traced_ and a pass's)
    std::vector<CUevent> trace_spare_;    // timing events for reuse
    std::vector<CUevent> trace_events_;   // every timing event of the pool (destroyed with the queue)
    uint64_t trace_dropped_ = 0;          // operations not timed because kMaxTraced were outstanding
    std::once_flag trace_registered_;     // the resolver is registered at the first traced operation
    uint64_t trace_resolver_ = 0;         // its id
    // The end of the previous span stamped: the resolver's (one pass at a time: the writers', then the destructor's).
    int64_t trace_last_end_ = 0;
    /// After a successful synchronize/query of a stream that launched kernels: a failed rt_assert the device
    /// recorded becomes the stream's failure, naming the last kernel launched on it. Never throws.
    void report_assert() noexcept;
    /// The subject of a fault found now, naming the last launch of the stream — a kernel, or the kernel node of a
    /// graph that `site` (a failed rt_assert's place, when known) points at —; "" when nothing was launched. `seen`:
    /// "fault" or "failure".
    std::string describe_last_launch(const FaultSite* site, const char* seen);

    CudaDevice& device_;
    const Driver& d_;
    CUstream stream_ = nullptr;

    SpinLock last_lock_;  // the last launch, for naming a kernel in an asynchronous fault
    std::shared_ptr<backend::Function> last_fn_;
    std::string released_name_;  // last_fn_'s name after release_kernels_impl let go of it
    std::shared_ptr<const GraphKernels> last_graph_;  // the last launch was of a graph with these kernel nodes
    bool last_is_graph_ = false;
    uint64_t last_op_ = 0;
    AsyncErrorSlot* slot_ = nullptr;  // the core stream's, bound once after construction
    std::atomic<int> pending_host_calls_{0};  // user host functions queued and not run yet
    std::atomic<bool> launched_{false};       // a kernel was launched on the stream (rt_assert records may be its)

    std::mutex marks_mutex_;
    std::deque<std::pair<uint64_t, CUevent>> marks_;  // recorded, not yet seen complete, in order
    std::vector<CUevent> spare_marks_;
    uint64_t next_position_ = 0;
    std::atomic<uint64_t> reached_{0};
    std::atomic<bool> dirty_{false};
    std::atomic<uint64_t> queued_{0};  // operations queued (enqueued()), for queued_impl
};

class CudaDevice final : public backend::Device {
public:
    CudaDevice(const Driver& d, int ordinal);
    ~CudaDevice() override;

    const backend::DeviceInfo& info() const override { return info_; }
    void* allocate_impl(size_t bytes) override;
    void free_impl(void* ptr, size_t bytes) override;
    void* allocate_host_impl(size_t bytes) override;
    void free_host_impl(void* ptr, size_t bytes) override;
    void mem_info_impl(size_t* free_bytes, size_t* total_bytes) override;
    void* reserve_impl(size_t bytes) override;
    bool commit_impl(void* ptr, size_t bytes) override;
    void decommit_impl(void* ptr, size_t bytes) override;
    void unreserve_impl(void* ptr, size_t bytes) override;
    std::unique_ptr<backend::Queue> create_queue_impl(unsigned flags, int priority) override;
    void* allocate_managed_impl(size_t bytes) override;
    bool can_access_peer_impl(const backend::Device& peer) const override;
    void enable_peer_access_impl(backend::Device& peer) override;
    CUdevice cu_device() const { return dev_; }
    kernels::Target& kernel_target() override { return *target_; }
    kernels::ModuleCache& kernel_modules() override { return modules_; }
    std::unique_ptr<backend::Event> create_event_impl(bool timing, bool blocking_sync) override;
    /// A CudaGraph (native CUDA graph); null — the core replays the program — when the driver lacks the graph API.
    std::shared_ptr<backend::GraphExecutable> compile_graph_impl(
        const std::shared_ptr<const graph::Program>& program) override;

    const Driver& driver() const { return d_; }
    CUcontext context() const { return ctx_; }
    /// NCCL (cuda_nccl.cpp), opened on first use; NOT_SUPPORTED naming libnccl.so.2 and its PyPI package without it.
    backend::NativeCollectives* collectives_impl() override;
    /// The CUdevice ordinal (what NCCL's device lists name).
    int ordinal() const { return ordinal_; }
    /// "sm_90": the NVRTC target for this device's compute capability.
    const std::string& arch() const { return arch_; }
    /// Makes the device's context current; throws DEVICE_LOST if the device was lost to a sticky fault, and
    /// NOT_PERMITTED on the driver's callback thread (a host function), where CUDA forbids every call.
    void enter() const {
        if (in_driver_thread()) refuse_in_callback();
        if (lost_.load(std::memory_order_acquire)) throw_lost(RT_ERROR_DEVICE_LOST);
        make_current(d_, ctx_);
    }
    /// Makes the context current without the lost check (teardown, frees); NOT_PERMITTED on the callback thread.
    void enter_for_release() const {
        if (in_driver_thread()) refuse_in_callback();
        enter_quietly();
    }
    /// enter_for_release for destructors: never throws (the core releases nothing on a callback thread).
    void enter_quietly() const noexcept { make_current_quietly(d_, ctx_); }
    /// Whether a sticky fault was seen: nothing queued on the device completes any more.
    bool lost() const { return lost_.load(std::memory_order_acquire); }
    /// The checked driver call of a device: throws for `r` != CUDA_SUCCESS (throw_driver_error), and first marks
    /// the device lost when `r` is sticky — any call may be the first to see a context's fault.
    void check(CUresult r, const char* what) const {
        if (r != CUDA_SUCCESS) fail_call(r, what);
    }
    /// Records that the context hit a sticky error: every later operation on the device fails with `why`.
    void mark_lost(const std::string& why) const noexcept;
    /// A failed rt_assert's record, when a kernel left one (a host read, no driver call): "rt_assert(expr) failed at
    /// file:line in block (..) thread (..)" in `what`, the block and thread in `site` (if given). `take`: the record
    /// is cleared for the next failure (one caller gets it); else it stays. False when there is none. Thread-safe.
    bool read_assert(std::string* what, bool take, FaultSite* site = nullptr);
    /// The device's current TraceAnchor, taken now when there is none or it is older than kAnchorLifetimeNs (a few
    /// microseconds: an event recorded and synchronized on the device's own stream, idle). Throws on driver failures.
    std::shared_ptr<const TraceAnchor> trace_anchor();
    /// How long an anchor serves: cuEventElapsedTime is a float of milliseconds (24 bits: 60 ns steps after 1 s), and
    /// the GPU's clock drifts from the host's by parts per million.
    static constexpr int64_t kAnchorLifetimeNs = 1000000000;
    /// Host work handed to the driver: kept until it ran (forget_host_work frees it) or the context is released.
    HostWork* track_host_work(std::unique_ptr<HostWork> work);
    void forget_host_work(HostWork* work) noexcept;
    /// The host nodes of a graph with launches in flight, kept until their last host node ran (untrack, from that
    /// node: returns the reference, for the caller to drop outside its locks) or the context is released.
    void track_graph_host_nodes(std::shared_ptr<GraphHostNodes> nodes);
    std::shared_ptr<GraphHostNodes> untrack_graph_host_nodes(GraphHostNodes* nodes) noexcept;

private:
    /// `code`: LAUNCH_FAILED for the call that found the fault, DEVICE_LOST for every later one.
    [[noreturn]] void throw_lost(rtError_t code) const;
    [[noreturn]] void refuse_in_callback() const;
    [[noreturn]] void fail_call(CUresult r, const char* what) const;

    const Driver& d_;
    int ordinal_ = 0;
    CUdevice dev_ = 0;
    CUcontext ctx_ = nullptr;
    backend::DeviceInfo info_;
    std::string arch_;
    mutable std::atomic<bool> lost_{false};
    mutable std::mutex lost_mutex_;
    mutable std::string lost_why_;

    std::mutex anchor_mutex_;  // anchor_stream_, anchor_
    CUstream anchor_stream_ = nullptr;
    std::shared_ptr<const TraceAnchor> anchor_;

    SpinLock host_work_lock_;
    std::unordered_set<HostWork*> host_work_;  // queued with cuLaunchHostFunc, not yet run
    std::unordered_map<GraphHostNodes*, std::shared_ptr<GraphHostNodes>> graph_host_nodes_;  // launches in flight

    RtCudaFaultRecord* fault_record_ = nullptr;  // rt_assert's record, pinned and mapped; null: kernels trap instead
    CUdeviceptr fault_record_device_ = 0;        // its device address, which module loading sets in each module
    std::mutex fault_mutex_;                     // one reader of the record at a time (it is cleared under it)

    std::unique_ptr<CudaTarget> target_;  // this device's architecture and context
    kernels::ModuleCache modules_;        // source modules loaded into this device's context

    /// Unmaps chunks whose committed bytes drop to zero; vmm_mutex_ held.
    void release_range(uintptr_t begin, size_t bytes) noexcept;

    size_t granularity_ = 0;  // 0: no virtual memory management (the pool's reserve hook declines)
    struct Chunk {
        CUmemGenericAllocationHandle handle;
        size_t committed;  // bytes of committed pool blocks inside the chunk
    };
    std::mutex vmm_mutex_;
    std::map<uintptr_t, Chunk> chunks_;  // mapped chunks of pool reservations, by address
};

}  // namespace rt::cuda

/// CU_CHECK for a call on a device's context: a sticky result marks `dev` (a CudaDevice) lost before it throws.
#define CU_DEVICE_CHECK(dev, call) (dev).check((dev).driver().call, #call)
