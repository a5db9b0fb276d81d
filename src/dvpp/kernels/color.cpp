// color.cpp — the kernels of rtDvppConvertColor (family "color"): 4:2:0 <-> packed, packed <-> packed and 4:2:0 <->
// 4:2:0, with the maths of color_math.h. Pitches are in bytes. A 4:2:0 picture comes as its Y plane and its chroma:
// c0, the interleaved plane (NV12, NV21) or the U plane (YUV420P), and c1, the V plane (YUV420P; otherwise unused).
// One work-item per pair of pixels of a row (the two that share a chroma sample): the cpu target's vectorised loop
// along x then reads and writes whole rows. (An item per 2x2 block would share the chroma between two rows too, but
// stores to two rows of one picture defeat the cpu compiler's vectoriser.)

/// 4:2:0 -> packed RGB888 / BGR888 / RGBA8888 / BGRA8888 with rtColorMatrix M (a template parameter: its constant
/// coefficients let the cpu target multiply in 16-bit lanes). `alpha` is the alpha written by the 4-channel outputs,
/// 255 (an argument, not a constant: LLVM does not vectorise a store of 4-byte pixels with a constant byte).
template <int CF, int DCN, int BGR, int M>
RT_KERNEL void yuv_to_packed(const uint8_t* y, uint32_t y_pitch, const uint8_t* c0, const uint8_t* c1,
                             uint32_t c_pitch, uint8_t* dst, uint32_t dst_pitch, int alpha) {
    const size_t x2 = get_global_id(0), row = get_global_id(1);
    const DvppYuvToRgb k = dvpp_yuv_to_rgb_coeffs(M);
    int u, v;
    dvpp_load_chroma<CF>(c0 + (row >> 1) * c_pitch, c1 + (row >> 1) * c_pitch, x2, u, v);
    const DvppChroma t = dvpp_chroma_terms(k, u, v);
    const uint8_t* in = y + row * y_pitch + 2 * x2;
    uint8_t* out = dst + row * dst_pitch + 2 * x2 * DCN;
    for (int i = 0; i < 2; ++i) {
        uint8_t r, g, b;
        dvpp_yuv_pixel_to_rgb(k, in[i], t, r, g, b);
        dvpp_color_store<DCN, BGR>(out + i * DCN, r, g, b, alpha);
    }
}
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_rgb_601f, yuv_to_packed<DVPP_CHROMA_NV12, 3, 0, DVPP_BT601_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_rgb_601l, yuv_to_packed<DVPP_CHROMA_NV12, 3, 0, DVPP_BT601_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_rgb_709f, yuv_to_packed<DVPP_CHROMA_NV12, 3, 0, DVPP_BT709_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_rgb_709l, yuv_to_packed<DVPP_CHROMA_NV12, 3, 0, DVPP_BT709_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_bgr_601f, yuv_to_packed<DVPP_CHROMA_NV12, 3, 1, DVPP_BT601_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_bgr_601l, yuv_to_packed<DVPP_CHROMA_NV12, 3, 1, DVPP_BT601_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_bgr_709f, yuv_to_packed<DVPP_CHROMA_NV12, 3, 1, DVPP_BT709_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_bgr_709l, yuv_to_packed<DVPP_CHROMA_NV12, 3, 1, DVPP_BT709_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_rgba_601f, yuv_to_packed<DVPP_CHROMA_NV12, 4, 0, DVPP_BT601_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_rgba_601l, yuv_to_packed<DVPP_CHROMA_NV12, 4, 0, DVPP_BT601_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_rgba_709f, yuv_to_packed<DVPP_CHROMA_NV12, 4, 0, DVPP_BT709_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_rgba_709l, yuv_to_packed<DVPP_CHROMA_NV12, 4, 0, DVPP_BT709_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_bgra_601f, yuv_to_packed<DVPP_CHROMA_NV12, 4, 1, DVPP_BT601_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_bgra_601l, yuv_to_packed<DVPP_CHROMA_NV12, 4, 1, DVPP_BT601_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_bgra_709f, yuv_to_packed<DVPP_CHROMA_NV12, 4, 1, DVPP_BT709_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv12_bgra_709l, yuv_to_packed<DVPP_CHROMA_NV12, 4, 1, DVPP_BT709_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_rgb_601f, yuv_to_packed<DVPP_CHROMA_NV21, 3, 0, DVPP_BT601_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_rgb_601l, yuv_to_packed<DVPP_CHROMA_NV21, 3, 0, DVPP_BT601_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_rgb_709f, yuv_to_packed<DVPP_CHROMA_NV21, 3, 0, DVPP_BT709_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_rgb_709l, yuv_to_packed<DVPP_CHROMA_NV21, 3, 0, DVPP_BT709_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_bgr_601f, yuv_to_packed<DVPP_CHROMA_NV21, 3, 1, DVPP_BT601_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_bgr_601l, yuv_to_packed<DVPP_CHROMA_NV21, 3, 1, DVPP_BT601_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_bgr_709f, yuv_to_packed<DVPP_CHROMA_NV21, 3, 1, DVPP_BT709_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_bgr_709l, yuv_to_packed<DVPP_CHROMA_NV21, 3, 1, DVPP_BT709_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_rgba_601f, yuv_to_packed<DVPP_CHROMA_NV21, 4, 0, DVPP_BT601_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_rgba_601l, yuv_to_packed<DVPP_CHROMA_NV21, 4, 0, DVPP_BT601_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_rgba_709f, yuv_to_packed<DVPP_CHROMA_NV21, 4, 0, DVPP_BT709_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_rgba_709l, yuv_to_packed<DVPP_CHROMA_NV21, 4, 0, DVPP_BT709_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_bgra_601f, yuv_to_packed<DVPP_CHROMA_NV21, 4, 1, DVPP_BT601_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_bgra_601l, yuv_to_packed<DVPP_CHROMA_NV21, 4, 1, DVPP_BT601_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_bgra_709f, yuv_to_packed<DVPP_CHROMA_NV21, 4, 1, DVPP_BT709_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_nv21_bgra_709l, yuv_to_packed<DVPP_CHROMA_NV21, 4, 1, DVPP_BT709_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_rgb_601f, yuv_to_packed<DVPP_CHROMA_I420, 3, 0, DVPP_BT601_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_rgb_601l, yuv_to_packed<DVPP_CHROMA_I420, 3, 0, DVPP_BT601_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_rgb_709f, yuv_to_packed<DVPP_CHROMA_I420, 3, 0, DVPP_BT709_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_rgb_709l, yuv_to_packed<DVPP_CHROMA_I420, 3, 0, DVPP_BT709_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_bgr_601f, yuv_to_packed<DVPP_CHROMA_I420, 3, 1, DVPP_BT601_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_bgr_601l, yuv_to_packed<DVPP_CHROMA_I420, 3, 1, DVPP_BT601_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_bgr_709f, yuv_to_packed<DVPP_CHROMA_I420, 3, 1, DVPP_BT709_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_bgr_709l, yuv_to_packed<DVPP_CHROMA_I420, 3, 1, DVPP_BT709_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_rgba_601f, yuv_to_packed<DVPP_CHROMA_I420, 4, 0, DVPP_BT601_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_rgba_601l, yuv_to_packed<DVPP_CHROMA_I420, 4, 0, DVPP_BT601_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_rgba_709f, yuv_to_packed<DVPP_CHROMA_I420, 4, 0, DVPP_BT709_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_rgba_709l, yuv_to_packed<DVPP_CHROMA_I420, 4, 0, DVPP_BT709_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_bgra_601f, yuv_to_packed<DVPP_CHROMA_I420, 4, 1, DVPP_BT601_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_bgra_601l, yuv_to_packed<DVPP_CHROMA_I420, 4, 1, DVPP_BT601_LIMITED>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_bgra_709f, yuv_to_packed<DVPP_CHROMA_I420, 4, 1, DVPP_BT709_FULL>);
RT_KERNEL_INSTANTIATE(yuv_to_packed_i420_bgra_709l, yuv_to_packed<DVPP_CHROMA_I420, 4, 1, DVPP_BT709_LIMITED>);

/// Packed (GRAY8, RGB888, BGR888, RGBA8888, BGRA8888) -> 4:2:0 with rtColorMatrix `matrix`; U and V of a 2x2 block
/// come from its top-left pixel (written by the items of even rows). A grey source is the Y plane itself, with
/// neutral chroma (128).
template <int SCN, int BGR, int CF>
RT_KERNEL void packed_to_yuv(const uint8_t* src, uint32_t src_pitch, uint8_t* y, uint32_t y_pitch, uint8_t* c0,
                             uint8_t* c1, uint32_t c_pitch, int matrix) {
    const size_t x2 = get_global_id(0), row = get_global_id(1);
    const DvppRgbToYuv k = dvpp_rgb_to_yuv_coeffs(matrix);
    const uint8_t* in = src + row * src_pitch + 2 * x2 * SCN;
    uint8_t* out = y + row * y_pitch + 2 * x2;
    int r, g, b, a;
    for (int i = 1; i >= 0; --i) {  // the left pixel last: its R, G, B stay for the chroma
        dvpp_color_load<SCN, BGR>(in + i * SCN, r, g, b, a);
        out[i] = SCN == 1 ? (uint8_t)r : dvpp_rgb_to_y(k, r, g, b);
    }
    if (row & 1) return;
    const size_t c = (row >> 1) * c_pitch;
    const uint8_t u = SCN == 1 ? 128 : dvpp_rgb_to_u(k, r, g, b), v = SCN == 1 ? 128 : dvpp_rgb_to_v(k, r, g, b);
    dvpp_store_chroma<CF>(c0 + c, c1 + c, x2, u, v);
}
RT_KERNEL_INSTANTIATE(packed_to_yuv_grey_nv12, packed_to_yuv<1, 0, DVPP_CHROMA_NV12>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_grey_nv21, packed_to_yuv<1, 0, DVPP_CHROMA_NV21>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_grey_i420, packed_to_yuv<1, 0, DVPP_CHROMA_I420>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_rgb_nv12, packed_to_yuv<3, 0, DVPP_CHROMA_NV12>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_rgb_nv21, packed_to_yuv<3, 0, DVPP_CHROMA_NV21>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_rgb_i420, packed_to_yuv<3, 0, DVPP_CHROMA_I420>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_bgr_nv12, packed_to_yuv<3, 1, DVPP_CHROMA_NV12>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_bgr_nv21, packed_to_yuv<3, 1, DVPP_CHROMA_NV21>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_bgr_i420, packed_to_yuv<3, 1, DVPP_CHROMA_I420>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_rgba_nv12, packed_to_yuv<4, 0, DVPP_CHROMA_NV12>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_rgba_nv21, packed_to_yuv<4, 0, DVPP_CHROMA_NV21>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_rgba_i420, packed_to_yuv<4, 0, DVPP_CHROMA_I420>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_bgra_nv12, packed_to_yuv<4, 1, DVPP_CHROMA_NV12>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_bgra_nv21, packed_to_yuv<4, 1, DVPP_CHROMA_NV21>);
RT_KERNEL_INSTANTIATE(packed_to_yuv_bgra_i420, packed_to_yuv<4, 1, DVPP_CHROMA_I420>);

/// Packed -> packed: channel order, alpha kept, added (255) or dropped, grey replicated or computed (BT.601 luma).
/// Grey -> grey copies a plane (also the Y plane of a 4:2:0 picture as GRAY8).
template <int SCN, int SBGR, int DCN, int DBGR>
RT_KERNEL void packed_to_packed(const uint8_t* src, uint32_t src_pitch, uint8_t* dst, uint32_t dst_pitch) {
    const size_t x = get_global_id(0), row = get_global_id(1);
    int r, g, b, a;
    dvpp_color_load<SCN, SBGR>(src + row * src_pitch + x * SCN, r, g, b, a);
    dvpp_color_store<DCN, DBGR>(dst + row * dst_pitch + x * DCN, r, g, b, a);
}
RT_KERNEL_INSTANTIATE(packed_to_packed_grey_grey, packed_to_packed<1, 0, 1, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_grey_rgb, packed_to_packed<1, 0, 3, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_grey_bgr, packed_to_packed<1, 0, 3, 1>);
RT_KERNEL_INSTANTIATE(packed_to_packed_grey_rgba, packed_to_packed<1, 0, 4, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_grey_bgra, packed_to_packed<1, 0, 4, 1>);
RT_KERNEL_INSTANTIATE(packed_to_packed_rgb_grey, packed_to_packed<3, 0, 1, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_rgb_rgb, packed_to_packed<3, 0, 3, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_rgb_bgr, packed_to_packed<3, 0, 3, 1>);
RT_KERNEL_INSTANTIATE(packed_to_packed_rgb_rgba, packed_to_packed<3, 0, 4, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_rgb_bgra, packed_to_packed<3, 0, 4, 1>);
RT_KERNEL_INSTANTIATE(packed_to_packed_bgr_grey, packed_to_packed<3, 1, 1, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_bgr_rgb, packed_to_packed<3, 1, 3, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_bgr_bgr, packed_to_packed<3, 1, 3, 1>);
RT_KERNEL_INSTANTIATE(packed_to_packed_bgr_rgba, packed_to_packed<3, 1, 4, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_bgr_bgra, packed_to_packed<3, 1, 4, 1>);
RT_KERNEL_INSTANTIATE(packed_to_packed_rgba_grey, packed_to_packed<4, 0, 1, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_rgba_rgb, packed_to_packed<4, 0, 3, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_rgba_bgr, packed_to_packed<4, 0, 3, 1>);
RT_KERNEL_INSTANTIATE(packed_to_packed_rgba_rgba, packed_to_packed<4, 0, 4, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_rgba_bgra, packed_to_packed<4, 0, 4, 1>);
RT_KERNEL_INSTANTIATE(packed_to_packed_bgra_grey, packed_to_packed<4, 1, 1, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_bgra_rgb, packed_to_packed<4, 1, 3, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_bgra_bgr, packed_to_packed<4, 1, 3, 1>);
RT_KERNEL_INSTANTIATE(packed_to_packed_bgra_rgba, packed_to_packed<4, 1, 4, 0>);
RT_KERNEL_INSTANTIATE(packed_to_packed_bgra_bgra, packed_to_packed<4, 1, 4, 1>);

/// 4:2:0 -> 4:2:0: the Y plane copied, the chroma re-arranged (written by the items of even rows).
template <int SCF, int DCF>
RT_KERNEL void yuv_to_yuv(const uint8_t* sy, uint32_t sy_pitch, const uint8_t* s0, const uint8_t* s1, uint32_t sc_pitch,
                          uint8_t* dy, uint32_t dy_pitch, uint8_t* d0, uint8_t* d1, uint32_t dc_pitch) {
    const size_t x2 = get_global_id(0), row = get_global_id(1);
    const uint8_t* in = sy + row * sy_pitch + 2 * x2;
    uint8_t* out = dy + row * dy_pitch + 2 * x2;
    out[0] = in[0];
    out[1] = in[1];
    if (row & 1) return;
    int u, v;
    dvpp_load_chroma<SCF>(s0 + (row >> 1) * sc_pitch, s1 + (row >> 1) * sc_pitch, x2, u, v);
    dvpp_store_chroma<DCF>(d0 + (row >> 1) * dc_pitch, d1 + (row >> 1) * dc_pitch, x2, (uint8_t)u, (uint8_t)v);
}
RT_KERNEL_INSTANTIATE(yuv_to_yuv_nv12_nv12, yuv_to_yuv<DVPP_CHROMA_NV12, DVPP_CHROMA_NV12>);
RT_KERNEL_INSTANTIATE(yuv_to_yuv_nv12_nv21, yuv_to_yuv<DVPP_CHROMA_NV12, DVPP_CHROMA_NV21>);
RT_KERNEL_INSTANTIATE(yuv_to_yuv_nv12_i420, yuv_to_yuv<DVPP_CHROMA_NV12, DVPP_CHROMA_I420>);
RT_KERNEL_INSTANTIATE(yuv_to_yuv_nv21_nv12, yuv_to_yuv<DVPP_CHROMA_NV21, DVPP_CHROMA_NV12>);
RT_KERNEL_INSTANTIATE(yuv_to_yuv_nv21_nv21, yuv_to_yuv<DVPP_CHROMA_NV21, DVPP_CHROMA_NV21>);
RT_KERNEL_INSTANTIATE(yuv_to_yuv_nv21_i420, yuv_to_yuv<DVPP_CHROMA_NV21, DVPP_CHROMA_I420>);
RT_KERNEL_INSTANTIATE(yuv_to_yuv_i420_nv12, yuv_to_yuv<DVPP_CHROMA_I420, DVPP_CHROMA_NV12>);
RT_KERNEL_INSTANTIATE(yuv_to_yuv_i420_nv21, yuv_to_yuv<DVPP_CHROMA_I420, DVPP_CHROMA_NV21>);
RT_KERNEL_INSTANTIATE(yuv_to_yuv_i420_i420, yuv_to_yuv<DVPP_CHROMA_I420, DVPP_CHROMA_I420>);
