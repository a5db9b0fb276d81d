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
    RT_NVRTC_FN_(nvrtcAddNameExpression);  // optional: kernel templates (RT_KERNEL_INSTANTIATE) need both
    RT_NVRTC_FN_(nvrtcGetLoweredName);

    bool available = false;
    int major = 0, minor = 0;
    std::string library;   ///< the file that was opened (its full path when the loader tells it)
    std::string builtins;  ///< libnvrtc-builtins preloaded from the same folder; "" when none was found there
    std::string why;       ///< when !available: every candidate tried and why each failed, and the folders searched
};
#undef RT_NVRTC_FN_

/// Where NVRTC is looked for, in this order (nvrtc_candidates):
///  1. `explicit_lib` ($RUNTIME_NVRTC_LIB): a file or soname, tried alone; or a folder, searched first;
///  2. the toolkit folders of $CUDA_HOME and $CUDA_PATH (lib64, lib, targets/<arch>-linux/lib);
///  3. the dynamic loader by soname (LD_LIBRARY_PATH, the ld.so cache, run paths);
///  4. /usr/local/cuda/lib64 and /usr/local/cuda/targets/<arch>-linux/lib (toolkits not in the loader's path);
///  5. the pip wheels (nvidia-cuda-nvrtc: nvidia/cu13/lib, nvidia/cuda_nvrtc/lib) under every Python package folder
///     found without running Python: the site-/dist-packages folders of libraries already loaded in this process
///     (the Python package's own libruntime lives in one), $VIRTUAL_ENV, $CONDA_PREFIX, $PYTHONPATH, ~/.local,
///     /usr/local and /usr.
/// In each folder the sonames libnvrtc.so.<toolkit major>, .13, .12, .11.2 and libnvrtc.so, existing files only.
struct NvrtcSearch {
    std::string explicit_lib;
    std::vector<std::string> toolkit_roots;    ///< $CUDA_HOME, $CUDA_PATH
    bool loader = true;
    std::vector<std::string> fixed_roots;      ///< /usr/local/cuda
    std::vector<std::string> python_packages;  ///< site-packages folders
};

/// The search of this process: its environment and the libraries loaded in it.
NvrtcSearch nvrtc_search_from_environment();
/// The libraries to try, in order: absolute paths of existing files, and bare sonames (the loader's search).
std::vector<std::string> nvrtc_candidates(const NvrtcSearch& search);
/// The folders a search looks into, in order (for messages).
std::vector<std::string> nvrtc_search_folders(const NvrtcSearch& search);
/// Opens the first of `candidates` that loads and has the API; then preloads (RTLD_GLOBAL) libnvrtc-builtins from
/// the folder it came from, so NVRTC's own dlopen of the builtins by soname finds it even when that folder is not
/// in the loader's path (otherwise every compile fails with NVRTC_ERROR_BUILTIN_OPERATION_FAILURE). Never throws.
Nvrtc load_nvrtc(const std::vector<std::string>& candidates);

/// NVRTC for this process: load_nvrtc(nvrtc_candidates(nvrtc_search_from_environment())). Tried once per distinct
/// $RUNTIME_NVRTC_LIB value (failures included); thread-safe; never closed.
const Nvrtc& nvrtc();

}  // namespace rt::cuda
