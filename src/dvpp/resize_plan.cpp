// The host half of the resize maths (resize_plan.hpp): per-axis constants, computed exactly with 128-bit integers
// from the double OpenCV uses.
#include "dvpp/resize_plan.hpp"

#include <cmath>
#include <numeric>

#include "core/error.hpp"

namespace rt::dvpp {

namespace {

__extension__ typedef unsigned __int128 u128;

/// floor(n / d) for every 32-bit n as dvpp_div computes it (Granlund and Montgomery's round-up method).
DvppDivider make_divider(uint32_t d) {
    uint32_t shift = 0;
    while ((uint64_t{1} << shift) < d) ++shift;  // ceil(log2 d)
    const uint64_t m = static_cast<uint64_t>((u128{1} << (32 + shift)) / d) + 1;  // < 2^33 (2^32 + 1 for 2^k)
    return DvppDivider{static_cast<uint32_t>(m - (uint64_t{1} << 32)), shift};
}

}  // namespace

DvppAxis make_axis(uint32_t src, uint32_t dst) {
    DvppAxis a{};
    a.src = src;
    a.dst = dst;
    const uint64_t s = src, d = dst;
    // A fraction r / d in 32-bit fixed point, rounded up (DvppAxis).
    auto fraction = [&](uint64_t r) { return static_cast<uint32_t>(((r << 32) + d - 1) / d); };
    a.lin_q = static_cast<uint32_t>(512 * s / d);
    a.lin_fa = fraction(512 * s % d);
    a.lin_q0 = static_cast<uint32_t>(256 * s / d);
    a.lin_fb = fraction(256 * s % d);
    a.nn_q = static_cast<uint32_t>(s / d);
    a.nn_fa = fraction(s % d);
    const uint64_t g = std::gcd(s, d);
    a.red_src = static_cast<uint32_t>(s / g);
    a.red_dst = static_cast<uint32_t>(d / g);
    a.by_2red_src = make_divider(2 * a.red_src);

    // OpenCV's step: 1 / inv_scale with inv_scale = (double)dst / src, both correctly rounded (IEEE double here as in
    // its softdouble). step = I * 2^-e2 exactly; its error against src / dst is (I * dst - src * 2^e2) / (dst * 2^e2).
    const double step = 1.0 / (static_cast<double>(dst) / static_cast<double>(src));
    int exponent = 0;
    const double mantissa = std::frexp(step, &exponent);  // step = mantissa * 2^exponent, mantissa in [0.5, 1)
    const uint64_t I = static_cast<uint64_t>(std::ldexp(mantissa, 53));
    const int e2 = 53 - exponent;  // >= 36 for step <= 65536, <= 70 for step >= 1 / 65536
    const u128 exact = u128{src} << e2, scaled = u128{I} * dst;
    constexpr uint32_t never = UINT32_MAX;  // a scaled significand is at most 2^32 - 1: never above it
    a.up = scaled > exact ? 1 : 0;
    a.mu = a.mu_half = never;
    if (scaled != exact) {
        const u128 diff = scaled > exact ? scaled - exact : exact - scaled;
        // mu * 2^31 = 2^-22 / |relative error| = src * 2^(e2 - 22) / |I * dst - src * 2^e2|.
        const u128 mu = (u128{src} << (e2 - 22)) / diff;
        a.mu = mu > never ? never : static_cast<uint32_t>(mu);
        a.mu_half = mu / 2 > never ? never : static_cast<uint32_t>(mu / 2);
    }
    return a;
}

DvppResample make_resample(rtInterpolation interpolation, uint32_t src_width, uint32_t src_height, uint32_t dst_width,
                           uint32_t dst_height) {
    DvppResample r{};
    r.x = make_axis(src_width, dst_width);
    r.y = make_axis(src_height, dst_height);
    switch (interpolation) {
    case RT_INTERP_NEAREST: r.mode = DVPP_MODE_NEAREST; break;
    case RT_INTERP_BILINEAR: r.mode = DVPP_MODE_BILINEAR; break;
    case RT_INTERP_AREA:
        // As OpenCV: true area averaging only when neither axis grows.
        r.mode = dst_width <= src_width && dst_height <= src_height ? DVPP_MODE_AREA : DVPP_MODE_AREA_LINEAR;
        break;
    }
    return r;
}

void check_resize_extent(uint32_t width, uint32_t height, const char* what) {
    if (width > kMaxResizeExtent)
        fail(RT_ERROR_INVALID_VALUE, "%s width %u exceeds %u, the largest extent a resize takes", what, width,
             kMaxResizeExtent);
    if (height > kMaxResizeExtent)
        fail(RT_ERROR_INVALID_VALUE, "%s height %u exceeds %u, the largest extent a resize takes", what, height,
             kMaxResizeExtent);
}

}  // namespace rt::dvpp
