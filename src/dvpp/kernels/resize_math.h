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
// push to either side. We compute the exact value with integers (its fraction in 32-bit fixed point, exact enough to
// give the floor and to tell whether the value is on the boundary), and decide the side as the double would have:
// its step differs from S / D by a relative error delta, fixed per axis; the product step * v, v exact, lands off v
// iff |v * delta| exceeds half a unit in the last place of v, i.e. iff v's significand m in [1, 2) exceeds
// mu = 2^-53 / |delta| (just below a power of two the unit halves: there the test is m > mu / 2). The host computes
// delta's sign and floor(mu * 2^31) exactly (make_axis); the device compares v scaled into [2^31, 2^32) with it.
//
// Speed (cpu: the item loop is vectorised, x innermost): no division and no 64-bit compare per item, the tie test
// in 32 bits, and a pixel fetched as one 4-byte word (dvpp_word_) rather than byte by byte.
//
// Limits (checked by the host): S and D at most 65536, so every intermediate fits in 32 bits (64 for the products
// of the fixed-point fractions and the area sums).

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
/// constants of the formulas below. A fraction (x * fa + fb) / 2^32 with fa = ceil(r * 2^32 / D), fb likewise,
/// exceeds (x * r + r0) / D by less than D / 2^32, so for D <= 65536 its integer part is the exact floor, and the
/// exact value is an integer iff its low 32 bits are below D.
struct DvppAxis {
    uint32_t src, dst;
    /// Bilinear: H(x) = floor(256 * (2x + 1) * S / D) = x * lin_q + lin_q0 + floor((x * lin_fa + lin_fb) / 2^32).
    uint32_t lin_q, lin_q0, lin_fa, lin_fb;
    /// Nearest: floor(x * S / D) = x * nn_q + floor(x * nn_fa / 2^32).
    uint32_t nn_q, nn_fa;
    /// S and D over their greatest common divisor: area weights are in units of 1 / red_dst.
    uint32_t red_src, red_dst;
    DvppDivider by_2red_src;  // / (2 * red_src)
    /// OpenCV's double step against S / D: up = 1 when above; mu = min(floor(mu * 2^31), 2^32 - 1) and
    /// mu_half = min(floor(mu * 2^30), 2^32 - 1) (see the header comment), both 2^32 - 1 when the step is exact.
    uint32_t up, mu, mu_half;
};

/// The sampling of one resize: how, and both axes.
static constexpr int32_t DVPP_MODE_NEAREST = 0;
static constexpr int32_t DVPP_MODE_BILINEAR = 1;
static constexpr int32_t DVPP_MODE_AREA = 2;         // area averaging: neither axis grows
static constexpr int32_t DVPP_MODE_AREA_LINEAR = 3;  // area asked where an axis grows: OpenCV's area-weighted linear

struct DvppResample {
    DvppAxis x, y;
    int32_t mode;
};

/// Two source indices and the weight of the second, in 1 / 2^BITS (the first weighs 2^BITS - w1).
struct DvppTap {
    uint32_t i0, i1, w1;
};

/// Whether OpenCV's double product for the exact value v >= 1 (on a boundary) lands off v. v scaled into
/// [2^31, 2^32) by compares and shifts (a count-leading-zeros stops clang vectorising loops that gather).
RT_DEVICE bool dvpp_moved_(const DvppAxis& a, uint32_t v) {
    v = v < (1u << 16) ? v << 16 : v;
    v = v < (1u << 24) ? v << 8 : v;
    v = v < (1u << 28) ? v << 4 : v;
    v = v < (1u << 30) ? v << 2 : v;
    v = v < (1u << 31) ? v << 1 : v;
    return v > (v == (1u << 31) ? a.mu_half : a.mu);
}

/// floor(x * S / D), exact arithmetic (area's first source pixel).
RT_DEVICE uint32_t dvpp_floor_index_(const DvppAxis& a, uint32_t x) {
    return x * a.nn_q + (uint32_t)(((uint64_t)x * a.nn_fa) >> 32);
}

/// The nearest rule: floor(x * S / D) as OpenCV's double computes it, at most S - 1.
RT_DEVICE uint32_t dvpp_nearest_index(const DvppAxis& a, uint32_t x) {
    const uint64_t f = (uint64_t)x * a.nn_fa;
    uint32_t k = x * a.nn_q + (uint32_t)(f >> 32);
    // On an integer, a step below S / D whose product moves lands just under it.
    const bool down = (uint32_t)f < a.dst && k > 0 && !a.up && dvpp_moved_(a, k);
    k -= down ? 1u : 0u;
    return dvpp_min_u32(k, a.src - 1);
}

/// The bilinear rule: the two source pixels around (x + 0.5) * S / D - 0.5 and the second one's 8-bit weight;
/// outside the first and last pixel centres both indices are that edge pixel.
RT_DEVICE DvppTap dvpp_linear_tap(const DvppAxis& a, uint32_t x) {
    const uint64_t f = (uint64_t)x * a.lin_fa + a.lin_fb;
    const bool exact = (uint32_t)f < a.dst;
    const uint32_t h = x * a.lin_q + a.lin_q0 + (uint32_t)(f >> 32);  // floor of (position + 0.5) in 1/512
    const uint32_t g = h - 256;                                       // the position in 1/512 (when h >= 256)
    const uint32_t i = g >> 9;
    const uint32_t r = g & 511u, k = r >> 1;
    // The weight is r / 2 rounded: r even -> k; r odd and the position past the half -> k + 1; exactly on the half,
    // the side OpenCV's double lands on, or, when it lands on the half itself, to even.
    const bool tie = (r & 1u) && exact;
    const bool moved = dvpp_moved_(a, h);
    const uint32_t w_tie = moved ? k + (a.up ? 1u : 0u) : k + (k & 1u);
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
    // The part, in units of 1 / red_src destination pixels: (x + 1) * S' - (s + 1) * D' (S', D' reduced; both
    // products at most lcm(S, D) < 2^32). OpenCV takes it as 0 when not positive, and when it is a whole pixel (s one
    // below the exact index, see dvpp_nearest_index) its float rounding to 1.0 makes the fraction 0 too.
    const uint32_t end = (x + 1) * a.red_src, edge = (s + 1) * a.red_dst;
    const uint32_t part = end > edge ? end - edge : 0u;
    const bool inside = part > 0 && part < a.red_src && s + 1 < a.src;
    DvppTap t;
    t.i0 = s;
    t.i1 = inside ? s + 1 : s;
    t.w1 = inside ? dvpp_div(a.by_2red_src, part * 4096u + a.red_src) : 0u;  // round(2048 * part / S')
    return t;
}

/// Whether the samplers may load pixels as 4-byte words from rows of `width` pixels (else WIDE = false: byte loads):
/// rows of at least 4 bytes.
template <int C>
RT_DEVICE bool dvpp_wide_(uint32_t width) {
    return width * C >= 4;
}

/// The 4 bytes of a row of `bytes` (>= 4) bytes from byte `at` (those past the row's end read as 0): the load's
/// window kept inside the row, shifted into place.
RT_DEVICE uint32_t dvpp_window_(const uint8_t* row, uint32_t at, uint32_t bytes) {
    const uint32_t start = at < bytes - 4 ? at : bytes - 4;
    uint32_t w;
    __builtin_memcpy(&w, row + start, 4);
    return w >> ((at - start) * 8);
}

/// Pixel i (C channels) of a row of `width` pixels, channel c in bits 8c..8c+7 (pixels past the row read as 0 when
/// WIDE, as pixel width - 1 otherwise; samplers weigh those 0). WIDE: a 4-byte window; one channel: a byte.
template <int C, bool WIDE>
RT_DEVICE uint32_t dvpp_word_(const uint8_t* row, uint32_t i, uint32_t width) {
    if (C == 1) return row[i < width ? i : width - 1];
    if (WIDE) return dvpp_window_(row, i * C, width * C);
    const uint32_t j = i < width ? i : width - 1;
    uint32_t w = 0;
    for (int c = 0; c < C; ++c) w |= (uint32_t)row[j * C + c] << (8 * c);
    return w;
}

/// Pixels i and i + 1 of a row, as two words: for 1 and 2 channels one window holds both (pixel i + 1 from bit 8C).
template <int C, bool WIDE>
RT_DEVICE void dvpp_pair_(const uint8_t* row, uint32_t i, uint32_t width, uint32_t& p0, uint32_t& p1) {
    if (C <= 2 && WIDE) {
        p0 = dvpp_window_(row, i * C, width * C);
        p1 = p0 >> (8 * C);
    } else {
        p0 = dvpp_word_<C, WIDE>(row, i, width);
        p1 = dvpp_word_<C, WIDE>(row, i + 1, width);
    }
}

/// A two-tap sample at (tx, ty) (tx.i1 is tx.i0 + 1, or tx.i0 with weight 0) of a crop of `width` pixels per row,
/// C channels at src (rows `pitch` bytes apart), weights of BITS bits: horizontal sums first, then the vertical
/// ones, rounded once.
template <int C, int BITS, bool WIDE>
RT_DEVICE void dvpp_sample_2tap(const uint8_t* src, uint32_t pitch, uint32_t width, const DvppTap& tx,
                                const DvppTap& ty, uint32_t out[C]) {
    uint32_t p00, p01, p10, p11;
    dvpp_pair_<C, WIDE>(dvpp_row(src, pitch, ty.i0), tx.i0, width, p00, p01);
    dvpp_pair_<C, WIDE>(dvpp_row(src, pitch, ty.i1), tx.i0, width, p10, p11);
    const uint32_t one = 1u << BITS;
    const uint32_t a0 = one - tx.w1, a1 = tx.w1, b0 = one - ty.w1, b1 = ty.w1;
    for (int c = 0; c < C; ++c) {
        const uint32_t h0 = a0 * ((p00 >> (8 * c)) & 255u) + a1 * ((p01 >> (8 * c)) & 255u);
        const uint32_t h1 = a0 * ((p10 >> (8 * c)) & 255u) + a1 * ((p11 >> (8 * c)) & 255u);
        out[c] = (b0 * h0 + b1 * h1 + (1u << (2 * BITS - 1))) >> (2 * BITS);
    }
}

/// dvpp_sample_2tap with byte loads and both indices of tx as given (any crop width).
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

/// A destination column's horizontal sampling packed in 32 bits: for nearest the source index; for the two-tap modes
/// the first source index (bits 0..15) and the second pixel's weight (bits 16..), a full weight (2^BITS) written as
/// the next index with weight 0. The resize kernels read these from a table filled once per launch
/// (kernels/resize.cpp), so each item only loads its column; the fused pre-processing computes them per item.
RT_DEVICE uint32_t dvpp_pack_tap_(const DvppTap& t, uint32_t bits) {
    const bool full = t.w1 == (1u << bits);
    return (full ? t.i1 : t.i0) | (full ? 0u : t.w1) << 16;
}

RT_DEVICE uint32_t dvpp_column(const DvppResample& r, uint32_t x) {
    if (r.mode == DVPP_MODE_NEAREST) return dvpp_nearest_index(r.x, x);
    if (r.mode == DVPP_MODE_BILINEAR) return dvpp_pack_tap_(dvpp_linear_tap(r.x, x), 8);
    return dvpp_pack_tap_(dvpp_area_linear_tap(r.x, x), 11);  // DVPP_MODE_AREA_LINEAR (area averaging has none)
}

/// The sample of row y at a packed column (dvpp_column) for MODE nearest, bilinear or area-linear; WIDE: rows of
/// the crop let pixels load as words (dvpp_wide_).
template <int C, int MODE, bool WIDE>
RT_DEVICE void dvpp_sample_column(const DvppResample& r, uint32_t column, const uint8_t* src, uint32_t pitch,
                                  uint32_t y, uint32_t out[C]) {
    if (MODE == DVPP_MODE_NEAREST) {
        const uint32_t w = dvpp_word_<C, WIDE>(dvpp_row(src, pitch, dvpp_nearest_index(r.y, y)), column, r.x.src);
        for (int c = 0; c < C; ++c) out[c] = (w >> (8 * c)) & 255u;
        return;
    }
    DvppTap tx;
    tx.i0 = column & 0xffffu;
    tx.w1 = column >> 16;
    tx.i1 = tx.i0 + (tx.w1 ? 1u : 0u);
    if (MODE == DVPP_MODE_BILINEAR)
        dvpp_sample_2tap<C, 8, WIDE>(src, pitch, r.x.src, tx, dvpp_linear_tap(r.y, y), out);
    else
        dvpp_sample_2tap<C, 11, WIDE>(src, pitch, r.x.src, tx, dvpp_area_linear_tap(r.y, y), out);
}

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
    const uint32_t sx0 = dvpp_floor_index_(ax, x), sy0 = dvpp_floor_index_(ay, y);
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
/// (src is the crop's first pixel, x and y count from the destination rectangle's corner): the fused
/// pre-processing's entry, equal to what the resize kernels compute.
template <int C>
RT_DEVICE void dvpp_resample(const DvppResample& r, const uint8_t* src, uint32_t pitch, uint32_t x, uint32_t y,
                             uint32_t out[C]) {
    if (r.mode == DVPP_MODE_AREA) {
        dvpp_sample_area<C>(r, src, pitch, x, y, out);
        return;
    }
    const uint32_t column = dvpp_column(r, x);
    const bool wide = dvpp_wide_<C>(r.x.src);
    if (r.mode == DVPP_MODE_NEAREST)
        wide ? dvpp_sample_column<C, DVPP_MODE_NEAREST, true>(r, column, src, pitch, y, out)
             : dvpp_sample_column<C, DVPP_MODE_NEAREST, false>(r, column, src, pitch, y, out);
    else if (r.mode == DVPP_MODE_BILINEAR)
        wide ? dvpp_sample_column<C, DVPP_MODE_BILINEAR, true>(r, column, src, pitch, y, out)
             : dvpp_sample_column<C, DVPP_MODE_BILINEAR, false>(r, column, src, pitch, y, out);
    else
        wide ? dvpp_sample_column<C, DVPP_MODE_AREA_LINEAR, true>(r, column, src, pitch, y, out)
             : dvpp_sample_column<C, DVPP_MODE_AREA_LINEAR, false>(r, column, src, pitch, y, out);
}

/// The argument of the resize kernels (resize.cpp): one plane's crop resized into a rectangle of a destination
/// plane. Passed by value; src/dvpp/resize.cpp fills it.
struct DvppResizeArgs {
    const uint8_t* src;             // the crop's first pixel in the source plane
    uint8_t* dst;                   // the destination rectangle's first pixel
    const uint32_t* columns;        // dvpp_column of every destination column (not read by area averaging)
    uint32_t src_pitch, dst_pitch;  // bytes between rows
    DvppResample r;                 // the rectangle's size from the crop's
};
