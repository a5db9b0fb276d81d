// color_math.h — DVPP's colour maths in integers: YUV <-> RGB for the four rtColorMatrix values, BT.601 grey, and
// the channel orders of the packed formats. The color kernels and the fused preprocess both use these functions, so
// a conversion gives the same bytes whichever operation runs it, on every backend.
//
// The matrices follow from each standard's luma weights Kr, Kb (Kg = 1 - Kr - Kb): BT.601 Kr 0.299, Kb 0.114;
// BT.709 Kr 0.2126, Kb 0.0722. Full range (Y, U, V in 0..255, JPEG's YCbCr):
//     Y = Kr R + Kg G + Kb B,   U = 128 + (B - Y) / (2 (1 - Kb)),   V = 128 + (R - Y) / (2 (1 - Kr)),
//     R = Y + 2 (1 - Kr) V',    G = Y - (2 Kb (1 - Kb) U' + 2 Kr (1 - Kr) V') / Kg,   B = Y + 2 (1 - Kb) U'
// with U' = U - 128, V' = V - 128. Limited range scales Y by 219/255 around 16 and U, V by 224/255 around 128 (and
// the inverse by 255/219 and 255/224). Limited-range Y below 16 (footroom) is black: YUV -> RGB takes max(Y - 16, 0),
// as OpenCV does. Chroma of 4:2:0 is point-sampled both ways: YUV -> RGB gives the four pixels of a 2x2 block their
// one U, V; RGB -> YUV takes U, V of a block from its top-left pixel (OpenCV's COLOR_RGB2YUV_I420).
//
// RGB -> YUV: each coefficient an integer scaled by 2^13, rounded to nearest; a value is an int32 sum of products
// rounded once ((sum + 2^12) >> 13) and saturated to 0..255. The weights of Y add up exactly to 2^13 (full range:
// white stays 255) and those of U and V to 0 (grey stays 128), the green weight taking the rounding.
//
// YUV -> RGB (the hot direction: NV12 is what decoders and cameras produce) is computed in unsigned 16-bit values at
// 2^6, so a vectorising target works in 16-bit lanes, twice as many per instruction as int32 (the cpu target's
// NV12 -> RGB is bound by its arithmetic): the coefficients are held at 2^14, each term is the high half of a
// 16 x 16-bit product (floor(c x) at 2^6), and every negative term is folded into a constant bias that a saturating
// subtraction removes (a result below 0 stops at 0), so no intermediate leaves 0..65535 for any matrix.
// Over all 2^24 Y, U, V triples every matrix stays within 1 of its exact real formula, and BT.601 limited within 1
// of cv2.cvtColor (whose own coefficients are at 2^20).
//
// Grey from RGB is the BT.601 luma at 2^15, (9798 R + 19235 G + 3735 B + 2^14) >> 15: cv2.cvtColor(COLOR_RGB2GRAY)
// of OpenCV 5 exactly (OpenCV 4's weights at 2^14 are within 1 of it).
//
// Kernel dialect source after common.h; the codecs (src/dvpp/jpeg.cpp, png.cpp) also include it, after common.h, as
// plain C++ for their RGB -> grey and RGB -> 4:2:0 conversions, so a decode that converts gives the bytes
// rtDvppConvertColor gives: everything here is therefore integer code valid in both.
#ifndef DVPP_COLOR_MATH_H
#define DVPP_COLOR_MATH_H

/* RGB -> YUV at 2^13: every coefficient fits in 15 bits (so a target may multiply in 16-bit lanes when the matrix
 * is known at compile time); the results stay within 1 of the exact real formulas. */
#define DVPP_COLOR_SHIFT 13
#define DVPP_COLOR_HALF (1 << (DVPP_COLOR_SHIFT - 1))
/* A real coefficient as a rounded integer scaled by 2^13 (a constant expression). */
#define DVPP_FIX(v) ((int)((v) * (double)(1 << DVPP_COLOR_SHIFT) + ((v) < 0 ? -0.5 : 0.5)))
/* YUV -> RGB: values at 2^6 in 16 bits, every coefficient at 2^14 (DVPP_FIX14: a positive real, rounded); a term
 * c x is the high half of the 16 x 16-bit product (x << 8) * c, i.e. floor(c x 2^6). */
#define DVPP_YUV_SHIFT 6
#define DVPP_YUV_HALF (1 << (DVPP_YUV_SHIFT - 1))
#define DVPP_FIX14(v) ((int)((v) * 16384.0 + 0.5))
#define DVPP_Y_TO_RGB(lim) ((lim) ? 255.0 / 219.0 : 1.0)
#define DVPP_C_TO_RGB(lim) ((lim) ? 255.0 / 224.0 : 1.0)
#define DVPP_V_R(kr, lim) DVPP_FIX14(2.0 * (1.0 - (kr)) * DVPP_C_TO_RGB(lim))
#define DVPP_U_G(kr, kb, lim) DVPP_FIX14(2.0 * (kb) * (1.0 - (kb)) / (1.0 - (kr) - (kb)) * DVPP_C_TO_RGB(lim))
#define DVPP_V_G(kr, kb, lim) DVPP_FIX14(2.0 * (kr) * (1.0 - (kr)) / (1.0 - (kr) - (kb)) * DVPP_C_TO_RGB(lim))
#define DVPP_U_B(kb, lim) DVPP_FIX14(2.0 * (1.0 - (kb)) * DVPP_C_TO_RGB(lim))
/* The YUV -> RGB coefficients of luma weights kr, kb, full range (lim 0) or limited (lim 1), and the biases that
 * take the place of the negative terms (the term of 128 is c >> 1): R = Y' + t(V_R, V) - (t(V_R, 128) - half),
 * G = Y' + (half + t(U_G, 128) + t(V_G, 128)) - (t(U_G, U) + t(V_G, V)), B = Y' + t(U_B, U) - (t(U_B, 128) - half). */
#define DVPP_TO_RGB(kr, kb, lim)                                                                        \
    {DVPP_FIX14(DVPP_Y_TO_RGB(lim)), (lim) ? 16 : 0, DVPP_V_R(kr, lim), DVPP_U_G(kr, kb, lim),          \
     DVPP_V_G(kr, kb, lim), DVPP_U_B(kb, lim), (DVPP_V_R(kr, lim) >> 1) - DVPP_YUV_HALF,               \
     DVPP_YUV_HALF + (DVPP_U_G(kr, kb, lim) >> 1) + (DVPP_V_G(kr, kb, lim) >> 1), (DVPP_U_B(kb, lim) >> 1) - DVPP_YUV_HALF}
/* The RGB -> YUV coefficients, likewise; the green weights take the rounding. */
#define DVPP_Y_TO_YUV(lim) ((lim) ? 219.0 / 255.0 : 1.0)
#define DVPP_C_TO_YUV(lim) ((lim) ? 224.0 / 255.0 : 1.0)
#define DVPP_R_Y(kr, lim) DVPP_FIX((kr) * DVPP_Y_TO_YUV(lim))
#define DVPP_B_Y(kb, lim) DVPP_FIX((kb) * DVPP_Y_TO_YUV(lim))
#define DVPP_R_U(kr, kb, lim) DVPP_FIX(-(kr) / (2.0 * (1.0 - (kb))) * DVPP_C_TO_YUV(lim))
#define DVPP_B_V(kr, kb, lim) DVPP_FIX(-(kb) / (2.0 * (1.0 - (kr))) * DVPP_C_TO_YUV(lim))
#define DVPP_HALF_C(lim) DVPP_FIX(0.5 * DVPP_C_TO_YUV(lim))
#define DVPP_TO_YUV(kr, kb, lim)                                                                        \
    {DVPP_R_Y(kr, lim), DVPP_FIX(DVPP_Y_TO_YUV(lim)) - DVPP_R_Y(kr, lim) - DVPP_B_Y(kb, lim), DVPP_B_Y(kb, lim), \
     DVPP_R_U(kr, kb, lim), -DVPP_R_U(kr, kb, lim) - DVPP_HALF_C(lim), DVPP_HALF_C(lim),                \
     DVPP_HALF_C(lim), -DVPP_HALF_C(lim) - DVPP_B_V(kr, kb, lim), DVPP_B_V(kr, kb, lim), (lim) ? 16 : 0}

/* Values of rtColorMatrix (dvpp.h), which the kernels receive as an int. */
#define DVPP_BT601_FULL 0
#define DVPP_BT601_LIMITED 1
#define DVPP_BT709_FULL 2
#define DVPP_BT709_LIMITED 3

/// YUV -> RGB coefficients of one matrix (DVPP_TO_RGB): the luma gain, the footroom of Y (16 limited, 0 full), the
/// chroma coefficients (magnitudes; G's are subtracted), all at 2^14, and the three biases at 2^6.
struct DvppYuvToRgb {
    uint16_t y_gain, y_offset, v_r, u_g, v_g, u_b, bias_r, bias_g, bias_b;
};
/// RGB -> YUV coefficients of one matrix, scaled by 2^13, and the offset of its Y (16 limited, 0 full).
struct DvppRgbToYuv {
    int r_y, g_y, b_y, r_u, g_u, b_u, r_v, g_v, b_v;
    int y_offset;
};
/// The chroma part of YUV -> RGB for one U, V (at 2^6, before the biases): what the pixels that share it add.
struct DvppChroma {
    uint16_t r, g, b;
};

RT_DEVICE DvppYuvToRgb dvpp_yuv_to_rgb_coeffs(int matrix) {
    const DvppYuvToRgb bt601_full = DVPP_TO_RGB(0.299, 0.114, 0);
    const DvppYuvToRgb bt601_limited = DVPP_TO_RGB(0.299, 0.114, 1);
    const DvppYuvToRgb bt709_full = DVPP_TO_RGB(0.2126, 0.0722, 0);
    const DvppYuvToRgb bt709_limited = DVPP_TO_RGB(0.2126, 0.0722, 1);
    return matrix == DVPP_BT601_FULL      ? bt601_full
           : matrix == DVPP_BT601_LIMITED ? bt601_limited
           : matrix == DVPP_BT709_FULL    ? bt709_full
                                          : bt709_limited;
}

RT_DEVICE DvppRgbToYuv dvpp_rgb_to_yuv_coeffs(int matrix) {
    const DvppRgbToYuv bt601_full = DVPP_TO_YUV(0.299, 0.114, 0);
    const DvppRgbToYuv bt601_limited = DVPP_TO_YUV(0.299, 0.114, 1);
    const DvppRgbToYuv bt709_full = DVPP_TO_YUV(0.2126, 0.0722, 0);
    const DvppRgbToYuv bt709_limited = DVPP_TO_YUV(0.2126, 0.0722, 1);
    return matrix == DVPP_BT601_FULL      ? bt601_full
           : matrix == DVPP_BT601_LIMITED ? bt601_limited
           : matrix == DVPP_BT709_FULL    ? bt709_full
                                          : bt709_limited;
}

/// 0..255 from a rounded fixed-point sum.
RT_DEVICE uint8_t dvpp_color_descale(int sum) { return dvpp_sat_u8(sum >> DVPP_COLOR_SHIFT); }

/// a - b, or 0 when b > a (the saturating subtraction of 16-bit lanes).
RT_DEVICE uint16_t dvpp_sub_sat_u16(uint16_t a, uint16_t b) { return (uint16_t)(a > b ? a - b : 0); }
/// 0..255 of a value at 2^6 whose rounding half is already in.
RT_DEVICE uint8_t dvpp_yuv_descale(uint16_t v) {
    const uint16_t s = (uint16_t)(v >> DVPP_YUV_SHIFT);
    return (uint8_t)(s > 255 ? 255 : s);
}

/// floor(c x / 2^8) for a coefficient c at 2^14 and x in 0..255: c x at 2^6. Computed as x (c >> 8) +
/// ((x (c & 255)) >> 8), which is exact and keeps every product within 16 bits.
RT_DEVICE uint16_t dvpp_yuv_term(uint16_t c, int x) {
    const uint16_t x16 = (uint8_t)x;
    return (uint16_t)(x16 * (uint16_t)(c >> 8) + (uint16_t)((uint16_t)(x16 * (uint16_t)(c & 255)) >> 8));
}

RT_DEVICE DvppChroma dvpp_chroma_terms(const DvppYuvToRgb& k, int u, int v) {
    DvppChroma t;
    t.r = dvpp_yuv_term(k.v_r, v);
    t.g = (uint16_t)(dvpp_yuv_term(k.u_g, u) + dvpp_yuv_term(k.v_g, v));
    t.b = dvpp_yuv_term(k.u_b, u);
    return t;
}

/// One pixel of YUV -> RGB: its Y and the chroma terms of its U, V. Every sum stays below 2^16 (Y' <= 255 * 1.17 at
/// 2^6; a chroma term <= 255 * 2.12 at 2^6).
RT_DEVICE void dvpp_yuv_pixel_to_rgb(const DvppYuvToRgb& k, int y, const DvppChroma& t, uint8_t& r, uint8_t& g,
                                     uint8_t& b) {
    const uint8_t y8 = (uint8_t)y, dy = (uint8_t)(y8 > k.y_offset ? y8 - k.y_offset : 0);
    const uint16_t ys = dvpp_yuv_term(k.y_gain, dy);
    r = dvpp_yuv_descale(dvpp_sub_sat_u16((uint16_t)(ys + t.r), k.bias_r));
    g = dvpp_yuv_descale(dvpp_sub_sat_u16((uint16_t)(ys + k.bias_g), t.g));
    b = dvpp_yuv_descale(dvpp_sub_sat_u16((uint16_t)(ys + t.b), k.bias_b));
}

RT_DEVICE uint8_t dvpp_rgb_to_y(const DvppRgbToYuv& k, int r, int g, int b) {
    return dvpp_color_descale(k.r_y * r + k.g_y * g + k.b_y * b + ((k.y_offset << DVPP_COLOR_SHIFT) + DVPP_COLOR_HALF));
}
RT_DEVICE uint8_t dvpp_rgb_to_u(const DvppRgbToYuv& k, int r, int g, int b) {
    return dvpp_color_descale(k.r_u * r + k.g_u * g + k.b_u * b + ((128 << DVPP_COLOR_SHIFT) + DVPP_COLOR_HALF));
}
RT_DEVICE uint8_t dvpp_rgb_to_v(const DvppRgbToYuv& k, int r, int g, int b) {
    return dvpp_color_descale(k.r_v * r + k.g_v * g + k.b_v * b + ((128 << DVPP_COLOR_SHIFT) + DVPP_COLOR_HALF));
}

/// BT.601 luma of an RGB pixel (weights 0.299, 0.587, 0.114 at 2^15, summing to 2^15: white stays 255).
RT_DEVICE uint8_t dvpp_rgb_to_grey(int r, int g, int b) {
    return (uint8_t)((9798 * r + 19235 * g + 3735 * b + (1 << 14)) >> 15);
}

/// A packed pixel of SCN channels (1 grey, 3, 4) in RGB order, or BGR order when BGR is 1, as R, G, B, A (grey:
/// R = G = B; no alpha: 255).
template <int SCN, int BGR>
RT_DEVICE void dvpp_color_load(const uint8_t* p, int& r, int& g, int& b, int& a) {
    if (SCN == 1) {
        r = g = b = p[0];
    } else {
        r = p[BGR ? 2 : 0];
        g = p[1];
        b = p[BGR ? 0 : 2];
    }
    a = SCN == 4 ? p[3] : 255;
}

/// Stores R, G, B (and A when DCN is 4) as a packed pixel of DCN channels in RGB or (BGR 1) BGR order; DCN 1 stores
/// the grey of R, G, B (a grey source, R = G = B, stays itself).
template <int DCN, int BGR>
RT_DEVICE void dvpp_color_store(uint8_t* p, int r, int g, int b, int a) {
    if (DCN == 1) {
        p[0] = dvpp_rgb_to_grey(r, g, b);
    } else {
        p[BGR ? 2 : 0] = (uint8_t)r;
        p[1] = (uint8_t)g;
        p[BGR ? 0 : 2] = (uint8_t)b;
        if (DCN == 4) p[3] = (uint8_t)a;
    }
}

/* Chroma layouts of a 4:2:0 picture, as the kernels' template parameter CF. */
#define DVPP_CHROMA_NV12 0 /* one interleaved plane, U then V */
#define DVPP_CHROMA_NV21 1 /* one interleaved plane, V then U */
#define DVPP_CHROMA_I420 2 /* a U plane and a V plane */

/// U and V of chroma sample i of a row: c0 is the row of the interleaved plane (NV12, NV21) or of the U plane, c1 the
/// row of the V plane (I420; unused otherwise). (One pointer for the interleaved plane: the cpu target then loads
/// the pairs as one stream.)
template <int CF>
RT_DEVICE void dvpp_load_chroma(const uint8_t* c0, const uint8_t* c1, size_t i, int& u, int& v) {
    if (CF == DVPP_CHROMA_NV12) {
        u = c0[2 * i];
        v = c0[2 * i + 1];
    } else if (CF == DVPP_CHROMA_NV21) {
        v = c0[2 * i];
        u = c0[2 * i + 1];
    } else {
        u = c0[i];
        v = c1[i];
    }
}
/// Stores U and V as chroma sample i of a row (the layout of dvpp_load_chroma).
template <int CF>
RT_DEVICE void dvpp_store_chroma(uint8_t* c0, uint8_t* c1, size_t i, uint8_t u, uint8_t v) {
    if (CF == DVPP_CHROMA_NV12) {
        c0[2 * i] = u;
        c0[2 * i + 1] = v;
    } else if (CF == DVPP_CHROMA_NV21) {
        c0[2 * i] = v;
        c0[2 * i + 1] = u;
    } else {
        c0[i] = u;
        c1[i] = v;
    }
}

#endif /* DVPP_COLOR_MATH_H */
