// test_dvpp_preprocess.cpp — rtDvppPreprocess, the fused pre-processing: bit for bit rtDvppCropResizePaste, then
// rtDvppConvertColor, then rtDvppNormalize, for every source format, interpolation, output format, dtype and layout,
// crops, letterboxing and batches; its parameters' refusals; capture into a graph.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/dvpp.h"
#include "runtime/graph.h"
#include "test_util.hpp"

namespace {

using rt_test::contains;
using rt_test::DevBuf;
using rt_test::last_message;

constexpr rtPixelFormat kSources[] = {RT_PIXEL_FORMAT_GRAY8,         RT_PIXEL_FORMAT_RGB888,
                                      RT_PIXEL_FORMAT_BGR888,        RT_PIXEL_FORMAT_RGBA8888,
                                      RT_PIXEL_FORMAT_BGRA8888,      RT_PIXEL_FORMAT_YUV420SP_NV12,
                                      RT_PIXEL_FORMAT_YUV420SP_NV21, RT_PIXEL_FORMAT_YUV420P};
constexpr rtPixelFormat kOutputs[] = {RT_PIXEL_FORMAT_RGB888, RT_PIXEL_FORMAT_BGR888, RT_PIXEL_FORMAT_GRAY8};
constexpr rtInterpolation kInterps[] = {RT_INTERP_NEAREST, RT_INTERP_BILINEAR, RT_INTERP_AREA};
constexpr rtDataType kDtypes[] = {RT_FLOAT32, RT_FLOAT16, RT_BFLOAT16, RT_UINT8, RT_INT8};

bool is_yuv(rtPixelFormat f) {
    return f == RT_PIXEL_FORMAT_YUV420SP_NV12 || f == RT_PIXEL_FORMAT_YUV420SP_NV21 || f == RT_PIXEL_FORMAT_YUV420P;
}
uint32_t out_channels(rtPixelFormat f) { return f == RT_PIXEL_FORMAT_GRAY8 ? 1 : 3; }

/// A picture in device memory of random bytes.
struct Pic {
    rtPicture p{};
    DevBuf buf;
    Pic(rtPixelFormat f, uint32_t w, uint32_t h, uint32_t ws, uint32_t hs, uint32_t seed) {
        p.format = f;
        p.width = w;
        p.height = h;
        p.width_stride = ws;
        p.height_stride = hs;
        EXPECT_RT_OK(rtDvppPictureSize(f, w, h, ws, hs, &p.size));
        EXPECT_RT_OK(buf.alloc(p.size));
        p.data = buf.get();
        std::vector<uint8_t> host(p.size);
        std::mt19937 g(seed);
        for (auto& b : host) b = static_cast<uint8_t>(g());
        EXPECT_RT_OK(rtMemcpy(p.data, host.data(), host.size(), RT_MEMCPY_HOST_TO_DEVICE));
    }
};

std::vector<uint8_t> download(const void* p, size_t n) {
    std::vector<uint8_t> v(n);
    EXPECT_RT_OK(rtMemcpy(v.data(), p, n, RT_MEMCPY_DEVICE_TO_HOST));
    return v;
}

/// The composition the fused operation equals: CropResizePaste (in the source's format; its letterbox fill is
/// what the conversion turns into the output's fill, so the comparison covers the paste rectangle and the fill
/// separately), ConvertColor, Normalize.
struct Composed {
    std::vector<uint8_t> out;  // channels x height x width (or HWC) elements of the dtype
};
Composed compose(const rtPicture& src, const rtRect* crop, const rtDvppPreprocessParams& p, rtStream_t stream) {
    const rtRect paste = p.paste.width ? p.paste : rtRect{0, 0, p.width, p.height};
    // The resized crop alone, then converted and normalised; the fill goes around it afterwards (element by element).
    rtPicture resized{};
    resized.format = src.format;
    resized.width = paste.width;
    resized.height = paste.height;
    EXPECT_RT_OK(rtDvppPictureSize(resized.format, resized.width, resized.height, 0, 0, &resized.size));
    DevBuf rbuf(resized.size);
    resized.data = rbuf.get();
    EXPECT_RT_OK(rtDvppCropResize(&src, crop, &resized, p.interpolation, stream));
    rtPicture converted{};
    converted.format = p.format;
    converted.width = paste.width;
    converted.height = paste.height;
    EXPECT_RT_OK(rtDvppPictureSize(converted.format, converted.width, converted.height, 0, 0, &converted.size));
    DevBuf cbuf(converted.size);
    converted.data = cbuf.get();
    EXPECT_RT_OK(rtDvppConvertColor(&resized, &converted, p.matrix, stream));
    const uint32_t cn = out_channels(p.format);
    const size_t es = rtDataTypeSize(p.dtype);
    DevBuf nbuf(size_t(cn) * paste.width * paste.height * es);
    EXPECT_RT_OK(rtDvppNormalize(&converted, nbuf.get(), p.dtype, p.chw, p.mean, p.std, stream));
    // The fill, normalised the same way: a 1x1 picture of the fill's channels.
    rtPicture fill{};
    fill.format = p.format;
    fill.width = fill.height = 1;
    fill.size = cn;
    DevBuf fbuf(cn);
    fill.data = fbuf.get();
    EXPECT_RT_OK(rtMemcpy(fill.data, p.fill, cn, RT_MEMCPY_HOST_TO_DEVICE));
    DevBuf fnorm(cn * es);
    EXPECT_RT_OK(rtDvppNormalize(&fill, fnorm.get(), p.dtype, p.chw, p.mean, p.std, stream));
    EXPECT_RT_OK(rtStreamSynchronize(stream));
    const std::vector<uint8_t> inner = download(nbuf.get(), nbuf.size()), f = download(fnorm.get(), fnorm.size());
    Composed c;
    c.out.resize(size_t(cn) * p.width * p.height * es);
    for (uint32_t y = 0; y < p.height; ++y)
        for (uint32_t x = 0; x < p.width; ++x)
            for (uint32_t ch = 0; ch < cn; ++ch) {
                const bool in = x >= paste.x && x < paste.x + paste.width && y >= paste.y && y < paste.y + paste.height;
                const size_t o =
                    p.chw ? (size_t(ch) * p.height + y) * p.width + x : (size_t(y) * p.width + x) * cn + ch;
                const uint8_t* from;
                if (in) {
                    const uint32_t ix = x - paste.x, iy = y - paste.y;
                    const size_t i = p.chw ? (size_t(ch) * paste.height + iy) * paste.width + ix
                                           : (size_t(iy) * paste.width + ix) * cn + ch;
                    from = &inner[i * es];
                } else {
                    from = &f[ch * es];
                }
                std::memcpy(&c.out[o * es], from, es);
            }
    return c;
}

class DvppPreprocess : public rt_test::DeviceTest {};

TEST_P(DvppPreprocess, EqualsCropResizeConvertNormalizeBitForBit) {
    rt_test::StreamGuard stream;
    ASSERT_RT_OK(stream.status());
    uint32_t seed = 1;
    for (rtPixelFormat sf : kSources)
        for (rtInterpolation interp : kInterps)
            for (rtPixelFormat of : kOutputs) {
                // Shrinking and growing, a crop, a letterbox, an odd output for packed sources.
                const bool yuv = is_yuv(sf);
                Pic src(sf, 96, 54, 100, 58, seed++);
                const rtRect crop = {8, 4, 64, 40};
                rtDvppPreprocessParams p = RT_DVPP_PREPROCESS_INIT;
                p.width = yuv ? 30 : 31;
                p.height = 24;
                p.interpolation = interp;
                p.format = of;
                p.matrix = static_cast<rtColorMatrix>(seed % 4);
                p.dtype = kDtypes[seed % 5];
                p.chw = seed % 2;
                p.paste = {2, 4, yuv ? 26u : 27u, 16};
                for (int c = 0; c < 3; ++c) {
                    p.mean[c] = 100.0f + 10 * c;
                    p.std[c] = 50.0f + c;
                    p.fill[c] = static_cast<uint8_t>(114 + c);
                }
                SCOPED_TRACE("src " + std::to_string(sf) + " interp " + std::to_string(interp) + " out " +
                             std::to_string(of) + " dtype " + std::to_string(p.dtype) + " chw " +
                             std::to_string(p.chw));
                const size_t bytes = size_t(out_channels(of)) * p.width * p.height * rtDataTypeSize(p.dtype);
                DevBuf out(bytes);
                ASSERT_RT_OK(rtDvppPreprocess(&src.p, 1, &crop, &p, out.get(), stream));
                const Composed c = compose(src.p, &crop, p, stream);
                ASSERT_RT_OK(rtStreamSynchronize(stream));
                EXPECT_EQ(download(out.get(), bytes), c.out);
                // Growing: the crop's 64x40 to a 90x60 picture, whole.
                rtDvppPreprocessParams g = p;
                g.width = 90;
                g.height = 60;
                g.paste = {0, 0, 0, 0};
                const size_t gbytes = size_t(out_channels(of)) * g.width * g.height * rtDataTypeSize(g.dtype);
                DevBuf gout(gbytes);
                ASSERT_RT_OK(rtDvppPreprocess(&src.p, 1, &crop, &g, gout.get(), stream));
                const Composed gc = compose(src.p, &crop, g, stream);
                ASSERT_RT_OK(rtStreamSynchronize(stream));
                EXPECT_EQ(download(gout.get(), gbytes), gc.out);
            }
}

TEST_P(DvppPreprocess, EveryDtypeAndLayoutOfTheClassificationCase) {
    // 1080p RGB -> 224x224, the ImageNet mean and deviation, every dtype, both layouts.
    rt_test::StreamGuard stream;
    ASSERT_RT_OK(stream.status());
    Pic src(RT_PIXEL_FORMAT_RGB888, 1920, 1080, 0, 0, 42);
    const rtRect crop = {420, 0, 1080, 1080};
    for (rtDataType t : kDtypes)
        for (int chw : {1, 0}) {
            SCOPED_TRACE(std::to_string(t) + (chw ? " CHW" : " HWC"));
            rtDvppPreprocessParams p = RT_DVPP_PREPROCESS_INIT;
            p.width = p.height = 224;
            p.dtype = t;
            p.chw = chw;
            const float mean[3] = {123.675f, 116.28f, 103.53f}, stdv[3] = {58.395f, 57.12f, 57.375f};
            std::memcpy(p.mean, mean, sizeof mean);
            std::memcpy(p.std, stdv, sizeof stdv);
            const size_t bytes = 3u * 224 * 224 * rtDataTypeSize(t);
            DevBuf out(bytes);
            ASSERT_RT_OK(rtDvppPreprocess(&src.p, 1, &crop, &p, out.get(), stream));
            const Composed c = compose(src.p, &crop, p, stream);
            EXPECT_EQ(download(out.get(), bytes), c.out);
        }
}

TEST_P(DvppPreprocess, TheCommonCaseEqualsTheCompositionToo) {
    // A 3-channel source, bilinear, to CHW float32 (on the cpu its own per-pixel kernel): letterboxed or not, either
    // channel order in and out, crops one pixel wide (byte loads) and wide (word loads).
    rt_test::StreamGuard stream;
    ASSERT_RT_OK(stream.status());
    uint32_t seed = 100;
    for (rtPixelFormat sf : {RT_PIXEL_FORMAT_RGB888, RT_PIXEL_FORMAT_BGR888})
        for (rtPixelFormat of : {RT_PIXEL_FORMAT_RGB888, RT_PIXEL_FORMAT_BGR888})
            for (const rtRect crop : {rtRect{5, 3, 1, 20}, rtRect{0, 0, 80, 45}, rtRect{7, 2, 33, 40}})
                for (bool letterbox : {false, true}) {
                    SCOPED_TRACE(std::to_string(sf) + " -> " + std::to_string(of) + " crop width " +
                                 std::to_string(crop.width) + (letterbox ? " letterboxed" : ""));
                    Pic src(sf, 80, 45, 83, 0, seed++);
                    rtDvppPreprocessParams p = RT_DVPP_PREPROCESS_INIT;
                    p.width = 37;
                    p.height = 29;
                    p.format = of;
                    if (letterbox) p.paste = {3, 5, 30, 17};
                    for (int c = 0; c < 3; ++c) {
                        p.mean[c] = 120.0f - c;
                        p.std[c] = 60.0f + 3 * c;
                        p.fill[c] = static_cast<uint8_t>(10 * c + 1);
                    }
                    DevBuf out(3u * 37 * 29 * 4);
                    ASSERT_RT_OK(rtDvppPreprocess(&src.p, 1, &crop, &p, out.get(), stream));
                    const Composed c = compose(src.p, &crop, p, stream);
                    EXPECT_EQ(download(out.get(), out.size()), c.out);
                }
}

TEST_P(DvppPreprocess, BatchesOfMixedPicturesWriteImageAfterImage) {
    rt_test::StreamGuard stream;
    ASSERT_RT_OK(stream.status());
    const Pic a(RT_PIXEL_FORMAT_YUV420SP_NV12, 64, 48, 0, 0, 1), b(RT_PIXEL_FORMAT_BGR888, 33, 17, 40, 0, 2),
        c(RT_PIXEL_FORMAT_RGBA8888, 200, 10, 0, 12, 3), d(RT_PIXEL_FORMAT_YUV420P, 16, 16, 0, 0, 4);
    const std::vector<rtPicture> srcs = {a.p, b.p, c.p, d.p};
    const rtRect crops[] = {{0, 0, 64, 48}, {3, 2, 30, 15}, {100, 0, 100, 10}, {2, 2, 12, 12}};
    rtDvppPreprocessParams p = RT_DVPP_PREPROCESS_INIT;
    p.width = 20;
    p.height = 14;
    p.dtype = RT_FLOAT16;
    const size_t image = 3u * 20 * 14 * 2;
    DevBuf out(image * srcs.size());
    ASSERT_RT_OK(rtDvppPreprocess(srcs.data(), static_cast<uint32_t>(srcs.size()), crops, &p, out.get(), stream));
    ASSERT_RT_OK(rtStreamSynchronize(stream));
    const std::vector<uint8_t> got = download(out.get(), out.size());
    for (size_t i = 0; i < srcs.size(); ++i) {
        SCOPED_TRACE(i);
        const Composed c = compose(srcs[i], &crops[i], p, stream);
        EXPECT_EQ(std::vector<uint8_t>(got.begin() + image * i, got.begin() + image * (i + 1)), c.out);
    }
    // No crops: each picture whole.
    ASSERT_RT_OK(rtDvppPreprocess(srcs.data(), 2, nullptr, &p, out.get(), stream));
    ASSERT_RT_OK(rtStreamSynchronize(stream));
    const std::vector<uint8_t> whole = download(out.get(), image * 2);
    for (size_t i = 0; i < 2; ++i)
        EXPECT_EQ(std::vector<uint8_t>(whole.begin() + image * i, whole.begin() + image * (i + 1)),
                  compose(srcs[i], nullptr, p, stream).out);
}

TEST_P(DvppPreprocess, RefusalsNameTheFieldAndQueueNothing) {
    Pic src(RT_PIXEL_FORMAT_RGB888, 32, 32, 0, 0, 5), nv12(RT_PIXEL_FORMAT_YUV420SP_NV12, 32, 32, 0, 0, 6);
    rtDvppPreprocessParams p = RT_DVPP_PREPROCESS_INIT;
    p.width = p.height = 16;
    const size_t bytes = 3u * 16 * 16 * 4;
    DevBuf out(bytes * 2);
    ASSERT_RT_OK(rtMemset(out.get(), 0x5a, out.size()));
    auto expect = [&](const rtPicture* s, uint32_t n, const rtRect* crops, const rtDvppPreprocessParams* pp,
                      void* dst, const char* text) {
        SCOPED_TRACE(text);
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppPreprocess(s, n, crops, pp, dst, nullptr));
        EXPECT_TRUE(contains(last_message(), text));
    };
    expect(&src.p, 1, nullptr, nullptr, out.get(), "rtDvppPreprocess: params is NULL");
    rtDvppPreprocessParams q = p;
    q.size = 8;
    expect(&src.p, 1, nullptr, &q, out.get(), "rtDvppPreprocess: params->size 8 is not the size");
    q = p;
    q.size = sizeof q + 8;
    expect(&src.p, 1, nullptr, &q, out.get(), "params->size");
    q = p;
    q.width = 0;
    expect(&src.p, 1, nullptr, &q, out.get(), "rtDvppPreprocess: params->width is 0");
    q = p;
    q.format = RT_PIXEL_FORMAT_RGBA8888;
    expect(&src.p, 1, nullptr, &q, out.get(), "rtDvppPreprocess: params->format 16 is not an output format");
    q = p;
    q.interpolation = static_cast<rtInterpolation>(7);
    expect(&src.p, 1, nullptr, &q, out.get(), "rtDvppPreprocess: params->interpolation 7 is not an rtInterpolation");
    q = p;
    q.matrix = static_cast<rtColorMatrix>(9);
    expect(&src.p, 1, nullptr, &q, out.get(), "rtDvppPreprocess: params->matrix 9 is not an rtColorMatrix");
    q = p;
    q.dtype = RT_INT32;
    expect(&src.p, 1, nullptr, &q, out.get(), "rtDvppPreprocess: params->dtype");
    q = p;
    q.std[1] = 0;
    expect(&src.p, 1, nullptr, &q, out.get(), "rtDvppPreprocess: params->std[1] is 0");
    q = p;
    q.paste = {8, 0, 9, 16};
    expect(&src.p, 1, nullptr, &q, out.get(), "rtDvppPreprocess: params->paste->x 8 + params->paste->width 9");
    q = p;
    q.paste = {0, 0, 15, 16};
    expect(&nv12.p, 1, nullptr, &q, out.get(), "rtDvppPreprocess: params->paste.width 15 is odd, and srcs[0] is "
                                               "YUV420SP_NV12 (expected even x, y, width and height");
    const rtRect bad_crop = {30, 0, 4, 4};
    expect(&src.p, 1, &bad_crop, &p, out.get(), "rtDvppPreprocess: crops[0]->x 30 + crops[0]->width 4");
    const rtRect odd_crop = {1, 0, 4, 4};
    expect(&nv12.p, 1, &odd_crop, &p, out.get(), "rtDvppPreprocess: crops[0]->x 1 is odd");
    expect(nullptr, 1, nullptr, &p, out.get(), "rtDvppPreprocess: srcs is NULL");
    expect(&src.p, 1, nullptr, &p, nullptr, "rtDvppPreprocess: dst is NULL");
    // The second picture is bad: nothing is queued for the first either.
    rtPicture two[2] = {src.p, src.p};
    two[1].width_stride = 3;
    expect(two, 2, nullptr, &p, out.get(), "rtDvppPreprocess: srcs[1]->width_stride 3 is below width 32");
    DevBuf small(bytes * 2 - 1);
    rtPicture pair[2] = {src.p, src.p};
    expect(pair, 2, nullptr, &p, small.get(), "rtDvppPreprocess");
    expect(&src.p, 1, nullptr, &p, src.p.data, "overlaps srcs[0]");
    ASSERT_RT_OK(rtDeviceSynchronize());
    const std::vector<uint8_t> untouched = download(out.get(), out.size());
    for (uint8_t b : untouched) ASSERT_EQ(b, 0x5a) << "a refused call wrote the output";
    // n = 0 is nothing to do.
    EXPECT_RT_OK(rtDvppPreprocess(nullptr, 0, nullptr, &p, nullptr, nullptr));
}

TEST_P(DvppPreprocess, AnOlderCallersSmallerParamsGetTheDefaults) {
    Pic src(RT_PIXEL_FORMAT_BGR888, 40, 30, 0, 0, 8);
    rtDvppPreprocessParams full = RT_DVPP_PREPROCESS_INIT;
    full.width = 20;
    full.height = 10;
    // A caller whose struct ended after height: every other field is the default.
    rtDvppPreprocessParams old = full;
    old.size = offsetof(rtDvppPreprocessParams, height) + sizeof(uint32_t);
    old.dtype = RT_UINT8;  // beyond its size: not read
    DevBuf a(3u * 20 * 10 * 4), b(3u * 20 * 10 * 4);
    ASSERT_RT_OK(rtDvppPreprocess(&src.p, 1, nullptr, &full, a.get(), nullptr));
    ASSERT_RT_OK(rtDvppPreprocess(&src.p, 1, nullptr, &old, b.get(), nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_EQ(download(a.get(), a.size()), download(b.get(), b.size()));
}

TEST_P(DvppPreprocess, CapturedIntoAGraphAndReplayed) {
    rt_test::StreamGuard stream;
    ASSERT_RT_OK(stream.status());
    Pic src(RT_PIXEL_FORMAT_YUV420SP_NV12, 128, 72, 0, 0, 9);
    rtDvppPreprocessParams p = RT_DVPP_PREPROCESS_INIT;
    p.width = p.height = 32;
    DevBuf direct(3u * 32 * 32 * 4), replay(3u * 32 * 32 * 4);
    ASSERT_RT_OK(rtDvppPreprocess(&src.p, 1, nullptr, &p, direct.get(), stream));
    ASSERT_RT_OK(rtMemset(replay.get(), 0, replay.size()));
    ASSERT_RT_OK(rtStreamBeginCapture(stream, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtDvppPreprocess(&src.p, 1, nullptr, &p, replay.get(), stream));
    rt_test::GraphGuard graph(nullptr);
    ASSERT_RT_OK(rtStreamEndCapture(stream, graph.out()));
    rt_test::ExecGuard exec;
    ASSERT_RT_OK(rtGraphInstantiate(exec.out(), graph, 0));
    ASSERT_RT_OK(rtStreamSynchronize(stream));
    EXPECT_NE(download(replay.get(), replay.size()), download(direct.get(), direct.size()))
        << "captured work ran at capture time";
    ASSERT_RT_OK(rtGraphLaunch(exec, stream));
    ASSERT_RT_OK(rtStreamSynchronize(stream));
    EXPECT_EQ(download(replay.get(), replay.size()), download(direct.get(), direct.size()));
}

RT_INSTANTIATE_DEVICE_TEST(DvppPreprocess);

}  // namespace
