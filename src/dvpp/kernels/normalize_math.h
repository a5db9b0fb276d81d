// normalize_math.h — DVPP's normalisation: out = fma(pixel, scale, bias) in float per channel (scale = 1 / std,
// bias = -mean / std, both computed once on the host), then stored as the output's dtype. The normalize kernels and
// the fused preprocess both use these functions, so both give the same bits, on every backend: one fma is one
// correctly rounded operation everywhere (an explicit fma, so no compiler contracts or splits it differently), and
// the conversions below are exact integer or round-to-nearest-even steps.
//
// Kernel dialect source after common.h; the library also includes it as plain C++ for DvppNorm and the dtype
// codes, which its host code fills (src/dvpp/color.cpp, norm_coeffs): what only kernels use is inside #ifdef
// RT_KERNEL (the dialect's prelude defines it).
#ifndef DVPP_NORMALIZE_MATH_H
#define DVPP_NORMALIZE_MATH_H

/// Per-channel coefficients of a normalisation: scale = 1 / std, bias = -(mean / std), in float (a kernel argument).
struct DvppNorm {
    float scale[4];
    float bias[4];
};

/* The output dtypes, as the kernels take them at run time (host: dtype_code in src/dvpp/color.cpp). */
#define DVPP_DTYPE_F32 0
#define DVPP_DTYPE_F16 1
#define DVPP_DTYPE_BF16 2
#define DVPP_DTYPE_U8 3
#define DVPP_DTYPE_I8 4

#ifdef RT_KERNEL

RT_DEVICE float dvpp_normalize_value(int pixel, float scale, float bias) { return fma((float)pixel, scale, bias); }

/* Round to nearest even for |v| < 2^22, without rint (not a built-in of the dialect): adding 1.5 * 2^23 leaves no
 * fraction bits, so the addition rounds (to nearest even, the default mode on every backend) and the subtraction is
 * exact. Neither compiler may fold it away (no fast-math). */
#define DVPP_ROUND_MAGIC 12582912.0f

/// The stores of a normalised value as each output dtype: float32 as is; float16 and bfloat16 rounded to nearest
/// even (rt_half, rt_bfloat16); uint8 and int8 rounded to nearest even and saturated. The value is never NaN (the
/// host refuses coefficients that could make one).
RT_DEVICE void dvpp_store_normalized(float* p, float v) { *p = v; }
RT_DEVICE void dvpp_store_normalized(rt_half* p, float v) { *p = rt_half(v); }
RT_DEVICE void dvpp_store_normalized(rt_bfloat16* p, float v) { *p = rt_bfloat16(v); }
RT_DEVICE void dvpp_store_normalized(uint8_t* p, float v) {
    const float c = fmin(fmax(v, 0.0f), 255.0f);
    *p = (uint8_t)(int)((c + DVPP_ROUND_MAGIC) - DVPP_ROUND_MAGIC);
}
RT_DEVICE void dvpp_store_normalized(int8_t* p, float v) {
    const float c = fmin(fmax(v, -128.0f), 127.0f);
    *p = (int8_t)(int)((c + DVPP_ROUND_MAGIC) - DVPP_ROUND_MAGIC);
}

/// Writes the C normalised channels of one pixel (x, y) of a w x h image to dst: CHW (plane after plane, `plane`
/// = w * h elements apart) or HWC (interleaved).
template <int C, int CHW, class T>
RT_DEVICE void dvpp_store_pixel_normalized(T* dst, size_t x, size_t y, size_t w, size_t plane, const int* v,
                                      const DvppNorm& k) {
    for (int c = 0; c < C; ++c) {
        const float n = dvpp_normalize_value(v[c], k.scale[c], k.bias[c]);
        if (CHW)
            dvpp_store_normalized(dst + c * plane + y * w + x, n);
        else
            dvpp_store_normalized(dst + (y * w + x) * C + c, n);
    }
}

#endif /* RT_KERNEL */

#endif /* DVPP_NORMALIZE_MATH_H */
