// The host half of the resize maths: the constants of kernels/resize_math.h for one axis and for one resize, which
// the resize kernels (resize.cpp) and the fused pre-processing (preprocess.cpp) pass to their kernels by value.
#pragma once

#include <cstdint>

#include "runtime/dvpp.h"

#include "dvpp/kernels/common.h"
#include "dvpp/kernels/resize_math.h"

namespace rt::dvpp {

/// The largest source (crop) and destination extent a resize takes on either axis: every intermediate of the integer
/// sampling then fits 32 bits (resize_math.h).
inline constexpr uint32_t kMaxResizeExtent = 65536;

/// The constants of one axis from `src` to `dst` pixels (both 1..kMaxResizeExtent; not checked here).
DvppAxis make_axis(uint32_t src, uint32_t dst);

/// The sampling of a resize from src_width x src_height to dst_width x dst_height (each 1..kMaxResizeExtent):
/// RT_INTERP_AREA becomes area averaging when neither axis grows and OpenCV's area-weighted linear otherwise.
DvppResample make_resample(rtInterpolation interpolation, uint32_t src_width, uint32_t src_height, uint32_t dst_width,
                           uint32_t dst_height);

/// Throws INVALID_VALUE naming `what` ("rtDvppResize: crop") and the field when an extent exceeds kMaxResizeExtent.
void check_resize_extent(uint32_t width, uint32_t height, const char* what);

}  // namespace rt::dvpp
