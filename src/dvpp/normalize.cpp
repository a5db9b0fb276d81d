// rtDvppNormalize: the checks and the choice of kernel (src/dvpp/kernels/normalize.cpp).
#include <string>

#include "capi/capi_common.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/runtime.hpp"
#include "dvpp/color.hpp"
#include "dvpp/kernel_library.hpp"
#include "dvpp/kernels/common.h"
#include "dvpp/kernels/normalize_math.h"
#include "observe/trace_dvpp.hpp"
#include "runtime/dvpp.h"

using namespace rt;

extern "C" {

RT_API rtError_t rtDvppNormalize(const rtPicture* src, void* dst, rtDataType dtype, int chw, const float* mean,
                                 const float* std, rtStream_t stream) {
    return capi_call("rtDvppNormalize", [&] {
        const CoreDevice& device = runtime().stream(stream)->device();
        const dvpp::Layout s = dvpp::check_picture(device, src, "rtDvppNormalize: src");
        if (dvpp::is_yuv420(s.format))
            fail(RT_ERROR_INVALID_VALUE, "rtDvppNormalize: src->format is %s (expected a packed format: GRAY8, "
                 "RGB888, BGR888, RGBA8888 or BGRA8888; rtDvppConvertColor converts 4:2:0 pictures)",
                 dvpp::format_name(s.format));
        const rtDataType t = dvpp::check_dtype(dvpp::read_int(&dtype), "rtDvppNormalize: dtype");
        const uint32_t channels = dvpp::packed_channels(s.format);
        const DvppNorm k =
            dvpp::norm_coeffs(mean, std, channels, "rtDvppNormalize: mean", "rtDvppNormalize: std");
        if (!dst) fail(RT_ERROR_INVALID_VALUE, "rtDvppNormalize: dst is NULL (expected the output's memory)");
        size_t bytes = 0;
        if (__builtin_mul_overflow(size_t(channels) * s.width * s.height, rtDataTypeSize(t), &bytes))
            fail(RT_ERROR_INVALID_VALUE, "rtDvppNormalize: the output's size in bytes overflows size_t");
        check_fill(device, dst, bytes, "rtDvppNormalize", nullptr, "dst");
        dvpp::check_disjoint(src->data, s.bytes, "src", dst, bytes, "dst", "rtDvppNormalize");

        const std::string name = "normalize_c" + std::to_string(channels) + (chw ? "_chw_" : "_hwc_") +
                                 dvpp::dtype_key(t);
        const uint8_t* in = dvpp::plane_data(*src, s, 0);
        uint32_t pitch = dvpp::kernel_pitch(s.planes[0], "rtDvppNormalize: src");
        uint32_t w = s.width, h = s.height;
        void* args[] = {&in, &pitch, &dst, &w, &h, const_cast<DvppNorm*>(&k)};
        trace::DvppWork traced;
        traced.name = "normalize";
        traced.bytes = bytes;
        traced.src[0] = traced.dst[0] = w;
        traced.src[1] = traced.dst[1] = h;
        trace::DvppScope scope(traced);
        dvpp::launch_2d(stream, dvpp::kernel(stream, dvpp::Family::normalize, name.c_str()), w, h, args, 6);
    });
}

}  // extern "C"
