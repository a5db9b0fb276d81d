// fake_cuda.cpp — TEST DOUBLE of the CUDA driver (libcuda.so.1) for CI machines without a GPU. NOT A DRIVER.
//
// Built as libfake_cuda.so and loaded by the runtime through RUNTIME_CUDA_DRIVER_LIB, it exports, under the symbol
// names cuda.h maps them to (cuMemAlloc → cuMemAlloc_v2, ...), every function of rt::cuda::Driver
// (src/backends/cuda/cuda_driver.hpp), so the cuda backend's wiring runs for real: devices, contexts, memory,
// streams, events, host functions, copies, fills, modules, launches, error names, sticky faults.
//
// What it models (and what it does not):
//  - FAKE_CUDA_DEVICES devices (default 1), "Fake CUDA Device (test double)", compute capability 9.0,
//    FAKE_CUDA_MEMORY bytes each (default 1 GiB; suffixes K, M, G). Attributes the backend queries; any other
//    attribute is CUDA_ERROR_INVALID_VALUE (so the backend's fallbacks are exercised).
//  - Primary contexts are tokens with a reference count; the current context is per thread (calls that need one
//    fail with CUDA_ERROR_INVALID_CONTEXT without it). Releasing the last reference destroys the context: its
//    memory is freed and a sticky fault is cleared, as the real driver does.
//  - Device memory is host memory (256-byte aligned), so copies are memcpy; allocations are tracked: unknown
//    pointers are CUDA_ERROR_INVALID_VALUE, copies and fills running past an allocation are refused at the call,
//    and memory freed while a queued copy still targets it makes that copy fault (CUDA_ERROR_ILLEGAL_ADDRESS)
//    with a line on stderr — a use-after-free a GPU might silently survive. Capacity is enforced
//    (CUDA_ERROR_OUT_OF_MEMORY). Virtual memory management (reserve/create/map/set access) is mmap + mprotect
//    with a 2 MiB granularity.
//  - Copies with pageable host memory (not from cuMemHostAlloc) behave as the driver's "API synchronization
//    behavior" page allows at its strictest: a copy into pageable memory (D2H) returns only once it has completed,
//    host-to-host copies are fully synchronous, and a copy from pageable memory (H2D) reads the source at the call
//    (into a staging buffer) and returns, the transfer running in stream order. Only pinned memory overlaps:
//    tests that queue pageable copies behind blocked work hang or read early here, as they would on a GPU.
//  - Streams are asynchronous FIFO queues, one worker thread each (never the legacy NULL stream: the backend
//    promises not to use it, so the fake refuses it). Events capture (stream, position) and a timestamp taken
//    when the worker reaches them (on the fake GPUs' clock: the host's, plus the device time kernels "took",
//    fake_cuda_set_kernel_time_ns); stream waits block the waiting stream's worker until the event completes.
//  - Host functions (cuLaunchHostFunc) of all streams of a context run one at a time on that context's one
//    callback thread, as the driver runs them ("may be serialized"): a host function that blocks holds up the
//    host functions of every other stream. On that thread every driver call fails with CUDA_ERROR_NOT_PERMITTED
//    (cuda.h: host functions must not call CUDA; the driver "may" say so — the fake always does).
//  - Modules keep the image (cubin/ELF, PTX text, fatbin); functions are the ELF's entry symbols or the PTX
//    `.entry` names. PTX `.param` lists and a cubin's EIATTR_KPARAM_INFO records (.nv.info.<kernel>) give
//    cuFuncGetParamInfo sizes, as drivers 12.4+ do; NOT_SUPPORTED when neither is found. Launches run no code:
//    they are recorded (fake_cuda.h) and complete in stream order.
//  - Modules count the launches of their functions still queued: unloading one then is reported (a GPU would
//    run freed code): fake_cuda_unsafe_unloads, with a line on stderr. fake_cuda_live_modules counts them.
//  - FAKE_CUDA_CUINIT_RESULT=<code>: cuInit returns it, as the toolkit's stub (34) or a compat library that does not
//    fit (803) does; with FAKE_CUDA_CUINIT_RESULT_IN=<folder>, only copies of the fake loaded from that folder do (the
//    driver search tests put one copy where a stub would be and another where the driver is).
//  - fake_cuda_inject_fault(code): the next launch fails on its stream's worker and the context becomes sticky
//    (every later call on it returns the code), as after a kernel's illegal address.
//  - FAKE_CUDA_FAIL_RETAIN=<ordinal>[,<ordinal>...] (read at each call): cuDevicePrimaryCtxRetain of those devices
//    fails with CUDA_ERROR_DEVICE_UNAVAILABLE, as for a GPU in exclusive-process mode that another process holds.
//  - Module globals (cuModuleGetGlobal: PTX `.global` names, a cubin's OBJECT symbols) are zeroed host memory of the
//    symbol's size, device memory to copies and fills. fake_cuda_assert_next_launch makes the next launch write rt_assert's
//    fault record through its module's RT_CUDA_FAULT_RECORD_SYMBOL, as a failing kernel would.
//  - Graphs (cuGraphCreate, cuGraphAdd{Kernel,Memcpy,Memset,Host,Empty}Node, cuGraphInstantiateWithFlags,
//    cuGraphLaunch, cuGraphExec*SetParams, destroys): nodes are checked as the stream calls check their operands
//    (1D copies and fills only), dependencies must be earlier nodes of the same graph; an executable graph is a copy of
//    its graph's nodes, run in their order of addition as one operation of the stream it is launched on. Kernel nodes
//    are launches (recorded, faults injected, rt_assert records written) taken at cuGraphLaunch; cuGraphExec*SetParams
//    changes later launches only (launches queued keep the nodes they were launched with), as does destroying the
//    executable graph. fake_cuda_exec_nodes shows the last instantiated one (fake_cuda.h).
//  - cuMemHostGetDevicePointer returns the host address (unified addressing).
//  - PTX whose `.target sm_XY` is newer than the device (9.0) is refused by the "JIT" with CUDA_ERROR_INVALID_PTX
//    and, through cuModuleLoadDataEx, an error log saying so.
#include <cuda.h>
#include <dlfcn.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../../src/backends/cuda/cuda_fault_record.h"
#include "fake_cuda.h"

namespace {

using Clock = std::chrono::steady_clock;

// The fake GPUs' clock, which event timestamps read: the host's steady clock plus the time kernels "took"
// (fake_cuda_set_kernel_time_ns: each kernel that runs moves it on by that much, without spending host time).
std::atomic<long long> g_kernel_time_ns{0};
std::atomic<long long> g_clock_ahead_ns{0};
Clock::time_point device_now() { return Clock::now() + std::chrono::nanoseconds(g_clock_ahead_ns.load()); }
std::atomic<int> g_event_creates{0};
std::atomic<int> g_elapsed_times{0};  // cuEventElapsedTime calls that returned a time
constexpr size_t kAlign = 256;
constexpr size_t kGranularity = 2u << 20;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kMaxSharedPerBlock = 48 * 1024;

size_t env_size(const char* name, size_t fallback) {
    const char* e = std::getenv(name);
    if (!e || !*e) return fallback;
    char* end = nullptr;
    unsigned long long v = std::strtoull(e, &end, 10);
    if (end && (*end == 'K' || *end == 'k')) v <<= 10;
    if (end && (*end == 'M' || *end == 'm')) v <<= 20;
    if (end && (*end == 'G' || *end == 'g')) v <<= 30;
    return v ? static_cast<size_t>(v) : fallback;
}

}  // namespace

// ---------------------------------------------------------------------------------------------- handle types
// cuda.h declares these as incomplete structs; the fake completes them.

namespace {

/// True on a context's callback thread while it runs a host function: driver calls fail with NOT_PERMITTED.
thread_local bool tl_in_callback = false;

/// The one thread that runs a context's host functions, in the order the streams hand them over.
struct CallbackThread {
    std::mutex m;
    std::condition_variable cv;
    std::deque<std::function<void()>> jobs;
    bool stop = false;
    std::thread thread{[this] { run(); }};

    void run() {
        for (;;) {
            std::function<void()> job;
            {
                std::unique_lock lock(m);
                cv.wait(lock, [&] { return stop || !jobs.empty(); });
                if (jobs.empty()) return;
                job = std::move(jobs.front());
                jobs.pop_front();
            }
            tl_in_callback = true;
            job();
            tl_in_callback = false;
        }
    }
    void push(std::function<void()> job) {
        std::lock_guard lock(m);
        jobs.push_back(std::move(job));
        cv.notify_all();
    }
    ~CallbackThread() {
        {
            std::lock_guard lock(m);
            stop = true;
            cv.notify_all();
        }
        thread.join();
    }
};

}  // namespace

struct CUctx_st {
    int ordinal = 0;
    int refs = 0;  // primary-context retains; 0: destroyed (inactive)
    std::atomic<int> sticky{CUDA_SUCCESS};
    size_t used = 0;  // bytes of cuMemAlloc + cuMemCreate, against the capacity (g_mutex)
    std::unique_ptr<CallbackThread> callbacks;  // started by the first host function (g_mutex)
};

namespace {

/// One queued stream operation. `ok` is false once the context is sticky: the operation must then do nothing
/// visible (a host function is not called — cuLaunchHostFunc's contract) but still signal what waits on it.
using Op = std::function<CUresult(bool ok)>;

/// A recorded point of a stream: completed (with its time) when the stream's worker reaches it.
struct Record {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    Clock::time_point when;
    void complete() {
        std::lock_guard lock(m);
        when = device_now();
        done = true;
        cv.notify_all();
    }
    void wait() {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return done; });
    }
    bool is_done() {
        std::lock_guard lock(m);
        return done;
    }
};

}  // namespace

struct CUstream_st {
    CUctx_st* ctx = nullptr;
    int serial = 0;
    std::mutex m;
    std::condition_variable cv;
    std::deque<Op> queue;
    uint64_t enqueued = 0, completed = 0;
    bool stop = false;
    std::thread worker;

    void run() {
        for (;;) {
            Op op;
            {
                std::unique_lock lock(m);
                cv.wait(lock, [&] { return stop || !queue.empty(); });
                if (queue.empty()) return;  // stop requested and drained
                op = std::move(queue.front());
                queue.pop_front();
            }
            CUresult r = op(ctx->sticky.load() == CUDA_SUCCESS);
            if (r != CUDA_SUCCESS) {
                int expected = CUDA_SUCCESS;
                ctx->sticky.compare_exchange_strong(expected, r);
            }
            std::lock_guard lock(m);
            ++completed;
            cv.notify_all();
        }
    }
    void push(Op op) {
        std::lock_guard lock(m);
        queue.push_back(std::move(op));
        ++enqueued;
        cv.notify_all();
    }
    void drain() {
        std::unique_lock lock(m);
        uint64_t target = enqueued;
        cv.wait(lock, [&] { return completed >= target; });
    }
    bool idle() {
        std::lock_guard lock(m);
        return completed == enqueued;
    }
    void shutdown() {
        {
            std::lock_guard lock(m);
            stop = true;
            cv.notify_all();
        }
        worker.join();
    }
};

struct CUevent_st {
    CUctx_st* ctx = nullptr;
    unsigned flags = 0;
    std::mutex m;
    std::shared_ptr<Record> rec;  // the most recent record; null: never recorded
    std::shared_ptr<Record> current() {
        std::lock_guard lock(m);
        return rec;
    }
};

struct CUfunc_st;
struct CUmod_st {
    CUctx_st* ctx = nullptr;
    std::shared_ptr<std::atomic<int>> queued = std::make_shared<std::atomic<int>>(0);  // launches not run yet
    std::string image;
    bool ptx = false;
    std::vector<std::string> names;  // kernels, in image order
    std::map<std::string, std::unique_ptr<CUfunc_st>> functions;
    std::map<std::string, std::vector<uint64_t>> globals;  // cuModuleGetGlobal's backing, 8-byte aligned (S().m)
};

struct CUfunc_st {
    CUmod_st* module = nullptr;
    std::string name;
    bool params_known = false;
    std::vector<size_t> sizes, offsets;
};

namespace {

/// One node of a graph, and of the executable graphs instantiated from it.
struct GraphNode {
    int kind = FAKE_CUDA_NODE_EMPTY;
    std::vector<int> deps;  // indices of earlier nodes, ascending
    // kernel
    CUfunc_st* fn = nullptr;
    unsigned grid[3]{}, block[3]{}, shared = 0;
    std::vector<std::vector<unsigned char>> params;  // the values, copied when the node was added or set
    // memcpy, memset
    uintptr_t dst = 0, src = 0;
    size_t bytes = 0;                 // memcpy: bytes; memset: elements
    int dst_type = 0, src_type = 0;   // memcpy: the CUmemorytype given
    unsigned value = 0, element = 1;  // memset
    // host
    CUhostFn host = nullptr;
    void* user = nullptr;
};
using GraphNodes = std::vector<GraphNode>;

}  // namespace

struct CUgraph_st;
struct CUgraphNode_st {
    CUgraph_st* graph = nullptr;
    int index = 0;
};
struct CUgraph_st {
    CUctx_st* ctx = nullptr;
    GraphNodes nodes;
    std::vector<std::unique_ptr<CUgraphNode_st>> handles;
};
/// Independent of its graph once instantiated (as in CUDA); launches hold the nodes they were launched with, so a
/// cuGraphExec*SetParams (copy on write) or a destroy leaves them as they were.
struct CUgraphExec_st {
    CUctx_st* ctx = nullptr;
    CUgraph_st* source = nullptr;  // may be destroyed: checked against S().graphs
    std::shared_ptr<const GraphNodes> nodes;
};

namespace {

// ---------------------------------------------------------------------------------------------- global state

struct Alloc {
    size_t bytes;
    CUctx_st* ctx;
};
struct VmHandle {
    size_t bytes;
    CUctx_st* ctx;
};
struct Mapping {
    size_t bytes;
    bool accessible;  // cuMemSetAccess done
};

struct State {
    std::mutex m;  // everything below, and device memory contents while a queued copy/fill runs
    bool initialized = false;
    int device_count = 1;
    size_t capacity = size_t(1) << 30;
    std::vector<std::unique_ptr<CUctx_st>> contexts;  // one primary context per device, never freed
    std::map<uintptr_t, Alloc> allocs;                 // cuMemAlloc, by address
    std::map<uintptr_t, size_t> host_allocs;           // cuMemHostAlloc, by address: bytes
    std::map<uintptr_t, size_t> reservations;          // cuMemAddressReserve
    std::map<unsigned long long, VmHandle> vm_handles; // cuMemCreate
    unsigned long long next_handle = 1;
    std::map<uintptr_t, Mapping> mappings;             // cuMemMap, by address
    std::set<CUstream_st*> streams;
    std::set<CUevent_st*> events;
    std::set<CUmod_st*> modules;
    std::set<CUfunc_st*> functions;
    int next_stream_serial = 1;
    // launches (fake_cuda.h)
    int launch_count = 0;
    FakeCudaLaunch last_launch{};
    int inject_fault = CUDA_SUCCESS;
    int unsafe_unloads = 0;  // cuModuleUnload with launches of the module still queued
    std::map<uintptr_t, size_t> globals;  // module globals' backing, by address (cuMemcpyHtoD targets)
    struct {
        bool armed = false;
        std::string kernel;  // empty: any
        std::string expr, file;
        int line = 0;
        unsigned block[3]{}, thread[3]{};
    } assert_next;           // fake_cuda_assert_next_launch(_at)
    int set_access_calls = 0;
    int fail_next_map = CUDA_SUCCESS;
    int host_func_calls = 0;
    // graphs (fake_cuda.h)
    std::set<CUgraph_st*> graphs;
    std::set<CUgraphNode_st*> graph_nodes;
    std::set<CUgraphExec_st*> execs;
    int graph_launch_count = 0;
    int instantiate_count = 0;
    bool instantiated = false;
    CUgraphExec_st* last_exec = nullptr;                 // the last instantiated, while it lives
    std::shared_ptr<const GraphNodes> last_exec_nodes;  // its nodes once destroyed
};

State& S() {
    static State* s = new State;  // never destroyed: workers may run during static destruction
    return *s;
}

thread_local CUctx_st* tl_current = nullptr;

/// The calling thread's context, usable: INVALID_CONTEXT without one, CONTEXT_IS_DESTROYED after its last
/// release, the sticky fault when it has one (`allow_sticky`: teardown calls that still work).
CUresult current(CUctx_st** out, bool allow_sticky = false) {
    if (tl_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    CUctx_st* c = tl_current;
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    {
        std::lock_guard lock(S().m);
        if (c->refs == 0) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    }
    if (!allow_sticky && c->sticky.load() != CUDA_SUCCESS) return static_cast<CUresult>(c->sticky.load());
    *out = c;
    return CUDA_SUCCESS;
}

/// How [p, p+n) lies in device memory (S().m held): 1 inside one allocation, module global or accessible mapped
/// chunks, 0 not device memory at all, -1 starting in device memory but running past it.
int device_range(uintptr_t p, size_t n) {
    State& s = S();
    auto it = s.allocs.upper_bound(p);
    if (it != s.allocs.begin()) {
        --it;
        if (p < it->first + it->second.bytes) return p + n <= it->first + it->second.bytes ? 1 : -1;
    }
    auto g = s.globals.upper_bound(p);  // a module global is device memory: copies and fills reach it
    if (g != s.globals.begin()) {
        --g;
        if (p < g->first + g->second) return p + n <= g->first + g->second ? 1 : -1;
    }
    auto m = s.mappings.upper_bound(p);
    if (m == s.mappings.begin()) return 0;
    --m;
    if (p >= m->first + m->second.bytes) return 0;
    // Adjacent chunks mapped into one reservation form one range (pool blocks span chunks).
    uintptr_t end = p + n;
    for (;;) {
        if (!m->second.accessible) return -1;
        uintptr_t chunk_end = m->first + m->second.bytes;
        if (end <= chunk_end) return 1;
        auto next = std::next(m);
        if (next == s.mappings.end() || next->first != chunk_end) return -1;
        m = next;
    }
}

/// A stream handle the fake created and has not destroyed (the NULL stream is refused: see the header).
CUresult check_stream(CUstream s) {
    if (tl_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    std::lock_guard lock(S().m);
    return S().streams.count(s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult check_event(CUevent e) {
    if (tl_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    std::lock_guard lock(S().m);
    return S().events.count(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult sticky_of(CUctx_st* c) { return static_cast<CUresult>(c->sticky.load()); }

/// Whether [p, p+n) lies in one cuMemHostAlloc allocation (S().m held): pinned, as opposed to pageable, host memory.
bool pinned_range(uintptr_t p, size_t n) {
    auto it = S().host_allocs.upper_bound(p);
    if (it == S().host_allocs.begin()) return false;
    --it;
    return p + n <= it->first + it->second;
}

/// A queued copy when it runs on its stream's worker: the operands must still be what they were at the call (device
/// memory still allocated), else CUDA_ERROR_ILLEGAL_ADDRESS with a line on stderr. `staged`: the source as read at the
/// call (pageable H2D). `dst_device`/`src_device`: as enqueue_copy takes them.
CUresult run_copy(uintptr_t dst, uintptr_t src, size_t bytes, int dst_device, int src_device,
                  const unsigned char* staged) {
    std::lock_guard lock(S().m);  // a cuMemFree racing this copy waits; one that came first is caught here
    int d = device_range(dst, bytes), r = staged ? 0 : device_range(src, bytes);
    if (d < 0 || r < 0 || (dst_device == 1 && d != 1) || (src_device == 1 && r != 1)) {
        std::fprintf(stderr, "fake_cuda: queued copy of %zu bytes %#llx -> %#llx touches freed device memory\n",
                     bytes, static_cast<unsigned long long>(src), static_cast<unsigned long long>(dst));
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    std::memmove(reinterpret_cast<void*>(dst), staged ? staged : reinterpret_cast<const void*>(src), bytes);
    return CUDA_SUCCESS;
}

/// A queued fill of `count` elements of `element` bytes (1, 2 or 4) with `value`, on its stream's worker.
CUresult run_fill(uintptr_t dst, unsigned value, unsigned element, size_t count) {
    const size_t n = count * element;
    std::lock_guard lock(S().m);
    if (device_range(dst, n) != 1) {
        std::fprintf(stderr, "fake_cuda: queued fill of %zu bytes at %#llx touches freed device memory\n", n,
                     static_cast<unsigned long long>(dst));
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    auto* p = reinterpret_cast<unsigned char*>(dst);
    if (element == 1) {
        std::memset(p, static_cast<int>(value & 0xff), n);
    } else {
        for (size_t i = 0; i < count; ++i) std::memcpy(p + i * element, &value, element);  // little-endian, as a GPU
    }
    return CUDA_SUCCESS;
}

/// Runs `fn(user)` on the context's one callback thread (started by the first host function) and returns once it
/// ran: a host function's turn in its stream, after the host functions other streams handed over first.
void call_on_callback_thread(CUctx_st* c, CUhostFn fn, void* user) {
    CallbackThread* t;
    {
        std::lock_guard lock(S().m);
        if (!c->callbacks) c->callbacks = std::make_unique<CallbackThread>();
        t = c->callbacks.get();
    }
    auto done = std::make_shared<Record>();
    t->push([fn, user, done] {
        fn(user);
        done->complete();
    });
    done->wait();
}

/// Checks a launch's shape as the driver does (cuLaunchKernel, kernel nodes).
CUresult check_shape(const unsigned grid[3], const unsigned block[3], unsigned shared) {
    if (!grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] || !block[2]) return CUDA_ERROR_INVALID_VALUE;
    if (block[0] > 1024 || block[1] > 1024 || block[2] > 64 || grid[1] > 65535 || grid[2] > 65535 ||
        uint64_t(block[0]) * block[1] * block[2] > uint64_t(kMaxThreadsPerBlock) || shared > unsigned(kMaxSharedPerBlock))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/// What a kernel launch (cuLaunchKernel, or a kernel node of a cuGraphLaunch) does when it runs, decided when the
/// driver takes it: an injected fault to return, a failed rt_assert to write into its module's record.
struct KernelRun {
    int fault = CUDA_SUCCESS;
    RtCudaFaultRecord* record = nullptr;
    std::string expr, file;
    int line = 0;
    unsigned block[3]{}, thread[3]{};
    std::shared_ptr<std::atomic<int>> queued;  // its module's launches not run yet
};

/// Takes a launch of `f` (S().m held): records it (fake_cuda.h), takes the injected fault and the armed assert.
/// `values[i]` points at parameter i (read only when the sizes are known).
KernelRun accept_kernel(CUfunc_st* f, const unsigned grid[3], const unsigned block[3], unsigned shared,
                        void* const* values, int stream_serial) {
    FakeCudaLaunch rec{};
    std::snprintf(rec.kernel, sizeof rec.kernel, "%s", f->name.c_str());
    for (int d = 0; d < 3; ++d) rec.grid[d] = grid[d], rec.block[d] = block[d];
    rec.shared_bytes = shared;
    rec.num_params = f->params_known ? static_cast<int>(f->sizes.size()) : -1;
    rec.stream_serial = stream_serial;
    for (size_t i = 0; f->params_known && i < f->sizes.size() && i < 8; ++i)
        std::memcpy(&rec.param_u64[i], values[i], std::min<size_t>(8, f->sizes[i]));
    State& st = S();
    st.last_launch = rec;
    ++st.launch_count;
    KernelRun run;
    run.fault = std::exchange(st.inject_fault, CUDA_SUCCESS);
    if (st.assert_next.armed && (st.assert_next.kernel.empty() || st.assert_next.kernel == f->name)) {
        st.assert_next.armed = false;
        auto g = f->module->globals.find(RT_CUDA_FAULT_RECORD_SYMBOL);
        if (g != f->module->globals.end() && g->second[0]) {
            run.record = reinterpret_cast<RtCudaFaultRecord*>(g->second[0]);
            run.expr = st.assert_next.expr;
            run.file = st.assert_next.file;
            run.line = st.assert_next.line;
            for (int d = 0; d < 3; ++d) run.block[d] = st.assert_next.block[d], run.thread[d] = st.assert_next.thread[d];
        } else if (run.fault == CUDA_SUCCESS) {
            run.fault = CUDA_ERROR_LAUNCH_FAILED;  // no record to write: the prelude's printf + __trap()
        }
    }
    run.queued = f->module->queued;
    ++*run.queued;
    return run;
}

/// A kernel on its stream's worker: runs no code; writes its failed assert (`ok`: the context is usable) and returns
/// its injected fault.
CUresult run_kernel(const KernelRun& run, bool ok) {
    --*run.queued;
    if (ok) g_clock_ahead_ns += g_kernel_time_ns.load();
    if (ok && run.record) {
        // What the prelude's rt_assert does on the GPU: claim, write the fields, publish.
        RtCudaFaultRecord* rec = run.record;
        unsigned expected = 0;
        if (__atomic_compare_exchange_n(&rec->claimed, &expected, 1u, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            std::snprintf(rec->expr, sizeof rec->expr, "%s", run.expr.c_str());
            std::snprintf(rec->file, sizeof rec->file, "%s", run.file.c_str());
            rec->line = run.line;
            for (int d = 0; d < 3; ++d) rec->block[d] = run.block[d], rec->thread[d] = run.thread[d];
            __atomic_store_n(&rec->ready, 1u, __ATOMIC_RELEASE);
        }
    }
    return static_cast<CUresult>(run.fault);
}

/// Copy `bytes` from src to dst in stream order. `dst_device`/`src_device`: the operand must be device memory (1),
/// must not be (the H side of HtoD/DtoH is not checked: pinned or pageable), or either (-1). Pageable host memory
/// makes the call synchronous as the driver's "API synchronization behavior" describes (see the header): a copy into
/// it, or between two host buffers, returns once it has completed (the sticky fault, if the context failed before);
/// a copy from it reads the source now, into a staging buffer, and the transfer runs in stream order.
CUresult enqueue_copy(CUstream s, uintptr_t dst, uintptr_t src, size_t bytes, int dst_device, int src_device) {
    if (CUresult r = check_stream(s)) return r;
    if (CUresult r = sticky_of(s->ctx)) return r;
    if (bytes == 0) return CUDA_SUCCESS;
    if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
    bool host_dst, host_src, pageable_dst, pageable_src;
    {
        std::lock_guard lock(S().m);
        int d = device_range(dst, bytes), r = device_range(src, bytes);
        if (d < 0 || r < 0) return CUDA_ERROR_INVALID_VALUE;  // runs past an allocation
        if ((dst_device == 1 && d != 1) || (src_device == 1 && r != 1)) return CUDA_ERROR_INVALID_VALUE;
        host_dst = d == 0;
        host_src = r == 0;
        pageable_dst = host_dst && !pinned_range(dst, bytes);
        pageable_src = host_src && !pinned_range(src, bytes);
    }
    const bool blocking = pageable_dst || (host_dst && host_src);
    std::shared_ptr<std::vector<unsigned char>> staged;
    if (pageable_src && !blocking) {  // H2D from pageable memory: the source as it is at the call
        auto* from = reinterpret_cast<const unsigned char*>(src);
        staged = std::make_shared<std::vector<unsigned char>>(from, from + bytes);
    }
    std::shared_ptr<Record> done = blocking ? std::make_shared<Record>() : nullptr;
    s->push([=](bool ok) -> CUresult {
        struct Complete {  // the blocked caller goes on whatever happens to the copy
            Record* r;
            ~Complete() {
                if (r) r->complete();
            }
        } complete{done.get()};
        if (!ok) return CUDA_SUCCESS;
        return run_copy(dst, src, bytes, dst_device, src_device, staged ? staged->data() : nullptr);
    });
    if (!done) return CUDA_SUCCESS;
    done->wait();
    return sticky_of(s->ctx);
}

// ---------------------------------------------------------------------------------------------- modules

uint16_t rd16(const std::string& b, size_t o) { uint16_t v; std::memcpy(&v, b.data() + o, 2); return v; }
uint32_t rd32(const std::string& b, size_t o) { uint32_t v; std::memcpy(&v, b.data() + o, 4); return v; }
uint64_t rd64(const std::string& b, size_t o) { uint64_t v; std::memcpy(&v, b.data() + o, 8); return v; }

/// The byte length of a 64-bit ELF image from its headers (the driver gets a pointer only); 0 if implausible.
size_t elf_size(const unsigned char* p) {
    if (p[4] != 2 /* ELFCLASS64 */) return 0;
    std::string h(reinterpret_cast<const char*>(p), 64);
    uint64_t shoff = rd64(h, 0x28), phoff = rd64(h, 0x20);
    uint16_t shentsize = rd16(h, 0x3A), shnum = rd16(h, 0x3C), phentsize = rd16(h, 0x36), phnum = rd16(h, 0x38);
    if (shentsize != 64 || shoff == 0 || shoff > (1u << 30)) return 0;
    size_t end = std::max<size_t>(shoff + size_t(shnum) * shentsize, phoff + size_t(phnum) * phentsize);
    std::string sh(reinterpret_cast<const char*>(p) + shoff, size_t(shnum) * shentsize);
    for (size_t i = 0; i < shnum; ++i) {
        uint32_t type = rd32(sh, i * 64 + 4);
        uint64_t off = rd64(sh, i * 64 + 24), size = rd64(sh, i * 64 + 32);
        if (type != 8 /* SHT_NOBITS */ && off + size > end) end = off + size;
    }
    return end < (1u << 30) ? end : 0;
}

/// Calls f(name, st_info, st_other, st_size) for every symbol of every symbol table of a cubin.
template <class F> void for_each_symbol(const std::string& b, F&& f) {
    uint64_t shoff = rd64(b, 0x28);
    uint16_t shnum = rd16(b, 0x3C);
    for (size_t i = 0; i < shnum; ++i) {
        size_t sh = shoff + i * 64;
        if (rd32(b, sh + 4) != 2 /* SHT_SYMTAB */) continue;
        uint64_t off = rd64(b, sh + 24), size = rd64(b, sh + 32);
        uint32_t link = rd32(b, sh + 40);
        if (link >= shnum || off + size > b.size()) continue;
        uint64_t stroff = rd64(b, shoff + link * 64 + 24), strsize = rd64(b, shoff + link * 64 + 32);
        if (stroff + strsize > b.size()) continue;
        for (uint64_t s = off; s + 24 <= off + size; s += 24) {
            uint32_t name = rd32(b, s);
            if (name >= strsize) continue;
            f(b.c_str() + stroff + name, static_cast<unsigned char>(b[s + 4]), static_cast<unsigned char>(b[s + 5]),
              rd64(b, s + 16));
        }
    }
}

/// Entry functions of a cubin: FUNC symbols marked STO_CUDA_ENTRY (0x10) in st_other.
std::vector<std::string> elf_entries(const std::string& b) {
    std::vector<std::string> names;
    for_each_symbol(b, [&](const char* name, unsigned char info, unsigned char other, uint64_t) {
        if ((info & 0xf) == 2 /* STT_FUNC */ && (other & 0x10)) names.emplace_back(name);
    });
    return names;
}

/// Parameter sizes of kernel `name` of a cubin, from the EIATTR_KPARAM_INFO records (attribute 0x17) of its
/// `.nv.info.<name>` section: ordinal (u16 at 4), offset (u16 at 6), size in bits 18..31 of the u32 at 8.
bool elf_params(const std::string& b, const std::string& name, std::vector<size_t>& sizes) {
    uint64_t shoff = rd64(b, 0x28);
    uint16_t shnum = rd16(b, 0x3C), shstrndx = rd16(b, 0x3E);
    if (shstrndx >= shnum) return false;
    uint64_t names_off = rd64(b, shoff + shstrndx * 64 + 24);
    const std::string wanted = ".nv.info." + name;
    for (size_t i = 0; i < shnum; ++i) {
        size_t sh = shoff + i * 64;
        uint64_t n = names_off + rd32(b, sh);
        if (n >= b.size() || wanted != b.c_str() + n) continue;
        uint64_t off = rd64(b, sh + 24), size = rd64(b, sh + 32);
        if (off + size > b.size()) return false;
        std::vector<std::pair<unsigned, size_t>> params;  // (ordinal, size)
        for (uint64_t q = off; q + 2 <= off + size;) {
            unsigned fmt = static_cast<unsigned char>(b[q]), attr = static_cast<unsigned char>(b[q + 1]);
            if (fmt == 4) {  // EIFMT_SVAL: a u16 length, then the payload
                uint16_t len = rd16(b, q + 2);
                if (attr == 0x17 && len >= 12)
                    params.emplace_back(rd16(b, q + 8), (rd32(b, q + 12) >> 18) & 0x3fff);
                q += 4 + len;
            } else {
                q += fmt == 3 ? 4 : 2;  // EIFMT_HVAL: a u16 value; EIFMT_NVAL: none
            }
        }
        sizes.assign(params.size(), 0);
        for (auto [ord, sz] : params) {
            if (ord >= sizes.size()) return false;
            sizes[ord] = sz;
        }
        return true;
    }
    return false;
}

/// The size of section `wanted` of a cubin (its sh_size, SHT_NOBITS included); 0 when it has none.
uint64_t elf_section_size(const std::string& b, const std::string& wanted) {
    uint64_t shoff = rd64(b, 0x28);
    uint16_t shnum = rd16(b, 0x3C), shstrndx = rd16(b, 0x3E);
    if (shstrndx >= shnum) return 0;
    uint64_t names_off = rd64(b, shoff + shstrndx * 64 + 24);
    for (size_t i = 0; i < shnum; ++i) {
        size_t sh = shoff + i * 64;
        uint64_t n = names_off + rd32(b, sh);
        if (n < b.size() && wanted == b.c_str() + n) return rd64(b, sh + 32);
    }
    return 0;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }

/// PTX `.entry NAME` identifiers, in order.
std::vector<std::string> ptx_entries(const std::string& t) {
    std::vector<std::string> names;
    for (size_t p = t.find(".entry"); p != std::string::npos; p = t.find(".entry", p + 6)) {
        size_t i = p + 6;
        while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
        size_t start = i;
        while (i < t.size() && ident_char(t[i])) ++i;
        if (i > start) names.push_back(t.substr(start, i - start));
    }
    return names;
}

/// Sizes of the `.param` list of PTX entry `name` (".param .u64 k_param_0", ".param .align 8 .b8 k_param_1[16]").
bool ptx_params(const std::string& t, const std::string& name, std::vector<size_t>& sizes) {
    for (size_t p = t.find(".entry"); p != std::string::npos; p = t.find(".entry", p + 6)) {
        size_t i = p + 6;
        while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
        if (t.compare(i, name.size(), name) != 0 || (i + name.size() < t.size() && ident_char(t[i + name.size()])))
            continue;
        i += name.size();
        while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
        if (i >= t.size() || t[i] != '(') return true;  // no parameters
        size_t close = t.find(')', i);
        if (close == std::string::npos) return false;
        std::string list = t.substr(i + 1, close - i - 1);
        size_t start = 0;
        while (start < list.size()) {
            size_t comma = list.find(',', start);
            std::string decl = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            start = comma == std::string::npos ? list.size() : comma + 1;
            if (decl.find(".param") == std::string::npos) continue;
            size_t elem = 0;
            static const std::pair<const char*, size_t> types[] = {
                {".u64", 8}, {".s64", 8}, {".b64", 8}, {".f64", 8}, {".u32", 4}, {".s32", 4}, {".b32", 4},
                {".f32", 4}, {".u16", 2}, {".s16", 2}, {".b16", 2}, {".f16", 2}, {".u8", 1},  {".s8", 1},  {".b8", 1}};
            for (auto& [ty, sz] : types)
                if (decl.find(ty) != std::string::npos) { elem = sz; break; }
            if (!elem) return false;
            size_t count = 1, br = decl.find('[');
            if (br != std::string::npos) count = std::strtoull(decl.c_str() + br + 1, nullptr, 10);
            sizes.push_back(elem * count);
        }
        return true;
    }
    return false;
}

/// Size of the global `name` a PTX text declares (`[.visible] .global [.align N] .TYPE name[[COUNT]] ...;`); 0 if none.
size_t ptx_global_size(const std::string& t, const std::string& name) {
    for (size_t p = t.find(name); p != std::string::npos; p = t.find(name, p + 1)) {
        size_t e = p + name.size();
        if ((p > 0 && ident_char(t[p - 1])) || (e < t.size() && ident_char(t[e]))) continue;
        size_t line = t.rfind('\n', p);
        std::string decl = t.substr(line == std::string::npos ? 0 : line + 1, p - (line == std::string::npos ? 0 : line + 1));
        if (decl.find(".global") == std::string::npos) continue;
        size_t elem = 0;
        for (auto [type, bytes] : {std::pair{"64", 8}, {"32", 4}, {"16", 2}, {"8", 1}})
            if (!elem && decl.find(std::string(".u") + type) != std::string::npos) elem = bytes;
        for (auto [type, bytes] : {std::pair{"64", 8}, {"32", 4}, {"16", 2}, {"8", 1}})
            if (!elem && (decl.find(std::string(".b") + type) != std::string::npos ||
                          decl.find(std::string(".s") + type) != std::string::npos))
                elem = bytes;
        if (!elem) return 0;
        size_t count = e < t.size() && t[e] == '[' ? std::strtoull(t.c_str() + e + 1, nullptr, 10) : 1;
        return elem * count;
    }
    return 0;
}

/// st_size of the OBJECT symbol `name` of a cubin (any binding); 0 if none.
size_t elf_object_size(const std::string& b, const std::string& name) {
    size_t found = 0;
    for_each_symbol(b, [&](const char* n, unsigned char info, unsigned char, uint64_t size) {
        if (!found && (info & 0xf) == 1 /* STT_OBJECT */ && name == n) found = size;
    });
    return found;
}

struct ErrorText {
    CUresult code;
    const char* name;
    const char* text;
};
#define E_(n, t) {n, #n, t}
const ErrorText kErrors[] = {
    E_(CUDA_SUCCESS, "no error"),
    E_(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    E_(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    E_(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    E_(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    E_(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
    E_(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "system has unsupported display driver / cuda driver combination"),
    E_(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "forward compatibility was attempted on non supported HW"),
    E_(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    E_(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    E_(CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable"),
    E_(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
    E_(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    E_(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device"),
    E_(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered"),
    E_(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
    E_(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "the provided PTX was compiled with an unsupported toolchain."),
    E_(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "PTX JIT compiler library not found"),
    E_(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "shared object symbol not found"),
    E_(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    E_(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    E_(CUDA_ERROR_NOT_READY, "device not ready"),
    E_(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    E_(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
    E_(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated"),
    E_(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
    E_(CUDA_ERROR_ASSERT, "device-side assert triggered"),
    E_(CUDA_ERROR_HARDWARE_STACK_ERROR, "hardware stack error"),
    E_(CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered"),
    E_(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address"),
    E_(CUDA_ERROR_INVALID_ADDRESS_SPACE, "operation not supported on global/shared address space"),
    E_(CUDA_ERROR_INVALID_PC, "invalid program counter"),
    E_(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
    E_(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    E_(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    E_(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef E_

const ErrorText* find_error(CUresult r) {
    for (const auto& e : kErrors)
        if (e.code == r) return &e;
    return nullptr;
}

/// Destroys what belongs to a context whose last primary reference went (S().m not held): streams drain and
/// stop, memory goes, a sticky fault is cleared — the next retain starts on a fresh context.
void destroy_context(CUctx_st* c) {
    std::vector<CUstream_st*> streams;
    {
        std::lock_guard lock(S().m);
        for (auto* s : S().streams)
            if (s->ctx == c) streams.push_back(s);
        for (auto* s : streams) S().streams.erase(s);
    }
    for (auto* s : streams) {
        s->shutdown();
        delete s;
    }
    std::unique_ptr<CallbackThread> callbacks;
    {
        std::lock_guard lock(S().m);
        callbacks = std::move(c->callbacks);
    }
    callbacks.reset();  // every stream drained: it runs nothing more
    std::lock_guard lock(S().m);
    State& st = S();
    for (auto it = st.allocs.begin(); it != st.allocs.end();) {
        if (it->second.ctx == c) {
            std::free(reinterpret_cast<void*>(it->first));
            it = st.allocs.erase(it);
        } else {
            ++it;
        }
    }
    for (auto it = st.events.begin(); it != st.events.end();) {
        if ((*it)->ctx == c) {
            delete *it;
            it = st.events.erase(it);
        } else {
            ++it;
        }
    }
    for (auto it = st.modules.begin(); it != st.modules.end();) {
        if ((*it)->ctx == c) {
            for (auto& [n, f] : (*it)->functions) st.functions.erase(f.get());
            for (auto& [n, g] : (*it)->globals) st.globals.erase(reinterpret_cast<uintptr_t>(g.data()));
            delete *it;
            it = st.modules.erase(it);
        } else {
            ++it;
        }
    }
    for (auto it = st.execs.begin(); it != st.execs.end();) {
        if ((*it)->ctx == c) {
            if (st.last_exec == *it) {
                st.last_exec_nodes = (*it)->nodes;
                st.last_exec = nullptr;
            }
            delete *it;
            it = st.execs.erase(it);
        } else {
            ++it;
        }
    }
    for (auto it = st.graphs.begin(); it != st.graphs.end();) {
        if ((*it)->ctx == c) {
            for (auto& h : (*it)->handles) st.graph_nodes.erase(h.get());
            delete *it;
            it = st.graphs.erase(it);
        } else {
            ++it;
        }
    }
    for (auto it = st.vm_handles.begin(); it != st.vm_handles.end();) {
        if (it->second.ctx == c) it = st.vm_handles.erase(it);
        else ++it;
    }
    c->used = 0;
    c->sticky.store(CUDA_SUCCESS);
}

}  // namespace

// ================================================================================================ the driver API
extern "C" {

CUresult CUDAAPI cuInit(unsigned int flags) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (const char* forced = std::getenv("FAKE_CUDA_CUINIT_RESULT"); forced && *forced) {
        const char* in = std::getenv("FAKE_CUDA_CUINIT_RESULT_IN");
        Dl_info self{};
        if (!in || !*in || (::dladdr(reinterpret_cast<void*>(&cuInit), &self) && self.dli_fname &&
                            std::strncmp(self.dli_fname, in, std::strlen(in)) == 0))
            return static_cast<CUresult>(std::atoi(forced));
    }
    State& s = S();
    std::lock_guard lock(s.m);
    if (s.initialized) return CUDA_SUCCESS;
    s.device_count = static_cast<int>(env_size("FAKE_CUDA_DEVICES", 1));
    s.capacity = env_size("FAKE_CUDA_MEMORY", size_t(1) << 30);
    for (int i = 0; i < s.device_count; ++i) {
        s.contexts.push_back(std::make_unique<CUctx_st>());
        s.contexts.back()->ordinal = i;
    }
    s.initialized = true;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int* v) {
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = CUDA_VERSION;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** p) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    const ErrorText* e = find_error(error);
    *p = e ? e->name : nullptr;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** p) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    const ErrorText* e = find_error(error);
    *p = e ? e->text : nullptr;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(S().m);
    if (!S().initialized) return CUDA_ERROR_NOT_INITIALIZED;
    *count = S().device_count;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* dev, int ordinal) {
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(S().m);
    if (!S().initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= S().device_count) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

static CUresult check_device(CUdevice dev) {
    std::lock_guard lock(S().m);
    if (!S().initialized) return CUDA_ERROR_NOT_INITIALIZED;
    return dev >= 0 && dev < S().device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_device(dev)) return r;
    std::snprintf(name, static_cast<size_t>(len), "Fake CUDA Device (test double)");
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_device(dev)) return r;
    *bytes = S().capacity;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute a, CUdevice dev) {
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_device(dev)) return r;
    switch (a) {
        case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
        case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = kMaxThreadsPerBlock; break;
        case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
        case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
        case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
        case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
        case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
        case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = kMaxSharedPerBlock; break;
        case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; break;
        case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
        case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
        default: return CUDA_ERROR_INVALID_VALUE;  // not modelled: callers must have a fallback
    }
    return CUDA_SUCCESS;
}

/// Whether FAKE_CUDA_FAIL_RETAIN lists `dev`.
bool retain_fails(CUdevice dev) {
    const char* e = std::getenv("FAKE_CUDA_FAIL_RETAIN");
    for (const char* p = e; p && *p;) {
        char* end = nullptr;
        long v = std::strtol(p, &end, 10);
        if (end == p) break;
        if (v == dev) return true;
        p = *end == ',' ? end + 1 : end;
    }
    return false;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_device(dev)) return r;
    if (retain_fails(dev)) return CUDA_ERROR_DEVICE_UNAVAILABLE;
    std::lock_guard lock(S().m);
    CUctx_st* c = S().contexts[static_cast<size_t>(dev)].get();
    ++c->refs;
    *pctx = c;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
    if (tl_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    if (CUresult r = check_device(dev)) return r;
    CUctx_st* c;
    {
        std::lock_guard lock(S().m);
        c = S().contexts[static_cast<size_t>(dev)].get();
        if (c->refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
        if (--c->refs > 0) return CUDA_SUCCESS;
    }
    destroy_context(c);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
    if (tl_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = tl_current;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
    if (tl_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    if (ctx) {
        std::lock_guard lock(S().m);
        bool known = false;
        for (auto& c : S().contexts) known |= c.get() == ctx;
        if (!known) return CUDA_ERROR_INVALID_CONTEXT;
    }
    tl_current = ctx;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void) {
    CUctx_st* c = nullptr;
    if (CUresult r = current(&c, /*allow_sticky=*/true)) return r;
    std::vector<CUstream_st*> streams;
    {
        std::lock_guard lock(S().m);
        for (auto* s : S().streams)
            if (s->ctx == c) streams.push_back(s);
    }
    for (auto* s : streams) s->drain();  // streams are destroyed only by their owner, not during its sync
    return sticky_of(c);
}

CUresult CUDAAPI cuMemGetInfo(size_t* free_bytes, size_t* total) {
    if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* c = nullptr;
    if (CUresult r = current(&c)) return r;
    std::lock_guard lock(S().m);
    *total = S().capacity;
    *free_bytes = S().capacity - c->used;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr* dptr, size_t bytes) {
    if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* c = nullptr;
    if (CUresult r = current(&c)) return r;
    std::lock_guard lock(S().m);
    if (bytes > S().capacity - c->used) return CUDA_ERROR_OUT_OF_MEMORY;
    void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    S().allocs.emplace(reinterpret_cast<uintptr_t>(p), Alloc{bytes, c});
    c->used += bytes;
    *dptr = reinterpret_cast<CUdeviceptr>(p);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
    CUctx_st* c = nullptr;
    if (CUresult r = current(&c)) return r;  // sticky: memory stays until the context is destroyed (as in CUDA)
    std::lock_guard lock(S().m);
    auto it = S().allocs.find(static_cast<uintptr_t>(dptr));
    if (it == S().allocs.end()) return CUDA_ERROR_INVALID_VALUE;
    it->second.ctx->used -= it->second.bytes;
    std::free(reinterpret_cast<void*>(it->first));
    S().allocs.erase(it);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytes, unsigned int) {
    if (!pp || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* c = nullptr;
    if (CUresult r = current(&c)) return r;
    void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    std::lock_guard lock(S().m);
    S().host_allocs.emplace(reinterpret_cast<uintptr_t>(p), bytes);
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr* pdptr, void* p, unsigned int flags) {
    if (!pdptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* c = nullptr;
    if (CUresult r = current(&c)) return r;
    std::lock_guard lock(S().m);
    if (!S().host_allocs.count(reinterpret_cast<uintptr_t>(p))) return CUDA_ERROR_INVALID_VALUE;  // only the blocks' starts
    *pdptr = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the same address
    return CUDA_SUCCESS;
}

/// Synchronous; into device memory or a module global.
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
    CUctx_st* c = nullptr;
    if (CUresult r = current(&c)) return r;
    if (n == 0) return CUDA_SUCCESS;
    if (!src) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(S().m);
    bool ok = device_range(dst, n) == 1;
    auto g = S().globals.upper_bound(dst);
    if (!ok && g != S().globals.begin()) {
        --g;
        ok = dst >= g->first && dst - g->first < g->second && n <= g->second - (dst - g->first);
    }
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(reinterpret_cast<void*>(dst), src, n);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFreeHost(void* p) {
    if (tl_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    std::lock_guard lock(S().m);
    if (!S().host_allocs.erase(reinterpret_cast<uintptr_t>(p))) return CUDA_ERROR_INVALID_VALUE;
    std::free(p);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    return enqueue_copy(s, dst, src, n, -1, -1);
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
    return enqueue_copy(s, dst, reinterpret_cast<uintptr_t>(src), n, 1, -1);
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream s) {
    return enqueue_copy(s, reinterpret_cast<uintptr_t>(dst), src, n, -1, 1);
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    return enqueue_copy(s, dst, src, n, 1, 1);
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream s) {
    if (CUresult r = check_stream(s)) return r;
    if (CUresult r = sticky_of(s->ctx)) return r;
    if (n == 0) return CUDA_SUCCESS;
    {
        std::lock_guard lock(S().m);
        if (device_range(dst, n) != 1) return CUDA_ERROR_INVALID_VALUE;  // device memory only
    }
    s->push([=](bool ok) -> CUresult { return ok ? run_fill(dst, value, 1, n) : CUDA_SUCCESS; });
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream* ps, unsigned int flags) {
    if (!ps || (flags & ~unsigned(CU_STREAM_NON_BLOCKING))) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* c = nullptr;
    if (CUresult r = current(&c)) return r;
    auto* s = new CUstream_st;
    s->ctx = c;
    {
        std::lock_guard lock(S().m);
        s->serial = S().next_stream_serial++;
        S().streams.insert(s);
    }
    s->worker = std::thread([s] { s->run(); });
    *ps = s;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream s) {
    if (CUresult r = check_stream(s)) return r;
    {
        std::lock_guard lock(S().m);
        S().streams.erase(s);
    }
    s->shutdown();  // CUDA lets queued work finish after destroy returns; the fake finishes it first
    delete s;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
    if (CUresult r = check_stream(s)) return r;
    s->drain();
    return sticky_of(s->ctx);
}

CUresult CUDAAPI cuStreamQuery(CUstream s) {
    if (CUresult r = check_stream(s)) return r;
    if (CUresult r = sticky_of(s->ctx)) return r;
    return s->idle() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_stream(s)) return r;
    if (CUresult r = check_event(e)) return r;
    if (CUresult r = sticky_of(s->ctx)) return r;
    std::shared_ptr<Record> rec = e->current();
    if (!rec) return CUDA_SUCCESS;  // never recorded: nothing to wait for
    s->push([rec](bool) -> CUresult {
        rec->wait();
        return CUDA_SUCCESS;
    });
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream s, CUhostFn fn, void* user) {
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_stream(s)) return r;
    if (CUresult r = sticky_of(s->ctx)) return r;
    {
        std::lock_guard lock(S().m);
        ++S().host_func_calls;
    }
    CUctx_st* c = s->ctx;
    s->push([c, fn, user](bool ok) -> CUresult {
        if (!ok) return CUDA_SUCCESS;  // "the function will not be called in the event of an error in the CUDA context"
        call_on_callback_thread(c, fn, user);
        return CUDA_SUCCESS;
    });
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent* pe, unsigned int flags) {
    if (!pe || (flags & ~unsigned(CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC | CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* c = nullptr;
    if (CUresult r = current(&c)) return r;
    auto* e = new CUevent_st;
    e->ctx = c;
    e->flags = flags;
    ++g_event_creates;
    std::lock_guard lock(S().m);
    S().events.insert(e);
    *pe = e;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent e) {
    if (tl_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    std::lock_guard lock(S().m);
    if (!e || !S().events.erase(e)) return CUDA_ERROR_INVALID_HANDLE;
    delete e;  // a queued record or wait holds the Record, not the event
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
    if (CUresult r = check_event(e)) return r;
    if (CUresult r = check_stream(s)) return r;
    if (e->ctx != s->ctx) return CUDA_ERROR_INVALID_HANDLE;  // CUDA: same context only
    if (CUresult r = sticky_of(s->ctx)) return r;
    auto rec = std::make_shared<Record>();
    {
        std::lock_guard lock(e->m);
        e->rec = rec;
    }
    s->push([rec](bool) -> CUresult {
        rec->complete();
        return CUDA_SUCCESS;
    });
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventQuery(CUevent e) {
    if (CUresult r = check_event(e)) return r;
    if (CUresult r = sticky_of(e->ctx)) return r;
    std::shared_ptr<Record> rec = e->current();
    return !rec || rec->is_done() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult CUDAAPI cuEventSynchronize(CUevent e) {
    if (CUresult r = check_event(e)) return r;
    if (std::shared_ptr<Record> rec = e->current()) rec->wait();
    return sticky_of(e->ctx);
}

CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_event(start)) return r;
    if (CUresult r = check_event(end)) return r;
    if ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    std::shared_ptr<Record> a = start->current(), b = end->current();
    if (!a || !b) return CUDA_ERROR_INVALID_HANDLE;  // never recorded
    if (!a->is_done() || !b->is_done()) return CUDA_ERROR_NOT_READY;
    Clock::time_point ta, tb;
    {
        std::lock_guard la(a->m);
        ta = a->when;
    }
    {
        std::lock_guard lb(b->m);
        tb = b->when;
    }
    *ms = std::chrono::duration<float, std::milli>(tb - ta).count();
    ++g_elapsed_times;
    return CUDA_SUCCESS;
}

/// Loads an image; PTX the "JIT" refuses (a .target newer than the device's sm_90) leaves a line in `log`.
static CUresult load_module(CUmodule* pm, const void* image, std::string* log) {
    if (!pm || !image) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* c = nullptr;
    if (CUresult r = current(&c)) return r;
    auto* p = static_cast<const unsigned char*>(image);
    auto m = std::make_unique<CUmod_st>();
    m->ctx = c;
    if (std::memcmp(p, "\x7f" "ELF", 4) == 0) {
        uint16_t machine = 0;
        std::memcpy(&machine, p + 18, 2);
        if (machine != 190 /* EM_CUDA */) return CUDA_ERROR_INVALID_IMAGE;  // a host ELF, as the driver refuses it
        size_t n = elf_size(p);
        if (!n) return CUDA_ERROR_INVALID_IMAGE;
        m->image.assign(reinterpret_cast<const char*>(p), n);
        m->names = elf_entries(m->image);
    } else if (p[0] == 0x50 && p[1] == 0xed && p[2] == 0x55 && p[3] == 0xba) {
        return CUDA_ERROR_NOT_SUPPORTED;  // fatbins: not modelled (the runtime makes cubins)
    } else {
        m->image = reinterpret_cast<const char*>(p);  // PTX: a C string
        size_t target = m->image.find(".target");
        if (m->image.find(".version") == std::string::npos || target == std::string::npos)
            return CUDA_ERROR_INVALID_IMAGE;
        size_t sm = m->image.find("sm_", target);
        if (sm != std::string::npos && sm < m->image.find('\n', target) && std::atoi(m->image.c_str() + sm + 3) > 90) {
            if (log)
                *log = "fake ptx JIT: error: .target " + m->image.substr(sm, m->image.find_first_of(" ,\n", sm) - sm) +
                       " is newer than this device (sm_90)";
            return CUDA_ERROR_INVALID_PTX;
        }
        m->ptx = true;
        m->names = ptx_entries(m->image);
    }
    std::lock_guard lock(S().m);
    *pm = m.get();
    S().modules.insert(m.release());
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule* pm, const void* image) { return load_module(pm, image, nullptr); }

/// Only the error-log options are modelled (others are accepted and ignored).
CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* pm, const void* image, unsigned int n, CUjit_option* options,
                                    void** values) {
    if (n && (!options || !values)) return CUDA_ERROR_INVALID_VALUE;
    char* buffer = nullptr;
    size_t size = 0;
    for (unsigned i = 0; i < n; ++i) {
        if (options[i] == CU_JIT_ERROR_LOG_BUFFER) buffer = static_cast<char*>(values[i]);
        if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) size = reinterpret_cast<uintptr_t>(values[i]);
    }
    std::string log;
    CUresult r = load_module(pm, image, &log);
    if (buffer && size) std::snprintf(buffer, size, "%s", log.c_str());
    return r;
}

CUresult CUDAAPI cuModuleUnload(CUmodule m) {
    if (tl_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    std::lock_guard lock(S().m);
    if (!m || !S().modules.erase(m)) return CUDA_ERROR_INVALID_HANDLE;
    if (int q = m->queued->load()) {  // a GPU would run freed code
        ++S().unsafe_unloads;
        std::fprintf(stderr, "fake_cuda: cuModuleUnload of a module with %d launch(es) still queued\n", q);
    }
    for (auto& [n, f] : m->functions) S().functions.erase(f.get());
    for (auto& [n, g] : m->globals) S().globals.erase(reinterpret_cast<uintptr_t>(g.data()));
    delete m;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr* dptr, size_t* bytes, CUmodule m, const char* name) {
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(S().m);
    if (!m || !S().modules.count(m)) return CUDA_ERROR_INVALID_HANDLE;
    auto it = m->globals.find(name);
    if (it == m->globals.end()) {
        size_t size = m->ptx ? ptx_global_size(m->image, name) : elf_object_size(m->image, name);
        if (!size) return CUDA_ERROR_NOT_FOUND;
        it = m->globals.emplace(name, std::vector<uint64_t>((size + 7) / 8, 0)).first;
        S().globals.emplace(reinterpret_cast<uintptr_t>(it->second.data()), size);
    }
    const uintptr_t at = reinterpret_cast<uintptr_t>(it->second.data());
    if (dptr) *dptr = at;
    if (bytes) *bytes = S().globals.at(at);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* pf, CUmodule m, const char* name) {
    if (!pf || !name) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(S().m);
    if (!m || !S().modules.count(m)) return CUDA_ERROR_INVALID_HANDLE;
    auto it = m->functions.find(name);
    if (it == m->functions.end()) {
        if (std::find(m->names.begin(), m->names.end(), name) == m->names.end()) return CUDA_ERROR_NOT_FOUND;
        auto f = std::make_unique<CUfunc_st>();
        f->module = m;
        f->name = name;
        if (m->ptx ? ptx_params(m->image, name, f->sizes) : elf_params(m->image, name, f->sizes)) {
            f->params_known = true;
            size_t off = 0;
            for (size_t sz : f->sizes) {
                off = (off + sz - 1) / sz * sz;  // PTX params: naturally aligned (arrays by element: close enough)
                f->offsets.push_back(off);
                off += sz;
            }
        }
        S().functions.insert(f.get());
        it = m->functions.emplace(name, std::move(f)).first;
    }
    *pf = it->second.get();
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction f, size_t index, size_t* offset, size_t* size) {
    std::lock_guard lock(S().m);
    if (!f || !S().functions.count(f)) return CUDA_ERROR_INVALID_HANDLE;
    if (!f->params_known) return CUDA_ERROR_NOT_SUPPORTED;
    if (index >= f->sizes.size()) return CUDA_ERROR_INVALID_VALUE;  // past the last parameter
    if (offset) *offset = f->offsets[index];
    if (size) *size = f->sizes[index];
    return CUDA_SUCCESS;
}

// A kernel's static __shared__ bytes: a cubin's `.nv.shared.<kernel>` section (as ptxas lays it out); PTX: 0. Other
// attributes are not modelled.
CUresult CUDAAPI cuFuncGetAttribute(int* value, CUfunction_attribute attrib, CUfunction f) {
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(S().m);
    if (!f || !S().functions.count(f)) return CUDA_ERROR_INVALID_HANDLE;
    if (attrib != CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) return CUDA_ERROR_INVALID_VALUE;
    *value = f->module->ptx ? 0 : static_cast<int>(elf_section_size(f->module->image, ".nv.shared." + f->name));
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int* count, CUmodule m) {
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(S().m);
    if (!m || !S().modules.count(m)) return CUDA_ERROR_INVALID_HANDLE;
    *count = static_cast<unsigned>(m->names.size());
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction* fns, unsigned int n, CUmodule m) {
    if (!fns) return CUDA_ERROR_INVALID_VALUE;
    {
        std::lock_guard lock(S().m);
        if (!m || !S().modules.count(m)) return CUDA_ERROR_INVALID_HANDLE;
        if (n < m->names.size()) return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < m->names.size(); ++i)
        if (CUresult r = cuModuleGetFunction(&fns[i], m, m->names[i].c_str())) return r;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction f) {
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(S().m);
    if (!f || !S().functions.count(f)) return CUDA_ERROR_INVALID_HANDLE;
    *name = f->name.c_str();
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
    if (CUresult r = check_stream(s)) return r;
    if (CUresult r = sticky_of(s->ctx)) return r;
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    if (extra) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_shape(grid, block, shared)) return r;
    KernelRun run;
    {
        std::lock_guard lock(S().m);
        if (!f || !S().functions.count(f)) return CUDA_ERROR_INVALID_HANDLE;
        if (f->module->ctx != s->ctx) return CUDA_ERROR_INVALID_HANDLE;
        if (f->params_known && !f->sizes.empty() && !params) return CUDA_ERROR_INVALID_VALUE;
        // The values are read at the call, as the driver does ("copied at launch").
        run = accept_kernel(f, grid, block, shared, params, s->serial);
    }
    s->push([run](bool ok) -> CUresult { return run_kernel(run, ok); });  // runs no code
    return CUDA_SUCCESS;
}

// ---- graphs: a graph records nodes; cuGraphInstantiate copies them into an executable graph, whose launch runs
// them in their order of addition (a topological order) as one operation of the stream.

/// A kernel node's parameters, checked as cuLaunchKernel checks a launch (S().m held); `ctx`: the graph's.
static CUresult make_kernel_node(const CUDA_KERNEL_NODE_PARAMS* p, CUctx_st* ctx, GraphNode& out) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    if (!p->func) return p->kern ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;  // CUkernel: not modelled
    if (p->extra) return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ}, block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
    if (CUresult r = check_shape(grid, block, p->sharedMemBytes)) return r;
    CUfunc_st* f = p->func;
    if (!S().functions.count(f) || f->module->ctx != ctx) return CUDA_ERROR_INVALID_VALUE;
    if (f->params_known && !f->sizes.empty() && !p->kernelParams) return CUDA_ERROR_INVALID_VALUE;
    out.kind = FAKE_CUDA_NODE_KERNEL;
    out.fn = f;
    for (int d = 0; d < 3; ++d) out.grid[d] = grid[d], out.block[d] = block[d];
    out.shared = p->sharedMemBytes;
    out.params.clear();
    for (size_t i = 0; f->params_known && i < f->sizes.size(); ++i) {  // the values, as the driver copies them
        auto* v = static_cast<const unsigned char*>(p->kernelParams[i]);
        out.params.emplace_back(v, v + f->sizes[i]);
    }
    return CUDA_SUCCESS;
}

/// A memcpy node's parameters (S().m held): one-dimensional copies (Height = Depth = 1, no offsets, no arrays) between
/// host, device or unified addresses, checked as the copy functions check them.
static CUresult make_copy_node(const CUDA_MEMCPY3D* m, CUcontext ctx, CUctx_st* graph_ctx, GraphNode& out) {
    if (!m || ctx != graph_ctx) return CUDA_ERROR_INVALID_VALUE;
    if (m->srcMemoryType == CU_MEMORYTYPE_ARRAY || m->dstMemoryType == CU_MEMORYTYPE_ARRAY || m->srcArray ||
        m->dstArray || m->srcXInBytes || m->srcY || m->srcZ || m->srcLOD || m->dstXInBytes || m->dstY || m->dstZ ||
        m->dstLOD || m->Height != 1 || m->Depth != 1)
        return CUDA_ERROR_NOT_SUPPORTED;  // not modelled: the runtime makes 1D copies
    if (m->reserved0 || m->reserved1 || m->WidthInBytes == 0) return CUDA_ERROR_INVALID_VALUE;
    auto side = [&](CUmemorytype type, const void* host, CUdeviceptr device, uintptr_t& at) -> CUresult {
        if (type == CU_MEMORYTYPE_HOST) at = reinterpret_cast<uintptr_t>(host);
        else if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED) at = device;
        else return CUDA_ERROR_INVALID_VALUE;
        if (!at) return CUDA_ERROR_INVALID_VALUE;
        const int r = device_range(at, m->WidthInBytes);
        if (r < 0 || (type == CU_MEMORYTYPE_DEVICE && r != 1) || (type == CU_MEMORYTYPE_HOST && r == 1))
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    };
    if (CUresult r = side(m->srcMemoryType, m->srcHost, m->srcDevice, out.src)) return r;
    if (CUresult r = side(m->dstMemoryType, m->dstHost, m->dstDevice, out.dst)) return r;
    out.kind = FAKE_CUDA_NODE_MEMCPY;
    out.bytes = m->WidthInBytes;
    out.src_type = m->srcMemoryType;
    out.dst_type = m->dstMemoryType;
    return CUDA_SUCCESS;
}

/// A memset node's parameters (S().m held): one row of device memory.
static CUresult make_fill_node(const CUDA_MEMSET_NODE_PARAMS* m, CUcontext ctx, CUctx_st* graph_ctx, GraphNode& out) {
    if (!m || ctx != graph_ctx) return CUDA_ERROR_INVALID_VALUE;
    if (m->elementSize != 1 && m->elementSize != 2 && m->elementSize != 4) return CUDA_ERROR_INVALID_VALUE;
    if (m->height != 1) return CUDA_ERROR_NOT_SUPPORTED;  // 2D fills: not modelled
    if (m->width == 0 || device_range(m->dst, m->width * m->elementSize) != 1) return CUDA_ERROR_INVALID_VALUE;
    out.kind = FAKE_CUDA_NODE_MEMSET;
    out.dst = m->dst;
    out.bytes = m->width;
    out.element = m->elementSize;
    out.value = m->value;
    return CUDA_SUCCESS;
}

/// Adds `node` after `deps` (live nodes of `g`, no duplicates), as the cuGraphAdd*Node functions do (S().m held).
static CUresult add_graph_node(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, GraphNode node) {
    if (!out || (n && !deps)) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; ++i) {
        if (!S().graph_nodes.count(deps[i]) || deps[i]->graph != g) return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; ++j)
            if (deps[j] == deps[i]) return CUDA_ERROR_INVALID_VALUE;  // "may not have any duplicate entries"
        node.deps.push_back(deps[i]->index);
    }
    std::sort(node.deps.begin(), node.deps.end());
    auto handle = std::make_unique<CUgraphNode_st>();
    handle->graph = g;
    handle->index = static_cast<int>(g->nodes.size());
    g->nodes.push_back(std::move(node));
    S().graph_nodes.insert(handle.get());
    *out = handle.get();
    g->handles.push_back(std::move(handle));
    return CUDA_SUCCESS;
}

static CUresult check_graph(CUgraph g) {
    if (tl_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    return g && S().graphs.count(g) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphCreate(CUgraph* pg, unsigned int flags) {
    if (!pg || flags) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* c = nullptr;
    if (CUresult r = current(&c)) return r;
    auto* g = new CUgraph_st;
    g->ctx = c;
    std::lock_guard lock(S().m);
    S().graphs.insert(g);
    *pg = g;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
    std::lock_guard lock(S().m);
    if (CUresult r = check_graph(g)) return r;
    for (auto& h : g->handles) S().graph_nodes.erase(h.get());
    S().graphs.erase(g);
    delete g;  // executable graphs made from it are independent of it
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode* pn, CUgraph g, const CUgraphNode* deps, size_t n,
                                      const CUDA_KERNEL_NODE_PARAMS* p) {
    std::lock_guard lock(S().m);
    if (CUresult r = check_graph(g)) return r;
    GraphNode node;
    if (CUresult r = make_kernel_node(p, g->ctx, node)) return r;
    return add_graph_node(pn, g, deps, n, std::move(node));
}

CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode* pn, CUgraph g, const CUgraphNode* deps, size_t n,
                                      const CUDA_MEMCPY3D* m, CUcontext ctx) {
    std::lock_guard lock(S().m);
    if (CUresult r = check_graph(g)) return r;
    GraphNode node;
    if (CUresult r = make_copy_node(m, ctx, g->ctx, node)) return r;
    return add_graph_node(pn, g, deps, n, std::move(node));
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode* pn, CUgraph g, const CUgraphNode* deps, size_t n,
                                      const CUDA_MEMSET_NODE_PARAMS* m, CUcontext ctx) {
    std::lock_guard lock(S().m);
    if (CUresult r = check_graph(g)) return r;
    GraphNode node;
    if (CUresult r = make_fill_node(m, ctx, g->ctx, node)) return r;
    return add_graph_node(pn, g, deps, n, std::move(node));
}

CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode* pn, CUgraph g, const CUgraphNode* deps, size_t n,
                                    const CUDA_HOST_NODE_PARAMS* p) {
    std::lock_guard lock(S().m);
    if (CUresult r = check_graph(g)) return r;
    if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
    GraphNode node;
    node.kind = FAKE_CUDA_NODE_HOST;
    node.host = p->fn;
    node.user = p->userData;
    return add_graph_node(pn, g, deps, n, std::move(node));
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode* pn, CUgraph g, const CUgraphNode* deps, size_t n) {
    std::lock_guard lock(S().m);
    if (CUresult r = check_graph(g)) return r;
    return add_graph_node(pn, g, deps, n, GraphNode{});
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* pe, CUgraph g, unsigned long long flags) {
    if (!pe || flags) return CUDA_ERROR_INVALID_VALUE;  // flags: not modelled
    CUctx_st* c = nullptr;
    if (CUresult r = current(&c)) return r;
    std::lock_guard lock(S().m);
    if (CUresult r = check_graph(g)) return r;
    if (g->ctx != c) return CUDA_ERROR_INVALID_CONTEXT;
    auto* e = new CUgraphExec_st;
    e->ctx = c;
    e->source = g;
    e->nodes = std::make_shared<const GraphNodes>(g->nodes);
    S().execs.insert(e);
    S().instantiated = true;
    ++S().instantiate_count;
    S().last_exec = e;
    *pe = e;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec e) {
    if (tl_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    std::lock_guard lock(S().m);
    if (!e || !S().execs.erase(e)) return CUDA_ERROR_INVALID_VALUE;
    if (S().last_exec == e) {
        S().last_exec_nodes = e->nodes;
        S().last_exec = nullptr;
    }
    delete e;  // launches in flight hold the nodes they run
    return CUDA_SUCCESS;
}

/// The node `n` of the graph `e` was instantiated from, of kind `kind` (S().m held); its index in `*index`.
static CUresult exec_node(CUgraphExec e, CUgraphNode n, int kind, int* index) {
    if (tl_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    if (!e || !S().execs.count(e) || !S().graph_nodes.count(n) || n->graph != e->source) return CUDA_ERROR_INVALID_VALUE;
    if ((*e->nodes)[static_cast<size_t>(n->index)].kind != kind) return CUDA_ERROR_INVALID_VALUE;
    *index = n->index;
    return CUDA_SUCCESS;
}

/// Replaces node `index` of `e` for its later launches (copy on write: launches queued keep theirs).
static void set_exec_node(CUgraphExec e, int index, GraphNode node) {
    auto next = std::make_shared<GraphNodes>(*e->nodes);
    node.deps = (*next)[static_cast<size_t>(index)].deps;
    (*next)[static_cast<size_t>(index)] = std::move(node);
    e->nodes = std::move(next);
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec e, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS* p) {
    std::lock_guard lock(S().m);
    int index = 0;
    if (CUresult r = exec_node(e, n, FAKE_CUDA_NODE_KERNEL, &index)) return r;
    GraphNode node;
    if (CUresult r = make_kernel_node(p, e->ctx, node)) return r;
    set_exec_node(e, index, std::move(node));
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec e, CUgraphNode n, const CUDA_MEMCPY3D* m, CUcontext ctx) {
    std::lock_guard lock(S().m);
    int index = 0;
    if (CUresult r = exec_node(e, n, FAKE_CUDA_NODE_MEMCPY, &index)) return r;
    GraphNode node;
    if (CUresult r = make_copy_node(m, ctx, e->ctx, node)) return r;
    set_exec_node(e, index, std::move(node));
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec e, CUgraphNode n, const CUDA_MEMSET_NODE_PARAMS* m,
                                                CUcontext ctx) {
    std::lock_guard lock(S().m);
    int index = 0;
    if (CUresult r = exec_node(e, n, FAKE_CUDA_NODE_MEMSET, &index)) return r;
    GraphNode node;
    if (CUresult r = make_fill_node(m, ctx, e->ctx, node)) return r;
    set_exec_node(e, index, std::move(node));
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecHostNodeSetParams(CUgraphExec e, CUgraphNode n, const CUDA_HOST_NODE_PARAMS* p) {
    std::lock_guard lock(S().m);
    int index = 0;
    if (CUresult r = exec_node(e, n, FAKE_CUDA_NODE_HOST, &index)) return r;
    if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
    GraphNode node;
    node.kind = FAKE_CUDA_NODE_HOST;
    node.host = p->fn;
    node.user = p->userData;
    set_exec_node(e, index, std::move(node));
    return CUDA_SUCCESS;
}

/// Kernel nodes are taken at the call like cuLaunchKernel's launches (recorded, faults and asserts armed); the nodes
/// run in order on the stream's worker as one operation. After a node faults the rest do nothing (the context is
/// sticky); host nodes are not called then.
CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream s) {
    if (CUresult r = check_stream(s)) return r;
    if (CUresult r = sticky_of(s->ctx)) return r;
    std::shared_ptr<const GraphNodes> nodes;
    std::vector<KernelRun> runs;
    {
        std::lock_guard lock(S().m);
        if (!e || !S().execs.count(e)) return CUDA_ERROR_INVALID_VALUE;
        if (e->ctx != s->ctx) return CUDA_ERROR_INVALID_CONTEXT;
        nodes = e->nodes;
        for (const GraphNode& n : *nodes) {
            if (n.kind != FAKE_CUDA_NODE_KERNEL) continue;
            if (!S().functions.count(n.fn)) {  // a GPU would run freed code
                std::fprintf(stderr, "fake_cuda: cuGraphLaunch of a graph whose kernel's module was unloaded\n");
                return CUDA_ERROR_INVALID_VALUE;
            }
        }
        for (const GraphNode& n : *nodes) {
            if (n.kind != FAKE_CUDA_NODE_KERNEL) continue;
            std::vector<void*> values;
            for (const auto& v : n.params) values.push_back(const_cast<unsigned char*>(v.data()));
            runs.push_back(accept_kernel(n.fn, n.grid, n.block, n.shared, values.data(), s->serial));
        }
        ++S().graph_launch_count;
    }
    CUctx_st* c = s->ctx;
    s->push([nodes, runs = std::move(runs), c](bool ok) -> CUresult {
        CUresult failed = CUDA_SUCCESS;
        size_t k = 0;
        for (const GraphNode& n : *nodes) {
            ok = ok && failed == CUDA_SUCCESS && c->sticky.load() == CUDA_SUCCESS;
            switch (n.kind) {
                case FAKE_CUDA_NODE_KERNEL: {
                    CUresult r = run_kernel(runs[k++], ok);
                    if (ok && r != CUDA_SUCCESS) failed = r;
                    break;
                }
                case FAKE_CUDA_NODE_MEMCPY:
                    if (ok) failed = run_copy(n.dst, n.src, n.bytes, n.dst_type == CU_MEMORYTYPE_DEVICE ? 1 : -1,
                                              n.src_type == CU_MEMORYTYPE_DEVICE ? 1 : -1, nullptr);
                    break;
                case FAKE_CUDA_NODE_MEMSET:
                    if (ok) failed = run_fill(n.dst, n.value, n.element, n.bytes);
                    break;
                case FAKE_CUDA_NODE_HOST:
                    if (ok) call_on_callback_thread(c, n.host, n.user);
                    break;
                default:
                    break;
            }
        }
        return failed;
    });
    return CUDA_SUCCESS;
}

// ---- virtual memory management: reservations are PROT_NONE mappings, "physical" chunks become readable and
// writable at cuMemSetAccess and are dropped (MADV_DONTNEED) at cuMemUnmap.

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp* prop,
                                               CUmemAllocationGranularity_flags) {
    if (!g || !prop) return CUDA_ERROR_INVALID_VALUE;
    *g = kGranularity;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags) {
    if (!ptr || size == 0 || size % kGranularity || addr || flags || (alignment && alignment % kGranularity))
        return CUDA_ERROR_INVALID_VALUE;
    // Over-reserve to align the start to the granularity, then trim.
    size_t span = size + kGranularity;
    void* p = ::mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base = reinterpret_cast<uintptr_t>(p), start = (base + kGranularity - 1) / kGranularity * kGranularity;
    if (start > base) ::munmap(p, start - base);
    if (base + span > start + size) ::munmap(reinterpret_cast<void*>(start + size), base + span - start - size);
    std::lock_guard lock(S().m);
    S().reservations.emplace(start, size);
    *ptr = start;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    std::lock_guard lock(S().m);
    auto it = S().reservations.find(ptr);
    if (it == S().reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
    auto m = S().mappings.lower_bound(ptr);
    if (m != S().mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;  // still mapped
    ::munmap(reinterpret_cast<void*>(ptr), size);
    S().reservations.erase(it);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp* prop,
                             unsigned long long flags) {
    if (!h || !prop || flags || size == 0 || size % kGranularity) return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_device(prop->location.id)) return r;
    std::lock_guard lock(S().m);
    CUctx_st* c = S().contexts[static_cast<size_t>(prop->location.id)].get();
    if (c->refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (size > S().capacity - c->used) return CUDA_ERROR_OUT_OF_MEMORY;
    c->used += size;
    *h = S().next_handle++;
    S().vm_handles.emplace(*h, VmHandle{size, c});
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle h) {
    std::lock_guard lock(S().m);
    auto it = S().vm_handles.find(h);
    if (it == S().vm_handles.end()) return CUDA_ERROR_INVALID_VALUE;
    it->second.ctx->used -= it->second.bytes;  // a mapping still using it keeps its bytes (fake: accounted here)
    S().vm_handles.erase(it);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                          unsigned long long flags) {
    if (offset || flags || size == 0 || ptr % kGranularity) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(S().m);
    if (int r = std::exchange(S().fail_next_map, CUDA_SUCCESS)) return static_cast<CUresult>(r);
    auto hv = S().vm_handles.find(h);
    if (hv == S().vm_handles.end() || hv->second.bytes != size) return CUDA_ERROR_INVALID_VALUE;
    auto r = S().reservations.upper_bound(ptr);
    if (r == S().reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
    --r;
    if (ptr + size > r->first + r->second) return CUDA_ERROR_INVALID_VALUE;  // outside any reservation
    auto m = S().mappings.lower_bound(ptr);
    if (m != S().mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;  // already mapped
    if (m != S().mappings.begin() && std::prev(m)->first + std::prev(m)->second.bytes > ptr) return CUDA_ERROR_INVALID_VALUE;
    S().mappings.emplace(ptr, Mapping{size, false});
    return CUDA_SUCCESS;
}

/// Over one mapping or several adjacent ones: "the range must be a fully mapped address range".
CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
    if (!desc || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(S().m);
    ++S().set_access_calls;
    auto m = S().mappings.find(ptr);
    for (uintptr_t at = ptr; at < ptr + size; at += m->second.bytes, ++m)
        if (m == S().mappings.end() || m->first != at || at + m->second.bytes > ptr + size) return CUDA_ERROR_INVALID_VALUE;
    if (::mprotect(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    for (m = S().mappings.find(ptr); m != S().mappings.end() && m->first < ptr + size; ++m) m->second.accessible = true;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
    std::lock_guard lock(S().m);
    auto m = S().mappings.find(ptr);
    if (m == S().mappings.end() || m->second.bytes != size) return CUDA_ERROR_INVALID_VALUE;
    ::madvise(reinterpret_cast<void*>(ptr), size, MADV_DONTNEED);
    ::mprotect(reinterpret_cast<void*>(ptr), size, PROT_NONE);
    S().mappings.erase(m);
    return CUDA_SUCCESS;
}

// ================================================================================================ test API

int fake_cuda_launch_count(void) {
    std::lock_guard lock(S().m);
    return S().launch_count;
}

int fake_cuda_last_launch(FakeCudaLaunch* out) {
    std::lock_guard lock(S().m);
    if (!out || S().launch_count == 0) return 0;
    *out = S().last_launch;
    return 1;
}

void fake_cuda_reset_launches(void) {
    std::lock_guard lock(S().m);
    S().launch_count = 0;
    S().last_launch = FakeCudaLaunch{};
}

void fake_cuda_inject_fault(int code) {
    std::lock_guard lock(S().m);
    S().inject_fault = code;
}

int fake_cuda_live_allocations(void) {
    std::lock_guard lock(S().m);
    return static_cast<int>(S().allocs.size());
}

int fake_cuda_live_modules(void) {
    std::lock_guard lock(S().m);
    return static_cast<int>(S().modules.size());
}

int fake_cuda_unsafe_unloads(void) {
    std::lock_guard lock(S().m);
    return S().unsafe_unloads;
}

void fake_cuda_drain(void) {
    std::vector<CUstream_st*> streams;
    {
        std::lock_guard lock(S().m);
        streams.assign(S().streams.begin(), S().streams.end());
    }
    for (CUstream_st* s : streams) s->drain();  // streams are destroyed only by their owner, not during a test's drain
}

void fake_cuda_assert_next_launch_at(const char* kernel, const char* expr, const char* file, int line,
                                     const unsigned* block, const unsigned* thread) {
    std::lock_guard lock(S().m);
    auto& a = S().assert_next;
    a.armed = true;
    a.kernel = kernel ? kernel : "";
    a.expr = expr ? expr : "";
    a.file = file ? file : "";
    a.line = line;
    for (int d = 0; d < 3; ++d) a.block[d] = block ? block[d] : 0, a.thread[d] = thread ? thread[d] : 0;
}

void fake_cuda_assert_next_launch(const char* expr, const char* file, int line) {
    fake_cuda_assert_next_launch_at(nullptr, expr, file, line, nullptr, nullptr);
}

int fake_cuda_exec_nodes(FakeCudaGraphNode* out, int max) {
    std::lock_guard lock(S().m);
    if (!S().instantiated) return -1;
    std::shared_ptr<const GraphNodes> nodes = S().last_exec ? S().last_exec->nodes : S().last_exec_nodes;
    const int count = static_cast<int>(nodes->size());
    for (int i = 0; out && i < count && i < max; ++i) {
        const GraphNode& n = (*nodes)[static_cast<size_t>(i)];
        FakeCudaGraphNode& o = out[i];
        o = FakeCudaGraphNode{};
        o.kind = n.kind;
        o.num_deps = static_cast<int>(n.deps.size());
        for (size_t d = 0; d < n.deps.size() && d < 8; ++d) o.deps[d] = n.deps[d];
        if (n.kind == FAKE_CUDA_NODE_KERNEL) {
            std::snprintf(o.kernel, sizeof o.kernel, "%s", S().functions.count(n.fn) ? n.fn->name.c_str() : "?");
            for (int d = 0; d < 3; ++d) o.grid[d] = n.grid[d], o.block[d] = n.block[d];
            for (size_t p = 0; p < n.params.size() && p < 8; ++p)
                std::memcpy(&o.param_u64[p], n.params[p].data(), std::min<size_t>(8, n.params[p].size()));
        }
        o.bytes = n.kind == FAKE_CUDA_NODE_MEMSET ? n.bytes * n.element : n.bytes;
        o.dst_memory_type = n.dst_type;
        o.src_memory_type = n.src_type;
        o.value = n.value;
    }
    return count;
}

int fake_cuda_graph_launch_count(void) {
    std::lock_guard lock(S().m);
    return S().graph_launch_count;
}

int fake_cuda_graph_instantiate_count(void) {
    std::lock_guard lock(S().m);
    return S().instantiate_count;
}

int fake_cuda_live_graphs(void) {
    std::lock_guard lock(S().m);
    return static_cast<int>(S().graphs.size());
}

int fake_cuda_live_graph_execs(void) {
    std::lock_guard lock(S().m);
    return static_cast<int>(S().execs.size());
}

void fake_cuda_fail_next_map(int code) {
    std::lock_guard lock(S().m);
    S().fail_next_map = code;
}

int fake_cuda_set_access_count(void) {
    std::lock_guard lock(S().m);
    return S().set_access_calls;
}

int fake_cuda_host_func_count(void) {
    std::lock_guard lock(S().m);
    return S().host_func_calls;
}

int fake_cuda_launches_execute(void) { return 0; }

void fake_cuda_set_kernel_time_ns(long long ns) { g_kernel_time_ns = ns; }

int fake_cuda_event_create_count(void) { return g_event_creates.load(); }

int fake_cuda_elapsed_time_count(void) { return g_elapsed_times.load(); }

int fake_cuda_live_host_allocations(void) {
    std::lock_guard lock(S().m);
    return static_cast<int>(S().host_allocs.size());
}

}  // extern "C"
