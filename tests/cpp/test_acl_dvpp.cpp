// test_acl_dvpp.cpp — the acldvpp V1 face (acl/ops/acl_dvpp.h): a JPEGD -> VPC pipeline equal byte for byte to the
// same through rtDvpp*, crop, crop-and-paste (the rest of the output untouched), batch crop, JPEGE, the descriptors,
// and each of DVPP's rules refused with ACL_ERROR_INVALID_PARAM naming the field.
#include <acl/ops/acl_dvpp.h>
#include <runtime/dvpp.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_acl_util.hpp"

using namespace acl_test;

namespace {

constexpr uint32_t kW = 96, kH = 64;  // the test JPEG; JPEGD's output strides: 128 x 64

/// acldvppMalloc memory, freed at scope end.
struct DvppBuffer {
    explicit DvppBuffer(size_t bytes) : size(bytes) { EXPECT_ACL_OK(acldvppMalloc(&ptr, bytes)); }
    ~DvppBuffer() {
        if (ptr) {
            EXPECT_ACL_OK(acldvppFree(ptr));
        }
    }
    DvppBuffer(const DvppBuffer&) = delete;
    DvppBuffer& operator=(const DvppBuffer&) = delete;
    void* ptr = nullptr;
    size_t size;
    std::vector<uint8_t> read() const {
        std::vector<uint8_t> v(size);
        EXPECT_ACL_OK(aclrtMemcpy(v.data(), size, ptr, size, ACL_MEMCPY_DEVICE_TO_HOST));
        return v;
    }
    void write(const std::vector<uint8_t>& v) const {
        EXPECT_ACL_OK(aclrtMemcpy(ptr, size, v.data(), v.size(), ACL_MEMCPY_HOST_TO_DEVICE));
    }
};

/// The visible bytes of an NV12/NV21 picture: width bytes of each of the height Y rows and height / 2 chroma rows.
std::vector<uint8_t> visible(const std::vector<uint8_t>& bytes, uint32_t w, uint32_t h, uint32_t ws, uint32_t hs) {
    std::vector<uint8_t> out;
    for (uint32_t y = 0; y < h; ++y) out.insert(out.end(), &bytes[size_t{y} * ws], &bytes[size_t{y} * ws + w]);
    const size_t uv = size_t{ws} * hs;
    for (uint32_t y = 0; y < h / 2; ++y)
        out.insert(out.end(), &bytes[uv + size_t{y} * ws], &bytes[uv + size_t{y} * ws + w]);
    return out;
}

struct PicDescDeleter {
    void operator()(acldvppPicDesc* d) const { EXPECT_ACL_OK(acldvppDestroyPicDesc(d)); }
};
using PicDesc = std::unique_ptr<acldvppPicDesc, PicDescDeleter>;

PicDesc pic_desc(void* data, uint32_t size, acldvppPixelFormat format, uint32_t w, uint32_t h, uint32_t ws,
                 uint32_t hs) {
    PicDesc d(acldvppCreatePicDesc());
    EXPECT_NE(d, nullptr);
    EXPECT_ACL_OK(acldvppSetPicDescData(d.get(), data));
    EXPECT_ACL_OK(acldvppSetPicDescSize(d.get(), size));
    EXPECT_ACL_OK(acldvppSetPicDescFormat(d.get(), format));
    EXPECT_ACL_OK(acldvppSetPicDescWidth(d.get(), w));
    EXPECT_ACL_OK(acldvppSetPicDescHeight(d.get(), h));
    EXPECT_ACL_OK(acldvppSetPicDescWidthStride(d.get(), ws));
    EXPECT_ACL_OK(acldvppSetPicDescHeightStride(d.get(), hs));
    return d;
}

struct RoiDeleter {
    void operator()(acldvppRoiConfig* r) const { EXPECT_ACL_OK(acldvppDestroyRoiConfig(r)); }
};
using Roi = std::unique_ptr<acldvppRoiConfig, RoiDeleter>;
Roi roi(uint32_t left, uint32_t right, uint32_t top, uint32_t bottom) {
    return Roi(acldvppCreateRoiConfig(left, right, top, bottom));
}

/// A fixture with a stream, an open channel and the test JPEG (host bytes and a copy in DVPP memory).
class AclDvpp : public AclTest {
protected:
    void SetUp() override {
        AclTest::SetUp();
        if (HasFatalFailure()) return;
        ASSERT_ACL_OK(aclrtCreateStream(&stream));
        channel = acldvppCreateChannelDesc();
        ASSERT_NE(channel, nullptr);
        ASSERT_ACL_OK(acldvppCreateChannel(channel));
        jpeg = make_jpeg(kW, kH);
        ASSERT_FALSE(jpeg.empty());
        jpeg_dev = std::make_unique<DvppBuffer>(jpeg.size());
        jpeg_dev->write(jpeg);
    }
    void TearDown() override {
        jpeg_dev.reset();
        if (channel) {
            EXPECT_ACL_OK(acldvppDestroyChannel(channel));
            EXPECT_ACL_OK(acldvppDestroyChannelDesc(channel));
        }
        if (stream) {
            EXPECT_ACL_OK(aclrtDestroyStream(stream));
        }
        AclTest::TearDown();
    }

    /// A w x h colour JPEG (4:2:0, quality 90) made by the runtime's own encoder from a synthetic RGB picture.
    std::vector<uint8_t> make_jpeg(uint32_t w, uint32_t h) {
        std::vector<uint8_t> rgb(size_t{w} * h * 3);
        for (uint32_t y = 0; y < h; ++y)
            for (uint32_t x = 0; x < w; ++x) {
                uint8_t* p = &rgb[(size_t{y} * w + x) * 3];
                p[0] = static_cast<uint8_t>(x * 255 / w);
                p[1] = static_cast<uint8_t>(y * 255 / h);
                p[2] = static_cast<uint8_t>((x * 7 + y * 13) & 0xFF);
            }
        void* dev = nullptr;
        EXPECT_EQ(rtMalloc(&dev, rgb.size()), RT_SUCCESS);
        EXPECT_EQ(rtMemcpy(dev, rgb.data(), rgb.size(), RT_MEMCPY_HOST_TO_DEVICE), RT_SUCCESS);
        rtPicture pic{dev, rgb.size(), RT_PIXEL_FORMAT_RGB888, w, h, 0, 0};
        size_t bound = 0;
        EXPECT_EQ(rtDvppEncodeJpegBound(&pic, &bound), RT_SUCCESS);
        std::vector<uint8_t> out(bound);
        size_t size = bound;
        EXPECT_EQ(rtDvppEncodeJpeg(&pic, 90, out.data(), &size, rt_stream()), RT_SUCCESS);
        EXPECT_EQ(rtStreamSynchronize(rt_stream()), RT_SUCCESS);
        EXPECT_EQ(rtFree(dev), RT_SUCCESS);
        out.resize(size);
        return out;
    }

    /// The test JPEG decoded by acldvppJpegDecodeAsync into *out (NV12, JPEGD's strides).
    PicDesc decode(DvppBuffer& out) {
        PicDesc d = pic_desc(out.ptr, static_cast<uint32_t>(out.size), PIXEL_FORMAT_YUV_SEMIPLANAR_420, 0, 0, 0, 0);
        EXPECT_ACL_OK(acldvppJpegDecodeAsync(channel, jpeg_dev->ptr, static_cast<uint32_t>(jpeg.size()), d.get(),
                                             stream));
        return d;
    }

    /// The reference: the runtime's crop-resize of `src` into a fresh w x h NV12 picture (tight strides).
    std::vector<uint8_t> rt_crop_resize(const rtPicture& src, rtRect crop, uint32_t w, uint32_t h,
                                        rtInterpolation interp = RT_INTERP_BILINEAR,
                                        rtPixelFormat format = RT_PIXEL_FORMAT_YUV420SP_NV12) {
        const size_t bytes = size_t{w} * h * 3 / 2;
        void* nv12 = nullptr;
        void* out = nullptr;
        EXPECT_EQ(rtMalloc(&nv12, bytes), RT_SUCCESS);
        EXPECT_EQ(rtMalloc(&out, bytes), RT_SUCCESS);
        rtPicture dst{nv12, bytes, src.format, w, h, 0, 0};
        EXPECT_EQ(rtDvppCropResize(&src, &crop, &dst, interp, rt_stream()), RT_SUCCESS) << rtGetLastErrorMessage();
        rtPicture converted{out, bytes, format, w, h, 0, 0};
        if (format != src.format) {
            EXPECT_EQ(rtDvppConvertColor(&dst, &converted, RT_COLOR_BT601_LIMITED, rt_stream()), RT_SUCCESS);
        }
        std::vector<uint8_t> v(bytes);
        EXPECT_EQ(rtStreamSynchronize(rt_stream()), RT_SUCCESS);
        EXPECT_EQ(rtMemcpy(v.data(), format != src.format ? out : nv12, bytes, RT_MEMCPY_DEVICE_TO_HOST),
                  RT_SUCCESS);
        rtFree(nv12);
        rtFree(out);
        return v;
    }

    rtStream_t rt_stream() const { return static_cast<rtStream_t>(stream); }  // aclrtStream is the rtStream_t

    aclrtStream stream = nullptr;
    acldvppChannelDesc* channel = nullptr;
    std::vector<uint8_t> jpeg;
    std::unique_ptr<DvppBuffer> jpeg_dev;
};

TEST_F(AclDvpp, DecodeResizePipelineEqualsTheRuntimesExactly) {
    uint32_t w = 0, h = 0, size = 0;
    int32_t components = 0;
    ASSERT_ACL_OK(acldvppJpegGetImageInfo(jpeg.data(), static_cast<uint32_t>(jpeg.size()), &w, &h, &components));
    EXPECT_EQ(w, kW);
    EXPECT_EQ(h, kH);
    EXPECT_EQ(components, 3);
    ASSERT_ACL_OK(acldvppJpegPredictDecSize(jpeg.data(), static_cast<uint32_t>(jpeg.size()),
                                            PIXEL_FORMAT_YUV_SEMIPLANAR_420, &size));
    EXPECT_EQ(size, 128u * 64u * 3u / 2u);

    DvppBuffer decoded(size);
    PicDesc in = decode(decoded);
    EXPECT_EQ(acldvppGetPicDescWidth(in.get()), kW);
    EXPECT_EQ(acldvppGetPicDescHeight(in.get()), kH);
    EXPECT_EQ(acldvppGetPicDescWidthStride(in.get()), 128u);
    EXPECT_EQ(acldvppGetPicDescHeightStride(in.get()), 64u);

    DvppBuffer resized(48 * 32 * 3 / 2);
    PicDesc out = pic_desc(resized.ptr, 48 * 32 * 3 / 2, PIXEL_FORMAT_YUV_SEMIPLANAR_420, 48, 32, 48, 32);
    acldvppResizeConfig* config = acldvppCreateResizeConfig();
    ASSERT_ACL_OK(acldvppSetResizeConfigInterpolation(config, 1));
    ASSERT_ACL_OK(acldvppVpcResizeAsync(channel, in.get(), out.get(), config, stream));
    ASSERT_ACL_OK(aclrtSynchronizeStream(stream));
    EXPECT_ACL_OK(acldvppDestroyResizeConfig(config));

    // The same through the runtime: decode the host JPEG, then resize.
    void* ref = nullptr;
    ASSERT_EQ(rtMalloc(&ref, size), RT_SUCCESS);
    rtPicture pic{ref, size, RT_PIXEL_FORMAT_YUV420SP_NV12, 0, 0, 128, 64};
    ASSERT_EQ(rtDvppDecodeJpeg(jpeg.data(), jpeg.size(), &pic, rt_stream()), RT_SUCCESS) << rtGetLastErrorMessage();
    const std::vector<uint8_t> want = rt_crop_resize(pic, rtRect{0, 0, kW, kH}, 48, 32);
    std::vector<uint8_t> ref_decoded(size);
    ASSERT_EQ(rtMemcpy(ref_decoded.data(), ref, size, RT_MEMCPY_DEVICE_TO_HOST), RT_SUCCESS);
    rtFree(ref);

    EXPECT_EQ(visible(decoded.read(), kW, kH, 128, 64), visible(ref_decoded, kW, kH, 128, 64));
    EXPECT_EQ(resized.read(), want);
    // The picture is a gradient, not a constant that any two paths would agree on.
    EXPECT_GT(std::set<uint8_t>(want.begin(), want.end()).size(), 40u);
}

TEST_F(AclDvpp, CropAndCropResizeEqualTheRuntimesCropResize) {
    DvppBuffer decoded(128 * 64 * 3 / 2);
    PicDesc in = decode(decoded);
    const rtPicture src{decoded.ptr, decoded.size, RT_PIXEL_FORMAT_YUV420SP_NV12, kW, kH, 128, 64};
    // Crop columns 16 .. 47 and rows 8 .. 31 (32 x 24) to a 32 x 24 output: a copy; and to 64 x 48 nearest.
    DvppBuffer same(32 * 24 * 3 / 2), grown(64 * 48 * 3 / 2);
    PicDesc same_desc = pic_desc(same.ptr, 32 * 24 * 3 / 2, PIXEL_FORMAT_YUV_SEMIPLANAR_420, 32, 24, 32, 24);
    PicDesc grown_desc = pic_desc(grown.ptr, 64 * 48 * 3 / 2, PIXEL_FORMAT_YUV_SEMIPLANAR_420, 64, 48, 64, 48);
    Roi area = roi(16, 47, 8, 31);
    acldvppResizeConfig* nearest = acldvppCreateResizeConfig();
    ASSERT_ACL_OK(acldvppSetResizeConfigInterpolation(nearest, 2));
    EXPECT_EQ(acldvppGetResizeConfigInterpolation(nearest), 2u);
    ASSERT_ACL_OK(acldvppVpcCropAsync(channel, in.get(), same_desc.get(), area.get(), stream));
    ASSERT_ACL_OK(acldvppVpcCropResizeAsync(channel, in.get(), grown_desc.get(), area.get(), nearest, stream));
    ASSERT_ACL_OK(aclrtSynchronizeStream(stream));
    EXPECT_ACL_OK(acldvppDestroyResizeConfig(nearest));
    EXPECT_EQ(same.read(), rt_crop_resize(src, rtRect{16, 8, 32, 24}, 32, 24));
    EXPECT_EQ(grown.read(), rt_crop_resize(src, rtRect{16, 8, 32, 24}, 64, 48, RT_INTERP_NEAREST));
}

TEST_F(AclDvpp, CropAndPasteWritesOnlyThePasteArea) {
    DvppBuffer decoded(128 * 64 * 3 / 2);
    PicDesc in = decode(decoded);
    const rtPicture src{decoded.ptr, decoded.size, RT_PIXEL_FORMAT_YUV420SP_NV12, kW, kH, 128, 64};
    // A 64 x 48 canvas (strides 80 x 50) filled with 0x5a; crop 0 .. 63 x 0 .. 47 pasted at columns 16 .. 47, rows
    // 10 .. 33 (32 x 24).
    constexpr uint32_t cw = 64, ch = 48, cws = 80, chs = 50;
    DvppBuffer canvas(cws * chs * 3 / 2);
    std::vector<uint8_t> before(canvas.size, 0x5a);
    canvas.write(before);
    PicDesc out = pic_desc(canvas.ptr, cws * chs * 3 / 2, PIXEL_FORMAT_YUV_SEMIPLANAR_420, cw, ch, cws, chs);
    Roi crop = roi(0, 63, 0, 47), paste = roi(16, 47, 10, 33);
    ASSERT_ACL_OK(acldvppVpcCropAndPasteAsync(channel, in.get(), out.get(), crop.get(), paste.get(), stream));
    ASSERT_ACL_OK(aclrtSynchronizeStream(stream));
    const std::vector<uint8_t> want_area = rt_crop_resize(src, rtRect{0, 0, 64, 48}, 32, 24);
    std::vector<uint8_t> want = before;
    for (uint32_t y = 0; y < 24; ++y)
        std::memcpy(&want[size_t{10 + y} * cws + 16], &want_area[size_t{y} * 32], 32);
    for (uint32_t y = 0; y < 12; ++y)
        std::memcpy(&want[size_t{cws} * chs + size_t{5 + y} * cws + 16], &want_area[32 * 24 + size_t{y} * 32], 32);
    EXPECT_EQ(canvas.read(), want);
}

TEST_F(AclDvpp, BatchCropEqualsOneCropResizePerArea) {
    DvppBuffer decoded(128 * 64 * 3 / 2);
    PicDesc in = decode(decoded);
    const rtPicture src{decoded.ptr, decoded.size, RT_PIXEL_FORMAT_YUV420SP_NV12, kW, kH, 128, 64};
    // Two source pictures (the decode, described twice), 2 + 1 crops; the third output is NV21.
    acldvppBatchPicDesc* srcs = acldvppCreateBatchPicDesc(2);
    acldvppBatchPicDesc* dsts = acldvppCreateBatchPicDesc(3);
    ASSERT_NE(srcs, nullptr);
    ASSERT_NE(dsts, nullptr);
    for (uint32_t i = 0; i < 2; ++i) {
        acldvppPicDesc* d = acldvppGetPicDesc(srcs, i);
        ASSERT_NE(d, nullptr);
        acldvppSetPicDescData(d, decoded.ptr);
        acldvppSetPicDescSize(d, static_cast<uint32_t>(decoded.size));
        acldvppSetPicDescFormat(d, PIXEL_FORMAT_YUV_SEMIPLANAR_420);
        acldvppSetPicDescWidth(d, kW);
        acldvppSetPicDescHeight(d, kH);
        acldvppSetPicDescWidthStride(d, 128);
        acldvppSetPicDescHeightStride(d, 64);
    }
    std::vector<std::unique_ptr<DvppBuffer>> outs;
    const acldvppPixelFormat formats[3] = {PIXEL_FORMAT_YUV_SEMIPLANAR_420, PIXEL_FORMAT_YUV_SEMIPLANAR_420,
                                           PIXEL_FORMAT_YVU_SEMIPLANAR_420};
    for (uint32_t k = 0; k < 3; ++k) {
        outs.push_back(std::make_unique<DvppBuffer>(32 * 16 * 3 / 2));
        acldvppPicDesc* d = acldvppGetPicDesc(dsts, k);
        acldvppSetPicDescData(d, outs[k]->ptr);
        acldvppSetPicDescSize(d, 32 * 16 * 3 / 2);
        acldvppSetPicDescFormat(d, formats[k]);
        acldvppSetPicDescWidth(d, 32);
        acldvppSetPicDescHeight(d, 16);
        acldvppSetPicDescWidthStride(d, 32);
        acldvppSetPicDescHeightStride(d, 16);
    }
    EXPECT_EQ(acldvppGetPicDesc(dsts, 3), nullptr);
    EXPECT_NE(recent_message().find("index 3 is out of range"), std::string::npos);
    Roi a = roi(0, 31, 0, 15), b = roi(32, 95, 16, 63), c = roi(10, 41, 20, 35);
    acldvppRoiConfig* areas[3] = {a.get(), b.get(), c.get()};
    uint32_t roi_nums[2] = {2, 1};
    ASSERT_ACL_OK(acldvppVpcBatchCropAsync(channel, srcs, roi_nums, 2, dsts, areas, stream));
    ASSERT_ACL_OK(aclrtSynchronizeStream(stream));
    EXPECT_EQ(outs[0]->read(), rt_crop_resize(src, rtRect{0, 0, 32, 16}, 32, 16));
    EXPECT_EQ(outs[1]->read(), rt_crop_resize(src, rtRect{32, 16, 64, 48}, 32, 16));
    EXPECT_EQ(outs[2]->read(), rt_crop_resize(src, rtRect{10, 20, 32, 16}, 32, 16, RT_INTERP_BILINEAR,
                                              RT_PIXEL_FORMAT_YUV420SP_NV21));
    // The crops must add up to the outputs.
    uint32_t too_many[2] = {2, 2};
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppVpcBatchCropAsync(channel, srcs, too_many, 2, dsts, areas, stream));
    EXPECT_NE(recent_message().find("dstBatchPicDescs holds 3 pictures"), std::string::npos);
    EXPECT_ACL_OK(acldvppDestroyBatchPicDesc(srcs));
    EXPECT_ACL_OK(acldvppDestroyBatchPicDesc(dsts));
}

TEST_F(AclDvpp, EncodeEqualsTheRuntimesEncoder) {
    DvppBuffer decoded(128 * 64 * 3 / 2);
    PicDesc in = decode(decoded);
    acldvppJpegeConfig* config = acldvppCreateJpegeConfig();
    ASSERT_ACL_OK(acldvppSetJpegeConfigLevel(config, 80));
    EXPECT_EQ(acldvppGetJpegeConfigLevel(config), 80u);
    uint32_t predicted = 0;
    ASSERT_ACL_OK(acldvppJpegPredictEncSize(in.get(), config, &predicted));
    DvppBuffer out(predicted);
    uint32_t size = predicted;
    ASSERT_ACL_OK(acldvppJpegEncodeAsync(channel, in.get(), out.ptr, &size, config, stream));
    ASSERT_ACL_OK(aclrtSynchronizeStream(stream));
    ASSERT_GT(size, 0u);
    ASSERT_LT(size, predicted);
    std::vector<uint8_t> got = out.read();
    got.resize(size);

    const rtPicture pic{decoded.ptr, decoded.size, RT_PIXEL_FORMAT_YUV420SP_NV12, kW, kH, 128, 64};
    std::vector<uint8_t> want(predicted);
    size_t want_size = want.size();
    ASSERT_EQ(rtDvppEncodeJpeg(&pic, 80, want.data(), &want_size, rt_stream()), RT_SUCCESS);
    ASSERT_EQ(rtStreamSynchronize(rt_stream()), RT_SUCCESS);
    want.resize(want_size);
    EXPECT_EQ(got, want);

    // JPEGE's rules: heightStride is the height or the height rounded up to 16; the capacity covers the prediction.
    EXPECT_ACL_OK(acldvppSetPicDescHeightStride(in.get(), 70));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppJpegPredictEncSize(in.get(), config, &predicted));
    EXPECT_NE(recent_message().find("heightStride 70"), std::string::npos);
    EXPECT_ACL_OK(acldvppSetPicDescHeightStride(in.get(), 64));
    size = predicted - 1;
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppJpegEncodeAsync(channel, in.get(), out.ptr, &size, config, stream));
    EXPECT_NE(recent_message().find("acldvppJpegPredictEncSize"), std::string::npos);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppSetJpegeConfigLevel(config, 101));
    EXPECT_ACL_OK(acldvppDestroyJpegeConfig(config));
}

TEST_F(AclDvpp, JpegdRulesAndUnsupportedJpegs) {
    uint32_t size = 0;
    DvppBuffer small(128 * 64 * 3 / 2 - 2);
    PicDesc out = pic_desc(small.ptr, static_cast<uint32_t>(small.size), PIXEL_FORMAT_YUV_SEMIPLANAR_420, 0, 0, 0, 0);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppJpegDecodeAsync(channel, jpeg_dev->ptr,
                                                               static_cast<uint32_t>(jpeg.size()), out.get(), stream));
    EXPECT_NE(recent_message().find("widthStride 128 = width rounded up to 128"), std::string::npos);
    // The JPEG must be DVPP memory.
    void* plain = nullptr;
    ASSERT_ACL_OK(aclrtMalloc(&plain, jpeg.size(), ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppJpegDecodeAsync(channel, plain, static_cast<uint32_t>(jpeg.size()),
                                                               out.get(), stream));
    EXPECT_NE(recent_message().find("not memory from acldvppMalloc"), std::string::npos);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppFree(plain));
    EXPECT_ACL_OK(aclrtFree(plain));
    // A progressive frame header (SOF2 in place of SOF0): not decoded by JPEGD.
    std::vector<uint8_t> progressive = jpeg;
    for (size_t i = 2; i + 1 < progressive.size(); ++i)
        if (progressive[i] == 0xFF && progressive[i + 1] == 0xC0) {
            progressive[i + 1] = 0xC2;
            break;
        }
    EXPECT_ACL(ACL_ERROR_UNSUPPORTED_JPEG, acldvppJpegPredictDecSize(progressive.data(),
                                                                     static_cast<uint32_t>(progressive.size()),
                                                                     PIXEL_FORMAT_YUV_SEMIPLANAR_420, &size));
    EXPECT_NE(recent_message().find("progressive"), std::string::npos);
    // A 16 x 16 JPEG is below JPEGD's 32 x 32.
    const std::vector<uint8_t> tiny = make_jpeg(16, 16);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppJpegPredictDecSize(tiny.data(), static_cast<uint32_t>(tiny.size()),
                                                                  PIXEL_FORMAT_YUV_SEMIPLANAR_420, &size));
    EXPECT_NE(recent_message().find("outside JPEGD's range 32 x 32 .. 8192 x 8192"), std::string::npos);
    // Formats this library does not decode to, and bytes that are no JPEG.
    EXPECT_ACL(ACL_ERROR_FEATURE_UNSUPPORTED, acldvppJpegPredictDecSize(jpeg.data(), static_cast<uint32_t>(jpeg.size()),
                                                                        PIXEL_FORMAT_RGB_888, &size));
    const uint8_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    EXPECT_ACL(ACL_ERROR_UNSUPPORTED_JPEG, acldvppJpegGetImageInfo(junk, sizeof junk, nullptr, nullptr, nullptr));
}

TEST_F(AclDvpp, VpcRulesAreRefusedNamingTheField) {
    DvppBuffer decoded(128 * 64 * 3 / 2);
    PicDesc in = decode(decoded);
    ASSERT_ACL_OK(aclrtSynchronizeStream(stream));
    DvppBuffer buf(64 * 64 * 3 / 2);
    acldvppResizeConfig* config = acldvppCreateResizeConfig();
    const auto refused = [&](acldvppPicDesc* out, const char* what) {
        EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppVpcResizeAsync(channel, in.get(), out, config, stream));
        const std::string m = recent_message();
        EXPECT_NE(m.find(what), std::string::npos) << m;
    };
    const auto F = PIXEL_FORMAT_YUV_SEMIPLANAR_420;
    refused(pic_desc(buf.ptr, 6144, F, 48, 32, 50, 32).get(), "widthStride 50 breaks VPC's rule: a multiple of 16");
    refused(pic_desc(buf.ptr, 6144, F, 48, 32, 48, 33).get(), "heightStride 33 breaks VPC's rule: even");
    refused(pic_desc(buf.ptr, 6144, F, 47, 32, 48, 32).get(), "width 47 and height 32 must be even");
    refused(pic_desc(buf.ptr, 6144, F, 48, 32, 16, 32).get(), "widthStride 16");
    refused(pic_desc(buf.ptr, 2000, F, 48, 32, 48, 32).get(), "size 2000 is below widthStride * heightStride * 3 / 2");
    refused(pic_desc(buf.ptr, 6144, F, 8, 32, 32, 32).get(), "outside VPC's range 10 x 6");
    refused(pic_desc(nullptr, 6144, F, 48, 32, 48, 32).get(), "outputDesc data is NULL");
    refused(nullptr, "outputDesc is NULL");
    // Memory that did not come from acldvppMalloc.
    void* plain = nullptr;
    ASSERT_ACL_OK(aclrtMalloc(&plain, 6144, ACL_MEM_MALLOC_HUGE_FIRST));
    refused(pic_desc(plain, 6144, F, 48, 32, 48, 32).get(), "outputDesc data");
    EXPECT_ACL_OK(aclrtFree(plain));
    // A descriptor whose size runs past its allocation.
    refused(pic_desc(buf.ptr, 64 * 64 * 3, F, 48, 32, 48, 32).get(),
            "bytes to the end of its acldvppMalloc allocation");
    // Formats and algorithms this library does not run.
    EXPECT_ACL(ACL_ERROR_FEATURE_UNSUPPORTED,
               acldvppVpcResizeAsync(channel, in.get(), pic_desc(buf.ptr, 6144, PIXEL_FORMAT_RGB_888, 48, 32, 144, 32)
                                                            .get(), config, stream));
    EXPECT_NE(recent_message().find("PIXEL_FORMAT_RGB_888"), std::string::npos);
    PicDesc ok = pic_desc(buf.ptr, 6144, F, 48, 32, 48, 32);
    ASSERT_ACL_OK(acldvppSetResizeConfigInterpolation(config, 3));
    EXPECT_ACL(ACL_ERROR_FEATURE_UNSUPPORTED, acldvppVpcResizeAsync(channel, in.get(), ok.get(), config, stream));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppSetResizeConfigInterpolation(config, 5));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppSetPicDescFormat(ok.get(), static_cast<acldvppPixelFormat>(12345)));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppVpcResizeAsync(channel, in.get(), ok.get(), nullptr, stream));

    // Crop and paste areas.
    ASSERT_ACL_OK(acldvppSetResizeConfigInterpolation(config, 0));
    const auto crop_refused = [&](acldvppRoiConfig* crop, acldvppRoiConfig* paste, const char* what) {
        const aclError e = paste ? acldvppVpcCropAndPasteAsync(channel, in.get(), ok.get(), crop, paste, stream)
                                 : acldvppVpcCropAsync(channel, in.get(), ok.get(), crop, stream);
        EXPECT_ACL(ACL_ERROR_INVALID_PARAM, e);
        const std::string m = recent_message();
        EXPECT_NE(m.find(what), std::string::npos) << m;
    };
    crop_refused(roi(1, 32, 0, 31).get(), nullptr, "left and top even, right and bottom odd");
    crop_refused(roi(0, 32, 0, 31).get(), nullptr, "left and top even, right and bottom odd");
    crop_refused(roi(0, 31, 1, 31).get(), nullptr, "left and top even, right and bottom odd");
    crop_refused(roi(0, 7, 0, 31).get(), nullptr, "outside VPC's range 10 x 6 .. 4096 x 4096 for crop areas");
    crop_refused(roi(64, 97, 0, 31).get(), nullptr, "leaves inputDesc, which is 96 x 64");
    crop_refused(roi(0, 31, 0, 31).get(), roi(8, 39, 0, 15).get(), "left 8 is not a multiple of 16");
    crop_refused(roi(0, 31, 0, 31).get(), roi(16, 63, 0, 15).get(), "leaves outputDesc, which is 48 x 32");
    // Each side scales by 1/32 .. 16: a 10 x 6 crop to 176 x 32 grows its width 17.6 times.
    DvppBuffer wide(176 * 32 * 3 / 2);
    PicDesc wide_desc = pic_desc(wide.ptr, 176 * 32 * 3 / 2, F, 176, 32, 176, 32);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppVpcCropAsync(channel, in.get(), wide_desc.get(), roi(0, 9, 0, 5).get(),
                                                            stream));
    EXPECT_NE(recent_message().find("scales 10 x 6 to 176 x 32: VPC scales each side by a factor in [1/32, 16]"),
              std::string::npos);
    EXPECT_ACL_OK(acldvppDestroyResizeConfig(config));
}

TEST_F(AclDvpp, ChannelsAndDescriptors) {
    // Operations need an open channel.
    acldvppChannelDesc* closed = acldvppCreateChannelDesc();
    ASSERT_NE(closed, nullptr);
    EXPECT_EQ(acldvppGetChannelDescChannelId(closed), 0u);
    DvppBuffer buf(64);
    PicDesc d = pic_desc(buf.ptr, 64, PIXEL_FORMAT_YUV_SEMIPLANAR_420, 0, 0, 0, 0);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppJpegDecodeAsync(closed, jpeg_dev->ptr,
                                                               static_cast<uint32_t>(jpeg.size()), d.get(), stream));
    EXPECT_NE(recent_message().find("no open channel"), std::string::npos);
    ASSERT_ACL_OK(acldvppCreateChannel(closed));
    EXPECT_NE(acldvppGetChannelDescChannelId(closed), 0u);
    EXPECT_NE(acldvppGetChannelDescChannelId(closed), acldvppGetChannelDescChannelId(channel));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppCreateChannel(closed));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppDestroyChannelDesc(closed));  // still open
    EXPECT_ACL_OK(acldvppDestroyChannel(closed));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppDestroyChannel(closed));
    EXPECT_ACL_OK(acldvppDestroyChannelDesc(closed));

    // Setters and getters; NULL descriptors read as 0.
    EXPECT_ACL_OK(acldvppSetPicDescRetCode(d.get(), 7));
    EXPECT_EQ(acldvppGetPicDescRetCode(d.get()), 7u);
    EXPECT_EQ(acldvppGetPicDescData(d.get()), buf.ptr);
    EXPECT_EQ(acldvppGetPicDescSize(d.get()), 64u);
    EXPECT_EQ(acldvppGetPicDescFormat(d.get()), PIXEL_FORMAT_YUV_SEMIPLANAR_420);
    EXPECT_EQ(acldvppGetPicDescWidth(nullptr), 0u);
    EXPECT_EQ(acldvppGetPicDescData(nullptr), nullptr);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppSetPicDescWidth(nullptr, 1));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppDestroyPicDesc(nullptr));
    Roi r = roi(0, 1, 2, 3);
    EXPECT_ACL_OK(acldvppSetRoiConfig(r.get(), 2, 13, 4, 11));
    EXPECT_ACL_OK(acldvppSetRoiConfigLeft(r.get(), 4));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppSetRoiConfigBottom(nullptr, 1));
    EXPECT_EQ(acldvppCreateBatchPicDesc(0), nullptr);
    EXPECT_EQ(acldvppCreateBatchPicDesc(257), nullptr);
    EXPECT_NE(recent_message().find("batchSize 257 is out of range"), std::string::npos);

    // DVPP memory.
    void* p = nullptr;
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppMalloc(&p, 0));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppMalloc(nullptr, 16));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, acldvppFree(static_cast<uint8_t*>(buf.ptr) + 1));
    EXPECT_NE(recent_message().find("not the start of memory from acldvppMalloc"), std::string::npos);
}

TEST_F(AclDvpp, DecodeLeavesAnEarlierFailureAndRefusesCapture) {
    DvppBuffer decoded(128 * 64 * 3 / 2);
    PicDesc out = pic_desc(decoded.ptr, static_cast<uint32_t>(decoded.size), PIXEL_FORMAT_YUV_SEMIPLANAR_420, 0, 0, 0,
                           0);
    // A failure already pending on the stream: the decode cannot read the JPEG (the copy behind the failure is
    // skipped) and fails, and the stream's synchronize still reports the failure.
    make_stream_fail(stream);
    EXPECT_NE(acldvppJpegDecodeAsync(channel, jpeg_dev->ptr, static_cast<uint32_t>(jpeg.size()), out.get(), stream),
              ACL_SUCCESS);
    EXPECT_NE(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    EXPECT_NE(recent_message().find("failing host function"), std::string::npos);
    ASSERT_ACL_OK(acldvppJpegDecodeAsync(channel, jpeg_dev->ptr, static_cast<uint32_t>(jpeg.size()), out.get(),
                                         stream));
    ASSERT_ACL_OK(aclrtSynchronizeStream(stream));

    ASSERT_ACL_OK(aclmdlRICaptureBegin(stream, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    EXPECT_ACL(ACL_ERROR_FEATURE_UNSUPPORTED, acldvppJpegDecodeAsync(channel, jpeg_dev->ptr,
                                                                     static_cast<uint32_t>(jpeg.size()), out.get(),
                                                                     stream));
    EXPECT_NE(recent_message().find("capturing"), std::string::npos);
    aclmdlRI model = nullptr;
    ASSERT_ACL_OK(aclmdlRICaptureEnd(stream, &model));
    EXPECT_ACL_OK(aclmdlRIDestroy(model));
}

TEST_F(AclDvpp, MemoryAndChannelsNeedACurrentContext) {
    aclError malloc_result = ACL_SUCCESS, channel_result = ACL_SUCCESS;
    std::thread([&] {
        void* p = nullptr;
        malloc_result = acldvppMalloc(&p, 64);
        acldvppChannelDesc* c = acldvppCreateChannelDesc();
        channel_result = acldvppCreateChannel(c);
        acldvppDestroyChannelDesc(c);
    }).join();
    EXPECT_ACL(ACL_ERROR_RT_CONTEXT_NULL, malloc_result);
    EXPECT_ACL(ACL_ERROR_RT_CONTEXT_NULL, channel_result);
}

TEST(AclDvppInit, CallsBeforeAclInitAreRefused) {
    void* p = nullptr;
    EXPECT_ACL(ACL_ERROR_UNINITIALIZE, acldvppMalloc(&p, 16));
    acldvppChannelDesc* c = acldvppCreateChannelDesc();
    EXPECT_ACL(ACL_ERROR_UNINITIALIZE, acldvppCreateChannel(c));
    EXPECT_ACL_OK(acldvppDestroyChannelDesc(c));
}

}  // namespace
