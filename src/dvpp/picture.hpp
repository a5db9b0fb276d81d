// DVPP picture descriptors: the layout of each pixel format and the checks every operation runs on its pictures and
// rectangles (include/runtime/dvpp.h states the rules). Shared by the codecs and the pixel operations.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/dvpp.h"

namespace rt {
class CoreDevice;
}

namespace rt::dvpp {

/// One plane of a picture: `width` x `height` elements of `channels` bytes each, rows `pitch` bytes apart, starting
/// `offset` bytes after the picture's data.
struct Plane {
    size_t offset = 0;
    uint32_t width = 0, height = 0;
    uint32_t channels = 0;
    size_t pitch = 0;
};

/// A checked picture: its format, sizes, strides (0 already replaced by width and height) and planes.
/// Packed formats have one plane of 1, 3 or 4 channels; NV12/NV21 two (Y, then 2-channel chroma at half size);
/// YUV420P three (Y, U, V).
struct Layout {
    rtPixelFormat format = RT_PIXEL_FORMAT_GRAY8;
    uint32_t width = 0, height = 0, width_stride = 0, height_stride = 0;
    int num_planes = 0;
    Plane planes[3];
    size_t bytes = 0;  ///< the bytes the layout occupies from data (rtDvppPictureSize)
};

/// Where a 4:2:0 picture's chroma lies. c0 is plane 1 (NV12/NV21: the interleaved pairs; YUV420P: the U plane), c1
/// the V plane (YUV420P) or c0 again (the kernels take c0, c1); u and v are the first U and V samples, `step` bytes
/// apart along a row (2 interleaved, 1 planar) and `pitch` bytes between rows (the same for U and V).
struct Chroma {
    uint8_t* c0;
    uint8_t* c1;
    uint8_t* u;
    uint8_t* v;
    size_t pitch;
    size_t step;
};
/// The chroma of a 4:2:0 picture laid out as `layout` from `data`.
Chroma chroma_of(void* data, const Layout& layout) noexcept;

/// Whether `format` is one of rtPixelFormat's values (read as an int: the C ABI may pass anything).
bool is_format(int format) noexcept;
bool is_yuv420(rtPixelFormat format) noexcept;  ///< NV12, NV21, YUV420P
/// Channels of a packed format (GRAY8 1, RGB/BGR 3, RGBA/BGRA 4); 0 for the 4:2:0 formats.
uint32_t packed_channels(rtPixelFormat format) noexcept;
/// "RGB888", "YUV420SP_NV12", ...; "unknown (<value>)" for others (static storage for known ones).
const char* format_name(int format) noexcept;

/// The layout of a picture of that format, size and strides (0: width, height). Throws INVALID_VALUE, naming
/// `what` ("rtDvppResize: dst") and the field, for an unknown format, a zero size, a stride below its size, odd
/// 4:2:0 sizes or strides, or a byte count that overflows size_t.
Layout layout_of(int format, uint32_t width, uint32_t height, uint32_t width_stride, uint32_t height_stride,
                 const char* what);

/// Checks a descriptor (`picture` not NULL, `data` not NULL, the layout, size >= layout bytes) and that its bytes are
/// memory a stream of `queue_device` may read or write (device memory of its backend, or host memory it can address:
/// the rules of rtMemsetAsync). Throws INVALID_VALUE naming `what` and the field. Returns the layout.
Layout check_picture(const CoreDevice& queue_device, const rtPicture* picture, const char* what);
/// The same checks without the memory check (for host pictures: codecs' staging, tests).
Layout check_descriptor(const rtPicture* picture, const char* what);

/// Checks that `rect` lies inside `layout`'s width x height, has width and height >= 1 and, for a 4:2:0 picture, even
/// x, y, width and height. NULL is the whole picture. Throws INVALID_VALUE naming `what` and the field.
rtRect check_rect(const rtRect* rect, const Layout& layout, const char* what);

/// The int an enum argument or field of the C ABI holds. A C caller may pass any int there; loading it as the C++
/// enum type is undefined outside the enumerators' range (UBSan's -fsanitize=enum reports it), so every entry point
/// copies its enum arguments out with this before looking at them.
int read_int(const void* field);

/// Checks an rtInterpolation / rtColorMatrix / rtDataType value read from the C ABI. Throws INVALID_VALUE naming
/// `what` and listing the valid values.
rtInterpolation check_interpolation(int value, const char* what);
rtColorMatrix check_matrix(int value, const char* what);
rtDataType check_dtype(int value, const char* what);

}  // namespace rt::dvpp
