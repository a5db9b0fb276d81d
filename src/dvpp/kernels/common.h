// common.h — what every DVPP kernel family shares: saturation, clamping, plane addressing, pixel loads and stores.
//
// Kernel dialect source (include/runtime/kernel.h), first in every family's module (kernel_library.hpp); the library
// also includes it as plain C++ for the structs its kernels take as parameters, so it uses only fixed-width integer
// types and defines RT_DEVICE where the dialect's prelude has not. Names start with dvpp_ / Dvpp (the module is one
// scope shared by several headers).
#ifndef RT_DEVICE
#define RT_DEVICE inline
#endif

/// v saturated to 0..255 (OpenCV's saturate_cast<uchar> of an int).
RT_DEVICE uint8_t dvpp_sat_u8(int32_t v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }
RT_DEVICE int32_t dvpp_clamp_i32(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }
RT_DEVICE uint32_t dvpp_min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }
RT_DEVICE uint32_t dvpp_max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }

/// Row y of a plane whose rows are `pitch` bytes apart (64-bit offset: planes may exceed 4 GiB).
RT_DEVICE const uint8_t* dvpp_row(const uint8_t* base, uint32_t pitch, uint32_t y) {
    return base + (uint64_t)y * pitch;
}
RT_DEVICE uint8_t* dvpp_row(uint8_t* base, uint32_t pitch, uint32_t y) { return base + (uint64_t)y * pitch; }

/// The C channels of the pixel at p, widened (C = 1..4).
template <int C>
RT_DEVICE void dvpp_load_px(const uint8_t* p, uint32_t v[C]) {
    for (int c = 0; c < C; ++c) v[c] = p[c];
}
/// Stores C channels (each 0..255) at p.
template <int C>
RT_DEVICE void dvpp_store_px(uint8_t* p, const uint32_t v[C]) {
    if (C == 2 || C == 4) {
        // One store of C bytes: clang merges the byte stores into one anyway, and vectorises the item loop around
        // them only when the merged store is written so.
        uint32_t w = 0;
        for (int c = 0; c < C; ++c) w |= v[c] << (8 * c);
        __builtin_memcpy(p, &w, C);  // the low C bytes (little-endian, as every target of the dialect)
        return;
    }
    for (int c = 0; c < C; ++c) p[c] = (uint8_t)v[c];
}
