// The fixed-order reduction of the in-process collectives, one loop per data type and operation.
#include "comm/reduce.hpp"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace rt::comm {

size_t element_size(rtDataType type) { return rtDataTypeSize(type); }

const char* type_name(rtDataType type) {
    static const char* const names[kDataTypes] = {"RT_INT8",    "RT_UINT8",   "RT_INT32",   "RT_UINT32",
                                                  "RT_INT64",   "RT_UINT64",  "RT_FLOAT16", "RT_FLOAT32",
                                                  "RT_FLOAT64", "RT_BFLOAT16"};
    const int t = static_cast<int>(type);
    return t >= 0 && t < kDataTypes ? names[t] : "(unknown type)";
}

const char* op_name(rtReduceOp op) {
    static const char* const names[kReduceOps] = {"RT_REDUCE_SUM", "RT_REDUCE_PROD", "RT_REDUCE_MAX", "RT_REDUCE_MIN",
                                                  "RT_REDUCE_AVG"};
    const int o = static_cast<int>(op);
    return o >= 0 && o < kReduceOps ? names[o] : "(unknown op)";
}

uint16_t float_to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN (quiet), infinity
    if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds past the largest half: infinity
    if (x < 0x38800000u) {  // below 2^-14: a subnormal half (or zero); scaled by 2^24 it is the integer mantissa
        float a;
        std::memcpy(&a, &x, 4);
        return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));  // the default mode: nearest even
    }
    x += 0xfffu + ((x >> 13) & 1u);  // round the 13 dropped bits to nearest even (a carry bumps the exponent)
    return sign | static_cast<uint16_t>((x - (112u << 23)) >> 13);
}

float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    uint32_t x;
    if (exponent == 0) {
        float v = static_cast<float>(mantissa) * 5.9604644775390625e-8f;  // mantissa * 2^-24, exact
        std::memcpy(&x, &v, 4);
        x |= sign;
    } else if (exponent == 31) {
        x = sign | 0x7f800000u | (mantissa << 13);
    } else {
        x = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

uint16_t float_to_bfloat16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float bfloat16_to_float(uint16_t b) {
    const uint32_t x = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

namespace {

struct Half {
    uint16_t bits;
};
struct BHalf {
    uint16_t bits;
};

/// How a stored element becomes the accumulator and back. Integer sums and products run in the unsigned type of the
/// same width: they wrap (no undefined overflow); the result's bits are those of the signed wrap-around.
template <class T>
struct Element {
    using Acc = T;
    static Acc load(T v) { return v; }
    static T store(Acc v) { return v; }
};
template <>
struct Element<Half> {
    using Acc = float;
    static Acc load(Half v) { return half_to_float(v.bits); }
    static Half store(Acc v) { return {float_to_half(v)}; }
};
template <>
struct Element<BHalf> {
    using Acc = float;
    static Acc load(BHalf v) { return bfloat16_to_float(v.bits); }
    static BHalf store(Acc v) { return {float_to_bfloat16(v)}; }
};

template <class A, bool = std::is_integral_v<A>>
struct WrappingOf {
    using type = A;
};
template <class A>
struct WrappingOf<A, true> {
    using type = std::make_unsigned_t<A>;
};
template <class A>
using Wrapping = typename WrappingOf<A>::type;

template <class A>
A combine(rtReduceOp op, A a, A b) {
    switch (op) {
        case RT_REDUCE_SUM:
        case RT_REDUCE_AVG:
            return static_cast<A>(static_cast<Wrapping<A>>(a) + static_cast<Wrapping<A>>(b));
        case RT_REDUCE_PROD:
            return static_cast<A>(static_cast<Wrapping<A>>(a) * static_cast<Wrapping<A>>(b));
        case RT_REDUCE_MAX:
            return b > a ? b : a;
        case RT_REDUCE_MIN:
            return b < a ? b : a;
    }
    return a;
}

/// The loop for one operation, the operation a template argument so that each loop vectorizes. kTile accumulators on
/// the stack: every source element of a tile is read before any destination element is written (in place is safe).
template <class T, rtReduceOp Op, size_t kTile>
void reduce_tiles(const void* const* src, int nsrc, void* const* dst, int ndst, size_t begin, size_t end,
                  int divisor, StoreFn store, void* context) {
    using E = Element<T>;
    using Acc = typename E::Acc;
    Acc acc[kTile];
    for (size_t base = begin; base < end; base += kTile) {
        const size_t len = end - base < kTile ? end - base : kTile;
        const T* s0 = static_cast<const T*>(src[0]) + base;
        for (size_t i = 0; i < len; ++i) acc[i] = E::load(s0[i]);
        for (int r = 1; r < nsrc; ++r) {
            const T* s = static_cast<const T*>(src[r]) + base;
            for (size_t i = 0; i < len; ++i) acc[i] = combine<Acc>(Op, acc[i], E::load(s[i]));
        }
        if constexpr (Op == RT_REDUCE_AVG) {
            const Acc d = static_cast<Acc>(divisor);
            for (size_t i = 0; i < len; ++i) acc[i] = acc[i] / d;
        }
        for (int r = 0; r < ndst; ++r) {
            T* d = static_cast<T*>(dst[r]) + base;
            if constexpr (std::is_same_v<T, Acc>) {
                if (store) store(context, d, acc, len * sizeof(T));
                else if constexpr (kTile <= 16) for (size_t i = 0; i < len; ++i) d[i] = acc[i];  // no memcpy start-up
                else std::memcpy(d, acc, len * sizeof(T));
            } else {
                for (size_t i = 0; i < len; ++i) d[i] = E::store(acc[i]);
            }
        }
    }
}

/// A few elements (the small collectives across processes: one cache line or so) take a small tile: the large one's
/// frame costs more than their whole reduction.
template <class T, rtReduceOp Op>
void reduce_typed(const void* const* src, int nsrc, void* const* dst, int ndst, size_t begin, size_t end,
                  int divisor, StoreFn store, void* context) {
    if (end - begin <= 16) return reduce_tiles<T, Op, 16>(src, nsrc, dst, ndst, begin, end, divisor, store, context);
    reduce_tiles<T, Op, 2048>(src, nsrc, dst, ndst, begin, end, divisor, store, context);
}

template <class T>
void reduce_op(rtReduceOp op, const void* const* src, int nsrc, void* const* dst, int ndst, size_t begin, size_t end,
               int divisor, StoreFn store, void* context) {
    switch (op) {
        case RT_REDUCE_SUM: return reduce_typed<T, RT_REDUCE_SUM>(src, nsrc, dst, ndst, begin, end, divisor, store, context);
        case RT_REDUCE_PROD: return reduce_typed<T, RT_REDUCE_PROD>(src, nsrc, dst, ndst, begin, end, divisor, store, context);
        case RT_REDUCE_MAX: return reduce_typed<T, RT_REDUCE_MAX>(src, nsrc, dst, ndst, begin, end, divisor, store, context);
        case RT_REDUCE_MIN: return reduce_typed<T, RT_REDUCE_MIN>(src, nsrc, dst, ndst, begin, end, divisor, store, context);
        case RT_REDUCE_AVG: return reduce_typed<T, RT_REDUCE_AVG>(src, nsrc, dst, ndst, begin, end, divisor, store, context);
    }
}

}  // namespace

void reduce_range(rtDataType type, rtReduceOp op, const void* const* src, int nsrc, void* const* dst, int ndst,
                  size_t begin, size_t end, int divisor, StoreFn store, void* store_context) {
    switch (type) {
        case RT_INT8: return reduce_op<int8_t>(op, src, nsrc, dst, ndst, begin, end, divisor, store, store_context);
        case RT_UINT8: return reduce_op<uint8_t>(op, src, nsrc, dst, ndst, begin, end, divisor, store, store_context);
        case RT_INT32: return reduce_op<int32_t>(op, src, nsrc, dst, ndst, begin, end, divisor, store, store_context);
        case RT_UINT32: return reduce_op<uint32_t>(op, src, nsrc, dst, ndst, begin, end, divisor, store, store_context);
        case RT_INT64: return reduce_op<int64_t>(op, src, nsrc, dst, ndst, begin, end, divisor, store, store_context);
        case RT_UINT64: return reduce_op<uint64_t>(op, src, nsrc, dst, ndst, begin, end, divisor, store, store_context);
        case RT_FLOAT16: return reduce_op<Half>(op, src, nsrc, dst, ndst, begin, end, divisor, store, store_context);
        case RT_BFLOAT16: return reduce_op<BHalf>(op, src, nsrc, dst, ndst, begin, end, divisor, store, store_context);
        case RT_FLOAT32: return reduce_op<float>(op, src, nsrc, dst, ndst, begin, end, divisor, store, store_context);
        case RT_FLOAT64: return reduce_op<double>(op, src, nsrc, dst, ndst, begin, end, divisor, store, store_context);
    }
}

}  // namespace rt::comm
