// fake_nvrtc.cpp — TEST DOUBLE of libnvrtc (and, built with FAKE_NVRTC_BUILTINS, of libnvrtc-builtins) for the NVRTC search tests. NOT A COMPILER.
//
// test_cuda_shim copies these into folders laid out like a toolkit or a pip wheel and checks which one the shim
// (src/backends/cuda/nvrtc.cpp) opens, and that the builtins library of the same folder is preloaded. The API
// functions exist so the shim accepts the library; every compile fails.
#include <cuda.h>  // CUDA_VERSION
#include <nvrtc.h>

extern "C" {

#ifdef FAKE_NVRTC_BUILTINS
/// Found with dlsym(RTLD_DEFAULT, ...) once the shim has loaded this library into the global scope.
int fake_nvrtc_builtins_marker(void) { return 42; }
#else
nvrtcResult nvrtcVersion(int* major, int* minor) {
    *major = CUDA_VERSION / 1000;  // the toolkit the test was built with: the shim looks for its builtins version
    *minor = 0;
    return NVRTC_SUCCESS;
}
const char* nvrtcGetErrorString(nvrtcResult) { return "fake NVRTC: compiles nothing"; }
nvrtcResult nvrtcCreateProgram(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*) {
    return NVRTC_ERROR_INTERNAL_ERROR;
}
nvrtcResult nvrtcDestroyProgram(nvrtcProgram*) { return NVRTC_SUCCESS; }
nvrtcResult nvrtcCompileProgram(nvrtcProgram, int, const char* const*) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram, size_t*) { return NVRTC_ERROR_INVALID_PROGRAM; }
nvrtcResult nvrtcGetProgramLog(nvrtcProgram, char*) { return NVRTC_ERROR_INVALID_PROGRAM; }
nvrtcResult nvrtcGetPTXSize(nvrtcProgram, size_t*) { return NVRTC_ERROR_INVALID_PROGRAM; }
nvrtcResult nvrtcGetPTX(nvrtcProgram, char*) { return NVRTC_ERROR_INVALID_PROGRAM; }
#endif

}  // extern "C"
