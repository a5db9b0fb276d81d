// DVPP's JPEG codec over libjpeg-turbo's TurboJPEG API: rtDvppJpegGetInfo, the decodes (one, DCT-scaled, batch) and
// the encoder, each decode or encode queued as host work on the stream (host_work.hpp).
//
// Colour. A JPEG's YCbCr is BT.601 full range. Packed outputs are TurboJPEG's own conversion (tjDecompress2), so they
// equal libjpeg-turbo's output exactly. 4:2:0 outputs (NV12, NV21, YUV420P) are the JPEG's own samples wherever it
// has them: a 4:2:0 JPEG is decoded straight into the picture's planes (tjDecompressToYUVPlanes with its strides;
// NV12/NV21 interleave the chroma); a 4:4:4, 4:2:2 or 4:4:0 JPEG is decoded to its native planes and its chroma
// box-filtered to 4:2:0 (each 4:2:0 sample the rounded mean of the samples under its 2 x 2 luma pixels); a grey JPEG
// gets chroma 128. The others (4:1:1, and JPEGs without YCbCr: RGB, CMYK, YCCK) are decoded to RGB and converted as
// rtDvppConvertColor converts RGB888 with RT_COLOR_BT601_FULL (kernels/color_math.h, included here as host code: one
// formula, so such a decode equals decode-to-RGB888 followed by rtDvppConvertColor bit for bit).
// CMYK and YCCK JPEGs (Adobe's, with inverted ink values, as libjpeg delivers them) become RGB as R = C K / 255,
// G = M K / 255, B = Y K / 255 rounded (libjpeg-turbo's cmyk_to_rgb). GRAY8 from a YCbCr or grey JPEG is its luma
// (libjpeg's own); from an RGB, CMYK or YCCK JPEG it is color_math.h's BT.601 grey of the RGB (as rtDvppConvertColor).
//
// Strictness. libjpeg's warnings (premature end of data, corrupt entropy data) fail the decode: a truncated body is an
// error, not a grey bottom half. Progressive JPEGs with more than 500 scans are refused (TJFLAG_LIMITSCANS), so a
// hostile file cannot make a decode run for minutes.
#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "capi/capi_common.hpp"
#include "core/device.hpp"
#include "dvpp/host_work.hpp"
#include "dvpp/kernels/common.h"
#include "dvpp/kernels/color_math.h"
#include "dvpp/picture.hpp"
#include "runtime/dvpp.h"

#if RUNTIME_HAVE_TURBOJPEG
#include <turbojpeg.h>
#endif

using namespace rt;
using namespace rt::dvpp;

namespace {

#if RUNTIME_HAVE_TURBOJPEG

constexpr int kDecodeFlags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;

/// This thread's TurboJPEG instances (creating one allocates; executors keep theirs).
struct TurboJpeg {
    tjhandle decompressor = nullptr, compressor = nullptr;
    ~TurboJpeg() {
        if (decompressor) tjDestroy(decompressor);
        if (compressor) tjDestroy(compressor);
    }
};
thread_local TurboJpeg t_tj;

tjhandle decompressor() {
    if (!t_tj.decompressor && !(t_tj.decompressor = tjInitDecompress()))
        fail(RT_ERROR_OUT_OF_MEMORY, "tjInitDecompress failed: %s", tjGetErrorStr2(nullptr));
    return t_tj.decompressor;
}

/// After a failure the instance is dropped: TurboJPEG 2.1 leaves a decompressor mid-header when tjDecompressHeader3
/// fails, and the next header read on it would continue from that state.
void drop_decompressor() noexcept {
    if (t_tj.decompressor) tjDestroy(t_tj.decompressor);
    t_tj.decompressor = nullptr;
}

tjhandle compressor() {
    if (!t_tj.compressor && !(t_tj.compressor = tjInitCompress()))
        fail(RT_ERROR_OUT_OF_MEMORY, "tjInitCompress failed: %s", tjGetErrorStr2(nullptr));
    return t_tj.compressor;
}

struct JpegHeader {
    int width = 0, height = 0;
    int subsamp = -1;    // TJSAMP_*
    int colorspace = 0;  // TJCS_*
    bool cmyk() const { return colorspace == TJCS_CMYK || colorspace == TJCS_YCCK; }
    int components() const { return colorspace == TJCS_GRAY ? 1 : cmyk() ? 4 : 3; }
};

/// Reads the header of a JPEG in host memory (`what`: "rtDvppDecodeJpeg: data"). INVALID_IMAGE for an empty buffer,
/// data that is not a JPEG (naming its first bytes) or a header TurboJPEG refuses (with its message).
JpegHeader read_header(const void* data, size_t size, const std::string& what) {
    if (size == 0) fail(RT_ERROR_INVALID_IMAGE, "%s: size is 0 (an empty buffer is not a JPEG)", what.c_str());
    const auto* p = static_cast<const uint8_t*>(data);
    if (size < 3 || p[0] != 0xFF || p[1] != 0xD8 || p[2] != 0xFF)
        fail(RT_ERROR_INVALID_IMAGE, "%s: not a JPEG: its %zu byte(s) start with %s (a JPEG starts with FF D8 FF)",
             what.c_str(), size, describe_start(data, size).c_str());
    if (size > ULONG_MAX) fail(RT_ERROR_INVALID_IMAGE, "%s: %zu bytes is too large for TurboJPEG", what.c_str(), size);
    JpegHeader h;
    tjhandle t = decompressor();
    if (tjDecompressHeader3(t, p, static_cast<unsigned long>(size), &h.width, &h.height, &h.subsamp,
                            &h.colorspace) != 0)
    {
        const std::string message = tjGetErrorStr2(t);
        drop_decompressor();
        fail(RT_ERROR_INVALID_IMAGE, "%s: the JPEG header (%zu bytes) is corrupt, cut short or not supported: %s",
             what.c_str(), size, message.c_str());
    }
    if (h.width <= 0 || h.height <= 0)
        fail(RT_ERROR_INVALID_IMAGE, "%s: the JPEG (%zu bytes) holds no image (only tables)", what.c_str(), size);
    return h;
}

/// The smallest of libjpeg's down-scales (num/denom <= 1: 1/8, 2/8, ..., 8/8) whose result is at least
/// min_width x min_height (0: no minimum on that side); 1/1 when even that is smaller than the minimum.
tjscalingfactor choose_scale(const JpegHeader& h, uint32_t min_width, uint32_t min_height) {
    tjscalingfactor best{1, 1};
    if (min_width == 0 && min_height == 0) return best;
    int count = 0;
    const tjscalingfactor* factors = tjGetScalingFactors(&count);
    for (int i = 0; factors && i < count; ++i) {
        const tjscalingfactor f = factors[i];
        if (f.num > f.denom) continue;
        if (static_cast<uint32_t>(TJSCALED(h.width, f)) < min_width ||
            static_cast<uint32_t>(TJSCALED(h.height, f)) < min_height)
            continue;
        if (static_cast<long>(f.num) * best.denom < static_cast<long>(best.num) * f.denom) best = f;
    }
    return best;
}

int packed_tjpf(rtPixelFormat f) {
    switch (f) {
        case RT_PIXEL_FORMAT_GRAY8: return TJPF_GRAY;
        case RT_PIXEL_FORMAT_RGB888: return TJPF_RGB;
        case RT_PIXEL_FORMAT_BGR888: return TJPF_BGR;
        case RT_PIXEL_FORMAT_RGBA8888: return TJPF_RGBA;  // decoding fills alpha with 255
        case RT_PIXEL_FORMAT_BGRA8888: return TJPF_BGRA;
        default: return -1;
    }
}

[[noreturn]] void fail_decode(tjhandle t) {
    const std::string message = tjGetErrorStr2(t);
    drop_decompressor();
    fail(RT_ERROR_INVALID_IMAGE, "corrupt or truncated JPEG: %s", message.c_str());
}

// ---- host colour conversions (see the top of the file)

/// Adobe CMYK (inverted) to RGB, in place: pixel i's 4 bytes become its 3 (forward, so nothing unread is overwritten).
void cmyk_to_rgb(uint8_t* p, size_t pixels) {
    for (size_t i = 0; i < pixels; ++i) {
        const unsigned c = p[4 * i], m = p[4 * i + 1], y = p[4 * i + 2], k = p[4 * i + 3];
        p[3 * i] = static_cast<uint8_t>((c * k + 127) / 255);
        p[3 * i + 1] = static_cast<uint8_t>((m * k + 127) / 255);
        p[3 * i + 2] = static_cast<uint8_t>((y * k + 127) / 255);
    }
}

/// Dense RGB (w x h) into a packed picture of any packed format (grey: color_math.h's BT.601 luma).
void rgb_to_packed(const uint8_t* rgb, int w, int h, uint8_t* dst, const Layout& L) {
    const Plane& P = L.planes[0];
    for (int y = 0; y < h; ++y) {
        const uint8_t* s = rgb + size_t(y) * w * 3;
        uint8_t* d = dst + P.offset + y * P.pitch;
        for (int x = 0; x < w; ++x, s += 3) {
            const uint8_t r = s[0], g = s[1], b = s[2];
            switch (L.format) {
                case RT_PIXEL_FORMAT_GRAY8: d[x] = dvpp_rgb_to_grey(r, g, b); break;
                case RT_PIXEL_FORMAT_RGB888: d[3 * x] = r, d[3 * x + 1] = g, d[3 * x + 2] = b; break;
                case RT_PIXEL_FORMAT_BGR888: d[3 * x] = b, d[3 * x + 1] = g, d[3 * x + 2] = r; break;
                case RT_PIXEL_FORMAT_RGBA8888: d[4 * x] = r, d[4 * x + 1] = g, d[4 * x + 2] = b, d[4 * x + 3] = 255; break;
                case RT_PIXEL_FORMAT_BGRA8888: d[4 * x] = b, d[4 * x + 1] = g, d[4 * x + 2] = r, d[4 * x + 3] = 255; break;
                default: break;
            }
        }
    }
}

/// Dense RGB (w x h, both even) into a 4:2:0 picture as rtDvppConvertColor does with RT_COLOR_BT601_FULL: every
/// pixel's Y, each 2 x 2 block's U and V from its top-left pixel (kernels/color.cpp's packed_to_yuv).
void rgb_to_yuv420(const uint8_t* rgb, int w, int h, uint8_t* dst, const Layout& L) {
    const DvppRgbToYuv k = dvpp_rgb_to_yuv_coeffs(DVPP_BT601_FULL);
    const Plane& Y = L.planes[0];
    for (int y = 0; y < h; ++y) {
        const uint8_t* s = rgb + size_t(y) * w * 3;
        uint8_t* d = dst + Y.offset + y * Y.pitch;
        for (int x = 0; x < w; ++x, s += 3) d[x] = dvpp_rgb_to_y(k, s[0], s[1], s[2]);
    }
    const Chroma C = chroma_of(dst, L);
    for (int y = 0; y < h / 2; ++y) {
        const uint8_t* s = rgb + size_t(2 * y) * w * 3;
        for (int x = 0; x < w / 2; ++x, s += 6) {
            C.u[y * C.pitch + x * C.step] = dvpp_rgb_to_u(k, s[0], s[1], s[2]);
            C.v[y * C.pitch + x * C.step] = dvpp_rgb_to_v(k, s[0], s[1], s[2]);
        }
    }
}

/// One native chroma plane (sampled every sx x sy luma pixels) box-filtered into 4:2:0 (w/2 x h/2): each output the
/// rounded mean of the source samples under its 2 x 2 luma pixels (a copy when the source is 4:2:0 itself).
void chroma_to_420(const uint8_t* src, size_t src_pitch, int sx, int sy, uint8_t* dst, size_t pitch, size_t step,
                   int w, int h) {
    for (int y = 0; y < h / 2; ++y) {
        const uint8_t* r0 = src + size_t(2 * y / sy) * src_pitch;
        const uint8_t* r1 = src + size_t((2 * y + 1) / sy) * src_pitch;
        uint8_t* d = dst + y * pitch;
        for (int x = 0; x < w / 2; ++x) {
            const int c0 = 2 * x / sx, c1 = (2 * x + 1) / sx;
            d[x * step] = static_cast<uint8_t>((r0[c0] + r0[c1] + r1[c0] + r1[c1] + 2) >> 2);
        }
    }
}

/// Luma pixels per chroma sample of a subsampling decoded to native planes (horizontally, vertically); false for the
/// others (grey, 4:1:1, unknown).
bool chroma_factors(int subsamp, int* sx, int* sy) {
    switch (subsamp) {
        case TJSAMP_444: *sx = 1, *sy = 1; return true;
        case TJSAMP_422: *sx = 2, *sy = 1; return true;
        case TJSAMP_420: *sx = 2, *sy = 2; return true;
        case TJSAMP_440: *sx = 1, *sy = 2; return true;
        // 4:1:1 goes through RGB: libjpeg-turbo 2.1's tjDecompressToYUVPlanes reads past its own row buffer for
        // 4:1:1 images whose width is not a multiple of 32.
        default: return false;
    }
}

// ---- decoding

class JpegImage final : public DecodeImage {
public:
    JpegImage(const void* data, size_t size, const Layout& layout, void* out, const JpegHeader& header,
              tjscalingfactor scale)
        : DecodeImage(data, size, layout, out), header_(header), scale_(scale), path_(choose_path()) {}

    void decode(uint8_t* dst) const override {
        switch (path_) {
            case Path::packed: return decode_packed(dst);
            case Path::via_rgb: return decode_via_rgb(dst);
            default: return decode_yuv420(dst);
        }
    }

    TraceNames trace_names() const override { return {"jpeg decode", "jpeg decode batch"}; }
    std::pair<uint32_t, uint32_t> encoded_size() const override {
        return {static_cast<uint32_t>(header_.width), static_cast<uint32_t>(header_.height)};
    }
    std::string describe() const override {
        static const char* const kSubsampling[] = {"4:4:4", "4:2:2", "4:2:0", "grey", "4:4:0", "4:1:1"};
        static const char* const kColourspaces[] = {"RGB", "YCbCr", "grey", "CMYK", "YCCK"};
        const char* sub = header_.subsamp >= 0 && header_.subsamp < 6 ? kSubsampling[header_.subsamp] : "unknown";
        const char* cs = header_.colorspace >= 0 && header_.colorspace < 5 ? kColourspaces[header_.colorspace] : "?";
        std::string s = format("a %s %s JPEG of %d x %d", sub, cs, header_.width, header_.height);
        if (scale_.num != scale_.denom) s += format(" at scale %d/%d", scale_.num, scale_.denom);
        switch (path_) {
            case Path::packed: return s + ", by TurboJPEG's own conversion";
            case Path::via_rgb:
                return s + (header_.cmyk() ? ", through RGB (inks converted)"
                            : is_yuv420(layout().format) ? ", through RGB (no native planes to keep)"
                                                         : ", through RGB (grey of colour, as rtDvppConvertColor)");
            case Path::yuv_grey: return s + ", luma straight into the picture, neutral chroma";
            case Path::yuv_direct: return s + ", straight into the picture's planes";
            case Path::yuv_resampled: return s + ", native planes resampled into 4:2:0";
        }
        return s;
    }

private:
    /// How decode() proceeds, chosen once from the header and the output format.
    enum class Path { packed, via_rgb, yuv_grey, yuv_direct, yuv_resampled };
    Path choose_path() const {
        const Layout& L = layout();
        if (!is_yuv420(L.format)) {
            // RGB first: the grey of an RGB JPEG is color_math.h's, not libjpeg's
            if (header_.cmyk() || (L.format == RT_PIXEL_FORMAT_GRAY8 && header_.colorspace == TJCS_RGB))
                return Path::via_rgb;
            return Path::packed;
        }
        int sx = 0, sy = 0;
        if (header_.colorspace == TJCS_GRAY) return Path::yuv_grey;
        if (header_.colorspace != TJCS_YCbCr || !chroma_factors(header_.subsamp, &sx, &sy)) return Path::via_rgb;
        if (L.format == RT_PIXEL_FORMAT_YUV420P && header_.subsamp == TJSAMP_420) return Path::yuv_direct;
        return Path::yuv_resampled;
    }

    int w() const { return static_cast<int>(layout().width); }
    int h() const { return static_cast<int>(layout().height); }
    unsigned long jpeg_size() const { return static_cast<unsigned long>(size()); }

    void decode_packed(uint8_t* dst) const {
        const Plane& P = layout().planes[0];
        tjhandle t = decompressor();
        if (tjDecompress2(t, bytes(), jpeg_size(), dst + P.offset, w(), static_cast<int>(P.pitch), h(),
                          packed_tjpf(layout().format), kDecodeFlags) != 0)
            fail_decode(t);
    }

    /// Dense RGB of the image in scratch memory (CMYK converted).
    uint8_t* decode_rgb() const {
        tjhandle t = decompressor();
        const size_t pixels = size_t(w()) * h();
        uint8_t* rgb = scratch(pixels * 4);
        const bool cmyk = header_.cmyk();
        if (tjDecompress2(t, bytes(), jpeg_size(), rgb, w(), 0, h(), cmyk ? TJPF_CMYK : TJPF_RGB, kDecodeFlags) != 0)
            fail_decode(t);
        if (cmyk) cmyk_to_rgb(rgb, pixels);
        return rgb;
    }

    void decode_via_rgb(uint8_t* dst) const {
        const uint8_t* rgb = decode_rgb();
        if (is_yuv420(layout().format)) rgb_to_yuv420(rgb, w(), h(), dst, layout());
        else rgb_to_packed(rgb, w(), h(), dst, layout());
    }

    void decode_yuv420(uint8_t* dst) const {
        const Layout& L = layout();
        int sx = 0, sy = 0;
        chroma_factors(header_.subsamp, &sx, &sy);  // yuv_resampled: known factors (choose_path)
        tjhandle t = decompressor();
        const Chroma C = chroma_of(dst, L);
        unsigned char* planes[3] = {dst + L.planes[0].offset, nullptr, nullptr};
        int strides[3] = {static_cast<int>(L.planes[0].pitch), 0, 0};
        if (path_ == Path::yuv_grey) {
            if (tjDecompressToYUVPlanes(t, bytes(), jpeg_size(), planes, w(), strides, h(), kDecodeFlags) != 0)
                fail_decode(t);
            for (int y = 0; y < h() / 2; ++y)
                for (int x = 0; x < w() / 2; ++x) C.u[y * C.pitch + x * C.step] = C.v[y * C.pitch + x * C.step] = 128;
            return;
        }
        if (path_ == Path::yuv_direct) {
            planes[1] = C.u, planes[2] = C.v;  // straight into the picture
            strides[1] = strides[2] = static_cast<int>(C.pitch);
            if (tjDecompressToYUVPlanes(t, bytes(), jpeg_size(), planes, w(), strides, h(), kDecodeFlags) != 0)
                fail_decode(t);
            return;
        }
        // The native chroma planes in scratch, then resampled (or, for 4:2:0, interleaved) into the picture.
        const int cw = tjPlaneWidth(1, w(), header_.subsamp), ch = tjPlaneHeight(1, h(), header_.subsamp);
        if (cw <= 0 || ch <= 0) fail(RT_ERROR_INVALID_IMAGE, "the JPEG's chroma planes have no size");
        uint8_t* native = scratch(size_t(cw) * ch * 2);
        planes[1] = native, planes[2] = native + size_t(cw) * ch;
        strides[1] = strides[2] = cw;
        if (tjDecompressToYUVPlanes(t, bytes(), jpeg_size(), planes, w(), strides, h(), kDecodeFlags) != 0)
            fail_decode(t);
        chroma_to_420(planes[1], size_t(cw), sx, sy, C.u, C.pitch, C.step, w(), h());
        chroma_to_420(planes[2], size_t(cw), sx, sy, C.v, C.pitch, C.step, w(), h());
    }

    JpegHeader header_;
    tjscalingfactor scale_;
    Path path_;
};

const std::vector<rtPixelFormat> kDecodeFormats = {
    RT_PIXEL_FORMAT_GRAY8,    RT_PIXEL_FORMAT_RGB888,        RT_PIXEL_FORMAT_BGR888,        RT_PIXEL_FORMAT_RGBA8888,
    RT_PIXEL_FORMAT_BGRA8888, RT_PIXEL_FORMAT_YUV420SP_NV12, RT_PIXEL_FORMAT_YUV420SP_NV21, RT_PIXEL_FORMAT_YUV420P};

/// Checks one image of a decode call and makes its work: the header, the scale, the output descriptor.
std::unique_ptr<JpegImage> plan_decode(const CoreDevice& device, const void* data, size_t size, uint32_t min_width,
                                       uint32_t min_height, const rtPicture* out, const std::string& data_name,
                                       const std::string& out_name) {
    if (!data) fail(RT_ERROR_INVALID_VALUE, "%s is NULL (expected the JPEG's bytes in host memory)", data_name.c_str());
    const JpegHeader h = read_header(data, size, data_name);
    const tjscalingfactor f = choose_scale(h, min_width, min_height);
    const uint32_t w = static_cast<uint32_t>(TJSCALED(h.width, f)), ht = static_cast<uint32_t>(TJSCALED(h.height, f));
    std::string source = format("the JPEG (%d x %d)", h.width, h.height);
    if (f.num != f.denom) source += format(" at scale %d/%d", f.num, f.denom);
    Layout layout = decode_output(device, out, w, ht, kDecodeFormats, out_name.c_str(), source);
    return std::make_unique<JpegImage>(data, size, layout, out->data, h, f);
}

void decode_call(const char* api, const void* data, size_t size, uint32_t min_width, uint32_t min_height,
                 rtPicture* out, rtStream_t stream) {
    const CoreDevice& device = stream_device(stream);
    std::vector<std::unique_ptr<DecodeImage>> images;
    images.push_back(plan_decode(device, data, size, min_width, min_height, out, format("%s: data", api),
                                 format("%s: out", api)));
    const Layout layout = images[0]->layout();
    queue_decode(stream, api, std::move(images), false);
    write_back(out, layout);
}

// ---- encoding

struct EncodeFormat {
    int tjpf;     // packed: the TurboJPEG pixel format; -1 for the 4:2:0 formats
    int subsamp;  // of the JPEG written
};

EncodeFormat encode_format(rtPixelFormat f) {
    switch (f) {
        case RT_PIXEL_FORMAT_GRAY8: return {TJPF_GRAY, TJSAMP_GRAY};
        case RT_PIXEL_FORMAT_RGB888: return {TJPF_RGB, TJSAMP_420};
        case RT_PIXEL_FORMAT_BGR888: return {TJPF_BGR, TJSAMP_420};
        case RT_PIXEL_FORMAT_RGBA8888: return {TJPF_RGBX, TJSAMP_420};  // alpha ignored
        case RT_PIXEL_FORMAT_BGRA8888: return {TJPF_BGRX, TJSAMP_420};
        default: return {-1, TJSAMP_420};
    }
}

/// Checks a picture for encoding (the JPEG's size limit included) and returns its layout (`memory`: the device whose
/// memory it must be, or NULL for the descriptor alone).
Layout encodable(const CoreDevice* device, const rtPicture* picture, const char* what) {
    check_codec_pitch(check_descriptor(picture, what), what);  // before the memory: no allocation needed to refuse
    Layout L = device ? check_picture(*device, picture, what) : check_descriptor(picture, what);
    if (L.width > 65535 || L.height > 65535)
        fail(RT_ERROR_INVALID_VALUE, "%s: %u x %u is larger than a JPEG can be (65535 x 65535)", what, L.width,
             L.height);
    return L;
}

size_t encode_bound(const Layout& L) {
    const unsigned long b = tjBufSize(static_cast<int>(L.width), static_cast<int>(L.height),
                                      encode_format(L.format).subsamp);
    if (b == static_cast<unsigned long>(-1)) fail(RT_ERROR_INVALID_VALUE, "tjBufSize failed: %s", tjGetErrorStr2(nullptr));
    return b;
}

class EncodeWork final : public HostWork {
public:
    Layout layout;
    const uint8_t* source = nullptr;  // the picture (host-addressable device) or the staging
    std::unique_ptr<PinnedBuffer> staging;
    uint8_t* out = nullptr;
    size_t* out_size = nullptr;
    int quality = 0;

    static void encode(HostWork& w, size_t) {
        auto& work = static_cast<EncodeWork&>(w);
        work.run();
        release_large_scratch();
    }

private:
    void run() const {
        const Layout& L = layout;
        const int w = static_cast<int>(L.width), h = static_cast<int>(L.height);
        tjhandle t = compressor();
        unsigned char* buffer = out;
        unsigned long bytes = 0;
        const EncodeFormat ef = encode_format(L.format);
        int rc;
        if (ef.tjpf >= 0) {
            rc = tjCompress2(t, source + L.planes[0].offset, w, static_cast<int>(L.planes[0].pitch), h, ef.tjpf,
                             &buffer, &bytes, ef.subsamp, quality, TJFLAG_NOREALLOC);
        } else {
            const unsigned char* planes[3] = {source + L.planes[0].offset, nullptr, nullptr};
            int strides[3] = {static_cast<int>(L.planes[0].pitch), 0, 0};
            if (L.format == RT_PIXEL_FORMAT_YUV420P) {
                planes[1] = source + L.planes[1].offset, planes[2] = source + L.planes[2].offset;
                strides[1] = static_cast<int>(L.planes[1].pitch), strides[2] = static_cast<int>(L.planes[2].pitch);
            } else {  // de-interleave NV12/NV21's chroma
                const size_t cw = L.width / 2, ch = L.height / 2;
                uint8_t* u = scratch(cw * ch * 2);
                uint8_t* v = u + cw * ch;
                const uint8_t* c = source + L.planes[1].offset;
                const bool nv12 = L.format == RT_PIXEL_FORMAT_YUV420SP_NV12;
                for (size_t y = 0; y < ch; ++y)
                    for (size_t x = 0; x < cw; ++x) {
                        const uint8_t* p = c + y * L.planes[1].pitch + 2 * x;
                        u[y * cw + x] = nv12 ? p[0] : p[1];
                        v[y * cw + x] = nv12 ? p[1] : p[0];
                    }
                planes[1] = u, planes[2] = v;
                strides[1] = strides[2] = static_cast<int>(cw);
            }
            rc = tjCompressFromYUVPlanes(t, planes, w, strides, h, TJSAMP_420, &buffer, &bytes, quality,
                                         TJFLAG_NOREALLOC);
        }
        if (rc != 0) {
            const std::string message = tjGetErrorStr2(t);
            tjDestroy(t_tj.compressor);
            t_tj.compressor = nullptr;
            fail(RT_ERROR_UNKNOWN, "rtDvppEncodeJpeg: TurboJPEG failed: %s", message.c_str());
        }
        *out_size = bytes;
    }
};

#else  // !RUNTIME_HAVE_TURBOJPEG

[[noreturn]] void no_turbojpeg() {
    fail(RT_ERROR_NOT_SUPPORTED, "this build has no JPEG codec: it was built without libjpeg-turbo's TurboJPEG "
         "(Debian: apt-get install libturbojpeg0-dev, then rebuild the runtime)");
}

#endif

}  // namespace

extern "C" {

RT_API rtError_t rtDvppJpegGetInfo(const void* data, size_t size, uint32_t* width, uint32_t* height, int* components) {
    return capi_call("rtDvppJpegGetInfo", [&] {
#if RUNTIME_HAVE_TURBOJPEG
        if (!data) fail(RT_ERROR_INVALID_VALUE, "data is NULL (expected the JPEG's bytes in host memory)");
        const JpegHeader h = read_header(data, size, "rtDvppJpegGetInfo");
        if (width) *width = static_cast<uint32_t>(h.width);
        if (height) *height = static_cast<uint32_t>(h.height);
        if (components) *components = h.components();
#else
        (void)data, (void)size, (void)width, (void)height, (void)components;
        no_turbojpeg();
#endif
    });
}

RT_API rtError_t rtDvppDecodeJpeg(const void* data, size_t size, rtPicture* out, rtStream_t stream) {
    return capi_call("rtDvppDecodeJpeg", [&] {
#if RUNTIME_HAVE_TURBOJPEG
        decode_call("rtDvppDecodeJpeg", data, size, 0, 0, out, stream);
#else
        (void)data, (void)size, (void)out, (void)stream;
        no_turbojpeg();
#endif
    });
}

RT_API rtError_t rtDvppDecodeJpegScaled(const void* data, size_t size, uint32_t min_width, uint32_t min_height,
                                        rtPicture* out, rtStream_t stream) {
    return capi_call("rtDvppDecodeJpegScaled", [&] {
#if RUNTIME_HAVE_TURBOJPEG
        decode_call("rtDvppDecodeJpegScaled", data, size, min_width, min_height, out, stream);
#else
        (void)data, (void)size, (void)min_width, (void)min_height, (void)out, (void)stream;
        no_turbojpeg();
#endif
    });
}

RT_API rtError_t rtDvppDecodeJpegBatch(const void* const* datas, const size_t* sizes, uint32_t n,
                                       const uint32_t* min_widths, const uint32_t* min_heights, rtPicture* outs,
                                       rtStream_t stream) {
    return capi_call("rtDvppDecodeJpegBatch", [&] {
#if RUNTIME_HAVE_TURBOJPEG
        constexpr const char* api = "rtDvppDecodeJpegBatch";
        const CoreDevice& device = stream_device(stream);
        if (n == 0) return;
        if (!datas) fail(RT_ERROR_INVALID_VALUE, "datas is NULL (expected %u pointers to JPEGs)", n);
        if (!sizes) fail(RT_ERROR_INVALID_VALUE, "sizes is NULL (expected %u byte counts)", n);
        if (!outs) fail(RT_ERROR_INVALID_VALUE, "outs is NULL (expected %u output pictures)", n);
        std::vector<std::unique_ptr<DecodeImage>> images;
        images.reserve(n);
        for (uint32_t i = 0; i < n; ++i)
            images.push_back(plan_decode(device, datas[i], sizes[i], min_widths ? min_widths[i] : 0,
                                         min_heights ? min_heights[i] : 0, &outs[i],
                                         format("%s: datas[%u]", api, i), format("%s: outs[%u]", api, i)));
        std::vector<Layout> layouts;
        layouts.reserve(n);
        for (const auto& image : images) layouts.push_back(image->layout());
        queue_decode(stream, api, std::move(images), true);
        for (uint32_t i = 0; i < n; ++i) write_back(&outs[i], layouts[i]);
#else
        (void)datas, (void)sizes, (void)n, (void)min_widths, (void)min_heights, (void)outs, (void)stream;
        no_turbojpeg();
#endif
    });
}

RT_API rtError_t rtDvppEncodeJpegBound(const rtPicture* picture, size_t* bytes) {
    return capi_call("rtDvppEncodeJpegBound", [&] {
#if RUNTIME_HAVE_TURBOJPEG
        require_out(bytes, "bytes");
        *bytes = encode_bound(encodable(nullptr, picture, "rtDvppEncodeJpegBound: picture"));
#else
        (void)picture, (void)bytes;
        no_turbojpeg();
#endif
    });
}

RT_API rtError_t rtDvppEncodeJpeg(const rtPicture* picture, int quality, void* out, size_t* out_size,
                                  rtStream_t stream) {
    return capi_call("rtDvppEncodeJpeg", [&] {
#if RUNTIME_HAVE_TURBOJPEG
        const CoreDevice& device = stream_device(stream);
        const Layout L = encodable(&device, picture, "rtDvppEncodeJpeg: picture");
        if (quality < 1 || quality > 100)
            fail(RT_ERROR_INVALID_VALUE, "quality %d is out of range (expected 1..100)", quality);
        if (!out) fail(RT_ERROR_INVALID_VALUE, "out is NULL (expected host memory for the JPEG)");
        require_out(out_size, "out_size");
        const size_t bound = encode_bound(L);
        if (*out_size < bound)
            fail(RT_ERROR_INVALID_VALUE, "*out_size %zu is below the %zu bytes a JPEG of this %u x %u %s picture may "
                 "need (rtDvppEncodeJpegBound)", *out_size, bound, L.width, L.height, format_name(L.format));
        auto work = std::make_unique<EncodeWork>();
        EncodeWork& w = *work;
        w.layout = L;
        w.out = static_cast<uint8_t*>(out);
        w.out_size = out_size;
        w.quality = quality;
        HostWorkQueue queue(std::move(work), stream, "rtDvppEncodeJpeg");
        if (host_addressable(device)) {
            w.source = static_cast<const uint8_t*>(picture->data);
        } else {
            w.staging = std::make_unique<PinnedBuffer>(L.bytes);
            w.source = w.staging->data();
            queue.copy(0, w.staging->data(), picture->data, L.bytes);
        }
        trace::DvppWork traced;
        traced.name = "jpeg encode";
        traced.bytes = L.bytes;
        traced.src[0] = traced.dst[0] = L.width;
        traced.src[1] = traced.dst[1] = L.height;
        traced.format = format_name(L.format);
        queue.step(0, &EncodeWork::encode, 0, traced);
#else
        (void)picture, (void)quality, (void)out, (void)out_size, (void)stream;
        no_turbojpeg();
#endif
    });
}

}  // extern "C"
