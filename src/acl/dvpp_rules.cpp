// dvpp_rules.cpp — DVPP's own rules, checked before any work is queued: acldvppMalloc memory, VPC's picture formats,
// strides, sizes and areas, resize algorithms, channels. The numbers are those of AscendCL's public reference for the
// acldvpp V1 targets (Atlas 200/300/500 inference, Atlas training), so that a program accepted here is accepted on an
// NPU. Each refusal names the descriptor, the field, its value and the rule.
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <map>
#include <mutex>

#include "dvpp_internal.hpp"

namespace acl::dvpp {

namespace {

std::mutex g_memory_mutex;
std::map<uintptr_t, size_t> g_memory;  // base -> bytes of each live acldvppMalloc allocation

}  // namespace

void remember(void* base, size_t size) {
    const auto b = reinterpret_cast<uintptr_t>(base);
    std::lock_guard lock(g_memory_mutex);
    auto it = g_memory.upper_bound(b);
    if (it != g_memory.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second > b) it = prev;
    }
    while (it != g_memory.end() && it->first < b + size) it = g_memory.erase(it);
    g_memory.emplace(b, size);
}

void forget_all() noexcept {
    std::lock_guard lock(g_memory_mutex);
    g_memory.clear();
}

bool forget(void* base) {
    std::lock_guard lock(g_memory_mutex);
    return g_memory.erase(reinterpret_cast<uintptr_t>(base)) == 1;
}

aclError require_dvpp_memory(const char* api, const char* what, const void* p, size_t bytes) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    size_t available = 0;
    bool found = false;
    {
        std::lock_guard lock(g_memory_mutex);
        auto it = g_memory.upper_bound(a);
        if (it != g_memory.begin()) {
            --it;
            if (a < it->first + it->second) {
                found = true;
                available = it->first + it->second - a;
            }
        }
    }
    if (!found)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s %p is not memory from acldvppMalloc (DVPP reads and writes only "
                    "its own memory: allocate pictures and JPEG data with acldvppMalloc)", what, p);
    if (available < bytes)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s %p has %zu bytes to the end of its acldvppMalloc allocation, but "
                    "%zu are needed", what, p, available, bytes);
    return ACL_SUCCESS;
}

const char* format_name(int format) {
    static const char* const names[] = {
        "PIXEL_FORMAT_YUV_400",          "PIXEL_FORMAT_YUV_SEMIPLANAR_420", "PIXEL_FORMAT_YVU_SEMIPLANAR_420",
        "PIXEL_FORMAT_YUV_SEMIPLANAR_422", "PIXEL_FORMAT_YVU_SEMIPLANAR_422", "PIXEL_FORMAT_YUV_SEMIPLANAR_444",
        "PIXEL_FORMAT_YVU_SEMIPLANAR_444", "PIXEL_FORMAT_YUYV_PACKED_422",   "PIXEL_FORMAT_UYVY_PACKED_422",
        "PIXEL_FORMAT_YVYU_PACKED_422",    "PIXEL_FORMAT_VYUY_PACKED_422",   "PIXEL_FORMAT_YUV_PACKED_444",
        "PIXEL_FORMAT_RGB_888",            "PIXEL_FORMAT_BGR_888",           "PIXEL_FORMAT_ARGB_8888",
        "PIXEL_FORMAT_ABGR_8888",          "PIXEL_FORMAT_RGBA_8888",         "PIXEL_FORMAT_BGRA_8888",
        "PIXEL_FORMAT_YUV_SEMI_PLANNER_420_10BIT", "PIXEL_FORMAT_YVU_SEMI_PLANNER_420_10BIT",
        "PIXEL_FORMAT_YVU_PLANAR_420",     "PIXEL_FORMAT_YVU_PLANAR_422",    "PIXEL_FORMAT_YVU_PLANAR_444",
        "PIXEL_FORMAT_RGB_444",            "PIXEL_FORMAT_BGR_444",           "PIXEL_FORMAT_ARGB_4444",
        "PIXEL_FORMAT_ABGR_4444",          "PIXEL_FORMAT_RGBA_4444",         "PIXEL_FORMAT_BGRA_4444",
        "PIXEL_FORMAT_RGB_555",            "PIXEL_FORMAT_BGR_555",           "PIXEL_FORMAT_RGB_565",
        "PIXEL_FORMAT_BGR_565"};
    if (format >= 0 && format < static_cast<int>(std::size(names))) return names[format];
    if (format == PIXEL_FORMAT_UNKNOWN) return "PIXEL_FORMAT_UNKNOWN";
    return nullptr;
}

aclError yuv420sp_format(const char* api, const char* what, int format, rtPixelFormat* out) {
    if (format == PIXEL_FORMAT_YUV_SEMIPLANAR_420) {
        *out = RT_PIXEL_FORMAT_YUV420SP_NV12;
        return ACL_SUCCESS;
    }
    if (format == PIXEL_FORMAT_YVU_SEMIPLANAR_420) {
        *out = RT_PIXEL_FORMAT_YUV420SP_NV21;
        return ACL_SUCCESS;
    }
    if (const char* name = format_name(format))
        return fail(ACL_ERROR_FEATURE_UNSUPPORTED, api, "%s format %s (%d) is not supported here (this library's "
                    "DVPP takes PIXEL_FORMAT_YUV_SEMIPLANAR_420 (1) and PIXEL_FORMAT_YVU_SEMIPLANAR_420 (2))", what,
                    name, format);
    return fail(ACL_ERROR_INVALID_PARAM, api, "%s format %d is not an acldvppPixelFormat", what, format);
}

aclError vpc_picture(const char* api, const char* what, const acldvppPicDesc* d, bool input, rtPicture* out) {
    if (!d) return fail(ACL_ERROR_INVALID_PARAM, api, "%s is NULL (expected a picture descriptor)", what);
    rtPixelFormat format = RT_PIXEL_FORMAT_YUV420SP_NV12;
    DVPP_TRY(yuv420sp_format(api, what, d->format, &format));
    if (!d->data)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s data is NULL (set it with acldvppSetPicDescData)", what);
    // An input of more than 4096 pixels on a side is VPC's 8K mode (NV12 and NV21 only, both taken here).
    const uint32_t max_stride = input ? 8192 : 4096;
    if (d->width < 10 || d->width > max_stride || d->height < 6 || d->height > max_stride)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s is %u x %u, outside VPC's range 10 x 6 .. %u x %u for %s "
                    "pictures", what, d->width, d->height, max_stride, max_stride, input ? "input" : "output");
    if (d->width % 2 || d->height % 2)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s width %u and height %u must be even (YUV420SP)", what,
                    d->width, d->height);
    if (d->widthStride % 16 || d->widthStride < d->width || d->widthStride < 32 || d->widthStride > max_stride)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s widthStride %u breaks VPC's rule: a multiple of 16, at least "
                    "the width %u and 32, at most %u (the width rounded up to 16 is %" PRIu64 ")", what,
                    d->widthStride, d->width, max_stride, align_up(d->width, 16) < 32 ? 32 : align_up(d->width, 16));
    if (d->heightStride % 2 || d->heightStride < d->height || d->heightStride > max_stride)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s heightStride %u breaks VPC's rule: even, at least the height %u, "
                    "at most %u", what, d->heightStride, d->height, max_stride);
    const uint64_t need = uint64_t{d->widthStride} * d->heightStride * 3 / 2;
    if (d->size < need)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s size %u is below widthStride * heightStride * 3 / 2 = %u * %u * "
                    "3 / 2 = %" PRIu64 " (YUV420SP)", what, d->size, d->widthStride, d->heightStride, need);
    char data_what[160];
    std::snprintf(data_what, sizeof data_what, "%s data", what);
    DVPP_TRY(require_dvpp_memory(api, data_what, d->data, d->size));
    *out = rtPicture{d->data, d->size, format, d->width, d->height, d->widthStride, d->heightStride};
    return ACL_SUCCESS;
}

aclError vpc_area(const char* api, const char* what, const acldvppRoiConfig* roi, const rtPicture& pic,
                  const char* pic_what, bool paste, rtRect* out) {
    if (!roi) return fail(ACL_ERROR_INVALID_PARAM, api, "%s is NULL (expected an acldvppRoiConfig)", what);
    if (roi->left % 2 || roi->top % 2 || roi->right % 2 == 0 || roi->bottom % 2 == 0)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s (left %u, right %u, top %u, bottom %u) breaks VPC's rule: left "
                    "and top even, right and bottom odd", what, roi->left, roi->right, roi->top, roi->bottom);
    if (paste && roi->left % 16)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s left %u is not a multiple of 16 (VPC's rule for paste areas)",
                    what, roi->left);
    if (roi->right < roi->left || roi->bottom < roi->top)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s (left %u, right %u, top %u, bottom %u) is empty: right must "
                    "exceed left and bottom exceed top", what, roi->left, roi->right, roi->top, roi->bottom);
    const uint32_t w = roi->right - roi->left + 1, h = roi->bottom - roi->top + 1;
    if (w < 10 || h < 6 || w > 4096 || h > 4096)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s is %u x %u, outside VPC's range 10 x 6 .. 4096 x 4096 for %s "
                    "areas", what, w, h, paste ? "paste" : "crop");
    if (roi->right >= pic.width || roi->bottom >= pic.height)
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s (right %u, bottom %u) leaves %s, which is %u x %u", what,
                    roi->right, roi->bottom, pic_what, pic.width, pic.height);
    *out = rtRect{roi->left, roi->top, w, h};
    return ACL_SUCCESS;
}

aclError vpc_scale(const char* api, const char* what, const rtRect& from, const rtRect& to) {
    const auto within = [](uint32_t a, uint32_t b) { return uint64_t{b} * 32 >= a && b <= uint64_t{a} * 16; };
    if (!within(from.width, to.width) || !within(from.height, to.height))
        return fail(ACL_ERROR_INVALID_PARAM, api, "%s scales %u x %u to %u x %u: VPC scales each side by a factor in "
                    "[1/32, 16]", what, from.width, from.height, to.width, to.height);
    return ACL_SUCCESS;
}

aclError interpolation(const char* api, const char* what, const acldvppResizeConfig* config, rtInterpolation* out) {
    if (!config) return fail(ACL_ERROR_INVALID_PARAM, api, "%s is NULL (expected an acldvppResizeConfig)", what);
    switch (config->interpolation) {
    case 0:
    case 1: *out = RT_INTERP_BILINEAR; return ACL_SUCCESS;
    case 2: *out = RT_INTERP_NEAREST; return ACL_SUCCESS;
    default:
        return fail(ACL_ERROR_FEATURE_UNSUPPORTED, api, "%s interpolation %u (TensorFlow's %s) is not supported here "
                    "(0 and 1: bilinear as OpenCV's, 2: nearest neighbour as OpenCV's)", what, config->interpolation,
                    config->interpolation == 3 ? "bilinear" : "nearest neighbour");
    }
}

aclError require_channel(const char* api, const acldvppChannelDesc* channel) {
    if (!channel)
        return fail(ACL_ERROR_INVALID_PARAM, api, "channelDesc is NULL (expected a channel from acldvppCreateChannel)");
    if (channel->id == 0)
        return fail(ACL_ERROR_INVALID_PARAM, api, "channelDesc has no open channel (call acldvppCreateChannel first)");
    return ACL_SUCCESS;
}

}  // namespace acl::dvpp
