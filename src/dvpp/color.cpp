// rtDvppConvertColor: the checks and the choice of kernel (src/dvpp/kernels/color.cpp), and the host side that the
// colour, normalisation and fused operations share (color.hpp).
#include "dvpp/color.hpp"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>

#include "capi/capi_common.hpp"
#include "core/error.hpp"
#include "core/runtime.hpp"
#include "dvpp/kernel_library.hpp"
#include "dvpp/kernels/common.h"
#include "dvpp/kernels/normalize_math.h"
#include "observe/trace_dvpp.hpp"
#include "runtime/dvpp.h"

namespace rt::dvpp {

const char* format_key(rtPixelFormat format) noexcept {
    switch (format) {
        case RT_PIXEL_FORMAT_GRAY8: return "grey";
        case RT_PIXEL_FORMAT_RGB888: return "rgb";
        case RT_PIXEL_FORMAT_BGR888: return "bgr";
        case RT_PIXEL_FORMAT_RGBA8888: return "rgba";
        case RT_PIXEL_FORMAT_BGRA8888: return "bgra";
        case RT_PIXEL_FORMAT_YUV420SP_NV12: return "nv12";
        case RT_PIXEL_FORMAT_YUV420SP_NV21: return "nv21";
        case RT_PIXEL_FORMAT_YUV420P: return "i420";
    }
    return "?";
}

const char* matrix_key(rtColorMatrix matrix) noexcept {
    switch (matrix) {
        case RT_COLOR_BT601_FULL: return "601f";
        case RT_COLOR_BT601_LIMITED: return "601l";
        case RT_COLOR_BT709_FULL: return "709f";
        case RT_COLOR_BT709_LIMITED: return "709l";
    }
    return "?";
}

const char* dtype_key(rtDataType dtype) noexcept {
    switch (dtype) {
        case RT_FLOAT32: return "f32";
        case RT_FLOAT16: return "f16";
        case RT_BFLOAT16: return "bf16";
        case RT_UINT8: return "u8";
        case RT_INT8: return "i8";
        default: return "?";
    }
}

int dtype_code(rtDataType dtype) noexcept {
    switch (dtype) {
        case RT_FLOAT16: return DVPP_DTYPE_F16;
        case RT_BFLOAT16: return DVPP_DTYPE_BF16;
        case RT_UINT8: return DVPP_DTYPE_U8;
        case RT_INT8: return DVPP_DTYPE_I8;
        default: return DVPP_DTYPE_F32;
    }
}

uint32_t kernel_pitch(const Plane& plane, const char* what) {
    if (plane.pitch > UINT32_MAX)
        fail(RT_ERROR_INVALID_VALUE, "%s->width_stride makes rows of %zu bytes (the pixel operations take rows of "
             "at most 4 GiB - 1)", what, plane.pitch);
    return static_cast<uint32_t>(plane.pitch);
}

void check_disjoint(const void* in, size_t in_bytes, const char* in_name, const void* out, size_t out_bytes,
                    const char* out_name, const char* api) {
    const auto a = reinterpret_cast<uintptr_t>(in), b = reinterpret_cast<uintptr_t>(out);
    if (a < b + out_bytes && b < a + in_bytes)
        fail(RT_ERROR_INVALID_VALUE, "%s: %s (%p, %zu bytes) overlaps %s (%p, %zu bytes) (expected separate memory: "
             "the operation does not work in place)", api, out_name, out, out_bytes, in_name, in, in_bytes);
}

DvppNorm norm_coeffs(const float* mean, const float* std, uint32_t channels, const char* mean_what,
                       const char* std_what) {
    DvppNorm k{};
    for (uint32_t c = 0; c < 4; ++c) {
        const float m = mean && c < channels ? mean[c] : 0.0f, s = std && c < channels ? std[c] : 1.0f;
        if (!std::isfinite(m))
            fail(RT_ERROR_INVALID_VALUE, "%s[%u] is %g (expected a finite mean)", mean_what, c, static_cast<double>(m));
        if (!std::isfinite(s) || s == 0.0f)
            fail(RT_ERROR_INVALID_VALUE, "%s[%u] is %g (expected a finite, non-zero deviation)", std_what, c,
                 static_cast<double>(s));
        k.scale[c] = 1.0f / s;
        k.bias[c] = -(m / s);
        // Every output is fma(pixel, scale, bias) with pixel in 0..255: finite when these are.
        if (!std::isfinite(k.scale[c]) || !std::isfinite(k.bias[c]) ||
            255.0 * std::fabs(static_cast<double>(k.scale[c])) + std::fabs(static_cast<double>(k.bias[c])) > FLT_MAX)
            fail(RT_ERROR_INVALID_VALUE, "%s[%u] %g with %s[%u] %g overflows float ((255 - mean) / std is beyond "
                 "FLT_MAX)", std_what, c, static_cast<double>(s), mean_what, c, static_cast<double>(m));
    }
    return k;
}

namespace {

constexpr const char* kApi = "rtDvppConvertColor";

/// A 4:2:0 picture's chroma as the kernels take it: c0, c1 (picture.hpp's Chroma) and a 32-bit pitch.
struct KernelChroma {
    uint8_t* c0;
    uint8_t* c1;
    uint32_t pitch;
};
KernelChroma kernel_chroma(const rtPicture& p, const Layout& l, const char* what) {
    const Chroma c = dvpp::chroma_of(p.data, l);
    return {c.c0, c.c1, kernel_pitch(l.planes[1], what)};
}

void convert(const rtPicture& src, const Layout& s, const rtPicture& dst, const Layout& d, rtColorMatrix matrix,
             rtStream_t stream) {
    uint8_t* sy = plane_data(src, s, 0);
    uint8_t* dy = plane_data(dst, d, 0);
    uint32_t sp = kernel_pitch(s.planes[0], "rtDvppConvertColor: src");
    uint32_t dp = kernel_pitch(d.planes[0], "rtDvppConvertColor: dst");
    const bool yuv_in = is_yuv420(s.format), yuv_out = is_yuv420(d.format);
    const uint32_t w = s.width, h = s.height;
    trace::DvppWork traced;
    traced.name = "convert color";
    traced.bytes = d.bytes;
    traced.src[0] = traced.dst[0] = w;
    traced.src[1] = traced.dst[1] = h;
    traced.format = format_name(d.format);
    trace::DvppScope scope(traced);
    std::string name;
    if (yuv_in && yuv_out) {
        KernelChroma sc = kernel_chroma(src, s, "rtDvppConvertColor: src");
        KernelChroma dc = kernel_chroma(dst, d, "rtDvppConvertColor: dst");
        name = std::string("yuv_to_yuv_") + format_key(s.format) + "_" + format_key(d.format);
        void* args[] = {&sy, &sp, &sc.c0, &sc.c1, &sc.pitch, &dy, &dp, &dc.c0, &dc.c1, &dc.pitch};
        launch_2d(stream, kernel(stream, Family::color, name.c_str()), w / 2, h, args, 10);
    } else if (yuv_in && d.format == RT_PIXEL_FORMAT_GRAY8) {
        // Grey is the Y plane itself: a plane copy.
        void* args[] = {&sy, &sp, &dy, &dp};
        launch_2d(stream, kernel(stream, Family::color, "packed_to_packed_grey_grey"), w, h, args, 4);
    } else if (yuv_in) {
        KernelChroma sc = kernel_chroma(src, s, "rtDvppConvertColor: src");
        name = std::string("yuv_to_packed_") + format_key(s.format) + "_" + format_key(d.format) + "_" +
               matrix_key(matrix);
        int alpha = 255;
        void* args[] = {&sy, &sp, &sc.c0, &sc.c1, &sc.pitch, &dy, &dp, &alpha};
        launch_2d(stream, kernel(stream, Family::color, name.c_str()), w / 2, h, args, 8);
    } else if (yuv_out) {
        KernelChroma dc = kernel_chroma(dst, d, "rtDvppConvertColor: dst");
        name = std::string("packed_to_yuv_") + format_key(s.format) + "_" + format_key(d.format);
        int m = matrix;
        void* args[] = {&sy, &sp, &dy, &dp, &dc.c0, &dc.c1, &dc.pitch, &m};
        launch_2d(stream, kernel(stream, Family::color, name.c_str()), w / 2, h, args, 8);
    } else {
        name = std::string("packed_to_packed_") + format_key(s.format) + "_" + format_key(d.format);
        void* args[] = {&sy, &sp, &dy, &dp};
        launch_2d(stream, kernel(stream, Family::color, name.c_str()), w, h, args, 4);
    }
}

}  // namespace
}  // namespace rt::dvpp

using namespace rt;

extern "C" {

RT_API rtError_t rtDvppConvertColor(const rtPicture* src, rtPicture* dst, rtColorMatrix matrix, rtStream_t stream) {
    return capi_call(dvpp::kApi, [&] {
        const CoreDevice& device = runtime().stream(stream)->device();
        const dvpp::Layout s = dvpp::check_picture(device, src, "rtDvppConvertColor: src");
        const dvpp::Layout d = dvpp::check_picture(device, dst, "rtDvppConvertColor: dst");
        const rtColorMatrix m = dvpp::check_matrix(dvpp::read_int(&matrix), "rtDvppConvertColor: matrix");
        if (d.width != s.width || d.height != s.height)
            fail(RT_ERROR_INVALID_VALUE, "rtDvppConvertColor: dst is %ux%u, src %ux%u (expected the same size: the "
                 "conversion keeps it; rtDvppResize changes it)", d.width, d.height, s.width, s.height);
        dvpp::check_disjoint(src->data, s.bytes, "src", dst->data, d.bytes, "dst", dvpp::kApi);
        dvpp::convert(*src, s, *dst, d, m, stream);
    });
}

}  // extern "C"
