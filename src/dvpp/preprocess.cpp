// rtDvppPreprocess: the checks of the fused pre-processing, its arguments (kernels/preprocess_args.h) and one launch
// per picture of the kernels in src/dvpp/kernels/preprocess.cpp.
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "capi/capi_common.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/runtime.hpp"
#include "dvpp/color.hpp"
#include "dvpp/kernel_library.hpp"
#include "dvpp/resize_plan.hpp"  // kernels/common.h and resize_math.h
#include "dvpp/kernels/normalize_math.h"
#include "dvpp/kernels/preprocess_args.h"
#include "observe/trace_dvpp.hpp"
#include "runtime/dvpp.h"

namespace rt::dvpp {
namespace {

constexpr const char* kApi = "rtDvppPreprocess";

/// The caller's parameters: the fields its `size` covers, the defaults for the rest (the struct can grow).
rtDvppPreprocessParams read_params(const rtDvppPreprocessParams* params) {
    if (!params) fail(RT_ERROR_INVALID_VALUE, "rtDvppPreprocess: params is NULL (expected RT_DVPP_PREPROCESS_INIT "
                      "with width and height set)");
    size_t size;
    std::memcpy(&size, params, sizeof size);
    constexpr size_t least = offsetof(rtDvppPreprocessParams, height) + sizeof(uint32_t);
    if (size < least || size > sizeof(rtDvppPreprocessParams))
        fail(RT_ERROR_INVALID_VALUE, "rtDvppPreprocess: params->size %zu is not the size of an rtDvppPreprocessParams "
             "(expected %zu..%zu; RT_DVPP_PREPROCESS_INIT sets it)", size, least, sizeof(rtDvppPreprocessParams));
    rtDvppPreprocessParams p = rtDvppPreprocessParamsDefault();
    std::memcpy(&p, params, size);
    p.size = sizeof p;
    return p;
}

int out_code(int format) {
    switch (format) {
        case RT_PIXEL_FORMAT_RGB888: return DVPP_OUT_RGB;
        case RT_PIXEL_FORMAT_BGR888: return DVPP_OUT_BGR;
        case RT_PIXEL_FORMAT_GRAY8: return DVPP_OUT_GREY;
    }
    fail(RT_ERROR_INVALID_VALUE, "rtDvppPreprocess: params->format %d is not an output format of the pre-processing "
         "(expected RT_PIXEL_FORMAT_RGB888 (12), BGR888 (13) or GRAY8 (0))", format);
}

const char* mode_key(int32_t mode) {
    switch (mode) {
        case DVPP_MODE_NEAREST: return "nearest";
        case DVPP_MODE_BILINEAR: return "bilinear";
        case DVPP_MODE_AREA: return "area";
        default: return "area_linear";
    }
}

/// One picture's launch, checked: its kernel and argument; for the per-pixel kernel (preprocess_px), the entries
/// of its taps table (0: the tiled kernel, which needs none).
struct Launch {
    std::string kernel;
    DvppPreprocessArgs args;
    uint32_t taps = 0;
    uint32_t crop_width = 0, crop_height = 0;  // for the trace
};

}  // namespace
}  // namespace rt::dvpp

using namespace rt;

extern "C" {

RT_API rtError_t rtDvppPreprocess(const rtPicture* srcs, uint32_t n, const rtRect* crops,
                                  const rtDvppPreprocessParams* params, void* dst, rtStream_t stream) {
    return capi_call(dvpp::kApi, [&] {
        const CoreDevice& device = runtime().stream(stream)->device();
        const rtDvppPreprocessParams p = dvpp::read_params(params);
        if (p.width == 0 || p.height == 0)
            fail(RT_ERROR_INVALID_VALUE, "rtDvppPreprocess: params->%s is 0 (expected the output's size, at least 1)",
                 p.width == 0 ? "width" : "height");
        const int out = dvpp::out_code(dvpp::read_int(&p.format));
        const rtInterpolation interp =
            dvpp::check_interpolation(dvpp::read_int(&p.interpolation), "rtDvppPreprocess: params->interpolation");
        const rtColorMatrix matrix = dvpp::check_matrix(dvpp::read_int(&p.matrix), "rtDvppPreprocess: params->matrix");
        const rtDataType dtype = dvpp::check_dtype(dvpp::read_int(&p.dtype), "rtDvppPreprocess: params->dtype");
        const uint32_t channels = out == DVPP_OUT_GREY ? 1 : 3;
        const DvppNorm norm = dvpp::norm_coeffs(p.mean, p.std, channels, "rtDvppPreprocess: params->mean",
                                                "rtDvppPreprocess: params->std");
        // The paste rectangle, checked against the output as a picture of its format.
        const dvpp::Layout out_layout = dvpp::layout_of(dvpp::read_int(&p.format), p.width, p.height, 0, 0,
                                                        "rtDvppPreprocess: params");
        const rtRect paste =
            dvpp::check_rect(p.paste.width ? &p.paste : nullptr, out_layout, "rtDvppPreprocess: params->paste");
        dvpp::check_resize_extent(paste.width, paste.height, "rtDvppPreprocess: params->paste");

        size_t image_bytes = 0, total = 0;
        if (__builtin_mul_overflow(size_t(channels) * p.width * p.height, rtDataTypeSize(dtype), &image_bytes) ||
            __builtin_mul_overflow(image_bytes, size_t(n), &total))
            fail(RT_ERROR_INVALID_VALUE, "rtDvppPreprocess: the output of n %u images of params->width %u x "
                 "params->height %u overflows size_t", n, p.width, p.height);
        if (n == 0) return;
        if (!srcs) fail(RT_ERROR_INVALID_VALUE, "rtDvppPreprocess: srcs is NULL (expected %u pictures)", n);
        if (!dst) fail(RT_ERROR_INVALID_VALUE, "rtDvppPreprocess: dst is NULL (expected the output's memory)");
        check_fill(device, dst, total, dvpp::kApi, nullptr, "dst");

        // The output pixels of one work-item: one on a GPU (threads are many and cheap); on the cpu, tiles whose
        // horizontal taps serve 8 rows and whose rows are vectorised runs of up to DVPP_PREPROCESS_TILE pixels.
        const bool cpu_like = device.info().host_addressable;
        const uint32_t tile_w = cpu_like ? DVPP_PREPROCESS_TILE : 1, tile_h = cpu_like ? 8 : 1;

        // Every picture is checked before anything is queued.
        std::vector<dvpp::Launch> launches(n);
        for (uint32_t i = 0; i < n; ++i) {
            const std::string name = "srcs[" + std::to_string(i) + "]", what = "rtDvppPreprocess: " + name;
            const dvpp::Layout s = dvpp::check_picture(device, &srcs[i], what.c_str());
            const std::string crop_what = "rtDvppPreprocess: crops[" + std::to_string(i) + "]";
            const rtRect crop = dvpp::check_rect(crops ? &crops[i] : nullptr, s, crop_what.c_str());
            dvpp::check_resize_extent(crop.width, crop.height, crop_what.c_str());
            launches[i].crop_width = crop.width;
            launches[i].crop_height = crop.height;
            dvpp::check_disjoint(srcs[i].data, s.bytes, name.c_str(), dst, total,
                                 "dst", dvpp::kApi);
            const bool yuv = dvpp::is_yuv420(s.format);
            if (yuv) {
                const struct { const char* field; uint32_t value; } v[] = {
                    {"x", paste.x}, {"y", paste.y}, {"width", paste.width}, {"height", paste.height}};
                for (const auto& e : v)
                    if (e.value % 2)
                        fail(RT_ERROR_INVALID_VALUE, "rtDvppPreprocess: params->paste.%s %u is odd, and %s is %s "
                             "(expected even x, y, width and height: a 4:2:0 picture is resized plane by plane, its "
                             "chroma into half the rectangle)", e.field, e.value, name.c_str(),
                             dvpp::format_name(s.format));
            }

            DvppPreprocessArgs& a = launches[i].args;
            a = DvppPreprocessArgs{};
            const dvpp::Plane& p0 = s.planes[0];
            a.plane0 = dvpp::plane_data(srcs[i], s, 0) + size_t(crop.y) * p0.pitch + size_t(crop.x) * p0.channels;
            a.pitch0 = dvpp::kernel_pitch(p0, what.c_str());
            if (yuv) {
                const dvpp::Plane& p1 = s.planes[1];
                const size_t cx = crop.x / 2, cy = crop.y / 2;
                a.plane1 = dvpp::plane_data(srcs[i], s, 1) + cy * p1.pitch + cx * p1.channels;
                a.plane2 = s.num_planes == 3 ? dvpp::plane_data(srcs[i], s, 2) + cy * p1.pitch + cx : a.plane1;
                a.pitch1 = dvpp::kernel_pitch(p1, what.c_str());
                a.chroma = dvpp::make_resample(interp, crop.width / 2, crop.height / 2, paste.width / 2,
                                               paste.height / 2);
            }
            a.dst = static_cast<uint8_t*>(dst) + image_bytes * i;
            a.width = p.width;
            a.height = p.height;
            a.tile_w = tile_w;
            a.tile_h = tile_h;
            a.tiles_x = (p.width + tile_w - 1) / tile_w;
            a.tiles_y = (p.height + tile_h - 1) / tile_h;
            a.paste_x = paste.x;
            a.paste_y = paste.y;
            a.paste_w = paste.width;
            a.paste_h = paste.height;
            a.swapped = s.format == RT_PIXEL_FORMAT_BGR888 || s.format == RT_PIXEL_FORMAT_BGRA8888 ||
                        s.format == RT_PIXEL_FORMAT_YUV420SP_NV21;
            a.out = out;
            a.matrix = matrix;
            a.dtype = dvpp::dtype_code(dtype);
            a.chw = p.chw != 0;
            for (int c = 0; c < 3; ++c) a.fill[c] = p.fill[c];
            a.norm = norm;
            a.luma = dvpp::make_resample(interp, crop.width, crop.height, paste.width, paste.height);
            const char* kind = s.format == RT_PIXEL_FORMAT_YUV420P ? "planar"
                               : yuv                               ? "semi"
                               : p0.channels == 1                  ? "grey"
                               : p0.channels == 3                  ? "c3"
                                                                   : "c4";
            launches[i].kernel = std::string("preprocess_") + kind + "_" + dvpp::mode_key(a.luma.mode);
            // The common cases take the per-pixel kernel (kernels/preprocess.cpp says why), with the same values.
            if (cpu_like && a.luma.mode == DVPP_MODE_BILINEAR && !yuv && p0.channels == 3 &&
                a.dtype == DVPP_DTYPE_F32 && a.chw && out != DVPP_OUT_GREY) {
                launches[i].kernel =
                    dvpp_wide_<3>(crop.width) ? "preprocess_px_c3_word_f32" : "preprocess_px_c3_byte_f32";
                launches[i].taps = paste.width + paste.height;
            }
        }
        // The tiles as rows of 64 work-items (the last row partly idle): launch_2d makes each such row a work-group
        // on the cpu, so the executors share the tiles (a grid as narrow as the tiles would be one group).
        const uint64_t tiles = uint64_t((p.width + tile_w - 1) / tile_w) * ((p.height + tile_h - 1) / tile_h);
        const uint32_t row = 64, rows = static_cast<uint32_t>((tiles + row - 1) / row);
        size_t taps = 0;
        for (const dvpp::Launch& l : launches) taps += l.taps;
        void* table = nullptr;
        if (taps) dvpp::check(rtMallocAsync(&table, taps * sizeof(uint32_t), stream), "rtMallocAsync");
        trace::DvppWork traced;
        traced.name = "preprocess";
        traced.bytes = image_bytes;
        traced.dst[0] = p.width;
        traced.dst[1] = p.height;
        trace::DvppScope scope(traced);
        try {
            uint32_t* next = static_cast<uint32_t*>(table);
            for (dvpp::Launch& l : launches) {
                const uint32_t i = static_cast<uint32_t>(&l - launches.data());
                traced.src[0] = l.crop_width;
                traced.src[1] = l.crop_height;
                traced.image = n > 1 ? i : 0;
                rtFunction_t f = dvpp::kernel(stream, dvpp::Family::preprocess, l.kernel.c_str());
                if (!l.taps) {
                    void* args[] = {&l.args};
                    dvpp::launch_2d(stream, f, row, rows, args, 1);
                    continue;
                }
                void* targs[] = {&l.args, &next};
                dvpp::launch_2d(stream, dvpp::kernel(stream, dvpp::Family::preprocess, "preprocess_taps"), l.taps, 1,
                                targs, 2);
                void* args[] = {&l.args, &next};
                dvpp::launch_2d(stream, f, p.width, p.height, args, 2);
                next += l.taps;
            }
        } catch (...) {
            if (table) rtFreeAsync(table, stream);  // what was queued before still reads it: stream-ordered
            throw;
        }
        if (table) dvpp::check(rtFreeAsync(table, stream), "rtFreeAsync");
    });
}

}  // extern "C"
