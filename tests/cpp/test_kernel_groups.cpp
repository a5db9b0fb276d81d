// test_kernel_groups.cpp — work-groups in the kernel dialect: rt_items blocks (group kernels), rt_barrier (fibers on
// cpu), RT_LOCAL and dynamic local memory, rt_private; the rules the front end and the launch enforce; the cuda wiring
// against the fake driver (every kernel source here is also compiled for sm_90 by test_cuda_compiler).
#include <filesystem>
#include <numeric>
#include <random>

#include "test_util.hpp"

namespace {

using namespace rt_test;

constexpr rtDim3 dim(unsigned x, unsigned y = 1, unsigned z = 1) { return rtDim3{x, y, z}; }

// Each kernel exists in both forms: *_items (rt_items blocks) and *_flat (rt_barrier). Items of a group are numbered
// linearly (x fastest); a group's items are the consecutive elements [group * n, group * n + n) of the arrays.
constexpr const char* kSource = R"rtsrc(
// The group's linear number and item count (uniform: group code may use them).
RT_DEVICE size_t group_linear() {
    return (get_group_id(2) * get_num_groups(1) + get_group_id(1)) * get_num_groups(0) + get_group_id(0);
}
RT_DEVICE size_t group_items() { return get_local_size(0) * get_local_size(1) * get_local_size(2); }
RT_DEVICE size_t local_linear() {
    return (get_local_id(2) * get_local_size(1) + get_local_id(1)) * get_local_size(0) + get_local_id(0);
}

// out = in reversed within each group, through local memory.
RT_KERNEL void reverse_items(const int32_t* in, int32_t* out) {
    RT_LOCAL int32_t tmp[1024];
    const size_t n = group_items(), base = group_linear() * n;
    rt_items(it) { tmp[local_linear()] = in[base + it]; }
    rt_items(it) { out[base + it] = tmp[n - 1 - it]; }
}
RT_KERNEL void reverse_flat(const int32_t* in, int32_t* out) {
    RT_LOCAL int32_t tmp[1024];
    const size_t n = group_items(), l = local_linear(), base = group_linear() * n;
    tmp[l] = in[base + l];
    rt_barrier();
    out[base + l] = tmp[n - 1 - l];
}

// Inclusive prefix sums within each group (Hillis-Steele, two buffers); rt_private carries each item's value.
RT_KERNEL void scan_items(const int32_t* in, int32_t* out) {
    RT_LOCAL int32_t buf[2][1024];
    rt_private<int32_t> v;
    const size_t n = group_items(), base = group_linear() * n;
    rt_items(it) {
        v[it] = in[base + it];
        buf[0][it] = v[it];
    }
    int src = 0;
    for (size_t off = 1; off < n; off *= 2) {
        rt_items(it) {
            v[it] += it >= off ? buf[src][it - off] : 0;
            buf[1 - src][it] = v[it];
        }
        src = 1 - src;
    }
    rt_items(it) { out[base + it] = v[it]; }
}
RT_KERNEL void scan_flat(const int32_t* in, int32_t* out) {
    RT_LOCAL int32_t buf[2][1024];
    const size_t n = group_items(), l = local_linear(), base = group_linear() * n;
    int32_t v = in[base + l];
    buf[0][l] = v;
    rt_barrier();
    int src = 0;
    for (size_t off = 1; off < n; off *= 2) {
        v += l >= off ? buf[src][l - off] : 0;
        buf[1 - src][l] = v;
        rt_barrier();
        src = 1 - src;
    }
    out[base + l] = v;
}

// Sum of each group's elements, a tree in dynamic local memory (shared_bytes = n floats, n a power of two).
RT_KERNEL void sum_items_dyn(const float* in, float* sums) {
    float* s = (float*)rt_local_memory();
    const size_t n = group_items(), base = group_linear() * n;
    rt_items(it) { s[it] = in[base + it]; }
    for (size_t half = n / 2; half > 0; half /= 2) {
        rt_items(it) {
            if (it < half) s[it] += s[it + half];
        }
    }
    rt_items(it) {
        if (it == 0) sums[group_linear()] = s[0];
    }
}
RT_KERNEL void sum_flat_dyn(const float* in, float* sums) {
    float* s = (float*)rt_local_memory();
    const size_t n = group_items(), l = local_linear(), base = group_linear() * n;
    s[l] = in[base + l];
    rt_barrier();
    for (size_t half = n / 2; half > 0; half /= 2) {
        if (l < half) s[l] += s[l + half];
        rt_barrier();
    }
    if (l == 0) sums[group_linear()] = s[0];
}

// 16 KiB of RT_LOCAL memory, and the dynamic local memory beside it.
RT_KERNEL void some_local(float* out) {
    RT_LOCAL float a[4096];
    rt_items(it) { a[it] = (float)it; }
    rt_items(it) { out[it] = a[it] + ((float*)rt_local_memory())[0]; }
}

// Every item writes its group's number into local memory, then every item checks all of it, several rounds:
// a group that saw another group's number counts it in bad[0].
RT_KERNEL void isolation_items(int32_t* bad, int32_t rounds) {
    RT_LOCAL int32_t mark[256];
    const int32_t g = (int32_t)group_linear();
    const size_t n = group_items();
    for (int32_t r = 0; r < rounds; ++r) {
        rt_items(it) { mark[it] = g * 1000 + r; }
        rt_items(it) {
            int32_t wrong = 0;
            for (size_t j = 0; j < n; ++j) wrong += mark[(it + j) % n] != g * 1000 + r;
            if (wrong) atomic_add(&bad[0], wrong);
        }
    }
}
RT_KERNEL void isolation_flat(int32_t* bad, int32_t rounds) {
    RT_LOCAL int32_t mark[256];
    const int32_t g = (int32_t)group_linear();
    const size_t n = group_items(), l = local_linear();
    for (int32_t r = 0; r < rounds; ++r) {
        mark[l] = g * 1000 + r;
        rt_barrier();
        int32_t wrong = 0;
        for (size_t j = 0; j < n; ++j) wrong += mark[(l + j) % n] != g * 1000 + r;
        if (wrong) atomic_add(&bad[0], wrong);
        rt_barrier();
    }
}
)rtsrc";

// Failures of the flat form on cpu (on cuda these are undefined or lose the context: cpu only).
constexpr const char* kFlatFailures = R"rtsrc(
RT_KERNEL void divergent(int32_t* out) {
    if (get_local_id(0) % 2 == 0) rt_barrier();  // odd items end while even ones wait
    out[get_global_id(0)] = 1;
}
RT_KERNEL void assert_flat(int32_t* out, int32_t bad) {
    const size_t l = get_local_id(0);
    out[get_global_id(0)] = 1;
    rt_barrier();
    rt_assert((int32_t)l != bad);
    rt_barrier();
    out[get_global_id(0)] = 2;
}
RT_KERNEL void segv_flat(int32_t* p) {
    rt_barrier();
    if (get_local_id(0) == 3) p[0] = 1;
}
RT_DEVICE int32_t deep(volatile int32_t* q, int32_t d) {
    volatile int32_t pad[512];
    pad[d % 512] = d;
    return d <= 0 ? pad[0] : deep(q, d - 1) + pad[(d * 7) % 512];
}
RT_KERNEL void overflow_flat(int32_t* out) {
    rt_barrier();
    out[get_global_id(0)] = get_local_id(0) == 1 ? deep(out, 1 << 20) : 0;
}
// Frames of another shape over the stacks the failures above left mid-run (ASan: their shadow must be clean).
RT_DEVICE int32_t frame_sum(int32_t seed) {
    volatile int32_t pad[2048];
    for (int32_t i = 0; i < 2048; ++i) pad[i] = seed + i;
    int32_t s = 0;
    for (int32_t i = 0; i < 2048; i += 512) s += pad[i];
    return s;
}
RT_KERNEL void frames_flat(int32_t* out) {
    const int32_t a = frame_sum((int32_t)get_local_id(0));
    rt_barrier();
    out[get_global_id(0)] = a + frame_sum(1);
}
)rtsrc";

// Local memory over the device's limit (48 KiB on cpu and, by default, on CUDA).
constexpr const char* kTooMuchLocal = R"rtsrc(
// RT_TEST_EXPECT_COMPILE_ERROR: for CUDA, where ptxas refuses 64 KiB of static __shared__ memory
RT_KERNEL void big_local(float* out) {
    RT_LOCAL float a[8192], b[8192];  // 64 KiB
    rt_items(it) { a[it] = 1.0f; b[it] = 2.0f; }
    rt_items(it) { out[it] = a[it] + b[it]; }
}
)rtsrc";

RT_TEST_TEMP_CACHE_DIR("kernel-groups");

class KernelGroups : public DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        if (HasFatalFailure()) return;
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kSource, nullptr));
    }
    void TearDown() override {
        if (module_) {
            EXPECT_RT_OK(rtModuleUnload(module_));
        }
    }
    rtFunction_t fn(const char* name, rtModule_t m = nullptr) {
        rtFunction_t f = nullptr;
        EXPECT_RT_OK(rtModuleGetFunction(&f, m ? m : module_, name)) << name;
        return f;
    }
    template <class T> std::vector<T> read(const DevBuf& d, size_t count) {
        std::vector<T> v(count);
        EXPECT_RT_OK(rtMemcpy(v.data(), d.get(), count * sizeof(T), RT_MEMCPY_DEVICE_TO_HOST));
        return v;
    }
    rtModule_t module_ = nullptr;
};

/// The group shapes every correctness test runs: 1, 7, 64, 256 and 1024 items in 1-D, and 2-D / 3-D groups.
struct Shape {
    rtDim3 grid, block;
};
std::vector<Shape> shapes() {
    return {{dim(5), dim(1)},        {dim(9), dim(7)},          {dim(6), dim(64)},        {dim(4), dim(256)},
            {dim(3), dim(1024)},     {dim(3, 2), dim(8, 4)},    {dim(2, 2, 2), dim(4, 3, 5)}, {dim(1, 3, 1), dim(16, 16)}};
}
unsigned items(rtDim3 d) { return d.x * d.y * d.z; }

TEST_P(KernelGroups, ReverseWithinEachGroupInBothForms) {
    for (const char* name : {"reverse_items", "reverse_flat"}) {
        rtFunction_t f = fn(name);
        for (const Shape& s : shapes()) {
            SCOPED_TRACE(std::string(name) + " block " + std::to_string(s.block.x) + "x" + std::to_string(s.block.y) +
                         "x" + std::to_string(s.block.z));
            const unsigned n = items(s.block), total = n * items(s.grid);
            std::vector<int32_t> in(total);
            for (unsigned i = 0; i < total; ++i) in[i] = static_cast<int32_t>(i * 7 + 3);
            DevBuf din(total * 4), dout(total * 4);
            ASSERT_RT_OK(rtMemcpy(din.get(), in.data(), total * 4, RT_MEMCPY_HOST_TO_DEVICE));
            void* pi = din.get();
            void* po = dout.get();
            void* args[] = {&pi, &po};
            ASSERT_RT_OK(rtLaunchKernel(f, s.grid, s.block, args, 0, nullptr));
            ASSERT_RT_OK(rtStreamSynchronize(nullptr));
            std::vector<int32_t> out = read<int32_t>(dout, total);
            for (unsigned g = 0; g < total / n; ++g)
                for (unsigned l = 0; l < n; ++l)
                    ASSERT_EQ(out[g * n + l], in[g * n + (n - 1 - l)]) << "group " << g << " item " << l;
        }
    }
}

TEST_P(KernelGroups, PrefixSumsWithinEachGroupMatchTheHost) {
    std::mt19937 rng(42u + static_cast<unsigned>(device()));
    std::uniform_int_distribution<int32_t> dist(-1000, 1000);
    for (const char* name : {"scan_items", "scan_flat"}) {
        rtFunction_t f = fn(name);
        for (const Shape& s : shapes()) {
            SCOPED_TRACE(std::string(name) + " block " + std::to_string(s.block.x) + "x" + std::to_string(s.block.y) +
                         "x" + std::to_string(s.block.z));
            const unsigned n = items(s.block), total = n * items(s.grid);
            std::vector<int32_t> in(total), want(total);
            for (int32_t& x : in) x = dist(rng);
            for (unsigned g = 0; g < total / n; ++g)
                std::partial_sum(in.begin() + g * n, in.begin() + (g + 1) * n, want.begin() + g * n);
            DevBuf din(total * 4), dout(total * 4);
            ASSERT_RT_OK(rtMemcpy(din.get(), in.data(), total * 4, RT_MEMCPY_HOST_TO_DEVICE));
            void* pi = din.get();
            void* po = dout.get();
            void* args[] = {&pi, &po};
            ASSERT_RT_OK(rtLaunchKernel(f, s.grid, s.block, args, 0, nullptr));
            ASSERT_RT_OK(rtStreamSynchronize(nullptr));
            EXPECT_EQ(read<int32_t>(dout, total), want);
        }
    }
}

TEST_P(KernelGroups, TreeSumsInDynamicLocalMemory) {
    for (const char* name : {"sum_items_dyn", "sum_flat_dyn"}) {
        rtFunction_t f = fn(name);
        for (unsigned n : {1u, 64u, 256u, 1024u}) {
            SCOPED_TRACE(std::string(name) + " block " + std::to_string(n));
            const unsigned groups = 9, total = groups * n;
            std::vector<float> in(total);
            for (unsigned i = 0; i < total; ++i) in[i] = static_cast<float>(i % 17) - 8.0f;  // exact sums
            std::vector<float> want(groups, 0.0f);
            for (unsigned i = 0; i < total; ++i) want[i / n] += in[i];
            DevBuf din(total * 4), dsum(groups * 4);
            ASSERT_RT_OK(rtMemcpy(din.get(), in.data(), total * 4, RT_MEMCPY_HOST_TO_DEVICE));
            void* pi = din.get();
            void* ps = dsum.get();
            void* args[] = {&pi, &ps};
            ASSERT_RT_OK(rtLaunchKernel(f, dim(groups), dim(n), args, n * sizeof(float), nullptr));
            ASSERT_RT_OK(rtStreamSynchronize(nullptr));
            EXPECT_EQ(read<float>(dsum, groups), want);
        }
    }
}

TEST_P(KernelGroups, LocalMemoryNeverLeaksBetweenConcurrentGroups) {
    // Many groups over every worker, each writing and checking its own marks: a group seeing another's fails.
    for (const char* name : {"isolation_items", "isolation_flat"}) {
        SCOPED_TRACE(name);
        rtFunction_t f = fn(name);
        DevBuf bad(4);
        ASSERT_RT_OK(rtMemset(bad.get(), 0, 4));
        void* pb = bad.get();
        int32_t rounds = 3;
        void* args[] = {&pb, &rounds};
        ASSERT_RT_OK(rtLaunchKernel(f, dim(64, 2), dim(32, 2), args, 0, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        EXPECT_EQ(read<int32_t>(bad, 1)[0], 0);
    }
}

TEST_P(KernelGroups, FlatLocalsStayRightAcrossModuleReloads) {
    // Every item's slot holds a value no fresh memory has (item 0's too), and the module is unloaded and loaded
    // again each round: its local arrays must be the ones the group wrote (thread-local storage of a reloaded
    // module once handed items a freed block).
    const char* src = R"rtsrc(
RT_KERNEL void reload_sum(const double* in, double* out) {
    RT_LOCAL double part[64];
    const size_t l = get_local_id(0);
    part[l] = in[get_global_id(0)];
    rt_barrier();
    if (l == 0) {
        double s = 0;
        for (int i = 0; i < 64; ++i) s += part[i];
        out[get_group_id(0)] = s;
    }
}
)rtsrc";
    std::vector<double> in(256);
    for (unsigned i = 0; i < 256; ++i) in[i] = 1.5 + 0.5 * i;
    DevBuf din(256 * sizeof(double)), dout(4 * sizeof(double));
    ASSERT_RT_OK(rtMemcpy(din.get(), in.data(), 256 * sizeof(double), RT_MEMCPY_HOST_TO_DEVICE));
    for (size_t round = 0, rounds = rt_test::scaled(40, 10); round < rounds; ++round) {
        rtModule_t m = nullptr;
        ASSERT_RT_OK(rtModuleLoadSource(&m, src, nullptr));
        void* pi = din.get();
        void* po = dout.get();
        void* args[] = {&pi, &po};
        ASSERT_RT_OK(rtLaunchKernel(fn("reload_sum", m), dim(4), dim(64), args, 0, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        const std::vector<double> got = read<double>(dout, 4);
        ASSERT_RT_OK(rtModuleUnload(m));
        for (unsigned g = 0; g < 4; ++g) {
            double want = 0;
            for (unsigned i = g * 64; i < g * 64 + 64; ++i) want += in[i];
            ASSERT_EQ(got[g], want) << "round " << round << " group " << g;
        }
    }
}

TEST_P(KernelGroups, BarrierKernelsNeedWholeWorkGroups) {
    for (const char* name : {"reverse_items", "reverse_flat"}) {
        rtFunction_t f = fn(name);
        DevBuf a(4096 * 4), b(4096 * 4);
        void* pa = a.get();
        void* pb = b.get();
        void* args[] = {&pa, &pb};
        ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(f, dim(4), dim(64), args, 2, nullptr, 0, nullptr, 250));
        EXPECT_TRUE(contains(last_message(), std::string("kernel '") + name + "' uses work-group barriers"));
        EXPECT_TRUE(contains(last_message(), "global.x = 250 is not a multiple of block.x = 64"));
        ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(f, dim(4, 2), dim(8, 8), args, 2, nullptr, 0, nullptr, 32, 13));
        EXPECT_TRUE(contains(last_message(), "global.y = 13"));
        // Whole groups, given exactly, are fine.
        ASSERT_RT_OK(launch_ex(f, dim(4), dim(64), args, 2, nullptr, 0, nullptr, 256));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    }
}

TEST_P(KernelGroups, LocalMemoryOverTheDeviceLimitIsRefusedAtLaunch) {
    rtDeviceProp p{};
    ASSERT_RT_OK(rtGetDeviceProperties(&p, device()));
    ASSERT_EQ(p.local_memory_per_group, 48u * 1024u);
    DevBuf out(4096 * 4);
    void* po = out.get();
    void* args[] = {&po};
    rtModule_t m = nullptr;
    if (backend_of(device()) == "cuda") {  // ptxas refuses it first
        ASSERT_RT_ERROR(RT_ERROR_COMPILE_FAILED, rtModuleLoadSource(&m, kTooMuchLocal, nullptr));
    } else {
        ASSERT_RT_OK(rtModuleLoadSource(&m, kTooMuchLocal, nullptr));
        ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchKernel(fn("big_local", m), dim(1), dim(64), args, 0, nullptr));
        EXPECT_TRUE(contains(last_message(), "kernel 'big_local' needs 65536 bytes of local memory per work-group (65536 "
                                             "in its RT_LOCAL arrays + 0 dynamic shared_bytes), more than the 49152 bytes"));
        EXPECT_RT_OK(rtModuleUnload(m));
    }
    // Static and dynamic count together: 16 KiB + 32 KiB fits, 16 KiB + 33 KiB does not.
    rtFunction_t some = fn("some_local");
    ASSERT_RT_OK(rtLaunchKernel(some, dim(1), dim(64), args, 32 * 1024, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchKernel(some, dim(1), dim(64), args, 33 * 1024, nullptr));
    EXPECT_TRUE(contains(last_message(), "(16384 in its RT_LOCAL arrays + 33792 dynamic shared_bytes)"));
}

#ifdef RT_TEST_RUNTIME_COMPILE
TEST_P(KernelGroups, PrecompiledModulesKeepTheFormsAndLocalSizes) {
    if (backend_of(device()) != "cpu") GTEST_SKIP() << "a cpu module";
    char tmpl[] = "/tmp/rt-test-groups-precompiled-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl, src = dir + "/groups.cpp", so = dir + "/groups.so";
    {
        FILE* f = std::fopen(src.c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fputs(kSource, f);
        std::fclose(f);
    }
    const std::string cmd = "'" RT_TEST_RUNTIME_COMPILE "' '" + src + "' -o '" + so + "' > '" + dir + "/log' 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadFile(&m, so.c_str()));
    DevBuf a(64 * 4), b(64 * 4);
    void* pa = a.get();
    void* pb = b.get();
    void* args[] = {&pa, &pb};
    for (const char* name : {"reverse_items", "reverse_flat"}) {
        ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(fn(name, m), dim(2), dim(32), args, 2, nullptr, 0, nullptr, 60));
        EXPECT_TRUE(contains(last_message(), "uses work-group barriers"));
    }
    std::vector<int32_t> in(64);
    std::iota(in.begin(), in.end(), 0);
    ASSERT_RT_OK(rtMemcpy(pa, in.data(), 256, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtLaunchKernel(fn("reverse_flat", m), dim(2), dim(32), args, 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    std::vector<int32_t> out = read<int32_t>(b, 64);
    EXPECT_EQ(out[0], 31);
    EXPECT_EQ(out[32], 63);
    void* one[] = {&pa};
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchKernel(fn("some_local", m), dim(1), dim(64), one, 33 * 1024, nullptr));
    EXPECT_TRUE(contains(last_message(), "(16384 in its RT_LOCAL arrays"));
    EXPECT_RT_OK(rtModuleUnload(m));
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}
#endif

RT_INSTANTIATE_DEVICE_TEST(KernelGroups);

// ------------------------------------------------------------------------------ the front end's rules (any device)

struct Misuse {
    const char* what;
    const char* source;
    const char* message;
};

TEST(KernelGroupRules, MisuseIsAClearCompileErrorNamingTheLine) {
    const Misuse cases[] = {
        {"barrier in a device function", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_DEVICE void helper() {
    rt_barrier();
}
RT_KERNEL void k(int* p) { helper(); p[0] = 1; }
)rtsrc",
         "line 3: rt_barrier() is used outside a kernel body"},
        {"both forms", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_KERNEL void k(int* p) {
    rt_items(it) { p[it] = 1; }
    rt_barrier();
}
)rtsrc",
         "kernel 'k' uses both rt_items blocks (line 3) and rt_barrier() (line 4)"},
        {"nested blocks", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_KERNEL void k(int* p) {
    rt_items(it) {
        rt_items(jt) { p[jt] = 1; }
    }
}
)rtsrc",
         "line 4: kernel 'k': rt_items inside the rt_items block of line 3 (rt_items blocks do not nest)"},
        {"return in a block", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_KERNEL void k(int* p) {
    rt_items(it) {
        if (it == 3) return;
        p[it] = 1;
    }
}
)rtsrc",
         "line 4: kernel 'k': return inside the rt_items block of line 3"},
        {"local array in a block", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_KERNEL void k(int* p) {
    rt_items(it) { RT_LOCAL int t[4]; t[0] = 1; p[it] = t[0]; }
}
)rtsrc",
         "line 3: kernel 'k': RT_LOCAL inside the rt_items block of line 3"},
        {"initializer", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_KERNEL void k(int* p) {
    RT_LOCAL int t[4] = {1, 2, 3, 4};
    rt_barrier();
    p[0] = t[get_local_id(0)];
}
)rtsrc",
         "line 3: the RT_LOCAL array of kernel 'k' has an initializer"},
        {"local memory outside a kernel", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_DEVICE int helper() {
    RT_LOCAL int t[4];
    return t[0];
}
RT_KERNEL void k(int* p) { p[0] = helper(); }
)rtsrc",
         "line 3: RT_LOCAL is used outside a kernel body"},
        {"a local id in group code", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_KERNEL void k(float* o) {
    size_t g = get_local_id(0);
    rt_items(it) { o[get_global_id(0)] = (float)g; }
}
)rtsrc",
         "line 3: kernel 'k': get_local_id() in group code, outside its rt_items blocks"},
        {"a linear global id between blocks", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_KERNEL void k(float* o) {
    rt_items(it) { o[get_global_id(0)] = 1.0f; }
    const size_t g = get_global_linear_id();
    rt_items(it) { o[get_global_id(0)] += (float)g; }
}
)rtsrc",
         "line 4: kernel 'k': get_global_linear_id() in group code"},
        {"break of a block", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_KERNEL void k(int* p) {
    rt_items(it) {
        if (it == 3) break;
        p[it] = 1;
    }
}
)rtsrc",
         "line 4: kernel 'k': break inside the rt_items block of line 3, outside a loop or switch of the block"},
        {"a barrier through a macro", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
#define SYNC rt_barrier()
RT_KERNEL void k(int* p) {
    p[get_global_id(0)] = 1;
    SYNC;
}
)rtsrc",
         "line 2: the macro 'SYNC' uses rt_barrier: write rt_barrier(), rt_items blocks and RT_LOCAL arrays out"},
        {"a block through a continued macro", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
#define EACH(x) \
    rt_items(x)
RT_KERNEL void k(int* p) { EACH(it) { p[it] = 1; } }
)rtsrc",
         "line 3: the macro 'EACH' uses rt_items"},
        {"a local bound of the kernel body", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_KERNEL void k(float* o) {
    constexpr int N = 16;
    RT_LOCAL float t[N];
    rt_items(it) { t[it % N] = 1.0f; }
    rt_items(it) { o[get_global_id(0)] = t[it % N]; }
}
)rtsrc",
         "line 4: kernel 'k': the RT_LOCAL array of type `float[N]` uses 'N', declared in the kernel body (line 3)"},
        {"a local element type of the kernel body", R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_KERNEL void k(float* o) {
    struct Pair { float a, b; };
    RT_LOCAL Pair t[16];
    t[get_local_id(0)].a = 1.0f;
    rt_barrier();
    o[get_global_id(0)] = t[0].a;
}
)rtsrc",
         "line 4: kernel 'k': the RT_LOCAL array of type `Pair[16]` uses 'Pair', declared in the kernel body (line 3)"},
    };
    for (const Misuse& c : cases) {
        SCOPED_TRACE(c.what);
        rtModule_t m = nullptr;
        ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadSource(&m, c.source, nullptr));
        EXPECT_TRUE(contains(last_message(), c.message)) << last_message();
        EXPECT_EQ(m, nullptr);
    }
    // A -D option may not bring them in either (the front end does not see it).
    rtModule_t m = nullptr;
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtModuleLoadSource(&m, "RT_KERNEL void k(int* p) { SYNC; p[0] = 1; }\n", "-DSYNC=rt_barrier()"));
    EXPECT_TRUE(contains(last_message(), "kernel compile option '-DSYNC=rt_barrier()' is not accepted: a macro may not "
                                         "expand to rt_barrier"))
        << last_message();
    EXPECT_EQ(m, nullptr);
}

// rt_private takes its block's item only: another index would read another item's value on cpu and the thread's
// own on CUDA, so it does not compile on either.
constexpr const char* kPrivateByInteger = R"rtsrc(// RT_TEST_EXPECT_COMPILE_ERROR
RT_KERNEL void k(float* o) {
    rt_private<float> v;
    rt_items(it) { v[it] = (float)it; }
    rt_items(it) { o[get_global_id(0)] = v[it ^ 1]; }
}
)rtsrc";

TEST(KernelGroupRules, RtPrivateIndexedByAnythingButTheItemDoesNotCompile) {
    rtModule_t m = nullptr;
    ASSERT_RT_ERROR(RT_ERROR_COMPILE_FAILED, rtModuleLoadSource(&m, kPrivateByInteger, nullptr));
    EXPECT_TRUE(contains(last_message(), "rt_private<T> is indexed by the item of its rt_items block only: v[it]"))
        << last_message();
    EXPECT_EQ(m, nullptr);
}

// What the rules leave alone: a lambda's own return and a break of a loop inside a block, the ids inside lambdas
// and blocks, `it` as a number, and local bounds from file-scope constants and template parameters.
constexpr const char* kAllowed = R"rtsrc(
static constexpr int kTile = 8;
struct Pair { float a, b; };
RT_KERNEL void allowed(const int32_t* in, int32_t* out) {
    RT_LOCAL int32_t t[kTile * 2];
    RT_LOCAL Pair unused[2];
    (void)unused;
    const size_t base = get_group_id(0) * get_local_size(0);
    rt_private<int32_t> first;
    rt_items(it) {
        auto twice = [](int32_t x) { if (x < 0) return 0; return 2 * x; };
        int32_t found = -1;
        for (int32_t j = 0; j < 4; ++j) {
            if (in[base + it] == j) { found = j; break; }
        }
        switch (found) { case 0: found = 100; break; default: break; }
        first[it] = twice(found);
        t[it] = (int32_t)it;
    }
    rt_items(it) { out[get_global_id(0)] = first[it] + t[kTile * 2 - 1 - it]; }
}
template <class T, int N> RT_KERNEL void fill_local(T* out) {
    RT_LOCAL T t[N];
    rt_items(it) { t[it % N] = (T)1; }
    rt_items(it) { out[get_global_id(0)] = t[it % N]; }
}
RT_KERNEL_INSTANTIATE(fill_local_f4, fill_local<float, 4>);
)rtsrc";

TEST_P(KernelGroups, LambdasLoopBreaksAndFileScopeBoundsAreAllowed) {
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, kAllowed, nullptr));
    std::vector<int32_t> in(32);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i % 6) - 1;  // -1, 0, 1, 2, 3, 4, ...
    DevBuf a(in.size() * 4), b(in.size() * 4);
    ASSERT_RT_OK(rtMemcpy(a.get(), in.data(), in.size() * 4, RT_MEMCPY_HOST_TO_DEVICE));
    void* pa = a.get();
    void* pb = b.get();
    void* args[] = {&pa, &pb};
    ASSERT_RT_OK(rtLaunchKernel(fn("allowed", m), dim(2), dim(16), args, 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    const std::vector<int32_t> got = read<int32_t>(b, in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        const int32_t v = in[i], found = v >= 0 && v < 4 ? (v == 0 ? 100 : v) : -1;
        EXPECT_EQ(got[i], (found < 0 ? 0 : 2 * found) + static_cast<int32_t>(15 - i % 16)) << i;
    }
    void* out_args[] = {&pb};
    ASSERT_RT_OK(rtLaunchKernel(fn("fill_local_f4", m), dim(2), dim(16), out_args, 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_EQ(read<float>(b, 32), std::vector<float>(32, 1.0f));
    EXPECT_RT_OK(rtModuleUnload(m));
}

TEST_P(KernelGroups, TheWholeGroupMessageNeverProposesZeroItems) {
    rtFunction_t f = fn("reverse_items");
    DevBuf a(64 * 4), b(64 * 4);
    void* pa = a.get();
    void* pb = b.get();
    void* args[] = {&pa, &pb};
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(f, dim(1), dim(64), args, 2, nullptr, 0, nullptr, 10));
    EXPECT_TRUE(contains(last_message(), "global.x = 10 is not a multiple of block.x = 64 (launch 64 items)"))
        << last_message();
}

// ------------------------------------------------------------------------------ the flat form's failures (cpu)

class FlatFailures : public DeviceTest {};

TEST_P(FlatFailures, DivergentAssertTrapAndOverflowFailTheLaunchAndTheStreamRecovers) {
    if (backend_of(device()) != "cpu") GTEST_SKIP() << "cpu fibers";
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, kFlatFailures, nullptr));
    auto get = [&](const char* name) {
        rtFunction_t f = nullptr;
        EXPECT_RT_OK(rtModuleGetFunction(&f, m, name));
        return f;
    };
    DevBuf out(4096 * 4);
    void* po = out.get();
    {
        void* args[] = {&po};
        ASSERT_RT_OK(rtLaunchKernel(get("divergent"), dim(8), dim(16), args, 0, nullptr));
        ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(nullptr));
        EXPECT_TRUE(contains(last_message(), "kernel 'divergent'"));
        EXPECT_TRUE(contains(last_message(), "8 work-item(s) ended while 8 waited at rt_barrier()"));
    }
    {
        int32_t bad = 5;
        void* args[] = {&po, &bad};
        ASSERT_RT_OK(rtLaunchKernel(get("assert_flat"), dim(4), dim(32), args, 0, nullptr));
        ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(nullptr));
        EXPECT_TRUE(contains(last_message(), "rt_assert((int32_t)l != bad) failed"));
        bad = -1;  // the same kernel runs through once nothing fails
        ASSERT_RT_OK(rtLaunchKernel(get("assert_flat"), dim(4), dim(32), args, 0, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        std::vector<int32_t> v(128);
        ASSERT_RT_OK(rtMemcpy(v.data(), out.get(), v.size() * 4, RT_MEMCPY_DEVICE_TO_HOST));
        EXPECT_EQ(v, std::vector<int32_t>(128, 2));
    }
    {
        void* null = nullptr;
        void* args[] = {&null};
        ASSERT_RT_OK(rtLaunchKernel(get("segv_flat"), dim(2), dim(8), args, 0, nullptr));
        ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(nullptr));
        EXPECT_TRUE(contains(last_message(), "SIGSEGV"));
        EXPECT_FALSE(contains(last_message(), "stack overflow"));
    }
    {
        void* args[] = {&po};
        ASSERT_RT_OK(rtLaunchKernel(get("overflow_flat"), dim(1), dim(4), args, 0, nullptr));
        ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(nullptr));
        EXPECT_TRUE(contains(last_message(), "stack overflow"));
        EXPECT_TRUE(contains(last_message(), "fiber stacks"));
    }
    // The stream and the fibers are fine afterwards.
    {
        int32_t bad = -1;
        void* args[] = {&po, &bad};
        ASSERT_RT_OK(rtLaunchKernel(get("assert_flat"), dim(4), dim(32), args, 0, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    }
    {
        void* args[] = {&po};
        ASSERT_RT_OK(rtLaunchKernel(get("frames_flat"), dim(4), dim(32), args, 0, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        std::vector<int32_t> v(128);
        ASSERT_RT_OK(rtMemcpy(v.data(), out.get(), v.size() * 4, RT_MEMCPY_DEVICE_TO_HOST));
        for (int32_t i = 0; i < 128; ++i) {
            const int32_t l = i % 32;
            EXPECT_EQ(v[i], (4 * l + 3072) + (4 + 3072)) << i;
        }
    }
    EXPECT_RT_OK(rtModuleUnload(m));
}

// An rt_barrier() the front end cannot see (a macro of an included header) in a kernel it did not prepare for
// barriers: the launch fails naming the call, where the barrier hook would be missing.
TEST_P(FlatFailures, ABarrierTheFrontEndDidNotSeeFailsTheLaunch) {
    if (backend_of(device()) != "cpu") GTEST_SKIP() << "the cpu barrier hook";
    char tmpl[] = "/tmp/rt-test-groups-macro-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    {
        FILE* f = std::fopen((dir + "/sync.h").c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fputs("#define SYNC rt_barrier()\n", f);
        std::fclose(f);
    }
    const char* source = "#include \"sync.h\"\n"
                         "RT_KERNEL void hidden(int32_t* out) {\n"
                         "    out[get_global_id(0)] = 1;\n"
                         "    SYNC;\n"
                         "}\n";
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, source, ("-I" + dir).c_str()));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "hidden"));
    DevBuf out(64 * 4);
    void* po = out.get();
    void* args[] = {&po};
    ASSERT_RT_OK(rtLaunchKernel(f, dim(4), dim(16), args, 0, nullptr));
    ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(nullptr));
    EXPECT_TRUE(contains(last_message(), "rt_barrier() at kernel_source:4 in kernel 'hidden', which the front end did "
                                         "not see as using barriers (written through a macro?"))
        << last_message();
    EXPECT_RT_OK(rtModuleUnload(m));
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

RT_INSTANTIATE_DEVICE_TEST(FlatFailures);

// ------------------------------------------------------------------------------ cuda wiring (the fake driver)

/// The first cuda device, or -1 (no cuda backend, or no driver: the fake is named by RUNTIME_CUDA_DRIVER_LIB).
int cuda_device() {
    int n = 0;
    if (rtGetDeviceCount(&n) != RT_SUCCESS) return -1;
    for (int i = 0; i < n; ++i)
        if (backend_of(i) == "cuda") return i;
    return -1;
}

/// The fake driver's record of launches, when RUNTIME_CUDA_DRIVER_LIB names it (the runtime opened the same file).
fake_cuda_last_launch_fn fake_last_launch() {
    const char* lib = std::getenv("RUNTIME_CUDA_DRIVER_LIB");
    void* h = lib ? ::dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    return h ? reinterpret_cast<fake_cuda_last_launch_fn>(::dlsym(h, "fake_cuda_last_launch")) : nullptr;
}

TEST(KernelGroupsCuda, GroupKernelsAreMarkedAndDynamicLocalMemoryIsPassed) {
    const int dev = cuda_device();
    if (dev < 0) GTEST_SKIP() << "no cuda device (this file runs the fake driver under CTest when cuda is built)";
    ASSERT_RT_OK(rtSetDevice(dev));
    rtModule_t m = nullptr;
    const rtError_t loaded = rtModuleLoadSource(&m, kSource, nullptr);
    if (loaded == RT_ERROR_NOT_SUPPORTED) GTEST_SKIP() << "no NVRTC: " << last_message();
    ASSERT_RT_OK(loaded);
    rtDeviceProp p{};
    ASSERT_RT_OK(rtGetDeviceProperties(&p, dev));
    EXPECT_GT(p.local_memory_per_group, 0u);
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "sum_flat_dyn"));
    DevBuf a(1 << 16), b(1 << 16);
    void* pa = a.get();
    void* pb = b.get();
    void* args[] = {&pa, &pb};
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(f, dim(4), dim(64), args, 2, nullptr, 256, nullptr, 200));
    EXPECT_TRUE(contains(last_message(), "kernel 'sum_flat_dyn' uses work-group barriers"));
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchKernel(f, dim(4), dim(64), args, p.local_memory_per_group + 1, nullptr));
    EXPECT_TRUE(contains(last_message(), "bytes of local memory per work-group"));
    ASSERT_RT_OK(rtLaunchKernel(f, dim(4), dim(64), args, 256, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    if (fake_cuda_last_launch_fn last_launch = fake_last_launch()) {
        FakeCudaLaunch last{};
        ASSERT_TRUE(last_launch(&last));
        EXPECT_STREQ(last.kernel, "sum_flat_dyn");
        EXPECT_EQ(last.shared_bytes, 256u);
        EXPECT_EQ(last.block[0], 64u);
    }
    // The kernel's static __shared__ bytes come from the driver (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) and count.
    rtFunction_t some = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&some, m, "some_local"));
    void* one[] = {&pa};
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtLaunchKernel(some, dim(1), dim(64), one, p.local_memory_per_group - 16 * 1024 + 1, nullptr));
    EXPECT_TRUE(contains(last_message(), "kernel 'some_local' needs"));
    EXPECT_TRUE(contains(last_message(), "in its RT_LOCAL arrays + " +
                                             std::to_string(p.local_memory_per_group - 16 * 1024 + 1) + " dynamic"));
    // (ptxas may count a reserved KiB of the block's shared memory with the kernel's own.)
    ASSERT_RT_OK(rtLaunchKernel(some, dim(1), dim(64), one, p.local_memory_per_group - 18 * 1024, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    // The runtime's marker kernels are not kernels of the module.
    EXPECT_RT_ERROR(RT_ERROR_NOT_FOUND, rtModuleGetFunction(&f, m, "rt_group_v1_sum_flat_dyn"));
    EXPECT_RT_OK(rtModuleUnload(m));
    ASSERT_RT_OK(rtSetDevice(0));
}

}  // namespace
