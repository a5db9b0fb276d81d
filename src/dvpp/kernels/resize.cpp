// resize.cpp — the DVPP resize kernels (after common.h and resize_math.h): one work-item per destination pixel of
// one plane, the pixels inside the paste rectangle sampled from the crop, the others set to the fill value.

/// One pixel. The source and destination as __restrict__ parameters: once inlined, the promise that they do not
/// alias lets the cpu compiler vectorise the item loop (it cannot bound the gathered loads to check at run time).
template <int C, int MODE, bool WIDE>
RT_DEVICE void dvpp_resize_px_(const DvppResample& r, const uint32_t* __restrict__ columns,
                               const uint8_t* __restrict__ src, uint32_t pitch, uint8_t* __restrict__ out, uint32_t x,
                               uint32_t y) {
    uint32_t v[C];
    if (MODE == DVPP_MODE_AREA)
        dvpp_sample_area<C>(r, src, pitch, x, y, v);
    else
        dvpp_sample_column<C, MODE, WIDE>(r, columns[x], src, pitch, y, v);
    dvpp_store_px<C>(out, v);
}

/// The resize of one plane's crop into a destination rectangle (dst: its first pixel), launched over the
/// rectangle. C channels, sampling MODE (DVPP_MODE_*), WIDE: word loads (dvpp_wide_ holds for the crop's width).
/// Compile-time choices keep each kernel's item loop free of the others (a branch there stops the cpu compiler
/// vectorising it).
template <int C, int MODE, bool WIDE>
RT_KERNEL void dvpp_resize(DvppResizeArgs a) {
    const uint32_t x = (uint32_t)get_global_id(0), y = (uint32_t)get_global_id(1);
    dvpp_resize_px_<C, MODE, WIDE>(a.r, a.columns, a.src, a.src_pitch, dvpp_row(a.dst, a.dst_pitch, y) + x * C, x,
                                   y);
}

/// The columns table of a resize (dvpp_column of each destination column), launched over the columns: computed once
/// per launch instead of once per pixel (it costs as much as the rest of a bilinear pixel on cpu).
RT_KERNEL void dvpp_resize_columns(DvppResample r, uint32_t* columns) {
    const uint32_t x = (uint32_t)get_global_id(0);
    columns[x] = dvpp_column(r, x);
}

/// The fill of a letterbox: launched over a whole plane, sets the pixels outside [x0, x1) x [y0, y1) to `fill`.
template <int C>
RT_KERNEL void dvpp_fill_outside(uint8_t* dst, uint32_t pitch, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
                                 uint32_t fill) {
    const uint32_t x = (uint32_t)get_global_id(0), y = (uint32_t)get_global_id(1);
    if (x >= x0 && x < x1 && y >= y0 && y < y1) return;
    uint8_t* p = dvpp_row(dst, pitch, y) + x * C;
    for (int c = 0; c < C; ++c) p[c] = (uint8_t)(fill >> (8 * c));
}

RT_KERNEL_INSTANTIATE(dvpp_fill_outside_c1, dvpp_fill_outside<1>);
RT_KERNEL_INSTANTIATE(dvpp_fill_outside_c2, dvpp_fill_outside<2>);
RT_KERNEL_INSTANTIATE(dvpp_fill_outside_c3, dvpp_fill_outside<3>);
RT_KERNEL_INSTANTIATE(dvpp_fill_outside_c4, dvpp_fill_outside<4>);
// Every (channels, mode); the modes of two-tap or word loads also with byte loads (_narrow), for crops narrower
// than a word load (dvpp_wide_).
RT_KERNEL_INSTANTIATE(dvpp_resize_nearest_c1, dvpp_resize<1, 0, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_nearest_c2, dvpp_resize<2, 0, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_nearest_c3, dvpp_resize<3, 0, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_nearest_c4, dvpp_resize<4, 0, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_bilinear_c1, dvpp_resize<1, 1, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_bilinear_c2, dvpp_resize<2, 1, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_bilinear_c3, dvpp_resize<3, 1, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_bilinear_c4, dvpp_resize<4, 1, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_area_c1, dvpp_resize<1, 2, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_area_c2, dvpp_resize<2, 2, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_area_c3, dvpp_resize<3, 2, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_area_c4, dvpp_resize<4, 2, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_area_linear_c1, dvpp_resize<1, 3, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_area_linear_c2, dvpp_resize<2, 3, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_area_linear_c3, dvpp_resize<3, 3, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_area_linear_c4, dvpp_resize<4, 3, true>);
RT_KERNEL_INSTANTIATE(dvpp_resize_nearest_c1_narrow, dvpp_resize<1, 0, false>);
RT_KERNEL_INSTANTIATE(dvpp_resize_nearest_c2_narrow, dvpp_resize<2, 0, false>);
RT_KERNEL_INSTANTIATE(dvpp_resize_nearest_c3_narrow, dvpp_resize<3, 0, false>);
RT_KERNEL_INSTANTIATE(dvpp_resize_nearest_c4_narrow, dvpp_resize<4, 0, false>);
RT_KERNEL_INSTANTIATE(dvpp_resize_bilinear_c1_narrow, dvpp_resize<1, 1, false>);
RT_KERNEL_INSTANTIATE(dvpp_resize_bilinear_c2_narrow, dvpp_resize<2, 1, false>);
RT_KERNEL_INSTANTIATE(dvpp_resize_bilinear_c3_narrow, dvpp_resize<3, 1, false>);
RT_KERNEL_INSTANTIATE(dvpp_resize_bilinear_c4_narrow, dvpp_resize<4, 1, false>);
RT_KERNEL_INSTANTIATE(dvpp_resize_area_linear_c1_narrow, dvpp_resize<1, 3, false>);
RT_KERNEL_INSTANTIATE(dvpp_resize_area_linear_c2_narrow, dvpp_resize<2, 3, false>);
RT_KERNEL_INSTANTIATE(dvpp_resize_area_linear_c3_narrow, dvpp_resize<3, 3, false>);
RT_KERNEL_INSTANTIATE(dvpp_resize_area_linear_c4_narrow, dvpp_resize<4, 3, false>);
