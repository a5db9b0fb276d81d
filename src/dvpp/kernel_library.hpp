// The DVPP pixel operations' kernels: dialect source shipped inside the library (src/dvpp/kernels/, embedded at build
// time), built per device on first use through the same toolchain as rtModuleLoadSource (so cached on disk like any
// module, and identical for cpu and cuda), and launched on the caller's stream.
#pragma once

#include <cstdint>

#include "runtime/runtime.h"

namespace rt::dvpp {

/// A family is one module: src/dvpp/kernels/<family>.cpp preceded by the shared headers it needs (common.h, and for
/// preprocess the resize and colour maths), so a program that only resizes never builds the colour kernels.
enum class Family { resize, color, normalize, preprocess };

/// The embedded source of a family's module, exactly as it is built (the shared headers, then the family's file).
/// Static storage. For the toolchain tests (every family compiles for sm_90 with NVRTC).
const char* family_source(Family family) noexcept;
const char* family_name(Family family) noexcept;  ///< "resize", "color", ...

/// The kernel `name` of `family` on the device of `stream` (NULL: the current device's default stream). Thread-safe:
/// the module is built at most once per device and runtime lifetime (rtInit .. rtFinalize; concurrent first callers
/// wait for the one build) and unloaded by rtFinalize. Throws rt::Error: the build's failure (a defect of the
/// library: COMPILE_FAILED with the compiler's log), NOT_FOUND for a name the family lacks.
rtFunction_t kernel(rtStream_t stream, Family family, const char* name);

/// Launches `function` over width x height work-items (an exact 2-D global size, x fastest; the block shape is the
/// library's choice for the device) with `num_args` arguments, arity-checked. Throws rt::Error with the launch's
/// code and message.
void launch_2d(rtStream_t stream, rtFunction_t function, uint32_t width, uint32_t height, void** args, int num_args);

/// Throws rt::Error(code, "<api>: <rtGetLastErrorMessage()>") when `code` is not RT_SUCCESS: how DVPP turns a failed
/// call of the C API it is built on into its own failure.
void check(rtError_t code, const char* api);

}  // namespace rt::dvpp
