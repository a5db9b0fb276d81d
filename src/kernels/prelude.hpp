// Texts embedded at build time (cmake/embed_prelude.cmake): the dialect's prelude and the cpu target's own sources.
#pragma once

namespace rt {

/// include/runtime/kernel.h: included first by every target's compilation.
const char* kernel_prelude_text() noexcept;
/// src/backends/cpu/cpu_kernel_abi.h: placed first in every generated cpu kernel module.
const char* cpu_kernel_abi_text() noexcept;
/// src/backends/cpu/cpu_entry.h: the entry code placed after the kernel struct of every generated cpu module.
const char* cpu_entry_text() noexcept;

/// The SHA-256 (hex) of each text, computed at build time: what target identities hash (hashing the texts
/// themselves at a process's first kernel load costs ~0.1 ms).
const char* kernel_prelude_text_digest() noexcept;
const char* cpu_kernel_abi_text_digest() noexcept;
const char* cpu_entry_text_digest() noexcept;

}  // namespace rt
