// DVPP picture descriptors: the layout of every pixel format, the checks of pictures, rectangles and enum values that
// every operation runs before queueing anything, and rtDvppPictureSize.
#include "dvpp/picture.hpp"

#include <cstdio>
#include <cstring>
#include <string>

#include "capi/capi_common.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"

namespace rt::dvpp {

namespace {

/// Who is checked, for messages. `what` is "api: picture" ("rtDvppResize: dst", "rtDvppBatchCropResize: dsts[3]"):
/// its fields are then named picture->field; or "api" alone (rtDvppPictureSize, whose fields are parameters): then
/// they are named bare.
struct Subject {
    std::string api, name;
    explicit Subject(const char* what) {
        const char* colon = std::strstr(what, ": ");
        if (colon) {
            api.assign(what, colon);
            name = colon + 2;
        } else {
            api = what;
        }
    }
    /// "picture->field", or "field" alone.
    std::string bare(const char* f) const { return name.empty() ? std::string(f) : name + "->" + f; }
    /// "api: picture->field" or "api: field".
    std::string field(const char* f) const { return api + ": " + bare(f); }
};

/// Bytes per pixel of plane 0 (packed formats: per pixel; 4:2:0: the Y plane's one byte).
uint32_t plane0_bytes(rtPixelFormat format) { return is_yuv420(format) ? 1 : packed_channels(format); }

/// The sizes a byte count is made of, for the refusal of one that overflows: "dst->width_stride 70000 x
/// dst->height_stride 70000" (a stride given as 0 is named as the width or height it stands for).
std::string extent(const Subject& s, uint32_t width, uint32_t width_stride, uint32_t height, uint32_t height_stride) {
    return format("%s %u x %s %u", s.bare(width_stride ? "width_stride" : "width").c_str(),
                  width_stride ? width_stride : width, s.bare(height_stride ? "height_stride" : "height").c_str(),
                  height_stride ? height_stride : height);
}

/// a * b or a + b in size_t, or INVALID_VALUE naming the fields: a picture that large cannot exist.
size_t mul(size_t a, size_t b, const Subject& s, const std::string& e, const char* what_of) {
    size_t r;
    if (__builtin_mul_overflow(a, b, &r))
        fail(RT_ERROR_INVALID_VALUE, "%s: %s: the %s (%zu x %zu bytes) overflows size_t", s.api.c_str(),
             e.c_str(), what_of, a, b);
    return r;
}
size_t add(size_t a, size_t b, const Subject& s, const std::string& e) {
    size_t r;
    if (__builtin_add_overflow(a, b, &r))
        fail(RT_ERROR_INVALID_VALUE, "%s: %s: the picture's size in bytes (its planes together) overflows size_t",
             s.api.c_str(), e.c_str());
    return r;
}

}  // namespace

int read_int(const void* field) {
    int v;
    std::memcpy(&v, field, sizeof v);
    return v;
}

bool is_format(int format) noexcept {
    switch (format) {
        case RT_PIXEL_FORMAT_GRAY8:
        case RT_PIXEL_FORMAT_YUV420SP_NV12:
        case RT_PIXEL_FORMAT_YUV420SP_NV21:
        case RT_PIXEL_FORMAT_RGB888:
        case RT_PIXEL_FORMAT_BGR888:
        case RT_PIXEL_FORMAT_RGBA8888:
        case RT_PIXEL_FORMAT_BGRA8888:
        case RT_PIXEL_FORMAT_YUV420P:
            return true;
    }
    return false;
}

bool is_yuv420(rtPixelFormat format) noexcept {
    return format == RT_PIXEL_FORMAT_YUV420SP_NV12 || format == RT_PIXEL_FORMAT_YUV420SP_NV21 ||
           format == RT_PIXEL_FORMAT_YUV420P;
}

uint32_t packed_channels(rtPixelFormat format) noexcept {
    switch (format) {
        case RT_PIXEL_FORMAT_GRAY8: return 1;
        case RT_PIXEL_FORMAT_RGB888:
        case RT_PIXEL_FORMAT_BGR888: return 3;
        case RT_PIXEL_FORMAT_RGBA8888:
        case RT_PIXEL_FORMAT_BGRA8888: return 4;
        default: return 0;
    }
}

const char* format_name(int format) noexcept {
    switch (format) {
        case RT_PIXEL_FORMAT_GRAY8: return "GRAY8";
        case RT_PIXEL_FORMAT_YUV420SP_NV12: return "YUV420SP_NV12";
        case RT_PIXEL_FORMAT_YUV420SP_NV21: return "YUV420SP_NV21";
        case RT_PIXEL_FORMAT_RGB888: return "RGB888";
        case RT_PIXEL_FORMAT_BGR888: return "BGR888";
        case RT_PIXEL_FORMAT_RGBA8888: return "RGBA8888";
        case RT_PIXEL_FORMAT_BGRA8888: return "BGRA8888";
        case RT_PIXEL_FORMAT_YUV420P: return "YUV420P";
    }
    // Unknown values are rare (a refusal's message): a thread-local buffer keeps the static-storage promise for
    // the known ones without a lock.
    thread_local char buffer[32];
    std::snprintf(buffer, sizeof buffer, "unknown (%d)", format);
    return buffer;
}

Chroma chroma_of(void* data, const Layout& layout) noexcept {
    uint8_t* base = static_cast<uint8_t*>(data);
    Chroma c;
    c.c0 = base + layout.planes[1].offset;
    c.pitch = layout.planes[1].pitch;
    if (layout.format == RT_PIXEL_FORMAT_YUV420P) {
        c.c1 = base + layout.planes[2].offset;
        c.u = c.c0, c.v = c.c1, c.step = 1;
    } else {
        const bool nv12 = layout.format == RT_PIXEL_FORMAT_YUV420SP_NV12;
        c.c1 = c.c0;
        c.u = nv12 ? c.c0 : c.c0 + 1, c.v = nv12 ? c.c0 + 1 : c.c0, c.step = 2;
    }
    return c;
}

Layout layout_of(int format, uint32_t width, uint32_t height, uint32_t width_stride, uint32_t height_stride,
                 const char* what) {
    const Subject s(what);
    if (!is_format(format))
        fail(RT_ERROR_INVALID_VALUE,
             "%s %d is not an rtPixelFormat (expected RT_PIXEL_FORMAT_GRAY8 (0), YUV420SP_NV12 (1), YUV420SP_NV21 "
             "(2), RGB888 (12), BGR888 (13), RGBA8888 (16), BGRA8888 (17) or YUV420P (1000))",
             s.field("format").c_str(), format);
    const auto f = static_cast<rtPixelFormat>(format);
    if (width == 0) fail(RT_ERROR_INVALID_VALUE, "%s is 0 (expected at least 1)", s.field("width").c_str());
    if (height == 0) fail(RT_ERROR_INVALID_VALUE, "%s is 0 (expected at least 1)", s.field("height").c_str());
    const uint32_t ws = width_stride ? width_stride : width, hs = height_stride ? height_stride : height;
    if (ws < width)
        fail(RT_ERROR_INVALID_VALUE, "%s %u is below width %u (expected 0, meaning width, or at least width)",
             s.field("width_stride").c_str(), ws, width);
    if (hs < height)
        fail(RT_ERROR_INVALID_VALUE, "%s %u is below height %u (expected 0, meaning height, or at least height)",
             s.field("height_stride").c_str(), hs, height);
    if (is_yuv420(f)) {
        const struct { const char* name; uint32_t value; } sizes[] = {
            {"width", width}, {"height", height}, {"width_stride", ws}, {"height_stride", hs}};
        for (const auto& v : sizes)
            if (v.value % 2)
                fail(RT_ERROR_INVALID_VALUE,
                     "%s %u is odd (a %s picture's width, height and strides must be even: its chroma has one "
                     "sample per 2x2 pixels)", s.field(v.name).c_str(), v.value, format_name(f));
    }

    const std::string e = extent(s, width, width_stride, height, height_stride);
    Layout l;
    l.format = f;
    l.width = width;
    l.height = height;
    l.width_stride = ws;
    l.height_stride = hs;
    Plane& y = l.planes[0];
    y.offset = 0;
    y.width = width;
    y.height = height;
    y.channels = plane0_bytes(f);
    y.pitch = mul(ws, y.channels, s, e, "row");
    size_t bytes = mul(y.pitch, hs, s, e, "first plane");
    if (f == RT_PIXEL_FORMAT_YUV420SP_NV12 || f == RT_PIXEL_FORMAT_YUV420SP_NV21) {
        l.num_planes = 2;
        Plane& uv = l.planes[1];
        uv.offset = bytes;
        uv.width = width / 2;
        uv.height = height / 2;
        uv.channels = 2;
        uv.pitch = ws;  // ws / 2 pairs of 2 bytes
        bytes = add(bytes, uv.pitch * (hs / 2), s, e);
    } else if (f == RT_PIXEL_FORMAT_YUV420P) {
        l.num_planes = 3;
        const size_t chroma = size_t(ws / 2) * (hs / 2);
        for (int p = 1; p <= 2; ++p) {
            Plane& c = l.planes[p];
            c.offset = bytes;
            c.width = width / 2;
            c.height = height / 2;
            c.channels = 1;
            c.pitch = ws / 2;
            bytes = add(bytes, chroma, s, e);
        }
    } else {
        l.num_planes = 1;
    }
    l.bytes = bytes;
    return l;
}

Layout check_descriptor(const rtPicture* picture, const char* what) {
    const Subject s(what);
    if (!picture) fail(RT_ERROR_INVALID_VALUE, "%s is NULL (expected a pointer to an rtPicture)", what);
    if (!picture->data)
        fail(RT_ERROR_INVALID_VALUE, "%s is NULL (expected the picture's pixel memory)", s.field("data").c_str());
    Layout l = layout_of(read_int(&picture->format), picture->width, picture->height, picture->width_stride,
                         picture->height_stride, what);
    if (picture->size < l.bytes)
        fail(RT_ERROR_INVALID_VALUE,
             "%s %zu is below the %zu bytes a %ux%u %s picture with strides %ux%u occupies (rtDvppPictureSize)",
             s.field("size").c_str(), picture->size, l.bytes, l.width, l.height, format_name(l.format),
             l.width_stride, l.height_stride);
    return l;
}

Layout check_picture(const CoreDevice& queue_device, const rtPicture* picture, const char* what) {
    Layout l = check_descriptor(picture, what);
    const Subject s(what);
    const std::string role = s.bare("data");
    // The rules of rtMemsetAsync: device memory of the stream's backend, or host memory it may use in place, with
    // every byte of the layout inside one live allocation.
    check_fill(queue_device, picture->data, l.bytes, s.api.c_str(), nullptr, role.c_str());
    return l;
}

rtRect check_rect(const rtRect* rect, const Layout& layout, const char* what) {
    if (!rect) return rtRect{0, 0, layout.width, layout.height};
    const Subject s(what);
    const rtRect r = *rect;
    if (r.width == 0) fail(RT_ERROR_INVALID_VALUE, "%s is 0 (expected at least 1)", s.field("width").c_str());
    if (r.height == 0) fail(RT_ERROR_INVALID_VALUE, "%s is 0 (expected at least 1)", s.field("height").c_str());
    if (uint64_t(r.x) + r.width > layout.width)
        fail(RT_ERROR_INVALID_VALUE, "%s %u + %s %u = %llu is beyond the picture's width %u",
             s.field("x").c_str(), r.x, s.bare("width").c_str(), r.width,
             static_cast<unsigned long long>(uint64_t(r.x) + r.width), layout.width);
    if (uint64_t(r.y) + r.height > layout.height)
        fail(RT_ERROR_INVALID_VALUE, "%s %u + %s %u = %llu is beyond the picture's height %u",
             s.field("y").c_str(), r.y, s.bare("height").c_str(), r.height,
             static_cast<unsigned long long>(uint64_t(r.y) + r.height), layout.height);
    if (is_yuv420(layout.format)) {
        const struct { const char* name; uint32_t value; } v[] = {
            {"x", r.x}, {"y", r.y}, {"width", r.width}, {"height", r.height}};
        for (const auto& e : v)
            if (e.value % 2)
                fail(RT_ERROR_INVALID_VALUE,
                     "%s %u is odd (a rectangle of a %s picture needs even x, y, width and height: its chroma has "
                     "one sample per 2x2 pixels)", s.field(e.name).c_str(), e.value, format_name(layout.format));
    }
    return r;
}

rtInterpolation check_interpolation(int value, const char* what) {
    if (value != RT_INTERP_NEAREST && value != RT_INTERP_BILINEAR && value != RT_INTERP_AREA)
        fail(RT_ERROR_INVALID_VALUE,
             "%s %d is not an rtInterpolation (expected RT_INTERP_NEAREST (0), RT_INTERP_BILINEAR (1) or "
             "RT_INTERP_AREA (2))", what, value);
    return static_cast<rtInterpolation>(value);
}

rtColorMatrix check_matrix(int value, const char* what) {
    if (value < RT_COLOR_BT601_FULL || value > RT_COLOR_BT709_LIMITED)
        fail(RT_ERROR_INVALID_VALUE,
             "%s %d is not an rtColorMatrix (expected RT_COLOR_BT601_FULL (0), RT_COLOR_BT601_LIMITED (1), "
             "RT_COLOR_BT709_FULL (2) or RT_COLOR_BT709_LIMITED (3))", what, value);
    return static_cast<rtColorMatrix>(value);
}

rtDataType check_dtype(int value, const char* what) {
    switch (value) {
        case RT_FLOAT32:
        case RT_FLOAT16:
        case RT_BFLOAT16:
        case RT_UINT8:
        case RT_INT8:
            return static_cast<rtDataType>(value);
    }
    const bool other = rtDataTypeSize(static_cast<rtDataType>(value)) != 0;
    fail(RT_ERROR_INVALID_VALUE,
         "%s %d is %s (expected RT_FLOAT32 (7), RT_FLOAT16 (6), RT_BFLOAT16 (9), RT_UINT8 (1) or RT_INT8 (0))", what,
         value, other ? "an rtDataType DVPP does not write" : "not an rtDataType");
}

}  // namespace rt::dvpp

using namespace rt;

extern "C" {

RT_API rtError_t rtDvppPictureSize(rtPixelFormat format, uint32_t width, uint32_t height, uint32_t width_stride,
                                   uint32_t height_stride, size_t* bytes) {
    return capi_call("rtDvppPictureSize", [&] {
        require_out(bytes, "bytes");
        *bytes = dvpp::layout_of(dvpp::read_int(&format), width, height, width_stride, height_stride,
                                 "rtDvppPictureSize").bytes;
    });
}

}  // extern "C"
