// dvpp_desc.cpp — acldvpp's host-side objects: DVPP memory (acldvppMalloc / acldvppFree), channels, picture and batch
// descriptors with their setters and getters, and the ROI, resize and JPEG-encode configurations.
#include <atomic>
#include <new>

#include "dvpp_internal.hpp"

using namespace acl::dvpp;

namespace {

std::atomic<uint64_t> g_next_channel{1};

/// Creates a T for a C caller: nullptr (with a message) when host memory runs out.
template <class T, class... A> T* make(const char* api, A&&... args) noexcept {
    T* p = new (std::nothrow) T{std::forward<A>(args)...};
    if (!p) acl::fail(ACL_ERROR_BAD_ALLOC, api, "out of host memory");
    return p;
}

}  // namespace

extern "C" {

/* ---------------------------------------------------------------- DVPP memory */

aclError acldvppMalloc(void** devPtr, size_t size) {
    constexpr const char* api = "acldvppMalloc";
    ACL_REQUIRE_INIT(api);
    ACL_REQUIRE_NOT_NULL(api, devPtr);
    DVPP_REQUIRE_CONTEXT(api);
    if (size == 0) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "size is 0 (expected the bytes to allocate)");
    static const bool registered = (acl::on_finalize(forget_all), true);
    (void)registered;
    void* p = nullptr;
    DVPP_TRY_RT(api, rtMalloc(&p, size));
    try {
        remember(p, size);
    } catch (...) {
        rtFree(p);
        return acl::fail(ACL_ERROR_BAD_ALLOC, api, "out of host memory");
    }
    *devPtr = p;
    return ACL_SUCCESS;
}

aclError acldvppFree(void* devPtr) {
    constexpr const char* api = "acldvppFree";
    ACL_REQUIRE_INIT(api);
    ACL_REQUIRE_NOT_NULL(api, devPtr);
    if (!forget(devPtr))
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "devPtr %p is not the start of memory from acldvppMalloc "
                         "(memory from aclrtMalloc is freed with aclrtFree)", devPtr);
    DVPP_TRY_RT(api, rtFree(devPtr));
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------- channels */

acldvppChannelDesc* acldvppCreateChannelDesc(void) { return make<acldvppChannelDesc>("acldvppCreateChannelDesc"); }

aclError acldvppDestroyChannelDesc(acldvppChannelDesc* channelDesc) {
    constexpr const char* api = "acldvppDestroyChannelDesc";
    ACL_REQUIRE_NOT_NULL(api, channelDesc);
    if (channelDesc->id != 0)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "channel %llu is still open (call acldvppDestroyChannel first)",
                         static_cast<unsigned long long>(channelDesc->id));
    delete channelDesc;
    return ACL_SUCCESS;
}

uint64_t acldvppGetChannelDescChannelId(const acldvppChannelDesc* channelDesc) {
    return channelDesc ? channelDesc->id : 0;
}

aclError acldvppCreateChannel(acldvppChannelDesc* channelDesc) {
    constexpr const char* api = "acldvppCreateChannel";
    ACL_REQUIRE_INIT(api);
    ACL_REQUIRE_NOT_NULL(api, channelDesc);
    DVPP_REQUIRE_CONTEXT(api);
    if (channelDesc->id != 0)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "channelDesc already holds open channel %llu",
                         static_cast<unsigned long long>(channelDesc->id));
    int device = 0;
    DVPP_TRY_RT(api, rtGetDevice(&device));
    channelDesc->device = device;
    channelDesc->id = g_next_channel.fetch_add(1, std::memory_order_relaxed);
    return ACL_SUCCESS;
}

aclError acldvppDestroyChannel(acldvppChannelDesc* channelDesc) {
    constexpr const char* api = "acldvppDestroyChannel";
    ACL_REQUIRE_INIT(api);
    DVPP_TRY(require_channel(api, channelDesc));
    channelDesc->id = 0;
    channelDesc->device = -1;
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------- picture descriptors */

acldvppPicDesc* acldvppCreatePicDesc(void) { return make<acldvppPicDesc>("acldvppCreatePicDesc"); }

aclError acldvppDestroyPicDesc(acldvppPicDesc* picDesc) {
    ACL_REQUIRE_NOT_NULL("acldvppDestroyPicDesc", picDesc);
    delete picDesc;
    return ACL_SUCCESS;
}

#define DVPP_SETTER(Name, field, type)                                                                                 \
    aclError acldvppSetPicDesc##Name(acldvppPicDesc* picDesc, type value) {                                            \
        ACL_REQUIRE_NOT_NULL("acldvppSetPicDesc" #Name, picDesc);                                                      \
        picDesc->field = value;                                                                                        \
        return ACL_SUCCESS;                                                                                            \
    }
DVPP_SETTER(Data, data, void*)
DVPP_SETTER(Size, size, uint32_t)
DVPP_SETTER(Width, width, uint32_t)
DVPP_SETTER(Height, height, uint32_t)
DVPP_SETTER(WidthStride, widthStride, uint32_t)
DVPP_SETTER(HeightStride, heightStride, uint32_t)
DVPP_SETTER(RetCode, retCode, uint32_t)
#undef DVPP_SETTER

aclError acldvppSetPicDescFormat(acldvppPicDesc* picDesc, acldvppPixelFormat format) {
    constexpr const char* api = "acldvppSetPicDescFormat";
    ACL_REQUIRE_NOT_NULL(api, picDesc);
    const int f = acl::enum_value(format);
    if (!format_name(f)) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "format %d is not an acldvppPixelFormat", f);
    picDesc->format = f;
    return ACL_SUCCESS;
}

void* acldvppGetPicDescData(const acldvppPicDesc* picDesc) { return picDesc ? picDesc->data : nullptr; }
uint32_t acldvppGetPicDescSize(const acldvppPicDesc* picDesc) { return picDesc ? picDesc->size : 0; }
acldvppPixelFormat acldvppGetPicDescFormat(const acldvppPicDesc* picDesc) {
    return picDesc ? static_cast<acldvppPixelFormat>(picDesc->format) : PIXEL_FORMAT_YUV_400;
}
uint32_t acldvppGetPicDescWidth(const acldvppPicDesc* picDesc) { return picDesc ? picDesc->width : 0; }
uint32_t acldvppGetPicDescHeight(const acldvppPicDesc* picDesc) { return picDesc ? picDesc->height : 0; }
uint32_t acldvppGetPicDescWidthStride(const acldvppPicDesc* picDesc) { return picDesc ? picDesc->widthStride : 0; }
uint32_t acldvppGetPicDescHeightStride(const acldvppPicDesc* picDesc) { return picDesc ? picDesc->heightStride : 0; }
uint32_t acldvppGetPicDescRetCode(const acldvppPicDesc* picDesc) { return picDesc ? picDesc->retCode : 0; }

acldvppBatchPicDesc* acldvppCreateBatchPicDesc(uint32_t batchSize) {
    constexpr const char* api = "acldvppCreateBatchPicDesc";
    if (batchSize == 0 || batchSize > kMaxBatch) {
        acl::fail(ACL_ERROR_INVALID_PARAM, api, "batchSize %u is out of range (expected 1 .. %u)", batchSize,
                  kMaxBatch);
        return nullptr;
    }
    auto* b = make<acldvppBatchPicDesc>(api);
    if (!b) return nullptr;
    try {
        b->pics.resize(batchSize);
    } catch (...) {
        delete b;
        acl::fail(ACL_ERROR_BAD_ALLOC, api, "out of host memory");
        return nullptr;
    }
    return b;
}

acldvppPicDesc* acldvppGetPicDesc(acldvppBatchPicDesc* batchPicDesc, uint32_t index) {
    constexpr const char* api = "acldvppGetPicDesc";
    if (!batchPicDesc) {
        acl::fail(ACL_ERROR_INVALID_PARAM, api, "batchPicDesc is NULL");
        return nullptr;
    }
    if (index >= batchPicDesc->pics.size()) {
        acl::fail(ACL_ERROR_INVALID_PARAM, api, "index %u is out of range (the batch holds %zu pictures)", index,
                  batchPicDesc->pics.size());
        return nullptr;
    }
    return &batchPicDesc->pics[index];
}

aclError acldvppDestroyBatchPicDesc(acldvppBatchPicDesc* batchPicDesc) {
    ACL_REQUIRE_NOT_NULL("acldvppDestroyBatchPicDesc", batchPicDesc);
    delete batchPicDesc;
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------- configurations */

acldvppRoiConfig* acldvppCreateRoiConfig(uint32_t left, uint32_t right, uint32_t top, uint32_t bottom) {
    return make<acldvppRoiConfig>("acldvppCreateRoiConfig", left, right, top, bottom);
}

aclError acldvppDestroyRoiConfig(acldvppRoiConfig* config) {
    ACL_REQUIRE_NOT_NULL("acldvppDestroyRoiConfig", config);
    delete config;
    return ACL_SUCCESS;
}

#define DVPP_ROI_SETTER(Name, field)                                                                                   \
    aclError acldvppSetRoiConfig##Name(acldvppRoiConfig* config, uint32_t value) {                                     \
        ACL_REQUIRE_NOT_NULL("acldvppSetRoiConfig" #Name, config);                                                     \
        config->field = value;                                                                                         \
        return ACL_SUCCESS;                                                                                            \
    }
DVPP_ROI_SETTER(Left, left)
DVPP_ROI_SETTER(Right, right)
DVPP_ROI_SETTER(Top, top)
DVPP_ROI_SETTER(Bottom, bottom)
#undef DVPP_ROI_SETTER

aclError acldvppSetRoiConfig(acldvppRoiConfig* config, uint32_t left, uint32_t right, uint32_t top, uint32_t bottom) {
    ACL_REQUIRE_NOT_NULL("acldvppSetRoiConfig", config);
    *config = acldvppRoiConfig{left, right, top, bottom};
    return ACL_SUCCESS;
}

acldvppResizeConfig* acldvppCreateResizeConfig(void) {
    return make<acldvppResizeConfig>("acldvppCreateResizeConfig");
}

aclError acldvppDestroyResizeConfig(acldvppResizeConfig* resizeConfig) {
    ACL_REQUIRE_NOT_NULL("acldvppDestroyResizeConfig", resizeConfig);
    delete resizeConfig;
    return ACL_SUCCESS;
}

aclError acldvppSetResizeConfigInterpolation(acldvppResizeConfig* resizeConfig, uint32_t interpolation) {
    constexpr const char* api = "acldvppSetResizeConfigInterpolation";
    ACL_REQUIRE_NOT_NULL(api, resizeConfig);
    if (interpolation > 4)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "interpolation %u is out of range (expected 0 .. 4: 0 and 1 "
                         "bilinear, 2 nearest neighbour, 3 and 4 TensorFlow's bilinear and nearest)", interpolation);
    resizeConfig->interpolation = interpolation;
    return ACL_SUCCESS;
}

uint32_t acldvppGetResizeConfigInterpolation(const acldvppResizeConfig* resizeConfig) {
    return resizeConfig ? resizeConfig->interpolation : 0;
}

acldvppJpegeConfig* acldvppCreateJpegeConfig(void) { return make<acldvppJpegeConfig>("acldvppCreateJpegeConfig"); }

aclError acldvppDestroyJpegeConfig(acldvppJpegeConfig* jpegeConfig) {
    ACL_REQUIRE_NOT_NULL("acldvppDestroyJpegeConfig", jpegeConfig);
    delete jpegeConfig;
    return ACL_SUCCESS;
}

aclError acldvppSetJpegeConfigLevel(acldvppJpegeConfig* jpegeConfig, uint32_t level) {
    constexpr const char* api = "acldvppSetJpegeConfigLevel";
    ACL_REQUIRE_NOT_NULL(api, jpegeConfig);
    if (level > 100)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "level %u is out of range (expected 0 .. 100)", level);
    jpegeConfig->level = level;
    return ACL_SUCCESS;
}

uint32_t acldvppGetJpegeConfigLevel(const acldvppJpegeConfig* jpegeConfig) {
    return jpegeConfig ? jpegeConfig->level : 0;
}

}  // extern "C"
