// Overflow-checked size arithmetic for sizes and end addresses computed from user input.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.hpp"

namespace rt {

/// a + b, or RT_ERROR_INVALID_VALUE naming both values and `what` (e.g. "rtHostRegister: ptr + size").
inline size_t checked_add(size_t a, size_t b, const char* what) {
    size_t r;
    if (__builtin_add_overflow(a, b, &r))
        fail(RT_ERROR_INVALID_VALUE, "%s: %zu + %zu overflows (the range wraps past the end of the address space)",
             what, a, b);
    return r;
}

/// a * b, or RT_ERROR_INVALID_VALUE naming both values and `what`.
inline size_t checked_mul(size_t a, size_t b, const char* what) {
    size_t r;
    if (__builtin_mul_overflow(a, b, &r))
        fail(RT_ERROR_INVALID_VALUE, "%s: %zu * %zu overflows size_t", what, a, b);
    return r;
}

/// Refuses [ptr, ptr + bytes) when it wraps past the end of the address space. `role` ("destination"…) may be "".
inline void require_range(const void* ptr, size_t bytes, const char* api, const char* role = "") {
    uintptr_t end;
    if (__builtin_add_overflow(reinterpret_cast<uintptr_t>(ptr), bytes, &end))
        fail(RT_ERROR_INVALID_VALUE, "%s: %s%s[%p, +%zu bytes) wraps past the end of the address space", api, role,
             *role ? " " : "", ptr, bytes);
}

}  // namespace rt
