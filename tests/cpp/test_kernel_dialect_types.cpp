// test_kernel_dialect_types.cpp — the dialect's types and built-ins of issue 13 on every device: rt_half/rt_bfloat16
// (every bit pattern against a reference), vector types, kernel parameters of any alignment, rt_printf, atomics with
// memory orders under contention, module globals (rtModuleGetGlobal), kernel templates (RT_KERNEL_INSTANTIATE),
// linear ids; and the front end's refusals. Every source here is also compiled for sm_90 by test_cuda_compiler.
#include "test_util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <runtime/runtime.hpp>

using namespace rt_test;

namespace {

RT_TEST_TEMP_CACHE_DIR("dialect-types");

constexpr rtDim3 dim(unsigned x, unsigned y = 1, unsigned z = 1) { return rtDim3{x, y, z}; }

// ------------------------------------------------------------------------------------------ host references

uint32_t f2u(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float u2f(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

/// binary16 -> float from the definition (sign, exponent, fraction), not from bit manipulation.
float ref_half_to_float(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? std::nan("") : HUGE_VAL;
    else if (e == 0) v = std::ldexp(m, -24);
    else v = std::ldexp(1024 + m, e - 25);
    return static_cast<float>(s ? -v : v);
}

/// float -> binary16 or bfloat16 by scaling to the target's significand and rounding with nearbyint (the default
/// mode: to nearest, ties to even). `mant`: fraction bits (10, 7); `bias`: exponent bias (15, 127).
uint16_t ref_round(float f, int mant, int bias) {
    const uint16_t sign = std::signbit(f) ? static_cast<uint16_t>(1u << 15) : 0;
    const uint16_t inf = static_cast<uint16_t>(((2 * bias + 1) << mant));
    const double a = std::fabs(static_cast<double>(f));
    if (std::isnan(f)) return static_cast<uint16_t>(sign | inf | (1u << (mant - 1)));
    if (std::isinf(f)) return sign | inf;
    const int emin = 1 - bias;  // the smallest normal exponent
    int e;
    std::frexp(a, &e);
    e -= 1;  // a = 1.x * 2^e
    if (a == 0 || e < emin) {  // subnormal (or zero): units of 2^(emin - mant)
        const double r = std::nearbyint(std::ldexp(a, mant - emin));
        return static_cast<uint16_t>(sign | static_cast<uint16_t>(r));  // r == 2^mant is the smallest normal
    }
    double r = std::nearbyint(std::ldexp(a, mant - e));  // in [2^mant, 2^(mant+1)]
    if (r == std::ldexp(1.0, mant + 1)) {
        r /= 2;
        ++e;
    }
    if (e + bias >= 2 * bias + 1) return sign | inf;
    return static_cast<uint16_t>(sign | ((e + bias) << mant) | (static_cast<uint32_t>(r) - (1u << mant)));
}
uint16_t ref_float_to_half(float f) { return ref_round(f, 10, 15); }
uint16_t ref_float_to_bf16(float f) { return ref_round(f, 7, 127); }
bool half_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
bool bf16_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

// ------------------------------------------------------------------------------------------ kernels

/// Host mirrors of kernel parameter structs.
struct alignas(32) Big {
    double v[3];
    int32_t tag;
};
struct alignas(16) F4 {
    float x, y, z, w;
};
struct F3 {
    float x, y, z;
};
struct alignas(16) D2 {
    double x, y;
};
struct alignas(16) I4 {
    int32_t x, y, z, w;
};

const char* const kTypes = R"rtsrc(
struct alignas(32) Big { double v[3]; int32_t tag; };

// Every 16-bit pattern decoded (as binary16 and bfloat16), and every float of `in` encoded both ways.
RT_KERNEL void conversions(const uint16_t* bits, float* half_value, float* bf16_value, const float* in,
                           uint16_t* to_half, uint16_t* to_bf16, uint32_t n_bits, uint32_t n_in) {
    size_t i = get_global_id(0);
    if (i < n_bits) {
        half_value[i] = (float)rt_half::from_bits(bits[i]);
        bf16_value[i] = (float)rt_bfloat16::from_bits(bits[i]);
    }
    if (i < n_in) {
        rt_half h = in[i];
        to_half[i] = h.bits;
        rt_bfloat16 b = rt_bfloat16(in[i]);
        to_bf16[i] = b.bits;
    }
}

// 16-bit parameters and pointers; arithmetic and comparisons in float, stored rounded.
RT_KERNEL void half_math(rt_half a, rt_bfloat16 b, const rt_half* x, rt_half* y, rt_bfloat16* z, int32_t* less) {
    size_t i = get_global_id(0);
    rt_half v = x[i] * a + 1.0f;
    v += 0.5f;
    y[i] = v;
    rt_bfloat16 w = b;
    w *= (float)x[i];
    z[i] = w;
    less[i] = x[i] < a ? 1 : 0;
}

// Vector arithmetic: each result is a fixed function of the inputs (see the host's reference).
RT_KERNEL void vectors(const rt_float4* a, const rt_float4* b, rt_float4* o4, rt_float3* o3, rt_double2* od,
                       rt_int4* oi, rt_uint2* ou, int32_t* eq) {
    size_t i = get_global_id(0);
    rt_float4 p = a[i], q = b[i];
    rt_float4 r = p * 2.0f + q - p / q;
    r -= rt_make_float4(1.0f, 2.0f, 3.0f, 4.0f);
    r *= 0.5f;
    o4[i] = -r + 3.0f * p;
    rt_float3 t = {p.x, p.y, p.z};
    t += rt_make_float3(q.w, q.z, q.y);
    o3[i] = t / 2.0f;
    rt_double2 d = rt_make_double2((double)p.x, (double)q.x);
    od[i] = d * d - 1.0;
    rt_int4 n = rt_make_int4((int32_t)i, -(int32_t)i, 7, (int32_t)(i * i));
    n = n * 3 - rt_make_int4(1, 1, 1, 1);
    n /= 2;
    oi[i] = n;
    rt_uint2 u = {(uint32_t)i, 5u};
    ou[i] = u + u * u;
    eq[i] = (p == a[i] ? 1 : 0) + (p != q ? 2 : 0) + (rt_make_int2(1, 2) == rt_make_int2(1, 3) ? 4 : 0);
}

// sizeof and alignof of the dialect's types as the kernel compiler lays them out.
RT_KERNEL void layouts(uint32_t* out) {
    if (get_global_id(0) != 0) return;
    uint32_t k = 0;
#define RT_T_(T) out[k++] = (uint32_t)sizeof(T); out[k++] = (uint32_t)alignof(T);
    RT_T_(rt_half) RT_T_(rt_bfloat16)
    RT_T_(rt_float2) RT_T_(rt_float3) RT_T_(rt_float4)
    RT_T_(rt_double2) RT_T_(rt_double3) RT_T_(rt_double4)
    RT_T_(rt_int2) RT_T_(rt_int3) RT_T_(rt_int4)
    RT_T_(rt_uint2) RT_T_(rt_uint3) RT_T_(rt_uint4)
    RT_T_(Big)
#undef RT_T_
}

// Parameters of every alignment, between bytes that would shift them: each is stored back whole.
RT_KERNEL void aligned(int8_t pre, Big big, int8_t mid, rt_float3 f3, rt_double2 d2, Big big2, rt_half h,
                       rt_float4 f4, rt_int4 i4, int8_t post, double* out) {
    if (get_global_id(0) != 0) return;
    out[0] = pre; out[1] = big.v[0]; out[2] = big.v[1]; out[3] = big.v[2]; out[4] = big.tag;
    out[5] = mid; out[6] = f3.x; out[7] = f3.y; out[8] = f3.z; out[9] = d2.x; out[10] = d2.y;
    out[11] = big2.v[0]; out[12] = big2.v[2]; out[13] = big2.tag; out[14] = (float)h;
    out[15] = f4.x; out[16] = f4.w; out[17] = i4.y; out[18] = i4.w; out[19] = post;
}

// Linear ids, x fastest.
RT_KERNEL void linear_ids(uint64_t* out) {
    size_t g = get_global_linear_id();
    out[3 * g] = g;
    out[3 * g + 1] = get_local_linear_id();
    out[3 * g + 2] = get_group_linear_id();
}
)rtsrc";

const char* const kAtomics = R"rtsrc(
// Every item applies each operation once, with an order chosen by its index (all five orders are used).
RT_KERNEL void contend(int32_t* i32, uint32_t* u32, int64_t* i64, uint64_t* u64, float* f32, double* f64,
                       uint32_t* inc_old, uint64_t* dec_old, uint32_t n) {
    size_t i = get_global_id(0);
    if (i >= n) return;
    const rt_memory_order orders[5] = {rt_memory_order_relaxed, rt_memory_order_acquire, rt_memory_order_release,
                                       rt_memory_order_acq_rel, rt_memory_order_seq_cst};
    const rt_memory_order o = orders[i % 5];
    atomic_add(&i32[0], (int32_t)(i % 7), o);
    atomic_sub(&i32[1], (int32_t)(i % 5), o);
    atomic_sub(&i64[0], (int64_t)i, o);
    atomic_and(&u32[0], ~(1u << (i % 32)) | (i & 1u), o);
    atomic_or(&u32[1], 1u << (i % 29), o);
    atomic_xor(&u32[2], (uint32_t)(i * 2654435761u), o);
    atomic_and(&u64[0], ~(1ull << (i % 64)), o);
    atomic_or(&u64[1], 1ull << (i % 61), o);
    atomic_xor(&u64[2], (uint64_t)i * 0x9e3779b97f4a7c15ull, o);
    inc_old[i] = atomic_inc(&u32[3], o);
    dec_old[i] = atomic_dec(&u64[3], o);
    atomic_inc(&i32[2]);
    atomic_dec(&i64[1]);
    atomic_min(&i32[3], (int32_t)(1000 - i), o);
    atomic_max(&i64[2], (int64_t)i * 3, o);
    atomic_add(&f32[0], 1.0f, o);
    atomic_sub(&f64[0], 0.5, o);
    atomic_max(&f32[1], (float)i * 0.25f, o);
    if (atomic_cas(&i32[4], 0, (int32_t)i + 1, o) == 0) atomic_add(&i32[5], 1, rt_memory_order_relaxed);
    atomic_exchange(&u64[4], (uint64_t)i, o);
    rt_fence(o);
}
)rtsrc";

const char* const kPrintf = R"rtsrc(
RT_KERNEL void talk(int32_t tag, double x) {
    int32_t i = (int32_t)get_global_id(0);
    rt_printf("first %d of tag %d: %.3f|%s\n", i, tag, x * i, "text");
    rt_printf("second %d %u\n", i, (unsigned)(i * 3));
}
)rtsrc";

const char* const kGlobals = R"rtsrc(
RT_GLOBAL float scale = 2.0f;
RT_GLOBAL int32_t table[4] = {1, 2, 3, 4};
RT_GLOBAL unsigned long long counter;
RT_GLOBAL rt_float2 offset = {0.5f, -0.5f};
RT_GLOBAL int32_t written;
RT_GLOBAL rt_half half_one = rt_half::from_bits(0x3c00);  // a constant initialiser (a __device__ variable's rule)

RT_DEVICE float scaled(float v) { return v * scale + offset.x + offset.y; }

RT_KERNEL void use_globals(float* out) {
    size_t i = get_global_id(0);
    out[i] = scaled((float)table[i % 4]) * (float)half_one;
    atomic_add(&counter, 1ull);
    if (i == 0) written = 40;
}
)rtsrc";

const char* const kTemplates = R"rtsrc(
template <class T> RT_KERNEL void axpy(T a, const T* x, T* y) {
    size_t i = get_global_id(0);
    y[i] = a * x[i] + y[i];
}
template <class T, int N>
RT_KERNEL void fill(T* out) { out[get_global_id(0)] = (T)(N * (int)get_global_id(0)); }

RT_KERNEL void plain(int32_t* out) { out[get_global_id(0)] = 7; }

// A template with work-group local memory of its parameter's type and a barrier.
template <class T> RT_KERNEL void block_sum(const T* in, T* out) {
    RT_LOCAL T part[64];
    size_t l = get_local_id(0);
    part[l] = in[get_global_id(0)];
    rt_barrier();
    if (l == 0) {
        T s = 0;
        for (int i = 0; i < 64; ++i) s += part[i];
        out[get_group_id(0)] = s;
    }
}
RT_KERNEL_INSTANTIATE(block_sum_i32, block_sum<int32_t>);
RT_KERNEL_INSTANTIATE(block_sum_f64, block_sum<double>);

RT_KERNEL_INSTANTIATE(axpy_f32, axpy<float>);
RT_KERNEL_INSTANTIATE(axpy_f64, axpy<double>);
RT_KERNEL_INSTANTIATE(axpy_i64, axpy<int64_t>);
RT_KERNEL_INSTANTIATE(fill3, fill<int32_t, 3>);
)rtsrc";

class DialectTypes : public DeviceTest {
protected:
    void TearDown() override {
        for (rtModule_t m : modules_) EXPECT_RT_OK(rtModuleUnload(m));
    }
    rtModule_t load(const char* source) {
        rtModule_t m = nullptr;
        EXPECT_RT_OK(rtModuleLoadSource(&m, source, nullptr));
        if (m) modules_.push_back(m);
        return m;
    }
    rtFunction_t fn(rtModule_t m, const char* name) {
        rtFunction_t f = nullptr;
        EXPECT_RT_OK(rtModuleGetFunction(&f, m, name)) << name;
        return f;
    }
    template <class T>
    std::vector<T> read(const DevBuf& d, size_t count) {
        std::vector<T> v(count);
        EXPECT_RT_OK(rtMemcpy(v.data(), d.get(), count * sizeof(T), RT_MEMCPY_DEVICE_TO_HOST));
        return v;
    }
    template <class T>
    void upload(DevBuf& d, const std::vector<T>& v) {
        ASSERT_RT_OK(d.alloc(v.size() * sizeof(T)));
        ASSERT_RT_OK(rtMemcpy(d.get(), v.data(), v.size() * sizeof(T), RT_MEMCPY_HOST_TO_DEVICE));
    }
    void run(rtFunction_t f, unsigned items, std::vector<void*> args, unsigned block = 64) {
        const unsigned groups = (items + block - 1) / block;
        ASSERT_RT_OK(launch_ex(f, dim(groups), dim(block), args.data(), static_cast<int>(args.size()), nullptr, 0,
                               nullptr, items));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    }
    bool executes() { return launches_execute(device()); }

    std::vector<rtModule_t> modules_;
};

// ------------------------------------------------------------------------------------------ 16-bit types

TEST_P(DialectTypes, HalfAndBfloat16ConversionsMatchTheReferenceForEveryBitPattern) {
    if (!executes()) GTEST_SKIP() << "the fake CUDA driver runs no kernel code";
    rtModule_t m = load(kTypes);
    // Decoding: all 65536 patterns. Encoding: every half and bfloat16 value, the midpoints between neighbouring
    // halves and the floats either side of them (ties to even, carries into the exponent, overflow to infinity,
    // subnormals), and pseudo-random floats of every exponent.
    std::vector<uint16_t> bits(65536);
    for (uint32_t i = 0; i < 65536; ++i) bits[i] = static_cast<uint16_t>(i);
    std::vector<float> in;
    for (uint32_t i = 0; i < 65536; ++i) {
        in.push_back(ref_half_to_float(static_cast<uint16_t>(i)));
        in.push_back(u2f(i << 16));  // every bfloat16 value
    }
    for (uint32_t i = 0; i < 0x7c00; ++i) {  // positive finite halves and the next one up (the last: infinity)
        const double lo = ref_half_to_float(static_cast<uint16_t>(i));
        const double hi = i + 1 == 0x7c00 ? 65536.0 : ref_half_to_float(static_cast<uint16_t>(i + 1));
        const float mid = static_cast<float>((lo + hi) / 2);  // exact in float
        for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, HUGE_VALF)}) {
            in.push_back(f);
            in.push_back(-f);
        }
    }
    uint64_t s = 0x243f6a8885a308d3ull;
    for (int i = 0; i < 200000; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        in.push_back(u2f(static_cast<uint32_t>(s >> 32)));
    }
    for (float f : {1e10f, 3.4028235e38f, 65519.99f, 65520.0f, 1e-10f, 1.4e-45f, 5.9604645e-08f, 2.9802322e-08f})
        in.push_back(f);
    const uint32_t n_bits = 65536, n_in = static_cast<uint32_t>(in.size());
    DevBuf d_bits, d_in, d_hv(n_bits * 4), d_bv(n_bits * 4), d_th(n_in * 2), d_tb(n_in * 2);
    upload(d_bits, bits);
    upload(d_in, in);
    void* pb = d_bits.get(); void* phv = d_hv.get(); void* pbv = d_bv.get(); void* pin = d_in.get();
    void* pth = d_th.get(); void* ptb = d_tb.get();
    uint32_t nb = n_bits, ni = n_in;
    run(fn(m, "conversions"), std::max(n_bits, n_in), {&pb, &phv, &pbv, &pin, &pth, &ptb, &nb, &ni}, 256);
    const auto hv = read<float>(d_hv, n_bits), bv = read<float>(d_bv, n_bits);
    const auto th = read<uint16_t>(d_th, n_in), tb = read<uint16_t>(d_tb, n_in);
    int bad = 0;
    for (uint32_t i = 0; i < n_bits && bad < 10; ++i) {
        const float want = ref_half_to_float(static_cast<uint16_t>(i)), want_b = u2f(i << 16);
        if (std::isnan(want) ? !std::isnan(hv[i]) : f2u(hv[i]) != f2u(want))
            ADD_FAILURE() << "half " << std::hex << i << " decodes to " << hv[i] << ", expected " << want, ++bad;
        if (std::isnan(want_b) ? !std::isnan(bv[i]) : f2u(bv[i]) != f2u(want_b))
            ADD_FAILURE() << "bfloat16 " << std::hex << i << " decodes to " << bv[i] << ", expected " << want_b, ++bad;
    }
    for (uint32_t i = 0; i < n_in && bad < 20; ++i) {
        const uint16_t wh = ref_float_to_half(in[i]), wb = ref_float_to_bf16(in[i]);
        if (std::isnan(in[i]) ? !half_is_nan(th[i]) : th[i] != wh)
            ADD_FAILURE() << "float " << std::hexfloat << in[i] << " encodes to half " << std::hex << th[i]
                          << ", expected " << wh, ++bad;
        if (std::isnan(in[i]) ? !bf16_is_nan(tb[i]) : tb[i] != wb)
            ADD_FAILURE() << "float " << std::hexfloat << in[i] << " encodes to bfloat16 " << std::hex << tb[i]
                          << ", expected " << wb, ++bad;
    }
    EXPECT_EQ(bad, 0);
}

TEST_P(DialectTypes, HalfParametersPointersAndArithmeticInFloat) {
    if (!executes()) GTEST_SKIP() << "the fake CUDA driver runs no kernel code";
    rtModule_t m = load(kTypes);
    rtFunction_t f = fn(m, "half_math");
    int count = 6;
    size_t sizes[6] = {};
    ASSERT_RT_OK(rtFunctionGetParamInfo(f, &count, sizes));
    EXPECT_EQ(sizes[0], 2u);
    EXPECT_EQ(sizes[1], 2u);
    const unsigned n = 1000;
    std::vector<uint16_t> x(n);
    for (unsigned i = 0; i < n; ++i) x[i] = ref_float_to_half(static_cast<float>(i) * 0.37f - 100.0f);
    DevBuf dx, dy(n * 2), dz(n * 2), dl(n * 4);
    upload(dx, x);
    uint16_t a = ref_float_to_half(1.5f), b = ref_float_to_bf16(-2.25f);
    void* px = dx.get(); void* py = dy.get(); void* pz = dz.get(); void* pl = dl.get();
    run(f, n, {&a, &b, &px, &py, &pz, &pl});
    const auto y = read<uint16_t>(dy, n), z = read<uint16_t>(dz, n);
    const auto less = read<int32_t>(dl, n);
    for (unsigned i = 0; i < n; ++i) {
        const float xv = ref_half_to_float(x[i]);
        const uint16_t v = ref_float_to_half(xv * 1.5f + 1.0f);  // rounded where stored, then += 0.5f
        ASSERT_EQ(y[i], ref_float_to_half(ref_half_to_float(v) + 0.5f)) << i;
        ASSERT_EQ(z[i], ref_float_to_bf16(-2.25f * xv)) << i;
        ASSERT_EQ(less[i], xv < 1.5f ? 1 : 0) << i;
    }
}

// ------------------------------------------------------------------------------------------ vectors and layout

TEST_P(DialectTypes, VectorOperatorsComponentWise) {
    if (!executes()) GTEST_SKIP() << "the fake CUDA driver runs no kernel code";
    rtModule_t m = load(kTypes);
    const unsigned n = 300;
    std::vector<F4> a(n), b(n);
    for (unsigned i = 0; i < n; ++i) {
        a[i] = {1.0f + i, 2.0f * i, -3.0f + i, 0.5f * i};
        b[i] = {2.0f, 1.0f + i, 4.0f + i, -1.0f - i};
    }
    DevBuf da, db, d4(n * 16), d3(n * 12), dd(n * 16), di(n * 16), du(n * 8), de(n * 4);
    upload(da, a);
    upload(db, b);
    void* p[] = {da.get(), db.get(), d4.get(), d3.get(), dd.get(), di.get(), du.get(), de.get()};
    run(fn(m, "vectors"), n, {&p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7]});
    const auto o4 = read<F4>(d4, n);
    const auto o3 = read<F3>(d3, n);
    const auto od = read<D2>(dd, n);
    const auto oi = read<I4>(di, n);
    const auto ou = read<uint32_t>(du, 2 * n);
    const auto eq = read<int32_t>(de, n);
    auto comp = [](float p, float q, float k) {
        float r = p * 2.0f + q - p / q;
        r -= k;
        r *= 0.5f;
        return -r + 3.0f * p;
    };
    for (unsigned i = 0; i < n; ++i) {
        const F4 &p4 = a[i], &q4 = b[i];
        EXPECT_EQ(o4[i].x, comp(p4.x, q4.x, 1.0f)) << i;
        EXPECT_EQ(o4[i].y, comp(p4.y, q4.y, 2.0f)) << i;
        EXPECT_EQ(o4[i].z, comp(p4.z, q4.z, 3.0f)) << i;
        EXPECT_EQ(o4[i].w, comp(p4.w, q4.w, 4.0f)) << i;
        EXPECT_EQ(o3[i].x, (p4.x + q4.w) / 2.0f);
        EXPECT_EQ(o3[i].y, (p4.y + q4.z) / 2.0f);
        EXPECT_EQ(o3[i].z, (p4.z + q4.y) / 2.0f);
        EXPECT_EQ(od[i].x, static_cast<double>(p4.x) * p4.x - 1.0);
        EXPECT_EQ(od[i].y, static_cast<double>(q4.x) * q4.x - 1.0);
        const int32_t ii = static_cast<int32_t>(i);
        EXPECT_EQ(oi[i].x, (ii * 3 - 1) / 2);
        EXPECT_EQ(oi[i].y, (-ii * 3 - 1) / 2);
        EXPECT_EQ(oi[i].z, (7 * 3 - 1) / 2);
        EXPECT_EQ(oi[i].w, (ii * ii * 3 - 1) / 2);
        EXPECT_EQ(ou[2 * i], i + i * i);
        EXPECT_EQ(ou[2 * i + 1], 30u);
        const bool differ = p4.x != q4.x || p4.y != q4.y || p4.z != q4.z || p4.w != q4.w;
        EXPECT_EQ(eq[i], 1 + (differ ? 2 : 0)) << i;
    }
}

// The cpu target leaves the vector and 16-bit types out of translation units that never name them; a name pasted
// together by a macro is still found.
constexpr const char* kPastedNames = R"rtsrc(
#define RT_VEC_(t, n) rt_##t##n
#define RT_SIXTEEN_(p) rt_##p##float16
RT_KERNEL void pasted(RT_VEC_(float, 2)* o, RT_SIXTEEN_(b)* h) {
    const size_t i = get_global_id(0);
    o[i] = rt_make_float2((float)i, 2.0f * (float)i);
    h[i] = RT_SIXTEEN_(b)((float)i);
}
)rtsrc";

TEST_P(DialectTypes, TypesNamedThroughTokenPastingAreThere) {
    if (!executes()) GTEST_SKIP() << "the fake CUDA driver runs no kernel code";
    rtModule_t m = load(kPastedNames);
    const unsigned n = 64;
    DevBuf o(n * 8), h(n * 2);
    void* p[] = {o.get(), h.get()};
    run(fn(m, "pasted"), n, {&p[0], &p[1]});
    const auto out = read<float>(o, 2 * n);
    const auto bits = read<uint16_t>(h, n);
    for (unsigned i = 0; i < n; ++i) {
        EXPECT_EQ(out[2 * i], static_cast<float>(i)) << i;
        EXPECT_EQ(out[2 * i + 1], 2.0f * static_cast<float>(i)) << i;
        uint32_t f = 0;
        const float v = static_cast<float>(i);
        std::memcpy(&f, &v, 4);
        EXPECT_EQ(bits[i], static_cast<uint16_t>(f >> 16)) << i;  // small integers are exact in bfloat16
    }
}

TEST_P(DialectTypes, LayoutsAreCudasAndKernelParametersOfAnyAlignmentArriveWhole) {
    if (!executes()) GTEST_SKIP() << "the fake CUDA driver runs no kernel code";
    rtModule_t m = load(kTypes);
    DevBuf dl(30 * 4);
    void* pl = dl.get();
    run(fn(m, "layouts"), 1, {&pl}, 1);
    const std::vector<uint32_t> want = {2, 2,  2, 2,  8, 8,  12, 4, 16, 16, 16, 16, 24, 8, 32, 16,
                                        8, 8,  12, 4, 16, 16, 8, 8,  12, 4,  16, 16, 32, 32};
    EXPECT_EQ(read<uint32_t>(dl, 30), want) << "sizeof/alignof of rt_half, rt_bfloat16, rt_float2/3/4, rt_double2/3/4, "
                                               "rt_int2/3/4, rt_uint2/3/4, an alignas(32) struct";

    rtFunction_t f = fn(m, "aligned");
    int count = 11;
    size_t sizes[11] = {};
    ASSERT_RT_OK(rtFunctionGetParamInfo(f, &count, sizes));
    ASSERT_EQ(count, 11);
    EXPECT_EQ(std::vector<size_t>(sizes, sizes + 11), (std::vector<size_t>{1, 32, 1, 12, 16, 32, 2, 16, 16, 1, 8}));
    int8_t pre = -5, mid = 9, post = 77;
    Big big{{1.25, -2.5, 1e300}, 123456};
    Big big2{{3.5, 0, -7.75}, -42};
    F3 f3{1.5f, -2.5f, 3.25f};
    D2 d2{1e-300, -4.5};
    uint16_t h = ref_float_to_half(-0.375f);
    F4 f4{10.0f, 0, 0, -20.0f};
    I4 i4{0, -7, 0, 1 << 30};
    DevBuf dout(20 * 8);
    void* po = dout.get();
    // The caller's values at odd addresses: no packer may rely on the alignment of what it is handed.
    alignas(64) unsigned char scratch[1024];
    size_t at = 1;
    auto odd = [&](const void* v, size_t n) {
        void* p = scratch + at;
        std::memcpy(p, v, n);
        at += n + (n % 2 == 0 ? 1 : 0);
        return p;
    };
    std::vector<void*> args = {odd(&pre, 1), odd(&big, 32), odd(&mid, 1), odd(&f3, 12), odd(&d2, 16), odd(&big2, 32),
                               odd(&h, 2),   odd(&f4, 16),  odd(&i4, 16), odd(&post, 1), &po};
    run(f, 1, args, 1);
    const std::vector<double> want_out = {-5, 1.25, -2.5, 1e300, 123456, 9, 1.5, -2.5, 3.25, 1e-300, -4.5,
                                          3.5, -7.75, -42, -0.375, 10, -20, -7, 1 << 30, 77};
    EXPECT_EQ(read<double>(dout, 20), want_out);

    // The C++ API's packer, with the host structs as they are.
    runtime::Module mod = runtime::Module::from_source(kTypes);
    runtime::Kernel k = mod.kernel("aligned");
    DevBuf dout2(20 * 8);
    double* po2 = reinterpret_cast<double*>(dout2.get());
    runtime::Stream s = runtime::Stream::default_stream();
    s.launch(k, {.grid = 1, .block = 1}, pre, big, mid, f3, d2, big2, h, f4, i4, post, po2);
    s.synchronize();
    EXPECT_EQ(read<double>(dout2, 20), want_out);
}

TEST_P(DialectTypes, LinearIdsAreXFastest) {
    if (!executes()) GTEST_SKIP() << "the fake CUDA driver runs no kernel code";
    rtModule_t m = load(kTypes);
    const rtDim3 grid = dim(3, 2, 2), block = dim(4, 3, 2);
    const unsigned n = 3 * 4 * 2 * 3 * 2 * 2;
    DevBuf d(n * 3 * 8);
    void* p = d.get();
    void* args[] = {&p};
    ASSERT_RT_OK(rtLaunchKernel(fn(m, "linear_ids"), grid, block, args, 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    const auto out = read<uint64_t>(d, n * 3);
    std::vector<char> seen(n, 0);
    for (unsigned gz = 0; gz < 2; ++gz)
        for (unsigned gy = 0; gy < 2; ++gy)
            for (unsigned gx = 0; gx < 3; ++gx)
                for (unsigned lz = 0; lz < 2; ++lz)
                    for (unsigned ly = 0; ly < 3; ++ly)
                        for (unsigned lx = 0; lx < 4; ++lx) {
                            const uint64_t x = gx * 4 + lx, y = gy * 3 + ly, z = gz * 2 + lz;
                            const uint64_t g = (z * 6 + y) * 12 + x;
                            ASSERT_LT(g, n);
                            EXPECT_EQ(out[3 * g], g);
                            EXPECT_EQ(out[3 * g + 1], (lz * 3 + ly) * 4 + lx) << g;
                            EXPECT_EQ(out[3 * g + 2], (gz * 2 + gy) * 3 + gx) << g;
                            ++seen[g];
                        }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(n));
}

// ------------------------------------------------------------------------------------------ atomics

TEST_P(DialectTypes, EveryAtomicUnderContentionGivesTheHostsResult) {
    if (!executes()) GTEST_SKIP() << "the fake CUDA driver runs no kernel code";
    rtModule_t m = load(kAtomics);
    const uint32_t n = 64 * 256 + 17;
    std::vector<int32_t> i32 = {100, 0, 0, 5000, 0, 0};
    std::vector<uint32_t> u32 = {0xffffffffu, 0, 0x12345678u, 0};
    std::vector<int64_t> i64 = {0, 0, -1};
    std::vector<uint64_t> u64 = {~0ull, 0, 0xfeedull, n, 0};
    std::vector<float> f32 = {0.0f, -1.0f};
    std::vector<double> f64 = {n * 0.5};
    DevBuf d32, du32, d64, du64, df32, df64, dinc(n * 4), ddec(n * 8);
    upload(d32, i32); upload(du32, u32); upload(d64, i64); upload(du64, u64); upload(df32, f32); upload(df64, f64);
    void* p[] = {d32.get(), du32.get(), d64.get(), du64.get(), df32.get(), df64.get(), dinc.get(), ddec.get()};
    uint32_t count = n;
    run(fn(m, "contend"), n, {&p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7], &count}, 256);
    // The host's result of the same operations in any order.
    int32_t add = 100, sub = 0, mn = 5000;
    int64_t sub64 = 0, mx = -1;
    uint32_t and32 = 0xffffffffu, or32 = 0, xor32 = 0x12345678u;
    uint64_t and64 = ~0ull, or64 = 0, xor64 = 0xfeedull;
    for (uint32_t i = 0; i < n; ++i) {
        add += static_cast<int32_t>(i % 7);
        sub -= static_cast<int32_t>(i % 5);
        sub64 -= i;
        and32 &= ~(1u << (i % 32)) | (i & 1u);
        or32 |= 1u << (i % 29);
        xor32 ^= static_cast<uint32_t>(i * 2654435761u);
        and64 &= ~(1ull << (i % 64));
        or64 |= 1ull << (i % 61);
        xor64 ^= static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
        mn = std::min(mn, static_cast<int32_t>(1000 - i));
        mx = std::max(mx, static_cast<int64_t>(i) * 3);
    }
    const auto r32 = read<int32_t>(d32, 6);
    const auto ru32 = read<uint32_t>(du32, 4);
    const auto r64 = read<int64_t>(d64, 3);
    const auto ru64 = read<uint64_t>(du64, 5);
    const auto rf32 = read<float>(df32, 2);
    const auto rf64 = read<double>(df64, 1);
    EXPECT_EQ(r32[0], add);
    EXPECT_EQ(r32[1], sub);
    EXPECT_EQ(r32[2], static_cast<int32_t>(n)) << "atomic_inc with the default order";
    EXPECT_EQ(r32[3], mn);
    EXPECT_GE(r32[4], 1);
    EXPECT_LE(r32[4], static_cast<int32_t>(n));
    EXPECT_EQ(r32[5], 1) << "exactly one item's compare-and-swap of 0 succeeds";
    EXPECT_EQ(ru32[0], and32);
    EXPECT_EQ(ru32[1], or32);
    EXPECT_EQ(ru32[2], xor32);
    EXPECT_EQ(ru32[3], n);
    EXPECT_EQ(r64[0], sub64);
    EXPECT_EQ(r64[1], -static_cast<int64_t>(n)) << "atomic_dec with the default order";
    EXPECT_EQ(r64[2], mx);
    EXPECT_EQ(ru64[0], and64);
    EXPECT_EQ(ru64[1], or64);
    EXPECT_EQ(ru64[2], xor64);
    EXPECT_EQ(ru64[3], 0u);
    EXPECT_LT(ru64[4], n);
    EXPECT_EQ(rf32[0], static_cast<float>(n));
    EXPECT_EQ(rf32[1], static_cast<float>(n - 1) * 0.25f);
    EXPECT_EQ(rf64[0], 0.0);
    // atomic_inc/atomic_dec return the old value: every value in between exactly once.
    auto inc = read<uint32_t>(dinc, n);
    auto dec = read<uint64_t>(ddec, n);
    std::sort(inc.begin(), inc.end());
    std::sort(dec.begin(), dec.end());
    for (uint32_t i = 0; i < n; ++i) {
        ASSERT_EQ(inc[i], i);
        ASSERT_EQ(dec[i], i + 1u);
    }
}

// ------------------------------------------------------------------------------------------ printf

/// stdout of the process, redirected to a file while `body` runs; what was written.
std::string capture_stdout(const std::function<void()>& body) {
    char path[] = "/tmp/rt-test-printf-XXXXXX";
    const int fd = ::mkstemp(path);
    EXPECT_GE(fd, 0);
    std::fflush(stdout);
    const int saved = ::dup(1);
    ::dup2(fd, 1);
    body();
    std::fflush(stdout);
    ::dup2(saved, 1);
    ::close(saved);
    ::close(fd);
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    ::unlink(path);
    return ss.str();
}

TEST_P(DialectTypes, PrintfWritesEachCallWholeInProgramOrderPerItem) {
    if (!executes()) GTEST_SKIP() << "the fake CUDA driver runs no kernel code";
    rtModule_t m = load(kPrintf);
    rtFunction_t f = fn(m, "talk");
    const unsigned n = 4 * 64;
    const std::string out = capture_stdout([&] {
        int32_t tag = 42;
        double x = 0.5;
        void* args[] = {&tag, &x};
        EXPECT_RT_OK(rtLaunchKernel(f, dim(4), dim(64), args, 0, nullptr));
        EXPECT_RT_OK(rtStreamSynchronize(nullptr));
    });
    std::istringstream lines(out);
    std::string line;
    std::map<int, int> first_at, second_at;
    int index = 0;
    while (std::getline(lines, line)) {
        int i = -1, tag = 0;
        unsigned three = 0;
        char value[64] = {}, text[16] = {};
        if (std::sscanf(line.c_str(), "first %d of tag %d: %63[^|]|%15s", &i, &tag, value, text) == 4) {
            ASSERT_EQ(tag, 42) << line;
            char want[64];
            std::snprintf(want, sizeof want, "%.3f", 0.5 * i);
            ASSERT_EQ(std::string(value), want) << line;
            ASSERT_EQ(std::string(text), "text") << line;
            ASSERT_TRUE(first_at.emplace(i, index).second) << "printed twice: " << line;
        } else if (std::sscanf(line.c_str(), "second %d %u", &i, &three) == 2) {
            ASSERT_EQ(three, 3u * static_cast<unsigned>(i)) << line;
            ASSERT_TRUE(second_at.emplace(i, index).second) << "printed twice: " << line;
        } else {
            FAIL() << "a line that no call printed whole: '" << line << "'";
        }
        ++index;
    }
    ASSERT_EQ(first_at.size(), n);
    ASSERT_EQ(second_at.size(), n);
    for (const auto& [i, at] : first_at) EXPECT_LT(at, second_at[i]) << "item " << i << " printed out of order";
}

// ------------------------------------------------------------------------------------------ module globals

TEST_P(DialectTypes, GlobalsAreReadAndWrittenFromTheHostAndSeenByKernels) {
    rtModule_t m = load(kGlobals);
    void* p_scale = nullptr;
    size_t bytes = 0;
    ASSERT_RT_OK(rtModuleGetGlobal(&p_scale, &bytes, m, "scale"));
    EXPECT_EQ(bytes, 4u);
    void* p_table = nullptr;
    ASSERT_RT_OK(rtModuleGetGlobal(&p_table, &bytes, m, "table"));
    EXPECT_EQ(bytes, 16u);
    void* p_counter = nullptr;
    ASSERT_RT_OK(rtModuleGetGlobal(&p_counter, nullptr, m, "counter"));
    void* again = nullptr;
    ASSERT_RT_OK(rtModuleGetGlobal(&again, &bytes, m, "scale"));
    EXPECT_EQ(again, p_scale);
    rtMemStats stats{};
    ASSERT_RT_OK(rtMemGetStats(&stats));
    EXPECT_EQ(stats.num_live_allocations, 0u) << "a module global is not an allocation";

    // Host writes (sync and async copies, a memset), read back.
    const float three = 3.0f;
    ASSERT_RT_OK(rtMemcpy(p_scale, &three, 4, RT_MEMCPY_HOST_TO_DEVICE));
    const int32_t table[4] = {10, 20, 30, 4};
    ASSERT_RT_OK(rtMemcpyAsync(p_table, table, sizeof table, RT_MEMCPY_DEFAULT, nullptr));
    ASSERT_RT_OK(rtMemsetAsync(p_counter, 0, 8, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    float back = 0;
    ASSERT_RT_OK(rtMemcpy(&back, p_scale, 4, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(back, 3.0f);
    DevBuf copy(16);
    ASSERT_RT_OK(rtMemcpy(copy.get(), p_table, 16, RT_MEMCPY_DEVICE_TO_DEVICE));
    int32_t table_back[4] = {};
    ASSERT_RT_OK(rtMemcpy(table_back, copy.get(), 16, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(std::vector<int32_t>(table_back, table_back + 4), (std::vector<int32_t>{10, 20, 30, 4}));
    // A copy past the variable's end is refused like one past an allocation's.
    char big[32] = {};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy(p_scale, big, 8, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_TRUE(contains(last_message(), "module global")) << last_message();
    if (!executes()) return;

    // The kernels see the host's values, and the host sees theirs.
    const unsigned n = 512;
    DevBuf dout(n * 4);
    void* po = dout.get();
    run(fn(m, "use_globals"), n, {&po});
    const auto out = read<float>(dout, n);
    for (unsigned i = 0; i < n; ++i) ASSERT_EQ(out[i], static_cast<float>(table[i % 4]) * 3.0f + 0.5f - 0.5f) << i;
    unsigned long long counter = 0;
    ASSERT_RT_OK(rtMemcpy(&counter, p_counter, 8, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(counter, n);
    void* p_written = nullptr;
    ASSERT_RT_OK(rtModuleGetGlobal(&p_written, &bytes, m, "written"));
    int32_t written = 0;
    ASSERT_RT_OK(rtMemcpy(&written, p_written, 4, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(written, 40);
    // Initial values come from the source (a fresh module: other options).
    rtModule_t fresh = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&fresh, kGlobals, "-DFRESH=1"));
    modules_.push_back(fresh);
    void* p = nullptr;
    ASSERT_RT_OK(rtModuleGetGlobal(&p, nullptr, fresh, "offset"));
    float offset[2] = {};
    ASSERT_RT_OK(rtMemcpy(offset, p, 8, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(offset[0], 0.5f);
    EXPECT_EQ(offset[1], -0.5f);
    ASSERT_RT_OK(rtModuleGetGlobal(&p, nullptr, fresh, "scale"));
    ASSERT_RT_OK(rtMemcpy(&back, p, 4, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(back, 2.0f);
    ASSERT_RT_OK(rtModuleGetGlobal(&p, &bytes, fresh, "half_one"));
    EXPECT_EQ(bytes, 2u);
    uint16_t one = 0;
    ASSERT_RT_OK(rtMemcpy(&one, p, 2, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(one, 0x3c00);
}

TEST_P(DialectTypes, GlobalErrorsNameWhatIsWrong) {
    rtModule_t m = load(kGlobals);
    void* p = nullptr;
    size_t bytes = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleGetGlobal(&p, &bytes, m, "scal"));
    EXPECT_TRUE(contains(last_message(), "no global named 'scal'")) << last_message();
    EXPECT_TRUE(contains(last_message(), "scale, table, counter, offset, written")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleGetGlobal(&p, &bytes, m, "rt_cuda_fault_record_"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleGetGlobal(&p, &bytes, m, nullptr));
    EXPECT_TRUE(contains(last_message(), "name is NULL")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleGetGlobal(nullptr, &bytes, m, "scale"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleGetGlobal(&p, &bytes, nullptr, "scale"));
    rtModule_t none = load("RT_KERNEL void k(int* o) { o[0] = 1; }");
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleGetGlobal(&p, &bytes, none, "scale"));
    EXPECT_TRUE(contains(last_message(), "it declares no RT_GLOBAL variable")) << last_message();

    // Not freeable; after unload, neither found nor device memory.
    ASSERT_RT_OK(rtModuleGetGlobal(&p, &bytes, m, "scale"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(p));
    EXPECT_TRUE(contains(last_message(), "a module global of")) << last_message();
    // A second handle of the same source shares the module and its globals: the address stays device memory
    // until both are unloaded.
    rtModule_t twin = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&twin, kGlobals, nullptr));
    void* q = nullptr;
    ASSERT_RT_OK(rtModuleGetGlobal(&q, nullptr, twin, "scale"));
    EXPECT_EQ(q, p);
    modules_.erase(std::find(modules_.begin(), modules_.end(), m));
    ASSERT_RT_OK(rtModuleUnload(m));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleGetGlobal(&p, &bytes, m, "scale"));
    const float v = 1.0f;
    EXPECT_RT_OK(rtMemcpy(q, &v, 4, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtModuleUnload(twin));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy(q, &v, 4, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_TRUE(contains(last_message(), "needs a device destination")) << last_message();

    // The C++ API throws the same error.
    runtime::Module cm = runtime::Module::from_source(kGlobals);
    EXPECT_EQ(cm.global("table").bytes, 16u);
    try {
        cm.global("nope");
        ADD_FAILURE() << "no exception";
    } catch (const runtime::Error& e) {
        EXPECT_EQ(e.code(), RT_ERROR_INVALID_VALUE);
        EXPECT_TRUE(contains(e.what(), "no global named 'nope'")) << e.what();
    }
}

// ------------------------------------------------------------------------------------------ templates

TEST_P(DialectTypes, KernelTemplatesAreLaunchedByTheirInstantiationsNames) {
    rtModule_t m = load(kTemplates);
    rtFunction_t f32 = fn(m, "axpy_f32"), f64 = fn(m, "axpy_f64"), i64 = fn(m, "axpy_i64"), fill3 = fn(m, "fill3");
    int count = 3;
    size_t sizes[3] = {};
    ASSERT_RT_OK(rtFunctionGetParamInfo(f64, &count, sizes));
    EXPECT_EQ(count, 3);
    EXPECT_EQ(sizes[0], 8u);
    ASSERT_RT_OK(rtFunctionGetParamInfo(f32, &count, sizes));
    EXPECT_EQ(sizes[0], 4u);
    rtFunction_t f = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_NOT_FOUND, rtModuleGetFunction(&f, m, "axpy"));
    EXPECT_TRUE(contains(last_message(), "axpy_f32")) << last_message();
    EXPECT_TRUE(contains(last_message(), "fill3")) << last_message();
    if (!executes()) return;
    const unsigned n = 333;  // not a whole number of groups: the exact global size holds for instantiations too
    std::vector<float> x(n), y(n);
    std::vector<double> xd(n), yd(n);
    std::vector<int64_t> xi(n), yi(n);
    for (unsigned i = 0; i < n; ++i) {
        x[i] = 0.5f * i, y[i] = 1.0f;
        xd[i] = 0.25 * i, yd[i] = -1.0;
        xi[i] = i, yi[i] = 1000;
    }
    DevBuf dx, dy, dxd, dyd, dxi, dyi, dfill((n + 64) * 4);
    upload(dx, x); upload(dy, y); upload(dxd, xd); upload(dyd, yd); upload(dxi, xi); upload(dyi, yi);
    float a = 2.0f;
    double ad = 4.0;
    int64_t ai = -3;
    void* p[] = {dx.get(), dy.get(), dxd.get(), dyd.get(), dxi.get(), dyi.get(), dfill.get()};
    run(f32, n, {&a, &p[0], &p[1]});
    run(f64, n, {&ad, &p[2], &p[3]});
    run(i64, n, {&ai, &p[4], &p[5]});
    ASSERT_RT_OK(rtMemset(dfill.get(), 0xff, (n + 64) * 4));
    run(fill3, n, {&p[6]});
    const auto ry = read<float>(dy, n);
    const auto ryd = read<double>(dyd, n);
    const auto ryi = read<int64_t>(dyi, n);
    const auto rf = read<int32_t>(dfill, n + 64);
    for (unsigned i = 0; i < n; ++i) {
        ASSERT_EQ(ry[i], 2.0f * (0.5f * i) + 1.0f);
        ASSERT_EQ(ryd[i], 4.0 * (0.25 * i) - 1.0);
        ASSERT_EQ(ryi[i], -3 * static_cast<int64_t>(i) + 1000);
        ASSERT_EQ(rf[i], 3 * static_cast<int32_t>(i));
    }
    for (unsigned i = n; i < n + 64; ++i) ASSERT_EQ(rf[i], -1) << "item " << i << " past the global size ran";

    // Local memory sized by the template's parameter, a barrier between the items of each group.
    std::vector<int32_t> vi(256);
    std::vector<double> vd(256);
    for (unsigned i = 0; i < 256; ++i) vi[i] = static_cast<int32_t>(i * i), vd[i] = 0.5 * i;
    DevBuf dvi, dvd, dsi(16), dsd(32);
    upload(dvi, vi);
    upload(dvd, vd);
    void* q[] = {dvi.get(), dsi.get(), dvd.get(), dsd.get()};
    run(fn(m, "block_sum_i32"), 256, {&q[0], &q[1]}, 64);
    run(fn(m, "block_sum_f64"), 256, {&q[2], &q[3]}, 64);
    const auto si = read<int32_t>(dsi, 4);
    const auto sd = read<double>(dsd, 4);
    for (unsigned g = 0; g < 4; ++g) {
        int32_t want_i = 0;
        double want_d = 0;
        for (unsigned i = g * 64; i < g * 64 + 64; ++i) want_i += vi[i], want_d += vd[i];
        EXPECT_EQ(si[g], want_i) << g;
        EXPECT_EQ(sd[g], want_d) << g;
    }
}

// ------------------------------------------------------------------------------------------ refusals

struct Refusal {
    const char* source;
    const char* message;
};

TEST_P(DialectTypes, TheFrontEndRefusesMisusedGlobalsAndInstantiations) {
    // Each source says it is meant to fail, so test_cuda_compiler does not count it as a broken kernel.
    const Refusal cases[] = {
        {"// RT_TEST_EXPECT_COMPILE_ERROR\ntemplate <class T> RT_KERNEL void t(T* o) { o[0] = 1; }\n"
         "RT_KERNEL_INSTANTIATE(t_f, tt<float>);\n",
         "'tt' is not a kernel template of the source (its kernel templates: t)"},
        {"// RT_TEST_EXPECT_COMPILE_ERROR\ntemplate <class T> RT_KERNEL void t(T* o) { o[0] = 1; }\n"
         "RT_KERNEL void k(int* o) { o[0] = 1; }\nRT_KERNEL_INSTANTIATE(k, t<int>);\n",
         "the kernel name 'k' is already taken"},
        {"// RT_TEST_EXPECT_COMPILE_ERROR\ntemplate <class T> RT_KERNEL void t(T* o) { o[0] = 1; }\n"
         "RT_KERNEL_INSTANTIATE(a, t<int>);\nRT_KERNEL_INSTANTIATE(a, t<float>);\n",
         "the kernel name 'a' is already taken"},
        {"// RT_TEST_EXPECT_COMPILE_ERROR\ntemplate <class T> RT_KERNEL void t(T* o) { o[0] = 1; }\n",
         "its kernel templates (t) are never instantiated"},
        {"// RT_TEST_EXPECT_COMPILE_ERROR\ntemplate <class T> RT_KERNEL void t(T* o) { o[0] = 1; }\n"
         "RT_KERNEL_INSTANTIATE(t_f, t);\n",
         "'t' is not a template with its arguments"},
        {"// RT_TEST_EXPECT_COMPILE_ERROR\ntemplate <class T> RT_KERNEL void t(T* o) { o[0] = 1; }\n"
         "RT_KERNEL_INSTANTIATE(2x, t<int>);\n",
         "the name '2x' is not an identifier"},
        {"// RT_TEST_EXPECT_COMPILE_ERROR\nRT_GLOBAL const float c = 1.0f;\nRT_KERNEL void k(float* o) { o[0] = c; }\n",
         "RT_GLOBAL at line 2: 'c' is const"},
        {"// RT_TEST_EXPECT_COMPILE_ERROR\nRT_GLOBAL int a, b;\nRT_KERNEL void k(int* o) { o[0] = a + b; }\n",
         "it declares several variables"},
        {"// RT_TEST_EXPECT_COMPILE_ERROR\nRT_KERNEL void k(int* o) {\n    RT_GLOBAL int inner = 1;\n    o[0] = inner;\n}\n",
         "RT_GLOBAL at line 3: it is not at file scope"},
        {"// RT_TEST_EXPECT_COMPILE_ERROR\nRT_GLOBAL int rt_mine;\nRT_KERNEL void k(int* o) { o[0] = rt_mine; }\n",
         "starts with rt_"},
    };
    for (const Refusal& c : cases) {
        SCOPED_TRACE(c.source);
        rtModule_t m = nullptr;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadSource(&m, c.source, nullptr));
        EXPECT_TRUE(contains(last_message(), c.message)) << last_message();
    }
    // A template instantiated with a type the kernel cannot take fails in the compiler, with its diagnostics.
    rtModule_t m = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_COMPILE_FAILED,
                    rtModuleLoadSource(&m,
                                       "// RT_TEST_EXPECT_COMPILE_ERROR\nstruct S { int v; };\n"
                                       "template <class T> RT_KERNEL void t(T* o) { o[0] = o[0] * 2; }\n"
                                       "RT_KERNEL_INSTANTIATE(t_s, t<S>);\n",
                                       nullptr));
}

RT_INSTANTIATE_DEVICE_TEST(DialectTypes);

}  // namespace
