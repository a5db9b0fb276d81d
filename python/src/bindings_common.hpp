// bindings_common.hpp — what runtime._core's binding files share (core_module.cpp's conventions): a failed call
// raises the Python class registered for its rtError_t, with the library's message, and every call into the library
// releases the GIL.
#pragma once

#include <nanobind/nanobind.h>

#include <runtime/runtime.h>

namespace rt_bindings {

using CheckFn = void (*)(rtError_t, const char*);
/// core_module.cpp's check(): raises the registered class for a failed call. Each bind_* function sets it (all to the
/// same function) before it binds anything.
inline CheckFn g_check = nullptr;

/// Runs `f` (an rt* call returning rtError_t) with the GIL released, then raises if it failed, naming `api`.
template <class F> void nogil(const char* api, F&& f) {
    rtError_t e;
    {
        nanobind::gil_scoped_release r;
        e = f();
    }
    g_check(e, api);
}

}  // namespace rt_bindings
