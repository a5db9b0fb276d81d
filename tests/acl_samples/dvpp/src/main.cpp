// DVPP sample, in the shape of AscendCL's image-preprocessing samples: a channel and a stream, a JPEG in DVPP memory,
// acldvppJpegGetImageInfo / acldvppJpegPredictDecSize, acldvppJpegDecodeAsync to NV12, acldvppVpcResizeAsync to half
// size, the result copied back and checked. The JPEG is made at run time by acldvppJpegEncodeAsync from a synthetic
// NV12 picture (a horizontal luma ramp on flat chroma), so the sample needs no data file. Then DVPP's rules are
// checked on bad descriptors. Prints PASS when every result holds.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "acl/acl.h"
#include "acl/ops/acl_dvpp.h"

namespace {

int g_failures = 0;

#define CHECK_ACL(call)                                                                                 \
    do {                                                                                                \
        aclError r_ = (call);                                                                           \
        if (r_ != ACL_SUCCESS) {                                                                        \
            std::printf("[ERROR] line %d: %s returned %d: %s\n", __LINE__, #call, (int)r_,              \
                        aclGetRecentErrMsg() ? aclGetRecentErrMsg() : "(no message)");                  \
            return false;                                                                               \
        }                                                                                               \
    } while (0)

#define EXPECT_TRUE(cond, ...)                                                       \
    do {                                                                             \
        if (!(cond)) {                                                               \
            std::printf("[ERROR] line %d: %s: ", __LINE__, #cond);                   \
            std::printf(__VA_ARGS__);                                                \
            std::printf("\n");                                                       \
            ++g_failures;                                                            \
            return false;                                                            \
        }                                                                            \
    } while (0)

#define EXPECT_CODE(call, code)                                                                               \
    do {                                                                                                      \
        aclError r_ = (call);                                                                                 \
        const char *m_ = aclGetRecentErrMsg();                                                                \
        if (r_ != (code) || m_ == nullptr || m_[0] == '\0') {                                                 \
            std::printf("[ERROR] line %d: %s returned %d (expected %d) message: %s\n", __LINE__, #call, (int)r_, \
                        (int)(code), m_ ? m_ : "(none)");                                                     \
            ++g_failures;                                                                                     \
            return false;                                                                                     \
        }                                                                                                     \
    } while (0)

const uint32_t kWidth = 256, kHeight = 128;       // the synthetic picture (NV12, strides = sizes)
const uint32_t kOutWidth = 128, kOutHeight = 64;  // the resize target
const int kTolerance = 4;                         // JPEG round trip + bilinear resize of a smooth ramp, in levels

uint8_t Luma(uint32_t x) { return static_cast<uint8_t>(16 + x * 200 / (kWidth - 1)); }
const uint8_t kU = 90, kV = 160;

struct Pipeline {
    aclrtContext context = nullptr;
    aclrtStream stream = nullptr;
    acldvppChannelDesc *channel = nullptr;
};

acldvppPicDesc *MakePic(void *data, uint32_t size, uint32_t w, uint32_t h, uint32_t ws, uint32_t hs) {
    acldvppPicDesc *pic = acldvppCreatePicDesc();
    if (pic == nullptr) return nullptr;
    if (acldvppSetPicDescData(pic, data) != ACL_SUCCESS || acldvppSetPicDescSize(pic, size) != ACL_SUCCESS ||
        acldvppSetPicDescFormat(pic, PIXEL_FORMAT_YUV_SEMIPLANAR_420) != ACL_SUCCESS ||
        acldvppSetPicDescWidth(pic, w) != ACL_SUCCESS || acldvppSetPicDescHeight(pic, h) != ACL_SUCCESS ||
        acldvppSetPicDescWidthStride(pic, ws) != ACL_SUCCESS || acldvppSetPicDescHeightStride(pic, hs) != ACL_SUCCESS) {
        acldvppDestroyPicDesc(pic);
        return nullptr;
    }
    return pic;
}

// Encodes the synthetic picture; the JPEG's bytes come back in `jpeg` (host memory).
bool Encode(Pipeline &p, std::vector<uint8_t> &jpeg) {
    const uint32_t size = kWidth * kHeight * 3 / 2;
    std::vector<uint8_t> nv12(size);
    for (uint32_t y = 0; y < kHeight; ++y)
        for (uint32_t x = 0; x < kWidth; ++x) nv12[y * kWidth + x] = Luma(x);
    for (uint32_t i = kWidth * kHeight; i < size; i += 2) {
        nv12[i] = kU;
        nv12[i + 1] = kV;
    }
    void *picDev = nullptr;
    CHECK_ACL(acldvppMalloc(&picDev, size));
    CHECK_ACL(aclrtMemcpy(picDev, size, nv12.data(), size, ACL_MEMCPY_HOST_TO_DEVICE));
    acldvppPicDesc *pic = MakePic(picDev, size, kWidth, kHeight, kWidth, kHeight);
    EXPECT_TRUE(pic != nullptr, "picture descriptor: %s", aclGetRecentErrMsg());
    acldvppJpegeConfig *config = acldvppCreateJpegeConfig();
    EXPECT_TRUE(config != nullptr, "JPEGE config");
    CHECK_ACL(acldvppSetJpegeConfigLevel(config, 100));
    uint32_t capacity = 0;
    CHECK_ACL(acldvppJpegPredictEncSize(pic, config, &capacity));
    EXPECT_TRUE(capacity > 0, "predicted JPEG size 0");
    void *jpegDev = nullptr;
    CHECK_ACL(acldvppMalloc(&jpegDev, capacity));
    uint32_t jpegSize = capacity;
    CHECK_ACL(acldvppJpegEncodeAsync(p.channel, pic, jpegDev, &jpegSize, config, p.stream));
    CHECK_ACL(aclrtSynchronizeStream(p.stream));
    EXPECT_TRUE(jpegSize > 0 && jpegSize <= capacity, "JPEG of %u bytes (capacity %u)", jpegSize, capacity);
    jpeg.resize(jpegSize);
    CHECK_ACL(aclrtMemcpy(jpeg.data(), jpegSize, jpegDev, jpegSize, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT_TRUE(jpeg[0] == 0xFF && jpeg[1] == 0xD8, "no JPEG SOI marker");
    CHECK_ACL(acldvppDestroyJpegeConfig(config));
    CHECK_ACL(acldvppDestroyPicDesc(pic));
    CHECK_ACL(acldvppFree(jpegDev));
    CHECK_ACL(acldvppFree(picDev));
    return true;
}

bool DecodeResize(Pipeline &p, const std::vector<uint8_t> &jpeg) {
    const uint32_t jpegSize = static_cast<uint32_t>(jpeg.size());
    uint32_t width = 0, height = 0;
    int32_t components = 0;
    CHECK_ACL(acldvppJpegGetImageInfo(jpeg.data(), jpegSize, &width, &height, &components));
    EXPECT_TRUE(width == kWidth && height == kHeight && components == 3, "image info %ux%u x%d", width, height,
                components);
    uint32_t decSize = 0;
    CHECK_ACL(acldvppJpegPredictDecSize(jpeg.data(), jpegSize, PIXEL_FORMAT_YUV_SEMIPLANAR_420, &decSize));
    // JPEGD's output strides: width up to 128, height up to 16.
    const uint32_t decWs = (kWidth + 127) / 128 * 128, decHs = (kHeight + 15) / 16 * 16;
    EXPECT_TRUE(decSize == decWs * decHs * 3 / 2, "predicted decode size %u", decSize);

    void *jpegDev = nullptr, *decDev = nullptr, *outDev = nullptr;
    CHECK_ACL(acldvppMalloc(&jpegDev, jpegSize));
    CHECK_ACL(aclrtMemcpy(jpegDev, jpegSize, jpeg.data(), jpegSize, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_ACL(acldvppMalloc(&decDev, decSize));
    acldvppPicDesc *decoded = acldvppCreatePicDesc();
    EXPECT_TRUE(decoded != nullptr, "picture descriptor");
    CHECK_ACL(acldvppSetPicDescData(decoded, decDev));
    CHECK_ACL(acldvppSetPicDescSize(decoded, decSize));
    CHECK_ACL(acldvppSetPicDescFormat(decoded, PIXEL_FORMAT_YUV_SEMIPLANAR_420));
    CHECK_ACL(acldvppJpegDecodeAsync(p.channel, jpegDev, jpegSize, decoded, p.stream));

    const uint32_t outWs = (kOutWidth + 15) / 16 * 16, outHs = (kOutHeight + 1) / 2 * 2;
    const uint32_t outSize = outWs * outHs * 3 / 2;
    CHECK_ACL(acldvppMalloc(&outDev, outSize));
    acldvppPicDesc *resized = MakePic(outDev, outSize, kOutWidth, kOutHeight, outWs, outHs);
    EXPECT_TRUE(resized != nullptr, "picture descriptor: %s", aclGetRecentErrMsg());
    acldvppResizeConfig *resize = acldvppCreateResizeConfig();
    EXPECT_TRUE(resize != nullptr, "resize config");
    // The decoded descriptor's geometry is written by the decode call: it is complete once that call returns.
    EXPECT_TRUE(acldvppGetPicDescWidth(decoded) == kWidth && acldvppGetPicDescHeight(decoded) == kHeight &&
                    acldvppGetPicDescWidthStride(decoded) == decWs && acldvppGetPicDescHeightStride(decoded) == decHs,
                "decoded geometry %ux%u strides %ux%u", acldvppGetPicDescWidth(decoded),
                acldvppGetPicDescHeight(decoded), acldvppGetPicDescWidthStride(decoded),
                acldvppGetPicDescHeightStride(decoded));
    CHECK_ACL(acldvppVpcResizeAsync(p.channel, decoded, resized, resize, p.stream));
    CHECK_ACL(aclrtSynchronizeStream(p.stream));
    EXPECT_TRUE(acldvppGetPicDescRetCode(decoded) == 0 && acldvppGetPicDescRetCode(resized) == 0, "ret codes");

    // The decoded picture: the ramp and the flat chroma, within the JPEG round trip's error.
    std::vector<uint8_t> host(decSize);
    CHECK_ACL(aclrtMemcpy(host.data(), decSize, decDev, decSize, ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint32_t y = 0; y < kHeight; ++y) {
        for (uint32_t x = 0; x < kWidth; ++x) {
            int d = std::abs(int(host[y * decWs + x]) - int(Luma(x)));
            EXPECT_TRUE(d <= kTolerance, "decoded Y(%u,%u) = %d, expected %d", x, y, host[y * decWs + x], Luma(x));
        }
    }
    // The resized picture: output column x samples the input around 2x + 0.5.
    std::vector<uint8_t> out(outSize);
    CHECK_ACL(aclrtMemcpy(out.data(), outSize, outDev, outSize, ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint32_t y = 0; y < kOutHeight; ++y) {
        for (uint32_t x = 0; x < kOutWidth; ++x) {
            int expected = (int(Luma(2 * x)) + int(Luma(2 * x + 1)) + 1) / 2;
            int d = std::abs(int(out[y * outWs + x]) - expected);
            EXPECT_TRUE(d <= kTolerance, "resized Y(%u,%u) = %d, expected %d", x, y, out[y * outWs + x], expected);
        }
    }
    const uint8_t *uv = out.data() + outWs * outHs;
    for (uint32_t y = 0; y < kOutHeight / 2; ++y) {
        for (uint32_t x = 0; x < kOutWidth; x += 2) {
            const uint8_t *px = uv + y * outWs + x;
            EXPECT_TRUE(std::abs(int(px[0]) - kU) <= kTolerance && std::abs(int(px[1]) - kV) <= kTolerance,
                        "resized UV(%u,%u) = %d,%d, expected %d,%d", x, y, px[0], px[1], kU, kV);
        }
    }

    // DVPP's rules: a width stride that is not a multiple of 16, a JPEG outside DVPP memory.
    acldvppPicDesc *bad = MakePic(outDev, outSize, kOutWidth, kOutHeight, kOutWidth + 8, outHs);
    EXPECT_TRUE(bad != nullptr, "picture descriptor");
    EXPECT_CODE(acldvppVpcResizeAsync(p.channel, decoded, bad, resize, p.stream), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(acldvppJpegDecodeAsync(p.channel, jpeg.data(), jpegSize, decoded, p.stream), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(acldvppVpcResizeAsync(p.channel, nullptr, resized, resize, p.stream), ACL_ERROR_INVALID_PARAM);
    CHECK_ACL(acldvppDestroyPicDesc(bad));

    CHECK_ACL(acldvppDestroyResizeConfig(resize));
    CHECK_ACL(acldvppDestroyPicDesc(decoded));
    CHECK_ACL(acldvppDestroyPicDesc(resized));
    CHECK_ACL(acldvppFree(jpegDev));
    CHECK_ACL(acldvppFree(decDev));
    CHECK_ACL(acldvppFree(outDev));
    return true;
}

bool Run() {
    Pipeline p;
    CHECK_ACL(aclInit(nullptr));
    CHECK_ACL(aclrtSetDevice(0));
    CHECK_ACL(aclrtCreateContext(&p.context, 0));
    CHECK_ACL(aclrtCreateStream(&p.stream));
    p.channel = acldvppCreateChannelDesc();
    EXPECT_TRUE(p.channel != nullptr, "channel descriptor");
    CHECK_ACL(acldvppCreateChannel(p.channel));
    std::vector<uint8_t> jpeg;
    bool ok = Encode(p, jpeg) && DecodeResize(p, jpeg);
    CHECK_ACL(acldvppDestroyChannel(p.channel));
    CHECK_ACL(acldvppDestroyChannelDesc(p.channel));
    CHECK_ACL(aclrtDestroyStream(p.stream));
    CHECK_ACL(aclrtDestroyContext(p.context));
    CHECK_ACL(aclrtResetDevice(0));
    CHECK_ACL(aclFinalize());
    return ok;
}

}  // namespace

int main() {
    bool ok = Run();
    if (!ok || g_failures != 0) {
        std::printf("FAIL\n");
        return 1;
    }
    std::printf("PASS\n");
    return 0;
}
