// test_dvpp_color.cpp — rtDvppConvertColor and rtDvppNormalize: every conversion against references written out
// here (the published matrices in double, OpenCV's grey, the layouts of dvpp.h), strides and padding, every refusal
// with its message, and stream capture.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
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

constexpr rtPixelFormat kYuv[] = {RT_PIXEL_FORMAT_YUV420SP_NV12, RT_PIXEL_FORMAT_YUV420SP_NV21,
                                  RT_PIXEL_FORMAT_YUV420P};
constexpr rtPixelFormat kPacked[] = {RT_PIXEL_FORMAT_GRAY8, RT_PIXEL_FORMAT_RGB888, RT_PIXEL_FORMAT_BGR888,
                                     RT_PIXEL_FORMAT_RGBA8888, RT_PIXEL_FORMAT_BGRA8888};
constexpr rtColorMatrix kMatrices[] = {RT_COLOR_BT601_FULL, RT_COLOR_BT601_LIMITED, RT_COLOR_BT709_FULL,
                                       RT_COLOR_BT709_LIMITED};

bool is_yuv(rtPixelFormat f) {
    return f == RT_PIXEL_FORMAT_YUV420SP_NV12 || f == RT_PIXEL_FORMAT_YUV420SP_NV21 || f == RT_PIXEL_FORMAT_YUV420P;
}
int channels(rtPixelFormat f) {
    return f == RT_PIXEL_FORMAT_GRAY8 ? 1 : f == RT_PIXEL_FORMAT_RGB888 || f == RT_PIXEL_FORMAT_BGR888 ? 3 : 4;
}
bool is_bgr(rtPixelFormat f) { return f == RT_PIXEL_FORMAT_BGR888 || f == RT_PIXEL_FORMAT_BGRA8888; }
std::string name(rtPixelFormat f) {
    switch (f) {
        case RT_PIXEL_FORMAT_GRAY8: return "GRAY8";
        case RT_PIXEL_FORMAT_RGB888: return "RGB888";
        case RT_PIXEL_FORMAT_BGR888: return "BGR888";
        case RT_PIXEL_FORMAT_RGBA8888: return "RGBA8888";
        case RT_PIXEL_FORMAT_BGRA8888: return "BGRA8888";
        case RT_PIXEL_FORMAT_YUV420SP_NV12: return "NV12";
        case RT_PIXEL_FORMAT_YUV420SP_NV21: return "NV21";
        case RT_PIXEL_FORMAT_YUV420P: return "YUV420P";
    }
    return "?";
}

/// A picture in device memory with a host copy of its bytes (the layouts of dvpp.h's header).
struct Pic {
    rtPicture p{};
    DevBuf buf;
    std::vector<uint8_t> host;
    Pic(rtPixelFormat f, uint32_t w, uint32_t h, uint32_t ws = 0, uint32_t hs = 0) {
        p.format = f;
        p.width = w;
        p.height = h;
        p.width_stride = ws;
        p.height_stride = hs;
        EXPECT_RT_OK(rtDvppPictureSize(f, w, h, ws, hs, &p.size));
        EXPECT_RT_OK(buf.alloc(p.size));
        p.data = buf.get();
        host.assign(p.size, 0);
    }
    uint32_t ws() const { return p.width_stride ? p.width_stride : p.width; }
    uint32_t hs() const { return p.height_stride ? p.height_stride : p.height; }
    /// Byte offsets of the Y (or packed) sample, U and V of pixel (x, y).
    size_t at(uint32_t x, uint32_t y, int c = 0) const { return (size_t(y) * ws() + x) * channels(p.format) + c; }
    size_t u_at(uint32_t x, uint32_t y) const {
        const size_t luma = size_t(ws()) * hs();
        if (p.format == RT_PIXEL_FORMAT_YUV420P) return luma + size_t(y / 2) * (ws() / 2) + x / 2;
        return luma + size_t(y / 2) * ws() + (x / 2) * 2 + (p.format == RT_PIXEL_FORMAT_YUV420SP_NV21 ? 1 : 0);
    }
    size_t v_at(uint32_t x, uint32_t y) const {
        const size_t luma = size_t(ws()) * hs();
        if (p.format == RT_PIXEL_FORMAT_YUV420P)
            return luma + size_t(ws() / 2) * (hs() / 2) + size_t(y / 2) * (ws() / 2) + x / 2;
        return luma + size_t(y / 2) * ws() + (x / 2) * 2 + (p.format == RT_PIXEL_FORMAT_YUV420SP_NV21 ? 0 : 1);
    }
    size_t y_at(uint32_t x, uint32_t y) const { return size_t(y) * ws() + x; }
    void random(uint32_t seed) {
        std::mt19937 g(seed);
        for (auto& b : host) b = static_cast<uint8_t>(g());
    }
    void upload() { ASSERT_RT_OK(rtMemcpy(p.data, host.data(), host.size(), RT_MEMCPY_HOST_TO_DEVICE)); }
    void download() { ASSERT_RT_OK(rtMemcpy(host.data(), p.data, host.size(), RT_MEMCPY_DEVICE_TO_HOST)); }
};

/// The published matrices (dvpp.h; BT.601 and BT.709 luma weights), in double.
struct Weights {
    double kr, kb;
    bool limited;
};
Weights weights(rtColorMatrix m) {
    const bool lim = m == RT_COLOR_BT601_LIMITED || m == RT_COLOR_BT709_LIMITED;
    if (m == RT_COLOR_BT601_FULL || m == RT_COLOR_BT601_LIMITED) return {0.299, 0.114, lim};
    return {0.2126, 0.0722, lim};
}
double clamp255(double v) { return v < 0 ? 0 : v > 255 ? 255 : v; }
/// YUV -> RGB of the published formulas, limited-range Y below 16 taken as 16 (the documented footroom rule).
void ref_to_rgb(rtColorMatrix m, int y, int u, int v, double rgb[3]) {
    const Weights w = weights(m);
    const double kg = 1 - w.kr - w.kb;
    const double yy = w.limited ? std::max(y - 16, 0) * 255.0 / 219.0 : y;
    const double cs = w.limited ? 255.0 / 224.0 : 1.0, du = (u - 128) * cs, dv = (v - 128) * cs;
    rgb[0] = clamp255(yy + 2 * (1 - w.kr) * dv);
    rgb[1] = clamp255(yy - (2 * w.kb * (1 - w.kb) * du + 2 * w.kr * (1 - w.kr) * dv) / kg);
    rgb[2] = clamp255(yy + 2 * (1 - w.kb) * du);
}
void ref_to_yuv(rtColorMatrix m, int r, int g, int b, double yuv[3]) {
    const Weights w = weights(m);
    const double kg = 1 - w.kr - w.kb, y = w.kr * r + kg * g + w.kb * b;
    const double ys = w.limited ? 219.0 / 255.0 : 1.0, cs = w.limited ? 224.0 / 255.0 : 1.0;
    yuv[0] = clamp255((w.limited ? 16 : 0) + ys * y);
    yuv[1] = clamp255(128 + cs * (b - y) / (2 * (1 - w.kb)));
    yuv[2] = clamp255(128 + cs * (r - y) / (2 * (1 - w.kr)));
}
/// OpenCV 5's grey (cv2.cvtColor COLOR_RGB2GRAY), as dvpp.h promises.
int ref_grey(int r, int g, int b) { return (9798 * r + 19235 * g + 3735 * b + (1 << 14)) >> 15; }

/// |a - round(ref)| <= 1, counting the inexact ones.
struct Within1 {
    size_t checked = 0, off_by_one = 0, worse = 0;
    void add(int a, double ref) {
        const double d = std::fabs(a - std::floor(ref + 0.5));
        ++checked;
        if (d >= 2) ++worse;
        else if (d >= 1) ++off_by_one;
    }
};

class DvppColor : public rt_test::DeviceTest {};

TEST_P(DvppColor, YuvToPackedFollowsThePublishedMatricesWithinOne) {
    for (rtPixelFormat sf : kYuv)
        for (rtPixelFormat df : kPacked) {
            if (df == RT_PIXEL_FORMAT_GRAY8) continue;
            for (rtColorMatrix m : kMatrices) {
                SCOPED_TRACE(name(sf) + " -> " + name(df) + " matrix " + std::to_string(m));
                Pic src(sf, 70, 38, 74, 42), dst(df, 70, 38, 71, 0);
                src.random(1 + m);
                src.upload();
                ASSERT_RT_OK(rtDvppConvertColor(&src.p, &dst.p, m, nullptr));
                ASSERT_RT_OK(rtStreamSynchronize(nullptr));
                dst.download();
                Within1 w;
                const int cn = channels(df);
                for (uint32_t y = 0; y < 38; ++y)
                    for (uint32_t x = 0; x < 70; ++x) {
                        double rgb[3];
                        ref_to_rgb(m, src.host[src.y_at(x, y)], src.host[src.u_at(x, y)], src.host[src.v_at(x, y)],
                                   rgb);
                        const uint8_t* o = &dst.host[dst.at(x, y)];
                        w.add(o[is_bgr(df) ? 2 : 0], rgb[0]);
                        w.add(o[1], rgb[1]);
                        w.add(o[is_bgr(df) ? 0 : 2], rgb[2]);
                        if (cn == 4) {
                            ASSERT_EQ(o[3], 255) << "alpha is 255";
                        }
                    }
                EXPECT_EQ(w.worse, 0u);
                EXPECT_LT(w.off_by_one, w.checked / 50) << "at most 2% off by one (rounding of the coefficients)";
            }
        }
}

TEST_P(DvppColor, YuvToRgbEveryTripleOfEveryMatrix) {
    // Each 2x2 block of a 4096x4096 picture has one of the 65536 (U, V) pairs and four of the 256 Y values: all
    // 2^24 triples, once each.
    const uint32_t n = 4096;
    Pic src(RT_PIXEL_FORMAT_YUV420P, n, n), dst(RT_PIXEL_FORMAT_RGB888, n, n);
    for (uint32_t by = 0; by < n / 2; ++by)
        for (uint32_t bx = 0; bx < n / 2; ++bx) {
            const uint32_t b = by * (n / 2) + bx, uv = b & 0xffff, y0 = (b >> 16) * 4;
            src.host[src.u_at(2 * bx, 2 * by)] = static_cast<uint8_t>(uv & 0xff);
            src.host[src.v_at(2 * bx, 2 * by)] = static_cast<uint8_t>(uv >> 8);
            for (uint32_t k = 0; k < 4; ++k) src.host[src.y_at(2 * bx + (k & 1), 2 * by + (k >> 1))] = y0 + k;
        }
    src.upload();
    for (rtColorMatrix m : kMatrices) {
        SCOPED_TRACE(m);
        ASSERT_RT_OK(rtDvppConvertColor(&src.p, &dst.p, m, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        dst.download();
        Within1 w;
        for (uint32_t y = 0; y < n; ++y)
            for (uint32_t x = 0; x < n; ++x) {
                double rgb[3];
                ref_to_rgb(m, src.host[src.y_at(x, y)], src.host[src.u_at(x, y)], src.host[src.v_at(x, y)], rgb);
                for (int c = 0; c < 3; ++c) w.add(dst.host[dst.at(x, y, c)], rgb[c]);
            }
        EXPECT_EQ(w.worse, 0u);
        EXPECT_LT(w.off_by_one, w.checked / 100);
    }
}

TEST_P(DvppColor, PackedToYuvFollowsThePublishedMatricesWithChromaOfTheTopLeftPixel) {
    for (rtPixelFormat sf : kPacked)
        for (rtPixelFormat df : kYuv)
            for (rtColorMatrix m : kMatrices) {
                SCOPED_TRACE(name(sf) + " -> " + name(df) + " matrix " + std::to_string(m));
                Pic src(sf, 66, 34, 67, 35), dst(df, 66, 34, 70, 36);
                src.random(7 + m);
                src.upload();
                ASSERT_RT_OK(rtDvppConvertColor(&src.p, &dst.p, m, nullptr));
                ASSERT_RT_OK(rtStreamSynchronize(nullptr));
                dst.download();
                Within1 w;
                const bool bgr = is_bgr(sf);
                for (uint32_t y = 0; y < 34; ++y)
                    for (uint32_t x = 0; x < 66; ++x) {
                        const uint8_t* p = &src.host[src.at(x, y)];
                        if (sf == RT_PIXEL_FORMAT_GRAY8) {  // the Y plane itself, neutral chroma
                            ASSERT_EQ(dst.host[dst.y_at(x, y)], p[0]);
                            ASSERT_EQ(dst.host[dst.u_at(x, y)], 128);
                            ASSERT_EQ(dst.host[dst.v_at(x, y)], 128);
                            continue;
                        }
                        double yuv[3];
                        ref_to_yuv(m, p[bgr ? 2 : 0], p[1], p[bgr ? 0 : 2], yuv);
                        w.add(dst.host[dst.y_at(x, y)], yuv[0]);
                        if (x % 2 || y % 2) continue;
                        w.add(dst.host[dst.u_at(x, y)], yuv[1]);
                        w.add(dst.host[dst.v_at(x, y)], yuv[2]);
                    }
                EXPECT_EQ(w.worse, 0u);
                EXPECT_LT(w.off_by_one, w.checked / 50 + 1);
            }
}

TEST_P(DvppColor, PackedToPackedIsExact) {
    for (rtPixelFormat sf : kPacked)
        for (rtPixelFormat df : kPacked) {
            SCOPED_TRACE(name(sf) + " -> " + name(df));
            Pic src(sf, 37, 9, 40, 11), dst(df, 37, 9, 39, 0);
            src.random(3);
            src.upload();
            ASSERT_RT_OK(rtDvppConvertColor(&src.p, &dst.p, RT_COLOR_BT601_LIMITED, nullptr));
            ASSERT_RT_OK(rtStreamSynchronize(nullptr));
            dst.download();
            for (uint32_t y = 0; y < 9; ++y)
                for (uint32_t x = 0; x < 37; ++x) {
                    const uint8_t* p = &src.host[src.at(x, y)];
                    int r, g, b, a = 255;
                    if (sf == RT_PIXEL_FORMAT_GRAY8) {
                        r = g = b = p[0];
                    } else {
                        r = p[is_bgr(sf) ? 2 : 0], g = p[1], b = p[is_bgr(sf) ? 0 : 2];
                        if (channels(sf) == 4) a = p[3];
                    }
                    const uint8_t* o = &dst.host[dst.at(x, y)];
                    if (df == RT_PIXEL_FORMAT_GRAY8) {
                        ASSERT_EQ(o[0], ref_grey(r, g, b)) << x << "," << y;
                        continue;
                    }
                    ASSERT_EQ(o[is_bgr(df) ? 2 : 0], r);
                    ASSERT_EQ(o[1], g);
                    ASSERT_EQ(o[is_bgr(df) ? 0 : 2], b);
                    if (channels(df) == 4) {
                        ASSERT_EQ(o[3], a) << "alpha kept, or 255 when added";
                    }
                }
        }
}

TEST_P(DvppColor, GreyOfEveryRgbValueIsOpenCvs) {
    Pic src(RT_PIXEL_FORMAT_RGB888, 4096, 4096), dst(RT_PIXEL_FORMAT_GRAY8, 4096, 4096);
    for (uint32_t i = 0; i < (1u << 24); ++i) {
        src.host[3 * size_t(i)] = i >> 16;
        src.host[3 * size_t(i) + 1] = (i >> 8) & 0xff;
        src.host[3 * size_t(i) + 2] = i & 0xff;
    }
    src.upload();
    ASSERT_RT_OK(rtDvppConvertColor(&src.p, &dst.p, RT_COLOR_BT709_FULL, nullptr));  // the matrix plays no part
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    dst.download();
    size_t wrong = 0;
    for (uint32_t i = 0; i < (1u << 24); ++i) wrong += dst.host[i] != ref_grey(i >> 16, (i >> 8) & 0xff, i & 0xff);
    EXPECT_EQ(wrong, 0u);
}

TEST_P(DvppColor, YuvToYuvRearrangesTheChromaExactlyAndYuvToGreyIsTheYPlane) {
    for (rtPixelFormat sf : kYuv) {
        for (rtPixelFormat df : kYuv) {
            SCOPED_TRACE(name(sf) + " -> " + name(df));
            Pic src(sf, 34, 18, 36, 20), dst(df, 34, 18, 0, 22);
            src.random(5);
            src.upload();
            ASSERT_RT_OK(rtDvppConvertColor(&src.p, &dst.p, RT_COLOR_BT601_LIMITED, nullptr));
            ASSERT_RT_OK(rtStreamSynchronize(nullptr));
            dst.download();
            for (uint32_t y = 0; y < 18; ++y)
                for (uint32_t x = 0; x < 34; ++x) {
                    ASSERT_EQ(dst.host[dst.y_at(x, y)], src.host[src.y_at(x, y)]);
                    ASSERT_EQ(dst.host[dst.u_at(x, y)], src.host[src.u_at(x, y)]);
                    ASSERT_EQ(dst.host[dst.v_at(x, y)], src.host[src.v_at(x, y)]);
                }
        }
        Pic src(sf, 34, 18, 36, 0), grey(RT_PIXEL_FORMAT_GRAY8, 34, 18, 35, 0);
        src.random(6);
        src.upload();
        ASSERT_RT_OK(rtDvppConvertColor(&src.p, &grey.p, RT_COLOR_BT601_FULL, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        grey.download();
        for (uint32_t y = 0; y < 18; ++y)
            for (uint32_t x = 0; x < 34; ++x) ASSERT_EQ(grey.host[grey.at(x, y)], src.host[src.y_at(x, y)]);
    }
}

TEST_P(DvppColor, OnlyThePixelsAreWrittenNotTheStridesPadding) {
    for (rtPixelFormat df : {RT_PIXEL_FORMAT_RGB888, RT_PIXEL_FORMAT_BGRA8888, RT_PIXEL_FORMAT_YUV420SP_NV12,
                             RT_PIXEL_FORMAT_YUV420P, RT_PIXEL_FORMAT_GRAY8}) {
        SCOPED_TRACE(name(df));
        const rtPixelFormat sf = is_yuv(df) ? RT_PIXEL_FORMAT_RGB888 : RT_PIXEL_FORMAT_YUV420SP_NV21;
        Pic src(sf, 20, 10), dst(df, 20, 10, 26, 14);
        src.random(9);
        src.upload();
        std::fill(dst.host.begin(), dst.host.end(), 0xa5);
        dst.upload();
        ASSERT_RT_OK(rtDvppConvertColor(&src.p, &dst.p, RT_COLOR_BT601_LIMITED, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        dst.download();
        std::vector<bool> pixel(dst.host.size(), false);
        for (uint32_t y = 0; y < 10; ++y)
            for (uint32_t x = 0; x < 20; ++x)
                if (is_yuv(df)) {
                    pixel[dst.y_at(x, y)] = pixel[dst.u_at(x, y)] = pixel[dst.v_at(x, y)] = true;
                } else {
                    for (int c = 0; c < channels(df); ++c) pixel[dst.at(x, y, c)] = true;
                }
        size_t touched = 0;
        for (size_t i = 0; i < pixel.size(); ++i) touched += !pixel[i] && dst.host[i] != 0xa5;
        EXPECT_EQ(touched, 0u) << "bytes of the padding written";
    }
}

TEST_P(DvppColor, RefusalsNameTheArgumentAndQueueNothing) {
    Pic src(RT_PIXEL_FORMAT_YUV420SP_NV12, 16, 8), dst(RT_PIXEL_FORMAT_RGB888, 16, 8);
    std::fill(dst.host.begin(), dst.host.end(), 7);
    dst.upload();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppConvertColor(nullptr, &dst.p, RT_COLOR_BT601_LIMITED, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppConvertColor: src is NULL"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppConvertColor(&src.p, nullptr, RT_COLOR_BT601_LIMITED, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppConvertColor: dst is NULL"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppConvertColor(&src.p, &dst.p, static_cast<rtColorMatrix>(4), nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppConvertColor: matrix 4 is not an rtColorMatrix"));
    EXPECT_TRUE(contains(last_message(), "RT_COLOR_BT709_LIMITED (3)"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppConvertColor(&src.p, &dst.p, static_cast<rtColorMatrix>(-1), nullptr));

    rtPicture small = dst.p;
    small.width = 14;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppConvertColor(&src.p, &small, RT_COLOR_BT601_LIMITED, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppConvertColor: dst is 14x8, src 16x8 (expected the same size"));
    rtPicture short_size = dst.p;
    short_size.size -= 1;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppConvertColor(&src.p, &short_size, RT_COLOR_BT601_LIMITED, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppConvertColor: dst->size"));
    rtPicture bad_format = dst.p;
    bad_format.format = static_cast<rtPixelFormat>(5);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppConvertColor(&src.p, &bad_format, RT_COLOR_BT601_LIMITED, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppConvertColor: dst->format 5 is not an rtPixelFormat"));
    rtPicture no_data = src.p;
    no_data.data = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppConvertColor(&no_data, &dst.p, RT_COLOR_BT601_LIMITED, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppConvertColor: src->data is NULL"));
    // Memory outside any allocation: refused by the memory checks, naming the picture.
    std::vector<uint8_t> stack_bytes(dst.p.size);
    rtPicture foreign = dst.p;
    foreign.data = stack_bytes.data();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppConvertColor(&src.p, &foreign, RT_COLOR_BT601_LIMITED, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppConvertColor: dst->data"));
    // In place, or overlapping: refused.
    Pic both(RT_PIXEL_FORMAT_RGB888, 16, 8);
    rtPicture alias = both.p;
    alias.format = RT_PIXEL_FORMAT_BGR888;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppConvertColor(&both.p, &alias, RT_COLOR_BT601_LIMITED, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppConvertColor: dst"));
    EXPECT_TRUE(contains(last_message(), "overlaps src"));
    // A bad stream handle.
    EXPECT_NE(rtDvppConvertColor(&src.p, &dst.p, RT_COLOR_BT601_LIMITED, rt_test::garbage_handle<rtStream_t>()),
              RT_SUCCESS);

    ASSERT_RT_OK(rtDeviceSynchronize());
    std::vector<uint8_t> before = dst.host;
    dst.download();
    EXPECT_EQ(dst.host, before) << "a refused call wrote the output";
}

TEST_P(DvppColor, ConversionsCapturedIntoAGraphReplay) {
    rt_test::StreamGuard stream;
    ASSERT_RT_OK(stream.status());
    Pic src(RT_PIXEL_FORMAT_YUV420SP_NV12, 64, 32), rgb(RT_PIXEL_FORMAT_RGB888, 64, 32),
        direct(RT_PIXEL_FORMAT_RGB888, 64, 32), back(RT_PIXEL_FORMAT_YUV420P, 64, 32);
    src.random(11);
    src.upload();
    rgb.upload();  // zeros (fresh memory may hold an earlier test's identical result): what the capture must not touch
    ASSERT_RT_OK(rtDvppConvertColor(&src.p, &direct.p, RT_COLOR_BT709_LIMITED, stream));
    ASSERT_RT_OK(rtStreamSynchronize(stream));
    direct.download();

    ASSERT_RT_OK(rtStreamBeginCapture(stream, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtDvppConvertColor(&src.p, &rgb.p, RT_COLOR_BT709_LIMITED, stream));
    ASSERT_RT_OK(rtDvppConvertColor(&rgb.p, &back.p, RT_COLOR_BT709_LIMITED, stream));
    rt_test::GraphGuard graph(nullptr);
    ASSERT_RT_OK(rtStreamEndCapture(stream, graph.out()));
    rgb.download();
    EXPECT_NE(rgb.host, direct.host) << "captured work ran at capture time";
    rt_test::ExecGuard exec;
    ASSERT_RT_OK(rtGraphInstantiate(exec.out(), graph, 0));
    ASSERT_RT_OK(rtGraphLaunch(exec, stream));
    ASSERT_RT_OK(rtStreamSynchronize(stream));
    rgb.download();
    back.download();
    EXPECT_EQ(rgb.host, direct.host);
    // The second captured conversion ran after the first: its result is the direct conversion of the RGB picture.
    Pic expect(RT_PIXEL_FORMAT_YUV420P, 64, 32);
    ASSERT_RT_OK(rtDvppConvertColor(&direct.p, &expect.p, RT_COLOR_BT709_LIMITED, stream));
    ASSERT_RT_OK(rtStreamSynchronize(stream));
    expect.download();
    EXPECT_EQ(back.host, expect.host);
}

RT_INSTANTIATE_DEVICE_TEST(DvppColor);

/// The reference of normalisation: fma(pixel, 1/std, -mean/std) exactly (the product and sum are exact in double:
/// 8-bit pixel times 24-bit scale, then one add of similar magnitudes), rounded once to float.
float ref_norm(int pixel, float mean, float std) {
    const float scale = 1.0f / std, bias = -(mean / std);
    return static_cast<float>(double(pixel) * double(scale) + double(bias));
}
uint16_t half_bits(float f) {  // round to nearest even, as IEEE binary16
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
    if (ax >= 0x38800000u) return static_cast<uint16_t>(sign | ((ax - 0x38000000u + 0xfffu + ((ax >> 13) & 1u)) >> 13));
    // Subnormal halves: scale to an integer count of 2^-24 and round to even.
    const double v = std::fabs(static_cast<double>(f)) * 16777216.0;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(v)));
}
uint16_t bf16_bits(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

class DvppNormalize : public rt_test::DeviceTest {};

TEST_P(DvppNormalize, EveryDtypeLayoutAndChannelCountMatchesTheReference) {
    const float mean[4] = {123.675f, 116.28f, 103.53f, 127.5f}, stdv[4] = {58.395f, 57.12f, 57.375f, 0.25f};
    const rtDataType dtypes[] = {RT_FLOAT32, RT_FLOAT16, RT_BFLOAT16, RT_UINT8, RT_INT8};
    for (rtPixelFormat f : kPacked)
        for (rtDataType t : dtypes)
            for (int chw : {0, 1}) {
                SCOPED_TRACE(name(f) + " dtype " + std::to_string(t) + (chw ? " CHW" : " HWC"));
                const uint32_t w = 45, h = 13, cn = channels(f);
                Pic src(f, w, h, 47, 0);
                src.random(t * 2 + chw);
                for (size_t i = 0; i < 256 && i < src.host.size(); ++i) src.host[i] = static_cast<uint8_t>(i);
                src.upload();
                const size_t es = rtDataTypeSize(t), n = size_t(cn) * w * h;
                DevBuf out(n * es);
                ASSERT_RT_OK(rtDvppNormalize(&src.p, out.get(), t, chw, mean, stdv, nullptr));
                ASSERT_RT_OK(rtStreamSynchronize(nullptr));
                std::vector<uint8_t> got(n * es);
                ASSERT_RT_OK(rtMemcpy(got.data(), out.get(), got.size(), RT_MEMCPY_DEVICE_TO_HOST));
                for (uint32_t y = 0; y < h; ++y)
                    for (uint32_t x = 0; x < w; ++x)
                        for (uint32_t c = 0; c < cn; ++c) {
                            const float v = ref_norm(src.host[src.at(x, y, c)], mean[c], stdv[c]);
                            const size_t i = chw ? (size_t(c) * h + y) * w + x : (size_t(y) * w + x) * cn + c;
                            const uint8_t* g = &got[i * es];
                            if (t == RT_FLOAT32) {
                                float o;
                                std::memcpy(&o, g, 4);
                                ASSERT_EQ(o, v) << x << "," << y << "," << c;
                            } else if (t == RT_FLOAT16 || t == RT_BFLOAT16) {
                                uint16_t o;
                                std::memcpy(&o, g, 2);
                                ASSERT_EQ(o, t == RT_FLOAT16 ? half_bits(v) : bf16_bits(v));
                            } else if (t == RT_UINT8) {
                                const float c = std::min(std::max(v, 0.0f), 255.0f);
                                ASSERT_EQ(g[0], static_cast<uint8_t>(std::nearbyint(c)));
                            } else {
                                ASSERT_EQ(static_cast<int8_t>(g[0]),
                                          static_cast<int8_t>(std::nearbyint(std::min(std::max(v, -128.0f), 127.0f))));
                            }
                        }
            }
}

TEST_P(DvppNormalize, Float32IsWithinAnUlpOfTheTermsOfMeanAndStd) {
    // (pixel - mean) / std computed the fma way: exact to one rounding of the fma plus those of 1/std and mean/std.
    Pic src(RT_PIXEL_FORMAT_GRAY8, 256, 1);
    for (int i = 0; i < 256; ++i) src.host[i] = static_cast<uint8_t>(i);
    src.upload();
    DevBuf out(256 * 4);
    for (float m : {0.0f, 0.5f, 123.675f, 255.0f, -3.0f})
        for (float s : {1.0f, 58.395f, 255.0f, 0.0039f, -2.0f}) {
            ASSERT_RT_OK(rtDvppNormalize(&src.p, out.get(), RT_FLOAT32, 1, &m, &s, nullptr));
            ASSERT_RT_OK(rtStreamSynchronize(nullptr));
            float got[256];
            ASSERT_RT_OK(rtMemcpy(got, out.get(), sizeof got, RT_MEMCPY_DEVICE_TO_HOST));
            for (int i = 0; i < 256; ++i) {
                const double exact = (i - double(m)) / double(s);
                const double terms = std::max(std::fabs(i / double(s)), std::fabs(double(m) / double(s)));
                EXPECT_LE(std::fabs(got[i] - exact), 2 * terms * std::numeric_limits<float>::epsilon())
                    << "pixel " << i << " mean " << m << " std " << s;
            }
        }
}

TEST_P(DvppNormalize, NullMeanAndStdAreZeroAndOne) {
    Pic src(RT_PIXEL_FORMAT_RGB888, 100, 3);
    src.random(4);
    src.upload();
    DevBuf f32(src.host.size() * 4), u8(src.host.size());
    ASSERT_RT_OK(rtDvppNormalize(&src.p, f32.get(), RT_FLOAT32, 0, nullptr, nullptr, nullptr));
    ASSERT_RT_OK(rtDvppNormalize(&src.p, u8.get(), RT_UINT8, 0, nullptr, nullptr, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    std::vector<float> got(src.host.size());
    std::vector<uint8_t> same(src.host.size());
    ASSERT_RT_OK(rtMemcpy(got.data(), f32.get(), got.size() * 4, RT_MEMCPY_DEVICE_TO_HOST));
    ASSERT_RT_OK(rtMemcpy(same.data(), u8.get(), same.size(), RT_MEMCPY_DEVICE_TO_HOST));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], float(src.host[i]));
    EXPECT_EQ(same, src.host) << "uint8 with mean 0, std 1 is a copy";
}

TEST_P(DvppNormalize, RefusalsNameTheArgumentAndQueueNothing) {
    Pic src(RT_PIXEL_FORMAT_RGB888, 8, 4);
    DevBuf out(8 * 4 * 3 * 4);
    const float mean[3] = {1, 2, 3};
    struct Bad { float std[3]; const char* text; };
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const Bad bad[] = {{{1, 0, 1}, "rtDvppNormalize: std[1] is 0 (expected a finite, non-zero deviation)"},
                       {{1, 1, inf}, "rtDvppNormalize: std[2] is inf"},
                       {{nan, 1, 1}, "rtDvppNormalize: std[0] is nan"},
                       {{1, 1e-39f, 1}, "rtDvppNormalize: std[1] 1e-39 with rtDvppNormalize: mean[1] 2 overflows"}};
    for (const Bad& b : bad) {
        SCOPED_TRACE(b.text);
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppNormalize(&src.p, out.get(), RT_FLOAT32, 1, mean, b.std, nullptr));
        EXPECT_TRUE(contains(last_message(), b.text));
    }
    const float bad_mean[3] = {0, nan, 0};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppNormalize(&src.p, out.get(), RT_FLOAT32, 1, bad_mean, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppNormalize: mean[1] is nan (expected a finite mean)"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppNormalize(&src.p, out.get(), static_cast<rtDataType>(3), 1, nullptr, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppNormalize: dtype 3 is"));
    EXPECT_TRUE(contains(last_message(), "RT_FLOAT32 (7)"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppNormalize(&src.p, nullptr, RT_FLOAT32, 1, nullptr, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppNormalize: dst is NULL"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppNormalize(nullptr, out.get(), RT_FLOAT32, 1, nullptr, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppNormalize: src is NULL"));
    Pic nv12(RT_PIXEL_FORMAT_YUV420SP_NV12, 8, 4);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppNormalize(&nv12.p, out.get(), RT_FLOAT32, 1, nullptr, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppNormalize: src->format is YUV420SP_NV12 (expected a packed format"));
    // An output allocation too small for channels x width x height elements: refused, naming dst.
    DevBuf tiny(8 * 4 * 3 * 4 - 1);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppNormalize(&src.p, tiny.get(), RT_FLOAT32, 1, nullptr, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppNormalize"));
    EXPECT_TRUE(contains(last_message(), "dst"));
    // In place: refused.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppNormalize(&src.p, src.p.data, RT_UINT8, 0, nullptr, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "overlaps src"));
}

RT_INSTANTIATE_DEVICE_TEST(DvppNormalize);

}  // namespace
