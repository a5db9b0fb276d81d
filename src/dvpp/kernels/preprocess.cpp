// preprocess.cpp — the fused pre-processing kernels of rtDvppPreprocess (family "preprocess"): one work-item per
// output pixel computes, with no intermediate image, what rtDvppCropResizePaste, rtDvppConvertColor and
// rtDvppNormalize would have stored one after the other: the resize helpers' sample of the crop (resize_math.h, the
// very functions of the resize kernels; a 4:2:0 source plane by plane, its chroma at half size), the conversion of
// color_math.h, the normalisation and dtype of normalize_math.h.
//
// Template parameters: the source's kind SRC (1, 3, 4: packed with that many channels; DVPP_SRC_SEMI: NV12 or
// NV21; DVPP_SRC_PLANAR: YUV420P) and the sampling MODE (DVPP_MODE_*), which shape the loads; the output's channels,
// layout and dtype are arguments (uniform branches: cheap next to the sampling).

#define DVPP_SRC_SEMI 10
#define DVPP_SRC_PLANAR 11

/// The sample of an image of C channels at (x, y) of the destination rectangle, by the resize kernels' rules.
template <int C, int MODE>
RT_DEVICE void dvpp_preprocess_sample(const DvppResample& r, const uint8_t* src, uint32_t pitch, uint32_t x,
                                      uint32_t y, uint32_t out[C]) {
    if (MODE == DVPP_MODE_NEAREST)
        dvpp_sample_nearest<C>(r, src, pitch, x, y, out);
    else if (MODE == DVPP_MODE_BILINEAR)
        dvpp_sample_bilinear<C>(r, src, pitch, x, y, out);
    else if (MODE == DVPP_MODE_AREA)
        dvpp_sample_area<C>(r, src, pitch, x, y, out);
    else
        dvpp_sample_area_linear<C>(r, src, pitch, x, y, out);
}

template <int SRC, int MODE>
RT_KERNEL void preprocess(DvppPreprocessArgs a) {
    const uint32_t x = (uint32_t)get_global_id(0), y = (uint32_t)get_global_id(1);
    // Unsigned: pixels left of or above the rectangle wrap to large values, so one compare per axis tests both sides.
    const uint32_t px = x - a.paste_x, py = y - a.paste_y;
    int v[3];
    if (px < a.paste_w && py < a.paste_h) {
        int r, g, b;
        if constexpr (SRC == DVPP_SRC_SEMI || SRC == DVPP_SRC_PLANAR) {
            uint32_t luma[1];
            dvpp_preprocess_sample<1, MODE>(a.luma, a.plane0, a.pitch0, px, py, luma);
            if (a.out == DVPP_OUT_GREY) {  // grey of a 4:2:0 picture is its Y plane
                r = g = b = (int)luma[0];
            } else {
                int u, w;
                if constexpr (SRC == DVPP_SRC_SEMI) {
                    uint32_t c[2];
                    dvpp_preprocess_sample<2, MODE>(a.chroma, a.plane1, a.pitch1, px >> 1, py >> 1, c);
                    u = (int)c[a.swapped ? 1 : 0];
                    w = (int)c[a.swapped ? 0 : 1];
                } else {
                    uint32_t cu[1], cv[1];
                    dvpp_preprocess_sample<1, MODE>(a.chroma, a.plane1, a.pitch1, px >> 1, py >> 1, cu);
                    dvpp_preprocess_sample<1, MODE>(a.chroma, a.plane2, a.pitch1, px >> 1, py >> 1, cv);
                    u = (int)cu[0];
                    w = (int)cv[0];
                }
                const DvppYuvToRgb k = dvpp_yuv_to_rgb_coeffs(a.matrix);
                uint8_t r8, g8, b8;
                dvpp_yuv_pixel_to_rgb(k, (int)luma[0], dvpp_chroma_terms(k, u, w), r8, g8, b8);
                r = r8, g = g8, b = b8;
            }
        } else {
            uint32_t s[SRC];
            dvpp_preprocess_sample<SRC, MODE>(a.luma, a.plane0, a.pitch0, px, py, s);
            if (SRC == 1) {
                r = g = b = (int)s[0];
            } else {
                r = (int)s[a.swapped ? 2 : 0];
                g = (int)s[1];
                b = (int)s[a.swapped ? 0 : 2];
            }
        }
        // A grey source (or a 4:2:0 one's Y) stays itself: the grey of R = G = B is that value.
        v[0] = a.out == DVPP_OUT_BGR ? b : a.out == DVPP_OUT_GREY ? dvpp_rgb_to_grey(r, g, b) : r;
        v[1] = g;
        v[2] = a.out == DVPP_OUT_BGR ? r : b;
    } else {
        v[0] = (int)a.fill[0];
        v[1] = (int)a.fill[1];
        v[2] = (int)a.fill[2];
    }
    const uint32_t channels = a.out == DVPP_OUT_GREY ? 1u : 3u;
    const size_t plane = (size_t)a.width * a.height, pixel = (size_t)y * a.width + x;
    for (uint32_t c = 0; c < channels; ++c) {
        const float n = dvpp_normalize_value(v[c], a.norm.scale[c], a.norm.bias[c]);
        dvpp_store_normalized_as(a.dtype, a.dst, a.chw ? c * plane + pixel : pixel * channels + c, n);
    }
}
RT_KERNEL_INSTANTIATE(preprocess_grey_nearest, preprocess<1, DVPP_MODE_NEAREST>);
RT_KERNEL_INSTANTIATE(preprocess_grey_bilinear, preprocess<1, DVPP_MODE_BILINEAR>);
RT_KERNEL_INSTANTIATE(preprocess_grey_area, preprocess<1, DVPP_MODE_AREA>);
RT_KERNEL_INSTANTIATE(preprocess_grey_area_linear, preprocess<1, DVPP_MODE_AREA_LINEAR>);
RT_KERNEL_INSTANTIATE(preprocess_c3_nearest, preprocess<3, DVPP_MODE_NEAREST>);
RT_KERNEL_INSTANTIATE(preprocess_c3_bilinear, preprocess<3, DVPP_MODE_BILINEAR>);
RT_KERNEL_INSTANTIATE(preprocess_c3_area, preprocess<3, DVPP_MODE_AREA>);
RT_KERNEL_INSTANTIATE(preprocess_c3_area_linear, preprocess<3, DVPP_MODE_AREA_LINEAR>);
RT_KERNEL_INSTANTIATE(preprocess_c4_nearest, preprocess<4, DVPP_MODE_NEAREST>);
RT_KERNEL_INSTANTIATE(preprocess_c4_bilinear, preprocess<4, DVPP_MODE_BILINEAR>);
RT_KERNEL_INSTANTIATE(preprocess_c4_area, preprocess<4, DVPP_MODE_AREA>);
RT_KERNEL_INSTANTIATE(preprocess_c4_area_linear, preprocess<4, DVPP_MODE_AREA_LINEAR>);
RT_KERNEL_INSTANTIATE(preprocess_semi_nearest, preprocess<DVPP_SRC_SEMI, DVPP_MODE_NEAREST>);
RT_KERNEL_INSTANTIATE(preprocess_semi_bilinear, preprocess<DVPP_SRC_SEMI, DVPP_MODE_BILINEAR>);
RT_KERNEL_INSTANTIATE(preprocess_semi_area, preprocess<DVPP_SRC_SEMI, DVPP_MODE_AREA>);
RT_KERNEL_INSTANTIATE(preprocess_semi_area_linear, preprocess<DVPP_SRC_SEMI, DVPP_MODE_AREA_LINEAR>);
RT_KERNEL_INSTANTIATE(preprocess_planar_nearest, preprocess<DVPP_SRC_PLANAR, DVPP_MODE_NEAREST>);
RT_KERNEL_INSTANTIATE(preprocess_planar_bilinear, preprocess<DVPP_SRC_PLANAR, DVPP_MODE_BILINEAR>);
RT_KERNEL_INSTANTIATE(preprocess_planar_area, preprocess<DVPP_SRC_PLANAR, DVPP_MODE_AREA>);
RT_KERNEL_INSTANTIATE(preprocess_planar_area_linear, preprocess<DVPP_SRC_PLANAR, DVPP_MODE_AREA_LINEAR>);
