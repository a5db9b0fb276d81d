// NVRTC (the CUDA run-time compiler), opened with dlopen at run time, and the cuda kernel compiler built on it.
#pragma once

#include <cuda.h>  // CUDA_VERSION: the toolkit the headers come from
#include <nvrtc.h>

#include <string>
#include <vector>

namespace rt::cuda {

#define RT_NVRTC_FN_(name) decltype(&::name) name = nullptr
struct Nvrtc {
    RT_NVRTC_FN_(nvrtcVersion);
    RT_NVRTC_FN_(nvrtcGetErrorString);
    RT_NVRTC_FN_(nvrtcCreateProgram);
    RT_NVRTC_FN_(nvrtcDestroyProgram);
    RT_NVRTC_FN_(nvrtcCompileProgram);
    RT_NVRTC_FN_(nvrtcGetProgramLogSize);
    RT_NVRTC_FN_(nvrtcGetProgramLog);
    RT_NVRTC_FN_(nvrtcGetPTXSize);
    RT_NVRTC_FN_(nvrtcGetPTX);
    RT_NVRTC_FN_(nvrtcGetCUBINSize);  // optional: 11.1+; without it only PTX is produced
    RT_NVRTC_FN_(nvrtcGetCUBIN);

    bool available = false;
    int major = 0, minor = 0;
    std::string library;  ///< the file that was opened
    std::string why;      ///< when !available: every name tried and why each failed
};
#undef RT_NVRTC_FN_

/// NVRTC for this process: $RUNTIME_NVRTC_LIB (path or soname) if set, else the sonames of the toolkit
/// this runtime was built against first, then newer and older ones (libnvrtc.so.13, .12, .11.2, libnvrtc.so).
/// Tried once per distinct $RUNTIME_NVRTC_LIB value (failures included); thread-safe; never closed.
const Nvrtc& nvrtc();

/// What a compilation for the cuda backend produced.
struct CudaCompileResult {
    std::string image;     ///< cubin (when `cubin`) or PTX text (NUL-terminated in the string's data)
    bool cubin = false;
    std::string path;      ///< <cache>/cuda/<key>.cubin or .ptx
    std::string key;       ///< 32 hex digits: source, options, arch, NVRTC version, prelude
    std::vector<std::string> kernels;  ///< RT_KERNEL names in source order
    std::string log;       ///< NVRTC's warnings (empty on a cache hit)
    bool from_cache = false;
    double compile_seconds = 0;
};

/// Validates the user's option string (the same options as the cpu backend: -O0..-O3, -Os, -g, -D, -U, -I)
/// and translates it for NVRTC: -D/-U/-I pass through, -g becomes -lineinfo, -O levels are accepted and
/// ignored (NVRTC always optimises device code). Throws rt::Error(INVALID_VALUE) naming a bad option.
std::vector<std::string> nvrtc_options(const std::string& options);

/// Compiles kernel-dialect source for `arch` ("sm_90", from the device's compute capability) into the disk
/// cache (<cache>/cuda/<key>.cubin, or .ptx when `ptx` or when NVRTC cannot emit cubin), unless an entry for
/// the same key exists (`force`: compile anyway). The prelude (include/runtime/kernel.h) is an NVRTC header
/// included before the source, which keeps its own line numbers (#line) in diagnostics.
/// Errors: NVRTC missing: NOT_SUPPORTED (with why); a bad option or no kernel: INVALID_VALUE; diagnostics:
/// COMPILE_FAILED with NVRTC's log (lines of `source_name`) and the kernel names.
CudaCompileResult compile(const std::string& source, const std::string& options, const std::string& arch,
                          const std::string& source_name = "kernel_source", bool ptx = false, bool force = false);

}  // namespace rt::cuda
