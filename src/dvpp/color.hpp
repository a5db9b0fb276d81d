// What rtDvppConvertColor, rtDvppNormalize and rtDvppPreprocess share on the host: the kernels' names for formats,
// matrices and dtypes, the normalisation coefficients and their checks, and the argument checks of the pixel kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dvpp/picture.hpp"

struct DvppNorm;  // kernels/normalize_math.h (include it after kernels/common.h where the value is used)

namespace rt::dvpp {

/// The kernels' word for a format: "grey", "rgb", "bgr", "rgba", "bgra", "nv12", "nv21", "i420".
const char* format_key(rtPixelFormat format) noexcept;
/// The kernels' word for a matrix: "601f", "601l", "709f", "709l".
const char* matrix_key(rtColorMatrix matrix) noexcept;
/// The kernels' word for an output dtype (check_dtype's five): "f32", "f16", "bf16", "u8", "i8".
const char* dtype_key(rtDataType dtype) noexcept;
/// The kernels' run-time code of an output dtype (check_dtype's five): DVPP_DTYPE_* of normalize_math.h.
int dtype_code(rtDataType dtype) noexcept;

/// A plane's row pitch as the kernels take it (32 bits). A larger pitch (a row of 4 GiB or more): INVALID_VALUE
/// naming `what` ("rtDvppConvertColor: src") and its width_stride.
uint32_t kernel_pitch(const Plane& plane, const char* what);

/// The picture's plane p as a pointer.
inline uint8_t* plane_data(const rtPicture& picture, const Layout& layout, int p) {
    return static_cast<uint8_t*>(picture.data) + layout.planes[p].offset;
}

/// Refuses (INVALID_VALUE, naming both) an output whose bytes overlap the input's: the kernels read and write in
/// any order, so an operation in place would read what it has already written.
void check_disjoint(const void* in, size_t in_bytes, const char* in_name, const void* out, size_t out_bytes,
                    const char* out_name, const char* api);

/// The coefficients of `channels` channels from mean and std (either NULL: 0 and 1). Refuses (INVALID_VALUE, naming
/// `what` ("rtDvppNormalize: std[2]") and the value) a mean that is not finite, a std that is zero or not finite, and
/// a std so small that 1 / std or mean / std overflows: each would make NaN or infinite outputs of finite pixels.
DvppNorm norm_coeffs(const float* mean, const float* std, uint32_t channels, const char* mean_what,
                       const char* std_what);

}  // namespace rt::dvpp
