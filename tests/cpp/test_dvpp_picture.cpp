// test_dvpp_picture.cpp — DVPP picture descriptors: rtDvppPictureSize for every format and stride, and every rule of
// dvpp.h's "Rules checked by every operation" refused with a message naming the argument and field.
#include <cstdint>
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
    EXPECT_TRUE(contains(last_message(), "overflows size_t"));
    // The largest sizes that fit are computed exactly.
    ASSERT_RT_OK(picture_size(RT_PIXEL_FORMAT_GRAY8, 0xffffffffu, 0xffffffffu, 0, 0, &b));
    EXPECT_EQ(b, size_t(0xffffffffu) * 0xffffffffu);
    ASSERT_RT_OK(picture_size(RT_PIXEL_FORMAT_YUV420P, 0xfffffffeu, 0x80000000u, 0, 0, &b));
    EXPECT_EQ(b, size_t(0xfffffffeu) * 0x80000000u + 2 * size_t(0x7fffffffu) * 0x40000000u);
    // The planes fit one by one but not together.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, picture_size(RT_PIXEL_FORMAT_YUV420P, 0xfffffffeu, 0xfffffffeu, 0, 0, &b));
    EXPECT_TRUE(contains(last_message(), "overflows size_t"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    picture_size(RT_PIXEL_FORMAT_YUV420SP_NV12, 0xfffffffeu, 0xfffffffeu, 0, 0, &b));
    EXPECT_TRUE(contains(last_message(), "overflows size_t"));
}

TEST(DvppPictureSize, NullOutputIsRefused) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, picture_size(RT_PIXEL_FORMAT_RGB888, 4, 4, 0, 0, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDvppPictureSize: bytes is NULL"));
}

}  // namespace
