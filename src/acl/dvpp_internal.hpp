// dvpp_internal.hpp — what the files of libacl_dvpp share: the descriptor objects behind acl/ops/acl_dvpp.h's opaque
// types, the registry of acldvppMalloc memory, and the checks of DVPP's rules (dvpp_rules.cpp) that every operation
// applies before it hands the work to the runtime's DVPP.
#pragma once

#include <cstdint>
#include <vector>

#include "acl/ops/acl_dvpp.h"
#include "acl_common.hpp"
#include "runtime/dvpp.h"

struct acldvppPicDesc {
    void* data = nullptr;
    uint32_t size = 0;
    int format = PIXEL_FORMAT_YUV_400;  // the raw value the caller set (checked when used)
    uint32_t width = 0, height = 0;
    uint32_t widthStride = 0, heightStride = 0;
    uint32_t retCode = 0;
};

struct acldvppBatchPicDesc {
    std::vector<acldvppPicDesc> pics;  // sized once: acldvppGetPicDesc hands out pointers into it
};

struct acldvppRoiConfig {
    uint32_t left = 0, right = 0, top = 0, bottom = 0;
};

struct acldvppResizeConfig {
    uint32_t interpolation = 0;
};

struct acldvppJpegeConfig {
    uint32_t level = 0;
};

struct acldvppChannelDesc {
    uint64_t id = 0;  // 0: no channel open
    int32_t device = -1;
};

namespace acl::dvpp {

/// The most crops one batch call takes, and the most pictures a batch descriptor holds (DVPP's limit).
constexpr uint32_t kMaxBatch = 256;

/// Records `base` .. `base + size` as acldvppMalloc memory (forgetting stale entries it overlaps: memory released by
/// aclFinalize or a device reset without acldvppFree).
void remember(void* base, size_t size);
/// Forgets an allocation that starts at `base`; false when none does.
bool forget(void* base);
/// Forgets every allocation (registered with acl::on_finalize by the first acldvppMalloc: aclFinalize frees them all).
void forget_all() noexcept;
/// Checks that `bytes` bytes from `p` lie inside one acldvppMalloc allocation; else ACL_ERROR_INVALID_PARAM for
/// `api`, naming `what`.
aclError require_dvpp_memory(const char* api, const char* what, const void* p, size_t bytes);

/// A constant name of an acldvppPixelFormat value ("PIXEL_FORMAT_RGB_888"), or nullptr for a value that is not one.
const char* format_name(int format);
/// NV12 and NV21, the formats the operations here take, as the runtime's formats; other known formats:
/// ACL_ERROR_FEATURE_UNSUPPORTED, unknown values: ACL_ERROR_INVALID_PARAM (naming `what`).
aclError yuv420sp_format(const char* api, const char* what, int format, rtPixelFormat* out);

/// A picture of VPC (an input when `input`), checked against DVPP's rules; *out describes it for the runtime.
aclError vpc_picture(const char* api, const char* what, const acldvppPicDesc* desc, bool input, rtPicture* out);
/// A crop (`paste` false) or paste area of `pic` (named `pic_what`), checked against DVPP's rules.
aclError vpc_area(const char* api, const char* what, const acldvppRoiConfig* roi, const rtPicture& pic,
                  const char* pic_what, bool paste, rtRect* out);
/// The scale from `from` to `to` (widths and heights) within DVPP's [1/32, 16].
aclError vpc_scale(const char* api, const char* what, const rtRect& from, const rtRect& to);
/// The runtime's interpolation for a resize configuration (NULL: ACL_ERROR_INVALID_PARAM naming `what`).
aclError interpolation(const char* api, const char* what, const acldvppResizeConfig* config, rtInterpolation* out);
/// An open channel.
aclError require_channel(const char* api, const acldvppChannelDesc* channel);

/// rt* failure of `api`: the runtime's message, and its code mapped as AscendCL's.
inline aclError rt_failed(rtError_t e, const char* api) { return acl::fail_rt(e, api); }

/// x rounded up to a multiple of `to` (a power of two), in 64 bits.
inline uint64_t align_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

}  // namespace acl::dvpp

#define DVPP_TRY(expr)                                                                                                 \
    do {                                                                                                               \
        if (const aclError e_ = (expr); e_ != ACL_SUCCESS) return e_;                                                  \
    } while (0)

/// After ACL_REQUIRE_INIT in calls that use a device (memory, channels, operations): a current context is required.
#define DVPP_REQUIRE_CONTEXT(api) DVPP_TRY(::acl::require_context(api))

#define DVPP_TRY_RT(api, expr)                                                                                         \
    do {                                                                                                               \
        if (const rtError_t e_ = (expr); e_ != RT_SUCCESS) return ::acl::dvpp::rt_failed(e_, api);                     \
    } while (0)
