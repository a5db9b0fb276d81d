// The NVRTC shim (dlopen) and the cuda kernel compiler: kernel dialect → cubin/PTX in the disk cache.
#include "backends/cuda/nvrtc.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/cpu/cpu_compiler.hpp"  // the dialect's option rules and kernel-name scan (shared, not cpu-specific)
#include "core/error.hpp"
#include "core/kernel_cache.hpp"
#include "core/kernel_prelude.hpp"

namespace rt::cuda {

namespace {

constexpr size_t kMaxLog = 32 * 1024;

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

std::string nvrtc_error(const Nvrtc& n, nvrtcResult r) {
    const char* s = n.nvrtcGetErrorString ? n.nvrtcGetErrorString(r) : nullptr;
    return s ? s : "NVRTC error " + std::to_string(static_cast<int>(r));
}

std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
    return out;
}

/// Destroys an NVRTC program on every path out of compile().
struct ProgramGuard {
    const Nvrtc& n;
    nvrtcProgram p = nullptr;
    ~ProgramGuard() {
        if (p) n.nvrtcDestroyProgram(&p);
    }
};

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

std::vector<std::string> nvrtc_options(const std::string& options) {
    std::vector<std::string> out;
    for (const std::string& o : cpu::parse_options(options)) {  // validates; throws INVALID_VALUE
        if (o == "-g") out.push_back("-lineinfo");
        else if (o.rfind("-O", 0) == 0) continue;
        else if (o == "-fwrapv") continue;  // NVRTC has no such flag; code that needs wrapping spells it out
        else out.push_back(o);
    }
    return out;
}

CudaCompileResult compile(const std::string& source, const std::string& options, const std::string& arch,
                          const std::string& source_name, bool ptx, bool force) {
    std::vector<std::string> opts = nvrtc_options(options);
    CudaCompileResult result;
    result.kernels = cpu::find_kernel_names(source);
    if (result.kernels.empty())
        fail(RT_ERROR_INVALID_VALUE,
             "no kernel in source '%s': a kernel is declared as `RT_KERNEL void name(parameters) { … }`",
             source_name.c_str());
    if (arch.size() < 4 || (arch.rfind("sm_", 0) != 0 && arch.rfind("compute_", 0) != 0))
        fail(RT_ERROR_INVALID_VALUE, "cuda architecture '%s' is not of the form sm_XY (e.g. sm_90)", arch.c_str());
    const Nvrtc& n = nvrtc();
    if (!n.available) fail(RT_ERROR_NOT_SUPPORTED, "cannot compile for cuda: %s", n.why.c_str());
    // PTX is asked for with a virtual architecture; cubin needs nvrtcGetCUBIN (NVRTC 11.1+).
    std::string number = arch.substr(arch.find('_') + 1);
    bool want_cubin = !ptx && arch.rfind("sm_", 0) == 0 && n.nvrtcGetCUBIN && n.nvrtcGetCUBINSize;
    std::string gpu_arch = (want_cubin ? "sm_" : "compute_") + number;

    // The prelude is a named header: the user's own `#include "runtime/kernel.h"` resolves to it (and its
    // include guard), and #line keeps diagnostics in the source's own line numbers.
    std::string text = "#include \"runtime/kernel.h\"\n";
    std::string quoted;
    for (char c : source_name) {
        if (c == '"' || c == '\\') quoted += '\\';
        quoted += c == '\n' ? ' ' : c;
    }
    text += "#line 1 \"" + quoted + "\"\n" + source;

    std::vector<std::string> args = {"--gpu-architecture=" + gpu_arch, "-std=c++17", "-default-device",
                                     "--device-as-default-execution-space"};
    args.insert(args.end(), opts.begin(), opts.end());

    kcache::Hasher h;
    h.add("cuda-module")
        .add(format("%d.%d.%d", RUNTIME_VERSION_MAJOR, RUNTIME_VERSION_MINOR, RUNTIME_VERSION_PATCH))
        .add(format("nvrtc %d.%d", n.major, n.minor))
        .add(kernel_prelude_text())
        .add(text)
        .add(static_cast<uint64_t>(args.size()));
    for (const std::string& a : args) h.add(a);
    result.key = h.hex();
    result.cubin = want_cubin;
    result.path = kcache::entry_path("cuda", result.key, want_cubin ? ".cubin" : ".ptx");

    if (!force && kcache::trusted_entry(result.path)) {  // an entry another user could have written is compiled over
        std::ifstream in(result.path, std::ios::binary);
        std::ostringstream ss;
        ss << in.rdbuf();
        if (in.good() || in.eof()) {
            result.image = ss.str();
            if (!result.image.empty()) {
                result.from_cache = true;
                return result;
            }
        }
    }

    // NVRTC has no C or C++ standard headers. What a kernel may take from the usual ones — math functions, fixed-width
    // integers, size_t, printf — is built into NVRTC or the prelude, so those includes resolve to empty headers (the
    // cpu backend compiles the same source with the real ones).
    const char* prelude = kernel_prelude_text();
    static const char* const kEmptyHeaders[] = {"math.h", "cmath", "stdint.h", "cstdint", "stddef.h", "cstddef",
                                                "stdio.h", "cstdio", "float.h", "cfloat", "limits.h", "climits"};
    std::vector<const char*> header_sources = {prelude, prelude, prelude};
    std::vector<const char*> header_names = {"runtime/kernel.h", "kernel.h", "include/runtime/kernel.h"};
    for (const char* h : kEmptyHeaders) {
        header_sources.push_back("/* provided by NVRTC and the runtime's kernel prelude */\n");
        header_names.push_back(h);
    }
    ProgramGuard prog{n};
    auto t0 = std::chrono::steady_clock::now();
    nvrtcResult r = n.nvrtcCreateProgram(&prog.p, text.c_str(), source_name.c_str(), static_cast<int>(header_names.size()),
                                         header_sources.data(), header_names.data());
    if (r != NVRTC_SUCCESS)
        fail(r == NVRTC_ERROR_OUT_OF_MEMORY ? RT_ERROR_OUT_OF_MEMORY : RT_ERROR_COMPILE_FAILED,
             "nvrtcCreateProgram failed: %s", nvrtc_error(n, r).c_str());
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    r = n.nvrtcCompileProgram(prog.p, static_cast<int>(argv.size()), argv.data());
    result.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    size_t log_size = 0;
    if (n.nvrtcGetProgramLogSize(prog.p, &log_size) == NVRTC_SUCCESS && log_size > 1) {
        std::string log(log_size, '\0');
        if (n.nvrtcGetProgramLog(prog.p, log.data()) == NVRTC_SUCCESS) {
            log.resize(log.find('\0') == std::string::npos ? log.size() : log.find('\0'));
            if (log.size() > kMaxLog) log = log.substr(0, kMaxLog) + "\n[diagnostics truncated]\n";
            result.log = log;
        }
    }
    if (r != NVRTC_SUCCESS)
        fail(RT_ERROR_COMPILE_FAILED,
             "compiling cuda kernel module '%s' (kernels: %s; options: '%s'; %s) with NVRTC %d.%d failed: %s\n%s",
             source_name.c_str(), join(result.kernels, ", ").c_str(), options.c_str(), gpu_arch.c_str(), n.major,
             n.minor, nvrtc_error(n, r).c_str(), result.log.c_str());

    size_t size = 0;
    if (want_cubin) {
        if ((r = n.nvrtcGetCUBINSize(prog.p, &size)) == NVRTC_SUCCESS) {
            result.image.resize(size);
            r = n.nvrtcGetCUBIN(prog.p, result.image.data());
        }
    } else if ((r = n.nvrtcGetPTXSize(prog.p, &size)) == NVRTC_SUCCESS) {
        result.image.resize(size);  // includes the terminating NUL, which cuModuleLoadData needs
        r = n.nvrtcGetPTX(prog.p, result.image.data());
    }
    if (r != NVRTC_SUCCESS || result.image.empty())
        fail(RT_ERROR_COMPILE_FAILED, "NVRTC compiled '%s' but returned no %s: %s", source_name.c_str(),
             want_cubin ? "cubin" : "PTX", nvrtc_error(n, r).c_str());
    kcache::store_bytes(result.path, result.image);
    return result;
}

}  // namespace rt::cuda
