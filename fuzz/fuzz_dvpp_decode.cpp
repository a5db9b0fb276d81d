// fuzz_dvpp_decode.cpp — libFuzzer harness for DVPP's decoders: rtDvppJpegGetInfo, rtDvppDecodeJpeg(Scaled),
// rtDvppDecodeJpegBatch, rtDvppPngGetInfo and rtDvppDecodePng on arbitrary encoded bytes.
//
// Build and run as fuzz_capi (fuzz_capi.cpp), with its own seeds (small JPEGs and PNGs of every kind, each behind a
// flag byte):
//   cmake --build build-fuzz --target fuzz_dvpp_decode
//   build-fuzz/fuzz/fuzz_dvpp_decode -max_total_time=20 -timeout=20 build-fuzz/fuzz/corpus_dvpp fuzz/corpus_dvpp
// scripts/test.sh runs it in its `fuzz` phase (FUZZ_DVPP_SECONDS, default 20).
//
// An input is one flag byte and the encoded image. Flag bits 0-2 pick the output format (of the decoder's list),
// bit 3 the PNG decoder (else JPEG), bits 4-5 a DCT scale request (JPEG: a minimum of 0, 1/2, 1/4 or 1/8 of the
// header's size), bit 6 the batch call (the image between two copies of a valid seed, so the others must decode),
// bit 7 padded strides. Contract: the header call returns SUCCESS or INVALID_IMAGE; the decode call returns SUCCESS,
// INVALID_IMAGE or INVALID_VALUE (a 4:2:0 format with odd sizes, the only refusal a good output can get); its
// synchronize returns SUCCESS or INVALID_IMAGE (naming the image); in a batch the valid images decode to what they
// decode to alone. Anything else aborts: a finding, as is any crash, hang or sanitizer report. Images larger than
// 4 megapixels are only asked for their header (the decode's memory is the caller's, and a fuzzer's time is short).
#include <runtime/dvpp.h>
#include <runtime/runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr uint64_t kMaxPixels = 4u << 20;

const rtPixelFormat kJpegFormats[8] = {RT_PIXEL_FORMAT_RGB888,        RT_PIXEL_FORMAT_BGR888,
                                       RT_PIXEL_FORMAT_GRAY8,         RT_PIXEL_FORMAT_RGBA8888,
                                       RT_PIXEL_FORMAT_BGRA8888,      RT_PIXEL_FORMAT_YUV420SP_NV12,
                                       RT_PIXEL_FORMAT_YUV420SP_NV21, RT_PIXEL_FORMAT_YUV420P};
const rtPixelFormat kPngFormats[8] = {RT_PIXEL_FORMAT_RGB888,   RT_PIXEL_FORMAT_BGR888,   RT_PIXEL_FORMAT_GRAY8,
                                      RT_PIXEL_FORMAT_RGBA8888, RT_PIXEL_FORMAT_BGRA8888, RT_PIXEL_FORMAT_RGB888,
                                      RT_PIXEL_FORMAT_GRAY8,    RT_PIXEL_FORMAT_RGBA8888};

// A valid 8 x 8 grey JPEG (the batch's neighbours of the fuzzed image) and its decode, made at start-up.
std::vector<uint8_t> g_seed;
uint8_t g_seed_pixels[64];

[[noreturn]] void finding(const char* what, rtError_t code) {
    std::fprintf(stderr, "fuzz_dvpp_decode: %s returned %s: %s\n", what, rtGetErrorName(code), rtGetLastErrorMessage());
    std::abort();
}

void expect(const char* what, rtError_t code, rtError_t a, rtError_t b = RT_SUCCESS, rtError_t c = RT_SUCCESS) {
    if (code != a && code != b && code != c) finding(what, code);
}

bool yuv420(rtPixelFormat f) {
    return f == RT_PIXEL_FORMAT_YUV420SP_NV12 || f == RT_PIXEL_FORMAT_YUV420SP_NV21 || f == RT_PIXEL_FORMAT_YUV420P;
}

/// dvpp.h's layout size; odd 4:2:0 sizes get room for a packed picture (the decode call refuses them anyway).
size_t bytes_of(rtPixelFormat f, uint32_t ws, uint32_t hs) {
    if (yuv420(f)) return size_t(ws + 1) * (hs + 1) * 3 / 2;
    return size_t(ws) * hs * (f == RT_PIXEL_FORMAT_GRAY8 ? 1 : f == RT_PIXEL_FORMAT_RGB888 || f == RT_PIXEL_FORMAT_BGR888 ? 3 : 4);
}

struct Output {
    void* data = nullptr;
    rtPicture pic{};
    Output(rtPixelFormat f, uint32_t w, uint32_t h, bool padded) {
        const uint32_t ws = w + (padded ? 6 : 0), hs = h + (padded ? 2 : 0);
        const size_t bytes = bytes_of(f, ws, hs);
        expect("rtMalloc", rtMalloc(&data, bytes), RT_SUCCESS);
        pic.data = data;
        pic.size = bytes;
        pic.format = f;
        pic.width_stride = padded ? ws : 0;
        pic.height_stride = padded ? hs : 0;
    }
    ~Output() { rtFree(data); }
};

void fuzz_jpeg(const uint8_t* data, size_t size, uint8_t flags) {
    uint32_t w = 0, h = 0;
    int comps = 0;
    rtError_t info = rtDvppJpegGetInfo(data, size, &w, &h, &comps);
    expect("rtDvppJpegGetInfo", info, RT_SUCCESS, RT_ERROR_INVALID_IMAGE);
    if (info != RT_SUCCESS || uint64_t(w) * h > kMaxPixels) return;
    const rtPixelFormat f = kJpegFormats[flags & 7];
    const int scale = (flags >> 4) & 3;  // minimum: 0, w/2, w/4, w/8
    const uint32_t min_w = scale ? w >> scale : 0, min_h = scale ? h >> scale : 0;
    const bool padded = flags & 0x80;
    Output out(f, w, h, padded);
    if (!(flags & 0x40)) {
        rtError_t e = rtDvppDecodeJpegScaled(data, size, min_w, min_h, &out.pic, nullptr);
        expect("rtDvppDecodeJpegScaled", e, RT_SUCCESS, RT_ERROR_INVALID_IMAGE, RT_ERROR_INVALID_VALUE);
        if (e == RT_SUCCESS)
            expect("rtStreamSynchronize (decode)", rtStreamSynchronize(nullptr), RT_SUCCESS, RT_ERROR_INVALID_IMAGE);
        return;
    }
    // A batch: seed, the input, seed.
    Output a(RT_PIXEL_FORMAT_GRAY8, 8, 8, false), b(RT_PIXEL_FORMAT_GRAY8, 8, 8, false);
    rtPicture pics[3] = {a.pic, out.pic, b.pic};
    const void* datas[3] = {g_seed.data(), data, g_seed.data()};
    const size_t sizes[3] = {g_seed.size(), size, g_seed.size()};
    const uint32_t mins_w[3] = {0, min_w, 0}, mins_h[3] = {0, min_h, 0};
    rtError_t e = rtDvppDecodeJpegBatch(datas, sizes, 3, mins_w, mins_h, pics, nullptr);
    expect("rtDvppDecodeJpegBatch", e, RT_SUCCESS, RT_ERROR_INVALID_IMAGE, RT_ERROR_INVALID_VALUE);
    if (e != RT_SUCCESS) return;
    e = rtStreamSynchronize(nullptr);
    expect("rtStreamSynchronize (batch)", e, RT_SUCCESS, RT_ERROR_INVALID_IMAGE);
    if (e != RT_SUCCESS && !std::strstr(rtGetLastErrorMessage(), "image 1 of the batch")) finding("the batch's report", e);
    uint8_t first[64], last[64];
    expect("rtMemcpy", rtMemcpy(first, a.data, 64, RT_MEMCPY_DEVICE_TO_HOST), RT_SUCCESS);
    expect("rtMemcpy", rtMemcpy(last, b.data, 64, RT_MEMCPY_DEVICE_TO_HOST), RT_SUCCESS);
    if (std::memcmp(first, g_seed_pixels, 64) != 0 || std::memcmp(last, g_seed_pixels, 64) != 0)
        finding("the batch's valid images decode differently from alone", RT_SUCCESS);
}

void fuzz_png(const uint8_t* data, size_t size, uint8_t flags) {
    uint32_t w = 0, h = 0;
    int comps = 0;
    rtError_t info = rtDvppPngGetInfo(data, size, &w, &h, &comps);
    expect("rtDvppPngGetInfo", info, RT_SUCCESS, RT_ERROR_INVALID_IMAGE);
    if (info != RT_SUCCESS || uint64_t(w) * h > kMaxPixels) return;
    Output out(kPngFormats[flags & 7], w, h, flags & 0x80);
    rtError_t e = rtDvppDecodePng(data, size, &out.pic, nullptr);
    expect("rtDvppDecodePng", e, RT_SUCCESS, RT_ERROR_INVALID_IMAGE);
    if (e == RT_SUCCESS)
        expect("rtStreamSynchronize (png)", rtStreamSynchronize(nullptr), RT_SUCCESS, RT_ERROR_INVALID_IMAGE);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // One cpu device of bounded memory: the decodes write host-addressable device memory in place.
    setenv("RUNTIME_CPU_MEMORY", "256M", 0);
    if (rtInit("cuda.enable=0") != RT_SUCCESS) {
        std::fprintf(stderr, "fuzz_dvpp_decode: rtInit failed: %s\n", rtGetLastErrorMessage());
        std::abort();
    }
    // The seed: an 8 x 8 grey gradient encoded and decoded by the library itself.
    uint8_t grey[64];
    for (int i = 0; i < 64; ++i) grey[i] = static_cast<uint8_t>(i * 4);
    void* dev = nullptr;
    expect("rtMalloc", rtMalloc(&dev, 64), RT_SUCCESS);
    expect("rtMemcpy", rtMemcpy(dev, grey, 64, RT_MEMCPY_HOST_TO_DEVICE), RT_SUCCESS);
    rtPicture pic{};
    pic.data = dev, pic.size = 64, pic.format = RT_PIXEL_FORMAT_GRAY8, pic.width = pic.height = 8;
    size_t bound = 0;
    expect("rtDvppEncodeJpegBound", rtDvppEncodeJpegBound(&pic, &bound), RT_SUCCESS);
    g_seed.resize(bound);
    size_t size = bound;
    expect("rtDvppEncodeJpeg", rtDvppEncodeJpeg(&pic, 50, g_seed.data(), &size, nullptr), RT_SUCCESS);
    expect("rtStreamSynchronize", rtStreamSynchronize(nullptr), RT_SUCCESS);
    g_seed.resize(size);
    expect("rtDvppDecodeJpeg", rtDvppDecodeJpeg(g_seed.data(), g_seed.size(), &pic, nullptr), RT_SUCCESS);
    expect("rtStreamSynchronize", rtStreamSynchronize(nullptr), RT_SUCCESS);
    expect("rtMemcpy", rtMemcpy(g_seed_pixels, dev, 64, RT_MEMCPY_DEVICE_TO_HOST), RT_SUCCESS);
    rtFree(dev);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const uint8_t flags = data[0];
    // The image in a buffer of its own size, so reading past its end is caught.
    std::vector<uint8_t> image(data + 1, data + size);
    const uint8_t* bytes = image.empty() ? data : image.data();  // an empty image still has an address
    if (flags & 0x08) fuzz_png(bytes, image.size(), flags);
    else fuzz_jpeg(bytes, image.size(), flags);
    return 0;
}
