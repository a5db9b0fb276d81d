// preprocess.cpp — the fused pre-processing kernels of rtDvppPreprocess (family "preprocess"): with no intermediate
// image, each output pixel gets what rtDvppCropResizePaste, rtDvppConvertColor and rtDvppNormalize would have stored
// one after the other: the crop sampled by the resize maths (resize_math.h's taps and samplers, the very functions
// of the resize kernels; a 4:2:0 source plane by plane, its chroma at half size), converted by color_math.h,
// normalised and stored by normalize_math.h.
//
// A work-item covers a tile of tile_w x tile_h output pixels (the host's choice per device: 1 x 1 on a GPU; on the
// cpu, runs of a row that amortise the taps: a column's horizontal taps are computed once for the tile's rows, a
// row's vertical taps once for its columns, and the per-pixel loop then has no call left, so it vectorises). Per row
// of the tile, one loop samples, converts and normalises into float arrays, a second stores them as the output's
// dtype and layout (branches on arguments, outside the loops).
//
// Template parameters: the source's kind SRC (1, 3, 4: packed with that many channels; DVPP_SRC_SEMI: NV12 or
// NV21; DVPP_SRC_PLANAR: YUV420P) and the sampling MODE (DVPP_MODE_*), which shape the loads.
//
// The common case on the cpu (a 3-channel source, bilinear, to CHW float32) has a second kernel, preprocess_px: one
// item per pixel, the taps from a table made by preprocess_taps, so that the cpu backend (which splits launches by
// items) spreads a small output over its executors. Both compute the same values with the same functions.

#define DVPP_SRC_SEMI 10
#define DVPP_SRC_PLANAR 11

/// The vertical sampling of destination row y for MODE: a tap (nearest: the index, weight 0; area averaging has
/// none). The horizontal one is the resize kernels' packed column (dvpp_column), cached per tile.
template <int MODE>
RT_DEVICE DvppTap dvpp_preprocess_row_tap(const DvppAxis& a, uint32_t y) {
    DvppTap t;
    if (MODE == DVPP_MODE_BILINEAR) {
        t = dvpp_linear_tap(a, y);
    } else if (MODE == DVPP_MODE_AREA_LINEAR) {
        t = dvpp_area_linear_tap(a, y);
    } else {
        t.i0 = t.i1 = MODE == DVPP_MODE_NEAREST ? dvpp_nearest_index(a, y) : 0u;
        t.w1 = 0;
    }
    return t;
}

/// The sample of an image of C channels at destination pixel (x, y), given its packed column and its row's tap:
/// dvpp_sample_column's computation (the same column, tap and loads; WIDE as dvpp_wide_ says for the plane), with
/// the row's tap computed once per row rather than per pixel; area averaging by dvpp_sample_area.
template <int C, int MODE, bool WIDE>
RT_DEVICE void dvpp_preprocess_sample(const DvppResample& r, const uint8_t* src, uint32_t pitch, uint32_t column,
                                      const DvppTap& ty, uint32_t x, uint32_t y, uint32_t out[C]) {
    if (MODE == DVPP_MODE_AREA) {
        dvpp_sample_area<C>(r, src, pitch, x, y, out);
    } else if (MODE == DVPP_MODE_NEAREST) {
        const uint32_t w = dvpp_word_<C, WIDE>(dvpp_row(src, pitch, ty.i0), column, r.x.src);
        for (int c = 0; c < C; ++c) out[c] = (w >> (8 * c)) & 255u;
    } else {
        DvppTap tx;
        tx.i0 = column & 0xffffu;
        tx.w1 = column >> 16;
        tx.i1 = tx.i0 + (tx.w1 ? 1u : 0u);
        dvpp_sample_2tap<C, MODE == DVPP_MODE_BILINEAR ? 8 : 11, WIDE>(src, pitch, r.x.src, tx, ty, out);
    }
}

/// Stores n pixels of one output row (channel c of pixel i: v[c][i]) as T: CHW (channel planes `plane` elements apart,
/// the row at element `first` of each) or HWC.
template <class T>
RT_DEVICE void dvpp_preprocess_store(T* dst, int chw, size_t first, size_t plane, uint32_t channels, uint32_t n,
                                     const float v[3][DVPP_PREPROCESS_TILE]) {
    if (chw || channels == 1) {
        for (uint32_t c = 0; c < channels; ++c) {
            T* row = dst + c * plane + first;
            for (uint32_t i = 0; i < n; ++i) dvpp_store_normalized(row + i, v[c][i]);
        }
    } else {
        T* row = dst + first * 3;
        for (uint32_t i = 0; i < n; ++i)
            for (int c = 0; c < 3; ++c) dvpp_store_normalized(row + 3 * i + c, v[c][i]);
    }
}
RT_DEVICE void dvpp_preprocess_store_as(int dtype, int chw, void* dst, size_t first, size_t plane, uint32_t channels,
                                        uint32_t n, const float v[3][DVPP_PREPROCESS_TILE]) {
    if (dtype == DVPP_DTYPE_F32)
        dvpp_preprocess_store((float*)dst, chw, first, plane, channels, n, v);
    else if (dtype == DVPP_DTYPE_F16)
        dvpp_preprocess_store((rt_half*)dst, chw, first, plane, channels, n, v);
    else if (dtype == DVPP_DTYPE_BF16)
        dvpp_preprocess_store((rt_bfloat16*)dst, chw, first, plane, channels, n, v);
    else if (dtype == DVPP_DTYPE_U8)
        dvpp_preprocess_store((uint8_t*)dst, chw, first, plane, channels, n, v);
    else
        dvpp_preprocess_store((int8_t*)dst, chw, first, plane, channels, n, v);
}

/// One row of a tile, row py of the paste rectangle (row taps ty, cy), n columns from x0 (packed columns tx[i],
/// cx[i]; columns outside the rectangle have column 0 and take the fill): sampled, converted and normalised into v.
/// Branch-free per column, so the loop vectorises; v is restrict: the compiler cannot bound the sampled loads
/// (their addresses come from the taps) to prove it apart from them. OUT: the output's channels (DVPP_OUT_*).
template <int SRC, int MODE, int OUT, bool WIDE>
RT_DEVICE void dvpp_preprocess_row(const DvppPreprocessArgs& a, const DvppYuvToRgb& k, const uint32_t* tx,
                                   const uint32_t* cx, const DvppTap& ty, const DvppTap& cy, uint32_t x0, uint32_t py,
                                   uint32_t n, float (*__restrict__ v)[DVPP_PREPROCESS_TILE]) {
    for (uint32_t i = 0; i < n; ++i) {
        const uint32_t col = x0 + i - a.paste_x;
        const bool inside = col < a.paste_w;
        const uint32_t px = inside ? col : 0;  // area averaging samples by position: stay inside the crop
        int r, g, b;
        if constexpr (SRC == DVPP_SRC_SEMI || SRC == DVPP_SRC_PLANAR) {
            uint32_t luma[1];
            dvpp_preprocess_sample<1, MODE, WIDE>(a.luma, a.plane0, a.pitch0, tx[i], ty, px, py, luma);
            r = g = b = (int)luma[0];
            if constexpr (OUT != DVPP_OUT_GREY) {  // grey of a 4:2:0 picture is its Y plane
                uint32_t u, w;
                if constexpr (SRC == DVPP_SRC_SEMI) {
                    uint32_t c[2];
                    dvpp_preprocess_sample<2, MODE, WIDE>(a.chroma, a.plane1, a.pitch1, cx[i], cy, px >> 1, py >> 1, c);
                    u = a.swapped ? c[1] : c[0];
                    w = a.swapped ? c[0] : c[1];
                } else {
                    uint32_t cu[1], cv[1];
                    dvpp_preprocess_sample<1, MODE, WIDE>(a.chroma, a.plane1, a.pitch1, cx[i], cy, px >> 1,
                                                          py >> 1, cu);
                    dvpp_preprocess_sample<1, MODE, WIDE>(a.chroma, a.plane2, a.pitch1, cx[i], cy, px >> 1,
                                                          py >> 1, cv);
                    u = cu[0];
                    w = cv[0];
                }
                uint8_t r8, g8, b8;
                dvpp_yuv_pixel_to_rgb(k, r, dvpp_chroma_terms(k, (int)u, (int)w), r8, g8, b8);
                r = r8, g = g8, b = b8;
            }
        } else {
            uint32_t s[SRC];
            dvpp_preprocess_sample<SRC, MODE, WIDE>(a.luma, a.plane0, a.pitch0, tx[i], ty, px, py, s);
            if (SRC == 1) {
                r = g = b = (int)s[0];
            } else {
                r = (int)(a.swapped ? s[2] : s[0]);
                g = (int)s[1];
                b = (int)(a.swapped ? s[0] : s[2]);
            }
        }
        // A grey source (or a 4:2:0 one's Y) stays itself: the grey of R = G = B is that value.
        const int c0 = OUT == DVPP_OUT_BGR ? b : OUT == DVPP_OUT_GREY ? (int)dvpp_rgb_to_grey(r, g, b) : r;
        const int c2 = OUT == DVPP_OUT_BGR ? r : b;
        v[0][i] = dvpp_normalize_value(inside ? c0 : (int)a.fill[0], a.norm.scale[0], a.norm.bias[0]);
        v[1][i] = dvpp_normalize_value(inside ? g : (int)a.fill[1], a.norm.scale[1], a.norm.bias[1]);
        v[2][i] = dvpp_normalize_value(inside ? c2 : (int)a.fill[2], a.norm.scale[2], a.norm.bias[2]);
    }
}

template <int SRC, int MODE>
RT_KERNEL void preprocess(DvppPreprocessArgs a) {
    constexpr bool yuv = SRC == DVPP_SRC_SEMI || SRC == DVPP_SRC_PLANAR;
    // Tiles are numbered row by row, the launch's items in order; items past the last tile have none.
    const uint64_t t = (uint64_t)get_global_id(1) * get_global_size(0) + get_global_id(0);
    if (t >= (uint64_t)a.tiles_x * a.tiles_y) return;
    const uint32_t x0 = (uint32_t)(t % a.tiles_x) * a.tile_w, y0 = (uint32_t)(t / a.tiles_x) * a.tile_h;
    const uint32_t n = dvpp_min_u32(a.tile_w, a.width - x0), y_end = dvpp_min_u32(y0 + a.tile_h, a.height);
    const uint32_t channels = a.out == DVPP_OUT_GREY ? 1u : 3u;
    const bool chroma = yuv && a.out != DVPP_OUT_GREY;  // grey of a 4:2:0 picture is its Y plane
    const DvppYuvToRgb k = dvpp_yuv_to_rgb_coeffs(a.matrix);
    // Word loads where every plane's rows allow them (byte loads otherwise: the same values).
    constexpr int luma_c = yuv ? 1 : SRC, chroma_c = SRC == DVPP_SRC_SEMI ? 2 : 1;
    const bool wide = dvpp_wide_<luma_c>(a.luma.x.src) && (!chroma || dvpp_wide_<chroma_c>(a.chroma.x.src));
    // Unsigned: pixels left of or above the paste rectangle wrap to large values, so one compare tests both sides.
    // Columns outside it keep column 0 (a pixel of the crop, read and then replaced by the fill).
    uint32_t tx[DVPP_PREPROCESS_TILE], cx[DVPP_PREPROCESS_TILE];
    for (uint32_t i = 0; i < n; ++i) {
        const uint32_t px = x0 + i - a.paste_x;
        const bool inside = px < a.paste_w && MODE != DVPP_MODE_AREA;
        tx[i] = inside ? dvpp_column(a.luma, px) : 0u;
        cx[i] = inside && chroma ? dvpp_column(a.chroma, px >> 1) : 0u;
    }
    const size_t plane = (size_t)a.width * a.height;
    for (uint32_t y = y0; y < y_end; ++y) {
        const uint32_t py = y - a.paste_y;
        float v[3][DVPP_PREPROCESS_TILE];
        if (py < a.paste_h) {
            const DvppTap ty = dvpp_preprocess_row_tap<MODE>(a.luma.y, py);
            DvppTap cy = ty;
            if (chroma) cy = dvpp_preprocess_row_tap<MODE>(a.chroma.y, py >> 1);
            if (a.out == DVPP_OUT_RGB && wide)
                dvpp_preprocess_row<SRC, MODE, DVPP_OUT_RGB, true>(a, k, tx, cx, ty, cy, x0, py, n, v);
            else if (a.out == DVPP_OUT_RGB)
                dvpp_preprocess_row<SRC, MODE, DVPP_OUT_RGB, false>(a, k, tx, cx, ty, cy, x0, py, n, v);
            else if (a.out == DVPP_OUT_BGR && wide)
                dvpp_preprocess_row<SRC, MODE, DVPP_OUT_BGR, true>(a, k, tx, cx, ty, cy, x0, py, n, v);
            else if (a.out == DVPP_OUT_BGR)
                dvpp_preprocess_row<SRC, MODE, DVPP_OUT_BGR, false>(a, k, tx, cx, ty, cy, x0, py, n, v);
            else if (wide)
                dvpp_preprocess_row<SRC, MODE, DVPP_OUT_GREY, true>(a, k, tx, cx, ty, cy, x0, py, n, v);
            else
                dvpp_preprocess_row<SRC, MODE, DVPP_OUT_GREY, false>(a, k, tx, cx, ty, cy, x0, py, n, v);
        } else {
            for (int c = 0; c < 3; ++c) {
                const float f = dvpp_normalize_value((int)a.fill[c], a.norm.scale[c], a.norm.bias[c]);
                for (uint32_t i = 0; i < n; ++i) v[c][i] = f;
            }
        }
        dvpp_preprocess_store_as(a.dtype, a.chw, a.dst, (size_t)y * a.width + x0, plane, channels, n, v);
    }
}
/// The taps table of preprocess_px, one entry per item: the packed columns (dvpp_column) of the paste_w destination
/// columns, then the packed taps (dvpp_pack_tap_) of its paste_h rows.
RT_KERNEL void preprocess_taps(DvppPreprocessArgs a, uint32_t* table) {
    const uint32_t i = (uint32_t)get_global_id(0);
    table[i] = i < a.paste_w ? dvpp_column(a.luma, i) : dvpp_pack_tap_(dvpp_linear_tap(a.luma.y, i - a.paste_w), 8);
}

/// The tap of a packed entry (dvpp_pack_tap_): the second index follows the first when it has a weight.
RT_DEVICE DvppTap dvpp_preprocess_unpack(uint32_t packed) {
    DvppTap t;
    t.i0 = packed & 0xffffu;
    t.w1 = packed >> 16;
    t.i1 = t.i0 + (t.w1 ? 1u : 0u);
    return t;
}

/// One pixel of preprocess_px (a 3-channel source). The plane, the table and the output as __restrict__ parameters:
/// once inlined, the promise that they do not alias lets the cpu compiler vectorise the item loop (it cannot bound
/// the gathered loads to check at run time).
template <bool WIDE>
RT_DEVICE void dvpp_preprocess_px_(const DvppPreprocessArgs& a, const uint32_t* __restrict__ table,
                                   const uint8_t* __restrict__ plane0, float* __restrict__ dst, uint32_t x,
                                   uint32_t y) {
    const uint32_t col = x - a.paste_x, row = y - a.paste_y;
    const bool inside = col < a.paste_w && row < a.paste_h;
    const uint32_t px = inside ? col : 0u, py = inside ? row : 0u;
    const uint32_t* luma_rows = table + a.paste_w;
    uint32_t s[3];
    dvpp_sample_2tap<3, 8, WIDE>(plane0, a.pitch0, a.luma.x.src, dvpp_preprocess_unpack(table[px]),
                                 dvpp_preprocess_unpack(luma_rows[py]), s);
    const int r = (int)(a.swapped ? s[2] : s[0]), g = (int)s[1], b = (int)(a.swapped ? s[0] : s[2]);
    const bool bgr = a.out == DVPP_OUT_BGR;
    const int v[3] = {inside ? (bgr ? b : r) : (int)a.fill[0], inside ? g : (int)a.fill[1],
                      inside ? (bgr ? r : b) : (int)a.fill[2]};
    const size_t plane = (size_t)a.width * a.height, pixel = (size_t)y * a.width + x;
    for (int ch = 0; ch < 3; ++ch)
        dst[ch * plane + pixel] = dvpp_normalize_value(v[ch], a.norm.scale[ch], a.norm.bias[ch]);
}

/// The fused pre-processing one work-item per output pixel, for the common case on the cpu (a packed 3-channel
/// source to RGB or BGR, bilinear, CHW float32; rtDvppPreprocess picks it), its taps from preprocess_taps' table:
/// the item inlines into the cpu target's vectorised item loop, and a launch has as many items as pixels, which the
/// cpu backend spreads over its executors (preprocess<>'s tiles are too few for that at 224x224: 0.20 -> 0.12 ms
/// for 1080p RGB -> 224x224 on 2 executors). The values are preprocess<>'s: the same functions in the same order.
/// (An NV12 source's item, with its chroma and matrix, exceeds the inliner's threshold and runs slower here than in
/// the tiles: not instantiated.)
template <bool WIDE>
RT_KERNEL void preprocess_px(DvppPreprocessArgs a, const uint32_t* table) {
    dvpp_preprocess_px_<WIDE>(a, table, a.plane0, (float*)a.dst, (uint32_t)get_global_id(0),
                              (uint32_t)get_global_id(1));
}
RT_KERNEL_INSTANTIATE(preprocess_px_c3_word_f32, preprocess_px<true>);
RT_KERNEL_INSTANTIATE(preprocess_px_c3_byte_f32, preprocess_px<false>);

/* MODE 0..3: DVPP_MODE_NEAREST, _BILINEAR, _AREA, _AREA_LINEAR (numbers: the cpu target names instantiations
 * outside the module, where resize_math.h's constants are not in scope). */
RT_KERNEL_INSTANTIATE(preprocess_grey_nearest, preprocess<1, 0>);
RT_KERNEL_INSTANTIATE(preprocess_grey_bilinear, preprocess<1, 1>);
RT_KERNEL_INSTANTIATE(preprocess_grey_area, preprocess<1, 2>);
RT_KERNEL_INSTANTIATE(preprocess_grey_area_linear, preprocess<1, 3>);
RT_KERNEL_INSTANTIATE(preprocess_c3_nearest, preprocess<3, 0>);
RT_KERNEL_INSTANTIATE(preprocess_c3_bilinear, preprocess<3, 1>);
RT_KERNEL_INSTANTIATE(preprocess_c3_area, preprocess<3, 2>);
RT_KERNEL_INSTANTIATE(preprocess_c3_area_linear, preprocess<3, 3>);
RT_KERNEL_INSTANTIATE(preprocess_c4_nearest, preprocess<4, 0>);
RT_KERNEL_INSTANTIATE(preprocess_c4_bilinear, preprocess<4, 1>);
RT_KERNEL_INSTANTIATE(preprocess_c4_area, preprocess<4, 2>);
RT_KERNEL_INSTANTIATE(preprocess_c4_area_linear, preprocess<4, 3>);
RT_KERNEL_INSTANTIATE(preprocess_semi_nearest, preprocess<DVPP_SRC_SEMI, 0>);
RT_KERNEL_INSTANTIATE(preprocess_semi_bilinear, preprocess<DVPP_SRC_SEMI, 1>);
RT_KERNEL_INSTANTIATE(preprocess_semi_area, preprocess<DVPP_SRC_SEMI, 2>);
RT_KERNEL_INSTANTIATE(preprocess_semi_area_linear, preprocess<DVPP_SRC_SEMI, 3>);
RT_KERNEL_INSTANTIATE(preprocess_planar_nearest, preprocess<DVPP_SRC_PLANAR, 0>);
RT_KERNEL_INSTANTIATE(preprocess_planar_bilinear, preprocess<DVPP_SRC_PLANAR, 1>);
RT_KERNEL_INSTANTIATE(preprocess_planar_area, preprocess<DVPP_SRC_PLANAR, 2>);
RT_KERNEL_INSTANTIATE(preprocess_planar_area_linear, preprocess<DVPP_SRC_PLANAR, 3>);
