// Loading cpu kernel modules: dlopen and the ABI check.
#include "backends/cpu/cpu_module.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "backends/cpu/cpu_isa.hpp"
#include "core/error.hpp"
#include "kernels/dialect.hpp"

namespace rt::cpu {

namespace {


/// Why a module cannot be loaded; `code` NOT_SUPPORTED when this machine lacks what it needs.
struct Refusal {
    std::string why;
    rtError_t code = RT_ERROR_INVALID_VALUE;
};

std::string describe_variants(const std::vector<IsaVariant>& variants) {
    std::string s;
    for (const IsaVariant& v : variants) s += (s.empty() ? "" : ", ") + v.name;
    return s;
}

/// Checks the ISA records, then loads and validates; on failure fills `refusal` and returns nullptr (the handle is
/// closed). No code of the module runs before its records say this machine can run it.
void* open_module(const std::string& path, Refusal& refusal, const rt_cpu_kernel_info*& kernels, int& count,
                  std::string& variant) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        refusal.why = std::strerror(errno);
        return nullptr;
    }
    if (!S_ISREG(st.st_mode)) {
        refusal.why = "not a regular file";
        return nullptr;
    }
    std::string no_record;
    const std::vector<IsaVariant> variants = read_isa_records(path, no_record);
    const IsaVariant* chosen = nullptr;
    if (!variants.empty()) {
        std::vector<std::string> missing;
        chosen = pick_variant(variants, missing);
        if (!chosen) {
            std::string unknown;
            for (const std::string& f : missing)
                if (!known_feature(f)) unknown += (unknown.empty() ? "" : ", ") + f;
            refusal.code = RT_ERROR_NOT_SUPPORTED;
            refusal.why = format("it was built for %s%s and needs CPU features this machine lacks: %s%s%s (build it "
                                 "for this machine, or with runtime-compile --isa x86-64-v2,x86-64-v3,x86-64-v4 for "
                                 "any x86-64 machine)",
                                 variants.size() > 1 ? "the instruction sets " : "", describe_variants(variants).c_str(),
                                 kernels::join(missing).c_str(), unknown.empty() ? "" : "; unknown to this runtime: ",
                                 unknown.c_str());
            return nullptr;
        }
    }
    // A name without '/' would be searched on the library path: always load the named file.
    std::string load_path = path.find('/') == std::string::npos ? "./" + path : path;
    void* handle = ::dlopen(load_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* err = ::dlerror();
        refusal.why = std::string("not a loadable shared object: ") + (err ? err : "dlopen failed");
        return nullptr;
    }
    auto abi = reinterpret_cast<rt_cpu_module_abi_fn>(::dlsym(handle, "rt_cpu_module_abi"));
    const std::string table = !chosen || chosen->index == 0 ? std::string("rt_cpu_module_kernels")
                                                            : "rt_cpu_module_kernels_v" + std::to_string(chosen->index);
    auto list = reinterpret_cast<rt_cpu_module_kernels_fn>(::dlsym(handle, table.c_str()));
    if (!abi || !list) {
        refusal.why = "not a runtime cpu kernel module (it does not export rt_cpu_module_abi and " + table + ")";
    } else if (int v = abi(); v != RT_CPU_ABI_VERSION) {
        refusal.why = format("built for cpu kernel ABI version %d, this runtime uses version %d (rebuild it with this "
                             "runtime's runtime-compile)", v, RT_CPU_ABI_VERSION);
    } else if (!chosen) {
        refusal.why = no_record;
    } else {
        count = 0;
        kernels = list(&count);
        if (count < 0 || (count > 0 && !kernels)) {
            refusal.why = "its kernel table is malformed";
        } else {
            variant = chosen->name;
            return handle;
        }
    }
    ::dlclose(handle);
    return nullptr;
}

}  // namespace

CpuModule::CpuModule(void* handle, std::string path, const rt_cpu_kernel_info* kernels, int count, std::string variant)
    : handle_(handle), path_(std::move(path)), kernels_(kernels), count_(count), variant_(std::move(variant)) {
    // One table for all variants (ABI 7); a module without one has no globals.
    if (auto list = reinterpret_cast<rt_cpu_module_globals_fn>(::dlsym(handle_, "rt_cpu_module_globals"))) {
        int n = 0;
        const rt_cpu_global_info* g = list(&n);
        if (n > 0 && g) {
            globals_ = g;
            global_count_ = n;
        }
    }
}

const rt_cpu_global_info* CpuModule::find_global(const std::string& name) const {
    for (int i = 0; i < global_count_; ++i)
        if (globals_[i].name && name == globals_[i].name) return &globals_[i];
    return nullptr;
}

std::vector<std::string> CpuModule::global_names() const {
    std::vector<std::string> names;
    for (int i = 0; i < global_count_; ++i) names.emplace_back(globals_[i].name ? globals_[i].name : "");
    return names;
}

CpuModule::~CpuModule() {
    if (handle_) ::dlclose(handle_);
}

std::shared_ptr<CpuModule> CpuModule::load(const std::string& path, bool from_cache) {
    Refusal refusal;
    const rt_cpu_kernel_info* kernels = nullptr;
    int count = 0;
    std::string variant;
    void* handle = open_module(path, refusal, kernels, count, variant);
    if (!handle) {
        if (from_cache) return nullptr;  // caller recompiles over a damaged entry
        fail(refusal.code, "cannot load cpu kernel module '%s': %s", path.c_str(), refusal.why.c_str());
    }
    return std::shared_ptr<CpuModule>(new CpuModule(handle, path, kernels, count, std::move(variant)));
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

bool CpuKernelModule::find_global(const std::string& name, GlobalSymbol& out) {
    if (name.rfind("rt_", 0) == 0) return false;
    const rt_cpu_global_info* g = module_->find_global(name);
    if (!g) return false;
    out.address = g->address;
    out.bytes = g->bytes;
    return true;
}

}  // namespace rt::cpu
