// test_dvpp_codec.cpp — DVPP's codecs: JPEG and PNG header info, decodes (every output format, DCT scaling, batches,
// captured into graphs and replayed), the JPEG encoder, and how empty, corrupt, truncated or wrong inputs are refused
// in the call or fail the stream naming the image. References are libjpeg-turbo's and libpng's own outputs.
#include <runtime/dvpp.h>

#include <cmath>
#include <set>

#include "test_util.hpp"

#if RT_TEST_HAVE_TURBOJPEG
#include <turbojpeg.h>
#endif
#if RT_TEST_HAVE_PNG
#include <csetjmp>
#include <png.h>
#endif

using namespace rt_test;

namespace {

using Bytes = std::vector<uint8_t>;

/// A smooth image with edges and a little deterministic noise (JPEG-like content): channels 1, 3 or 4.
Bytes synth(int w, int h, int channels, uint32_t seed) {
    Bytes v(size_t(w) * h * channels);
    Bytes noise = pattern(v.size(), seed);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < channels; ++c) {
                const size_t i = (size_t(y) * w + x) * channels + c;
                int base = c == 0 ? x * 255 / std::max(1, w - 1) : c == 1 ? y * 255 / std::max(1, h - 1)
                                                                        : ((x / 8 + y / 8) % 2) * 160 + 40;
                if (c == 3) base = 128 + (x - y) % 100;
                v[i] = static_cast<uint8_t>(std::clamp(base + (noise[i] % 9) - 4, 0, 255));
            }
    return v;
}

/// A noise-free photo-like image (gradients and soft waves): what JPEG's round trip is judged on.
Bytes smooth(int w, int h, int channels) {
    Bytes v(size_t(w) * h * channels);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < channels; ++c) {
                const double t = 128 + 90 * std::sin(0.11 * x + 0.7 * c) * std::cos(0.07 * y - 0.3 * c);
                v[(size_t(y) * w + x) * channels + c] = static_cast<uint8_t>(std::clamp(std::lround(t), 0l, 255l));
            }
    return v;
}

uint32_t bytes_per_pixel(rtPixelFormat f) {
    switch (f) {
        case RT_PIXEL_FORMAT_GRAY8: return 1;
        case RT_PIXEL_FORMAT_RGB888:
        case RT_PIXEL_FORMAT_BGR888: return 3;
        case RT_PIXEL_FORMAT_RGBA8888:
        case RT_PIXEL_FORMAT_BGRA8888: return 4;
        default: return 0;
    }
}

bool yuv420(rtPixelFormat f) {
    return f == RT_PIXEL_FORMAT_YUV420SP_NV12 || f == RT_PIXEL_FORMAT_YUV420SP_NV21 || f == RT_PIXEL_FORMAT_YUV420P;
}

/// The bytes of dvpp.h's layout (strides already resolved).
size_t layout_bytes(rtPixelFormat f, uint32_t ws, uint32_t hs) {
    return yuv420(f) ? size_t(ws) * hs * 3 / 2 : size_t(ws) * hs * bytes_per_pixel(f);
}

/// A picture in device memory of the current device, pre-filled with 0xCD so unwritten bytes show.
struct DevPicture {
    DevBuf mem;
    rtPicture pic{};
    DevPicture(rtPixelFormat format, size_t capacity, uint32_t width_stride = 0, uint32_t height_stride = 0) {
        EXPECT_RT_OK(mem.alloc(capacity));
        EXPECT_RT_OK(rtMemset(mem.get(), 0xCD, capacity));
        pic.data = mem.get();
        pic.size = capacity;
        pic.format = format;
        pic.width_stride = width_stride;
        pic.height_stride = height_stride;
    }
    Bytes host() const {
        Bytes v(mem.size());
        EXPECT_RT_OK(rtMemcpy(v.data(), mem.get(), v.size(), RT_MEMCPY_DEVICE_TO_HOST));
        return v;
    }
};

/// Rows of `row_bytes` taken every `pitch` bytes from `offset`: a plane made dense.
Bytes dense(const Bytes& v, size_t offset, size_t pitch, size_t row_bytes, size_t rows) {
    Bytes out;
    out.reserve(row_bytes * rows);
    for (size_t y = 0; y < rows; ++y)
        out.insert(out.end(), v.begin() + offset + y * pitch, v.begin() + offset + y * pitch + row_bytes);
    return out;
}

/// A decoded picture's pixels as dense planes: packed formats one plane; 4:2:0 formats Y, U and V.
struct Planes {
    Bytes y, u, v;
};

Planes planes_of(const Bytes& host, const rtPicture& p) {
    const rtPixelFormat f = p.format;
    const size_t ws = p.width_stride, hs = p.height_stride, w = p.width, h = p.height;
    Planes out;
    if (!yuv420(f)) {
        out.y = dense(host, 0, ws * bytes_per_pixel(f), w * bytes_per_pixel(f), h);
        return out;
    }
    out.y = dense(host, 0, ws, w, h);
    if (f == RT_PIXEL_FORMAT_YUV420P) {
        out.u = dense(host, ws * hs, ws / 2, w / 2, h / 2);
        out.v = dense(host, ws * hs + (ws / 2) * (hs / 2), ws / 2, w / 2, h / 2);
    } else {
        Bytes c = dense(host, ws * hs, ws, w, h / 2);
        for (size_t i = 0; i < c.size(); i += 2) {
            out.u.push_back(c[i + (f == RT_PIXEL_FORMAT_YUV420SP_NV21)]);
            out.v.push_back(c[i + (f == RT_PIXEL_FORMAT_YUV420SP_NV12)]);
        }
    }
    return out;
}

const rtPixelFormat kPacked[] = {RT_PIXEL_FORMAT_GRAY8, RT_PIXEL_FORMAT_RGB888, RT_PIXEL_FORMAT_BGR888,
                                 RT_PIXEL_FORMAT_RGBA8888, RT_PIXEL_FORMAT_BGRA8888};
const rtPixelFormat kYuv420[] = {RT_PIXEL_FORMAT_YUV420SP_NV12, RT_PIXEL_FORMAT_YUV420SP_NV21,
                                 RT_PIXEL_FORMAT_YUV420P};

class DvppCodec : public DeviceTest {};

#if RT_TEST_HAVE_TURBOJPEG

// ---------------------------------------------------------------- TurboJPEG references

int tjpf_of(rtPixelFormat f) {
    switch (f) {
        case RT_PIXEL_FORMAT_GRAY8: return TJPF_GRAY;
        case RT_PIXEL_FORMAT_RGB888: return TJPF_RGB;
        case RT_PIXEL_FORMAT_BGR888: return TJPF_BGR;
        case RT_PIXEL_FORMAT_RGBA8888: return TJPF_RGBA;
        case RT_PIXEL_FORMAT_BGRA8888: return TJPF_BGRA;
        default: return -1;
    }
}

/// A JPEG of `pixels` (TurboJPEG pixel format `pf`) at `subsamp` and `quality`, with TurboJPEG's `flags`.
Bytes encode(const Bytes& pixels, int w, int h, int pf, int subsamp, int quality = 90, int flags = 0) {
    tjhandle t = tjInitCompress();
    unsigned char* buf = nullptr;
    unsigned long size = 0;
    EXPECT_EQ(tjCompress2(t, pixels.data(), w, 0, h, pf, &buf, &size, subsamp, quality, flags), 0) << tjGetErrorStr2(t);
    Bytes out(buf, buf + size);
    tjFree(buf);
    tjDestroy(t);
    return out;
}

/// The JPEG cut in the middle of its (last) scan's entropy-coded data: the header is intact, the body is not.
Bytes cut_body(const Bytes& jpeg) {
    size_t sos = 0;
    for (size_t i = 0; i + 1 < jpeg.size(); ++i)
        if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xDA) sos = i;
    EXPECT_GT(sos, 0u) << "no scan";
    return Bytes(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(sos + (jpeg.size() - sos) / 2));
}

Bytes jpeg_of(int w, int h, int subsamp, uint32_t seed = 1, int quality = 90, int flags = 0) {
    return encode(synth(w, h, 3, seed), w, h, TJPF_RGB, subsamp, quality, flags);
}

/// A CMYK JPEG (TurboJPEG writes YCCK) of random-ish ink values.
Bytes cmyk_jpeg(int w, int h) { return encode(synth(w, h, 4, 7), w, h, TJPF_CMYK, TJSAMP_444); }

/// tjDecompress2 of `jpeg` at w x h (a scale TurboJPEG picks: the largest that fits) into dense `pf` pixels.
Bytes tj_decode(const Bytes& jpeg, int w, int h, int pf) {
    tjhandle t = tjInitDecompress();
    Bytes out(size_t(w) * h * tjPixelSize[pf]);
    EXPECT_EQ(tjDecompress2(t, jpeg.data(), jpeg.size(), out.data(), w, 0, h, pf, 0), 0) << tjGetErrorStr2(t);
    tjDestroy(t);
    return out;
}

/// tjDecompressToYUVPlanes at w x h: the JPEG's own planes, chroma at its native subsampling.
struct Native {
    Bytes y, u, v;
    int cw = 0, ch = 0;
};

Native tj_planes(const Bytes& jpeg, int w, int h, int subsamp) {
    Native n;
    n.y.resize(size_t(w) * h);
    unsigned char* planes[3] = {n.y.data(), nullptr, nullptr};
    if (subsamp != TJSAMP_GRAY) {
        n.cw = tjPlaneWidth(1, w, subsamp), n.ch = tjPlaneHeight(1, h, subsamp);
        n.u.resize(size_t(n.cw) * n.ch), n.v.resize(size_t(n.cw) * n.ch);
        planes[1] = n.u.data(), planes[2] = n.v.data();
    }
    // Explicit strides: libjpeg-turbo 2.1 computes its default strides wrongly for sizes off the MCU grid.
    int strides[3] = {w, n.cw, n.cw};
    tjhandle t = tjInitDecompress();
    EXPECT_EQ(tjDecompressToYUVPlanes(t, jpeg.data(), jpeg.size(), planes, w, strides, h, 0), 0) << tjGetErrorStr2(t);
    tjDestroy(t);
    return n;
}

/// dvpp.h's 4:2:0 chroma from a native plane: each sample the rounded mean of the samples under its 2 x 2 pixels.
Bytes box420(const Bytes& c, int cw, int sx, int sy, int w, int h) {
    Bytes out;
    for (int y = 0; y < h / 2; ++y)
        for (int x = 0; x < w / 2; ++x) {
            int sum = 0;
            for (int dy = 0; dy < 2; ++dy)
                for (int dx = 0; dx < 2; ++dx) sum += c[size_t((2 * y + dy) / sy) * cw + (2 * x + dx) / sx];
            out.push_back(static_cast<uint8_t>((sum + 2) / 4));
        }
    return out;
}

/// Adobe CMYK to RGB as jpeg.cpp documents it (R = C K / 255 rounded).
Bytes cmyk_to_rgb(const Bytes& cmyk) {
    Bytes rgb;
    for (size_t i = 0; i < cmyk.size(); i += 4)
        for (int c = 0; c < 3; ++c) rgb.push_back(static_cast<uint8_t>(std::lround(cmyk[i + c] * cmyk[i + 3] / 255.0)));
    return rgb;
}

int max_abs_diff(const Bytes& a, const Bytes& b) {
    EXPECT_EQ(a.size(), b.size());
    int m = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(int(a[i]) - int(b[i])));
    return m;
}

double mean_abs_diff(const Bytes& a, const Bytes& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::abs(int(a[i]) - int(b[i]));
    return a.empty() ? 0 : s / double(a.size());
}

/// Decodes `jpeg` on `stream` into a new device picture of `format` (capacity for w x h at the given strides) and
/// synchronizes; returns the picture (its descriptor written back).
std::unique_ptr<DevPicture> decode_sync(const Bytes& jpeg, rtPixelFormat format, uint32_t w, uint32_t h,
                                        rtStream_t stream = nullptr, uint32_t ws = 0, uint32_t hs = 0) {
    auto p = std::make_unique<DevPicture>(format, layout_bytes(format, ws ? ws : w, hs ? hs : h), ws, hs);
    EXPECT_RT_OK(rtDvppDecodeJpeg(jpeg.data(), jpeg.size(), &p->pic, stream));
    EXPECT_RT_OK(rtStreamSynchronize(stream));
    return p;
}

/// Dense RGB (w x h) converted by rtDvppConvertColor to `format` with RT_COLOR_BT601_FULL: what the codecs'
/// conversions of RGB must equal bit for bit. Runs on `stream`, or, where the current device runs no kernel code (the
/// fake CUDA driver), on the default stream of the first device that does.
Planes converted(const Bytes& rgb, uint32_t w, uint32_t h, rtPixelFormat format, rtStream_t stream) {
    int current = 0, count = 0;
    EXPECT_RT_OK(rtGetDevice(&current));
    EXPECT_RT_OK(rtGetDeviceCount(&count));
    int device = current;
    for (int i = 0; i < count && !launches_execute(device); ++i) device = i;
    if (!launches_execute(device)) {
        ADD_FAILURE() << "no device runs kernels";
        return {};
    }
    if (device != current) {
        EXPECT_RT_OK(rtSetDevice(device));
        Planes p = converted(rgb, w, h, format, nullptr);
        EXPECT_RT_OK(rtSetDevice(current));
        return p;
    }
    DevPicture src(RT_PIXEL_FORMAT_RGB888, rgb.size(), w, h);
    src.pic.width = w, src.pic.height = h;
    EXPECT_RT_OK(rtMemcpy(src.pic.data, rgb.data(), rgb.size(), RT_MEMCPY_HOST_TO_DEVICE));
    DevPicture dst(format, layout_bytes(format, w, h), w, h);
    dst.pic.width = w, dst.pic.height = h;
    EXPECT_RT_OK(rtDvppConvertColor(&src.pic, &dst.pic, RT_COLOR_BT601_FULL, stream));
    EXPECT_RT_OK(rtStreamSynchronize(stream));
    return planes_of(dst.host(), dst.pic);
}

struct Subsampling {
    int tjsamp, sx, sy;
    const char* name;
};
const Subsampling kSubsamplings[] = {{TJSAMP_444, 1, 1, "4:4:4"}, {TJSAMP_422, 2, 1, "4:2:2"},
                                     {TJSAMP_420, 2, 2, "4:2:0"}, {TJSAMP_440, 1, 2, "4:4:0"},
                                     {TJSAMP_411, 4, 1, "4:1:1"}, {TJSAMP_GRAY, 0, 0, "grey"}};

// ---------------------------------------------------------------- header info

TEST_P(DvppCodec, JpegGetInfoReadsSizesAndComponents) {
    uint32_t w = 0, h = 0;
    int c = 0;
    Bytes colour = jpeg_of(123, 45, TJSAMP_420);
    ASSERT_RT_OK(rtDvppJpegGetInfo(colour.data(), colour.size(), &w, &h, &c));
    EXPECT_EQ(w, 123u);
    EXPECT_EQ(h, 45u);
    EXPECT_EQ(c, 3);
    Bytes grey = jpeg_of(16, 9, TJSAMP_GRAY);
    ASSERT_RT_OK(rtDvppJpegGetInfo(grey.data(), grey.size(), &w, &h, &c));
    EXPECT_EQ(c, 1);
    Bytes cmyk = cmyk_jpeg(8, 8);
    ASSERT_RT_OK(rtDvppJpegGetInfo(cmyk.data(), cmyk.size(), &w, &h, &c));
    EXPECT_EQ(c, 4);
    // Every output pointer may be NULL.
    EXPECT_RT_OK(rtDvppJpegGetInfo(colour.data(), colour.size(), nullptr, nullptr, nullptr));
}

TEST_P(DvppCodec, JpegGetInfoRefusesWhatIsNotAJpeg) {
    uint32_t w = 7;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppJpegGetInfo(nullptr, 10, &w, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "data is NULL"));
    const uint8_t one = 0xFF;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtDvppJpegGetInfo(&one, 0, &w, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "size is 0"));
    const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtDvppJpegGetInfo(png, sizeof png, &w, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "not a JPEG"));
    EXPECT_TRUE(contains(last_message(), "89 50 4E 47"));
    EXPECT_TRUE(contains(last_message(), "a PNG"));
    // A JPEG start followed by garbage, and a real JPEG's header cut short.
    Bytes garbage = pattern(200, 3);
    garbage[0] = 0xFF, garbage[1] = 0xD8, garbage[2] = 0xFF;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtDvppJpegGetInfo(garbage.data(), garbage.size(), &w, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppJpegGetInfo: the JPEG header"));
    Bytes jpeg = jpeg_of(64, 64, TJSAMP_420);
    for (size_t cut : {size_t(2), size_t(3), size_t(20), size_t(100)}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtDvppJpegGetInfo(jpeg.data(), cut, &w, nullptr, nullptr)) << cut;
    }
    EXPECT_EQ(w, 7u) << "a refused call writes nothing";
}

// ---------------------------------------------------------------- decode

TEST_P(DvppCodec, DecodeEqualsTurboJpegForEveryPackedFormat) {
    StreamGuard s;
    for (const Subsampling& ss : kSubsamplings)
        for (int flags : {0, TJFLAG_PROGRESSIVE}) {
            const int w = 37, h = 23;
            Bytes jpeg = jpeg_of(w, h, ss.tjsamp, 5, 85, flags);
            for (rtPixelFormat f : kPacked) {
                SCOPED_TRACE(std::string(ss.name) + (flags ? " progressive" : "") + " to format " +
                             std::to_string(f));
                // Strides wider and taller than the image: rows land at the picture's pitch.
                auto p = decode_sync(jpeg, f, w, h, s, w + 5, h + 3);
                ASSERT_EQ(p->pic.width, uint32_t(w));
                ASSERT_EQ(p->pic.height, uint32_t(h));
                EXPECT_EQ(planes_of(p->host(), p->pic).y, tj_decode(jpeg, w, h, tjpf_of(f)));
            }
        }
}

TEST_P(DvppCodec, DecodeToYuv420KeepsTheJpegsOwnSamples) {
    StreamGuard s;
    const int w = 46, h = 30;
    for (const Subsampling& ss : kSubsamplings) {
        Bytes jpeg = jpeg_of(w, h, ss.tjsamp, 11);
        // 4:1:1 goes through RGB (jpeg.cpp says why): exactly rtDvppConvertColor's BT.601 full range of the RGB.
        const bool via_rgb = ss.tjsamp == TJSAMP_411;
        Native n;
        if (!via_rgb) n = tj_planes(jpeg, w, h, ss.tjsamp);
        for (rtPixelFormat f : kYuv420) {
            SCOPED_TRACE(std::string(ss.name) + " to format " + std::to_string(f));
            auto p = decode_sync(jpeg, f, w, h, s, w + 4, h + 2);
            Planes got = planes_of(p->host(), p->pic);
            if (via_rgb) {
                const Planes ref = converted(tj_decode(jpeg, w, h, TJPF_RGB), w, h, f, s);
                EXPECT_EQ(got.y, ref.y);
                EXPECT_EQ(got.u, ref.u);
                EXPECT_EQ(got.v, ref.v);
                continue;
            }
            EXPECT_EQ(got.y, n.y);
            if (ss.tjsamp == TJSAMP_GRAY) {
                EXPECT_EQ(got.u, Bytes(size_t(w / 2) * (h / 2), 128));
                EXPECT_EQ(got.v, Bytes(size_t(w / 2) * (h / 2), 128));
            } else {
                EXPECT_EQ(got.u, box420(n.u, n.cw, ss.sx, ss.sy, w, h));
                EXPECT_EQ(got.v, box420(n.v, n.cw, ss.sx, ss.sy, w, h));
            }
        }
    }
}

TEST_P(DvppCodec, CmykDecodesThroughRgb) {
    StreamGuard s;
    const int w = 200, h = 120;  // enough pixels for grey weights that differ in their last bit to show
    Bytes jpeg = cmyk_jpeg(w, h);
    const Bytes rgb = cmyk_to_rgb(tj_decode(jpeg, w, h, TJPF_CMYK));
    auto p = decode_sync(jpeg, RT_PIXEL_FORMAT_RGB888, w, h, s);
    EXPECT_EQ(planes_of(p->host(), p->pic).y, rgb);
    auto bgra = decode_sync(jpeg, RT_PIXEL_FORMAT_BGRA8888, w, h, s);
    Bytes want;
    for (size_t i = 0; i < rgb.size(); i += 3) want.insert(want.end(), {rgb[i + 2], rgb[i + 1], rgb[i], 255});
    EXPECT_EQ(planes_of(bgra->host(), bgra->pic).y, want);
    // Grey and 4:2:0 of the RGB: rtDvppConvertColor's conversions (BT.601 full range) bit for bit.
    auto grey = decode_sync(jpeg, RT_PIXEL_FORMAT_GRAY8, w, h, s);
    EXPECT_EQ(planes_of(grey->host(), grey->pic).y, converted(rgb, w, h, RT_PIXEL_FORMAT_GRAY8, s).y);
    Bytes luma;  // and that grey is BT.601's luma
    for (size_t i = 0; i < rgb.size(); i += 3)
        luma.push_back(static_cast<uint8_t>(std::lround(0.299 * rgb[i] + 0.587 * rgb[i + 1] + 0.114 * rgb[i + 2])));
    EXPECT_LE(max_abs_diff(planes_of(grey->host(), grey->pic).y, luma), 1);
    for (rtPixelFormat f : kYuv420) {
        SCOPED_TRACE("to format " + std::to_string(f));
        auto p = decode_sync(jpeg, f, w, h, s, w + 2, h + 4);
        const Planes got = planes_of(p->host(), p->pic), ref = converted(rgb, w, h, f, s);
        EXPECT_EQ(got.y, ref.y);
        EXPECT_EQ(got.u, ref.u);
        EXPECT_EQ(got.v, ref.v);
    }
}

TEST_P(DvppCodec, RowsBeyondIntMaxAreRefusedBeforeTheMemoryIsLookedAt) {
    // TurboJPEG takes row pitches as int. The pitch is checked before the memory, so no 2 GiB buffer is needed:
    // data points at a few host bytes the runtime never allocated.
    StreamGuard s;
    static uint8_t dummy[64];
    rtPicture pic{};
    pic.data = dummy;
    pic.size = SIZE_MAX;
    pic.format = RT_PIXEL_FORMAT_GRAY8;
    pic.width = 16, pic.height = 2;
    size_t bound = 0;
    pic.width_stride = 0x7fffffffu;  // rows of INT_MAX bytes: the largest TurboJPEG takes
    EXPECT_RT_OK(rtDvppEncodeJpegBound(&pic, &bound));
    pic.width_stride = 0x80000000u;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppEncodeJpegBound(&pic, &bound));
    EXPECT_TRUE(contains(last_message(), "rtDvppEncodeJpegBound: picture->width_stride 2147483648 makes rows of "
                                         "2147483648 bytes (the codecs take rows of at most INT_MAX = 2147483647"));
    pic.format = RT_PIXEL_FORMAT_RGB888;
    pic.width_stride = 0x30000000u;  // 3 bytes a pixel: rows of 2415919104 bytes
    std::vector<uint8_t> out(1 << 16);
    size_t out_size = out.size();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppEncodeJpeg(&pic, 90, out.data(), &out_size, s));
    EXPECT_TRUE(contains(last_message(), "rtDvppEncodeJpeg: picture->width_stride 805306368 makes rows of "
                                         "2415919104 bytes"));
    Bytes jpeg = jpeg_of(16, 8, TJSAMP_420);
    rtPicture dst = pic;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppDecodeJpeg(jpeg.data(), jpeg.size(), &dst, s));
    EXPECT_TRUE(contains(last_message(), "rtDvppDecodeJpeg: out->width_stride 805306368 makes rows of 2415919104"));
    dst = pic;
    dst.format = RT_PIXEL_FORMAT_YUV420P;
    dst.width_stride = 0x80000000u;  // the Y plane's rows
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppDecodeJpegBatch(std::vector<const void*>{jpeg.data()}.data(),
                                                                  std::vector<size_t>{jpeg.size()}.data(), 1, nullptr,
                                                                  nullptr, &dst, s));
    EXPECT_TRUE(contains(last_message(), "rtDvppDecodeJpegBatch: outs[0]->width_stride 2147483648 makes rows of "
                                         "2147483648 bytes"));
    EXPECT_EQ(out_size, out.size()) << "a refused encode wrote its size";
    EXPECT_RT_OK(rtStreamSynchronize(s));
}

TEST_P(DvppCodec, AlphaIsOpaque) {
    StreamGuard s;
    Bytes jpeg = jpeg_of(9, 5, TJSAMP_444);
    auto p = decode_sync(jpeg, RT_PIXEL_FORMAT_RGBA8888, 9, 5, s);
    Bytes px = planes_of(p->host(), p->pic).y;
    for (size_t i = 3; i < px.size(); i += 4) ASSERT_EQ(px[i], 255) << i;
}

TEST_P(DvppCodec, DecodeWritesBackTheDescriptor) {
    StreamGuard s;
    Bytes jpeg = jpeg_of(30, 20, TJSAMP_420);
    DevPicture p(RT_PIXEL_FORMAT_RGB888, 10000);
    p.pic.width = 1, p.pic.height = 1;  // ignored on input
    ASSERT_RT_OK(rtDvppDecodeJpeg(jpeg.data(), jpeg.size(), &p.pic, s));
    EXPECT_EQ(p.pic.width, 30u);
    EXPECT_EQ(p.pic.height, 20u);
    EXPECT_EQ(p.pic.width_stride, 30u);
    EXPECT_EQ(p.pic.height_stride, 20u);
    EXPECT_EQ(p.pic.size, 30u * 20 * 3);
    DevPicture q(RT_PIXEL_FORMAT_YUV420P, 10000, 40, 24);
    ASSERT_RT_OK(rtDvppDecodeJpeg(jpeg.data(), jpeg.size(), &q.pic, s));
    EXPECT_EQ(q.pic.width_stride, 40u);
    EXPECT_EQ(q.pic.height_stride, 24u);
    EXPECT_EQ(q.pic.size, 40u * 24 * 3 / 2);
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

TEST_P(DvppCodec, DecodeRefusesBadOutputsAndQueuesNothing) {
    StreamGuard s;
    Bytes jpeg = jpeg_of(31, 20, TJSAMP_420);  // odd width
    DevPicture p(RT_PIXEL_FORMAT_RGB888, 31 * 20 * 3);
    const rtPicture before = p.pic;
    auto refused = [&](rtPicture pic, const char* needle) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppDecodeJpeg(jpeg.data(), jpeg.size(), &pic, s)) << needle;
        EXPECT_TRUE(contains(last_message(), needle));
        EXPECT_TRUE(contains(last_message(), "rtDvppDecodeJpeg"));
    };
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppDecodeJpeg(jpeg.data(), jpeg.size(), nullptr, s));
    EXPECT_TRUE(contains(last_message(), "out is NULL"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppDecodeJpeg(nullptr, jpeg.size(), &p.pic, s));
    EXPECT_TRUE(contains(last_message(), "data is NULL"));
    rtPicture bad = before;
    std::memset(&bad.format, 0x7F, sizeof bad.format);
    refused(bad, "is not a format this decoder writes");
    bad = before, bad.format = RT_PIXEL_FORMAT_YUV420SP_NV12;
    refused(bad, "needs even sizes");
    bad = before, bad.size = 31 * 20 * 3 - 1;
    refused(bad, "size");
    bad = before, bad.width_stride = 30;
    refused(bad, "width_stride");
    bad = before, bad.data = nullptr;
    refused(bad, "data");
    // Not a JPEG: INVALID_IMAGE in the call.
    Bytes junk(100, 0x42);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtDvppDecodeJpeg(junk.data(), junk.size(), &p.pic, s));
    EXPECT_TRUE(contains(last_message(), "rtDvppDecodeJpeg: data: not a JPEG"));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(p.host(), Bytes(p.mem.size(), 0xCD)) << "a refused call queues nothing";
    EXPECT_EQ(std::memcmp(&p.pic, &before, sizeof before), 0) << "a refused call writes nothing back";
}

TEST_P(DvppCodec, ScaledDecodePicksTheSmallestScaleAtLeastTheMinimum) {
    StreamGuard s;
    const int W = 203, H = 117;
    Bytes jpeg = jpeg_of(W, H, TJSAMP_420);
    int count = 0;
    tjscalingfactor* factors = tjGetScalingFactors(&count);
    struct Case {
        uint32_t min_w, min_h;
    };
    for (Case c : {Case{0, 0}, Case{100, 0}, Case{0, 30}, Case{26, 15}, Case{27, 15}, Case{51, 58}, Case{1, 1},
                   Case{203, 117}, Case{500, 500}}) {
        // The reference: among libjpeg's down-scales, the smallest whose size covers the minimum (else 1/1).
        double best = 1.0;
        for (int i = 0; (c.min_w || c.min_h) && i < count; ++i) {
            const tjscalingfactor f = factors[i];
            const double r = double(f.num) / f.denom;
            if (r > 1 || uint32_t(TJSCALED(W, f)) < c.min_w || uint32_t(TJSCALED(H, f)) < c.min_h) continue;
            best = std::min(best, r);
        }
        const int sw = int(std::ceil(W * best - 1e-9)), sh = int(std::ceil(H * best - 1e-9));
        SCOPED_TRACE("min " + std::to_string(c.min_w) + " x " + std::to_string(c.min_h));
        DevPicture p(RT_PIXEL_FORMAT_BGR888, size_t(W) * H * 3);
        ASSERT_RT_OK(rtDvppDecodeJpegScaled(jpeg.data(), jpeg.size(), c.min_w, c.min_h, &p.pic, s));
        ASSERT_RT_OK(rtStreamSynchronize(s));
        EXPECT_EQ(p.pic.width, uint32_t(sw));
        EXPECT_EQ(p.pic.height, uint32_t(sh));
        EXPECT_EQ(planes_of(p.host(), p.pic).y, tj_decode(jpeg, sw, sh, TJPF_BGR));
    }
    // 4:2:0 output at a scale: the JPEG's own planes at that scale.
    Bytes even = jpeg_of(320, 240, TJSAMP_420);
    DevPicture q(RT_PIXEL_FORMAT_YUV420P, 320 * 240 * 3 / 2);
    ASSERT_RT_OK(rtDvppDecodeJpegScaled(even.data(), even.size(), 80, 0, &q.pic, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_EQ(q.pic.width, 80u);
    Native n = tj_planes(even, 80, 60, TJSAMP_420);
    Planes got = planes_of(q.host(), q.pic);
    EXPECT_EQ(got.y, n.y);
    EXPECT_EQ(got.u, n.u);
    EXPECT_EQ(got.v, n.v);
    // A scale whose size is odd cannot be 4:2:0: refused, saying what it decodes to.
    DevPicture r(RT_PIXEL_FORMAT_YUV420SP_NV12, 1 << 20);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppDecodeJpegScaled(jpeg.data(), jpeg.size(), 26, 15, &r.pic, s));
    EXPECT_TRUE(contains(last_message(), "at scale 1/8"));
}

TEST_P(DvppCodec, TruncatedBodyFailsTheStreamNamingTheImageAndTheStreamRecovers) {
    StreamGuard s;
    Bytes jpeg = jpeg_of(64, 48, TJSAMP_420);
    Bytes cut = cut_body(jpeg);
    uint32_t w = 0;
    ASSERT_RT_OK(rtDvppJpegGetInfo(cut.data(), cut.size(), &w, nullptr, nullptr)) << "the header is intact";
    for (rtPixelFormat f : {RT_PIXEL_FORMAT_RGB888, RT_PIXEL_FORMAT_YUV420SP_NV12}) {
        DevPicture p(f, layout_bytes(f, 64, 48));
        ASSERT_RT_OK(rtDvppDecodeJpeg(cut.data(), cut.size(), &p.pic, s));
        EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtStreamSynchronize(s));
        EXPECT_TRUE(contains(last_message(), "rtDvppDecodeJpeg: image 0: corrupt or truncated JPEG")) << last_message();
        // The stream runs work again, and a good decode behind the failure is correct.
        auto ok = decode_sync(jpeg, RT_PIXEL_FORMAT_RGB888, 64, 48, s);
        EXPECT_EQ(planes_of(ok->host(), ok->pic).y, tj_decode(jpeg, 64, 48, TJPF_RGB));
    }
}

TEST_P(DvppCodec, EncodedInputIsCopiedDuringTheCall) {
    StreamGuard s;
    Bytes jpeg = jpeg_of(40, 30, TJSAMP_422);
    auto input = std::make_unique<Bytes>(jpeg);
    DevPicture p(RT_PIXEL_FORMAT_RGB888, 40 * 30 * 3);
    Gate gate;
    ASSERT_RT_OK(gate.launch(s, device()));
    ASSERT_RT_OK(rtDvppDecodeJpeg(input->data(), input->size(), &p.pic, s));
    std::fill(input->begin(), input->end(), 0);  // the decode has not run yet: it must not read these bytes
    input.reset();
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_FALSE(gate.timed_out());
    EXPECT_EQ(planes_of(p.host(), p.pic).y, tj_decode(jpeg, 40, 30, TJPF_RGB));
}

TEST_P(DvppCodec, DefaultStreamAndOtherDevicesStreams) {
    Bytes jpeg = jpeg_of(24, 16, TJSAMP_420);
    auto p = decode_sync(jpeg, RT_PIXEL_FORMAT_RGB888, 24, 16, nullptr);
    EXPECT_EQ(planes_of(p->host(), p->pic).y, tj_decode(jpeg, 24, 16, TJPF_RGB));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE,
                    rtDvppDecodeJpeg(jpeg.data(), jpeg.size(), &p->pic, garbage_handle<rtStream_t>()));
}

// ---------------------------------------------------------------- batch

struct BatchImage {
    Bytes jpeg;
    rtPixelFormat format;
    uint32_t min_w, min_h;
    int w, h;  // the expected decoded size
};

std::vector<BatchImage> mixed_batch() {
    std::vector<BatchImage> v;
    v.push_back({jpeg_of(160, 120, TJSAMP_420, 1), RT_PIXEL_FORMAT_RGB888, 0, 0, 160, 120});
    v.push_back({jpeg_of(33, 17, TJSAMP_444, 2), RT_PIXEL_FORMAT_BGRA8888, 0, 0, 33, 17});
    v.push_back({jpeg_of(320, 200, TJSAMP_422, 3), RT_PIXEL_FORMAT_YUV420SP_NV12, 80, 50, 80, 50});
    v.push_back({jpeg_of(64, 64, TJSAMP_GRAY, 4), RT_PIXEL_FORMAT_GRAY8, 0, 0, 64, 64});
    v.push_back({jpeg_of(250, 90, TJSAMP_420, 5), RT_PIXEL_FORMAT_BGR888, 100, 0, 125, 45});
    v.push_back({jpeg_of(8, 8, TJSAMP_420, 6), RT_PIXEL_FORMAT_YUV420P, 0, 0, 8, 8});
    v.push_back({cmyk_jpeg(12, 10), RT_PIXEL_FORMAT_RGB888, 0, 0, 12, 10});
    return v;
}

/// What rtDvppDecodeJpeg gives for the image (tested above): the reference of a batch's image.
Bytes single_decode(const BatchImage& b, rtStream_t s) {
    DevPicture p(b.format, layout_bytes(b.format, b.w, b.h));
    EXPECT_RT_OK(rtDvppDecodeJpegScaled(b.jpeg.data(), b.jpeg.size(), b.min_w, b.min_h, &p.pic, s));
    EXPECT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(p.pic.width, uint32_t(b.w));
    EXPECT_EQ(p.pic.height, uint32_t(b.h));
    return p.host();
}

struct Batch {
    std::vector<BatchImage> images;
    std::vector<std::unique_ptr<DevPicture>> outs;
    std::vector<rtPicture> pics;
    std::vector<const void*> datas;
    std::vector<size_t> sizes;
    std::vector<uint32_t> min_w, min_h;
    explicit Batch(std::vector<BatchImage> v) : images(std::move(v)) {
        for (const BatchImage& b : images) {
            outs.push_back(std::make_unique<DevPicture>(b.format, layout_bytes(b.format, b.w, b.h)));
            pics.push_back(outs.back()->pic);
            datas.push_back(b.jpeg.data());
            sizes.push_back(b.jpeg.size());
            min_w.push_back(b.min_w);
            min_h.push_back(b.min_h);
        }
    }
    uint32_t n() const { return static_cast<uint32_t>(images.size()); }
    rtError_t decode(rtStream_t s) {
        return rtDvppDecodeJpegBatch(datas.data(), sizes.data(), n(), min_w.data(), min_h.data(), pics.data(), s);
    }
};

TEST_P(DvppCodec, BatchDecodesMixedSizesFormatsAndScales) {
    StreamGuard s;
    Batch batch(mixed_batch());
    ASSERT_RT_OK(batch.decode(s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    for (uint32_t i = 0; i < batch.n(); ++i) {
        SCOPED_TRACE("image " + std::to_string(i));
        EXPECT_EQ(batch.pics[i].width, uint32_t(batch.images[i].w));
        EXPECT_EQ(batch.pics[i].height, uint32_t(batch.images[i].h));
        EXPECT_EQ(batch.outs[i]->host(), single_decode(batch.images[i], s));
    }
    // Full size when both minimum arrays are NULL; the default stream.
    Batch full({{jpeg_of(100, 60, TJSAMP_420, 9), RT_PIXEL_FORMAT_RGB888, 0, 0, 100, 60},
                {jpeg_of(50, 40, TJSAMP_444, 8), RT_PIXEL_FORMAT_RGB888, 0, 0, 50, 40}});
    ASSERT_RT_OK(rtDvppDecodeJpegBatch(full.datas.data(), full.sizes.data(), 2, nullptr, nullptr, full.pics.data(),
                                       nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_EQ(full.outs[0]->host(), single_decode(full.images[0], s));
    EXPECT_EQ(full.outs[1]->host(), single_decode(full.images[1], s));
}

TEST_P(DvppCodec, BatchIsOneStreamOperation) {
    // Work queued before the batch runs before any of its images; work queued after runs after all of them. Non-blocking:
    // the outputs are read with rtMemcpy while the gate holds the stream.
    StreamGuard s(RT_STREAM_NON_BLOCKING);
    std::vector<BatchImage> v;
    for (int i = 0; i < 6; ++i) v.push_back({jpeg_of(96, 64, TJSAMP_420, 20 + i), RT_PIXEL_FORMAT_RGB888, 0, 0, 96, 64});
    Batch batch(std::move(v));
    Gate gate;
    ASSERT_RT_OK(gate.launch(s, device()));
    ASSERT_RT_OK(batch.decode(s));
    std::atomic<bool> after{false};
    ASSERT_RT_OK(rtLaunchHostFunc(s, set_flag, &after));
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(batch.outs[0]->host(), Bytes(batch.outs[0]->mem.size(), 0xCD)) << "ran before the work queued before it";
    EXPECT_FALSE(after.load());
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_TRUE(after.load());
    for (uint32_t i = 0; i < batch.n(); ++i)
        EXPECT_EQ(planes_of(batch.outs[i]->host(), batch.pics[i]).y,
                  tj_decode(batch.images[i].jpeg, 96, 64, TJPF_RGB)) << i;
}

TEST_P(DvppCodec, BatchFailureNamesTheImageAndDecodesTheOthers) {
    StreamGuard s;
    std::vector<BatchImage> v = mixed_batch();
    v[2].jpeg = cut_body(v[2].jpeg);  // the header survives, the body is cut
    Batch batch(std::move(v));
    ASSERT_RT_OK(batch.decode(s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtStreamSynchronize(s));
    EXPECT_TRUE(contains(last_message(), "rtDvppDecodeJpegBatch: image 2 of the batch: corrupt or truncated JPEG"))
        << last_message();
    EXPECT_FALSE(contains(last_message(), "more of the"));
    for (uint32_t i = 0; i < batch.n(); ++i)
        if (i != 2) {
            EXPECT_EQ(batch.outs[i]->host(), single_decode(batch.images[i], s)) << i;
        }
    // The stream and the device's other streams work again (no worker stream kept the failure).
    ASSERT_RT_OK(rtDeviceSynchronize());
    Batch again(mixed_batch());
    ASSERT_RT_OK(again.decode(s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(again.outs[2]->host(), single_decode(again.images[2], s));

    // Two failures: the first named, the other counted.
    std::vector<BatchImage> w = mixed_batch();
    w[4].jpeg = cut_body(w[4].jpeg);
    w[1].jpeg = cut_body(w[1].jpeg);
    Batch twice(std::move(w));
    ASSERT_RT_OK(twice.decode(s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtStreamSynchronize(s));
    EXPECT_TRUE(contains(last_message(), "image 1 of the batch")) << last_message();
    EXPECT_TRUE(contains(last_message(), "1 more of the 7 images failed: 4")) << last_message();
}

TEST_P(DvppCodec, BatchRefusesBadInputsBeforeQueuingAnything) {
    StreamGuard s;
    std::vector<BatchImage> v = mixed_batch();
    v[3].jpeg.assign(50, 0x00);  // not a JPEG at all: refused in the call
    Batch batch(std::move(v));
    const std::vector<rtPicture> before = batch.pics;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, batch.decode(s));
    EXPECT_TRUE(contains(last_message(), "rtDvppDecodeJpegBatch: datas[3]: not a JPEG")) << last_message();
    Batch good(mixed_batch());
    good.pics[5].format = RT_PIXEL_FORMAT_YUV420P;
    good.pics[5].size = 10;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, good.decode(s));
    EXPECT_TRUE(contains(last_message(), "outs[5]")) << last_message();
    good.datas[1] = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, good.decode(s));
    EXPECT_TRUE(contains(last_message(), "datas[1] is NULL")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppDecodeJpegBatch(nullptr, good.sizes.data(), 2, nullptr, nullptr, good.pics.data(), s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppDecodeJpegBatch(good.datas.data(), nullptr, 2, nullptr, nullptr, good.pics.data(), s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtDvppDecodeJpegBatch(good.datas.data(), good.sizes.data(), 2, nullptr, nullptr, nullptr, s));
    // n = 0 decodes nothing and needs no arrays.
    EXPECT_RT_OK(rtDvppDecodeJpegBatch(nullptr, nullptr, 0, nullptr, nullptr, nullptr, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    for (uint32_t i = 0; i < batch.n(); ++i) {
        EXPECT_EQ(batch.outs[i]->host(), Bytes(batch.outs[i]->mem.size(), 0xCD)) << "image " << i << " was decoded";
        EXPECT_EQ(std::memcmp(&batch.pics[i], &before[i], sizeof(rtPicture)), 0) << i;
    }
}

TEST_P(DvppCodec, BatchOnAStreamOfAnotherDeviceThanTheCurrentOne) {
    int count = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&count));
    int other = -1;
    for (int d = 0; d < count; ++d)
        if (d != device() && backend_of(d) == backend_of(device())) other = d;
    if (other < 0) GTEST_SKIP() << "one device of this backend (the 2dev rerun has two)";
    ASSERT_RT_OK(rtSetDevice(other));
    StreamGuard s;  // a stream of `other`, and its memory
    Batch batch(mixed_batch());
    ASSERT_RT_OK(rtSetDevice(device()));
    ASSERT_RT_OK(batch.decode(s));
    int current = -1;
    ASSERT_RT_OK(rtGetDevice(&current));
    EXPECT_EQ(current, device()) << "the call left the current device as it was";
    ASSERT_RT_OK(rtStreamSynchronize(s));
    for (uint32_t i = 0; i < batch.n(); ++i) EXPECT_EQ(batch.outs[i]->host(), single_decode(batch.images[i], s)) << i;
}

// ---------------------------------------------------------------- capture

TEST_P(DvppCodec, CapturedDecodesReplayFromTheirOwnCopyOfTheInput) {
    StreamGuard s;
    auto single = std::make_unique<Bytes>(jpeg_of(48, 32, TJSAMP_420, 31));
    const Bytes single_ref = tj_decode(*single, 48, 32, TJPF_RGB);
    DevPicture one(RT_PIXEL_FORMAT_RGB888, 48 * 32 * 3);
    auto batch = std::make_unique<Batch>(mixed_batch());
    std::vector<Bytes> batch_refs;
    for (const BatchImage& b : batch->images) batch_refs.push_back(single_decode(b, s));

    GraphGuard graph(nullptr);
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtDvppDecodeJpeg(single->data(), single->size(), &one.pic, s));
    ASSERT_RT_OK(batch->decode(s));
    ASSERT_RT_OK(rtStreamEndCapture(s, graph.out()));
    ASSERT_NE(static_cast<rtGraph_t>(graph), nullptr);
    // The inputs go at once: the graph holds its own copies.
    single.reset();
    for (BatchImage& b : batch->images) std::fill(b.jpeg.begin(), b.jpeg.end(), 0);
    EXPECT_EQ(one.host(), Bytes(one.mem.size(), 0xCD)) << "a captured decode does not run";

    ExecGuard exec;
    ASSERT_RT_OK(rtGraphInstantiate(exec.out(), graph, 0));
    for (int launch = 0; launch < 3; ++launch) {
        SCOPED_TRACE("launch " + std::to_string(launch));
        ASSERT_RT_OK(rtMemset(one.mem.get(), 0, one.mem.size()));
        for (auto& o : batch->outs) ASSERT_RT_OK(rtMemset(o->mem.get(), 0, o->mem.size()));
        ASSERT_RT_OK(rtGraphLaunch(exec, s));
        ASSERT_RT_OK(rtStreamSynchronize(s));
        EXPECT_EQ(planes_of(one.host(), one.pic).y, single_ref);
        for (uint32_t i = 0; i < batch->n(); ++i) EXPECT_EQ(batch->outs[i]->host(), batch_refs[i]) << i;
    }
}

TEST_P(DvppCodec, CapturedCorruptDecodeFailsEveryLaunch) {
    StreamGuard s;
    Bytes jpeg = cut_body(jpeg_of(64, 48, TJSAMP_420));
    DevPicture p(RT_PIXEL_FORMAT_RGB888, 64 * 48 * 3);
    std::vector<BatchImage> v = mixed_batch();
    v[5].jpeg = cut_body(v[5].jpeg);
    Batch batch(std::move(v));
    for (bool use_batch : {false, true}) {
        SCOPED_TRACE(use_batch ? "batch" : "single");
        GraphGuard graph(nullptr);
        ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
        if (use_batch) {
            ASSERT_RT_OK(batch.decode(s));
        } else {
            ASSERT_RT_OK(rtDvppDecodeJpeg(jpeg.data(), jpeg.size(), &p.pic, s));
        }
        ASSERT_RT_OK(rtStreamEndCapture(s, graph.out()));
        ExecGuard exec;
        ASSERT_RT_OK(rtGraphInstantiate(exec.out(), graph, 0));
        for (int launch = 0; launch < 2; ++launch) {
            ASSERT_RT_OK(rtGraphLaunch(exec, s));
            EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtStreamSynchronize(s));
            EXPECT_TRUE(contains(last_message(), use_batch ? "image 5 of the batch" : "rtDvppDecodeJpeg: image 0"))
                << last_message();
        }
        ASSERT_RT_OK(rtStreamSynchronize(s));
    }
}

// ---------------------------------------------------------------- encode

/// Encodes `pic` (device memory) at `quality` on `stream`; returns the JPEG.
Bytes encode_sync(const rtPicture& pic, int quality, rtStream_t stream) {
    size_t bound = 0;
    EXPECT_RT_OK(rtDvppEncodeJpegBound(&pic, &bound));
    Bytes out(bound);
    size_t size = bound;
    EXPECT_RT_OK(rtDvppEncodeJpeg(&pic, quality, out.data(), &size, stream));
    EXPECT_RT_OK(rtStreamSynchronize(stream));
    EXPECT_LE(size, bound);
    out.resize(size);
    return out;
}

/// A device picture holding `host` (its full layout).
std::unique_ptr<DevPicture> upload(const Bytes& host, rtPixelFormat f, uint32_t w, uint32_t h, uint32_t ws = 0,
                                   uint32_t hs = 0) {
    auto p = std::make_unique<DevPicture>(f, host.size(), ws, hs);
    EXPECT_RT_OK(rtMemcpy(p->mem.get(), host.data(), host.size(), RT_MEMCPY_HOST_TO_DEVICE));
    p->pic.width = w, p->pic.height = h;
    return p;
}

TEST_P(DvppCodec, EncodeEqualsTurboJpegAndRoundTrips) {
    StreamGuard s;
    const int w = 61, h = 40, ws = 64;
    for (rtPixelFormat f : kPacked) {
        SCOPED_TRACE("format " + std::to_string(f));
        const uint32_t bpp = bytes_per_pixel(f);
        Bytes dense_px = smooth(w, h, int(bpp));
        Bytes padded(size_t(ws) * bpp * h, 0x11);
        for (int y = 0; y < h; ++y) std::memcpy(&padded[size_t(y) * ws * bpp], &dense_px[size_t(y) * w * bpp], w * bpp);
        auto pic = upload(padded, f, w, h, ws, 0);
        const int tjpf = f == RT_PIXEL_FORMAT_RGBA8888 ? TJPF_RGBX : f == RT_PIXEL_FORMAT_BGRA8888 ? TJPF_BGRX : tjpf_of(f);
        const int subsamp = f == RT_PIXEL_FORMAT_GRAY8 ? TJSAMP_GRAY : TJSAMP_420;
        double prev = 1e9;
        // Mean absolute error bounds of each quality on a smooth image (about twice what libjpeg-turbo 2.1 gives).
        for (auto [q, bound] : {std::pair{30, 6.0}, std::pair{75, 3.0}, std::pair{95, 1.5}}) {
            Bytes jpeg = encode_sync(pic->pic, q, s);
            EXPECT_EQ(jpeg, encode(dense_px, w, h, tjpf, subsamp, q)) << "quality " << q;
            // Round trip: decoded as the same format, the error shrinks as the quality grows.
            Bytes back = tj_decode(jpeg, w, h, tjpf);
            Bytes a, b;  // colour channels only
            for (size_t i = 0; i < back.size(); ++i)
                if (bpp != 4 || i % 4 != 3) a.push_back(back[i]), b.push_back(dense_px[i]);
            const double err = mean_abs_diff(a, b);
            EXPECT_LT(err, prev) << "quality " << q;
            EXPECT_LT(err, bound) << "quality " << q;
            prev = err;
        }
    }
}

TEST_P(DvppCodec, EncodeTakes420PicturesAsJpegYCbCr) {
    StreamGuard s;
    const int w = 48, h = 32;
    Bytes jpeg0 = jpeg_of(w, h, TJSAMP_420, 50);
    Native n = tj_planes(jpeg0, w, h, TJSAMP_420);
    tjhandle t = tjInitCompress();
    const unsigned char* planes[3] = {n.y.data(), n.u.data(), n.v.data()};
    unsigned char* buf = nullptr;
    unsigned long size = 0;
    ASSERT_EQ(tjCompressFromYUVPlanes(t, planes, w, nullptr, h, TJSAMP_420, &buf, &size, 80, 0), 0);
    const Bytes ref(buf, buf + size);
    tjFree(buf);
    tjDestroy(t);
    for (rtPixelFormat f : kYuv420) {
        SCOPED_TRACE("format " + std::to_string(f));
        auto p = decode_sync(jpeg0, f, w, h, s);  // the JPEG's own planes, laid out as f
        EXPECT_EQ(encode_sync(p->pic, 80, s), ref);
    }
}

TEST_P(DvppCodec, EncodeRefusesBadArguments) {
    StreamGuard s;
    auto pic = upload(synth(16, 16, 3, 1), RT_PIXEL_FORMAT_RGB888, 16, 16);
    size_t bound = 0;
    ASSERT_RT_OK(rtDvppEncodeJpegBound(&pic->pic, &bound));
    rtPicture grey = pic->pic;
    grey.format = RT_PIXEL_FORMAT_GRAY8;
    size_t grey_bound = 0;
    ASSERT_RT_OK(rtDvppEncodeJpegBound(&grey, &grey_bound));
    EXPECT_LT(grey_bound, bound);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppEncodeJpegBound(&pic->pic, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppEncodeJpegBound(nullptr, &bound));
    Bytes out(bound);
    size_t size = bound;
    for (int q : {0, 101, -5}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppEncodeJpeg(&pic->pic, q, out.data(), &size, s));
        EXPECT_TRUE(contains(last_message(), "quality"));
    }
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppEncodeJpeg(&pic->pic, 90, nullptr, &size, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppEncodeJpeg(&pic->pic, 90, out.data(), nullptr, s));
    size = bound - 1;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppEncodeJpeg(&pic->pic, 90, out.data(), &size, s));
    EXPECT_TRUE(contains(last_message(), std::to_string(bound - 1)));
    EXPECT_TRUE(contains(last_message(), std::to_string(bound)));
    EXPECT_EQ(size, bound - 1) << "a refused call writes nothing";
    rtPicture big = pic->pic;
    big.width = 70000, big.width_stride = 0, big.height = 1, big.size = size_t(70000) * 3;
    DevBuf wide(big.size);
    big.data = wide.get();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppEncodeJpegBound(&big, &bound));
    EXPECT_TRUE(contains(last_message(), "65535"));
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

TEST_P(DvppCodec, CapturedEncodeWritesItsSizeOnEveryLaunch) {
    StreamGuard s;
    auto pic = upload(synth(32, 24, 3, 2), RT_PIXEL_FORMAT_RGB888, 32, 24);
    size_t bound = 0;
    ASSERT_RT_OK(rtDvppEncodeJpegBound(&pic->pic, &bound));
    const Bytes ref = encode_sync(pic->pic, 90, s);
    Bytes out(bound);
    size_t size = bound;
    GraphGuard graph(nullptr);
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtDvppEncodeJpeg(&pic->pic, 90, out.data(), &size, s));
    ASSERT_RT_OK(rtStreamEndCapture(s, graph.out()));
    ExecGuard exec;
    ASSERT_RT_OK(rtGraphInstantiate(exec.out(), graph, 0));
    for (int launch = 0; launch < 2; ++launch) {
        size = 0;
        std::fill(out.begin(), out.end(), 0);
        ASSERT_RT_OK(rtGraphLaunch(exec, s));
        ASSERT_RT_OK(rtStreamSynchronize(s));
        ASSERT_EQ(size, ref.size());
        EXPECT_TRUE(std::equal(ref.begin(), ref.end(), out.begin()));
    }
}

#else  // !RT_TEST_HAVE_TURBOJPEG

TEST_P(DvppCodec, JpegCallsSayTheLibraryIsMissing) {
    const uint8_t b[4] = {0xFF, 0xD8, 0xFF, 0xE0};
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtDvppJpegGetInfo(b, sizeof b, nullptr, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "libturbojpeg0-dev"));
}

#endif  // RT_TEST_HAVE_TURBOJPEG

#if RT_TEST_HAVE_PNG

// ---------------------------------------------------------------- PNG

struct PngSpec {
    int w, h, bit_depth, color_type;
    bool interlace;
    std::vector<png_color> palette;
    Bytes trns;  // palette alpha
    PngSpec(int w_, int h_, int bit_depth_, int color_type_, bool interlace_ = false,
            std::vector<png_color> palette_ = {}, Bytes trns_ = {})
        : w(w_), h(h_), bit_depth(bit_depth_), color_type(color_type_), interlace(interlace_),
          palette(std::move(palette_)), trns(std::move(trns_)) {}
};

/// The samples of a PNG as its rows store them (bit depths below 8: one sample per byte; 16 bits: big-endian pairs).
Bytes png_samples(const PngSpec& s, uint32_t seed) {
    int channels = s.color_type == PNG_COLOR_TYPE_RGB ? 3 : s.color_type == PNG_COLOR_TYPE_RGBA ? 4
                   : s.color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2 : 1;
    Bytes v = synth(s.w, s.h, channels, seed);
    if (s.bit_depth < 8)
        for (auto& b : v) b = static_cast<uint8_t>(b >> (8 - s.bit_depth));
    if (s.color_type == PNG_COLOR_TYPE_PALETTE)  // indices within the palette
        for (auto& b : v) b = static_cast<uint8_t>(b % s.palette.size());
    if (s.bit_depth == 16) {
        Bytes wide;
        Bytes low = pattern(v.size(), seed + 1);
        for (size_t i = 0; i < v.size(); ++i) wide.insert(wide.end(), {v[i], low[i]});
        return wide;
    }
    return v;
}

struct PngWriter {
    Bytes out;
    static void write(png_structp png, png_bytep data, size_t n) {
        auto* self = static_cast<PngWriter*>(png_get_io_ptr(png));
        self->out.insert(self->out.end(), data, data + n);
    }
    static void flush(png_structp) {}
};

/// A PNG of `samples` (one sample per byte below 8 bits) written with libpng.
Bytes write_png(const PngSpec& s, const Bytes& samples) {
    PngWriter w;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png_create_info_struct(png);
    std::vector<png_bytep> rows;
    Bytes packed;
    const size_t per_row = samples.size() / s.h;
    if (setjmp(png_jmpbuf(png))) {
        ADD_FAILURE() << "libpng failed to write the test image";
        png_destroy_write_struct(&png, &info);
        return {};
    }
    png_set_write_fn(png, &w, &PngWriter::write, &PngWriter::flush);
    png_set_IHDR(png, info, s.w, s.h, s.bit_depth, s.color_type,
                 s.interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (!s.palette.empty()) png_set_PLTE(png, info, s.palette.data(), int(s.palette.size()));
    if (!s.trns.empty()) png_set_tRNS(png, info, s.trns.data(), int(s.trns.size()), nullptr);
    png_write_info(png, info);
    if (s.bit_depth < 8) png_set_packing(png);
    for (int y = 0; y < s.h; ++y) rows.push_back(const_cast<png_bytep>(&samples[y * per_row]));
    png_write_image(png, rows.data());
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return w.out;
}

std::unique_ptr<DevPicture> png_decode_sync(const Bytes& png, rtPixelFormat f, int w, int h, rtStream_t s) {
    auto p = std::make_unique<DevPicture>(f, layout_bytes(f, w, h));
    EXPECT_RT_OK(rtDvppDecodePng(png.data(), png.size(), &p->pic, s));
    EXPECT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(p->pic.width, uint32_t(w));
    EXPECT_EQ(p->pic.height, uint32_t(h));
    return p;
}

/// 8-bit RGBA (alpha 255 where the image has none) of a PNG's samples: what every output format derives from.
Bytes rgba_of(const PngSpec& s, const Bytes& samples) {
    Bytes out;
    const size_t n = size_t(s.w) * s.h;
    const int step = s.bit_depth == 16 ? 2 : 1;  // 16 bits: the high byte
    auto at = [&](size_t i) { return samples[i * step]; };
    for (size_t p = 0; p < n; ++p) {
        switch (s.color_type) {
            case PNG_COLOR_TYPE_GRAY: {
                const uint8_t g = s.bit_depth < 8 ? uint8_t(at(p) * 255 / ((1 << s.bit_depth) - 1)) : at(p);
                out.insert(out.end(), {g, g, g, 255});
                break;
            }
            case PNG_COLOR_TYPE_GRAY_ALPHA: out.insert(out.end(), {at(2 * p), at(2 * p), at(2 * p), at(2 * p + 1)}); break;
            case PNG_COLOR_TYPE_RGB: out.insert(out.end(), {at(3 * p), at(3 * p + 1), at(3 * p + 2), 255}); break;
            case PNG_COLOR_TYPE_RGBA: out.insert(out.end(), {at(4 * p), at(4 * p + 1), at(4 * p + 2), at(4 * p + 3)}); break;
            case PNG_COLOR_TYPE_PALETTE: {
                const uint8_t i = at(p);
                const png_color c = s.palette[i];
                out.insert(out.end(), {c.red, c.green, c.blue, i < s.trns.size() ? s.trns[i] : uint8_t(255)});
                break;
            }
        }
    }
    return out;
}

/// The picture `format` derived from RGBA, as png.cpp documents (grey: BT.601 luma within 1, checked separately).
Bytes from_rgba(const Bytes& rgba, rtPixelFormat f) {
    Bytes out;
    for (size_t i = 0; i < rgba.size(); i += 4) {
        const uint8_t r = rgba[i], g = rgba[i + 1], b = rgba[i + 2], a = rgba[i + 3];
        switch (f) {
            case RT_PIXEL_FORMAT_RGB888: out.insert(out.end(), {r, g, b}); break;
            case RT_PIXEL_FORMAT_BGR888: out.insert(out.end(), {b, g, r}); break;
            case RT_PIXEL_FORMAT_RGBA8888: out.insert(out.end(), {r, g, b, a}); break;
            case RT_PIXEL_FORMAT_BGRA8888: out.insert(out.end(), {b, g, r, a}); break;
            default: out.push_back(static_cast<uint8_t>(std::lround(0.299 * r + 0.587 * g + 0.114 * b))); break;
        }
    }
    return out;
}

std::vector<PngSpec> png_specs() {
    std::vector<png_color> pal;
    for (int i = 0; i < 16; ++i) pal.push_back({uint8_t(i * 16), uint8_t(255 - i * 7), uint8_t(i * i)});
    Bytes trns;
    for (int i = 0; i < 10; ++i) trns.push_back(uint8_t(i * 25));
    return {
        {29, 17, 8, PNG_COLOR_TYPE_RGB},         {29, 17, 8, PNG_COLOR_TYPE_RGBA},
        {29, 17, 8, PNG_COLOR_TYPE_GRAY},        {29, 17, 8, PNG_COLOR_TYPE_GRAY_ALPHA},
        {29, 17, 16, PNG_COLOR_TYPE_RGB},        {29, 17, 16, PNG_COLOR_TYPE_GRAY},
        {29, 17, 16, PNG_COLOR_TYPE_RGBA},       {29, 17, 1, PNG_COLOR_TYPE_GRAY},
        {29, 17, 4, PNG_COLOR_TYPE_GRAY},        {29, 17, 4, PNG_COLOR_TYPE_PALETTE, false, pal, trns},
        {29, 17, 8, PNG_COLOR_TYPE_PALETTE, false, pal, {}},
        {29, 17, 8, PNG_COLOR_TYPE_RGB, true},   {29, 17, 8, PNG_COLOR_TYPE_GRAY_ALPHA, true},
    };
}

TEST_P(DvppCodec, PngGetInfoReadsSizesAndComponents) {
    const int expected[] = {3, 4, 1, 2, 3, 1, 4, 1, 1, 4, 3, 3, 2};
    std::vector<PngSpec> specs = png_specs();
    for (size_t i = 0; i < specs.size(); ++i) {
        Bytes png = write_png(specs[i], png_samples(specs[i], 1));
        uint32_t w = 0, h = 0;
        int c = 0;
        ASSERT_RT_OK(rtDvppPngGetInfo(png.data(), png.size(), &w, &h, &c)) << i;
        EXPECT_EQ(w, 29u);
        EXPECT_EQ(h, 17u);
        EXPECT_EQ(c, expected[i]) << "spec " << i;
    }
}

TEST_P(DvppCodec, PngDecodesEveryKindToEveryFormat) {
    StreamGuard s;
    std::vector<PngSpec> specs = png_specs();
    for (size_t i = 0; i < specs.size(); ++i) {
        const PngSpec& spec = specs[i];
        Bytes samples = png_samples(spec, uint32_t(i) + 3);
        Bytes png = write_png(spec, samples);
        const Bytes rgba = rgba_of(spec, samples);
        for (rtPixelFormat f : kPacked) {
            SCOPED_TRACE("spec " + std::to_string(i) + " to format " + std::to_string(f));
            auto p = png_decode_sync(png, f, spec.w, spec.h, s);
            Bytes got = planes_of(p->host(), p->pic).y;
            if (f == RT_PIXEL_FORMAT_GRAY8 && (spec.color_type & PNG_COLOR_MASK_COLOR)) {
                // rtDvppConvertColor's grey of the RGB, bit for bit; BT.601's luma within 1.
                const Bytes rgb = from_rgba(rgba, RT_PIXEL_FORMAT_RGB888);
                EXPECT_EQ(got, converted(rgb, spec.w, spec.h, RT_PIXEL_FORMAT_GRAY8, s).y);
                EXPECT_LE(max_abs_diff(got, from_rgba(rgba, f)), 1);
            } else if (f == RT_PIXEL_FORMAT_GRAY8) {
                Bytes g;
                for (size_t k = 0; k < rgba.size(); k += 4) g.push_back(rgba[k]);
                EXPECT_EQ(got, g);
            } else {
                EXPECT_EQ(got, from_rgba(rgba, f));
            }
        }
    }
}

TEST_P(DvppCodec, PngRefusesWhatIsNotAPngAndFailsTruncatedBodies) {
    StreamGuard s;
    PngSpec spec{64, 40, 8, PNG_COLOR_TYPE_RGB};
    Bytes png = write_png(spec, png_samples(spec, 9));
    DevPicture p(RT_PIXEL_FORMAT_RGB888, 64 * 40 * 3);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppPngGetInfo(nullptr, 5, nullptr, nullptr, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtDvppPngGetInfo(png.data(), 0, nullptr, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "size is 0"));
#if RT_TEST_HAVE_TURBOJPEG
    Bytes jpeg = jpeg_of(8, 8, TJSAMP_420);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtDvppPngGetInfo(jpeg.data(), jpeg.size(), nullptr, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "not a PNG"));
    EXPECT_TRUE(contains(last_message(), "a JPEG"));
#endif
    for (size_t cut : {size_t(8), size_t(20), size_t(30)})
        EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtDvppPngGetInfo(png.data(), cut, nullptr, nullptr, nullptr)) << cut;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtDvppDecodePng(png.data(), 20, &p.pic, s));
    EXPECT_TRUE(contains(last_message(), "rtDvppDecodePng: data:"));
    // NV12 is not a PNG output.
    rtPicture nv12 = p.pic;
    nv12.format = RT_PIXEL_FORMAT_YUV420SP_NV12;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppDecodePng(png.data(), png.size(), &nv12, s));
    EXPECT_TRUE(contains(last_message(), "not a format this decoder writes"));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(p.host(), Bytes(p.mem.size(), 0xCD));

    // Cut in the image data, and a flipped byte in it (the chunk's CRC no longer matches): the stream fails.
    Bytes cut(png.begin(), png.begin() + png.size() / 2);
    ASSERT_RT_OK(rtDvppPngGetInfo(cut.data(), cut.size(), nullptr, nullptr, nullptr));
    ASSERT_RT_OK(rtDvppDecodePng(cut.data(), cut.size(), &p.pic, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtStreamSynchronize(s));
    EXPECT_TRUE(contains(last_message(), "rtDvppDecodePng: image 0: corrupt or truncated PNG")) << last_message();
    Bytes flipped = png;
    flipped[png.size() / 2] ^= 0x55;
    ASSERT_RT_OK(rtDvppDecodePng(flipped.data(), flipped.size(), &p.pic, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_IMAGE, rtStreamSynchronize(s));
    // And the stream recovers.
    auto ok = png_decode_sync(png, RT_PIXEL_FORMAT_RGB888, 64, 40, s);
    EXPECT_EQ(planes_of(ok->host(), ok->pic).y, png_samples(spec, 9));
}

#else  // !RT_TEST_HAVE_PNG

TEST_P(DvppCodec, PngCallsSayTheLibraryIsMissing) {
    const uint8_t b[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtDvppPngGetInfo(b, sizeof b, nullptr, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "libpng-dev"));
}

#endif  // RT_TEST_HAVE_PNG

RT_INSTANTIATE_DEVICE_TEST(DvppCodec);

}  // namespace
