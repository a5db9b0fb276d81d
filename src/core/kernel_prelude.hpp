// The kernel dialect's prelude (include/runtime/kernel.h) and the cpu kernel ABI header, embedded at build time.
#pragma once

namespace rt {

/// Text of include/runtime/kernel.h as it was when the library was built (cmake/embed_prelude.cmake).
const char* kernel_prelude_text() noexcept;
/// Text of src/backends/cpu/cpu_kernel_abi.h; placed first in every generated cpu kernel module.
const char* cpu_kernel_abi_text() noexcept;

}  // namespace rt
