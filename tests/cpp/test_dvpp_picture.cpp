// test_dvpp_picture.cpp — DVPP picture descriptors: rtDvppPictureSize for every format and stride, and every rule of
// dvpp.h's "Rules checked by every operation" refused with a message naming the argument and field.
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dvpp.h"
#include "test_util.hpp"

namespace {

using rt_test::contains;
using rt_test::last_message;

struct FormatCase {
    rtPixelFormat format;
    const char* name;
    unsigned bytes_per_pixel;  // packed formats; 0 for 4:2:0
};
const FormatCase kFormats[] = {
    {RT_PIXEL_FORMAT_GRAY8, "GRAY8", 1},
    {RT_PIXEL_FORMAT_YUV420SP_NV12, "YUV420SP_NV12", 0},
    {RT_PIXEL_FORMAT_YUV420SP_NV21, "YUV420SP_NV21", 0},
    {RT_PIXEL_FORMAT_RGB888, "RGB888", 3},
    {RT_PIXEL_FORMAT_BGR888, "BGR888", 3},
    {RT_PIXEL_FORMAT_RGBA8888, "RGBA8888", 4},
    {RT_PIXEL_FORMAT_BGRA8888, "BGRA8888", 4},
    {RT_PIXEL_FORMAT_YUV420P, "YUV420P", 0},
};

/// The layout of dvpp.h's header, written out independently of the library.
size_t expected_size(const FormatCase& f, size_t w, size_t h, size_t ws, size_t hs) {
    if (!ws) ws = w;
    if (!hs) hs = h;
    if (f.bytes_per_pixel) return ws * f.bytes_per_pixel * hs;
    if (f.format == RT_PIXEL_FORMAT_YUV420P) return ws * hs + 2 * (ws / 2) * (hs / 2);
    return ws * hs + ws * (hs / 2);  // NV12 / NV21: Y, then hs/2 rows of ws interleaved chroma bytes
}

rtError_t picture_size(rtPixelFormat f, uint32_t w, uint32_t h, uint32_t ws, uint32_t hs, size_t* bytes) {
    return rtDvppPictureSize(f, w, h, ws, hs, bytes);
}

TEST(DvppPictureSize, EveryFormatWithAndWithoutStrides) {
    struct Dims { uint32_t w, h, ws, hs; };
    const Dims dims[] = {{2, 2, 0, 0},     {640, 480, 0, 0},   {1920, 1080, 2048, 1088}, {4, 2, 4, 2},
                         {224, 224, 256, 0}, {100, 50, 0, 64}, {2, 65536, 0, 0}};
    for (const FormatCase& f : kFormats)
        for (const Dims& d : dims) {
            SCOPED_TRACE(std::string(f.name) + " " + std::to_string(d.w) + "x" + std::to_string(d.h) + " strides " +
                         std::to_string(d.ws) + "x" + std::to_string(d.hs));
            size_t bytes = 0;
            ASSERT_RT_OK(picture_size(f.format, d.w, d.h, d.ws, d.hs, &bytes));
            EXPECT_EQ(bytes, expected_size(f, d.w, d.h, d.ws, d.hs));
        }
}

TEST(DvppPictureSize, KnownValuesOfTheCommonSizes) {
    size_t b = 0;
    ASSERT_RT_OK(picture_size(RT_PIXEL_FORMAT_RGB888, 1920, 1080, 0, 0, &b));
    EXPECT_EQ(b, 6220800u);
    ASSERT_RT_OK(picture_size(RT_PIXEL_FORMAT_YUV420SP_NV12, 1920, 1080, 0, 0, &b));
    EXPECT_EQ(b, 3110400u);
    ASSERT_RT_OK(picture_size(RT_PIXEL_FORMAT_YUV420P, 1920, 1080, 0, 0, &b));
    EXPECT_EQ(b, 3110400u);
    ASSERT_RT_OK(picture_size(RT_PIXEL_FORMAT_BGRA8888, 1, 1, 0, 0, &b));
    EXPECT_EQ(b, 4u);
    ASSERT_RT_OK(picture_size(RT_PIXEL_FORMAT_GRAY8, 1, 1, 7, 3, &b));
    EXPECT_EQ(b, 21u) << "strides count whole: the padding is part of the picture";
}

TEST(DvppPictureSize, OddSizesAreFineForPackedFormats) {
    for (const FormatCase& f : kFormats) {
        if (!f.bytes_per_pixel) continue;
        SCOPED_TRACE(f.name);
        size_t b = 0;
        ASSERT_RT_OK(picture_size(f.format, 3, 5, 7, 9, &b));
        EXPECT_EQ(b, 7u * f.bytes_per_pixel * 9u);
    }
}

TEST(DvppPictureSize, UnknownFormatsAreRefusedListingTheFormats) {
    for (int v : {3, 11, 14, 15, 18, 999, 1001, -1, 0x7fffffff}) {
        SCOPED_TRACE(v);
        size_t b = 12345;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, picture_size(static_cast<rtPixelFormat>(v), 4, 4, 0, 0, &b));
        EXPECT_TRUE(contains(last_message(), "rtDvppPictureSize: format " + std::to_string(v) +
                                                 " is not an rtPixelFormat"));
        EXPECT_TRUE(contains(last_message(), "RGB888 (12)"));
        EXPECT_TRUE(contains(last_message(), "YUV420P (1000)"));
        EXPECT_EQ(b, 12345u) << "a refused call writes nothing";
    }
}

TEST(DvppPictureSize, ZeroSizesAreRefusedNamingTheField) {
    size_t b = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, picture_size(RT_PIXEL_FORMAT_RGB888, 0, 4, 0, 0, &b));
    EXPECT_TRUE(contains(last_message(), "rtDvppPictureSize: width is 0 (expected at least 1)"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, picture_size(RT_PIXEL_FORMAT_RGB888, 4, 0, 0, 0, &b));
    EXPECT_TRUE(contains(last_message(), "rtDvppPictureSize: height is 0 (expected at least 1)"));
}

TEST(DvppPictureSize, StridesBelowTheSizeAreRefused) {
    for (const FormatCase& f : kFormats) {
        SCOPED_TRACE(f.name);
        size_t b = 0;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, picture_size(f.format, 200, 100, 100, 0, &b));
        EXPECT_TRUE(contains(last_message(), "rtDvppPictureSize: width_stride 100 is below width 200"));
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, picture_size(f.format, 200, 100, 0, 98, &b));
        EXPECT_TRUE(contains(last_message(), "rtDvppPictureSize: height_stride 98 is below height 100"));
        // A stride equal to the size is the size.
        ASSERT_RT_OK(picture_size(f.format, 200, 100, 200, 100, &b));
        EXPECT_EQ(b, expected_size(f, 200, 100, 0, 0));
    }
}

TEST(DvppPictureSize, OddSizesOrStridesOf420FormatsAreRefusedNamingEach) {
    for (const FormatCase& f : kFormats) {
        if (f.bytes_per_pixel) continue;
        SCOPED_TRACE(f.name);
        size_t b = 0;
        struct Odd { uint32_t w, h, ws, hs; const char* text; };
        const Odd odd[] = {{201, 100, 0, 0, "width 201 is odd"},
                           {200, 101, 0, 0, "height 101 is odd"},
                           {200, 100, 203, 0, "width_stride 203 is odd"},
                           {200, 100, 0, 105, "height_stride 105 is odd"},
                           {201, 100, 202, 0, "width 201 is odd"}};  // an even stride does not excuse an odd width
        for (const Odd& o : odd) {
            SCOPED_TRACE(o.text);
            EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, picture_size(f.format, o.w, o.h, o.ws, o.hs, &b));
            EXPECT_TRUE(contains(last_message(), std::string("rtDvppPictureSize: ") + o.text));
            EXPECT_TRUE(contains(last_message(), std::string("a ") + f.name + " picture"));
        }
    }
}

TEST(DvppPictureSize, SizesThatOverflowAreRefused) {
    size_t b = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    picture_size(RT_PIXEL_FORMAT_RGBA8888, 0xffffffffu, 0xffffffffu, 0, 0, &b));
    EXPECT_TRUE(contains(last_message(), "rtDvppPictureSize: width 4294967295 x height 4294967295: the first plane "
                                         "(17179869180 x 4294967295 bytes) overflows size_t"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    picture_size(RT_PIXEL_FORMAT_RGB888, 4, 4, 0xffffffffu, 0xffffffffu, &b));
    EXPECT_TRUE(contains(last_message(), "rtDvppPictureSize: width_stride 4294967295 x height_stride 4294967295: the "
                                         "first plane"));
    // The largest sizes that fit are computed exactly.
    ASSERT_RT_OK(picture_size(RT_PIXEL_FORMAT_GRAY8, 0xffffffffu, 0xffffffffu, 0, 0, &b));
    EXPECT_EQ(b, size_t(0xffffffffu) * 0xffffffffu);
    ASSERT_RT_OK(picture_size(RT_PIXEL_FORMAT_YUV420P, 0xfffffffeu, 0x80000000u, 0, 0, &b));
    EXPECT_EQ(b, size_t(0xfffffffeu) * 0x80000000u + 2 * size_t(0x7fffffffu) * 0x40000000u);
    // The planes fit one by one but not together.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, picture_size(RT_PIXEL_FORMAT_YUV420P, 0xfffffffeu, 0xfffffffeu, 0, 0, &b));
    EXPECT_TRUE(contains(last_message(), "rtDvppPictureSize: width 4294967294 x height 4294967294: the picture's size "
                                         "in bytes (its planes together) overflows size_t"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    picture_size(RT_PIXEL_FORMAT_YUV420SP_NV12, 0xfffffffeu, 0xfffffffeu, 0, 0, &b));
    EXPECT_TRUE(contains(last_message(), "overflows size_t"));
}

TEST(DvppPictureSize, NullOutputIsRefused) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, picture_size(RT_PIXEL_FORMAT_RGB888, 4, 4, 0, 0, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppPictureSize: bytes is NULL"));
}

// ---------------------------------------------------------------- the rules, through the operations

/// A picture in device memory of the current device, the bytes of its layout (plus `extra`) allocated.
struct DevPicture {
    rt_test::DevBuf buf;
    rtPicture pic{};
    DevPicture(rtPixelFormat f, uint32_t w, uint32_t h, uint32_t ws = 0, uint32_t hs = 0, size_t extra = 0) {
        size_t bytes = 0;
        if (rtDvppPictureSize(f, w, h, ws, hs, &bytes) != RT_SUCCESS || buf.alloc(bytes + extra) != RT_SUCCESS)
            ADD_FAILURE() << rtGetLastErrorMessage();
        pic.data = buf.get();
        pic.size = bytes + extra;
        pic.format = f;
        pic.width = w;
        pic.height = h;
        pic.width_stride = ws;
        pic.height_stride = hs;
    }
};

rtPixelFormat bad_format(int v) {
    rtPixelFormat f;
    std::memcpy(&f, &v, sizeof f);  // any value the C ABI may carry
    return f;
}

/// One picture argument of one operation: `what` is how the operation names it ("rtDvppEncodeJpeg: picture");
/// `call` runs the operation with that argument replaced (the others valid, pictures of `format` where they must
/// match it); `witness` reads what the operation writes when it runs (a refused call must leave it unchanged).
struct Probe {
    std::string what;
    std::function<rtError_t(const rtPicture*)> call;
    std::function<std::vector<unsigned char>()> witness;
    /// How a NULL picture is refused: "<what> is NULL (expected a pointer to an rtPicture)" unless set (an array
    /// argument names the array).
    std::string null_message = {};
    bool kernels = true;  ///< the operation runs kernels (which the fake driver accepts without running)
    std::string null_text() const {
        return null_message.empty() ? what + " is NULL (expected a pointer to an rtPicture)" : null_message;
    }
};

/// A device buffer's bytes, read back after the stream's work (a probe's witness).
std::vector<unsigned char> device_bytes(rtStream_t stream, const rt_test::DevBuf& buf) {
    EXPECT_RT_OK(rtStreamSynchronize(stream));
    std::vector<unsigned char> v(buf.size());
    EXPECT_RT_OK(rtMemcpy(v.data(), buf.get(), v.size(), RT_MEMCPY_DEVICE_TO_HOST));
    return v;
}

bool is_packed(rtPixelFormat f) {
    return f != RT_PIXEL_FORMAT_YUV420SP_NV12 && f != RT_PIXEL_FORMAT_YUV420SP_NV21 && f != RT_PIXEL_FORMAT_YUV420P;
}

/// Every picture argument the rules are checked on, for a picture of `format`, w x h (the other operands of the
/// current device, valid and matching it; the operations queued on `stream`).
std::vector<Probe> probes(rtStream_t stream, rtPixelFormat format, uint32_t w, uint32_t h) {
    std::vector<Probe> v;
    size_t bound = 0;
    static unsigned char pixels[4];
    const rtPicture small{pixels, sizeof pixels, RT_PIXEL_FORMAT_GRAY8, 2, 2, 0, 0};
    if (rtDvppEncodeJpegBound(&small, &bound) == RT_SUCCESS) {  // built with TurboJPEG
        auto out = std::make_shared<std::vector<unsigned char>>(1 << 20, 0xA5);
        auto out_size = std::make_shared<size_t>(out->size());
        v.push_back({"rtDvppEncodeJpeg: picture",
                     [=](const rtPicture* p) { return rtDvppEncodeJpeg(p, 90, out->data(), out_size.get(), stream); },
                     [=] {
                         EXPECT_RT_OK(rtStreamSynchronize(stream));
                         std::vector<unsigned char> b = *out;
                         b.insert(b.end(), reinterpret_cast<unsigned char*>(out_size.get()),
                                  reinterpret_cast<unsigned char*>(out_size.get() + 1));
                         return b;
                     },
                     "", /*kernels=*/false});
    }
    // rtDvppConvertColor, the picture as its source (converted to BGR888) and as its destination (from BGR888).
    auto bgr = std::make_shared<DevPicture>(RT_PIXEL_FORMAT_BGR888, w, h);
    EXPECT_RT_OK(rtMemset(bgr->pic.data, 0, bgr->pic.size));
    v.push_back({"rtDvppConvertColor: src",
                 [=](const rtPicture* p) { return rtDvppConvertColor(p, &bgr->pic, RT_COLOR_BT601_LIMITED, stream); },
                 [=] { return device_bytes(stream, bgr->buf); }});
    auto from = std::make_shared<DevPicture>(RT_PIXEL_FORMAT_BGR888, w, h);
    EXPECT_RT_OK(rtMemset(from->pic.data, 0x80, from->pic.size));
    v.push_back({"rtDvppConvertColor: dst",
                 [=](const rtPicture* p) {
                     rtPicture copy = p ? *p : rtPicture{};
                     return rtDvppConvertColor(&from->pic, p ? &copy : nullptr, RT_COLOR_BT601_LIMITED, stream);
                 },
                 [=] {
                     EXPECT_RT_OK(rtStreamSynchronize(stream));
                     return std::vector<unsigned char>();  // it writes the picture under test (the fixture reads it)
                 }});
    if (is_packed(format)) {
        // rtDvppNormalize reads a packed picture into float32 CHW.
        auto out = std::make_shared<rt_test::DevBuf>(size_t(4) * 4 * w * h);
        EXPECT_RT_OK(rtMemset(out->get(), 0, out->size()));
        v.push_back({"rtDvppNormalize: src",
                     [=](const rtPicture* p) {
                         return rtDvppNormalize(p, out->get(), RT_FLOAT32, 1, nullptr, nullptr, stream);
                     },
                     [=] { return device_bytes(stream, *out); }});
    }
    // rtDvppPreprocess of one picture to an 8x8 RGB float32 tensor.
    auto tensor = std::make_shared<rt_test::DevBuf>(size_t(3) * 8 * 8 * 4);
    EXPECT_RT_OK(rtMemset(tensor->get(), 0, tensor->size()));
    v.push_back({"rtDvppPreprocess: srcs[0]",
                 [=](const rtPicture* p) {
                     rtDvppPreprocessParams params = RT_DVPP_PREPROCESS_INIT;
                     params.width = params.height = 8;
                     return rtDvppPreprocess(p, 1, nullptr, &params, tensor->get(), stream);
                 },
                 [=] { return device_bytes(stream, *tensor); }, "rtDvppPreprocess: srcs is NULL"});
    return v;
}

class DvppPictureRules : public rt_test::DeviceTest {
protected:
    void SetUp() override {
        rt_test::DeviceTest::SetUp();
        guard = std::make_unique<rt_test::StreamGuard>();  // after SetUp: a stream of the device under test
        ASSERT_RT_OK(guard->status());
        stream = guard->get();
    }
    /// What `probe` writes when it runs: its witness and the memory of the picture under test.
    static std::vector<unsigned char> written(const Probe& probe, const DevPicture& picture) {
        std::vector<unsigned char> w = probe.witness(), m(picture.buf.size());
        EXPECT_RT_OK(rtMemcpy(m.data(), picture.buf.get(), m.size(), RT_MEMCPY_DEVICE_TO_HOST));
        w.insert(w.end(), m.begin(), m.end());
        return w;
    }
    /// Runs `probe` with `picture` (a variant of `base`), which must be refused with INVALID_VALUE and a message
    /// containing probe.what + each of `texts`; the call must have queued nothing.
    void expect_refused(const Probe& probe, const rtPicture* picture, std::initializer_list<std::string> texts,
                        const DevPicture& base) {
        const std::vector<unsigned char> before = written(probe, base);
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, probe.call(picture));
        const std::string m = last_message();
        for (const std::string& t : texts) EXPECT_TRUE(contains(m, probe.what + t));
        EXPECT_RT_OK(rtStreamSynchronize(stream));
        EXPECT_EQ(written(probe, base), before) << "a refused call queued work";
    }
    std::vector<Probe> probes_of(const DevPicture& picture) {
        std::vector<Probe> v = probes(stream, picture.pic.format, picture.pic.width, picture.pic.height);
        if (v.empty()) ADD_FAILURE() << "no operation to check the rules on";
        return v;
    }
    std::unique_ptr<rt_test::StreamGuard> guard;
    rtStream_t stream = nullptr;
};

TEST_P(DvppPictureRules, AValidPictureIsAccepted) {
    // The baseline of the refusals below: with nothing wrong, every probe's operation runs, and its witness sees
    // that it ran (so an unchanged witness after a refusal means nothing was queued).
    for (rtPixelFormat f : {RT_PIXEL_FORMAT_RGB888, RT_PIXEL_FORMAT_YUV420SP_NV12}) {
        DevPicture pic(f, 200, 100);
        for (const Probe& p : probes_of(pic)) {
            SCOPED_TRACE(p.what);
            ASSERT_RT_OK(rtMemset(pic.pic.data, 0x40, pic.pic.size));
            const std::vector<unsigned char> before = written(p, pic);
            EXPECT_RT_OK(p.call(&pic.pic));
            EXPECT_RT_OK(rtStreamSynchronize(stream));
            if (!p.kernels || rt_test::launches_execute(device())) {
                EXPECT_NE(written(p, pic), before);
            }
        }
    }
}

TEST_P(DvppPictureRules, MissingPicturesAndPixelsAreRefusedNamingTheArgument) {
    DevPicture pic(RT_PIXEL_FORMAT_RGB888, 16, 8);
    for (const Probe& p : probes_of(pic)) {
        SCOPED_TRACE(p.what);
        expect_refused(p, nullptr, {}, pic);
        EXPECT_TRUE(contains(last_message(), p.null_text()));
        rtPicture q = pic.pic;
        q.data = nullptr;
        expect_refused(p, &q, {"->data is NULL"}, pic);
    }
}

TEST_P(DvppPictureRules, EveryFieldIsChecked) {
    DevPicture pic(RT_PIXEL_FORMAT_RGB888, 200, 100);
    for (const Probe& p : probes_of(pic)) {
        SCOPED_TRACE(p.what);
        rtPicture q = pic.pic;
        q.format = bad_format(3);
        expect_refused(p, &q, {"->format 3 is not an rtPixelFormat"}, pic);
        q = pic.pic;
        q.format = bad_format(-7);
        expect_refused(p, &q, {"->format -7 is not an rtPixelFormat"}, pic);
        q = pic.pic;
        q.width = 0;
        expect_refused(p, &q, {"->width is 0 (expected at least 1)"}, pic);
        q = pic.pic;
        q.height = 0;
        expect_refused(p, &q, {"->height is 0 (expected at least 1)"}, pic);
        q = pic.pic;
        q.width_stride = 100;
        expect_refused(p, &q, {"->width_stride 100 is below width 200"}, pic);
        q = pic.pic;
        q.height_stride = 99;
        expect_refused(p, &q, {"->height_stride 99 is below height 100"}, pic);
        q = pic.pic;
        q.size -= 1;
        expect_refused(p, &q, {"->size 59999 is below the 60000 bytes a 200x100 RGB888 picture with strides "
                               "200x100 occupies"}, pic);
        q = pic.pic;
        q.width_stride = 201;  // the layout grows past the size given
        expect_refused(p, &q, {"->size 60000 is below the 60300 bytes"}, pic);
        q = pic.pic;
        q.format = RT_PIXEL_FORMAT_RGBA8888;  // more bytes a pixel than the size holds
        expect_refused(p, &q, {"->size 60000 is below the 80000 bytes a 200x100 RGBA8888 picture"}, pic);
    }
}

TEST_P(DvppPictureRules, OddSizesOf420PicturesAreRefused) {
    DevPicture pic(RT_PIXEL_FORMAT_YUV420SP_NV12, 64, 32);
    struct Odd { uint32_t rtPicture::*field; uint32_t value; const char* text; };
    const Odd odd[] = {{&rtPicture::width, 63, "->width 63 is odd"},
                       {&rtPicture::height, 31, "->height 31 is odd"},
                       {&rtPicture::width_stride, 65, "->width_stride 65 is odd"},
                       {&rtPicture::height_stride, 33, "->height_stride 33 is odd"}};
    for (const Probe& p : probes_of(pic)) {
        SCOPED_TRACE(p.what);
        for (const Odd& o : odd) {
            SCOPED_TRACE(o.text);
            rtPicture q = pic.pic;
            q.*o.field = o.value;
            expect_refused(p, &q, {std::string(o.text) + " (a YUV420SP_NV12 picture's width, height and strides must "
                                                          "be even"}, pic);
        }
    }
}

TEST_P(DvppPictureRules, PixelsMustBeMemoryOfTheStreamsDevice) {
    DevPicture pic(RT_PIXEL_FORMAT_GRAY8, 16, 16);
    // Host memory the runtime does not know (static: heap memory may be an address the runtime freed recently,
    // which it reports as such).
    static unsigned char host[256];
    // The probes (and the device memory they write) exist before `freed` is freed, so none of their buffers can
    // take its address.
    const std::vector<Probe> all = probes_of(pic);
    void* freed = nullptr;
    ASSERT_RT_OK(rtMalloc(&freed, 256));
    ASSERT_RT_OK(rtFree(freed));
    for (const Probe& p : all) {
        SCOPED_TRACE(p.what);
        rtPicture q = pic.pic;
        q.data = host;
        expect_refused(p, &q, {"->data " + rt_test::ptr_text(host) + " is host memory not allocated by the runtime"}, pic);
        // The layout runs past the end of the allocation (the size field claims more than there is).
        q = pic.pic;
        q.data = pic.buf.get() + 8;
        expect_refused(p, &q, {"->data " + rt_test::ptr_text(q.data) + ": 256 bytes asked but only 248 bytes "
                                                                       "available from that pointer"}, pic);
        q = pic.pic;
        q.data = freed;
        expect_refused(p, &q, {"->data " + rt_test::ptr_text(freed)}, pic);
    }
}

/// rtDvppPreprocess of `src` with crops[0] = `crop` to an 8x8 RGB float32 tensor on `stream`.
rtError_t preprocess_crop(const rtPicture& src, const rtRect& crop, void* tensor, rtStream_t stream) {
    rtDvppPreprocessParams params = RT_DVPP_PREPROCESS_INIT;
    params.width = params.height = 8;
    return rtDvppPreprocess(&src, 1, &crop, &params, tensor, stream);
}

TEST_P(DvppPictureRules, RectanglesMustLieInsideThePicture) {
    DevPicture src(RT_PIXEL_FORMAT_RGB888, 100, 50);
    rt_test::DevBuf tensor(3 * 8 * 8 * 4);
    ASSERT_RT_OK(rtMemset(tensor.get(), 0, tensor.size()));
    struct Bad { rtRect r; const char* text; };
    const Bad bad[] = {
        {{0, 0, 0, 10}, "rtDvppPreprocess: crops[0]->width is 0 (expected at least 1)"},
        {{0, 0, 10, 0}, "rtDvppPreprocess: crops[0]->height is 0 (expected at least 1)"},
        {{95, 0, 10, 10}, "rtDvppPreprocess: crops[0]->x 95 + crops[0]->width 10 = 105 is beyond the picture's width "
                          "100"},
        {{0, 45, 10, 10}, "rtDvppPreprocess: crops[0]->y 45 + crops[0]->height 10 = 55 is beyond the picture's "
                          "height 50"},
        {{0xffffffffu, 0, 2, 2}, "crops[0]->x 4294967295 + crops[0]->width 2 = 4294967297 is beyond"},  // no wrap
        {{0, 0xfffffffeu, 1, 3}, "crops[0]->y 4294967294 + crops[0]->height 3 = 4294967297 is beyond"},
        {{0, 0, 101, 1}, "crops[0]->x 0 + crops[0]->width 101 = 101 is beyond the picture's width 100"},
    };
    const std::vector<unsigned char> before = device_bytes(stream, tensor);
    for (const Bad& b : bad) {
        SCOPED_TRACE(b.text);
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, preprocess_crop(src.pic, b.r, tensor.get(), stream));
        EXPECT_TRUE(contains(last_message(), b.text));
    }
    EXPECT_EQ(device_bytes(stream, tensor), before) << "a refused call queued work";
    // The whole picture, and a rectangle touching its far corner, are inside.
    EXPECT_RT_OK(preprocess_crop(src.pic, rtRect{0, 0, 100, 50}, tensor.get(), stream));
    EXPECT_RT_OK(preprocess_crop(src.pic, rtRect{99, 49, 1, 1}, tensor.get(), stream));
    EXPECT_RT_OK(rtStreamSynchronize(stream));
}

TEST_P(DvppPictureRules, RectanglesOf420PicturesMustBeEven) {
    for (rtPixelFormat f : {RT_PIXEL_FORMAT_YUV420SP_NV12, RT_PIXEL_FORMAT_YUV420SP_NV21, RT_PIXEL_FORMAT_YUV420P}) {
        DevPicture src(f, 64, 32);
        rt_test::DevBuf tensor(3 * 8 * 8 * 4);
        struct Bad { rtRect r; const char* text; };
        const Bad bad[] = {{{1, 0, 10, 10}, "crops[0]->x 1 is odd"},
                           {{0, 3, 10, 10}, "crops[0]->y 3 is odd"},
                           {{0, 0, 11, 10}, "crops[0]->width 11 is odd"},
                           {{0, 0, 10, 9}, "crops[0]->height 9 is odd"}};
        for (const Bad& b : bad) {
            SCOPED_TRACE(b.text);
            EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, preprocess_crop(src.pic, b.r, tensor.get(), stream));
            EXPECT_TRUE(contains(last_message(), std::string("rtDvppPreprocess: ") + b.text));
            EXPECT_TRUE(contains(last_message(), "a rectangle of a " + std::string(f == RT_PIXEL_FORMAT_YUV420P
                                                                                        ? "YUV420P"
                                                                                        : f == RT_PIXEL_FORMAT_YUV420SP_NV12
                                                                                              ? "YUV420SP_NV12"
                                                                                              : "YUV420SP_NV21") +
                                                     " picture needs even x, y, width and height"));
        }
        EXPECT_RT_OK(preprocess_crop(src.pic, rtRect{2, 4, 10, 12}, tensor.get(), stream));
        EXPECT_RT_OK(rtStreamSynchronize(stream));
    }
}

TEST_P(DvppPictureRules, PreprocessPasteOf420SourcesMustBeEven) {
    // A 4:2:0 source is resized plane by plane, its chroma into half the paste rectangle: every side of the
    // rectangle (its position too) must fall on the chroma grid.
    for (rtPixelFormat f : {RT_PIXEL_FORMAT_YUV420SP_NV12, RT_PIXEL_FORMAT_YUV420SP_NV21, RT_PIXEL_FORMAT_YUV420P}) {
        DevPicture src(f, 16, 16);
        ASSERT_RT_OK(rtMemset(src.pic.data, 0x40, src.pic.size));
        rt_test::DevBuf tensor(3 * 8 * 8 * 4);
        ASSERT_RT_OK(rtMemset(tensor.get(), 0, tensor.size()));
        const std::vector<unsigned char> before = device_bytes(stream, tensor);
        struct Bad { rtRect r; const char* text; };
        const Bad bad[] = {{{1, 0, 4, 4}, "rtDvppPreprocess: params->paste.x 1 is odd"},
                           {{0, 3, 4, 4}, "rtDvppPreprocess: params->paste.y 3 is odd"},
                           {{0, 0, 5, 4}, "rtDvppPreprocess: params->paste.width 5 is odd"},
                           {{0, 0, 4, 7}, "rtDvppPreprocess: params->paste.height 7 is odd"}};
        for (const Bad& b : bad) {
            SCOPED_TRACE(b.text);
            rtDvppPreprocessParams params = RT_DVPP_PREPROCESS_INIT;
            params.width = params.height = 8;
            params.paste = b.r;
            EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppPreprocess(&src.pic, 1, nullptr, &params, tensor.get(),
                                                                     stream));
            EXPECT_TRUE(contains(last_message(), b.text));
            EXPECT_TRUE(contains(last_message(), "srcs[0] is YUV420"));
        }
        EXPECT_EQ(device_bytes(stream, tensor), before) << "a refused call queued work";
        rtDvppPreprocessParams params = RT_DVPP_PREPROCESS_INIT;
        params.width = params.height = 8;
        params.paste = rtRect{2, 4, 4, 2};
        EXPECT_RT_OK(rtDvppPreprocess(&src.pic, 1, nullptr, &params, tensor.get(), stream));
        // A packed source takes odd rectangles.
        DevPicture rgb(RT_PIXEL_FORMAT_RGB888, 16, 16);
        ASSERT_RT_OK(rtMemset(rgb.pic.data, 0x40, rgb.pic.size));
        params.paste = rtRect{1, 3, 5, 3};
        EXPECT_RT_OK(rtDvppPreprocess(&rgb.pic, 1, nullptr, &params, tensor.get(), stream));
        EXPECT_RT_OK(rtStreamSynchronize(stream));
    }
}

TEST_P(DvppPictureRules, PreprocessOutputThatOverflowsNamesTheParams) {
    DevPicture src(RT_PIXEL_FORMAT_RGB888, 16, 16);
    rt_test::DevBuf tensor(16);
    rtDvppPreprocessParams params = RT_DVPP_PREPROCESS_INIT;
    params.width = params.height = 0xffffffffu;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppPreprocess(&src.pic, 1, nullptr, &params, tensor.get(), stream));
    EXPECT_TRUE(contains(last_message(), "rtDvppPreprocess: params->width 4294967295 x params->height 4294967295: "
                                         "the first plane"));
    EXPECT_TRUE(contains(last_message(), "overflows size_t"));
}

template <class E>
E enum_value(int v) {
    E e;
    static_assert(sizeof e == sizeof v);
    std::memcpy(&e, &v, sizeof e);  // any value the C ABI may carry
    return e;
}

TEST_P(DvppPictureRules, EnumValuesOutsideTheirTypesAreRefusedListingTheValidOnes) {
    DevPicture nv12(RT_PIXEL_FORMAT_YUV420SP_NV12, 8, 8), rgb(RT_PIXEL_FORMAT_RGB888, 8, 8);
    ASSERT_RT_OK(rtMemset(rgb.pic.data, 0x11, rgb.pic.size));
    for (int v : {4, -1, 1000}) {
        SCOPED_TRACE(v);
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                        rtDvppConvertColor(&nv12.pic, &rgb.pic, enum_value<rtColorMatrix>(v), stream));
        EXPECT_TRUE(contains(last_message(), "rtDvppConvertColor: matrix " + std::to_string(v) +
                                                 " is not an rtColorMatrix (expected RT_COLOR_BT601_FULL (0), "
                                                 "RT_COLOR_BT601_LIMITED (1), RT_COLOR_BT709_FULL (2) or "
                                                 "RT_COLOR_BT709_LIMITED (3))"));
    }
    rt_test::DevBuf out(8 * 8 * 3 * 4);
    ASSERT_RT_OK(rtMemset(out.get(), 0, out.size()));
    for (int v : {int(RT_INT32), int(RT_FLOAT64), int(RT_UINT64), 10, -1}) {
        SCOPED_TRACE(v);
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                        rtDvppNormalize(&rgb.pic, out.get(), enum_value<rtDataType>(v), 1, nullptr, nullptr, stream));
        EXPECT_TRUE(contains(last_message(), "rtDvppNormalize: dtype " + std::to_string(v) + " is "));
        EXPECT_TRUE(contains(last_message(), "(expected RT_FLOAT32 (7), RT_FLOAT16 (6), RT_BFLOAT16 (9), RT_UINT8 (1) "
                                             "or RT_INT8 (0))"));
        EXPECT_TRUE(contains(last_message(), v == RT_INT32 || v == RT_FLOAT64 || v == RT_UINT64
                                                 ? "is an rtDataType DVPP does not write"
                                                 : "is not an rtDataType"));
    }
    for (int v : {3, -2}) {
        SCOPED_TRACE(v);
        rtDvppPreprocessParams params = RT_DVPP_PREPROCESS_INIT;
        params.width = params.height = 8;
        params.interpolation = enum_value<rtInterpolation>(v);
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDvppPreprocess(&rgb.pic, 1, nullptr, &params, out.get(), stream));
        EXPECT_TRUE(contains(last_message(), "rtDvppPreprocess: params->interpolation " + std::to_string(v) +
                                                 " is not an rtInterpolation (expected RT_INTERP_NEAREST (0), "
                                                 "RT_INTERP_BILINEAR (1) or RT_INTERP_AREA (2))"));
    }
    EXPECT_EQ(device_bytes(stream, out), std::vector<unsigned char>(out.size(), 0)) << "a refused call queued work";
    EXPECT_EQ(device_bytes(stream, rgb.buf), std::vector<unsigned char>(rgb.buf.size(), 0x11));
}

// A GPU's stream cannot use a cpu device's memory, nor a cpu stream a GPU's (the rules of rtMemsetAsync).
TEST(DvppPictureMemory, PixelsOfAnotherBackendAreRefusedNamingBothDevices) {
    int n = 0, cpu = -1, other = -1;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    for (int i = 0; i < n; ++i) {
        const std::string b = rt_test::backend_of(i);
        if (b == "cpu" && cpu < 0) cpu = i;
        if (b != "cpu" && other < 0) other = i;
    }
    if (cpu < 0 || other < 0) GTEST_SKIP() << "needs a cpu device and a device of another backend";
    ASSERT_RT_OK(rtSetDevice(other));
    DevPicture gpu_pic(RT_PIXEL_FORMAT_GRAY8, 8, 8);
    rt_test::StreamGuard gpu_stream;
    ASSERT_RT_OK(rtSetDevice(cpu));
    DevPicture cpu_pic(RT_PIXEL_FORMAT_GRAY8, 8, 8);
    rt_test::StreamGuard cpu_stream;
    for (const Probe& p : probes(cpu_stream, RT_PIXEL_FORMAT_GRAY8, 8, 8)) {
        SCOPED_TRACE(p.what);
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, p.call(&gpu_pic.pic));
        EXPECT_TRUE(contains(last_message(), p.what + "->data " + rt_test::ptr_text(gpu_pic.pic.data)));
        EXPECT_TRUE(contains(last_message(), "which a stream of cpu:"));
        EXPECT_TRUE(contains(last_message(), "cannot use (queue the operation on a stream of "));
    }
    ASSERT_RT_OK(rtSetDevice(other));
    for (const Probe& p : probes(gpu_stream, RT_PIXEL_FORMAT_GRAY8, 8, 8)) {
        SCOPED_TRACE(p.what);
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, p.call(&cpu_pic.pic));
        EXPECT_TRUE(contains(last_message(), p.what + "->data"));
        EXPECT_TRUE(contains(last_message(), "queue the operation on a stream of cpu:"));
    }
    ASSERT_RT_OK(rtSetDevice(0));
}

INSTANTIATE_TEST_SUITE_P(Devices, DvppPictureRules, ::testing::ValuesIn(rt_test::device_indices()),
                         rt_test::device_param_name);

}  // namespace
