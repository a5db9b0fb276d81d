// fake_cuda_api.hpp — the fake CUDA driver's query API (tests/fake_cuda/fake_cuda.h) as the tests reach it: symbols of
// the library the runtime loaded (RUNTIME_CUDA_DRIVER_LIB, set by the CTest environment), dlopen'ed again: the same
// instance, so the counts and switches are the runtime's.
#pragma once

#include <dlfcn.h>

#include <cstdlib>

namespace rt_test {

/// The fake driver's handle, or null (no RUNTIME_CUDA_DRIVER_LIB, or it does not load).
inline void* fake_cuda_library() {
    static void* const handle = [] {
        const char* lib = std::getenv("RUNTIME_CUDA_DRIVER_LIB");
        return lib ? ::dlopen(lib, RTLD_NOW | RTLD_LOCAL) : nullptr;
    }();
    return handle;
}

/// Sets `fn` to the fake's function `name` (null when it is not there); whether it was found.
template <class F>
bool fake_cuda_symbol(F& fn, const char* name) {
    void* h = fake_cuda_library();
    fn = h ? reinterpret_cast<F>(::dlsym(h, name)) : nullptr;
    return fn != nullptr;
}

}  // namespace rt_test
