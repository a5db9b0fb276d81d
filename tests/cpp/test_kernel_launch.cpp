// test_kernel_launch.cpp — rtLaunchKernel / rtLaunchKernelEx on every device: built-ins, argument passing, stream order, atomics, faults, limits.
#include "test_util.hpp"

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <random>

using namespace rt_test;

namespace {

/// The kernels of these tests, one module. Mixed must match the host struct of the same name.
const char* const kSource = R"rtsrc(
struct Mixed { int8_t a; double b; int16_t c; float d; uint8_t e; int64_t f; bool g; };

// Every built-in of every work-item: 18 values per item at its linear global index; hits counts runs.
RT_KERNEL void ids(uint64_t* out, uint32_t* hits) {
    size_t lin = (get_global_id(2) * get_global_size(1) + get_global_id(1)) * get_global_size(0) + get_global_id(0);
    uint64_t* o = out + lin * 18;
    for (unsigned d = 0; d < 3; ++d) {
        o[d * 6 + 0] = get_global_id(d);
        o[d * 6 + 1] = get_local_id(d);
        o[d * 6 + 2] = get_group_id(d);
        o[d * 6 + 3] = get_global_size(d);
        o[d * 6 + 4] = get_local_size(d);
        o[d * 6 + 5] = get_num_groups(d);
    }
    atomic_add(&hits[lin], 1u);
}

RT_KERNEL void guarded(float* out, int32_t n, float scale) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) out[i] = (float)i * scale;
}

RT_KERNEL void guarded2d(int32_t* out, int32_t w, int32_t h) {
    size_t x = get_global_id(0), y = get_global_id(1);
    if (x < (size_t)w && y < (size_t)h) out[y * w + x] = (int32_t)(y * 1000 + x);
}

RT_KERNEL void scalars(int8_t a, int16_t b, int32_t c, int64_t d, uint8_t e, uint16_t f, uint32_t g, uint64_t h,
                       float fl, double db, bool bo, const int32_t* ptr, int64_t* out) {
    if (get_global_id(0) != 0) return;
    out[0] = a; out[1] = b; out[2] = c; out[3] = d;
    out[4] = e; out[5] = f; out[6] = g; out[7] = (int64_t)h;
    uint32_t fbits; __builtin_memcpy(&fbits, &fl, 4); out[8] = fbits;
    int64_t dbits; __builtin_memcpy(&dbits, &db, 8); out[9] = dbits;
    out[10] = bo ? 1 : 0;
    out[11] = ptr[0];
    out[12] = (int64_t)(uint64_t)ptr;
    out[13] = (int64_t)((uint64_t)(int64_t)a + (uint64_t)(int64_t)b + (uint64_t)(int64_t)c + (uint64_t)d);  // sign-extended, wrapping
    out[14] = (int64_t)(e + f + g);
}

RT_KERNEL void by_struct(int8_t pre, Mixed m, int8_t post, Mixed* out, int64_t* sides, int32_t n) {
    size_t i = get_global_id(0);
    if (i >= (size_t)n) return;
    out[i].a = m.a; out[i].b = m.b; out[i].c = m.c; out[i].d = m.d; out[i].e = m.e; out[i].f = m.f; out[i].g = m.g;
    sides[2 * i] = pre;
    sides[2 * i + 1] = post;
}

RT_KERNEL void store_args(int64_t v, Mixed m, int64_t* out) {
    out[0] = v;
    out[1] = m.f;
    out[2] = m.a;
}

RT_KERNEL void scale(const float* in, float* out, int32_t n, float factor) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) out[i] = in[i] * factor;
}

RT_KERNEL void fill_seq(float* out, int32_t n, float base) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) out[i] = base + (float)i;
}

// The seed's kernel.
RT_KERNEL void seed_double(const float* input, float* output, int32_t n) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) output[i] = input[i] * 2;
}

RT_KERNEL void atomics(int32_t* ci, int64_t* cl, float* cf, int32_t* mn, int32_t* mx, int64_t* mn64, int64_t* mx64,
                       float* fmx, int32_t* cas_counter, int32_t* xchg, int32_t* prev, int32_t n) {
    int32_t i = (int32_t)get_global_id(0);
    if (i >= n) return;
    atomic_add(ci, 1);
    atomic_add(cl, (int64_t)i);
    atomic_add(cf, 1.0f);
    int32_t v = (int32_t)(((int64_t)i * 7919) % n) - n / 2;
    atomic_min(mn, v);
    atomic_max(mx, v);
    atomic_min(mn64, (int64_t)v * 3000000000LL);
    atomic_max(mx64, (int64_t)v * 3000000000LL);
    atomic_max(fmx, (float)v * 0.5f);
    int32_t old = *(volatile int32_t*)cas_counter;
    for (;;) {
        int32_t seen = atomic_cas(cas_counter, old, old + 1);
        if (seen == old) break;
        old = seen;
    }
    prev[i] = atomic_exchange(xchg, i + 1);
}

RT_KERNEL void assert_kernel(const int32_t* data, int32_t n) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) rt_assert(data[i] != 12345);
}

RT_KERNEL void null_write(int32_t* p, int32_t v) {
    if (get_global_id(0) == 0) p[0] = v;
}

RT_KERNEL void int_div(int32_t* out, int32_t a, int32_t b) {
    out[get_global_id(0)] = a / b;
}

RT_KERNEL void empty() {}

// Counts the runs of each work-item of an exact-global-size launch (gx x gy x gz items, no bounds test: no backend
// runs the items past it). Item (0,0,0) sets bounded[0].
RT_KERNEL void count_items(int32_t* hits, int32_t* bounded, uint64_t gx, uint64_t gy, uint64_t gz) {
    if (get_global_id(0) + get_global_id(1) + get_global_id(2) == 0) bounded[0] = 1;
    atomic_add(&hits[(get_global_id(2) * gy + get_global_id(1)) * gx + get_global_id(0)], 1);
}

RT_KERNEL void bump(int32_t* counter) { *counter += 1; }
)rtsrc";

struct Mixed {
    int8_t a;
    double b;
    int16_t c;
    float d;
    uint8_t e;
    int64_t f;
    bool g;
};

RT_TEST_TEMP_CACHE_DIR("kernel-launch");

constexpr rtDim3 dim(unsigned x, unsigned y = 1, unsigned z = 1) { return rtDim3{x, y, z}; }

class KernelLaunch : public DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        if (HasFatalFailure()) return;
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kSource, nullptr));
        ASSERT_RT_OK(rtGetDeviceProperties(&prop_, device()));
    }
    void TearDown() override {
        if (module_) {
            EXPECT_RT_OK(rtModuleUnload(module_));
        }
    }
    rtFunction_t fn(const char* name) {
        rtFunction_t f = nullptr;
        EXPECT_RT_OK(rtModuleGetFunction(&f, module_, name)) << name;
        return f;
    }
    template <class T>
    std::vector<T> read(const DevBuf& d, size_t count) {
        std::vector<T> v(count);
        EXPECT_RT_OK(rtMemcpy(v.data(), d.get(), count * sizeof(T), RT_MEMCPY_DEVICE_TO_HOST));
        return v;
    }

    rtModule_t module_ = nullptr;
    rtDeviceProp prop_{};
};

// ------------------------------------------------------------------------------------------ shapes and built-ins

TEST_P(KernelLaunch, BuiltinsOfEveryWorkItemIn1D2D3D) {
    rtFunction_t ids = fn("ids");
    const rtDim3 shapes[][2] = {
        {dim(37), dim(64)},          {dim(1), dim(1)},          {dim(1), dim(1024)},       {dim(300), dim(1)},
        {dim(5, 7), dim(8, 4)},      {dim(1, 9), dim(16, 3)},   {dim(3, 4, 5), dim(4, 2, 3)},
        {dim(2, 2, 2), dim(1, 1, 64)}, {dim(2, 3, 4), dim(1, 1, 1)}, {dim(1, 1, 7), dim(5, 5, 5)},
    };
    for (auto& s : shapes) {
        const rtDim3 g = s[0], b = s[1];
        SCOPED_TRACE(testing::Message() << "grid " << g.x << "x" << g.y << "x" << g.z << " block " << b.x << "x" << b.y
                                        << "x" << b.z);
        const size_t gs[3] = {size_t(g.x) * b.x, size_t(g.y) * b.y, size_t(g.z) * b.z};
        const size_t items = gs[0] * gs[1] * gs[2];
        DevBuf out(items * 18 * sizeof(uint64_t)), hits(items * sizeof(uint32_t));
        ASSERT_RT_OK(rtMemset(out.get(), 0xFF, out.size()));
        ASSERT_RT_OK(rtMemset(hits.get(), 0, hits.size()));
        void* po = out.get();
        void* ph = hits.get();
        void* args[] = {&po, &ph};
        ASSERT_RT_OK(rtLaunchKernel(ids, g, b, args, 0, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        auto o = read<uint64_t>(out, items * 18);
        auto h = read<uint32_t>(hits, items);
        const size_t grid[3] = {g.x, g.y, g.z}, block[3] = {b.x, b.y, b.z};
        size_t bad = 0;
        for (size_t gz = 0; gz < grid[2]; ++gz)
            for (size_t gy = 0; gy < grid[1]; ++gy)
                for (size_t gx = 0; gx < grid[0]; ++gx)
                    for (size_t lz = 0; lz < block[2]; ++lz)
                        for (size_t ly = 0; ly < block[1]; ++ly)
                            for (size_t lx = 0; lx < block[0]; ++lx) {
                                const size_t group[3] = {gx, gy, gz}, local[3] = {lx, ly, lz};
                                size_t gid[3];
                                for (int d = 0; d < 3; ++d) gid[d] = group[d] * block[d] + local[d];
                                size_t lin = (gid[2] * gs[1] + gid[1]) * gs[0] + gid[0];
                                if (h[lin] != 1 && bad++ < 5)
                                    ADD_FAILURE() << "item (" << gid[0] << "," << gid[1] << "," << gid[2] << ") ran "
                                                  << h[lin] << " times";
                                for (int d = 0; d < 3; ++d) {
                                    const uint64_t expected[6] = {gid[d], local[d], group[d], gs[d], block[d], grid[d]};
                                    static const char* const what[6] = {"global_id", "local_id", "group_id",
                                                                        "global_size", "local_size", "num_groups"};
                                    for (int k = 0; k < 6; ++k)
                                        if (o[lin * 18 + d * 6 + k] != expected[k] && bad++ < 5)
                                            ADD_FAILURE() << "item (" << gid[0] << "," << gid[1] << "," << gid[2]
                                                          << "): get_" << what[k] << "(" << d << ") = "
                                                          << o[lin * 18 + d * 6 + k] << ", expected " << expected[k];
                                }
                            }
        EXPECT_EQ(bad, 0u);
    }
}

TEST_P(KernelLaunch, NonMultipleSizesWithAGuard) {
    rtFunction_t guarded = fn("guarded");
    const int32_t sizes[] = {1, 127, 128, 129, 1000, 4097};
    for (int32_t n : sizes) {
        const unsigned block = 128, groups = (static_cast<unsigned>(n) + block - 1) / block;
        const size_t cap = size_t(groups) * block + 64;
        DevBuf out(cap * sizeof(float));
        std::vector<float> sentinel(cap, -7.5f);
        ASSERT_RT_OK(rtMemcpy(out.get(), sentinel.data(), out.size(), RT_MEMCPY_HOST_TO_DEVICE));
        void* p = out.get();
        float scale = 0.5f;
        void* args[] = {&p, &n, &scale};
        ASSERT_RT_OK(rtLaunchKernel(guarded, dim(groups), dim(block), args, 0, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        auto v = read<float>(out, cap);
        for (size_t i = 0; i < cap; ++i) {
            float expected = i < static_cast<size_t>(n) ? static_cast<float>(i) * scale : -7.5f;
            ASSERT_EQ(v[i], expected) << "n = " << n << ", index " << i;
        }
    }
    // 2-D: a 37 x 23 image over 16 x 16 blocks; the rest of the buffer is untouched.
    rtFunction_t g2 = fn("guarded2d");
    int32_t w = 37, h = 23;
    const size_t cap = 48 * 32 + 16;
    DevBuf out(cap * sizeof(int32_t));
    ASSERT_RT_OK(rtMemset(out.get(), 0xEE, out.size()));
    void* p = out.get();
    void* args[] = {&p, &w, &h};
    ASSERT_RT_OK(rtLaunchKernel(g2, dim(3, 2), dim(16, 16), args, 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    auto v = read<int32_t>(out, cap);
    int32_t untouched;
    std::memset(&untouched, 0xEE, sizeof untouched);
    for (size_t i = 0; i < cap; ++i) {
        int32_t expected = i < size_t(w) * h ? static_cast<int32_t>((i / w) * 1000 + i % w) : untouched;
        ASSERT_EQ(v[i], expected) << "index " << i;
    }
}

TEST_P(KernelLaunch, ExactGlobalSizeRunsEachItemOnce) {
    rtFunction_t f = fn("count_items");
    struct Case {
        unsigned long long g[3];
        unsigned b[3];
    };
    const Case cases[] = {{{1000, 1, 1}, {256, 1, 1}}, {{1, 1, 1}, {128, 1, 1}},   {{257, 1, 1}, {256, 1, 1}},
                          {{37, 23, 1}, {16, 16, 1}},  {{5, 7, 3}, {4, 2, 2}},     {{64, 3, 9}, {64, 1, 4}}};
    for (const Case& c : cases) {
        const size_t items = c.g[0] * c.g[1] * c.g[2];
        const size_t cap = items + 1024;  // room past the end: a run past the global size would land there
        DevBuf hits(cap * sizeof(int32_t)), bounded(sizeof(int32_t));
        ASSERT_RT_OK(rtMemset(hits.get(), 0, hits.size()));
        ASSERT_RT_OK(rtMemset(bounded.get(), 0xFF, bounded.size()));
        void* ph = hits.get();
        void* pb = bounded.get();
        uint64_t gx = c.g[0], gy = c.g[1], gz = c.g[2];
        void* args[] = {&ph, &pb, &gx, &gy, &gz};
        rtDim3 grid{}, block{c.b[0], c.b[1], c.b[2]};
        unsigned* gd[3] = {&grid.x, &grid.y, &grid.z};
        for (int d = 0; d < 3; ++d) *gd[d] = static_cast<unsigned>((c.g[d] + c.b[d] - 1) / c.b[d]);
        ASSERT_RT_OK(launch_ex(f, grid, block, args, 5, nullptr, 0, nullptr, c.g[0], c.g[1], c.g[2]))
            << c.g[0] << " x " << c.g[1] << " x " << c.g[2];
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        auto h = read<int32_t>(hits, cap);
        for (size_t i = 0; i < cap; ++i)
            ASSERT_EQ(h[i], i < items ? 1 : 0) << "item " << i << " of " << c.g[0] << " x " << c.g[1] << " x " << c.g[2];
        auto b = read<int32_t>(bounded, 1);
        EXPECT_EQ(b[0], 1) << "item (0,0,0) ran";
    }
}

TEST_P(KernelLaunch, ExactGlobalSizeOutsideTheGridIsRefused) {
    rtFunction_t e = fn("empty");
    // grid 4 x 256 holds 769..1024 items; 0 means all of them.
    for (unsigned long long g : {768ull, 1025ull, 1ull, 5000ull}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(e, dim(4), dim(256), nullptr, 0, nullptr, 0, nullptr, g))
            << "global " << g;
        EXPECT_TRUE(contains(last_message(), "global.x = " + std::to_string(g))) << last_message();
        EXPECT_TRUE(contains(last_message(), "769..1024")) << last_message();
    }
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(e, dim(1, 2), dim(1, 8), nullptr, 0, nullptr, 0, nullptr, 1, 17));
    EXPECT_TRUE(contains(last_message(), "global.y")) << last_message();
    for (unsigned long long g : {769ull, 1000ull, 1024ull, 0ull})
        EXPECT_RT_OK(launch_ex(e, dim(4), dim(256), nullptr, 0, nullptr, 0, nullptr, g)) << "global " << g;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchKernelEx(e, nullptr, nullptr));
    EXPECT_TRUE(contains(last_message(), "config is NULL")) << last_message();
    EXPECT_RT_OK(rtStreamSynchronize(nullptr)) << "refused launches leave no error behind";
}

// ------------------------------------------------------------------------------------------ rtLaunchConfig's size

/// A config followed by room for the fields of a later, larger rtLaunchConfig (what a newer header would give).
struct GrownConfig {
    rtLaunchConfig c;
    unsigned char later[40];
};

TEST_P(KernelLaunch, LaunchConfigInitSetsTheSizeAndZeroesTheRest) {
    const rtLaunchConfig c = RT_LAUNCH_CONFIG_INIT;
    EXPECT_EQ(c.size, sizeof(rtLaunchConfig));
    EXPECT_EQ(c.grid.x | c.grid.y | c.grid.z | c.block.x | c.block.y | c.block.z, 0u);
    EXPECT_EQ(c.shared_bytes, 0u);
    EXPECT_EQ(c.stream, nullptr);
    EXPECT_EQ(c.num_args, 0);
    EXPECT_EQ(c.arg_sizes, nullptr);
    EXPECT_EQ(c.global[0] | c.global[1] | c.global[2], 0ull);
    EXPECT_EQ(offsetof(rtLaunchConfig, size), 0u) << "the size leads, so every version finds it";
}

TEST_P(KernelLaunch, LaunchConfigSizeGovernsWhatIsRead) {
    rtFunction_t f = fn("guarded");
    const int32_t n = 300;
    const size_t cap = 512;
    DevBuf out(cap * sizeof(float));
    void* p = out.get();
    int32_t count = n;
    float scale = 2.0f;
    void* args[] = {&p, &count, &scale};
    const size_t sizes[] = {sizeof p, sizeof count, sizeof scale};
    GrownConfig grown{};
    rtLaunchConfig& c = grown.c;
    c = RT_LAUNCH_CONFIG_INIT;
    c.grid = dim(3);
    c.block = dim(128);
    c.num_args = 3;
    c.arg_sizes = sizes;
    c.global[0] = static_cast<unsigned long long>(n);
    auto expect_ran = [&](const char* what) {
        ASSERT_RT_OK(rtStreamSynchronize(nullptr)) << what;
        auto v = read<float>(out, cap);
        for (size_t i = 0; i < cap; ++i) {
            float expected = i < static_cast<size_t>(n) ? static_cast<float>(i) * scale : -1.0f;
            ASSERT_EQ(v[i], expected) << what << ", index " << i;
        }
    };
    auto reset = [&] {
        std::vector<float> sentinel(cap, -1.0f);
        ASSERT_RT_OK(rtMemcpy(out.get(), sentinel.data(), out.size(), RT_MEMCPY_HOST_TO_DEVICE));
    };
    auto expect_refused = [&](const char* what, std::initializer_list<std::string> said) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchKernelEx(f, &c, args)) << what;
        for (const std::string& text : said) EXPECT_TRUE(contains(last_message(), text)) << what << ": " << last_message();
        ASSERT_RT_OK(rtStreamSynchronize(nullptr)) << what << ": a refused launch leaves no error behind";
        auto v = read<float>(out, cap);
        EXPECT_EQ(v[0], -1.0f) << what << ": nothing ran";
        EXPECT_EQ(v[n - 1], -1.0f) << what << ": nothing ran";
    };

    // Exactly this header's struct.
    reset();
    ASSERT_RT_OK(rtLaunchKernelEx(f, &c, args));
    expect_ran("size = sizeof(rtLaunchConfig)");

    // Smaller than the first version: never read as a config.
    for (size_t small : {size_t{0}, sizeof(size_t), offsetof(rtLaunchConfig, global), sizeof(rtLaunchConfig) - 1}) {
        reset();
        c.size = small;
        expect_refused("a size too small", {"config->size = " + std::to_string(small), "smaller",
                                            std::to_string(sizeof(rtLaunchConfig)), "RT_LAUNCH_CONFIG_INIT"});
    }

    // A later, larger struct whose extra fields are all 0 (their defaults): accepted, read as far as known.
    for (size_t extra : {size_t{1}, size_t{8}, sizeof grown.later}) {
        reset();
        c.size = sizeof(rtLaunchConfig) + extra;
        ASSERT_RT_OK(rtLaunchKernelEx(f, &c, args)) << "extra " << extra;
        expect_ran("a larger size with a zero tail");
    }

    // A later struct that sets a field this library does not have: refused, naming the byte.
    for (size_t at : {size_t{0}, size_t{7}, sizeof grown.later - 1}) {
        reset();
        grown.later[at] = 1;
        c.size = sizeof grown;
        const std::string byte = "byte " + std::to_string(sizeof(rtLaunchConfig) + at);
        expect_refused("a non-zero unknown field", {"config->size = " + std::to_string(sizeof grown), byte,
                                                   "does not have"});
        // The same byte past the caller's size is not part of its config: ignored.
        c.size = sizeof(rtLaunchConfig) + at;
        reset();
        ASSERT_RT_OK(rtLaunchKernelEx(f, &c, args)) << "byte " << at << " lies past the size";
        expect_ran("a set byte past the caller's size");
        grown.later[at] = 0;
    }

    // A size never set (garbage) is not taken for a huge later version.
    for (size_t garbage : {size_t{4097}, size_t{1} << 20, ~size_t{0}}) {
        reset();
        c.size = garbage;
        expect_refused("a size never set", {"config->size = " + std::to_string(garbage), "was it set"});
    }
}

// ------------------------------------------------------------------------------------------ arguments

TEST_P(KernelLaunch, EveryScalarTypeAndAPointer) {
    rtFunction_t f = fn("scalars");
    DevBuf src(sizeof(int32_t)), out(16 * sizeof(int64_t));
    struct Values {
        int8_t a;
        int16_t b;
        int32_t c;
        int64_t d;
        uint8_t e;
        uint16_t f;
        uint32_t g;
        uint64_t h;
        float fl;
        double db;
        bool bo;
        int32_t pointee;
    };
    double nan_payload;
    const uint64_t nan_bits = 0x7ff8000000000123ull;
    std::memcpy(&nan_payload, &nan_bits, sizeof nan_payload);
    const Values cases[] = {
        {INT8_MIN, INT16_MAX, INT32_MIN, INT64_MIN + 1, UINT8_MAX, 0xBEEF, 0xDEADBEEFu, UINT64_MAX - 1, -3.5e-3f,
         1e300, true, -424242},
        {INT8_MAX, INT16_MIN, INT32_MAX, INT64_MAX, 0, 0, 0, 0, 1e-40f /* subnormal */, nan_payload, false, 7},
        {-1, -1, -1, -1, 1, 1, 1, 1, -0.0f, -std::numeric_limits<double>::infinity(), true, 0},
    };
    for (const Values& c : cases) {
        ASSERT_RT_OK(rtMemcpy(src.get(), &c.pointee, sizeof c.pointee, RT_MEMCPY_HOST_TO_DEVICE));
        ASSERT_RT_OK(rtMemset(out.get(), 0x5A, out.size()));
        Values v = c;
        const int32_t* ptr = reinterpret_cast<const int32_t*>(src.get());
        void* po = out.get();
        void* args[] = {&v.a, &v.b, &v.c, &v.d, &v.e, &v.f, &v.g, &v.h, &v.fl, &v.db, &v.bo, &ptr, &po};
        ASSERT_RT_OK(rtLaunchKernel(f, dim(2), dim(32), args, 0, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        auto r = read<int64_t>(out, 15);
        uint32_t fbits;
        std::memcpy(&fbits, &c.fl, 4);
        int64_t dbits;
        std::memcpy(&dbits, &c.db, 8);
        EXPECT_EQ(r[0], c.a);
        EXPECT_EQ(r[1], c.b);
        EXPECT_EQ(r[2], c.c);
        EXPECT_EQ(r[3], c.d);
        EXPECT_EQ(r[4], c.e);
        EXPECT_EQ(r[5], c.f);
        EXPECT_EQ(r[6], static_cast<int64_t>(c.g));
        EXPECT_EQ(static_cast<uint64_t>(r[7]), c.h);
        EXPECT_EQ(static_cast<uint32_t>(r[8]), fbits) << "float bits";
        EXPECT_EQ(r[9], dbits) << "double bits";
        EXPECT_EQ(r[10], c.bo ? 1 : 0);
        EXPECT_EQ(r[11], c.pointee) << "read through the pointer argument";
        EXPECT_EQ(static_cast<uint64_t>(r[12]), reinterpret_cast<uint64_t>(ptr));
        // Each value sign-extended, summed with wrap-around (INT64_MIN + 1 + INT32_MIN must not be UB).
        EXPECT_EQ(r[13], static_cast<int64_t>(static_cast<uint64_t>(int64_t{c.a}) + static_cast<uint64_t>(int64_t{c.b}) +
                                              static_cast<uint64_t>(int64_t{c.c}) + static_cast<uint64_t>(c.d)));
        EXPECT_EQ(r[14], static_cast<int64_t>(c.e + c.f + c.g));
    }
}

TEST_P(KernelLaunch, StructByValueWithMixedSizeFields) {
    rtFunction_t f = fn("by_struct");
    const int32_t n = 100;
    DevBuf out(sizeof(Mixed) * n), sides(sizeof(int64_t) * 2 * n);
    const Mixed cases[] = {{-5, 3.25, -30000, 1.5f, 250, INT64_MIN + 3, true},
                           {127, -1e-300, 12345, -0.0f, 0, 0x0123456789ABCDEFll, false}};
    for (const Mixed& c : cases) {
        Mixed m = c;
        int8_t pre = -100, post = 99;
        void* po = out.get();
        void* ps = sides.get();
        int32_t nn = n;
        void* args[] = {&pre, &m, &post, &po, &ps, &nn};
        ASSERT_RT_OK(rtLaunchKernel(f, dim(4), dim(32), args, 0, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        auto r = read<Mixed>(out, n);
        auto s = read<int64_t>(sides, 2 * n);
        for (int32_t i = 0; i < n; ++i) {
            ASSERT_EQ(r[i].a, c.a) << i;
            ASSERT_EQ(std::memcmp(&r[i].b, &c.b, sizeof c.b), 0) << i;
            ASSERT_EQ(r[i].c, c.c) << i;
            ASSERT_EQ(std::memcmp(&r[i].d, &c.d, sizeof c.d), 0) << i;
            ASSERT_EQ(r[i].e, c.e) << i;
            ASSERT_EQ(r[i].f, c.f) << i;
            ASSERT_EQ(r[i].g, c.g) << i;
            ASSERT_EQ(s[2 * i], pre) << "the scalar before the struct, item " << i;
            ASSERT_EQ(s[2 * i + 1], post) << "the scalar after the struct, item " << i;
        }
    }
    // The size rtFunctionGetParamInfo reports for the struct is the host's.
    int count = 6;
    size_t sizes[6];
    ASSERT_RT_OK(rtFunctionGetParamInfo(f, &count, sizes));
    EXPECT_EQ(sizes[1], sizeof(Mixed));
}

TEST_P(KernelLaunch, ArgumentsAreCopiedAtTheCall) {
    rtFunction_t f = fn("store_args");
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    DevBuf out(3 * sizeof(int64_t));
    ASSERT_RT_OK(rtMemset(out.get(), 0, out.size()));
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));  // the kernel cannot start before the host has changed everything
    int64_t v = 1111;
    Mixed m{};
    m.a = 42;
    m.f = 987654321012345ll;
    void* po = out.get();
    void* args[] = {&v, &m, &po};
    ASSERT_RT_OK(rtLaunchKernel(f, dim(1), dim(1), args, 0, s));
    // Change the values, the pointer array and the array's targets right after the call.
    v = -2222;
    m.a = -1;
    m.f = -1;
    int64_t other = 5555;
    args[0] = &other;
    args[2] = nullptr;
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_FALSE(gate.timed_out());
    auto r = read<int64_t>(out, 3);
    EXPECT_EQ(r[0], 1111);
    EXPECT_EQ(r[1], 987654321012345ll);
    EXPECT_EQ(r[2], 42);
}

// ------------------------------------------------------------------------------------------ ordering

TEST_P(KernelLaunch, StreamOrderCopyKernelCopy) {
    rtFunction_t f = fn("scale");
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    const int32_t n = 1 << 20;
    const size_t bytes = sizeof(float) * n;
    constexpr int kRounds = 4;
    DevBuf din(bytes), dout(bytes);
    std::vector<std::unique_ptr<HostBuf>> hin, hout;
    for (int r = 0; r < kRounds; ++r) {
        hin.push_back(std::make_unique<HostBuf>(bytes));
        hout.push_back(std::make_unique<HostBuf>(bytes));
        ASSERT_RT_OK(hin.back()->status());
        ASSERT_RT_OK(hout.back()->status());
        auto* p = reinterpret_cast<float*>(hin.back()->get());
        for (int32_t i = 0; i < n; ++i) p[i] = static_cast<float>((i % 1000) + r * 10000);
    }
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));  // everything below is queued before any of it runs
    // The same device buffers every round: a reordered copy or kernel shows as another round's data.
    for (int r = 0; r < kRounds; ++r) {
        float factor = static_cast<float>(r + 2);
        void* pi = din.get();
        void* po = dout.get();
        int32_t nn = n;
        void* args[] = {&pi, &po, &nn, &factor};
        ASSERT_RT_OK(rtMemcpyAsync(din.get(), hin[r]->get(), bytes, RT_MEMCPY_HOST_TO_DEVICE, s));
        ASSERT_RT_OK(rtLaunchKernel(f, dim((n + 255) / 256), dim(256), args, 0, s));
        ASSERT_RT_OK(rtMemcpyAsync(hout[r]->get(), dout.get(), bytes, RT_MEMCPY_DEVICE_TO_HOST, s));
    }
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    for (int r = 0; r < kRounds; ++r) {
        auto* in = reinterpret_cast<const float*>(hin[r]->get());
        auto* out = reinterpret_cast<const float*>(hout[r]->get());
        for (int32_t i = 0; i < n; ++i)
            ASSERT_EQ(out[i], in[i] * static_cast<float>(r + 2)) << "round " << r << " index " << i;
    }
}

TEST_P(KernelLaunch, EventOrdersProducerBeforeConsumerOnAnotherStream) {
    rtFunction_t producer = fn("fill_seq"), consumer = fn("scale");
    StreamGuard a, b;
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    EventGuard e;
    ASSERT_RT_OK(e.status());
    const int32_t n = 1 << 20;
    DevBuf buf(sizeof(float) * n), out(sizeof(float) * n);
    ASSERT_RT_OK(rtMemset(buf.get(), 0, buf.size()));
    ASSERT_RT_OK(rtMemset(out.get(), 0, out.size()));
    Gate gate;
    ASSERT_RT_OK(gate.launch(a));  // holds the producer back: only the event can order the consumer after it
    float base = 3.0f, factor = 2.0f;
    int32_t nn = n;
    void* pb = buf.get();
    void* po = out.get();
    void* pargs[] = {&pb, &nn, &base};
    ASSERT_RT_OK(rtLaunchKernel(producer, dim((n + 511) / 512), dim(512), pargs, 0, a));
    ASSERT_RT_OK(rtEventRecord(e, a));
    ASSERT_RT_OK(rtStreamWaitEvent(b, e));
    void* cargs[] = {&pb, &po, &nn, &factor};
    ASSERT_RT_OK(rtLaunchKernel(consumer, dim((n + 511) / 512), dim(512), cargs, 0, b));
    std::this_thread::sleep_for(20ms);  // a consumer that ignored the event would run now
    EXPECT_EQ(rtStreamQuery(b), RT_ERROR_NOT_READY) << "the consumer finished while its producer was held";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(b));
    auto v = read<float>(out, n);
    for (int32_t i = 0; i < n; ++i) ASSERT_EQ(v[i], (base + static_cast<float>(i)) * factor) << i;
    ASSERT_RT_OK(rtStreamSynchronize(a));
}

// ------------------------------------------------------------------------------------------ atomics

TEST_P(KernelLaunch, AtomicsUnderContention) {
    rtFunction_t f = fn("atomics");
    const int32_t n = (1 << 20) + 3;
    DevBuf ci(4), cl(8), cf(4), mn(4), mx(4), mn64(8), mx64(8), fmx(4), cas(4), xchg(4), prev(sizeof(int32_t) * n);
    auto set = [](DevBuf& d, auto value) {
        return rtMemcpy(d.get(), &value, sizeof value, RT_MEMCPY_HOST_TO_DEVICE);
    };
    ASSERT_RT_OK(set(ci, int32_t{0}));
    ASSERT_RT_OK(set(cl, int64_t{0}));
    ASSERT_RT_OK(set(cf, 0.0f));
    ASSERT_RT_OK(set(mn, std::numeric_limits<int32_t>::max()));
    ASSERT_RT_OK(set(mx, std::numeric_limits<int32_t>::min()));
    ASSERT_RT_OK(set(mn64, std::numeric_limits<int64_t>::max()));
    ASSERT_RT_OK(set(mx64, std::numeric_limits<int64_t>::min()));
    ASSERT_RT_OK(set(fmx, -std::numeric_limits<float>::infinity()));
    ASSERT_RT_OK(set(cas, int32_t{0}));
    ASSERT_RT_OK(set(xchg, int32_t{0}));
    ASSERT_RT_OK(rtMemset(prev.get(), 0xFF, prev.size()));
    void* p[] = {ci.get(), cl.get(), cf.get(), mn.get(), mx.get(), mn64.get(), mx64.get(), fmx.get(), cas.get(),
                 xchg.get(), prev.get()};
    int32_t nn = n;
    void* args[] = {&p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7], &p[8], &p[9], &p[10], &nn};
    ASSERT_RT_OK(rtLaunchKernel(f, dim((n + 255) / 256), dim(256), args, 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));

    // The expected results, computed the same way on the host.
    int32_t emn = std::numeric_limits<int32_t>::max(), emx = std::numeric_limits<int32_t>::min();
    int64_t emn64 = std::numeric_limits<int64_t>::max(), emx64 = std::numeric_limits<int64_t>::min(), esum = 0;
    float efmx = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < n; ++i) {
        int32_t v = static_cast<int32_t>((static_cast<int64_t>(i) * 7919) % n) - n / 2;
        emn = std::min(emn, v);
        emx = std::max(emx, v);
        emn64 = std::min<int64_t>(emn64, int64_t{v} * 3000000000LL);
        emx64 = std::max<int64_t>(emx64, int64_t{v} * 3000000000LL);
        efmx = std::max(efmx, static_cast<float>(v) * 0.5f);
        esum += i;
    }
    EXPECT_EQ(read<int32_t>(ci, 1)[0], n) << "atomic_add int32";
    EXPECT_EQ(read<int64_t>(cl, 1)[0], esum) << "atomic_add int64";
    EXPECT_EQ(read<float>(cf, 1)[0], static_cast<float>(n)) << "atomic_add float";
    EXPECT_EQ(read<int32_t>(mn, 1)[0], emn) << "atomic_min int32";
    EXPECT_EQ(read<int32_t>(mx, 1)[0], emx) << "atomic_max int32";
    EXPECT_EQ(read<int64_t>(mn64, 1)[0], emn64) << "atomic_min int64";
    EXPECT_EQ(read<int64_t>(mx64, 1)[0], emx64) << "atomic_max int64";
    EXPECT_EQ(read<float>(fmx, 1)[0], efmx) << "atomic_max float";
    EXPECT_EQ(read<int32_t>(cas, 1)[0], n) << "atomic_cas increment loop";
    // atomic_exchange: the old values seen, plus the final value, are 0..n each exactly once.
    auto prevs = read<int32_t>(prev, n);
    std::vector<uint8_t> seen(static_cast<size_t>(n) + 1, 0);
    int32_t last = read<int32_t>(xchg, 1)[0];
    ASSERT_GE(last, 1);
    ASSERT_LE(last, n);
    seen[last]++;
    size_t bad = 0;
    for (int32_t i = 0; i < n; ++i) {
        if (prevs[i] < 0 || prevs[i] > n) {
            if (bad++ < 5) ADD_FAILURE() << "prev[" << i << "] = " << prevs[i];
            continue;
        }
        seen[prevs[i]]++;
    }
    for (int32_t k = 0; k <= n; ++k)
        if (seen[k] != 1 && bad++ < 5) ADD_FAILURE() << "value " << k << " seen " << int(seen[k]) << " times";
    EXPECT_EQ(bad, 0u) << "atomic_exchange lost or duplicated values";
}

// ------------------------------------------------------------------------------------------ faults

/// After a failed launch: the stream's error is cleared by the synchronize that reported it, and a
/// following launch on the same stream runs correctly.
void expect_stream_works(rtFunction_t seed, rtStream_t s) {
    EXPECT_RT_OK(rtStreamSynchronize(s)) << "the error was reported once and cleared";
    const int32_t n = 1000;
    DevBuf in(sizeof(float) * n), out(sizeof(float) * n);
    std::vector<float> h(n);
    for (int32_t i = 0; i < n; ++i) h[i] = static_cast<float>(i) - 0.25f;
    ASSERT_RT_OK(rtMemcpy(in.get(), h.data(), in.size(), RT_MEMCPY_HOST_TO_DEVICE));
    void* pi = in.get();
    void* po = out.get();
    int32_t nn = n;
    void* args[] = {&pi, &po, &nn};
    ASSERT_RT_OK(rtLaunchKernel(seed, dim(4), dim(256), args, 0, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    std::vector<float> r(n);
    ASSERT_RT_OK(rtMemcpy(r.data(), out.get(), out.size(), RT_MEMCPY_DEVICE_TO_HOST));
    for (int32_t i = 0; i < n; ++i) ASSERT_EQ(r[i], h[i] * 2) << i;
}

// On cuda this runs in a process of its own (tests/CMakeLists.txt): should rt_assert trap there, the fault is sticky
// and the device lost, which would fail every later test of the process.
TEST_P(KernelLaunch, AssertFailureIsReportedAtSynchronize) {
    rtFunction_t f = fn("assert_kernel");
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    const int32_t n = 4096;
    std::vector<int32_t> h(n);
    for (int32_t i = 0; i < n; ++i) h[i] = i;
    h[3000] = 12345;
    DevBuf d(sizeof(int32_t) * n);
    ASSERT_RT_OK(rtMemcpy(d.get(), h.data(), d.size(), RT_MEMCPY_HOST_TO_DEVICE));
    void* p = d.get();
    int32_t nn = n;
    void* args[] = {&p, &nn};
    ASSERT_RT_OK(rtLaunchKernel(f, dim(n / 128), dim(128), args, 0, s)) << "the launch itself succeeds";
    ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "assert_kernel"));
    EXPECT_TRUE(contains(msg, "data[i] != 12345"));
    expect_stream_works(fn("seed_double"), s);

    // Passing data: no failure.
    h[3000] = 3000;
    ASSERT_RT_OK(rtMemcpy(d.get(), h.data(), d.size(), RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtLaunchKernel(f, dim(n / 128), dim(128), args, 0, s));
    EXPECT_RT_OK(rtStreamSynchronize(s));
}

TEST_P(KernelLaunch, TrappingKernelsAreReportedAtSynchronize) {
    const bool cuda = std::strcmp(prop_.backend, "cuda") == 0;
    {
        StreamGuard s;
        ASSERT_RT_OK(s.status());
        rtFunction_t f = fn("null_write");
        int32_t* p = nullptr;
        int32_t v = 5;
        void* args[] = {&p, &v};
        ASSERT_RT_OK(rtLaunchKernel(f, dim(1), dim(32), args, 0, s));
        ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
        EXPECT_TRUE(contains(last_message(), "null_write"));
        if (!cuda) {
            expect_stream_works(fn("seed_double"), s);
            return;
        }
        // On cuda an illegal address is sticky: the context is lost, and every later operation on the device fails
        // at once, naming the loss (docs/cuda.md). (On cuda this test runs in a process of its own: tests/CMakeLists.txt.)
        void* q = nullptr;
        EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtMalloc(&q, 64));
        EXPECT_TRUE(contains(last_message(), "lost")) << "the refusal names the lost context";
    }
    // rtFinalize releases the primary context (the runtime held the last reference: nothing else in this process
    // uses CUDA) and rtInit starts on a fresh one, where the device works again.
    ASSERT_RT_OK(rtModuleUnload(module_)) << "releases work on a lost device";
    module_ = nullptr;
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtInit(nullptr));
    ASSERT_RT_OK(rtSetDevice(device()));
    ASSERT_RT_OK(rtModuleLoadSource(&module_, kSource, nullptr));
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    expect_stream_works(fn("seed_double"), s);
}

TEST_P(KernelLaunch, IntegerDivisionByZeroTrapsOnCpu) {
    // cpu: SIGFPE in the kernel is caught and reported as a launch failure. A GPU does not fault on integer division
    // by zero (the result is undefined), so there is nothing to report.
    if (std::strcmp(prop_.backend, "cpu") != 0)
        GTEST_SKIP() << prop_.backend << ": integer division by zero does not fault on this device (cpu only)";
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    rtFunction_t f = fn("int_div");
    DevBuf out(sizeof(int32_t) * 64);
    void* p = out.get();
    int32_t a = 100, b = 0;
    void* args[] = {&p, &a, &b};
    ASSERT_RT_OK(rtLaunchKernel(f, dim(2), dim(32), args, 0, s));
    ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    EXPECT_TRUE(contains(last_message(), "int_div"));
    expect_stream_works(fn("seed_double"), s);
    // The same kernel with a non-zero divisor works.
    b = 7;
    ASSERT_RT_OK(rtLaunchKernel(f, dim(2), dim(32), args, 0, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    auto r = read<int32_t>(out, 64);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(r[i], 100 / 7) << i;
}

// ------------------------------------------------------------------------------------------ refused launches

TEST_P(KernelLaunch, WrongArityAndArgumentSizes) {
    rtFunction_t f = fn("scale");
    DevBuf in(sizeof(float) * 16), out(sizeof(float) * 16);
    void* pi = in.get();
    void* po = out.get();
    int32_t n = 16;
    float factor = 2;
    double extra = 1;
    void* args[] = {&pi, &po, &n, &factor, &extra};
    for (int wrong : {0, 1, 3, 5}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(f, dim(1), dim(16), args, wrong, nullptr, 0, nullptr))
            << wrong << " arguments";
        EXPECT_TRUE(contains(last_message(), "takes 4 argument(s)"));
        EXPECT_TRUE(contains(last_message(), "scale"));
    }
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(f, dim(1), dim(16), args, -2, nullptr, 0, nullptr));

    const size_t right[] = {sizeof(float*), sizeof(float*), sizeof(int32_t), sizeof(float)};
    const size_t wrong_sizes[][4] = {{sizeof(float*), sizeof(float*), sizeof(int32_t), sizeof(double)},
                                     {4, sizeof(float*), sizeof(int32_t), sizeof(float)},
                                     {sizeof(float*), sizeof(float*), sizeof(int64_t), sizeof(float)}};
    for (auto& ws : wrong_sizes) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(f, dim(1), dim(16), args, 4, ws, 0, nullptr));
        EXPECT_TRUE(contains(last_message(), "scale"));
    }
    // Right count, with and without sizes: accepted and run.
    ASSERT_RT_OK(rtMemset(out.get(), 0, out.size()));
    std::vector<float> h(16);
    for (int i = 0; i < 16; ++i) h[i] = static_cast<float>(i) + 0.5f;
    ASSERT_RT_OK(rtMemcpy(in.get(), h.data(), in.size(), RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(launch_ex(f, dim(1), dim(16), args, 4, right, 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    auto r = read<float>(out, 16);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(r[i], h[i] * 2);
    factor = 3;
    ASSERT_RT_OK(launch_ex(f, dim(1), dim(16), args, 4, nullptr, 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    r = read<float>(out, 16);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(r[i], h[i] * 3);
    // A zero-parameter kernel takes no arguments; args may then be NULL.
    rtFunction_t e = fn("empty");
    EXPECT_RT_OK(launch_ex(e, dim(1), dim(1), nullptr, 0, nullptr, 0, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(e, dim(1), dim(1), args, 1, nullptr, 0, nullptr));
    EXPECT_TRUE(contains(last_message(), "takes 0 argument(s)"));
    EXPECT_RT_OK(rtStreamSynchronize(nullptr)) << "refused launches leave no error behind";
}

TEST_P(KernelLaunch, ZeroAndOversizedShapesAreRefused) {
    rtFunction_t e = fn("empty");
    auto launch = [&](rtDim3 g, rtDim3 b) { return rtLaunchKernel(e, g, b, nullptr, 0, nullptr); };
    for (int d = 0; d < 3; ++d) {
        unsigned gz[3] = {1, 1, 1}, bz[3] = {1, 1, 1};
        gz[d] = 0;
        bz[d] = 0;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch(dim(gz[0], gz[1], gz[2]), dim(1))) << "grid dim " << d << " = 0";
        EXPECT_TRUE(contains(last_message(), "grid"));
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch(dim(1), dim(bz[0], bz[1], bz[2]))) << "block dim " << d << " = 0";
        EXPECT_TRUE(contains(last_message(), "block"));
        ASSERT_GT(prop_.max_grid_size[d], 0);
        ASSERT_GT(prop_.max_block_size[d], 0);
        unsigned go[3] = {1, 1, 1}, bo[3] = {1, 1, 1};
        go[d] = static_cast<unsigned>(prop_.max_grid_size[d]) + 1u;
        bo[d] = static_cast<unsigned>(prop_.max_block_size[d]) + 1u;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch(dim(go[0], go[1], go[2]), dim(1)))
            << "grid dim " << d << " = max_grid_size + 1 = " << go[d];
        EXPECT_TRUE(contains(last_message(), std::to_string(go[d])));
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch(dim(1), dim(bo[0], bo[1], bo[2])))
            << "block dim " << d << " = max_block_size + 1 = " << bo[d];
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch(dim(0xFFFFFFFFu, 1, 1), dim(1)));
    }
    // Within every per-dimension limit but over max_threads_per_block in total.
    ASSERT_GT(prop_.max_threads_per_block, 0);
    unsigned bx = static_cast<unsigned>(std::min(prop_.max_block_size[0], prop_.max_threads_per_block));
    if (prop_.max_block_size[1] >= 2 && static_cast<long long>(bx) * 2 > prop_.max_threads_per_block) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch(dim(1), dim(bx, 2, 1)));
        EXPECT_TRUE(contains(last_message(), std::to_string(prop_.max_threads_per_block)));
    }
    // At the limits: accepted and run.
    EXPECT_RT_OK(launch(dim(1), dim(bx)));
    unsigned bz = static_cast<unsigned>(std::min(prop_.max_block_size[2], prop_.max_threads_per_block));
    EXPECT_RT_OK(launch(dim(1), dim(1, 1, bz)));
    EXPECT_RT_OK(launch(dim(1, static_cast<unsigned>(prop_.max_grid_size[1]), 1), dim(1)));
    EXPECT_RT_OK(launch(dim(1, 1, static_cast<unsigned>(prop_.max_grid_size[2])), dim(1)));
    EXPECT_RT_OK(rtStreamSynchronize(nullptr));
}

TEST_P(KernelLaunch, StreamOfAnotherDeviceIsRefused) {
    int count = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&count));
    if (count < 2) GTEST_SKIP() << "needs two devices (the _2dev CTest run has them)";
    const int other = (device() + 1) % count;
    ASSERT_RT_OK(rtSetDevice(other));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtSetDevice(device()));
    rtFunction_t f = fn("bump");
    DevBuf c(sizeof(int32_t));
    ASSERT_RT_OK(rtMemset(c.get(), 0, c.size()));
    void* p = c.get();
    void* args[] = {&p};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchKernel(f, dim(1), dim(1), args, 0, s));
    EXPECT_TRUE(contains(last_message(), "bump"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(f, dim(1), dim(1), args, 1, nullptr, 0, s));
    EXPECT_RT_OK(rtStreamSynchronize(s));
    EXPECT_RT_OK(rtStreamDestroy(s));
    // On its own device's streams the kernel runs.
    ASSERT_RT_OK(rtLaunchKernel(f, dim(1), dim(1), args, 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_EQ(read<int32_t>(c, 1)[0], 1);
}

TEST_P(KernelLaunch, StaleGarbageAndWrongKindHandlesAreRefused) {
    // The launch path resolves handles without a lock: every kind of invalid handle must still be refused.
    rtFunction_t e = fn("empty");
    rtStream_t old = nullptr, reused = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&old));
    ASSERT_RT_OK(rtLaunchKernel(e, dim(1), dim(1), nullptr, 0, old));
    ASSERT_RT_OK(rtStreamDestroy(old));
    ASSERT_RT_OK(rtStreamCreate(&reused));  // takes the destroyed stream's slot, with a new generation
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtLaunchKernel(e, dim(1), dim(1), nullptr, 0, old));
    EXPECT_TRUE(contains(last_message(), "not a live stream"));
    EXPECT_RT_OK(rtLaunchKernel(e, dim(1), dim(1), nullptr, 0, reused));
    EXPECT_RT_OK(rtStreamSynchronize(reused));
    EXPECT_RT_OK(rtStreamDestroy(reused));

    auto handle = [](uint64_t v) { return reinterpret_cast<void*>(static_cast<uintptr_t>(v)); };
    const uint64_t stream_tag = uint64_t{0x53} << 56, function_tag = uint64_t{0x46} << 56;
    // Garbage, a slot never used, generation 0, and handles of the other kind.
    for (uint64_t v : {uint64_t{0x1234}, stream_tag | (uint64_t{7} << 24) | 0xFFFFFF, stream_tag | 1,
                       function_tag | (uint64_t{7} << 24)})
        EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE,
                        rtLaunchKernel(e, dim(1), dim(1), nullptr, 0, static_cast<rtStream_t>(handle(v))))
            << std::hex << v;
    for (uint64_t v : {uint64_t{0x1234}, function_tag | (uint64_t{7} << 24) | 0xFFFFFF, function_tag | 1,
                       stream_tag | (uint64_t{7} << 24)}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE,
                        rtLaunchKernel(static_cast<rtFunction_t>(handle(v)), dim(1), dim(1), nullptr, 0, nullptr))
            << std::hex << v;
        EXPECT_TRUE(contains(last_message(), "not a kernel of a loaded module"));
    }
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtLaunchKernel(nullptr, dim(1), dim(1), nullptr, 0, nullptr));

    // A function of an unloaded module: refused, even after another module took its slot; work queued
    // before the unload still runs (the queue keeps the code loaded).
    rtModule_t m = nullptr, m2 = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, kSource, nullptr));
    rtFunction_t bump = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&bump, m, "bump"));
    DevBuf c(sizeof(int32_t));
    ASSERT_RT_OK(rtMemset(c.get(), 0, c.size()));
    void* p = c.get();
    void* args[] = {&p};
    for (int i = 0; i < 100; ++i) ASSERT_RT_OK(rtLaunchKernel(bump, dim(1), dim(1), args, 0, nullptr));
    ASSERT_RT_OK(rtModuleUnload(m));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtLaunchKernel(bump, dim(1), dim(1), args, 0, nullptr));
    ASSERT_RT_OK(rtModuleLoadSource(&m2, kSource, nullptr));
    rtFunction_t bump2 = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&bump2, m2, "bump"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtLaunchKernel(bump, dim(1), dim(1), args, 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_EQ(read<int32_t>(c, 1)[0], 100);
    EXPECT_RT_OK(rtModuleUnload(m2));
}

// ------------------------------------------------------------------------------------------ volume

TEST_P(KernelLaunch, TenThousandLaunchesThenOneSynchronize) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    rtFunction_t e = fn("empty"), bump = fn("bump");
    constexpr int kLaunches = 10000;
    for (int i = 0; i < kLaunches; ++i) ASSERT_RT_OK(rtLaunchKernel(e, dim(1), dim(1), nullptr, 0, s)) << i;
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtStreamQuery(s));
    // The same count of launches that each leave a trace: all of them ran, in order (no lost update).
    DevBuf c(sizeof(int32_t));
    ASSERT_RT_OK(rtMemset(c.get(), 0, c.size()));
    void* p = c.get();
    void* args[] = {&p};
    for (int i = 0; i < kLaunches; ++i) ASSERT_RT_OK(rtLaunchKernel(bump, dim(1), dim(1), args, 0, s)) << i;
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(read<int32_t>(c, 1)[0], kLaunches);
}

TEST_P(KernelLaunch, SeedKernelDoublesOneMillionFloats) {
    rtFunction_t f = fn("seed_double");
    const int32_t n = 1 << 20;
    std::vector<float> in(n), out(n, 0.0f);
    std::mt19937 rng(static_cast<unsigned>(device()) * 7919u + 1u);
    std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
    for (float& x : in) x = dist(rng);
    DevBuf din(sizeof(float) * n), dout(sizeof(float) * n);
    ASSERT_RT_OK(rtMemcpy(din.get(), in.data(), din.size(), RT_MEMCPY_HOST_TO_DEVICE));
    void* pi = din.get();
    void* po = dout.get();
    int32_t nn = n;
    void* args[] = {&pi, &po, &nn};
    ASSERT_RT_OK(rtLaunchKernel(f, dim(n / 256), dim(256), args, 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    ASSERT_RT_OK(rtMemcpy(out.data(), dout.get(), dout.size(), RT_MEMCPY_DEVICE_TO_HOST));
    for (int32_t i = 0; i < n; ++i) ASSERT_EQ(out[i], in[i] * 2) << i;
}

RT_INSTANTIATE_DEVICE_TEST(KernelLaunch);

}  // namespace
