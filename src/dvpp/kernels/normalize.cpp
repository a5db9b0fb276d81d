// normalize.cpp — the kernels of rtDvppNormalize (family "normalize"): a packed 8-bit picture of C channels to
// (pixel - mean) / std per channel as fma(pixel, scale, bias) (normalize_math.h), in CHW or HWC order, one dtype per
// instantiation. One work-item per pixel.

template <int C, int CHW, class T>
RT_KERNEL void normalize(const uint8_t* src, uint32_t src_pitch, T* dst, uint32_t width, uint32_t height,
                         DvppNorm k) {
    const size_t x = get_global_id(0), y = get_global_id(1);
    const uint8_t* p = src + y * src_pitch + x * C;
    int v[4];
    for (int c = 0; c < C; ++c) v[c] = p[c];
    dvpp_store_pixel_normalized<C, CHW>(dst, x, y, width, (size_t)width * height, v, k);
}
RT_KERNEL_INSTANTIATE(normalize_c1_chw_f32, normalize<1, 1, float>);
RT_KERNEL_INSTANTIATE(normalize_c1_chw_f16, normalize<1, 1, rt_half>);
RT_KERNEL_INSTANTIATE(normalize_c1_chw_bf16, normalize<1, 1, rt_bfloat16>);
RT_KERNEL_INSTANTIATE(normalize_c1_chw_u8, normalize<1, 1, uint8_t>);
RT_KERNEL_INSTANTIATE(normalize_c1_chw_i8, normalize<1, 1, int8_t>);
RT_KERNEL_INSTANTIATE(normalize_c1_hwc_f32, normalize<1, 0, float>);
RT_KERNEL_INSTANTIATE(normalize_c1_hwc_f16, normalize<1, 0, rt_half>);
RT_KERNEL_INSTANTIATE(normalize_c1_hwc_bf16, normalize<1, 0, rt_bfloat16>);
RT_KERNEL_INSTANTIATE(normalize_c1_hwc_u8, normalize<1, 0, uint8_t>);
RT_KERNEL_INSTANTIATE(normalize_c1_hwc_i8, normalize<1, 0, int8_t>);
RT_KERNEL_INSTANTIATE(normalize_c3_chw_f32, normalize<3, 1, float>);
RT_KERNEL_INSTANTIATE(normalize_c3_chw_f16, normalize<3, 1, rt_half>);
RT_KERNEL_INSTANTIATE(normalize_c3_chw_bf16, normalize<3, 1, rt_bfloat16>);
RT_KERNEL_INSTANTIATE(normalize_c3_chw_u8, normalize<3, 1, uint8_t>);
RT_KERNEL_INSTANTIATE(normalize_c3_chw_i8, normalize<3, 1, int8_t>);
RT_KERNEL_INSTANTIATE(normalize_c3_hwc_f32, normalize<3, 0, float>);
RT_KERNEL_INSTANTIATE(normalize_c3_hwc_f16, normalize<3, 0, rt_half>);
RT_KERNEL_INSTANTIATE(normalize_c3_hwc_bf16, normalize<3, 0, rt_bfloat16>);
RT_KERNEL_INSTANTIATE(normalize_c3_hwc_u8, normalize<3, 0, uint8_t>);
RT_KERNEL_INSTANTIATE(normalize_c3_hwc_i8, normalize<3, 0, int8_t>);
RT_KERNEL_INSTANTIATE(normalize_c4_chw_f32, normalize<4, 1, float>);
RT_KERNEL_INSTANTIATE(normalize_c4_chw_f16, normalize<4, 1, rt_half>);
RT_KERNEL_INSTANTIATE(normalize_c4_chw_bf16, normalize<4, 1, rt_bfloat16>);
RT_KERNEL_INSTANTIATE(normalize_c4_chw_u8, normalize<4, 1, uint8_t>);
RT_KERNEL_INSTANTIATE(normalize_c4_chw_i8, normalize<4, 1, int8_t>);
RT_KERNEL_INSTANTIATE(normalize_c4_hwc_f32, normalize<4, 0, float>);
RT_KERNEL_INSTANTIATE(normalize_c4_hwc_f16, normalize<4, 0, rt_half>);
RT_KERNEL_INSTANTIATE(normalize_c4_hwc_bf16, normalize<4, 0, rt_bfloat16>);
RT_KERNEL_INSTANTIATE(normalize_c4_hwc_u8, normalize<4, 0, uint8_t>);
RT_KERNEL_INSTANTIATE(normalize_c4_hwc_i8, normalize<4, 0, int8_t>);
