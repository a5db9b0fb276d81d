// The one interface a backend implements. The core validates, records and reports; backends only execute.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace rt {

class AsyncErrorSlot;
namespace kernels {
class Target;
class ModuleCache;
}  // namespace kernels
namespace comm {
struct Call;
}  // namespace comm
namespace graph {
struct Program;
}  // namespace graph

namespace backend {

/// Direction of a copy, after the core resolved RT_MEMCPY_DEFAULT and checked it against the registry.
enum class CopyKind : uint8_t { host_to_host, host_to_device, device_to_host, device_to_device };

/// A host function as queued by the core: the backend calls run_host_call(call) when it is due, exactly
/// once, on a runtime thread — never on a host thread inside a synchronize (the function may take locks
/// that thread holds). The core's trampoline skips it while `slot` holds a failure, runs it in queue
/// context, catches failures and stores them in `slot`.
struct HostCall {
    rtHostFn_t fn;
    void* user_data;
    AsyncErrorSlot* slot;  ///< owned by the core stream; outlives every queued operation of it. Null: internal
                           ///< (runtime bookkeeping such as notify_at_impl's default): never skipped
    uint64_t op_index;     ///< the stream's operation number, for the error message
    const char* graph_node = nullptr;  ///< in a graph launch: the node's label ("node 3 (host function)"), which
                                       ///< lives as long as the launch; null otherwise
};
/// Defined by the core: runs the user's function, captures a failure. Never throws.
void run_host_call(const HostCall& call) noexcept;
/// Defined by the core: how failure messages name an operation of a stream: "operation #12 on the stream", or for a
/// node of a graph launch (`graph_node`: its label, "node 3 (kernel 'scale')") "node 3 of the graph launched as
/// operation #12 on the stream". Throws only std::bad_alloc.
std::string describe_operation(uint64_t op_index, const char* graph_node);
/// Defined by the core: a queue reached a position armed by notify_at_impl. Any thread; never blocks.
void notify_timeline() noexcept;
/// Defined by the core: runs `action` once every stream has completed the work queued before the call (a backend
/// releasing what queued work may still use, e.g. a module's code): at once, in the caller, when none is queued or
/// no runtime is running (teardown, after all work); else on the core timeline's thread (queue context: `action`
/// must not wait). Any thread; never blocks; do not call it holding a lock `action` takes. Returns false, running
/// nothing, when it cannot defer (out of memory): the caller leaks rather than releases early.
bool defer_after_queued_work(std::function<void()> action) noexcept;

/// A kernel of a loaded module. The core validates launches against it; a Function keeps its module's code loaded
/// (a queue keeps the functions of its queued launches alive; the code goes when the last reference does).
class Function {
public:
    virtual ~Function() = default;
    virtual const std::string& name() const = 0;
    /// Number of parameters, or -1 when the backend cannot know (then launches are not arity-checked).
    virtual int num_args() const = 0;
    /// Size in bytes of each parameter (num_args() entries; empty when unknown).
    virtual const std::vector<size_t>& arg_sizes() const = 0;
    /// (work-groups) True if the kernel's items meet at barriers (rt_items blocks or rt_barrier, kernel.h): it is
    /// launched over whole work-groups only. False when unknown (a foreign module).
    virtual bool uses_barriers() const { return false; }
    /// (work-groups) Bytes of the kernel's own local arrays (RT_LOCAL, __shared__), dynamic shared_bytes not
    /// counted; 0 when unknown.
    virtual size_t static_local_bytes() const { return 0; }
};

/// A loaded module: a set of kernels compiled for one device.
class Module {
public:
    virtual ~Module() = default;
    /// The kernel of that name, or nullptr. Repeated calls may return the same object.
    virtual std::shared_ptr<Function> get_function_impl(const std::string& name) = 0;
    virtual std::vector<std::string> kernel_names() const = 0;

    /// A module-scope variable (RT_GLOBAL): its device address (for the backend's copies and kernels) and size.
    struct GlobalSymbol {
        void* address = nullptr;
        size_t bytes = 0;
    };
    /// The module's global `name`, if it has one; names starting with rt_ (the runtime's own) are never found.
    /// The memory lives as long as this module (and its functions).
    virtual bool find_global(const std::string& name, GlobalSymbol& out) {
        (void)name;
        (void)out;
        return false;
    }
    /// The names of the module's globals, for messages (empty where the module cannot tell, e.g. a foreign cubin).
    virtual std::vector<std::string> global_names() const { return {}; }
};

/// Shape of a launch, validated by the core against DeviceInfo limits.
struct LaunchShape {
    unsigned grid[3];
    unsigned block[3];
    size_t shared_bytes;
    /// Work-items per dimension, validated: (grid-1)*block < global <= grid*block (rtLaunchKernel:
    /// grid*block). Every backend runs exactly these: never an item past it.
    unsigned long long global[3];
};

/// Where a launch reports a fault (rt_assert, trap), and how the failed operation is named.
struct LaunchReport {
    AsyncErrorSlot* slot;  ///< owned by the core stream; outlives every queued operation of it
    uint64_t op_index;
    const char* graph_node = nullptr;  ///< in a graph launch: the node's label, alive as long as the launch; else null
};

/// A graph program (graph/program.hpp) lowered for one device's queues, e.g. the cpu device's command array
/// replayed with dependency counters, or a native CUDA graph. Holds what it needs of the program alive.
class GraphExecutable {
public:
    virtual ~GraphExecutable() = default;
    /// Command `index` of the program it was made from changed its operands (an update, a relocation): take them.
    /// Called only while no queued launch holds this executable (a queue that keeps it until its launches ran makes
    /// the core lower a new one instead); a backend whose queues keep nothing of it — cuda: the driver keeps what a
    /// launch in flight runs — gets the change while launches are queued, and must leave those as they were launched.
    virtual void refresh_impl(size_t index) = 0;
};

/// What a device is, reported once at start-up (ggml's dev_caps: a struct, not probing).
struct DeviceInfo {
    std::string name;
    std::string backend;
    size_t total_memory = 0;
    int compute_units = 0;
    int backend_ordinal = 0;
    int max_threads_per_block = 1024;
    int max_grid_size[3] = {2147483647, 65535, 65535};
    int max_block_size[3] = {1024, 1024, 64};
    int compute_capability_major = 0;
    int compute_capability_minor = 0;
    size_t max_shared_bytes = 48 * 1024;  ///< local memory of one work-group (RT_LOCAL + shared_bytes)
    bool host_addressable = false;  ///< device pointers can be dereferenced by the host
    /// allocate_host_impl's memory is page-locked for every device of this backend and plain host memory to every
    /// other backend: rtMallocHost takes it from the first such device whichever device is current (cuda's PORTABLE
    /// pinned memory; a cpu device's copies gain nothing from pinning).
    bool portable_host_memory = false;
    // Reported by rtDeviceGetAttribute / rtDeviceProp (issue 20); 0 where the backend cannot tell.
    size_t max_shared_bytes_optin = 0;  ///< the most local memory a group can be given (0: max_shared_bytes)
    size_t shared_bytes_per_unit = 0;   ///< local memory of one compute unit (0: max_shared_bytes)
    unsigned char uuid[16] = {};        ///< stable identity of the device across runs and processes
    int subgroup_size = 1;              ///< items in lockstep (warp)
    int clock_rate_khz = 0;
    int memory_clock_rate_khz = 0;
    int memory_bus_width = 0;           ///< bits
    int l2_cache_bytes = 0;
    int total_constant_kib = 64;
    bool concurrent_kernels = true;
    bool managed_memory = false;        ///< rtMallocManaged: allocate_managed_impl gives memory
    /// IPC handles (rtIpc*): the ipc_*_impl hooks export and open memory, and the queues take joint steps (what an
    /// interprocess event's waits are made of).
    bool interprocess = false;
    bool concurrent_managed_access = false;
    /// Stream priorities the device's queues honour: create_queue_impl takes [greatest, 0] (numerically lower is
    /// more urgent); both 0 when it has none.
    int greatest_stream_priority = 0;
};

/// A recorded point in a queue. Created by Device::create_event_impl; recorded by Queue::record_impl.
class Event {
public:
    virtual ~Event() = default;
    /// True once the work captured by the most recent record has completed. Thread-safe.
    virtual bool query_impl() = 0;
    /// Blocks the calling thread until query_impl() would return true. Thread-safe.
    virtual void synchronize_impl() = 0;
    /// Milliseconds from this event's completion to `end`'s; both completed and timed (checked by the core).
    virtual float elapsed_ms_impl(Event& end) = 0;
    /// (optional) The failure the latest record carries — its stream had a failure pending when the record ran —
    /// once it completed: the code, and the stream and operation in `message`. Defaults to RT_SUCCESS.
    virtual rtError_t failure_impl(std::string* message) { (void)message; return RT_SUCCESS; }
};

}  // namespace backend

namespace trace {
/// An operation queued on a stream while a trace is written, handed by the core to the *_impl call that queues it
/// (empty, track 0, when no trace is written): the backend stamps it where the work runs (trace::finish), and the
/// writer joins the stamps to the description written where the operation was queued by (track, op). A backend
/// given a key stamps it exactly once (an operation it would elide is queued instead, so that its span lies in
/// stream order).
struct Key {
    uint32_t track = 0;
    uint32_t node = 0;       ///< a graph node queued as an operation of its own (a core replay): its index + 1
    uint64_t op = 0;
    int64_t enqueue_ns = 0;  ///< for records the backend derives from it (graph nodes' queued_us)
    explicit operator bool() const noexcept { return track != 0; }
};

}  // namespace trace

namespace backend {

/// Whether more threads than cores compete on this host (set by the collectives across processes when more ranks than
/// cores share it). Backends whose host threads spin-wait before parking (executors, synchronize) then spin only
/// briefly: a spinning thread holds the core that the peer it waits for needs. Any thread; a hint, never required.
void set_host_oversubscribed(bool yes) noexcept;
bool host_oversubscribed() noexcept;

/// Threads of a device's backend that a queued step may spread its work over.
class Workers {
public:
    /// Runs fn(begin, end) over [0, n) in pieces of about `grain` on the backend's threads, the caller included;
    /// returns when every piece has run. fn must not throw.
    virtual void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) = 0;
    /// Copies `bytes` between non-overlapping ranges as the backend moves large buffers (`large`: the output would
    /// not fit the cache, e.g. cpu's streaming stores), visible to other threads once the parallel_for piece that
    /// made the call has ended. Called inside parallel_for's pieces. Defaults to memcpy.
    virtual void copy(void* dst, const void* src, size_t bytes, bool large) {
        (void)large;
        std::memcpy(dst, src, bytes);
    }

protected:
    ~Workers() = default;
};

/// A step several queues reach independently and that completes for them together (a collective's rendezvous,
/// src/comm). The queue does not skip it behind a pending failure: the step looks at the participant's slot itself.
class JointStep {
public:
    virtual ~JointStep() = default;
    /// Called once per queue part (joint_impl), by the thread running that queue when the part is its front task,
    /// never under a queue lock. The queue then runs nothing more until `resume` has been called — exactly once, from
    /// any thread, perhaps before arrive_impl returns; a step that must wait for other parts keeps `resume` and
    /// returns (the queue parks without occupying a thread). `workers`: valid during the call only. Never throws.
    virtual void arrive_impl(int participant, Workers& workers, std::function<void()> resume) noexcept = 0;
};

/// A native in-order queue. Every *_impl that enqueues returns before the work is done, may be called
/// from several host threads at once, and keeps submission order. Operands were validated by the core. `traced`:
/// the operation's trace key (trace::Key above), empty unless a trace is written.
class Queue {
public:
    /// Destroyed only when idle (the core synchronizes first).
    virtual ~Queue() = default;
    virtual void copy_impl(void* dst, const void* src, size_t bytes, CopyKind kind, const trace::Key& traced) = 0;
    virtual void fill_impl(void* dst, uint8_t value, size_t bytes, const trace::Key& traced) = 0;
    virtual void host_call_impl(const HostCall& call, const trace::Key& traced) = 0;
    /// Capture the work queued so far into `event` (replacing its previous record).
    virtual void record_impl(Event& event, const trace::Key& traced) = 0;
    /// Work queued after this waits for `event`'s current record; never blocks the host.
    virtual void wait_impl(Event& event, const trace::Key& traced) = 0;
    /// (optional) Work queued after this waits for the work queued so far on `native`, a stream of the backend's
    /// own API on this queue's device (cuda: a CUstream, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD included);
    /// never blocks the host. Defaults to NOT_SUPPORTED (a backend without native streams).
    virtual void wait_native_impl(void* native);
    /// Launch `function` with CUDA's argument convention (args[i] points at argument i; the values are
    /// copied before returning). Arity and shape were checked by the core. The caller only borrows `function`:
    /// the queue keeps it (and so its module's code) alive until the launch has run.
    virtual void launch_impl(const std::shared_ptr<Function>& function, const LaunchShape& shape, void* const* args,
                             const LaunchReport& report, const trace::Key& traced) = 0;
    /// Blocks until all work queued before the call has completed.
    virtual void synchronize_impl() = 0;
    /// True if all queued work has completed.
    virtual bool query_impl() = 0;
    /// A token for "everything queued so far" (cpu: a sequence number), for stream-ordered memory reuse.
    virtual uint64_t position_impl() = 0;
    /// True once all work up to `position` has completed. Thread-safe, never blocks.
    virtual bool reached_impl(uint64_t position) = 0;
    /// (optional) A count that has grown once an operation is in the queue (read after the *_impl call that queued
    /// it returned, it has changed), for the legacy default stream's ordering, which reads it on every operation of
    /// a blocking stream: cheap and never blocking. Defaults to position_impl().
    virtual uint64_t queued_impl() { return position_impl(); }
    /// (optional) Calls notify_timeline() once, from any thread, when all work up to `position` (a value of
    /// position_impl) has completed — at once if it has. Defaults to an internal host call queued now, which
    /// notifies once everything queued so far has completed (later, never earlier).
    virtual void notify_at_impl(uint64_t position) {
        (void)position;
        host_call_impl(HostCall{[](void*) { notify_timeline(); }, nullptr, nullptr, 0}, trace::Key{});
    }
    /// (optional) Where failures found by synchronize_impl/query_impl go (the core stream's slot; valid until the
    /// queue's destructor runs). Called once, before any other call. A backend that runs operations itself skips
    /// them while the slot has a failure (AsyncErrorSlot::failed, count_skipped). Defaults to ignoring it.
    virtual void bind_error_slot_impl(AsyncErrorSlot* slot) { (void)slot; }
    /// (optional) Launches a graph lowered by this queue's device (Device::compile_graph_impl): one operation of the
    /// queue, ordered as any other, which completes once every command has. A failed command is reported to
    /// report.slot naming its label, and its successors (and the queue's later work) are skipped as the queue skips
    /// work behind a failure (cuda: host nodes; kernels and copies the GPU has run anyway, as on its streams). The
    /// queue keeps what the launch runs alive until it has run: `graph` itself, or only what the launch reads where
    /// the native API keeps a launch apart from later changes and from the executable's destruction (cuda). Only
    /// called for executables of this backend; defaults to NOT_SUPPORTED (a backend whose compile_graph_impl returns
    /// null is replayed by the core instead).
    virtual void launch_graph_impl(const std::shared_ptr<GraphExecutable>& graph, const LaunchReport& report,
                                   const trace::Key& traced);
    /// (optional) Queues part `participant` of `step`: when it is reached the queue calls step->arrive_impl and parks
    /// until resumed; work queued after it waits. The queue keeps `step` alive until the part has completed. Defaults
    /// to NOT_SUPPORTED (a backend whose queues cannot park: its collectives need a native library).
    virtual void joint_impl(const std::shared_ptr<JointStep>& step, int participant, const trace::Key& traced);
    /// (optional) When everything queued so far has completed and nothing runs, holds the queue for the calling
    /// thread and returns true: other threads' operations on it wait (briefly) until release_impl(), so the caller
    /// may carry out an operation itself, in stream order, before it returns (a small collective whose operands are
    /// ready: comm.cpp). Defaults to false (never held).
    virtual bool hold_idle_impl() { return false; }
    /// Ends hold_idle_impl()'s hold, first queueing part 0 of `pending` (null: none) — the operation's remainder,
    /// ahead of anything queued after the hold. Only after a hold_idle_impl() that returned true, on the same thread;
    /// never throws.
    virtual void release_impl(const std::shared_ptr<JointStep>& pending) { (void)pending; }
    /// (optional) Lets go of kernels held past their launches (a queue may keep its latest launched function to
    /// spare a reference count per launch), so an unloaded module's code goes once the launches queued so far have
    /// run. Called by the core after a module unload, from any thread; never blocks. Defaults to nothing.
    virtual void release_kernels_impl() {}
    /// (optional) Copies `height` rows of `width` bytes, `dpitch`/`spitch` apart (validated by the core), as one
    /// operation. Defaults to one copy_impl per row (the same order, so the same result).
    virtual void copy_2d_impl(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              CopyKind kind, const trace::Key& traced);
    /// (optional) Work queued after this finds [ptr, ptr+bytes) of managed memory on `device` (the backend's device
    /// ordinal; -1 the host). Defaults to nothing: memory the host and the device share needs no move.
    virtual void prefetch_impl(const void* ptr, size_t bytes, int device, const trace::Key& traced) {
        (void)ptr, (void)bytes, (void)device, (void)traced;
    }
};

// ---- collectives through a vendor library (NCCL on cuda; docs/comm.md). Devices whose memory the host addresses
// need none: the core's in-process collectives run on them.

class Device;

/// One rank of a communicator of the library.
class NativeComm {
public:
    virtual ~NativeComm() = default;
    /// Queues `call` (checked by the core) on `queue`, a queue of the rank's device, as the library call of the same
    /// shape. Throws naming the library call when it refuses. Called by one thread at a time per communicator.
    virtual void collective_impl(const comm::Call& call, Queue& queue) = 0;
    /// Aborts the communicator (returns promptly whatever the peers do). Never throws.
    virtual void abort_impl() noexcept = 0;
    /// The library's asynchronous error of this communicator (RT_SUCCESS: none), described in *why.
    virtual rtError_t async_error_impl(std::string* why) = 0;
    /// The library's split of this communicator (rtCommSplit's color and key, RT_COMM_SPLIT_NOCOLOR included): a
    /// collective over its ranks that blocks until every rank has called it, except between group_start_impl and
    /// group_end_impl, where the new communicator is ready once group_end_impl returns. Throws naming the library
    /// call when the library refuses or lacks it.
    virtual std::unique_ptr<NativeComm> split_impl(int color, int key) = 0;
    /// Once ready: this rank and the rank count; false when the split gave this rank no communicator (no color).
    virtual bool shape_impl(int* rank, int* count) = 0;
};

/// A backend's collectives library, shared by its devices.
class NativeCollectives {
public:
    virtual ~NativeCollectives() = default;
    virtual const char* name() const = 0;  ///< "NCCL"
    /// Rank i on devices[i] (devices of this backend), all in this process.
    virtual std::vector<std::unique_ptr<NativeComm>> init_all_impl(const std::vector<Device*>& devices) = 0;
    /// The library's id of a new communicator, `bytes` bytes.
    virtual void unique_id_impl(void* id, size_t bytes) = 0;
    /// Joins the communicator of `id` (from unique_id_impl, `bytes` bytes) as `rank` on `device`; blocks until every
    /// rank has joined, as the library does.
    virtual std::unique_ptr<NativeComm> init_rank_impl(int nranks, const void* id, size_t bytes, int rank,
                                                       Device& device) = 0;
    /// Brackets calls that one thread makes for several ranks, or the sends and receives of an exchange.
    virtual void group_start_impl() = 0;
    virtual void group_end_impl() = 0;
};

/// One device of a backend.
class Device {
public:
    virtual ~Device() = default;
    virtual const DeviceInfo& info() const = 0;
    /// Device memory, at least 256-byte aligned; nullptr when the device cannot hold `bytes` more.
    virtual void* allocate_impl(size_t bytes) = 0;
    virtual void free_impl(void* ptr, size_t bytes) = 0;
    /// Page-locked host memory usable by this device's copies; nullptr when out of memory.
    virtual void* allocate_host_impl(size_t bytes) = 0;
    virtual void free_host_impl(void* ptr, size_t bytes) = 0;
    virtual void mem_info_impl(size_t* free_bytes, size_t* total_bytes) = 0;
    /// (optional) Reserves address space for a memory pool without committing memory; nullptr if the
    /// device cannot (the default): the pool then asks allocate_impl for its whole size up front.
    virtual void* reserve_impl(size_t bytes) { (void)bytes; return nullptr; }
    /// (optional) Commits [ptr, ptr+bytes) of a reservation (block-aligned); false if the device is out
    /// of memory (any other failure throws). Counts against the device's capacity.
    virtual bool commit_impl(void* ptr, size_t bytes) { (void)ptr; (void)bytes; return false; }
    /// (optional) Returns committed memory of a reservation to the system; the range stays reserved.
    virtual void decommit_impl(void* ptr, size_t bytes) { (void)ptr; (void)bytes; }
    /// (optional) Releases a whole reservation (decommitted first by the caller).
    virtual void unreserve_impl(void* ptr, size_t bytes) { (void)ptr; (void)bytes; }
    /// `priority`: in [info().greatest_stream_priority, 0] (checked by the core); numerically lower runs first when
    /// several queues have work ready.
    virtual std::unique_ptr<Queue> create_queue_impl(unsigned flags, int priority) = 0;
    /// (optional) Memory the host and this device address alike (rtMallocManaged), at least 256-byte aligned;
    /// nullptr when out of memory. Called only when info().managed_memory. Defaults to allocate_impl (a device whose
    /// memory the host addresses anyway); freed with free_impl.
    virtual void* allocate_managed_impl(size_t bytes) { return allocate_impl(bytes); }
    /// (optional) Whether this device's kernels can address memory of `peer` (rtDeviceCanAccessPeer); `peer` is
    /// another device of the same backend. Defaults to info().host_addressable on both (host memory is shared).
    virtual bool can_access_peer_impl(const Device& peer) const {
        return info().host_addressable && peer.info().host_addressable;
    }
    /// (optional) Maps `peer`'s memory for this device's kernels (rtDeviceEnablePeerAccess). Defaults to nothing
    /// (memory already shared).
    virtual void enable_peer_access_impl(Device& peer) { (void)peer; }
    /// How kernels are compiled for and loaded on this device (src/kernels/target.hpp). Lives as long as the device.
    virtual kernels::Target& kernel_target() = 0;
    /// The modules loaded from source for kernel_target(), shared by the devices that share that target's code.
    virtual kernels::ModuleCache& kernel_modules() = 0;
    /// (optional) Lowers an instantiated graph for this device's queues. Null (the default): the core replays the
    /// program's commands one by one, in topological order, through the queue's *_impl calls.
    virtual std::shared_ptr<GraphExecutable> compile_graph_impl(const std::shared_ptr<const graph::Program>& program) {
        (void)program;
        return nullptr;
    }
    /// `timing`: the event records timestamps. `blocking_sync`: synchronize parks without spinning.
    virtual std::unique_ptr<Event> create_event_impl(bool timing, bool blocking_sync) = 0;
    /// (optional) rtIpcGetMemHandle: writes into `payload` (ipc::kPayloadBytes, zeroed) what another process needs to
    /// map the allocation [base, base+bytes) that allocate_impl made, or throws saying why it cannot be shared and what
    /// to do instead. Thread-safe. Defaults to NOT_SUPPORTED.
    virtual void ipc_export_impl(void* base, size_t bytes, unsigned char* payload);
    /// (optional) rtIpcOpenMemHandle: maps what process `pid` exported (its ipc_export_impl's payload); returns the
    /// allocation's address in this process and its size in *bytes; throws naming what is wrong (the exporter
    /// exited, the memory was freed). Defaults to NOT_SUPPORTED.
    virtual void* ipc_open_impl(const unsigned char* payload, int pid, size_t* bytes);
    /// (optional) Unmaps what ipc_open_impl returned (no queued work uses it any more). Defaults to nothing.
    virtual void ipc_close_impl(void* ptr, size_t bytes) { (void)ptr, (void)bytes; }
    /// (optional) The collectives library of this device; throws NOT_SUPPORTED naming what is missing (the library
    /// file, the package that has it) when the backend has one that cannot be used. Defaults to null: the core's
    /// in-process collectives, for devices whose memory the host addresses.
    virtual NativeCollectives* collectives_impl() { return nullptr; }
};

/// A family of devices (cpu, cuda). Devices are enumerated once, at runtime initialisation.
class Backend {
public:
    virtual ~Backend() = default;
    virtual const char* name() const = 0;
    virtual int device_count() const = 0;
    virtual std::unique_ptr<Device> create_device(int ordinal) = 0;
    /// (optional) Why device_count() is 0, or why some devices were left out, in words ("libcuda.so.1 cannot be
    /// loaded ...", "cuda:1 cannot be used ..."); defaults to "".
    virtual std::string unavailable_reason() const { return {}; }
};

/// A backend's own rtInit options, parsed and validated by that backend (BackendEntry::parse in registry.hpp).
/// The core keeps them opaque and hands them back to the backend's factory; it knows no backend's fields.
class Options {
public:
    virtual ~Options() = default;
    /// True if `other` (options of the same backend) configure the same thing: rtInit refuses options that
    /// differ from the live runtime's.
    virtual bool same_as(const Options& other) const = 0;
};

}  // namespace backend
}  // namespace rt
