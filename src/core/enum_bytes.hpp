// enum_bytes.hpp — reading an enum argument of a C ABI by its bytes; shared by the C API (src/capi) and the AscendCL
// face (src/acl), header-only and free of the core's types.
#pragma once

#include <cstring>
#include <type_traits>

namespace rt {

/// The C ABI may pass any integer as an enum argument or field: read its bytes, never load it as the enum (a value
/// outside the enum's range is undefined behaviour to load, and UBSan says so).
template <class E> inline int enum_value(const E& e) noexcept {
    static_assert(std::is_enum_v<E> && sizeof(int) == sizeof(E));
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

}  // namespace rt
