// The cpu backend: devices made of host memory and the shared executor pool; capacity accounting.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>

#include "backends/backend.hpp"
#include "backends/cpu/cpu_executor.hpp"
#include "backends/cpu/cpu_graph.hpp"
#include "backends/cpu/cpu_kernel.hpp"
#include "backends/cpu/cpu_memory.hpp"
#include "backends/cpu/cpu_target.hpp"
#include "backends/cpu/cpu_queue.hpp"
#include "backends/registry.hpp"

namespace rt::cpu {

namespace {

/// Pinned host memory (rtMallocHost) this large comes straight from mmap: page-aligned, committed on first touch,
/// returned to the system at once on free, and eligible for transparent huge pages (fewer faults and TLB misses).
/// Device memory never comes from here: DeviceHeap (cpu_memory.hpp).
constexpr size_t kMapBytes = size_t{1} << 20;
constexpr size_t kAlignment = 256;  // as cudaMalloc guarantees

void* host_allocate(size_t bytes) {
    if (bytes >= kMapBytes) {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
        madvise(p, bytes, MADV_HUGEPAGE);
#endif
        return p;
    }
    return std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
}

void host_free(void* p, size_t bytes) {
    if (bytes >= kMapBytes) munmap(p, bytes);
    else std::free(p);
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
            auto colon = line.find(':');
            if (colon != std::string::npos) {
                std::string m = line.substr(colon + 1);
                size_t b = m.find_first_not_of(" \t");
                return b == std::string::npos ? "unknown CPU" : m.substr(b);
            }
        }
    }
    return "unknown CPU";
}

/// The last-level cache of one core's cluster (sysfs, e.g. "32768K"; else sysconf; else 32 MiB).
size_t last_level_cache_bytes() {
    for (int index = 4; index >= 2; --index) {
        std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
        size_t bytes = 0;
        char unit = 0;
        if (in >> bytes) {
            if (in >> unit && (unit == 'K' || unit == 'k')) bytes <<= 10;
            else if (unit == 'M' || unit == 'm') bytes <<= 20;
            if (bytes) return bytes;
        }
    }
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? static_cast<size_t>(l3) : size_t{32} << 20;
}

/// The cpu backend's rtInit options (cpu.devices, cpu.memory, cpu.executors, cpu.stream_min_bytes, cpu.ipc_memory).
struct CpuOptions {
    int devices = 1;
    size_t memory = 0;  ///< each device's capacity; 0 = half the physical memory
    int executors = 0;  ///< executor threads; 0 = one per hardware thread
    /// Launches of kernels with staged outputs that write at least this much stream them past the cache
    /// (rt_cpu_launch.stream_min_bytes); unset = the last-level cache size.
    std::optional<size_t> stream_min_bytes;
    /// Device allocations of DeviceHeap::kShareableBytes or more live in shareable memory that rtIpcGetMemHandle can
    /// export. Off by default: shareable (shmem) memory gets no transparent huge pages, which costs large copies and
    /// streaming kernels 10-20% (runtime-bench-core: D2D 256 MiB 19.3 -> 15.0 GB/s, out = in * 2 5.7 -> 6.3 ms).
    bool ipc_memory = false;
    bool operator==(const CpuOptions&) const = default;
};
using CpuOptionsObject = backend::OptionsOf<CpuOptions>;

std::unique_ptr<backend::Options> parse_cpu_options(const std::vector<backend::Setting>& settings) {
    CpuOptions o;
    for (const backend::Setting& s : settings) {
        if (s.key == "devices") o.devices = backend::parse_count(s, "a device count", 1, 1024);
        else if (s.key == "memory") o.memory = backend::parse_bytes(s, "a size", false);
        else if (s.key == "executors") o.executors = backend::parse_count(s, "a thread count", 1, 1024);
        else if (s.key == "stream_min_bytes") o.stream_min_bytes = backend::parse_bytes(s, "a size", true);
        else if (s.key == "ipc_memory") o.ipc_memory = backend::parse_switch(s, "a switch");
    }
    return std::make_unique<CpuOptionsObject>(o);
}

/// Kernels with staged outputs stream them past the cache when a launch writes at least this much
/// (option cpu.stream_min_bytes; default: the last-level cache, which such output would only flush).
/// Targets without streaming stores never stream.
unsigned long long stream_min_bytes(const CpuOptions& o) {
#if defined(__x86_64__) || defined(__i386__)
    return o.stream_min_bytes ? *o.stream_min_bytes : last_level_cache_bytes();
#else
    (void)o;
    return ~0ull;
#endif
}

size_t physical_memory() {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : size_t{1} << 32;
}

/// A cpu device's UUID: stable for one machine and ordinal — an FNV-1a hash of the machine id (systemd's
/// /etc/machine-id, else the host name) and the ordinal, stretched over 16 bytes, with the RFC 4122 variant and
/// version-8 (custom) bits set.
void make_uuid(int ordinal, unsigned char out[16]) {
    std::string seed;
    if (FILE* f = std::fopen("/etc/machine-id", "r")) {
        char buf[64] = {};
        if (std::fgets(buf, sizeof buf, f)) seed = buf;
        std::fclose(f);
    }
    if (seed.empty()) {
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        seed = host;
    }
    seed += "/runtime-cpu/" + std::to_string(ordinal);
    uint64_t h[2] = {1469598103934665603ull, 1099511628211ull ^ 0x9e3779b97f4a7c15ull};
    for (int half = 0; half < 2; ++half)
        for (unsigned char c : seed) h[half] = (h[half] ^ c) * 1099511628211ull + static_cast<uint64_t>(half);
    std::memcpy(out, h, 16);
    out[6] = static_cast<unsigned char>((out[6] & 0x0f) | 0x80);
    out[8] = static_cast<unsigned char>((out[8] & 0x3f) | 0x80);
}

class CpuDevice final : public backend::Device {
public:
    CpuDevice(Executor& executor, int ordinal, size_t capacity, unsigned long long stream_min_bytes, bool ipc_memory)
        : executor_(executor), stream_min_bytes_(stream_min_bytes), heap_(ipc_memory) {
        info_.backend = "cpu";
        info_.backend_ordinal = ordinal;
        info_.name = "cpu:" + std::to_string(ordinal) + " (" + cpu_model() + ")";
        info_.total_memory = capacity;
        info_.compute_units = usable_cpus();
        info_.host_addressable = true;
        info_.max_block_size[0] = RT_CPU_MAX_BLOCK_X;  // a row of a staged twin fits its stage
        info_.max_threads_per_block = RT_CPU_MAX_GROUP_ITEMS;  // rt_private<T> holds one T per item
        info_.max_shared_bytes = RT_CPU_MAX_LOCAL_BYTES;
        info_.max_shared_bytes_optin = RT_CPU_MAX_LOCAL_BYTES;
        info_.shared_bytes_per_unit = RT_CPU_MAX_LOCAL_BYTES;  // one group at a time per core
        info_.subgroup_size = 1;
        info_.l2_cache_bytes = static_cast<int>(std::min<unsigned long long>(last_level_cache_bytes(), INT32_MAX));
        info_.managed_memory = true;  // device memory is host memory
        info_.interprocess = true;    // large allocations live in shareable files (cpu_memory.hpp)
        info_.concurrent_managed_access = true;
        info_.greatest_stream_priority = -2;
        make_uuid(ordinal, info_.uuid);
    }

    const backend::DeviceInfo& info() const override { return info_; }

    /// Counts `bytes` against the capacity; false (nothing counted) if they do not fit.
    bool charge(size_t bytes) {
        size_t used = used_.load();
        do {
            if (bytes > info_.total_memory - used) return false;
        } while (!used_.compare_exchange_weak(used, used + bytes));
        return true;
    }

    void* allocate_impl(size_t bytes) override {
        if (!charge(bytes)) return nullptr;
        void* p = heap_.allocate(bytes);
        if (!p) used_.fetch_sub(bytes);
        return p;
    }
    void free_impl(void* ptr, size_t bytes) override {
        heap_.free(ptr, bytes);
        used_.fetch_sub(bytes);
    }
    void ipc_export_impl(void* base, size_t bytes, unsigned char* payload) override {
        heap_.export_shared(base, bytes, payload);
    }
    void* ipc_open_impl(const unsigned char* payload, int pid, size_t* bytes) override {
        return DeviceHeap::open_shared(payload, pid, bytes);
    }
    void ipc_close_impl(void* ptr, size_t bytes) override { DeviceHeap::close_shared(ptr, bytes); }
    void* allocate_host_impl(size_t bytes) override { return host_allocate(bytes); }
    void free_host_impl(void* ptr, size_t bytes) override { host_free(ptr, bytes); }
    void* reserve_impl(size_t bytes) override {
        void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        return p == MAP_FAILED ? nullptr : p;
    }
    bool commit_impl(void* ptr, size_t bytes) override {
        if (!charge(bytes)) return false;
        if (mprotect(ptr, bytes, PROT_READ | PROT_WRITE) != 0) {
            used_.fetch_sub(bytes);
            return false;
        }
#ifdef MADV_HUGEPAGE
        madvise(ptr, bytes, MADV_HUGEPAGE);
#endif
        return true;
    }
    void decommit_impl(void* ptr, size_t bytes) override {
        madvise(ptr, bytes, MADV_DONTNEED);  // pages go back to the system; the next touch gets zero pages
        mprotect(ptr, bytes, PROT_NONE);
        used_.fetch_sub(bytes);
    }
    void unreserve_impl(void* ptr, size_t bytes) override { munmap(ptr, bytes); }
    void mem_info_impl(size_t* free_bytes, size_t* total_bytes) override {
        *total_bytes = info_.total_memory;
        *free_bytes = info_.total_memory - used_.load();
    }
    std::unique_ptr<backend::Queue> create_queue_impl(unsigned, int priority) override {
        return std::unique_ptr<backend::Queue>(
            new CpuQueueHandle(std::make_shared<CpuQueue>(executor_, stream_min_bytes_, priority)));
    }
    std::shared_ptr<backend::GraphExecutable> compile_graph_impl(
        const std::shared_ptr<const graph::Program>& program) override {
        return std::make_shared<CpuGraph>(program);
    }
    kernels::Target& kernel_target() override { return cpu_target(); }
    kernels::ModuleCache& kernel_modules() override { return cpu_modules(); }
    std::unique_ptr<backend::Event> create_event_impl(bool timing, bool blocking_sync) override {
        return std::make_unique<CpuEvent>(timing, blocking_sync);
    }

private:
    /// The core owns its queue through unique_ptr; the cpu queue is also shared by events, waiters and
    /// the ready list, so the core gets a forwarding handle.
    class CpuQueueHandle final : public backend::Queue {
    public:
        explicit CpuQueueHandle(std::shared_ptr<CpuQueue> q) : q_(std::move(q)) {}
        ~CpuQueueHandle() override { q_->synchronize_impl(); }
        void copy_impl(void* d, const void* s, size_t n, backend::CopyKind k, const trace::Key& t) override {
            q_->copy_impl(d, s, n, k, t);
        }
        void fill_impl(void* d, uint8_t v, size_t n, const trace::Key& t) override { q_->fill_impl(d, v, n, t); }
        void host_call_impl(const backend::HostCall& c, const trace::Key& t) override { q_->host_call_impl(c, t); }
        void launch_impl(const std::shared_ptr<backend::Function>& f, const backend::LaunchShape& s, void* const* a,
                         const backend::LaunchReport& r, const trace::Key& t) override {
            q_->launch_impl(f, s, a, r, t);
        }
        void record_impl(backend::Event& e, const trace::Key& t) override { q_->record_impl(e, t); }
        void wait_impl(backend::Event& e, const trace::Key& t) override { q_->wait_impl(e, t); }
        void synchronize_impl() override { q_->synchronize_impl(); }
        bool query_impl() override { return q_->query_impl(); }
        uint64_t position_impl() override { return q_->position_impl(); }
        bool reached_impl(uint64_t position) override { return q_->reached_impl(position); }
        void notify_at_impl(uint64_t position) override { q_->notify_at_impl(position); }
        void bind_error_slot_impl(AsyncErrorSlot* slot) override { q_->bind_error_slot_impl(slot); }
        void release_kernels_impl() override { q_->release_kernels_impl(); }
        void joint_impl(const std::shared_ptr<backend::JointStep>& step, int participant,
                        const trace::Key& traced) override {
            q_->joint_impl(step, participant, traced);
        }
        bool hold_idle_impl() override { return q_->hold_idle_impl(); }
        void release_impl(const std::shared_ptr<backend::JointStep>& pending) override { q_->release_impl(pending); }
        void launch_graph_impl(const std::shared_ptr<backend::GraphExecutable>& g,
                               const backend::LaunchReport& r, const trace::Key& t) override {
            q_->launch_graph_impl(g, r, t);
        }

    private:
        std::shared_ptr<CpuQueue> q_;
    };

    Executor& executor_;
    const unsigned long long stream_min_bytes_;
    backend::DeviceInfo info_;
    std::atomic<size_t> used_{0};
    DeviceHeap heap_;  // device memory (allocate_impl); pools reserve their own mappings (reserve_impl)
};

class CpuBackend final : public backend::Backend {
public:
    explicit CpuBackend(const CpuOptions& o)
        : devices_(o.devices),
          capacity_(o.memory ? o.memory : physical_memory() / 2),
          stream_min_bytes_(stream_min_bytes(o)),
          ipc_memory_(o.ipc_memory),
          executor_(o.executors ? o.executors : usable_cpus()) {}

    const char* name() const override { return "cpu"; }
    int device_count() const override { return devices_; }
    std::unique_ptr<backend::Device> create_device(int ordinal) override {
        return std::make_unique<CpuDevice>(executor_, ordinal, capacity_, stream_min_bytes_, ipc_memory_);
    }

private:
    int devices_;
    size_t capacity_;
    unsigned long long stream_min_bytes_;
    bool ipc_memory_;
    Executor executor_;
};

}  // namespace

}  // namespace rt::cpu

namespace rt::backend {
/// The cpu backend: always built, enumerated first.
void register_cpu_backend(Registry& registry) {
    BackendEntry e;
    e.name = "cpu";
    e.order = 0;
    e.options = {
        {"devices", {"cpu_devices"}, "RUNTIME_CPU_DEVICES"},
        {"memory", {"cpu_memory"}, "RUNTIME_CPU_MEMORY"},
        {"executors", {"executors"}, "RUNTIME_EXECUTORS"},
        {"stream_min_bytes", {"cpu_stream_min_bytes"}, "RUNTIME_CPU_STREAM_MIN_BYTES"},
        {"ipc_memory", {}, "RUNTIME_CPU_IPC_MEMORY"},
    };
    e.parse = cpu::parse_cpu_options;
    e.create = [](const Options& o) -> std::unique_ptr<Backend> {
        return std::make_unique<cpu::CpuBackend>(static_cast<const cpu::CpuOptionsObject&>(o).value);
    };
    registry.add(std::move(e));
}
}  // namespace rt::backend
