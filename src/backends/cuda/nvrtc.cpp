// The NVRTC shim: finds libnvrtc where toolkits and pip wheels put it and opens it with dlopen (cuda_target.cpp compiles with it).
#include "backends/cuda/nvrtc.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

namespace rt::cuda {

namespace {

#if defined(__aarch64__)
constexpr const char* kTargetDir = "targets/sbsa-linux/lib";
#else
constexpr const char* kTargetDir = "targets/x86_64-linux/lib";
#endif

bool is_file(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> dir_entries(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d)) out.emplace_back(e->d_name);
        ::closedir(d);
    }
    return out;
}

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
    if (!s.empty() && std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

/// libnvrtc.so.<major of the toolkit this runtime was built against> first (its headers define the API we call).
std::vector<std::string> sonames() {
    std::vector<std::string> names = {"libnvrtc.so." + std::to_string(CUDA_VERSION / 1000)};
    for (const char* s : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}) add_unique(names, s);
    return names;
}

/// <root>/lib64, <root>/lib, <root>/targets/<arch>-linux/lib.
void add_toolkit_folders(std::vector<std::string>& out, const std::string& root) {
    for (const char* sub : {"lib64", "lib", kTargetDir}) add_unique(out, root + "/" + sub);
}

/// The site-/dist-packages folder a loaded library lives in ("" if none).
std::string packages_folder_of(const std::string& path) {
    for (const char* marker : {"/site-packages/", "/dist-packages/"}) {
        size_t at = path.find(marker);
        if (at != std::string::npos) return path.substr(0, at + std::strlen(marker) - 1);
    }
    return "";
}

int collect_loaded(dl_phdr_info* info, size_t, void* data) {
    if (info->dlpi_name && *info->dlpi_name)
        add_unique(*static_cast<std::vector<std::string>*>(data), packages_folder_of(info->dlpi_name));
    return 0;
}

/// The directory a loaded handle's file is in, and that file's path ("" when the loader does not say).
std::string loaded_path(void* handle) {
    link_map* map = nullptr;
    if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) return map->l_name;
    return "";
}

/// Preloads libnvrtc-builtins.so.<major>.<minor> (else any libnvrtc-builtins.so.<major>.*, else the unversioned
/// name) from `dir` into the global scope; returns the file opened, or "".
std::string preload_builtins(const std::string& dir, int major, int minor) {
    std::vector<std::string> names = {"libnvrtc-builtins.so." + std::to_string(major) + "." + std::to_string(minor)};
    const std::string prefix = "libnvrtc-builtins.so." + std::to_string(major) + ".";
    for (const std::string& e : dir_entries(dir))
        if (e.rfind(prefix, 0) == 0) add_unique(names, e);
    add_unique(names, "libnvrtc-builtins.so");
    for (const std::string& name : names) {
        const std::string path = dir + "/" + name;
        if (is_file(path) && ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) return path;
    }
    return "";
}

}  // namespace

NvrtcSearch nvrtc_search_from_environment() {
    NvrtcSearch s;
    s.explicit_lib = env("RUNTIME_NVRTC_LIB");
    for (const char* v : {"CUDA_HOME", "CUDA_PATH"}) add_unique(s.toolkit_roots, env(v));
    s.fixed_roots = {"/usr/local/cuda"};
    // Without running Python: the packages folders of libraries already in this process come first (the Python
    // that imported us, and the wheels it loaded), then the usual places of environments and installations.
    ::dl_iterate_phdr(collect_loaded, &s.python_packages);
    std::vector<std::string> prefixes;
    for (const char* v : {"VIRTUAL_ENV", "CONDA_PREFIX"}) add_unique(prefixes, env(v));
    if (!env("HOME").empty()) add_unique(prefixes, env("HOME") + "/.local");
    for (const char* p : {"/usr/local", "/usr"}) add_unique(prefixes, p);
    const std::string pythonpath = env("PYTHONPATH");
    for (size_t b = 0; b <= pythonpath.size();) {
        size_t e = pythonpath.find(':', b);
        if (e == std::string::npos) e = pythonpath.size();
        add_unique(s.python_packages, pythonpath.substr(b, e - b));
        b = e + 1;
    }
    for (const std::string& prefix : prefixes) {
        for (const std::string& e : dir_entries(prefix + "/lib")) {
            if (e.rfind("python3", 0) != 0) continue;
            for (const char* sub : {"/site-packages", "/dist-packages"})
                if (is_dir(prefix + "/lib/" + e + sub)) add_unique(s.python_packages, prefix + "/lib/" + e + sub);
        }
    }
    return s;
}

std::vector<std::string> nvrtc_search_folders(const NvrtcSearch& s) {
    std::vector<std::string> folders;
    if (!s.explicit_lib.empty() && is_dir(s.explicit_lib)) add_unique(folders, s.explicit_lib);
    for (const std::string& r : s.toolkit_roots) add_toolkit_folders(folders, r);
    for (const std::string& r : s.fixed_roots) add_toolkit_folders(folders, r);
    for (const std::string& p : s.python_packages)
        for (const char* sub : {"/nvidia/cu13/lib", "/nvidia/cuda_nvrtc/lib"}) add_unique(folders, p + sub);
    return folders;
}

std::vector<std::string> nvrtc_candidates(const NvrtcSearch& s) {
    if (!s.explicit_lib.empty() && !is_dir(s.explicit_lib)) return {s.explicit_lib};  // a file or soname: alone
    const std::vector<std::string> names = sonames();
    std::vector<std::string> out;
    std::set<std::string> seen;  // real paths: /usr/local/cuda → cuda-13.0 and lib64 → lib are tried once
    auto add_folder = [&](const std::string& dir) {
        for (const std::string& name : names) {
            const std::string path = dir + "/" + name;
            if (!is_file(path)) continue;
            char* real = ::realpath(path.c_str(), nullptr);
            const bool fresh = seen.insert(real ? real : path).second;
            std::free(real);
            if (fresh) out.push_back(path);
        }
    };
    std::vector<std::string> before, after;  // the loader's search goes between the toolkit roots and the fixed ones
    if (!s.explicit_lib.empty()) add_unique(before, s.explicit_lib);
    for (const std::string& r : s.toolkit_roots) add_toolkit_folders(before, r);
    for (const std::string& f : before) add_folder(f);
    if (s.loader)
        for (const std::string& name : names) out.push_back(name);
    NvrtcSearch rest = s;
    rest.explicit_lib.clear();
    rest.toolkit_roots.clear();
    for (const std::string& f : nvrtc_search_folders(rest)) add_folder(f);
    return out;
}

Nvrtc load_nvrtc(const std::vector<std::string>& candidates) {
    Nvrtc n;
    for (const std::string& name : candidates) {
        void* h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char* err = ::dlerror();
            n.why += (n.why.empty() ? "" : "; ") + (err ? std::string(err) : name + ": dlopen failed");
            continue;
        }
        std::string missing;
        auto resolve = [&](auto& fn, const char* symbol, bool required) {
            void* p = ::dlsym(h, symbol);
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
            if (!p && required) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
        };
        resolve(n.nvrtcVersion, "nvrtcVersion", true);
        resolve(n.nvrtcGetErrorString, "nvrtcGetErrorString", true);
        resolve(n.nvrtcCreateProgram, "nvrtcCreateProgram", true);
        resolve(n.nvrtcDestroyProgram, "nvrtcDestroyProgram", true);
        resolve(n.nvrtcCompileProgram, "nvrtcCompileProgram", true);
        resolve(n.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", true);
        resolve(n.nvrtcGetProgramLog, "nvrtcGetProgramLog", true);
        resolve(n.nvrtcGetPTXSize, "nvrtcGetPTXSize", true);
        resolve(n.nvrtcGetPTX, "nvrtcGetPTX", true);
        resolve(n.nvrtcGetCUBINSize, "nvrtcGetCUBINSize", false);
        resolve(n.nvrtcGetCUBIN, "nvrtcGetCUBIN", false);
        resolve(n.nvrtcAddNameExpression, "nvrtcAddNameExpression", false);
        resolve(n.nvrtcGetLoweredName, "nvrtcGetLoweredName", false);
        if (!missing.empty()) {
            n.why += (n.why.empty() ? "" : "; ") + name + ": lacks " + missing;
            continue;  // never dlclose'd: harmless, and closing libraries with static state is risky
        }
        n.nvrtcVersion(&n.major, &n.minor);
        const std::string path = loaded_path(h);
        n.library = path.empty() ? name : path;
        const size_t slash = n.library.rfind('/');
        if (slash != std::string::npos) n.builtins = preload_builtins(n.library.substr(0, slash), n.major, n.minor);
        n.available = true;
        n.why.clear();
        return n;
    }
    n.why = "NVRTC (the CUDA run-time compiler) cannot be loaded: " + (n.why.empty() ? "no libnvrtc found" : n.why);
    return n;
}

const Nvrtc& nvrtc() {
    static std::mutex* mutex = new std::mutex;
    static auto* loaded = new std::map<std::string, Nvrtc*>;  // never destroyed (see driver())
    const std::string key = env("RUNTIME_NVRTC_LIB");
    std::lock_guard lock(*mutex);
    Nvrtc*& n = (*loaded)[key];
    if (!n) {  // one attempt per $RUNTIME_NVRTC_LIB value, as for the driver
        const NvrtcSearch search = nvrtc_search_from_environment();
        n = new Nvrtc(load_nvrtc(nvrtc_candidates(search)));
        if (!n->available && (search.explicit_lib.empty() || is_dir(search.explicit_lib))) {
            std::string where = search.loader ? "the loader's path" : "";
            for (const std::string& f : nvrtc_search_folders(search)) where += (where.empty() ? "" : ", ") + f;
            n->why += " (searched " + where + ")";
        }
        if (!n->available)
            n->why += "; install the CUDA toolkit's NVRTC or the nvidia-cuda-nvrtc wheel, or set RUNTIME_NVRTC_LIB to "
                      "the library or its folder";
    }
    return *n;
}

}  // namespace rt::cuda
