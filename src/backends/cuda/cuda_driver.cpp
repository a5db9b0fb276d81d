// The dlopen shim over libcuda: finds the driver (past stubs and compat libraries), resolves the functions the backend uses, and translates driver errors.
#include "backends/cuda/cuda_driver.hpp"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "observe/log.hpp"

namespace rt::cuda {

namespace {

#define RT_CU_STR2_(x) #x
/// The symbol name after cuda.h's versioning macros: RT_CU_STR_(cuMemAlloc) is "cuMemAlloc_v2".
#define RT_CU_STR_(x) RT_CU_STR2_(x)

/// How one library fared: not opened, opened without the API, or its cuInit's result.
struct Attempt {
    bool opened = false;
    bool resolved = false;
    CUresult init = CUDA_SUCCESS;
};

/// Opens and resolves one library, then cuInit; on failure `d.why` says what went wrong. Never throws.
Attempt open_one(Driver& d, const std::string& library) {
    Attempt a;
    d.library = library;
    RT_LOG(backend, debug, "cuda driver: trying '%s'", library.c_str());
    void* h = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char* err = ::dlerror();
        d.why = "the CUDA driver library '" + library + "' cannot be loaded (" + (err ? err : "dlopen failed") + ")";
        return a;
    }
    a.opened = true;
    link_map* map = nullptr;  // the file the loader chose for a soname: says which libcuda a stub came from
    if (::dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) d.library = map->l_name;
    std::string missing;
    auto resolve = [&](auto& fn, const char* symbol, const char* fallback, bool required) {
        void* p = ::dlsym(h, symbol);
        if (!p && fallback) p = ::dlsym(h, fallback);
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
        if (!p && required) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
    };
#define RT_REQ_(name) resolve(d.name, RT_CU_STR_(name), nullptr, true)
#define RT_OPT_(name) resolve(d.name, RT_CU_STR_(name), nullptr, false)
    RT_REQ_(cuInit);
    RT_REQ_(cuDriverGetVersion);
    RT_REQ_(cuGetErrorName);
    RT_REQ_(cuGetErrorString);
    RT_REQ_(cuDeviceGetCount);
    RT_REQ_(cuDeviceGet);
    RT_REQ_(cuDeviceGetName);
    RT_REQ_(cuDeviceTotalMem);
    RT_REQ_(cuDeviceGetAttribute);
    RT_REQ_(cuDevicePrimaryCtxRetain);
    RT_REQ_(cuDevicePrimaryCtxRelease);
    RT_REQ_(cuCtxGetCurrent);
    RT_REQ_(cuCtxSetCurrent);
    RT_REQ_(cuCtxSynchronize);
    RT_REQ_(cuMemGetInfo);
    RT_REQ_(cuMemAlloc);
    RT_REQ_(cuMemFree);
    RT_REQ_(cuMemHostAlloc);
    RT_REQ_(cuMemFreeHost);
    RT_REQ_(cuMemHostGetDevicePointer);
    RT_REQ_(cuMemcpyHtoD);
    RT_REQ_(cuMemcpyAsync);
    RT_REQ_(cuMemcpyHtoDAsync);
    RT_REQ_(cuMemcpyDtoHAsync);
    RT_REQ_(cuMemcpyDtoDAsync);
    RT_REQ_(cuMemsetD8Async);
    RT_REQ_(cuStreamCreate);
    RT_REQ_(cuStreamDestroy);
    RT_REQ_(cuStreamSynchronize);
    RT_REQ_(cuStreamQuery);
    RT_REQ_(cuStreamWaitEvent);
    RT_REQ_(cuLaunchHostFunc);
    RT_REQ_(cuEventCreate);
    RT_REQ_(cuEventDestroy);
    RT_REQ_(cuEventRecord);
    RT_REQ_(cuEventQuery);
    RT_REQ_(cuEventSynchronize);
    // cuda.h 12.8+ maps cuEventElapsedTime to _v2; older drivers only have the original (same signature).
    resolve(d.cuEventElapsedTime, RT_CU_STR_(cuEventElapsedTime), "cuEventElapsedTime", true);
    RT_REQ_(cuModuleLoadData);
    RT_REQ_(cuModuleUnload);
    RT_REQ_(cuModuleGetFunction);
    RT_REQ_(cuModuleGetGlobal);
    RT_REQ_(cuLaunchKernel);
    RT_OPT_(cuFuncGetParamInfo);
    RT_OPT_(cuFuncGetAttribute);
    RT_OPT_(cuModuleGetFunctionCount);
    RT_OPT_(cuModuleEnumerateFunctions);
    RT_OPT_(cuFuncGetName);
    RT_OPT_(cuMemAddressReserve);
    RT_OPT_(cuMemAddressFree);
    RT_OPT_(cuMemCreate);
    RT_OPT_(cuMemRelease);
    RT_OPT_(cuMemMap);
    RT_OPT_(cuMemUnmap);
    RT_OPT_(cuMemSetAccess);
    RT_OPT_(cuMemGetAllocationGranularity);
    RT_OPT_(cuModuleLoadDataEx);
    RT_OPT_(cuStreamCreateWithPriority);
    RT_OPT_(cuCtxGetStreamPriorityRange);
    RT_OPT_(cuDeviceGetUuid);
    RT_OPT_(cuMemAllocManaged);
    RT_OPT_(cuMemPrefetchAsync);
    RT_OPT_(cuMemcpy2DAsync);
    RT_OPT_(cuDeviceCanAccessPeer);
    RT_OPT_(cuCtxEnablePeerAccess);
    RT_OPT_(cuGraphCreate);
    RT_OPT_(cuGraphDestroy);
    RT_OPT_(cuGraphAddKernelNode);
    RT_OPT_(cuGraphAddMemcpyNode);
    RT_OPT_(cuGraphAddMemsetNode);
    RT_OPT_(cuGraphAddHostNode);
    RT_OPT_(cuGraphAddEmptyNode);
    RT_OPT_(cuGraphInstantiateWithFlags);
    RT_OPT_(cuGraphLaunch);
    RT_OPT_(cuGraphExecDestroy);
    RT_OPT_(cuGraphExecKernelNodeSetParams);
    RT_OPT_(cuGraphExecMemcpyNodeSetParams);
    RT_OPT_(cuGraphExecMemsetNodeSetParams);
    RT_OPT_(cuGraphExecHostNodeSetParams);
#undef RT_REQ_
#undef RT_OPT_
    if (!missing.empty()) {
        d.why = "the CUDA driver library '" + d.library + "' lacks " + missing + " (driver too old for this runtime)";
        return a;  // the handle stays open: other Driver objects may share it, and closing a driver is unsafe
    }
    a.resolved = true;
    a.init = d.cuInit(0);
    if (a.init != CUDA_SUCCESS) {
        d.why = "cuInit of '" + d.library + "' failed: " + describe(d, a.init);
        return a;
    }
    d.cuDriverGetVersion(&d.version);
    d.available = true;
    return a;
}

/// A library that is not the machine's driver: the toolkit's stub (lib64/stubs, on LD_LIBRARY_PATH by mistake), or a
/// forward-compatibility libcuda (cuda/compat) that does not fit the kernel driver or the GPU.
bool worth_another(const Attempt& a) {
    return !a.opened || (a.resolved && (a.init == CUDA_ERROR_STUB_LIBRARY || a.init == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH ||
                                        a.init == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE));
}

std::string real_path(const std::string& p) {
    char* r = ::realpath(p.c_str(), nullptr);
    std::string out = r ? r : p;
    std::free(r);
    return out;
}

}  // namespace

std::vector<std::string> driver_fallbacks() {
#if defined(__aarch64__)
    return {"/usr/lib/aarch64-linux-gnu/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib64/libcuda.so.1"};
#else
    return {"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib64/libcuda.so.1",
            "/usr/lib/wsl/lib/libcuda.so.1"};
#endif
}

void load_driver(Driver& d, const std::string& library, const std::vector<std::string>& fallbacks) {
    Attempt a = open_one(d, library);
    if (d.available || !worth_another(a)) return;
    std::string tried;  // the fallbacks, each with what became of it
    std::vector<std::string> opened = {real_path(d.library)};
    for (const std::string& path : fallbacks) {
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) {
            tried += (tried.empty() ? "" : ", ") + path + " (absent)";
            continue;
        }
        const std::string real = real_path(path);
        if (std::find(opened.begin(), opened.end(), real) != opened.end()) {
            tried += (tried.empty() ? "" : ", ") + path + " (the same file)";
            continue;
        }
        opened.push_back(real);
        Driver next;
        Attempt b = open_one(next, path);
        if (next.available) {
            d = next;
            return;
        }
        tried += (tried.empty() ? "" : ", ") + path + " (" + next.why + ")";
        if (!worth_another(b)) break;  // the machine's driver itself refuses: another copy will not do better
    }
    if (!tried.empty()) d.why += "; also tried " + tried;
    if (!a.opened) d.why += ": no NVIDIA driver is installed, or set RUNTIME_CUDA_DRIVER_LIB to its path";
}

const Driver& driver() {
    // Never destroyed: kernels, streams and callbacks of the driver may outlive static destruction.
    static std::mutex* mutex = new std::mutex;
    static auto* loaded = new std::map<std::string, Driver*>;
    const char* env = std::getenv("RUNTIME_CUDA_DRIVER_LIB");
    const bool named = env && *env;
    std::string library = named ? env : "libcuda.so.1";
    std::lock_guard lock(*mutex);
    // One attempt per library name for the life of the process, successful or not: references handed out stay
    // valid, and a driver does not appear while a process runs (another name, e.g. a test's, is a new attempt).
    Driver*& d = (*loaded)[library];
    if (!d) {
        d = new Driver;
        // A library named in the environment is used as it is; the default soname may be a stub or a compat
        // library that shadows the real driver, which then lives at one of the usual absolute paths.
        load_driver(*d, library, named ? std::vector<std::string>{} : driver_fallbacks());
        if (d->available)
            RT_LOG(backend, info, "cuda driver: '%s' loaded (driver API %d.%d)%s", d->library.c_str(),
                   d->version / 1000, d->version % 1000 / 10, named ? " (RUNTIME_CUDA_DRIVER_LIB)" : "");
        else
            RT_LOG(backend, info, "cuda driver: not available: %s", d->why.c_str());
    }
    return *d;
}

std::string describe(const Driver& d, CUresult r) {
    const char* name = nullptr;
    const char* text = nullptr;
    if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
    if (d.cuGetErrorString) d.cuGetErrorString(r, &text);
    std::string out = name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
    if (text) out += std::string(": ") + text;
    return out;
}

bool is_sticky(CUresult r) {
    switch (r) {
        case CUDA_ERROR_ILLEGAL_ADDRESS:
        case CUDA_ERROR_LAUNCH_FAILED:
        case CUDA_ERROR_ASSERT:
        case CUDA_ERROR_HARDWARE_STACK_ERROR:
        case CUDA_ERROR_ILLEGAL_INSTRUCTION:
        case CUDA_ERROR_MISALIGNED_ADDRESS:
        case CUDA_ERROR_INVALID_ADDRESS_SPACE:
        case CUDA_ERROR_INVALID_PC:
        case CUDA_ERROR_LAUNCH_TIMEOUT:
        case CUDA_ERROR_ECC_UNCORRECTABLE:
        case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        case CUDA_ERROR_UNKNOWN:  // in practice what a context returns after an Xid fault: it does not recover
            return true;
        default:
            return false;
    }
}

rtError_t translate(CUresult r) {
    switch (r) {
        case CUDA_SUCCESS: return RT_SUCCESS;
        case CUDA_ERROR_NOT_READY: return RT_ERROR_NOT_READY;
        case CUDA_ERROR_OUT_OF_MEMORY: return RT_ERROR_OUT_OF_MEMORY;
        case CUDA_ERROR_INVALID_VALUE: return RT_ERROR_INVALID_VALUE;
        case CUDA_ERROR_INVALID_HANDLE:
        case CUDA_ERROR_INVALID_CONTEXT: return RT_ERROR_INVALID_HANDLE;
        case CUDA_ERROR_NO_DEVICE:
        case CUDA_ERROR_INVALID_DEVICE:
        case CUDA_ERROR_DEVICE_UNAVAILABLE:
            return RT_ERROR_INVALID_DEVICE;
        case CUDA_ERROR_NOT_INITIALIZED:
        case CUDA_ERROR_DEINITIALIZED: return RT_ERROR_NOT_INITIALIZED;
        case CUDA_ERROR_ECC_UNCORRECTABLE: return RT_ERROR_DEVICE_LOST;
        case CUDA_ERROR_NOT_PERMITTED: return RT_ERROR_NOT_PERMITTED;
        case CUDA_ERROR_NOT_SUPPORTED: return RT_ERROR_NOT_SUPPORTED;
        case CUDA_ERROR_NOT_FOUND: return RT_ERROR_NOT_FOUND;
        case CUDA_ERROR_INVALID_IMAGE:
        case CUDA_ERROR_NO_BINARY_FOR_GPU: return RT_ERROR_INVALID_VALUE;  // the file, not a compile, is at fault
        case CUDA_ERROR_INVALID_PTX:
        case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
        case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
        case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND: return RT_ERROR_COMPILE_FAILED;
        case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return RT_ERROR_LAUNCH_FAILED;
        default: return is_sticky(r) ? RT_ERROR_LAUNCH_FAILED : RT_ERROR_UNKNOWN;
    }
}

namespace {
/// What an error means for a runtime call, where the driver's own text does not say it.
const char* hint(CUresult r) {
    switch (r) {
        case CUDA_ERROR_NOT_PERMITTED:
            return "CUDA refuses calls from inside a host function (cuLaunchHostFunc's callback thread): queue the work "
                   "from another thread";
        case CUDA_ERROR_NOT_INITIALIZED:
        case CUDA_ERROR_DEINITIALIZED: return "the CUDA driver is not initialised or is shutting down (process exit?)";
        case CUDA_ERROR_DEVICE_UNAVAILABLE:
            return "the GPU is in use by another process (exclusive-process compute mode) or cannot be reached";
        case CUDA_ERROR_NO_BINARY_FOR_GPU: return "the module holds no code for this GPU's architecture";
        case CUDA_ERROR_UNKNOWN: return "after a GPU fault (see the kernel log, Xid): the context is not usable";
        default: return nullptr;
    }
}
}  // namespace

void throw_driver_error(const Driver& d, CUresult r, const char* what) {
    rtError_t code = translate(r);
    if (code == RT_SUCCESS || code == RT_ERROR_NOT_READY) code = RT_ERROR_UNKNOWN;  // callers handle NOT_READY
    std::string msg = std::string(what) + " failed: " + describe(d, r);
    if (const char* h = hint(r)) msg += std::string(" (") + h + ")";
    throw Error(code, msg);
}

}  // namespace rt::cuda
