// dvpp_jpeg.cpp — JPEGD and JPEGE: acldvppJpegGetImageInfo, acldvppJpegPredictDecSize, acldvppJpegDecodeAsync,
// acldvppJpegPredictEncSize, acldvppJpegEncodeAsync over the runtime's codecs (rtDvppDecodeJpeg, rtDvppEncodeJpeg),
// with JPEGD's and JPEGE's own rules: the JPEG kinds it decodes, resolutions, 128 x 16 output strides, buffer sizes.
#include <cinttypes>
#include <cstring>
#include <memory>
#include <vector>

#include "dvpp_internal.hpp"

using namespace acl::dvpp;

namespace {

/// What a JPEG's frame header (SOFn) says.
struct Frame {
    int marker = -1;  // 0xC0 .. 0xCF, -1: none before the first scan
    int precision = 0;
    uint32_t width = 0, height = 0;
    int components = 0;
};

/// Walks the marker segments of a JPEG to its frame header. False when the bytes are not a JPEG or end first.
bool read_frame(const uint8_t* d, size_t n, Frame* f) {
    if (n < 4 || d[0] != 0xFF || d[1] != 0xD8) return false;
    size_t pos = 2;
    while (pos + 4 <= n) {
        if (d[pos] != 0xFF) return false;
        const int m = d[pos + 1];
        if (m == 0xFF) {  // fill byte
            ++pos;
            continue;
        }
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {  // markers without a length
            pos += 2;
            continue;
        }
        if (m == 0xD9 || m == 0xDA) return true;  // end of image or a scan before any frame header
        const size_t length = size_t{d[pos + 2]} << 8 | d[pos + 3];
        if (length < 2) return false;
        const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
        if (sof) {
            if (pos + 2 + 8 > n || length < 8) return false;
            f->marker = m;
            f->precision = d[pos + 4];
            f->height = uint32_t{d[pos + 5]} << 8 | d[pos + 6];
            f->width = uint32_t{d[pos + 7]} << 8 | d[pos + 8];
            f->components = d[pos + 9];
            return true;
        }
        pos += 2 + length;
    }
    return false;
}

/// The kinds of JPEG that JPEGD decodes: Huffman-coded, sequential (baseline or extended), 8-bit samples. The JPEG is
/// in host memory.
aclError supported_jpeg(const char* api, const void* data, uint32_t size, Frame* f) {
    if (!read_frame(static_cast<const uint8_t*>(data), size, f) || f->marker < 0)
        return acl::fail(ACL_ERROR_UNSUPPORTED_JPEG, api, "the %u bytes at %p are not a JPEG with a frame header "
                         "(SOFn) before its first scan", size, data);
    const int m = f->marker;
    if (m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE)
        return acl::fail(ACL_ERROR_UNSUPPORTED_JPEG, api, "the JPEG is progressive (SOF%d): JPEGD decodes sequential "
                         "JPEGs only", m - 0xC0);
    if (m == 0xC3 || m == 0xC7 || m == 0xCB || m == 0xCF)
        return acl::fail(ACL_ERROR_UNSUPPORTED_JPEG, api, "the JPEG is lossless (SOF%d): JPEGD decodes DCT JPEGs only",
                         m - 0xC0);
    if (m >= 0xC9)
        return acl::fail(ACL_ERROR_UNSUPPORTED_JPEG, api, "the JPEG is arithmetic-coded (SOF%d): JPEGD decodes "
                         "Huffman-coded JPEGs only", m - 0xC0);
    if (m == 0xC5)
        return acl::fail(ACL_ERROR_UNSUPPORTED_JPEG, api, "the JPEG is hierarchical (SOF5): JPEGD decodes sequential "
                         "JPEGs only");
    if (f->precision != 8)
        return acl::fail(ACL_ERROR_UNSUPPORTED_JPEG, api, "the JPEG has %d-bit samples: JPEGD decodes 8-bit samples "
                         "only", f->precision);
    return ACL_SUCCESS;
}

/// JPEGD's output strides and bytes for a JPEG of w x h (NV12 / NV21).
struct DecodeLayout {
    uint32_t width_stride, height_stride;
    uint64_t bytes;
};
DecodeLayout decode_layout(uint32_t w, uint32_t h) {
    const auto ws = static_cast<uint32_t>(align_up(w, 128)), hs = static_cast<uint32_t>(align_up(h, 16));
    return {ws, hs, uint64_t{ws} * hs * 3 / 2};
}

/// JPEGD's resolution range (Atlas 200/300/500 inference and training products).
aclError decodable_size(const char* api, const Frame& f) {
    if (f.width < 32 || f.height < 32 || f.width > 8192 || f.height > 8192)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "the JPEG is %u x %u, outside JPEGD's range 32 x 32 .. 8192 x "
                         "8192", f.width, f.height);
    return ACL_SUCCESS;
}

/// The runtime's picture of a JPEGE input, checked against JPEGE's rules.
aclError encodable(const char* api, const acldvppPicDesc* d, bool check_memory, rtPicture* out) {
    if (!d) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "inputDesc is NULL (expected a picture descriptor)");
    rtPixelFormat format = RT_PIXEL_FORMAT_YUV420SP_NV12;
    DVPP_TRY(yuv420sp_format(api, "inputDesc", d->format, &format));
    if (d->width < 32 || d->height < 32 || d->width > 8192 || d->height > 8192)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "inputDesc is %u x %u, outside JPEGE's range 32 x 32 .. 8192 x "
                         "8192", d->width, d->height);
    if (d->width % 2 || d->height % 2)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "inputDesc width %u and height %u must be even (YUV420SP)",
                         d->width, d->height);
    if (d->widthStride % 16 || d->widthStride < d->width)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "inputDesc widthStride %u breaks JPEGE's rule: a multiple of 16 "
                         "and at least the width %u", d->widthStride, d->width);
    if (d->heightStride != d->height && d->heightStride != align_up(d->height, 16))
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "inputDesc heightStride %u breaks JPEGE's rule: the height %u "
                         "or the height rounded up to 16 (%" PRIu64 ")", d->heightStride, d->height,
                         align_up(d->height, 16));
    if (check_memory) {
        if (!d->data) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "inputDesc data is NULL");
        const uint64_t need = uint64_t{d->widthStride} * d->heightStride * 3 / 2;
        if (d->size < need)
            return acl::fail(ACL_ERROR_INVALID_PARAM, api, "inputDesc size %u is below widthStride * heightStride * 3 "
                             "/ 2 = %" PRIu64 " (YUV420SP)", d->size, need);
        DVPP_TRY(require_dvpp_memory(api, "inputDesc data", d->data, d->size));
    }
    *out = rtPicture{d->data, d->size, format, d->width, d->height, d->widthStride, d->heightStride};
    return ACL_SUCCESS;
}

/// The runtime's bound on the JPEG of `pic` (pic's data need not be set).
aclError encode_bound(const char* api, rtPicture pic, size_t* bound) {
    static uint8_t placeholder;
    if (!pic.data) {
        pic.data = &placeholder;
        pic.size = static_cast<size_t>(pic.width_stride) * pic.height_stride * 3 / 2;
    }
    DVPP_TRY_RT(api, rtDvppEncodeJpegBound(&pic, bound));
    return ACL_SUCCESS;
}

/// What an encode keeps until its stream has run it: the JPEG's length, its staging (for memory the host cannot
/// address) and where the caller wants the length.
struct EncodeState {
    size_t length = 0;
    void* staging = nullptr;  // pinned host memory, or nullptr
    uint32_t* size = nullptr;
};

void publish_length(void* p) {
    auto* s = static_cast<EncodeState*>(p);
    *s->size = static_cast<uint32_t>(s->length);
}

void release_state(void* p) {
    auto* s = static_cast<EncodeState*>(p);
    if (s->staging) rtFreeHost(s->staging);
    delete s;
}

}  // namespace

extern "C" {

aclError acldvppJpegGetImageInfo(const void* data, uint32_t size, uint32_t* width, uint32_t* height,
                                 int32_t* components) {
    constexpr const char* api = "acldvppJpegGetImageInfo";
    ACL_REQUIRE_NOT_NULL(api, data);
    if (size == 0) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "size is 0 (expected the JPEG's bytes)");
    uint32_t w = 0, h = 0;
    int c = 0;
    if (rtError_t e = rtDvppJpegGetInfo(data, size, &w, &h, &c))
        return acl::fail_rt(e, api, e == RT_ERROR_INVALID_IMAGE ? ACL_ERROR_UNSUPPORTED_JPEG : 0);
    Frame f;
    DVPP_TRY(supported_jpeg(api, data, size, &f));
    if (width) *width = w;
    if (height) *height = h;
    if (components) *components = c;
    return ACL_SUCCESS;
}

aclError acldvppJpegPredictDecSize(const void* data, uint32_t dataSize, acldvppPixelFormat outputPixelFormat,
                                   uint32_t* decSize) {
    constexpr const char* api = "acldvppJpegPredictDecSize";
    ACL_REQUIRE_NOT_NULL(api, data);
    ACL_REQUIRE_NOT_NULL(api, decSize);
    rtPixelFormat format = RT_PIXEL_FORMAT_YUV420SP_NV12;
    DVPP_TRY(yuv420sp_format(api, "outputPixelFormat", acl::enum_value(outputPixelFormat), &format));
    Frame f;
    DVPP_TRY(supported_jpeg(api, data, dataSize, &f));
    DVPP_TRY(decodable_size(api, f));
    *decSize = static_cast<uint32_t>(decode_layout(f.width, f.height).bytes);
    return ACL_SUCCESS;
}

aclError acldvppJpegDecodeAsync(acldvppChannelDesc* channelDesc, const void* data, uint32_t size,
                                acldvppPicDesc* outputDesc, aclrtStream stream) {
    constexpr const char* api = "acldvppJpegDecodeAsync";
    ACL_REQUIRE_INIT(api);
    DVPP_REQUIRE_CONTEXT(api);
    DVPP_TRY(require_channel(api, channelDesc));
    ACL_REQUIRE_NOT_NULL(api, data);
    ACL_REQUIRE_NOT_NULL(api, outputDesc);
    if (size == 0) return acl::fail(ACL_ERROR_INVALID_PARAM, api, "size is 0 (expected the JPEG's bytes)");
    DVPP_TRY(require_dvpp_memory(api, "data", data, size));
    rtPixelFormat format = RT_PIXEL_FORMAT_YUV420SP_NV12;
    DVPP_TRY(yuv420sp_format(api, "outputDesc", outputDesc->format, &format));
    if (!outputDesc->data)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "outputDesc data is NULL (set it with acldvppSetPicDescData)");

    // The JPEG is device memory that work already queued on the stream may still be writing: its header is parsed
    // during the call, so the call waits for an event recorded behind a copy of it. An event, not the stream: the
    // stream's pending failure stays for the caller's next synchronize. A capture cannot wait, so it is refused.
    const auto s = static_cast<rtStream_t>(stream);
    rtStreamCaptureStatus capturing = RT_STREAM_CAPTURE_STATUS_NONE;
    DVPP_TRY_RT(api, rtStreamGetCaptureInfo(s, &capturing, nullptr));
    if (capturing != RT_STREAM_CAPTURE_STATUS_NONE)
        return acl::fail(ACL_ERROR_FEATURE_UNSUPPORTED, api, "stream %p is capturing: JPEG decoding reads the JPEG's "
                         "header during the call, which a capture cannot replay (decode outside the capture)", stream);
    std::vector<uint8_t> jpeg;
    try {
        jpeg.resize(size);
    } catch (...) {
        return acl::fail(ACL_ERROR_BAD_ALLOC, api, "out of host memory for the %u bytes of the JPEG", size);
    }
    {
        rtEvent_t copied = nullptr;
        DVPP_TRY_RT(api, rtEventCreateWithFlags(&copied, RT_EVENT_DISABLE_TIMING));
        rtError_t e = rtMemcpyAsync(jpeg.data(), data, size, RT_MEMCPY_DEVICE_TO_HOST, s);
        if (e == RT_SUCCESS) e = rtEventRecord(copied, s);
        if (e == RT_SUCCESS) e = rtEventSynchronize(copied);
        rtEventDestroy(copied);
        DVPP_TRY_RT(api, e);
    }

    Frame f;
    DVPP_TRY(supported_jpeg(api, jpeg.data(), size, &f));
    DVPP_TRY(decodable_size(api, f));
    if (f.width % 2 || f.height % 2)
        return acl::fail(ACL_ERROR_FEATURE_UNSUPPORTED, api, "the JPEG is %u x %u: decoding odd sizes to YUV420SP is "
                         "not supported here (an NPU rounds them down to even)", f.width, f.height);
    const DecodeLayout L = decode_layout(f.width, f.height);
    if (outputDesc->size < L.bytes)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "outputDesc size %u is below the %" PRIu64 " bytes JPEGD writes "
                         "for this %u x %u JPEG (widthStride %u = width rounded up to 128, heightStride %u = height "
                         "rounded up to 16, * 3 / 2: acldvppJpegPredictDecSize)", outputDesc->size, L.bytes, f.width,
                         f.height, L.width_stride, L.height_stride);
    DVPP_TRY(require_dvpp_memory(api, "outputDesc data", outputDesc->data, outputDesc->size));
    rtPicture pic{outputDesc->data, outputDesc->size, format, 0, 0, L.width_stride, L.height_stride};
    DVPP_TRY_RT(api, rtDvppDecodeJpeg(jpeg.data(), size, &pic, s));
    outputDesc->width = pic.width;
    outputDesc->height = pic.height;
    outputDesc->widthStride = L.width_stride;
    outputDesc->heightStride = L.height_stride;
    outputDesc->retCode = 0;
    return ACL_SUCCESS;
}

aclError acldvppJpegPredictEncSize(const acldvppPicDesc* inputDesc, const acldvppJpegeConfig* config,
                                   uint32_t* size) {
    constexpr const char* api = "acldvppJpegPredictEncSize";
    ACL_REQUIRE_NOT_NULL(api, config);
    ACL_REQUIRE_NOT_NULL(api, size);
    rtPicture pic;
    DVPP_TRY(encodable(api, inputDesc, false, &pic));
    pic.data = nullptr;
    size_t bound = 0;
    DVPP_TRY(encode_bound(api, pic, &bound));
    *size = static_cast<uint32_t>(bound);
    return ACL_SUCCESS;
}

aclError acldvppJpegEncodeAsync(acldvppChannelDesc* channelDesc, acldvppPicDesc* inputDesc, const void* data,
                                uint32_t* size, acldvppJpegeConfig* config, aclrtStream stream) {
    constexpr const char* api = "acldvppJpegEncodeAsync";
    ACL_REQUIRE_INIT(api);
    DVPP_REQUIRE_CONTEXT(api);
    DVPP_TRY(require_channel(api, channelDesc));
    ACL_REQUIRE_NOT_NULL(api, data);
    ACL_REQUIRE_NOT_NULL(api, size);
    ACL_REQUIRE_NOT_NULL(api, config);
    rtPicture pic;
    DVPP_TRY(encodable(api, inputDesc, true, &pic));
    rtPicture shape = pic;
    shape.data = nullptr;
    size_t bound = 0;
    DVPP_TRY(encode_bound(api, shape, &bound));
    if (*size < bound)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "*size %u is below the %zu bytes the JPEG of this picture may "
                         "need (acldvppJpegPredictEncSize)", *size, bound);
    DVPP_TRY(require_dvpp_memory(api, "data", data, *size));
    const int quality = config->level == 0 ? 100 : static_cast<int>(config->level);

    // Encode straight into the output when the host can address it (cpu devices); else into pinned staging, copied
    // to the output on the stream.
    rtPointerAttributes attributes{};
    DVPP_TRY_RT(api, rtPointerGetAttributes(&attributes, data));
    auto state = std::unique_ptr<EncodeState>(new (std::nothrow) EncodeState);
    if (!state) return acl::fail(ACL_ERROR_BAD_ALLOC, api, "out of host memory");
    state->size = size;
    state->length = bound;
    void* target = attributes.host_pointer;
    if (!target) {
        DVPP_TRY_RT(api, rtMallocHost(&state->staging, bound));
        target = state->staging;
    }
    const auto s = static_cast<rtStream_t>(stream);
    rtError_t e = rtDvppEncodeJpeg(&pic, quality, target, &state->length, s);
    if (!e && state->staging)
        e = rtMemcpyAsync(const_cast<void*>(data), state->staging, bound, RT_MEMCPY_HOST_TO_DEVICE, s);
    if (!e) e = rtLaunchHostFunc(s, publish_length, state.get());
    const aclError code = e ? acl::fail_rt(e, api) : ACL_SUCCESS;
    // What was queued may still use the state: it goes once the stream has run it (or, should that fail, now).
    if (const rtError_t d = rtStreamDeferRelease(s, release_state, state.get())) {
        const aclError deferred = acl::fail_rt(d, api);
        rtStreamSynchronize(s);
        release_state(state.release());
        return code ? code : deferred;
    }
    state.release();
    return code;
}

}  // extern "C"
