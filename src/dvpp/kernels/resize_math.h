// resize_math.h — the sampling of every DVPP resize (nearest, bilinear, area), in integer arithmetic: the resize
// kernels and the fused pre-processing both sample through these functions, so they agree bit for bit, on every
// backend.
//
// Kernel dialect source after common.h; the library also includes it as plain C++ for DvppAxis and DvppResample,
// which its host code fills (src/dvpp/resize.cpp, make_axis) and passes to kernels by value.
//
// The rules, per axis, for a source extent S (a crop's width or height) and a destination extent D:
//   - nearest: source index floor(x * S / D), as cv2.INTER_NEAREST;
//   - bilinear: pixel centres aligned, position (x + 0.5) * S / D - 0.5, edges replicated, 8-bit weights
//     (w1 = position's fraction rounded to 1/256), horizontal then vertical, the 16-bit products summed and rounded
//     once: cv2.INTER_LINEAR_EXACT bit for bit;
//   - area, when neither axis grows: the average of the source pixels under the destination pixel, each weighted by
//     the exact area it covers (integer units of 1/D), rounded to nearest (cv2.INTER_AREA within 1);
//   - area, when an axis grows: OpenCV's area-weighted linear on both axes (index floor(x * S / D), weight of the
//     next pixel the part of the destination pixel past the source pixel's edge), 11-bit weights.
//
// Matching OpenCV exactly. OpenCV computes the bilinear and nearest positions in double: step = 1 / (D / S), then
// step * (x + 0.5) or step * x, each correctly rounded. That is the exact rational S / D * (...) except where the
// exact value lies on a rounding boundary (a weight's half-way point; an integer index), which double rounding can
// push to either side. We compute the exact value with integers (no division on the device: a precomputed
// reciprocal, DvppDivider), know when it is on a boundary (the division is exact), and decide the side as the
// double would have: its step differs from S / D by a relative error delta, fixed per axis (sign `dir`); the
// product step * v, v exact, lands off v iff |v * delta| exceeds half a unit in the last place of v, i.e. iff v's
// significand m in [1, 2) exceeds mu = 2^-53 / |delta| (below a power of two the unit halves: there the threshold
// is m > mu / 2). The host computes dir and floor(mu * 2^31) exactly (make_axis); the device compares v's
// significand scaled to [2^31, 2^32) with it.
//
// Limits (checked by the host): S and D at most 65536, so every intermediate fits in 32 bits (64 for the area sums).

/// Exact floor(n / d) for every 32-bit n, without a division: n * m >> (32 + shift), m = floor(2^(32+shift) / d) + 1
/// (at most 33 bits: its low 32 bits are `mlo`), shift = ceil(log2 d) (Granlund and Montgomery, 1994).
struct DvppDivider {
    uint32_t mlo;
    uint32_t shift;
};

RT_DEVICE uint32_t dvpp_div(const DvppDivider& d, uint32_t n) {
    const uint64_t t = ((uint64_t)n * d.mlo) >> 32;
    return (uint32_t)((t + n) >> d.shift);
}

/// One axis of a resize, from S = src to D = dst pixels. Filled by the host (make_axis); the fields are the
/// constants of the formulas below.
struct DvppAxis {
    uint32_t src, dst;
    /// Bilinear: H(x) = floor(256 * (2x + 1) * S / D) = x * lin_q + lin_q0 + (x * lin_r + lin_r0) / D.
    uint32_t lin_q, lin_q0, lin_r, lin_r0;
    /// Nearest: floor(x * S / D) = x * nn_q + (x * nn_r) / D.
    uint32_t nn_q, nn_r;
    /// S and D over their greatest common divisor: area weights are in units of 1 / red_dst.
    uint32_t red_src, red_dst;
    DvppDivider by_dst;       // / D
    DvppDivider by_red_dst;   // / red_dst
    DvppDivider by_2red_src;  // / (2 * red_src)
    /// OpenCV's double step minus S / D: its sign (0: the step is exact), and floor(2^31 * 2^-53 / |relative error|),
    /// at most 2^33 (never off a boundary); see the header comment.
    int32_t dir;
    uint32_t reserved_;
    uint64_t mu;
};

/// The sampling of one resize: how, and both axes.
static constexpr int32_t DVPP_MODE_NEAREST = 0;
static constexpr int32_t DVPP_MODE_BILINEAR = 1;
static constexpr int32_t DVPP_MODE_AREA = 2;         // area averaging: neither axis grows
static constexpr int32_t DVPP_MODE_AREA_LINEAR = 3;  // area asked where an axis grows: OpenCV's area-weighted linear

struct DvppResample {
    DvppAxis x, y;
    int32_t mode;
    uint32_t reserved_;
};

/// Two source indices and the weight of the second, in 1 / 2^BITS (the first weighs 2^BITS - w1).
struct DvppTap {
    uint32_t i0, i1, w1;
};

/// v (>= 1) scaled by a power of two into [2^31, 2^32); a power of two gives 2^32, which halves its threshold as
/// the header comment explains. 0 gives 0.
RT_DEVICE uint64_t dvpp_significand_(uint32_t v) {
    v = v < (1u << 16) ? v << 16 : v;
    v = v < (1u << 24) ? v << 8 : v;
    v = v < (1u << 28) ? v << 4 : v;
    v = v < (1u << 30) ? v << 2 : v;
    v = v < (1u << 31) ? v << 1 : v;
    return v == (1u << 31) ? (uint64_t)1 << 32 : (uint64_t)v;
}

/// Whether OpenCV's double product for the exact value v (on a boundary) lands off it, in the direction of a.dir.
RT_DEVICE bool dvpp_moved_(const DvppAxis& a, uint32_t v) { return a.dir != 0 && dvpp_significand_(v) > a.mu; }

/// The nearest rule: floor(x * S / D) as OpenCV's double computes it, at most S - 1.
RT_DEVICE uint32_t dvpp_nearest_index(const DvppAxis& a, uint32_t x) {
    const uint32_t n = x * a.nn_r;
    const uint32_t q = dvpp_div(a.by_dst, n);
    uint32_t k = x * a.nn_q + q;
    // On an integer (the division exact), a step below S / D that moves the product lands just under it.
    const bool down = n == q * a.dst && k > 0 && a.dir < 0 && dvpp_moved_(a, k);
    k -= down ? 1u : 0u;
    return dvpp_min_u32(k, a.src - 1);
}

/// The bilinear rule: the two source pixels around (x + 0.5) * S / D - 0.5 and the second one's 8-bit weight;
/// outside the first and last pixel centres both indices are that edge pixel.
RT_DEVICE DvppTap dvpp_linear_tap(const DvppAxis& a, uint32_t x) {
    const uint32_t n = x * a.lin_r + a.lin_r0;
    const uint32_t q = dvpp_div(a.by_dst, n);
    const bool exact = n == q * a.dst;
    const uint32_t h = x * a.lin_q + a.lin_q0 + q;  // floor of the position + 0.5, in 1/512
    const uint32_t g = h - 256;                     // the position in 1/512 (when h >= 256)
    const uint32_t i = g >> 9;
    const uint32_t r = g & 511u, k = r >> 1;
    // The weight is r / 2 rounded: r even -> k; r odd and the position past the half -> k + 1; exactly on the half,
    // the side OpenCV's double lands on, or, when it lands on the half itself, to even.
    const bool tie = (r & 1u) && exact;
    const bool moved = tie && dvpp_moved_(a, h);
    const uint32_t w_tie = moved ? (a.dir > 0 ? k + 1 : k) : k + (k & 1u);
    const uint32_t w = tie ? w_tie : k + (r & 1u);
    DvppTap t;
    const bool left = h < 256 || a.src == 1;  // before the first centre (or a single pixel): replicate it
    const bool right = !left && i >= a.src - 1;
    t.i0 = left ? 0u : right ? a.src - 1 : i;
    t.i1 = left ? 0u : right ? a.src - 1 : i + 1;
    t.w1 = (left || right) ? 0u : w;
    return t;
}

/// OpenCV's area-weighted linear rule (INTER_AREA where an axis grows): index floor(x * S / D) as nearest, and the
/// next pixel weighs the part of destination pixel x past that pixel's edge, in 1/2048.
RT_DEVICE DvppTap dvpp_area_linear_tap(const DvppAxis& a, uint32_t x) {
    const uint32_t s = dvpp_nearest_index(a, x);
    // The part, in units of 1 / red_src destination pixels: (x + 1) * S' - (s + 1) * D' (S', D' reduced). OpenCV
    // takes it as 0 when not positive, and when it is a whole pixel (s one below the exact index, see
    // dvpp_nearest_index) its float rounding to 1.0 makes the fraction 0 too.
    const uint32_t end = (x + 1) * a.red_src, edge = (s + 1) * a.red_dst;
    const uint32_t part = end > edge ? end - edge : 0u;
    const bool inside = part > 0 && part < a.red_src && s + 1 < a.src;
    DvppTap t;
    t.i0 = s;
    t.i1 = inside ? s + 1 : s;
    t.w1 = inside ? dvpp_div(a.by_2red_src, part * 4096u + a.red_src) : 0u;  // round(2048 * part / S')
    return t;
}

/// A two-tap sample at (tx, ty) of an image of C channels at src (rows `pitch` bytes apart), weights of BITS bits:
/// horizontal sums first, then the vertical ones, rounded once.
template <int C, int BITS>
RT_DEVICE void dvpp_sample_2tap(const uint8_t* src, uint32_t pitch, const DvppTap& tx, const DvppTap& ty,
                                uint32_t out[C]) {
    const uint32_t one = 1u << BITS;
    const uint8_t* r0 = dvpp_row(src, pitch, ty.i0);
    const uint8_t* r1 = dvpp_row(src, pitch, ty.i1);
    const uint32_t a0 = one - tx.w1, a1 = tx.w1, b0 = one - ty.w1, b1 = ty.w1;
    for (int c = 0; c < C; ++c) {
        const uint32_t h0 = a0 * r0[tx.i0 * C + c] + a1 * r0[tx.i1 * C + c];
        const uint32_t h1 = a0 * r1[tx.i0 * C + c] + a1 * r1[tx.i1 * C + c];
        out[c] = (b0 * h0 + b1 * h1 + (1u << (2 * BITS - 1))) >> (2 * BITS);
    }
}

template <int C>
RT_DEVICE void dvpp_sample_nearest(const DvppResample& r, const uint8_t* src, uint32_t pitch, uint32_t x, uint32_t y,
                                   uint32_t out[C]) {
    const uint8_t* p = dvpp_row(src, pitch, dvpp_nearest_index(r.y, y)) + dvpp_nearest_index(r.x, x) * C;
    dvpp_load_px<C>(p, out);
}

template <int C>
RT_DEVICE void dvpp_sample_bilinear(const DvppResample& r, const uint8_t* src, uint32_t pitch, uint32_t x, uint32_t y,
                                    uint32_t out[C]) {
    dvpp_sample_2tap<C, 8>(src, pitch, dvpp_linear_tap(r.x, x), dvpp_linear_tap(r.y, y), out);
}

template <int C>
RT_DEVICE void dvpp_sample_area_linear(const DvppResample& r, const uint8_t* src, uint32_t pitch, uint32_t x,
                                       uint32_t y, uint32_t out[C]) {
    dvpp_sample_2tap<C, 11>(src, pitch, dvpp_area_linear_tap(r.x, x), dvpp_area_linear_tap(r.y, y), out);
}

/// The first source pixel under destination pixel x of an area resize (floor(x * S / D), no OpenCV double here).
RT_DEVICE uint32_t dvpp_area_first_(const DvppAxis& a, uint32_t x) { return x * a.nn_q + dvpp_div(a.by_dst, x * a.nn_r); }

/// Area averaging: destination pixel x covers [x * S', (x + 1) * S') in units of 1 / D' (reduced), source pixel s
/// covers [s * D', (s + 1) * D'); each source pixel weighs its overlap, and the sum is divided by S'x * S'y, rounded
/// half up.
template <int C>
RT_DEVICE void dvpp_sample_area(const DvppResample& r, const uint8_t* src, uint32_t pitch, uint32_t x, uint32_t y,
                                uint32_t out[C]) {
    const DvppAxis& ax = r.x;
    const DvppAxis& ay = r.y;
    const uint32_t x_lo = x * ax.red_src, x_hi = x_lo + ax.red_src;
    const uint32_t y_lo = y * ay.red_src, y_hi = y_lo + ay.red_src;
    const uint32_t sx0 = dvpp_area_first_(ax, x), sy0 = dvpp_area_first_(ay, y);
    uint64_t total[C];
    for (int c = 0; c < C; ++c) total[c] = 0;
    for (uint32_t sy = sy0; sy * ay.red_dst < y_hi; ++sy) {
        const uint32_t wy = dvpp_min_u32((sy + 1) * ay.red_dst, y_hi) - dvpp_max_u32(sy * ay.red_dst, y_lo);
        const uint8_t* row = dvpp_row(src, pitch, sy);
        uint32_t sum[C];
        for (int c = 0; c < C; ++c) sum[c] = 0;
        for (uint32_t sx = sx0; sx * ax.red_dst < x_hi; ++sx) {
            const uint32_t wx = dvpp_min_u32((sx + 1) * ax.red_dst, x_hi) - dvpp_max_u32(sx * ax.red_dst, x_lo);
            for (int c = 0; c < C; ++c) sum[c] += wx * row[sx * C + c];
        }
        for (int c = 0; c < C; ++c) total[c] += (uint64_t)wy * sum[c];
    }
    const uint64_t den = (uint64_t)ax.red_src * ay.red_src;
    for (int c = 0; c < C; ++c) out[c] = (uint32_t)((total[c] + den / 2) / den);
}

/// The resize's sample at destination pixel (x, y) of an image of C channels at src, rows `pitch` bytes apart
/// (src is the crop's first pixel, x and y count from the destination rectangle's corner).
template <int C>
RT_DEVICE void dvpp_resample(const DvppResample& r, const uint8_t* src, uint32_t pitch, uint32_t x, uint32_t y,
                             uint32_t out[C]) {
    if (r.mode == DVPP_MODE_NEAREST)
        dvpp_sample_nearest<C>(r, src, pitch, x, y, out);
    else if (r.mode == DVPP_MODE_BILINEAR)
        dvpp_sample_bilinear<C>(r, src, pitch, x, y, out);
    else if (r.mode == DVPP_MODE_AREA)
        dvpp_sample_area<C>(r, src, pitch, x, y, out);
    else
        dvpp_sample_area_linear<C>(r, src, pitch, x, y, out);
}
