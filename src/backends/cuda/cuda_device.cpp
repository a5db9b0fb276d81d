// The cuda backend: enumeration over the driver, device properties, memory (cuMemAlloc, pinned, VMM pool hooks).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <sstream>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/registry.hpp"
#include "core/error.hpp"
#include "kernels/target.hpp"

namespace rt::cuda {

namespace {

int attribute(const Driver& d, CUdevice dev, CUdevice_attribute a, int fallback) {
    int v = 0;
    return d.cuDeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS ? v : fallback;
}

}  // namespace

CudaDevice::CudaDevice(const Driver& d, int ordinal) : d_(d), ordinal_(ordinal) {
    CU_CHECK(d_, cuDeviceGet(&dev_, ordinal));
    CU_CHECK(d_, cuDevicePrimaryCtxRetain(&ctx_, dev_));
    char name[256] = {};
    if (d_.cuDeviceGetName(name, sizeof name - 1, dev_) != CUDA_SUCCESS) std::strcpy(name, "unknown NVIDIA GPU");
    size_t total = 0;
    d_.cuDeviceTotalMem(&total, dev_);
    info_.backend = "cuda";
    info_.backend_ordinal = ordinal;
    info_.name = "cuda:" + std::to_string(ordinal) + " (" + name + ")";
    info_.total_memory = total;
    info_.compute_units = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1);
    info_.max_threads_per_block = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024);
    info_.max_grid_size[0] = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647);
    info_.max_grid_size[1] = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535);
    info_.max_grid_size[2] = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535);
    info_.max_block_size[0] = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024);
    info_.max_block_size[1] = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024);
    info_.max_block_size[2] = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64);
    info_.compute_capability_major = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0);
    info_.compute_capability_minor = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0);
    info_.max_shared_bytes =
        static_cast<size_t>(attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 48 * 1024));
    info_.host_addressable = false;
    info_.max_shared_bytes_optin = static_cast<size_t>(
        attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, static_cast<int>(info_.max_shared_bytes)));
    info_.shared_bytes_per_unit = static_cast<size_t>(attribute(
        d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, static_cast<int>(info_.max_shared_bytes)));
    info_.subgroup_size = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32);
    info_.clock_rate_khz = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0);
    info_.memory_clock_rate_khz = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 0);
    info_.memory_bus_width = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 0);
    info_.l2_cache_bytes = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 0);
    info_.total_constant_kib = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 64 * 1024) / 1024;
    info_.concurrent_kernels = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1) != 0;
    info_.managed_memory = d_.cuMemAllocManaged && attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0) != 0;
    info_.concurrent_managed_access = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0) != 0;
    if (d_.cuDeviceGetUuid) {
        CUuuid uuid{};
        if (d_.cuDeviceGetUuid(&uuid, dev_) == CUDA_SUCCESS) std::memcpy(info_.uuid, uuid.bytes, sizeof info_.uuid);
    }
    if (d_.cuStreamCreateWithPriority && d_.cuCtxGetStreamPriorityRange) {
        int least = 0, greatest = 0;
        make_current(d_, ctx_);
        if (d_.cuCtxGetStreamPriorityRange(&least, &greatest) == CUDA_SUCCESS && least == 0)
            info_.greatest_stream_priority = greatest;
    }
    info_.portable_host_memory = true;  // cuMemHostAlloc(PORTABLE): pinned for every context, plain memory for cpu
    arch_ = "sm_" + std::to_string(info_.compute_capability_major) + std::to_string(info_.compute_capability_minor);

    // rt_assert's record: pinned host memory the GPU writes through its device address (kernel.h). Without it
    // (the driver refused) kernels fall back to printf + trap, which loses the context.
    make_current(d_, ctx_);
    void* record = nullptr;
    if (d_.cuMemHostAlloc(&record, sizeof(RtCudaFaultRecord), CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) ==
        CUDA_SUCCESS) {
        std::memset(record, 0, sizeof(RtCudaFaultRecord));
        if (d_.cuMemHostGetDevicePointer(&fault_record_device_, record, 0) == CUDA_SUCCESS) {
            fault_record_ = static_cast<RtCudaFaultRecord*>(record);
        } else {
            fault_record_device_ = 0;
            d_.cuMemFreeHost(record);
        }
    }
    target_ = std::make_unique<CudaTarget>(arch_, false, &d_, ctx_, fault_record_device_);

    // Pool reservations through virtual memory management, when the driver and device support it.
    if (d_.cuMemAddressReserve && d_.cuMemAddressFree && d_.cuMemCreate && d_.cuMemRelease && d_.cuMemMap &&
        d_.cuMemUnmap && d_.cuMemSetAccess && d_.cuMemGetAllocationGranularity &&
        attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0)) {
        CUmemAllocationProp prop{};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = dev_;
        size_t g = 0;
        if (d_.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS) granularity_ = g;
    }
}

CudaDevice::~CudaDevice() {
    modules_.clear();
    anchor_.reset();  // the queues, which hold anchors too, are gone
    if (anchor_stream_) {
        enter_quietly();
        d_.cuStreamDestroy(anchor_stream_);
    }
    if (fault_record_) {
        enter_quietly();
        d_.cuMemFreeHost(fault_record_);
    }
    d_.cuDevicePrimaryCtxRelease(dev_);  // the last release destroys the context: a lost device starts afresh
    // Every stream was synchronized and destroyed: what remains was dropped by the driver after a context error.
    for (HostWork* w : host_work_) delete w;
    graph_host_nodes_.clear();
}

TraceAnchor::~TraceAnchor() {
    if (!event) return;
    make_current_quietly(d, ctx);
    d.cuEventDestroy(event);
}

std::shared_ptr<const TraceAnchor> CudaDevice::trace_anchor() {
    std::lock_guard lock(anchor_mutex_);
    if (anchor_ && trace::now() < anchor_->renew_at) return anchor_;
    enter();
    if (!anchor_stream_) CU_DEVICE_CHECK(*this, cuStreamCreate(&anchor_stream_, CU_STREAM_NON_BLOCKING));
    auto a = std::make_shared<TraceAnchor>(d_, ctx_);
    CU_DEVICE_CHECK(*this, cuEventCreate(&a->event, CU_EVENT_DEFAULT));
    // The stream is idle (only this function, under the lock, uses it): the record completes as soon as the GPU takes
    // it, and the wait is that short.
    const int64_t before = trace::now();
    CU_DEVICE_CHECK(*this, cuEventRecord(a->event, anchor_stream_));
    CU_DEVICE_CHECK(*this, cuEventSynchronize(a->event));
    const int64_t after = trace::now();
    a->ticks = before + (after - before) / 2;
    a->error = (after - before + 1) / 2;
    a->renew_at = after + static_cast<int64_t>(static_cast<double>(kAnchorLifetimeNs) / trace::ns_per_tick());
    anchor_ = a;
    return anchor_;
}

void CudaDevice::track_graph_host_nodes(std::shared_ptr<GraphHostNodes> nodes) {
    std::lock_guard lock(host_work_lock_);
    GraphHostNodes* key = nodes.get();
    graph_host_nodes_.emplace(key, std::move(nodes));
}

std::shared_ptr<GraphHostNodes> CudaDevice::untrack_graph_host_nodes(GraphHostNodes* nodes) noexcept {
    std::lock_guard lock(host_work_lock_);
    auto it = graph_host_nodes_.find(nodes);
    if (it == graph_host_nodes_.end()) return nullptr;
    std::shared_ptr<GraphHostNodes> out = std::move(it->second);
    graph_host_nodes_.erase(it);
    return out;
}

std::shared_ptr<backend::GraphExecutable> CudaDevice::compile_graph_impl(
    const std::shared_ptr<const graph::Program>& program) {
    if (!d_.has_graphs()) return nullptr;  // an older driver: the core replays the commands on the stream
    return std::make_shared<CudaGraph>(*this, program);
}

HostWork* CudaDevice::track_host_work(std::unique_ptr<HostWork> work) {
    std::lock_guard lock(host_work_lock_);
    host_work_.insert(work.get());
    return work.release();
}

void CudaDevice::forget_host_work(HostWork* work) noexcept {
    {
        std::lock_guard lock(host_work_lock_);
        host_work_.erase(work);
    }
    delete work;
}

bool CudaDevice::read_assert(std::string* what, bool take, FaultSite* site) {
    if (!fault_record_) return false;
    std::lock_guard lock(fault_mutex_);
    // The failing thread writes the fields, fences, then sets `ready`; nothing writes them again until `claimed` is
    // cleared here.
    std::atomic_ref<unsigned> ready(fault_record_->ready);
    if (ready.load(std::memory_order_acquire) != 1) return false;
    const RtCudaFaultRecord& f = *fault_record_;
    const std::string expr(f.expr, strnlen(f.expr, sizeof f.expr)), file(f.file, strnlen(f.file, sizeof f.file));
    *what = format("rt_assert(%s) failed at %s:%d in block (%u,%u,%u) thread (%u,%u,%u)", expr.c_str(), file.c_str(),
                   f.line, f.block[0], f.block[1], f.block[2], f.thread[0], f.thread[1], f.thread[2]);
    if (site) *site = FaultSite{{f.block[0], f.block[1], f.block[2]}, {f.thread[0], f.thread[1], f.thread[2]}};
    if (take) {
        ready.store(0, std::memory_order_relaxed);
        std::atomic_ref<unsigned>(fault_record_->claimed).store(0, std::memory_order_release);
    }
    return true;
}

void CudaDevice::mark_lost(const std::string& why) const noexcept {
    try {
        std::lock_guard lock(lost_mutex_);
        if (lost_why_.empty()) lost_why_ = why;
    } catch (...) {
    }
    lost_.store(true, std::memory_order_release);
}

void CudaDevice::throw_lost(rtError_t code) const {
    std::string why;
    {
        std::lock_guard lock(lost_mutex_);
        why = lost_why_;
    }
    fail(code,
         "%s is unusable: its CUDA context was lost to an earlier fault (%s); a CUDA context cannot recover from "
         "it, so every later operation on this device fails (rtFinalize then rtInit starts a fresh context, but only "
         "if the runtime held the last reference to the device's primary context: another library of the process "
         "that uses the GPU, such as CuPy or PyTorch, keeps the context, and its fault, alive)",
         info_.name.c_str(), why.c_str());
}

void CudaDevice::refuse_in_callback() const {
    fail(RT_ERROR_NOT_PERMITTED,
         "%s: CUDA cannot be called from inside a host function: the driver runs host functions on its own thread "
         "and forbids every CUDA call there (one that waits would deadlock); queue the work from another thread, or "
         "record an event and act on it there (memory freed in a host function is released later)",
         info_.name.c_str());
}

void CudaDevice::fail_call(CUresult r, const char* what) const {
    if (!is_sticky(r)) throw_driver_error(d_, r, what);
    mark_lost(std::string(what) + " returned " + describe(d_, r));
    throw_lost(RT_ERROR_LAUNCH_FAILED);  // the failed operation itself; later calls find the device lost
}

void* CudaDevice::allocate_impl(size_t bytes) {
    enter();
    CUdeviceptr p = 0;
    CUresult r = d_.cuMemAlloc(&p, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;  // the core reports it with the figures
    check(r, "cuMemAlloc");
    return reinterpret_cast<void*>(p);
}

void CudaDevice::free_impl(void* ptr, size_t) {
    enter_for_release();
    d_.cuMemFree(reinterpret_cast<CUdeviceptr>(ptr));  // fails only on a lost context, where memory is gone anyway
}

namespace {
/// The host memory the backend page-locked (cuMemHostAlloc, PORTABLE: pinned for every context), by address.
struct PinnedRanges {
    SpinLock lock;  // held for a map lookup
    std::map<uintptr_t, size_t> ranges;
};
PinnedRanges& pinned_ranges() {
    static PinnedRanges* p = new PinnedRanges;  // never destroyed: frees may come during static destruction
    return *p;
}
}  // namespace

bool is_pinned_host(const void* ptr, size_t bytes) {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    PinnedRanges& pr = pinned_ranges();
    std::lock_guard lock(pr.lock);
    auto it = pr.ranges.upper_bound(p);
    if (it == pr.ranges.begin()) return false;
    --it;
    return p - it->first < it->second && bytes <= it->second - (p - it->first);
}

void* CudaDevice::allocate_host_impl(size_t bytes) {
    enter();
    void* p = nullptr;
    CUresult r = d_.cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
    check(r, "cuMemHostAlloc");
    try {
        std::lock_guard lock(pinned_ranges().lock);
        pinned_ranges().ranges[reinterpret_cast<uintptr_t>(p)] = bytes;
    } catch (...) {
        d_.cuMemFreeHost(p);
        return nullptr;
    }
    return p;
}

void CudaDevice::free_host_impl(void* ptr, size_t) {
    enter_for_release();
    {
        std::lock_guard lock(pinned_ranges().lock);
        pinned_ranges().ranges.erase(reinterpret_cast<uintptr_t>(ptr));
    }
    d_.cuMemFreeHost(ptr);
}

void CudaDevice::mem_info_impl(size_t* free_bytes, size_t* total_bytes) {
    enter();
    CU_DEVICE_CHECK(*this, cuMemGetInfo(free_bytes, total_bytes));
}

void* CudaDevice::reserve_impl(size_t bytes) {
    if (!granularity_) return nullptr;  // no virtual memory management: the pool allocates up front
    enter();
    if (bytes > SIZE_MAX - granularity_ + 1) return nullptr;  // rounded up to the granularity it would wrap
    size_t size = (bytes + granularity_ - 1) / granularity_ * granularity_;
    CUdeviceptr p = 0;
    if (d_.cuMemAddressReserve(&p, size, granularity_, 0, 0) != CUDA_SUCCESS) return nullptr;
    return reinterpret_cast<void*>(p);
}

// Physical memory is mapped in chunks of the allocation granularity (2 MiB on current GPUs), each counting
// the committed bytes of pool blocks inside it: blocks smaller than a chunk share it, and a chunk is
// unmapped when its last committed block is decommitted (cuMemUnmap cannot unmap part of a mapping). A run of new
// chunks is mapped chunk by chunk (one handle each, so each can go on its own) and made accessible by one
// cuMemSetAccess over the run: cuda.h marks it synchronising, so once per run, not once per chunk.
bool CudaDevice::commit_impl(void* ptr, size_t bytes) {
    enter();
    const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr), end = begin + bytes, g = granularity_;
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev_;
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    std::lock_guard lock(vmm_mutex_);
    std::vector<uintptr_t> fresh;  // chunks this call mapped, undone on failure
    CUresult r = CUDA_SUCCESS;
    const char* what = "";
    for (uintptr_t c = begin / g * g; c < end && r == CUDA_SUCCESS;) {
        if (chunks_.count(c)) {
            c += g;
            continue;
        }
        const uintptr_t run = c;
        for (; c < end && !chunks_.count(c); c += g) {
            CUmemGenericAllocationHandle h = 0;
            if ((r = d_.cuMemCreate(&h, g, &prop, 0)) != CUDA_SUCCESS) {
                what = "cuMemCreate";
                break;
            }
            if ((r = d_.cuMemMap(c, g, 0, h, 0)) != CUDA_SUCCESS) {
                d_.cuMemRelease(h);
                what = "cuMemMap";
                break;
            }
            chunks_.emplace(c, Chunk{h, 0});
            fresh.push_back(c);
        }
        if (r == CUDA_SUCCESS && (r = d_.cuMemSetAccess(run, c - run, &access, 1)) != CUDA_SUCCESS) what = "cuMemSetAccess";
    }
    if (r != CUDA_SUCCESS) {
        for (uintptr_t c : fresh) {
            auto it = chunks_.find(c);
            d_.cuMemUnmap(c, g);
            d_.cuMemRelease(it->second.handle);
            chunks_.erase(it);
        }
        if (r == CUDA_ERROR_OUT_OF_MEMORY) return false;  // the pool trims its cache and retries, or reports it
        check(r, what);  // anything else is not "full": it says what failed
    }
    for (uintptr_t c = begin / g * g; c < end; c += g)
        chunks_.at(c).committed += std::min<uintptr_t>(end, c + g) - std::max<uintptr_t>(begin, c);
    return true;
}

void CudaDevice::release_range(uintptr_t begin, size_t bytes) noexcept {
    const uintptr_t end = begin + bytes, g = granularity_;
    for (uintptr_t c = begin / g * g; c < end; c += g) {
        auto it = chunks_.find(c);
        if (it == chunks_.end()) continue;
        size_t overlap = std::min<uintptr_t>(end, c + g) - std::max<uintptr_t>(begin, c);
        it->second.committed -= std::min(overlap, it->second.committed);
        if (it->second.committed == 0) {
            d_.cuMemUnmap(c, g);
            d_.cuMemRelease(it->second.handle);
            chunks_.erase(it);
        }
    }
}

void CudaDevice::decommit_impl(void* ptr, size_t bytes) {
    enter_for_release();
    std::lock_guard lock(vmm_mutex_);
    release_range(reinterpret_cast<uintptr_t>(ptr), bytes);
}

void CudaDevice::unreserve_impl(void* ptr, size_t bytes) {
    enter_for_release();
    size_t size = (bytes + granularity_ - 1) / granularity_ * granularity_;
    uintptr_t begin = reinterpret_cast<uintptr_t>(ptr);
    {
        std::lock_guard lock(vmm_mutex_);  // nothing should remain mapped; unmap whatever does
        for (auto it = chunks_.lower_bound(begin); it != chunks_.end() && it->first < begin + size;) {
            d_.cuMemUnmap(it->first, granularity_);
            d_.cuMemRelease(it->second.handle);
            it = chunks_.erase(it);
        }
    }
    d_.cuMemAddressFree(reinterpret_cast<CUdeviceptr>(ptr), size);
}

std::unique_ptr<backend::Queue> CudaDevice::create_queue_impl(unsigned, int priority) {
    enter();
    return std::make_unique<CudaQueue>(*this, priority);
}

void* CudaDevice::allocate_managed_impl(size_t bytes) {
    enter();
    if (!d_.cuMemAllocManaged) fail(RT_ERROR_NOT_SUPPORTED, "the CUDA driver has no cuMemAllocManaged");
    CUdeviceptr p = 0;
    CUresult r = d_.cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
    check(r, "cuMemAllocManaged");
    return reinterpret_cast<void*>(p);
}

bool CudaDevice::can_access_peer_impl(const backend::Device& peer) const {
    if (!d_.cuDeviceCanAccessPeer) return false;
    int can = 0;
    CU_CHECK(d_, cuDeviceCanAccessPeer(&can, dev_, static_cast<const CudaDevice&>(peer).cu_device()));
    return can != 0;
}

void CudaDevice::enable_peer_access_impl(backend::Device& peer) {
    enter();
    if (!d_.cuCtxEnablePeerAccess) fail(RT_ERROR_NOT_SUPPORTED, "the CUDA driver has no cuCtxEnablePeerAccess");
    CUresult r = d_.cuCtxEnablePeerAccess(static_cast<CudaDevice&>(peer).context(), 0);
    if (r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return;  // the core refuses a second enable itself
    check(r, "cuCtxEnablePeerAccess");
}

std::unique_ptr<backend::Event> CudaDevice::create_event_impl(bool timing, bool blocking_sync) {
    enter();
    return std::make_unique<CudaEvent>(*this, timing, blocking_sync);
}

namespace {

/// The cuda backend's rtInit options (cuda.enable).
struct CudaOptions {
    bool enable = true;
    std::string disabled_by;  ///< when !enable: the setting that said so ("rtInit: cuda.enable=0"), for messages
    bool operator==(const CudaOptions& o) const { return enable == o.enable; }
};
using CudaOptionsObject = backend::OptionsOf<CudaOptions>;

std::unique_ptr<backend::Options> parse_cuda_options(const std::vector<backend::Setting>& settings) {
    CudaOptions o;
    for (const backend::Setting& s : settings) {
        if (s.key != "enable") continue;
        o.enable = backend::parse_switch(s, "a switch");
        o.disabled_by = o.enable ? "" : s.origin + "=" + s.value;
    }
    return std::make_unique<CudaOptionsObject>(o);
}

}  // namespace

/// The cuda backend over the driver: no devices (and a reason) when the driver cannot be used or cuda.enable=0.
/// Every GPU is started here (its primary context retained); one that fails to start — exclusive-process mode,
/// out of memory, a GPU off the bus — is left out, with the reason, and the others (and the cpu devices) work.
class CudaBackend final : public backend::Backend {
public:
    explicit CudaBackend(const CudaOptions& o) : d_(o.enable ? &driver() : nullptr) {
        if (!o.enable) {
            why_ = "the cuda backend is disabled (" + o.disabled_by + ")";
            return;
        }
        if (!d_->available) {
            why_ = d_->why;
            return;
        }
        int count = 0;
        CUresult r = d_->cuDeviceGetCount(&count);
        if (r != CUDA_SUCCESS) {
            why_ = "cuDeviceGetCount failed: " + describe(*d_, r);
            return;
        }
        if (count == 0) {
            why_ = "the CUDA driver (" + d_->library + ") reports no devices";
            return;
        }
        for (int i = 0; i < count; ++i) {
            try {
                devices_.push_back(std::make_unique<CudaDevice>(*d_, i));
            } catch (const std::exception& e) {
                why_ += (why_.empty() ? "" : "; ") + format("cuda:%d cannot be used (left out): %s", i, e.what());
            }
        }
    }
    const char* name() const override { return "cuda"; }
    int device_count() const override { return static_cast<int>(devices_.size()); }
    /// The i-th GPU that started (its backend ordinal is the driver's: cuda:1 stays cuda:1 when cuda:0 failed).
    std::unique_ptr<backend::Device> create_device(int index) override {
        return std::move(devices_.at(static_cast<size_t>(index)));
    }
    std::string unavailable_reason() const override { return why_; }

private:
    const Driver* d_;  ///< null when disabled: the driver is not even opened
    std::vector<std::unique_ptr<CudaDevice>> devices_;  ///< started, handed to the core by create_device
    std::string why_;
};

}  // namespace rt::cuda

namespace rt::backend {
/// The cuda backend (RUNTIME_WITH_CUDA builds): enumerated after cpu.
void register_cuda_backend(Registry& registry) {
    BackendEntry e;
    e.name = "cuda";
    e.order = 100;
    e.options = {{"enable", {}, "RUNTIME_CUDA"}};
    e.parse = cuda::parse_cuda_options;
    e.create = [](const Options& o) -> std::unique_ptr<Backend> {
        return std::make_unique<cuda::CudaBackend>(static_cast<const cuda::CudaOptionsObject&>(o).value);
    };
    registry.add(std::move(e));
}
}  // namespace rt::backend
