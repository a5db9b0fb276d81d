// Element kernels of the in-process collectives: data type facts, fp16/bf16 conversion, and the fixed-order reduction.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/comm.h"

namespace rt::comm {

inline constexpr int kDataTypes = 10;  // rtDataType's values are 0 .. kDataTypes - 1
inline constexpr int kReduceOps = 5;   // rtReduceOp's

size_t element_size(rtDataType type);
const char* type_name(rtDataType type);  // "RT_FLOAT32"
const char* op_name(rtReduceOp op);      // "RT_REDUCE_SUM"

uint16_t float_to_half(float f);  ///< IEEE binary16, rounded to nearest even; overflow gives infinity
float half_to_float(uint16_t h);
uint16_t float_to_bfloat16(float f);  ///< rounded to nearest even; NaN stays a (quiet) NaN
float bfloat16_to_float(uint16_t b);

/// Elements [begin, end) of the reduction of `nsrc` buffers (src[0] op src[1] op ..., in that order, for every element:
/// the result does not depend on how [0, count) is cut into ranges), written to each of the `ndst` buffers dst[i].
/// Every source element of the range is read before any destination element of it is written, so a destination may be
/// a source (in place). fp16/bf16 accumulate in float and round once; AVG divides the sum by `divisor` at the end.
/// `store` (optional) writes a tile of results of the same type as the elements (memcpy when null: the backend's copy
/// of large outputs, past the cache).
using StoreFn = void (*)(void* context, void* dst, const void* src, size_t bytes);
void reduce_range(rtDataType type, rtReduceOp op, const void* const* src, int nsrc, void* const* dst, int ndst,
                  size_t begin, size_t end, int divisor, StoreFn store = nullptr, void* store_context = nullptr);

}  // namespace rt::comm
