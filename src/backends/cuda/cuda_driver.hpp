// The CUDA driver API, opened with dlopen at run time: a struct of function pointers and why it is unavailable.
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace rt::cuda {

/// Expands a driver function name through cuda.h's versioning macros (cuMemAlloc → cuMemAlloc_v2), so the
/// member has the type and the symbol name the header would have linked against.
#define RT_CU_FN_(name) decltype(&::name) name = nullptr

/// Every driver function the backend calls. Required ones are resolved at load (a missing one makes the
/// driver unavailable); optional ones (marked) stay nullptr when the driver is too old.
struct Driver {
    RT_CU_FN_(cuInit);
    RT_CU_FN_(cuDriverGetVersion);
    RT_CU_FN_(cuGetErrorName);
    RT_CU_FN_(cuGetErrorString);
    RT_CU_FN_(cuDeviceGetCount);
    RT_CU_FN_(cuDeviceGet);
    RT_CU_FN_(cuDeviceGetName);
    RT_CU_FN_(cuDeviceTotalMem);
    RT_CU_FN_(cuDeviceGetAttribute);
    RT_CU_FN_(cuDevicePrimaryCtxRetain);
    RT_CU_FN_(cuDevicePrimaryCtxRelease);
    RT_CU_FN_(cuCtxGetCurrent);
    RT_CU_FN_(cuCtxSetCurrent);
    RT_CU_FN_(cuCtxSynchronize);
    RT_CU_FN_(cuMemGetInfo);
    RT_CU_FN_(cuMemAlloc);
    RT_CU_FN_(cuMemFree);
    RT_CU_FN_(cuMemHostAlloc);
    RT_CU_FN_(cuMemFreeHost);
    RT_CU_FN_(cuMemHostGetDevicePointer);
    RT_CU_FN_(cuMemcpyHtoD);
    RT_CU_FN_(cuMemcpyAsync);
    RT_CU_FN_(cuMemcpyHtoDAsync);
    RT_CU_FN_(cuMemcpyDtoHAsync);
    RT_CU_FN_(cuMemcpyDtoDAsync);
    RT_CU_FN_(cuMemsetD8Async);
    RT_CU_FN_(cuStreamCreate);
    RT_CU_FN_(cuStreamDestroy);
    RT_CU_FN_(cuStreamSynchronize);
    RT_CU_FN_(cuStreamQuery);
    RT_CU_FN_(cuStreamWaitEvent);
    RT_CU_FN_(cuLaunchHostFunc);
    RT_CU_FN_(cuEventCreate);
    RT_CU_FN_(cuEventDestroy);
    RT_CU_FN_(cuEventRecord);
    RT_CU_FN_(cuEventQuery);
    RT_CU_FN_(cuEventSynchronize);
    RT_CU_FN_(cuEventElapsedTime);  // _v2 (12.8+), else the original symbol (same signature)
    RT_CU_FN_(cuModuleLoadData);
    RT_CU_FN_(cuModuleUnload);
    RT_CU_FN_(cuModuleGetFunction);
    RT_CU_FN_(cuModuleGetGlobal);
    RT_CU_FN_(cuLaunchKernel);
    // ---- optional
    RT_CU_FN_(cuFuncGetParamInfo);          // 12.4+: parameter sizes (arity checks)
    RT_CU_FN_(cuFuncGetAttribute);          // a kernel's static __shared__ bytes (local memory checks)
    RT_CU_FN_(cuModuleGetFunctionCount);    // 12.4+: kernel names of binary modules
    RT_CU_FN_(cuModuleEnumerateFunctions);  // 12.4+
    RT_CU_FN_(cuFuncGetName);               // 12.3+
    RT_CU_FN_(cuMemAddressReserve);         // virtual memory management: pool reserve/commit
    RT_CU_FN_(cuMemAddressFree);
    RT_CU_FN_(cuMemCreate);
    RT_CU_FN_(cuMemRelease);
    RT_CU_FN_(cuMemMap);
    RT_CU_FN_(cuMemUnmap);
    RT_CU_FN_(cuMemSetAccess);
    RT_CU_FN_(cuMemGetAllocationGranularity);
    RT_CU_FN_(cuModuleLoadDataEx);          // PTX loads with the JIT's error log (cuModuleLoadData without it)
    // The CUDA-level API (issue 20): each call that needs one reports NOT_SUPPORTED without it.
    RT_CU_FN_(cuStreamCreateWithPriority);
    RT_CU_FN_(cuCtxGetStreamPriorityRange);
    RT_CU_FN_(cuDeviceGetUuid);
    RT_CU_FN_(cuMemAllocManaged);
    RT_CU_FN_(cuMemPrefetchAsync);          // 13.0 headers: the _v2 (CUmemLocation) form
    RT_CU_FN_(cuMemcpy2DAsync);
    RT_CU_FN_(cuDeviceCanAccessPeer);
    RT_CU_FN_(cuCtxEnablePeerAccess);
    // Graphs (cuda_graph.cpp): every one of these, or no native lowering (the core replays graphs command by command).
    // The kernel node calls are the _v2 ones (driver 12.0+: CUDA_KERNEL_NODE_PARAMS with kern and ctx).
    RT_CU_FN_(cuGraphCreate);
    RT_CU_FN_(cuGraphDestroy);
    RT_CU_FN_(cuGraphAddKernelNode);
    RT_CU_FN_(cuGraphAddMemcpyNode);
    RT_CU_FN_(cuGraphAddMemsetNode);
    RT_CU_FN_(cuGraphAddHostNode);
    RT_CU_FN_(cuGraphAddEmptyNode);
    RT_CU_FN_(cuGraphInstantiateWithFlags);  // 11.4+
    RT_CU_FN_(cuGraphLaunch);
    RT_CU_FN_(cuGraphExecDestroy);
    RT_CU_FN_(cuGraphExecKernelNodeSetParams);
    RT_CU_FN_(cuGraphExecMemcpyNodeSetParams);
    RT_CU_FN_(cuGraphExecMemsetNodeSetParams);
    RT_CU_FN_(cuGraphExecHostNodeSetParams);

    /// Whether every graph entry point resolved (native lowering of executable graphs).
    bool has_graphs() const {
        return cuGraphCreate && cuGraphDestroy && cuGraphAddKernelNode && cuGraphAddMemcpyNode && cuGraphAddMemsetNode &&
               cuGraphAddHostNode && cuGraphAddEmptyNode && cuGraphInstantiateWithFlags && cuGraphLaunch &&
               cuGraphExecDestroy && cuGraphExecKernelNodeSetParams && cuGraphExecMemcpyNodeSetParams &&
               cuGraphExecMemsetNodeSetParams && cuGraphExecHostNodeSetParams;
    }

    bool available = false;  ///< loaded, every required symbol resolved, cuInit succeeded
    int version = 0;         ///< cuDriverGetVersion, e.g. 12040
    std::string library;     ///< the file that was opened (or tried)
    std::string why;         ///< when !available: why, in words ("libcuda.so.1 not found: ...")
};
#undef RT_CU_FN_

/// The driver for this process, loaded on first use from $RUNTIME_CUDA_DRIVER_LIB (a path or soname, used as it is),
/// else libcuda.so.1 with driver_fallbacks() behind it (load_driver). Each distinct library name is tried once and
/// never closed (the driver does not support unloading); the environment may name another library before a later
/// rtInit. Thread-safe. (Turning the backend off, cuda.enable=0 or RUNTIME_CUDA=0, is an option of the backend: the
/// driver is then not opened at all.)
const Driver& driver();

/// Where the machine's driver lives when the loader's libcuda.so.1 is not it: /usr/lib/<arch>-linux-gnu,
/// /usr/local/nvidia/lib64 (containers' driver mount), /usr/lib64, /usr/lib/wsl/lib.
std::vector<std::string> driver_fallbacks();
/// Opens `library` into `d`; when it cannot be opened, or its cuInit says it is the toolkit's stub
/// (CUDA_ERROR_STUB_LIBRARY) or a compat library that does not fit (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
/// CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE), tries each existing file of `fallbacks` in turn. On failure `d.why`
/// names the first library's problem and every fallback with its own. Never throws.
void load_driver(Driver& d, const std::string& library, const std::vector<std::string>& fallbacks);

/// "CUDA_ERROR_OUT_OF_MEMORY: out of memory" (the driver's own name and text; a number if unknown).
std::string describe(const Driver& d, CUresult r);

/// Throws rt::Error(code for `r`, "<what> failed: <describe(r)>[ (hint)]"); `r` != CUDA_SUCCESS. The code follows
/// the driver's error (translate); a hint says what the error means here when the driver's text does not (a call
/// from a host function, a driver shutting down, a device in exclusive use).
[[noreturn]] void throw_driver_error(const Driver& d, CUresult r, const char* what);
/// The rtError_t a driver result maps to: out of memory → OUT_OF_MEMORY; invalid value → INVALID_VALUE; invalid
/// handle/context → INVALID_HANDLE; no device, an unavailable device (exclusive mode, fell off the bus) →
/// INVALID_DEVICE; a driver not initialised or shutting down → NOT_INITIALIZED; an uncorrectable ECC error →
/// DEVICE_LOST; not permitted (a CUDA call from a host function) →
/// NOT_PERMITTED; not supported → NOT_SUPPORTED; a module image the driver cannot load (not an image, no code for
/// this GPU) → INVALID_VALUE; PTX the JIT rejects → COMPILE_FAILED; sticky faults → LAUNCH_FAILED.
rtError_t translate(CUresult r);
/// True for the errors after which the CUDA context is unusable (illegal address, trap, assert, an unknown
/// error — what drivers return after an Xid fault —, ...).
bool is_sticky(CUresult r);

}  // namespace rt::cuda

/// One checking macro for every driver call: on failure throws with the call's text (ggml's CUDA_CHECK,
/// without the abort). `drv` is the Driver; `call` the member call, e.g. CU_CHECK(d, cuStreamQuery(s)).
#define CU_CHECK(drv, call)                                                     \
    do {                                                                        \
        CUresult rt_cu_result_ = (drv).call;                                    \
        if (rt_cu_result_ != CUDA_SUCCESS)                                      \
            ::rt::cuda::throw_driver_error((drv), rt_cu_result_, #call);        \
    } while (0)
