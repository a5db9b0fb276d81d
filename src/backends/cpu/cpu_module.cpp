// Loading cpu kernel modules: dlopen and the ABI check.
#include "backends/cpu/cpu_module.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace rt::cpu {

namespace {

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

CpuFunction::CpuFunction(std::shared_ptr<CpuModule> module, const rt_cpu_kernel_info* info)
    : module_(std::move(module)), info_(info), name_(info->name), sizes_(info->arg_sizes, info->arg_sizes + info->num_args) {}

std::shared_ptr<backend::Function> CpuKernelModule::get_function_impl(const std::string& name) {
    const rt_cpu_kernel_info* info = module_->find(name);
    if (!info) return nullptr;
    return std::make_shared<CpuFunction>(module_, info);
}

std::vector<std::string> CpuKernelModule::kernel_names() const { return module_->kernel_names(); }

}  // namespace rt::cpu
