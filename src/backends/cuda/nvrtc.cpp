// The NVRTC shim: libnvrtc opened with dlopen at run time (the cuda target, cuda_target.cpp, compiles with it).
#include "backends/cuda/nvrtc.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "core/error.hpp"

namespace rt::cuda {

namespace {

void load(Nvrtc& n, const std::vector<std::string>& names) {
    for (const std::string& name : names) {
        void* h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char* err = ::dlerror();
            n.why += (n.why.empty() ? "" : "; ") + name + ": " + (err ? err : "dlopen failed");
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
        if (!missing.empty()) {
            n.why += (n.why.empty() ? "" : "; ") + name + ": lacks " + missing;
            continue;  // never dlclose'd: harmless, and closing libraries with static state is risky
        }
        n.nvrtcVersion(&n.major, &n.minor);
        n.library = name;
        n.available = true;
        n.why.clear();
        return;
    }
    n.why = "NVRTC (the CUDA run-time compiler) cannot be loaded: " + n.why +
            " (install the CUDA toolkit's nvrtc, or set RUNTIME_NVRTC_LIB to its path)";
}

}  // namespace

const Nvrtc& nvrtc() {
    static std::mutex* mutex = new std::mutex;
    static auto* loaded = new std::map<std::string, Nvrtc*>;  // never destroyed (see driver())
    const char* env = std::getenv("RUNTIME_NVRTC_LIB");
    std::string key = env && *env ? env : "";
    std::lock_guard lock(*mutex);
    Nvrtc*& n = (*loaded)[key];
    if (!n) {  // one attempt per $RUNTIME_NVRTC_LIB value, as for the driver
        auto* fresh = new Nvrtc;
        std::vector<std::string> names;
        if (!key.empty()) {
            names.push_back(key);
        } else {
            // The toolkit we were built against first (its headers define the API we call), then others.
            names.push_back("libnvrtc.so." + std::to_string(CUDA_VERSION / 1000));
            for (const char* s : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"})
                if (names[0] != s) names.emplace_back(s);
        }
        load(*fresh, names);
        n = fresh;
    }
    return *n;
}

}  // namespace rt::cuda
