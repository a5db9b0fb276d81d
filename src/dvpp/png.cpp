// DVPP's PNG decoder over libpng: rtDvppPngGetInfo and rtDvppDecodePng, the decode queued as host work on the stream.
//
// Conversions (libpng's transforms, chosen as OpenCV's cv2.imdecode chooses them, so results agree): palettes and
// 1/2/4-bit grey are expanded to 8 bits; 16-bit samples keep their high byte (png_set_strip_16); grey becomes RGB by
// replication; colour becomes grey as rtDvppConvertColor makes it of RGB888 (kernels/color_math.h's BT.601 luma,
// included here as host code: one formula; cv2.imdecode's, libpng's weights, is within 1 of it); alpha (and tRNS
// transparency) is dropped when the output has no alpha channel, added as 255 when the image has none. No gamma
// correction is applied. A PNG cut short, a bad CRC on a critical chunk or corrupt compressed data fails the decode;
// libpng's warnings about ancillary chunks (an incorrect sRGB profile, say) do not.
//
// libpng reports errors by longjmp: the function that calls setjmp (run_png) keeps only trivially destructible state,
// so no C++ destructor is ever skipped.
#include <algorithm>
#include <csetjmp>
#include <cstdio>
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

#if RUNTIME_HAVE_PNG
#include <png.h>
#endif

using namespace rt;
using namespace rt::dvpp;

namespace {

const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

#if RUNTIME_HAVE_PNG

/// The header fields a decode depends on.
struct PngHeader {
    uint32_t width = 0, height = 0;
    int bit_depth = 0, color_type = 0;
    bool trns = false;  // a tRNS chunk: transparency without an alpha channel
    int components() const {
        const bool alpha = (color_type & PNG_COLOR_MASK_ALPHA) || trns;
        return ((color_type & PNG_COLOR_MASK_COLOR) ? 3 : 1) + (alpha ? 1 : 0);
    }
};

/// One libpng pass over a PNG in memory: the header only (dst NULL), or the decode into dst laid out as *layout.
/// Plain data only: libpng longjmps out of its callbacks.
struct PngPass {
    const uint8_t* data;
    size_t size;
    size_t at;
    const Layout* layout;
    uint8_t* dst;
    PngHeader header;
    char message[256];
};

void on_error(png_structp png, png_const_charp message) {
    auto* pass = static_cast<PngPass*>(png_get_error_ptr(png));
    std::snprintf(pass->message, sizeof pass->message, "%s", message ? message : "libpng error");
    png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}  // ancillary-chunk trouble only: the image itself is fine

void on_read(png_structp png, png_bytep out, size_t bytes) {
    auto* pass = static_cast<PngPass*>(png_get_io_ptr(png));
    if (bytes > pass->size - pass->at) png_error(png, "the PNG is cut short (its data ends before the image does)");
    std::memcpy(out, pass->data + pass->at, bytes);
    pass->at += bytes;
}

/// The transforms that turn the image into `format`'s 8-bit channels (GRAY8 from a grey image only: colour is made
/// grey after decoding, PngImage::decode).
void set_transforms(png_structp png, const PngHeader& h, rtPixelFormat format) {
    const bool want_colour = format != RT_PIXEL_FORMAT_GRAY8;
    const bool want_alpha = format == RT_PIXEL_FORMAT_RGBA8888 || format == RT_PIXEL_FORMAT_BGRA8888;
    const bool colour = (h.color_type & PNG_COLOR_MASK_COLOR) != 0;
    if (h.color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (!colour && h.bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (h.bit_depth == 16) png_set_strip_16(png);
    if (want_alpha) {
        if (h.trns) png_set_tRNS_to_alpha(png);
        else if (!(h.color_type & PNG_COLOR_MASK_ALPHA)) png_set_add_alpha(png, 0xFF, PNG_FILLER_AFTER);
    } else if ((h.color_type & PNG_COLOR_MASK_ALPHA) || h.trns) {
        png_set_strip_alpha(png);  // a palette's expansion turns tRNS into alpha too
    }
    if (want_colour && !colour) png_set_gray_to_rgb(png);
    if (format == RT_PIXEL_FORMAT_BGR888 || format == RT_PIXEL_FORMAT_BGRA8888) png_set_bgr(png);
}

/// Runs one pass; false with pass->message set when libpng fails.
bool run_png(PngPass* pass) {
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, pass, on_error, on_warning);
    if (!png) {
        std::snprintf(pass->message, sizeof pass->message, "libpng could not allocate its reader");
        return false;
    }
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_read_struct(&png, nullptr, nullptr);
        std::snprintf(pass->message, sizeof pass->message, "libpng could not allocate its reader");
        return false;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, nullptr);
        return false;
    }
    png_set_read_fn(png, pass, on_read);
    png_read_info(png, info);
    PngHeader& h = pass->header;
    h.width = png_get_image_width(png, info);
    h.height = png_get_image_height(png, info);
    h.bit_depth = png_get_bit_depth(png, info);
    h.color_type = png_get_color_type(png, info);
    h.trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    if (pass->dst) {
        const Layout& L = *pass->layout;
        if (L.width != h.width || L.height != h.height) png_error(png, "the PNG's header changed between passes");
        set_transforms(png, h, L.format);
        const int passes = png_set_interlace_handling(png);
        png_read_update_info(png, info);
        const Plane& P = L.planes[0];
        if (png_get_rowbytes(png, info) != size_t{P.width} * P.channels)
            png_error(png, "libpng's rows do not have the output's size (an unsupported combination of formats)");
        for (int p = 0; p < passes; ++p)
            for (uint32_t y = 0; y < h.height; ++y) png_read_row(png, pass->dst + P.offset + y * P.pitch, nullptr);
        png_read_end(png, nullptr);
    }
    png_destroy_read_struct(&png, &info, nullptr);
    return true;
}

/// Reads the header of a PNG in host memory (`what`: "rtDvppDecodePng: data"). INVALID_IMAGE for an empty buffer, data
/// that is not a PNG (naming its first bytes) or a header libpng refuses (with its message).
PngHeader read_header(const void* data, size_t size, const std::string& what) {
    if (size == 0) fail(RT_ERROR_INVALID_IMAGE, "%s: size is 0 (an empty buffer is not a PNG)", what.c_str());
    const auto* p = static_cast<const uint8_t*>(data);
    if (size < 8 || std::memcmp(p, kSignature, 8) != 0)
        fail(RT_ERROR_INVALID_IMAGE, "%s: not a PNG: its %zu byte(s) start with %s (a PNG starts with 89 50 4E 47 0D "
             "0A 1A 0A)", what.c_str(), size, describe_start(data, size).c_str());
    PngPass pass{};
    pass.data = p;
    pass.size = size;
    if (!run_png(&pass))
        fail(RT_ERROR_INVALID_IMAGE, "%s: the PNG header (%zu bytes) is corrupt or cut short: %s", what.c_str(), size,
             pass.message);
    return pass.header;
}

class PngImage final : public DecodeImage {
public:
    PngImage(const void* data, size_t size, const Layout& layout, void* out, const PngHeader& header)
        : DecodeImage(data, size, layout, out), header_(header),
          colour_((header.color_type & PNG_COLOR_MASK_COLOR) != 0) {}

    TraceNames trace_names() const override { return {"png decode", "png decode batch"}; }
    std::string describe() const override {
        const bool palette = header_.color_type & PNG_COLOR_MASK_PALETTE;
        const bool alpha = (header_.color_type & PNG_COLOR_MASK_ALPHA) || header_.trns;
        std::string s = format("a %d-bit %s%s PNG of %u x %u", header_.bit_depth,
                               palette ? "palette" : colour_ ? "colour" : "grey", alpha ? " with alpha" : "",
                               header_.width, header_.height);
        if (layout().format == RT_PIXEL_FORMAT_GRAY8 && colour_)
            return s + ", through RGB (grey of colour, as rtDvppConvertColor)";
        return s + ", by libpng's own transforms";
    }

    void decode(uint8_t* dst) const override {
        const Layout& L = layout();
        PngPass pass{};
        pass.data = bytes();
        pass.size = size();
        if (L.format != RT_PIXEL_FORMAT_GRAY8 || !colour_) {
            pass.layout = &L;
            pass.dst = dst;
            if (!run_png(&pass)) fail(RT_ERROR_INVALID_IMAGE, "corrupt or truncated PNG: %s", pass.message);
            return;
        }
        // Grey of a colour image: dense RGB in scratch, then color_math.h's luma.
        const Layout rgb = layout_of(RT_PIXEL_FORMAT_RGB888, L.width, L.height, 0, 0, "rtDvppDecodePng");
        pass.layout = &rgb;
        pass.dst = scratch(rgb.bytes);
        if (!run_png(&pass)) fail(RT_ERROR_INVALID_IMAGE, "corrupt or truncated PNG: %s", pass.message);
        const Plane& P = L.planes[0];
        for (uint32_t y = 0; y < L.height; ++y) {
            const uint8_t* s = pass.dst + size_t(y) * rgb.planes[0].pitch;
            uint8_t* d = dst + P.offset + y * P.pitch;
            for (uint32_t x = 0; x < L.width; ++x, s += 3) d[x] = dvpp_rgb_to_grey(s[0], s[1], s[2]);
        }
    }

private:
    PngHeader header_;
    bool colour_;
};

const std::vector<rtPixelFormat> kDecodeFormats = {RT_PIXEL_FORMAT_GRAY8, RT_PIXEL_FORMAT_RGB888,
                                                   RT_PIXEL_FORMAT_BGR888, RT_PIXEL_FORMAT_RGBA8888,
                                                   RT_PIXEL_FORMAT_BGRA8888};

#else  // !RUNTIME_HAVE_PNG

[[noreturn]] void no_libpng() {
    fail(RT_ERROR_NOT_SUPPORTED, "this build has no PNG codec: it was built without libpng (Debian: apt-get install "
         "libpng-dev, then rebuild the runtime)");
}

#endif

}  // namespace

extern "C" {

RT_API rtError_t rtDvppPngGetInfo(const void* data, size_t size, uint32_t* width, uint32_t* height, int* components) {
    return capi_call("rtDvppPngGetInfo", [&] {
#if RUNTIME_HAVE_PNG
        if (!data) fail(RT_ERROR_INVALID_VALUE, "data is NULL (expected the PNG's bytes in host memory)");
        const PngHeader h = read_header(data, size, "rtDvppPngGetInfo");
        if (width) *width = h.width;
        if (height) *height = h.height;
        if (components) *components = h.components();
#else
        (void)data, (void)size, (void)width, (void)height, (void)components;
        no_libpng();
#endif
    });
}

RT_API rtError_t rtDvppDecodePng(const void* data, size_t size, rtPicture* out, rtStream_t stream) {
    return capi_call("rtDvppDecodePng", [&] {
#if RUNTIME_HAVE_PNG
        constexpr const char* api = "rtDvppDecodePng";
        const CoreDevice& device = stream_device(stream);
        if (!data) fail(RT_ERROR_INVALID_VALUE, "data is NULL (expected the PNG's bytes in host memory)");
        const PngHeader h = read_header(data, size, "rtDvppDecodePng: data");
        const Layout layout = decode_output(device, out, h.width, h.height, kDecodeFormats, "rtDvppDecodePng: out",
                                            format("the PNG (%u x %u)", h.width, h.height));
        std::vector<std::unique_ptr<DecodeImage>> images;
        images.push_back(std::make_unique<PngImage>(data, size, layout, out->data, h));
        queue_decode(stream, api, std::move(images), false);
        write_back(out, layout);
#else
        (void)data, (void)size, (void)out, (void)stream;
        no_libpng();
#endif
    });
}

}  // extern "C"
