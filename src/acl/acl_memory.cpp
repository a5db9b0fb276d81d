// acl_memory.cpp — memory: allocation with AscendCL's policies, fills and copies with their destMax / maxCount checks
// and every aclrtMemcpyKind, 2-D copies, memory information. aclrtMemcpyAsync is a hot path: checks without locks or
// allocation, then rtMemcpyAsync.
#include <cstring>

#include "acl/acl.h"
#include "acl_internal.hpp"

namespace {

void free_staging(void* p) { rtFreeHost(p); }

/// ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE, asynchronous: the source may be freed or reused once the call returns, so its
/// bytes are staged in pinned memory during the call; the staging goes once the stream has run the copy (with the
/// capture's graph, when the stream is capturing).
[[gnu::noinline]] aclError copy_through_buffer(void* dst, const void* src, size_t count, rtStream_t stream,
                                              const char* api) {
    if (count == 0) return ACL_SUCCESS;
    void* staging = nullptr;
    if (rtError_t e = rtMallocHost(&staging, count); e != RT_SUCCESS) return acl::fail_rt(e, api);
    std::memcpy(staging, src, count);
    if (rtError_t e = rtMemcpyAsync(dst, staging, count, RT_MEMCPY_HOST_TO_DEVICE, stream); e != RT_SUCCESS) {
        rtFreeHost(staging);
        return acl::fail_rt(e, api);
    }
    if (rtError_t e = rtStreamDeferRelease(stream, free_staging, staging); e != RT_SUCCESS) {
        rtFreeHost(staging);  // a free waits for the work queued before it
        return acl::fail_rt(e, api);
    }
    return ACL_SUCCESS;
}

// aclrtMemcpyKind (by value) -> the runtime's kind. The buffered and inner/inter device kinds are the plain ones here.
constexpr rtMemcpyKind kRtKind[] = {
    RT_MEMCPY_HOST_TO_HOST,     RT_MEMCPY_HOST_TO_DEVICE,   RT_MEMCPY_DEVICE_TO_HOST,  RT_MEMCPY_DEVICE_TO_DEVICE,
    RT_MEMCPY_DEFAULT,          RT_MEMCPY_HOST_TO_DEVICE,   RT_MEMCPY_DEVICE_TO_DEVICE, RT_MEMCPY_DEVICE_TO_DEVICE,
};
constexpr int kKindCount = static_cast<int>(sizeof kRtKind / sizeof kRtKind[0]);

[[gnu::cold]] aclError bad_kind(int kind, const char* api) {
    return acl::fail(ACL_ERROR_INVALID_PARAM, api, "kind %d is not an aclrtMemcpyKind (0 HOST_TO_HOST .. 7 "
                     "INTER_DEVICE_TO_DEVICE)", kind);
}

[[gnu::cold]] aclError too_many(size_t count, size_t max, const char* what, const char* api) {
    return acl::fail(ACL_ERROR_INVALID_PARAM, api, "count %zu bytes is larger than %s %zu bytes", count, what, max);
}

/// The checks every 1-D copy makes before the runtime sees it.
inline aclError check_copy(void* dst, size_t destMax, const void* src, size_t count, int kind, const char* api) {
    if (dst == nullptr || src == nullptr) [[unlikely]]
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "%s is NULL", dst == nullptr ? "dst" : "src");
    if (count > destMax) [[unlikely]]
        return too_many(count, destMax, "destMax", api);
    if (static_cast<unsigned>(kind) >= static_cast<unsigned>(kKindCount)) [[unlikely]]
        return bad_kind(kind, api);
    return ACL_SUCCESS;
}

aclError check_copy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, int kind,
                       const char* api) {
    if (dst == nullptr || src == nullptr)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "%s is NULL", dst == nullptr ? "dst" : "src");
    if (dpitch < width || spitch < width)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "%s %zu is smaller than width %zu", dpitch < width ? "dpitch"
                         : "spitch", dpitch < width ? dpitch : spitch, width);
    if (static_cast<unsigned>(kind) >= static_cast<unsigned>(kKindCount)) return bad_kind(kind, api);
    return ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
    const char* api = "aclrtMalloc";
    ACL_REQUIRE_INIT(api);
    ACL_REQUIRE_NOT_NULL(api, devPtr);
    ACL_REQUIRE_CONTEXT(api);
    if (size == 0) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "size is 0 (at least 1 byte)");
    const int p = acl::enum_value(policy);
    const int base = p & 0xFF;
    const int hints = p & ~0xFF;
    constexpr int kKnownHints = ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH |
                                ACL_MEM_ACCESS_USER_SPACE_READONLY;
    if (base > ACL_MEM_MALLOC_HUGE1G_ONLY_P2P || (hints & ~kKnownHints) != 0)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "policy 0x%x is not an aclrtMemMallocPolicy", p);
    if (hints & ACL_MEM_ACCESS_USER_SPACE_READONLY)
        return acl::fail(ACL_ERROR_FEATURE_UNSUPPORTED, api, "policy 0x%x: read-only device memory "
                         "(ACL_MEM_ACCESS_USER_SPACE_READONLY) is not supported here", p);
    if (rtError_t e = rtMalloc(devPtr, size); e != RT_SUCCESS) return acl::fail_rt(e, api);
    return ACL_SUCCESS;
}

aclError aclrtMallocHost(void** hostPtr, size_t size) {
    ACL_REQUIRE_INIT("aclrtMallocHost");
    ACL_REQUIRE_NOT_NULL("aclrtMallocHost", hostPtr);
    if (size == 0) return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost", "size is 0 (at least 1 byte)");
    if (rtError_t e = rtMallocHost(hostPtr, size); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtMallocHost");
    return ACL_SUCCESS;
}

aclError aclrtFree(void* devPtr) {
    ACL_REQUIRE_INIT("aclrtFree");
    ACL_REQUIRE_NOT_NULL("aclrtFree", devPtr);
    if (rtError_t e = rtFree(devPtr); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtFree");
    return ACL_SUCCESS;
}

aclError aclrtFreeHost(void* hostPtr) {
    ACL_REQUIRE_INIT("aclrtFreeHost");
    ACL_REQUIRE_NOT_NULL("aclrtFreeHost", hostPtr);
    if (rtError_t e = rtFreeHost(hostPtr); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtFreeHost");
    return ACL_SUCCESS;
}

aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
    ACL_REQUIRE_INIT("aclrtMemset");
    ACL_REQUIRE_NOT_NULL("aclrtMemset", devPtr);
    if (count > maxCount) return too_many(count, maxCount, "maxCount", "aclrtMemset");
    ACL_REQUIRE_CONTEXT("aclrtMemset");
    if (rtError_t e = rtMemset(devPtr, value, count); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtMemset");
    return ACL_SUCCESS;
}

aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream) {
    ACL_REQUIRE_INIT("aclrtMemsetAsync");
    ACL_REQUIRE_NOT_NULL("aclrtMemsetAsync", devPtr);
    if (count > maxCount) [[unlikely]]
        return too_many(count, maxCount, "maxCount", "aclrtMemsetAsync");
    if (stream == nullptr) ACL_REQUIRE_CONTEXT("aclrtMemsetAsync");
    if (rtError_t e = rtMemsetAsync(devPtr, value, count, static_cast<rtStream_t>(stream)); e != RT_SUCCESS)
        [[unlikely]] return acl::fail_rt(e, "aclrtMemsetAsync");
    return ACL_SUCCESS;
}

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
    ACL_REQUIRE_INIT("aclrtMemcpy");
    const int k = acl::enum_value(kind);
    if (aclError e = check_copy(dst, destMax, src, count, k, "aclrtMemcpy"); e != ACL_SUCCESS) return e;
    ACL_REQUIRE_CONTEXT("aclrtMemcpy");
    if (rtError_t e = rtMemcpy(dst, src, count, kRtKind[k]); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtMemcpy");
    return ACL_SUCCESS;
}

aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
    ACL_REQUIRE_INIT("aclrtMemcpyAsync");
    const int k = acl::enum_value(kind);
    if (aclError e = check_copy(dst, destMax, src, count, k, "aclrtMemcpyAsync"); e != ACL_SUCCESS) [[unlikely]]
        return e;
    if (stream == nullptr) ACL_REQUIRE_CONTEXT("aclrtMemcpyAsync");
    if (k == ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE) [[unlikely]]
        return copy_through_buffer(dst, src, count, static_cast<rtStream_t>(stream), "aclrtMemcpyAsync");
    if (rtError_t e = rtMemcpyAsync(dst, src, count, kRtKind[k], static_cast<rtStream_t>(stream)); e != RT_SUCCESS)
        [[unlikely]] return acl::fail_rt(e, "aclrtMemcpyAsync");
    return ACL_SUCCESS;
}

aclError aclrtMemcpy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                       aclrtMemcpyKind kind) {
    ACL_REQUIRE_INIT("aclrtMemcpy2d");
    const int k = acl::enum_value(kind);
    if (aclError e = check_copy_2d(dst, dpitch, src, spitch, width, k, "aclrtMemcpy2d"); e != ACL_SUCCESS) return e;
    ACL_REQUIRE_CONTEXT("aclrtMemcpy2d");
    if (rtError_t e = rtMemcpy2D(dst, dpitch, src, spitch, width, height, kRtKind[k]); e != RT_SUCCESS)
        return acl::fail_rt(e, "aclrtMemcpy2d");
    return ACL_SUCCESS;
}

aclError aclrtMemcpy2dAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                            aclrtMemcpyKind kind, aclrtStream stream) {
    ACL_REQUIRE_INIT("aclrtMemcpy2dAsync");
    const int k = acl::enum_value(kind);
    if (aclError e = check_copy_2d(dst, dpitch, src, spitch, width, k, "aclrtMemcpy2dAsync"); e != ACL_SUCCESS)
        return e;
    if (stream == nullptr) ACL_REQUIRE_CONTEXT("aclrtMemcpy2dAsync");
    if (rtError_t e = rtMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kRtKind[k],
                                      static_cast<rtStream_t>(stream));
        e != RT_SUCCESS)
        return acl::fail_rt(e, "aclrtMemcpy2dAsync");
    return ACL_SUCCESS;
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total) {
    ACL_REQUIRE_INIT("aclrtGetMemInfo");
    ACL_REQUIRE_NOT_NULL("aclrtGetMemInfo", free);
    ACL_REQUIRE_NOT_NULL("aclrtGetMemInfo", total);
    const int a = acl::enum_value(attr);
    if (a < ACL_DDR_MEM || a > ACL_MEM_P2P_HUGE1G)
        return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo", "attr %d is not an aclrtMemAttr", a);
    ACL_REQUIRE_CONTEXT("aclrtGetMemInfo");
    if (rtError_t e = rtMemGetInfo(free, total); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtGetMemInfo");
    return ACL_SUCCESS;
}

}  // extern "C"
