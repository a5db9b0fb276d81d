// test_dvpp_resize.cpp — rtDvppResize, rtDvppCropResize, rtDvppCropResizePaste and rtDvppBatchCropResize on every
// device: results against a reference written here from OpenCV's formulas in double (bilinear and nearest exactly,
// area within 1), every format and plane, crops, letterboxes, strides, batches, capture; every refusal with its
// message, and refused calls queue nothing.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/dvpp.h"
#include "runtime/graph.h"
#include "test_util.hpp"

namespace {

using rt_test::contains;
using rt_test::DevBuf;
using rt_test::DeviceTest;
using rt_test::last_message;

/// One plane of a host image: `w` x `h` pixels of `c` bytes, rows `pitch` bytes apart from `offset`.
struct PlaneView {
    size_t offset;
    uint32_t w, h, c;
    size_t pitch;
};

/// A host picture laid out as dvpp.h's header says (written out here, independently of the library).
struct Image {
    rtPixelFormat format;
    uint32_t w, h, ws, hs;
    std::vector<uint8_t> bytes;

    Image(rtPixelFormat f, uint32_t width, uint32_t height, uint32_t width_stride = 0, uint32_t height_stride = 0)
        : format(f), w(width), h(height), ws(width_stride ? width_stride : width),
          hs(height_stride ? height_stride : height) {
        size_t n = 0;
        for (const PlaneView& p : planes()) n = std::max(n, p.offset + p.pitch * plane_rows(p));
        bytes.assign(n, 0);
    }
    bool yuv() const {
        return format == RT_PIXEL_FORMAT_YUV420SP_NV12 || format == RT_PIXEL_FORMAT_YUV420SP_NV21 ||
               format == RT_PIXEL_FORMAT_YUV420P;
    }
    /// Rows a plane occupies (its stride in rows).
    uint32_t plane_rows(const PlaneView& p) const { return p.offset == 0 ? hs : hs / 2; }
    std::vector<PlaneView> planes() const {
        switch (format) {
            case RT_PIXEL_FORMAT_GRAY8: return {{0, w, h, 1, ws}};
            case RT_PIXEL_FORMAT_RGB888:
            case RT_PIXEL_FORMAT_BGR888: return {{0, w, h, 3, size_t(ws) * 3}};
            case RT_PIXEL_FORMAT_RGBA8888:
            case RT_PIXEL_FORMAT_BGRA8888: return {{0, w, h, 4, size_t(ws) * 4}};
            case RT_PIXEL_FORMAT_YUV420SP_NV12:
            case RT_PIXEL_FORMAT_YUV420SP_NV21:
                return {{0, w, h, 1, ws}, {size_t(ws) * hs, w / 2, h / 2, 2, ws}};
            case RT_PIXEL_FORMAT_YUV420P: {
                const size_t y = size_t(ws) * hs, c = size_t(ws / 2) * (hs / 2);
                return {{0, w, h, 1, ws}, {y, w / 2, h / 2, 1, ws / 2}, {y + c, w / 2, h / 2, 1, ws / 2}};
            }
        }
        return {};
    }
    uint8_t* at(const PlaneView& p, uint32_t x, uint32_t y) { return &bytes[p.offset + y * p.pitch + x * p.c]; }
    const uint8_t* at(const PlaneView& p, uint32_t x, uint32_t y) const {
        return &bytes[p.offset + y * p.pitch + x * p.c];
    }
    void randomize(std::mt19937& rng) {
        for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    }
    /// A smooth picture (gradients and a ripple): the content INTER_LINEAR-like comparisons are made on.
    void smooth(uint32_t seed) {
        for (const PlaneView& p : planes())
            for (uint32_t y = 0; y < p.h; ++y)
                for (uint32_t x = 0; x < p.w; ++x)
                    for (uint32_t c = 0; c < p.c; ++c)
                        at(p, x, y)[c] = static_cast<uint8_t>(
                            127.5 + 120 * std::sin(0.05 * x + 0.031 * y * (c + 1) + seed) * std::cos(0.02 * y));
    }
};

// ---------------------------------------------------------------- the reference (OpenCV's formulas, in double)

/// OpenCV's step for an axis: 1 / inv_scale with inv_scale = (double)dst / src.
double step_of(uint32_t src, uint32_t dst) {
    volatile double inv = static_cast<double>(dst) / src;  // volatile: no contraction or extended precision
    volatile double step = 1.0 / inv;
    return step;
}

/// INTER_LINEAR_EXACT's taps of one axis: (first index, second index, 8-bit weight of the second).
struct RefTap {
    uint32_t i0, i1, w1;
};
std::vector<RefTap> ref_linear_taps(uint32_t src, uint32_t dst) {
    const double step = step_of(src, dst);
    std::vector<RefTap> t(dst);
    for (uint32_t x = 0; x < dst; ++x) {
        volatile double p = step * (x + 0.5);  // rounded before the subtraction, as OpenCV's softdouble
        const double f = p - 0.5;
        const double i = std::floor(f);
        if (i >= 0 && src > 1) {
            if (i < src - 1) {
                const uint32_t w = static_cast<uint32_t>(std::nearbyint((f - i) * 256));  // half to even
                t[x] = {static_cast<uint32_t>(i), static_cast<uint32_t>(i) + 1, w};
            } else {
                t[x] = {src - 1, src - 1, 0};
            }
        } else {
            t[x] = {0, 0, 0};
        }
    }
    return t;
}
std::vector<uint32_t> ref_nearest_index(uint32_t src, uint32_t dst) {
    const double step = step_of(src, dst);
    std::vector<uint32_t> v(dst);
    for (uint32_t x = 0; x < dst; ++x) {
        volatile double p = x * step;
        v[x] = std::min(static_cast<uint32_t>(std::floor(p)), src - 1);
    }
    return v;
}

/// The reference resize of plane `sp` of `s` (its crop `cr`) into plane `dp` of `d` (rectangle `pr`).
void ref_resize(const Image& s, const PlaneView& sp, rtRect cr, Image& d, const PlaneView& dp, rtRect pr,
                rtInterpolation mode) {
    const uint32_t C = sp.c;
    auto src = [&](uint32_t x, uint32_t y, uint32_t c) -> double { return s.at(sp, cr.x + x, cr.y + y)[c]; };
    auto put = [&](uint32_t x, uint32_t y, uint32_t c, double v) {
        d.at(dp, pr.x + x, pr.y + y)[c] = static_cast<uint8_t>(v);
    };
    if (mode == RT_INTERP_BILINEAR) {
        const auto tx = ref_linear_taps(cr.width, pr.width), ty = ref_linear_taps(cr.height, pr.height);
        for (uint32_t y = 0; y < pr.height; ++y)
            for (uint32_t x = 0; x < pr.width; ++x)
                for (uint32_t c = 0; c < C; ++c) {
                    const RefTap a = tx[x], b = ty[y];
                    const double h0 = (256 - a.w1) * src(a.i0, b.i0, c) + a.w1 * src(a.i1, b.i0, c);
                    const double h1 = (256 - a.w1) * src(a.i0, b.i1, c) + a.w1 * src(a.i1, b.i1, c);
                    put(x, y, c, std::floor(((256 - b.w1) * h0 + b.w1 * h1 + 32768) / 65536));
                }
    } else if (mode == RT_INTERP_NEAREST) {
        const auto ix = ref_nearest_index(cr.width, pr.width), iy = ref_nearest_index(cr.height, pr.height);
        for (uint32_t y = 0; y < pr.height; ++y)
            for (uint32_t x = 0; x < pr.width; ++x)
                for (uint32_t c = 0; c < C; ++c) put(x, y, c, src(ix[x], iy[y], c));
    } else if (pr.width <= cr.width && pr.height <= cr.height) {
        // Area averaging: each source pixel weighs the part of the destination pixel it covers.
        const double fx = double(cr.width) / pr.width, fy = double(cr.height) / pr.height;
        auto overlap = [](double lo, double hi, uint32_t s) { return std::max(0.0, std::min(hi, s + 1.0) - std::max(lo, double(s))); };
        for (uint32_t y = 0; y < pr.height; ++y)
            for (uint32_t x = 0; x < pr.width; ++x)
                for (uint32_t c = 0; c < C; ++c) {
                    double sum = 0;
                    for (uint32_t sy = uint32_t(y * fy); sy < cr.height && sy < (y + 1) * fy; ++sy)
                        for (uint32_t sx = uint32_t(x * fx); sx < cr.width && sx < (x + 1) * fx; ++sx)
                            sum += overlap(x * fx, (x + 1) * fx, sx) * overlap(y * fy, (y + 1) * fy, sy) *
                                   src(sx, sy, c);
                    put(x, y, c, std::nearbyint(sum / (fx * fy)));
                }
    } else {
        // Growing with INTER_AREA: OpenCV's area-weighted linear (the next pixel weighs the part past the edge).
        auto taps = [](uint32_t src_n, uint32_t dst_n) {
            const double step = step_of(src_n, dst_n), inv = double(dst_n) / src_n;
            std::vector<std::pair<uint32_t, double>> t(dst_n);
            for (uint32_t x = 0; x < dst_n; ++x) {
                volatile double p = x * step;
                uint32_t s = static_cast<uint32_t>(std::floor(p));
                float f = static_cast<float>((x + 1) - (s + 1) * inv);
                f = f <= 0 ? 0.f : f - std::floor(f);
                if (s >= src_n - 1) s = src_n - 1, f = 0;
                t[x] = {s, f};
            }
            return t;
        };
        const auto tx = taps(cr.width, pr.width), ty = taps(cr.height, pr.height);
        for (uint32_t y = 0; y < pr.height; ++y)
            for (uint32_t x = 0; x < pr.width; ++x)
                for (uint32_t c = 0; c < C; ++c) {
                    const auto [x0, ax] = tx[x];
                    const auto [y0, ay] = ty[y];
                    const uint32_t x1 = ax > 0 ? x0 + 1 : x0, y1 = ay > 0 ? y0 + 1 : y0;
                    const double v = (1 - ay) * ((1 - ax) * src(x0, y0, c) + ax * src(x1, y0, c)) +
                                     ay * ((1 - ax) * src(x0, y1, c) + ax * src(x1, y1, c));
                    put(x, y, c, std::nearbyint(v));
                }
    }
}

/// The reference of a whole crop-resize-paste: every plane (4:2:0 chroma at half the size), the fill outside.
void ref_crop_resize_paste(const Image& s, rtRect crop, Image& d, rtRect paste, const uint8_t fill[4],
                           rtInterpolation mode) {
    const auto sp = s.planes(), dp = d.planes();
    for (size_t p = 0; p < sp.size(); ++p) {
        const uint32_t k = p == 0 ? 1 : 2;
        const rtRect cr{crop.x / k, crop.y / k, crop.width / k, crop.height / k};
        const rtRect pr{paste.x / k, paste.y / k, paste.width / k, paste.height / k};
        uint8_t f[4] = {fill[0], fill[1], fill[2], fill[3]};
        if (d.yuv()) {
            if (p == 0) f[0] = fill[0];
            else if (d.format == RT_PIXEL_FORMAT_YUV420SP_NV12) f[0] = fill[1], f[1] = fill[2];
            else if (d.format == RT_PIXEL_FORMAT_YUV420SP_NV21) f[0] = fill[2], f[1] = fill[1];
            else f[0] = fill[p];
        }
        for (uint32_t y = 0; y < dp[p].h; ++y)
            for (uint32_t x = 0; x < dp[p].w; ++x)
                for (uint32_t c = 0; c < dp[p].c; ++c) d.at(dp[p], x, y)[c] = f[c];
        ref_resize(s, sp[p], cr, d, dp[p], pr, mode);
    }
}

// ---------------------------------------------------------------- device pictures

/// An Image's bytes in device memory, and its descriptor.
struct DevPicture {
    DevBuf mem;
    rtPicture pic{};
    explicit DevPicture(const Image& img) : mem(img.bytes.size()) {
        EXPECT_RT_OK(rtMemcpy(mem.get(), img.bytes.data(), img.bytes.size(), RT_MEMCPY_HOST_TO_DEVICE));
        pic.data = mem.get();
        pic.size = img.bytes.size();
        pic.format = img.format;
        pic.width = img.w;
        pic.height = img.h;
        pic.width_stride = img.ws;
        pic.height_stride = img.hs;
    }
    std::vector<uint8_t> read() const {
        std::vector<uint8_t> out(mem.size());
        EXPECT_RT_OK(rtMemcpy(out.data(), mem.get(), out.size(), RT_MEMCPY_DEVICE_TO_HOST));
        return out;
    }
};

/// The largest difference between two byte vectors of one size.
int max_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
    int m = a.size() == b.size() ? 0 : 256;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(int(a[i]) - int(b[i])));
    return m;
}

const rtPixelFormat kPacked[] = {RT_PIXEL_FORMAT_GRAY8, RT_PIXEL_FORMAT_RGB888, RT_PIXEL_FORMAT_BGR888,
                                 RT_PIXEL_FORMAT_RGBA8888, RT_PIXEL_FORMAT_BGRA8888};
const rtPixelFormat k420[] = {RT_PIXEL_FORMAT_YUV420SP_NV12, RT_PIXEL_FORMAT_YUV420SP_NV21, RT_PIXEL_FORMAT_YUV420P};
const rtInterpolation kModes[] = {RT_INTERP_NEAREST, RT_INTERP_BILINEAR, RT_INTERP_AREA};

const char* mode_name(rtInterpolation m) {
    return m == RT_INTERP_NEAREST ? "nearest" : m == RT_INTERP_BILINEAR ? "bilinear" : "area";
}

/// Runs one crop-resize-paste on the device and compares it with the reference: exact for nearest and bilinear,
/// within 1 for area. Returns the largest difference.
int check_one(const Image& src, const rtRect* crop, Image dst, const rtRect* paste, const uint8_t* fill,
              rtInterpolation mode) {
    DevPicture s(src), d(dst);
    EXPECT_RT_OK(rtDvppCropResizePaste(&s.pic, crop, &d.pic, paste, fill, mode, nullptr));
    EXPECT_RT_OK(rtStreamSynchronize(nullptr));
    const uint8_t zeros[4] = {0, 0, 0, 0};
    ref_crop_resize_paste(src, crop ? *crop : rtRect{0, 0, src.w, src.h}, dst,
                          paste ? *paste : rtRect{0, 0, dst.w, dst.h}, fill ? fill : zeros, mode);
    const int diff = max_diff(d.read(), dst.bytes);
    EXPECT_LE(diff, mode == RT_INTERP_AREA ? 1 : 0) << mode_name(mode);
    return diff;
}

class DvppResize : public DeviceTest {};

TEST_P(DvppResize, WhereOpenCVsDoubleRoundingDecides) {
    // Sizes whose exact positions land on a weight's half-way point (bilinear) or an integer (nearest) and where
    // OpenCV's double step pushes them up (309 -> 768, 206 -> 512) or down (279 -> 768, 186 -> 512; nearest
    // 154 -> 198, 147 -> 189, 198 -> 110), hundreds of columns each: an exact-rational resize differs there.
    std::mt19937 rng(77);
    const uint32_t cases[][4] = {{309, 279, 768, 768}, {206, 186, 512, 512}, {279, 309, 768, 768},
                                 {154, 147, 198, 189}, {198, 154, 110, 198}};
    for (const auto& c : cases)
        for (rtPixelFormat f : {RT_PIXEL_FORMAT_GRAY8, RT_PIXEL_FORMAT_RGB888})
            for (rtInterpolation m : {RT_INTERP_BILINEAR, RT_INTERP_NEAREST, RT_INTERP_AREA}) {
                SCOPED_TRACE(std::to_string(c[0]) + "x" + std::to_string(c[1]) + " -> " + std::to_string(c[2]) + "x" +
                             std::to_string(c[3]) + " " + mode_name(m));
                Image src(f, c[0], c[1]);
                src.randomize(rng);
                check_one(src, nullptr, Image(f, c[2], c[3]), nullptr, nullptr, m);
            }
}

TEST_P(DvppResize, EqualsOpenCVsFormulasOverManySizesEveryPackedFormat) {
    std::mt19937 rng(1234);
    auto dim = [&]() -> uint32_t {
        const uint32_t r = rng() % 10;
        return r < 2 ? 1 + rng() % 4 : r < 6 ? 1 + rng() % 40 : 1 + rng() % 300;
    };
    for (int i = 0; i < 60; ++i) {
        const rtPixelFormat f = kPacked[i % 5];
        Image src(f, dim(), dim());
        src.randomize(rng);
        // Ratios 1/32 .. 16, and sizes that are multiples of 256 (where OpenCV's double rounding decides ties).
        uint32_t w, h;
        if (i % 4 == 0) {
            w = 256 * (1 + rng() % 2);
            h = 256;
        } else {
            const double r = std::pow(2.0, -5.0 + 9.0 * (rng() % 1000) / 1000.0);
            w = std::max<uint32_t>(1, std::min<uint32_t>(600, uint32_t(src.w * r)));
            h = std::max<uint32_t>(1, std::min<uint32_t>(600, uint32_t(src.h * r)));
        }
        for (rtInterpolation m : kModes) {
            SCOPED_TRACE(std::to_string(src.w) + "x" + std::to_string(src.h) + " -> " + std::to_string(w) + "x" +
                         std::to_string(h) + " format " + std::to_string(f) + " " + mode_name(m));
            check_one(src, nullptr, Image(f, w, h), nullptr, nullptr, m);
        }
    }
}

TEST_P(DvppResize, FourTwoZeroFormatsResizeEveryPlane) {
    std::mt19937 rng(99);
    const uint32_t sizes[][4] = {{64, 48, 32, 24}, {2, 2, 18, 10}, {100, 60, 256, 256}, {38, 94, 2, 2},
                                 {640, 360, 224, 224}};
    for (rtPixelFormat f : k420)
        for (const auto& sz : sizes)
            for (rtInterpolation m : kModes) {
                SCOPED_TRACE(std::to_string(f) + " " + std::to_string(sz[0]) + "x" + std::to_string(sz[1]) + " -> " +
                             std::to_string(sz[2]) + "x" + std::to_string(sz[3]) + " " + mode_name(m));
                Image src(f, sz[0], sz[1]);
                src.randomize(rng);
                check_one(src, nullptr, Image(f, sz[2], sz[3]), nullptr, nullptr, m);
            }
}

TEST_P(DvppResize, IdentityIsACopy) {
    std::mt19937 rng(5);
    for (rtPixelFormat f : {RT_PIXEL_FORMAT_GRAY8, RT_PIXEL_FORMAT_RGB888, RT_PIXEL_FORMAT_RGBA8888,
                            RT_PIXEL_FORMAT_YUV420SP_NV12, RT_PIXEL_FORMAT_YUV420P})
        for (rtInterpolation m : kModes) {
            Image src(f, 46, 30);
            src.randomize(rng);
            DevPicture s(src), d(Image(f, 46, 30));
            ASSERT_RT_OK(rtDvppResize(&s.pic, &d.pic, m, nullptr));
            ASSERT_RT_OK(rtStreamSynchronize(nullptr));
            EXPECT_EQ(d.read(), src.bytes) << "format " << f << " " << mode_name(m);
        }
}

TEST_P(DvppResize, CropResizeEqualsResizingTheCroppedPicture) {
    std::mt19937 rng(7);
    Image src(RT_PIXEL_FORMAT_RGB888, 200, 150);
    src.randomize(rng);
    const rtRect crops[] = {{0, 0, 200, 150}, {10, 20, 50, 40}, {199, 0, 1, 150}, {0, 149, 200, 1}, {37, 11, 3, 2}};
    for (const rtRect& c : crops)
        for (rtInterpolation m : kModes) {
            SCOPED_TRACE(std::to_string(c.x) + "," + std::to_string(c.y) + " " + std::to_string(c.width) + "x" +
                         std::to_string(c.height) + " " + mode_name(m));
            // The crop on its own, as a picture of its own.
            Image alone(RT_PIXEL_FORMAT_RGB888, c.width, c.height);
            for (uint32_t y = 0; y < c.height; ++y)
                std::memcpy(alone.at(alone.planes()[0], 0, y), src.at(src.planes()[0], c.x, y + c.y), c.width * 3);
            DevPicture s(src), a(alone), d1(Image(RT_PIXEL_FORMAT_RGB888, 33, 17)),
                d2(Image(RT_PIXEL_FORMAT_RGB888, 33, 17));
            ASSERT_RT_OK(rtDvppCropResize(&s.pic, &c, &d1.pic, m, nullptr));
            ASSERT_RT_OK(rtDvppResize(&a.pic, &d2.pic, m, nullptr));
            ASSERT_RT_OK(rtStreamSynchronize(nullptr));
            EXPECT_EQ(d1.read(), d2.read());
            check_one(src, &c, Image(RT_PIXEL_FORMAT_RGB888, 33, 17), nullptr, nullptr, m);
        }
}

TEST_P(DvppResize, LetterboxFillsAroundThePasteRectangle) {
    std::mt19937 rng(11);
    const uint8_t fill[4] = {114, 20, 200, 7};
    for (rtPixelFormat f : {RT_PIXEL_FORMAT_RGB888, RT_PIXEL_FORMAT_BGRA8888, RT_PIXEL_FORMAT_GRAY8,
                            RT_PIXEL_FORMAT_YUV420SP_NV12, RT_PIXEL_FORMAT_YUV420SP_NV21, RT_PIXEL_FORMAT_YUV420P}) {
        SCOPED_TRACE("format " + std::to_string(f));
        Image src(f, 160, 90);
        src.randomize(rng);
        const rtRect crop{20, 10, 120, 70}, paste{0, 46, 128, 36};  // 128x128 letterbox, the band in the middle
        check_one(src, &crop, Image(f, 128, 128), &paste, fill, RT_INTERP_BILINEAR);
        check_one(src, nullptr, Image(f, 128, 128), &paste, nullptr, RT_INTERP_NEAREST);  // NULL fill: zeros
        const rtRect corner{64, 64, 64, 64};
        check_one(src, nullptr, Image(f, 128, 128), &corner, fill, RT_INTERP_AREA);
    }
    // The fill value is each channel in the format's order: BGRA's first byte is fill[0].
    Image src(RT_PIXEL_FORMAT_BGRA8888, 4, 4);
    DevPicture s(src), d(Image(RT_PIXEL_FORMAT_BGRA8888, 8, 4));
    const rtRect right{4, 0, 4, 4};
    ASSERT_RT_OK(rtDvppCropResizePaste(&s.pic, nullptr, &d.pic, &right, fill, RT_INTERP_BILINEAR, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    const auto out = d.read();
    EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 4), std::vector<uint8_t>(fill, fill + 4));
    EXPECT_EQ(out[4 * 4], 0);  // the pasted picture (zeros) starts at x = 4
}

TEST_P(DvppResize, StridesArePaddingNeverReadAsPixelsNorWritten) {
    std::mt19937 rng(13);
    for (rtPixelFormat f : {RT_PIXEL_FORMAT_RGB888, RT_PIXEL_FORMAT_GRAY8, RT_PIXEL_FORMAT_YUV420SP_NV12}) {
        SCOPED_TRACE("format " + std::to_string(f));
        Image src(f, 50, 40, 64, 48);
        src.randomize(rng);
        Image dst(f, 30, 20, 40, 26);
        for (auto& b : dst.bytes) b = 0xA5;  // padding the resize must leave alone
        DevPicture d(dst);
        DevPicture s(src);
        ASSERT_RT_OK(rtDvppResize(&s.pic, &d.pic, RT_INTERP_BILINEAR, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        Image expected = dst;
        const uint8_t zeros[4] = {};
        ref_crop_resize_paste(src, {0, 0, 50, 40}, expected, {0, 0, 30, 20}, zeros, RT_INTERP_BILINEAR);
        EXPECT_EQ(d.read(), expected.bytes);
        // And a source whose padding holds other values gives the same result.
        Image other = src;
        for (const PlaneView& p : other.planes())
            for (uint32_t y = 0; y < other.plane_rows(p); ++y)
                for (size_t x = (y < p.h ? size_t(p.w) * p.c : 0); x < p.pitch; ++x) other.bytes[p.offset + y * p.pitch + x] ^= 0xFF;
        DevPicture s2(other), d2(dst);
        ASSERT_RT_OK(rtDvppResize(&s2.pic, &d2.pic, RT_INTERP_BILINEAR, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        EXPECT_EQ(d2.read(), expected.bytes);
    }
}

TEST_P(DvppResize, BatchOfVaryingSizesEqualsOneCallPerCrop) {
    std::mt19937 rng(17);
    Image a(RT_PIXEL_FORMAT_RGB888, 120, 80), b(RT_PIXEL_FORMAT_RGB888, 33, 200);
    a.randomize(rng);
    b.randomize(rng);
    DevPicture sa(a), sb(b);
    const rtPicture srcs[] = {sa.pic, sb.pic};
    const uint32_t per_src[] = {3, 2};
    const rtRect crops[] = {{0, 0, 120, 80}, {5, 5, 17, 9}, {100, 60, 20, 20}, {0, 0, 33, 200}, {1, 190, 32, 10}};
    const uint32_t sizes[][2] = {{64, 64}, {224, 224}, {7, 3}, {16, 100}, {1, 1}};
    std::vector<std::unique_ptr<DevPicture>> outs;
    std::vector<rtPicture> dsts;
    for (const auto& s : sizes) {
        outs.push_back(std::make_unique<DevPicture>(Image(RT_PIXEL_FORMAT_RGB888, s[0], s[1])));
        dsts.push_back(outs.back()->pic);
    }
    for (rtInterpolation m : kModes) {
        ASSERT_RT_OK(rtDvppBatchCropResize(srcs, 2, per_src, crops, dsts.data(), m, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        for (size_t k = 0; k < 5; ++k) {
            SCOPED_TRACE("crop " + std::to_string(k) + " " + mode_name(m));
            const Image& s = k < 3 ? a : b;
            Image expected(RT_PIXEL_FORMAT_RGB888, sizes[k][0], sizes[k][1]);
            const uint8_t zeros[4] = {};
            ref_crop_resize_paste(s, crops[k], expected, {0, 0, sizes[k][0], sizes[k][1]}, zeros, m);
            EXPECT_LE(max_diff(outs[k]->read(), expected.bytes), m == RT_INTERP_AREA ? 1 : 0);
        }
    }
    // crops_per_src NULL: one crop each; crops NULL: each picture whole.
    ASSERT_RT_OK(rtDvppBatchCropResize(srcs, 2, nullptr, nullptr, dsts.data(), RT_INTERP_BILINEAR, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    Image whole_b(RT_PIXEL_FORMAT_RGB888, 224, 224);
    const uint8_t zeros[4] = {};
    ref_crop_resize_paste(b, {0, 0, 33, 200}, whole_b, {0, 0, 224, 224}, zeros, RT_INTERP_BILINEAR);
    EXPECT_EQ(outs[1]->read(), whole_b.bytes);
    // An empty batch does nothing.
    EXPECT_RT_OK(rtDvppBatchCropResize(nullptr, 0, nullptr, nullptr, nullptr, RT_INTERP_BILINEAR, nullptr));
}

TEST_P(DvppResize, OnAStreamAndCapturedIntoAGraph) {
    std::mt19937 rng(19);
    Image src(RT_PIXEL_FORMAT_RGB888, 96, 64);
    src.randomize(rng);
    DevPicture s(src), d(Image(RT_PIXEL_FORMAT_RGB888, 40, 40)), ref(Image(RT_PIXEL_FORMAT_RGB888, 40, 40));
    rt_test::StreamGuard stream;
    ASSERT_RT_OK(stream.status());
    const rtRect paste{0, 5, 40, 30};
    const uint8_t fill[4] = {1, 2, 3, 0};
    ASSERT_RT_OK(rtDvppCropResizePaste(&s.pic, nullptr, &ref.pic, &paste, fill, RT_INTERP_BILINEAR, stream));
    ASSERT_RT_OK(rtStreamSynchronize(stream));

    rt_test::GraphGuard graph(nullptr);
    ASSERT_RT_OK(rtStreamBeginCapture(stream, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtDvppCropResizePaste(&s.pic, nullptr, &d.pic, &paste, fill, RT_INTERP_BILINEAR, stream));
    ASSERT_RT_OK(rtStreamEndCapture(stream, graph.out()));
    rt_test::ExecGuard exec;
    ASSERT_RT_OK(rtGraphInstantiate(exec.out(), graph, 0));
    for (int i = 0; i < 3; ++i) {
        ASSERT_RT_OK(rtMemset(d.mem.get(), 0, d.mem.size()));
        ASSERT_RT_OK(rtGraphLaunch(exec, stream));
        ASSERT_RT_OK(rtStreamSynchronize(stream));
        EXPECT_EQ(d.read(), ref.read()) << "replay " << i;
    }
}

// ---------------------------------------------------------------- refusals

/// A refused call leaves its destination as it was (nothing was queued).
class DvppResizeErrors : public DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        std::mt19937 rng(23);
        src_img.randomize(rng);
        src = std::make_unique<DevPicture>(src_img);
        dst = std::make_unique<DevPicture>(Image(RT_PIXEL_FORMAT_RGB888, 16, 16));
    }
    void expect_untouched() {
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        EXPECT_EQ(dst->read(), std::vector<uint8_t>(dst->mem.size(), 0)) << "a refused call queued work";
    }
    Image src_img{RT_PIXEL_FORMAT_RGB888, 32, 24};
    std::unique_ptr<DevPicture> src, dst;
};

TEST_P(DvppResizeErrors, NullPicturesAreRefusedNamingThem) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppResize(nullptr, &dst->pic, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppResize: src is NULL"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppResize(&src->pic, nullptr, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppResize: dst is NULL"));
    rtPicture p = dst->pic;
    p.data = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppCropResize(&src->pic, nullptr, &p, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppCropResize: dst->data is NULL"));
    expect_untouched();
}

TEST_P(DvppResizeErrors, BadDescriptorsAndInterpolationAreRefused) {
    rtPicture p = dst->pic;
    p.size = 10;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppResize(&src->pic, &p, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppResize: dst->size 10 is below the 768 bytes"));
    p = dst->pic;
    p.width_stride = 8;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppResize(&src->pic, &p, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "dst->width_stride 8 is below width 16"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppResize(&src->pic, &dst->pic, static_cast<rtInterpolation>(7), nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppResize: interpolation 7 is not an rtInterpolation"));
    // Memory that is not the device's.
    std::vector<uint8_t> host(src->mem.size());
    p = src->pic;
    p.data = host.data();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppResize(&p, &dst->pic, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppResize"));
    expect_untouched();
}

TEST_P(DvppResizeErrors, FormatsMustMatch) {
    DevPicture bgr(Image(RT_PIXEL_FORMAT_BGR888, 16, 16));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppResize(&src->pic, &bgr.pic, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppResize: dst->format BGR888 differs from src->format RGB888"));
    EXPECT_TRUE(contains(last_message(), "rtDvppConvertColor"));
    expect_untouched();
}

TEST_P(DvppResizeErrors, RectanglesOutsideThePictureAreRefusedNamingTheField) {
    rtRect crop{30, 0, 4, 4};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppCropResize(&src->pic, &crop, &dst->pic, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppCropResize: crop->x 30 + crop->width 4 = 34 is beyond the picture's width 32"));
    crop = {0, 0, 0, 4};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppCropResize(&src->pic, &crop, &dst->pic, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "crop->width is 0"));
    const rtRect paste{0, 10, 16, 7};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppCropResizePaste(&src->pic, nullptr, &dst->pic, &paste, nullptr, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppCropResizePaste: paste->y 10 + paste->height 7 = 17 is beyond"));
    // 4:2:0 rectangles must be even.
    DevPicture nv12(Image(RT_PIXEL_FORMAT_YUV420SP_NV12, 32, 24)), nv12_out(Image(RT_PIXEL_FORMAT_YUV420SP_NV12, 8, 8));
    const rtRect odd{1, 0, 8, 8};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppCropResize(&nv12.pic, &odd, &nv12_out.pic, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "crop->x 1 is odd"));
    expect_untouched();
}

TEST_P(DvppResizeErrors, ExtentsBeyondTheLimitAreRefused) {
    // A 65537-pixel-wide crop of a grey picture (64 KiB + 1 of memory), resized to 1x1.
    DevPicture wide(Image(RT_PIXEL_FORMAT_GRAY8, 65537, 1)), one(Image(RT_PIXEL_FORMAT_GRAY8, 1, 1));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppResize(&wide.pic, &one.pic, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppResize: src width 65537 exceeds 65536"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppResize(&one.pic, &wide.pic, RT_INTERP_NEAREST, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppResize: dst width 65537 exceeds 65536"));
    expect_untouched();
}

TEST_P(DvppResizeErrors, InPlaceIsRefused) {
    rtPicture half = src->pic;  // the first 16x12 pixels of the same memory
    half.width = 16;
    half.height = 12;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppResize(&src->pic, &half, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppResize: dst->data"));
    EXPECT_TRUE(contains(last_message(), "overlaps src->data"));
    expect_untouched();
}

TEST_P(DvppResizeErrors, BatchRefusalsNameThePictureAndQueueNothing) {
    rtPicture dsts[3] = {dst->pic, dst->pic, dst->pic};
    const uint32_t per_src[] = {3};
    const rtRect crops[] = {{0, 0, 8, 8}, {0, 0, 8, 8}, {28, 20, 4, 8}};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppBatchCropResize(&src->pic, 1, per_src, crops, dsts, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppBatchCropResize: crops[2]->y 20 + crops[2]->height 8 = 28"));
    dsts[1].format = RT_PIXEL_FORMAT_GRAY8;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppBatchCropResize(&src->pic, 1, per_src, nullptr, dsts, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "dsts[1]->format GRAY8 differs from srcs[0]->format RGB888"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppBatchCropResize(nullptr, 2, nullptr, nullptr, dsts, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppBatchCropResize: srcs is NULL"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppBatchCropResize(&src->pic, 1, nullptr, nullptr, nullptr, RT_INTERP_BILINEAR, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppBatchCropResize: dsts is NULL"));
    expect_untouched();
}

TEST_P(DvppResizeErrors, AnInvalidStreamIsRefused) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE,
                    rtDvppResize(&src->pic, &dst->pic, RT_INTERP_BILINEAR, rt_test::garbage_handle<rtStream_t>()));
    expect_untouched();
}

RT_INSTANTIATE_DEVICE_TEST(DvppResize);
RT_INSTANTIATE_DEVICE_TEST(DvppResizeErrors);

}  // namespace
