// Loading cpu kernel modules (dlopen + ABI check) and the in-process cache in front of the compiler.
#include "backends/cpu/cpu_module.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "backends/cpu/cpu_compiler.hpp"
#include "core/error.hpp"
#include "core/kernel_cache.hpp"

namespace rt::cpu {

namespace {

struct Slot {
    std::mutex mutex;  // held while the slot's module is being compiled: same-source callers wait, others don't
    std::shared_ptr<CpuModule> module;
};

struct MemoryCache {
    std::mutex mutex;
    std::unordered_map<std::string, std::shared_ptr<Slot>> slots;
};

MemoryCache& memory_cache() {
    // Never destroyed: modules must not be dlclose'd during static destruction while executors may run.
    static MemoryCache* cache = new MemoryCache;
    return *cache;
}

/// Loads and validates; on failure sets `why` and returns nullptr (the handle is closed).
void* open_module(const std::string& path, std::string& why, const rt_cpu_kernel_info*& kernels, int& count) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        why = std::strerror(errno);
        return nullptr;
    }
    if (!S_ISREG(st.st_mode)) {
        why = "not a regular file";
        return nullptr;
    }
    // A name without '/' would be searched on the library path: always load the named file.
    std::string load_path = path.find('/') == std::string::npos ? "./" + path : path;
    void* handle = ::dlopen(load_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* err = ::dlerror();
        why = std::string("not a loadable shared object: ") + (err ? err : "dlopen failed");
        return nullptr;
    }
    auto abi = reinterpret_cast<rt_cpu_module_abi_fn>(::dlsym(handle, "rt_cpu_module_abi"));
    auto list = reinterpret_cast<rt_cpu_module_kernels_fn>(::dlsym(handle, "rt_cpu_module_kernels"));
    if (!abi || !list) {
        why = "not a runtime cpu kernel module (it does not export rt_cpu_module_abi and rt_cpu_module_kernels)";
    } else if (int v = abi(); v != RT_CPU_ABI_VERSION) {
        why = format("built for cpu kernel ABI version %d, this runtime uses version %d (rebuild it with this "
                     "runtime's runtime-compile)", v, RT_CPU_ABI_VERSION);
    } else {
        count = 0;
        kernels = list(&count);
        if (count < 0 || (count > 0 && !kernels)) why = "its kernel table is malformed";
        else return handle;
    }
    ::dlclose(handle);
    return nullptr;
}

}  // namespace

CpuModule::CpuModule(void* handle, std::string path, const rt_cpu_kernel_info* kernels, int count)
    : handle_(handle), path_(std::move(path)), kernels_(kernels), count_(count) {}

CpuModule::~CpuModule() {
    if (handle_) ::dlclose(handle_);
}

std::shared_ptr<CpuModule> CpuModule::load(const std::string& path, bool from_cache) {
    std::string why;
    const rt_cpu_kernel_info* kernels = nullptr;
    int count = 0;
    void* handle = open_module(path, why, kernels, count);
    if (!handle) {
        if (from_cache) return nullptr;  // caller recompiles over a damaged entry
        fail(RT_ERROR_INVALID_VALUE, "cannot load cpu kernel module '%s': %s", path.c_str(), why.c_str());
    }
    return std::shared_ptr<CpuModule>(new CpuModule(handle, path, kernels, count));
}

std::shared_ptr<CpuModule> CpuModule::from_file(const std::string& path) {
    if (path.empty()) fail(RT_ERROR_INVALID_VALUE, "cannot load cpu kernel module: the path is empty");
    return load(path, false);
}

std::shared_ptr<CpuModule> CpuModule::from_source(const std::string& source, const std::string& options) {
    // In-process key: the inputs only (no code generation, no file system), so a repeated load is cheap.
    const char* cxx = std::getenv("RUNTIME_CXX");
    std::string key = kcache::Hasher().add(source).add(options).add(cxx ? cxx : "").hex();
    MemoryCache& cache = memory_cache();
    std::shared_ptr<Slot> slot;
    {
        std::lock_guard lock(cache.mutex);
        auto& s = cache.slots[key];
        if (!s) s = std::make_shared<Slot>();
        slot = s;
    }
    std::lock_guard slot_lock(slot->mutex);
    if (slot->module) return slot->module;

    CompileResult r = compile(source, options);
    std::shared_ptr<CpuModule> module = load(r.path, r.from_cache);
    if (!module) {  // a damaged disk entry (e.g. written by a crashed older build): rebuild it
        r = compile(source, options, "kernel_source", /*force=*/true);
        module = load(r.path, false);
    }
    slot->module = module;
    return module;
}

void CpuModule::clear_memory_cache() {
    MemoryCache& cache = memory_cache();
    std::lock_guard lock(cache.mutex);
    cache.slots.clear();
}

const rt_cpu_kernel_info* CpuModule::find(const std::string& name) const {
    for (int i = 0; i < count_; ++i)
        if (kernels_[i].name && name == kernels_[i].name) return &kernels_[i];
    return nullptr;
}

std::vector<std::string> CpuModule::kernel_names() const {
    std::vector<std::string> names;
    for (int i = 0; i < count_; ++i) names.emplace_back(kernels_[i].name ? kernels_[i].name : "");
    return names;
}

}  // namespace rt::cpu
