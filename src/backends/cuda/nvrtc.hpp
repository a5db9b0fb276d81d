// NVRTC (the CUDA run-time compiler), opened with dlopen at run time.
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

}  // namespace rt::cuda
