// test_cpu_entry.cpp — the cpu target's entry code (src/backends/cpu/cpu_entry.h) compiled alone, warning-clean
// (-Werror), and run directly: the work-group loop runs exactly the global size, unpacks arguments by value, stops
// at a failed rt_assert, and streams or copies staged rows.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

// What a generated module places before the entry code: the ABI, the prelude, the kernel struct.
#include "backends/cpu/cpu_kernel_abi.h"
#include "runtime/kernel.h"

struct Pair {
    int a;
    double b;
};

struct rt_module_ : rt_kernel_base_ {
    void ids(unsigned* out, unsigned width) {
        const size_t x = get_global_id(0), y = get_global_id(1);
        out[y * width + x] = static_cast<unsigned>(1 + x + 100 * y + 10000 * get_local_id(0));
    }
    void by_value(double* out, Pair p, char c) { out[get_global_id(0)] = p.a + p.b + c; }
    void checked(int* out) {
        const size_t i = get_global_id(0);
        rt_assert(i != 5);
        out[i] = 1;
    }
    // A kernel with a staged twin, as @runtime.jit's cpu staging pass writes it: out[i] = in[i] + 1.
    void inc(const float* in, float* out) { out[get_global_id(0)] = in[get_global_id(0)] + 1.0f; }
    struct rt_staging_inc { enum { count = 1, clipped = 0 }; static constexpr unsigned bytes[1] = {4}; };
    void rt_staged_inc(unsigned char* rt_stage, const float* in, float* out) {
        (void)out;
        ((float*)(rt_stage + 0 * RT_STAGE_BYTES))[get_local_id(0)] = in[get_global_id(0)] + 1.0f;
    }
    long long rt_row_inc(void** rt_dst, const float* in, float* out) {
        (void)in;
        rt_dst[0] = (void*)&out[get_global_id(0)];
        return 1LL << 62;
    }
};

#include "backends/cpu/cpu_entry.h"

extern "C" void entry_ids(const rt_cpu_launch* L, void* const* args) {
    rt_sig_<decltype(&rt_module_::ids)>::run<&rt_module_::ids>(L, args);
}
extern "C" void entry_by_value(const rt_cpu_launch* L, void* const* args) {
    rt_sig_<decltype(&rt_module_::by_value)>::run<&rt_module_::by_value>(L, args);
}
extern "C" void entry_checked(const rt_cpu_launch* L, void* const* args) {
    rt_sig_<decltype(&rt_module_::checked)>::run<&rt_module_::checked>(L, args);
}
extern "C" void entry_inc(const rt_cpu_launch* L, void* const* args) {
    typedef rt_sig_<decltype(&rt_module_::inc)> S;
    S::run_staged<&rt_module_::inc, &rt_module_::rt_staged_inc, &rt_module_::rt_row_inc, rt_module_::rt_staging_inc>(L, args);
}

namespace {

rt_cpu_launch launch(unsigned gx, unsigned gy, unsigned bx, unsigned by, unsigned long long globx,
                     unsigned long long globy, rt_cpu_fault* fault) {
    rt_cpu_launch L{};
    L.grid[0] = gx, L.grid[1] = gy, L.grid[2] = 1;
    L.block[0] = bx, L.block[1] = by, L.block[2] = 1;
    L.global[0] = globx, L.global[1] = globy, L.global[2] = 1;
    L.group_begin = 0;
    L.group_end = 1ull * gx * gy;
    L.fault = fault;
    L.stream_min_bytes = ~0ull;
    return L;
}

}  // namespace

TEST(CpuEntry, RunsExactlyTheGlobalSizeInTwoDimensions) {
    const unsigned width = 12, height = 7;  // 3 x 2 groups of 5 x 4: the last group of each dimension is partial
    std::vector<unsigned> out(width * height + 64, 0);
    rt_cpu_fault fault{};
    rt_cpu_launch L = launch(3, 2, 5, 4, 12, 7, &fault);
    unsigned* p = out.data();
    unsigned w = width;
    void* args[] = {&p, &w};
    entry_ids(&L, args);
    for (unsigned y = 0; y < height; ++y)
        for (unsigned x = 0; x < width; ++x)
            ASSERT_EQ(out[y * width + x], 1 + x + 100 * y + 10000 * (x % 5)) << x << "," << y;
    for (size_t i = width * height; i < out.size(); ++i) ASSERT_EQ(out[i], 0u) << "an item past the global size ran";
    EXPECT_EQ(fault.failed, 0);
}

TEST(CpuEntry, UnpacksArgumentsByValue) {
    std::vector<double> out(4, 0);
    double* p = out.data();
    Pair pair{3, 0.5};
    char c = 2;
    void* args[] = {&p, &pair, &c};
    rt_cpu_fault fault{};
    rt_cpu_launch L = launch(1, 1, 4, 1, 4, 1, &fault);
    entry_by_value(&L, args);
    for (double v : out) EXPECT_EQ(v, 5.5);
    EXPECT_EQ((rt_sig_<decltype(&rt_module_::by_value)>::count), 3);
    EXPECT_EQ((rt_sig_<decltype(&rt_module_::by_value)>::sizes[1]), sizeof(Pair));
}

TEST(CpuEntry, AFailedAssertIsRecordedAndStopsLaterGroups) {
    std::vector<int> out(64, 0);
    int* p = out.data();
    void* args[] = {&p};
    rt_cpu_fault fault{};  // abandon unset: the failing item goes on, as without the runtime's trap handler
    rt_cpu_launch L = launch(16, 1, 4, 1, 64, 1, &fault);
    entry_checked(&L, args);
    EXPECT_EQ(fault.failed, 1);
    EXPECT_STREQ(fault.expr, "i != 5");
    EXPECT_EQ(out[4], 1);
    EXPECT_EQ(out[8], 0) << "no group starts after the one that failed";
}

TEST(CpuEntry, StagedRowsAreCopiedPlainlyOrStreamed) {
    for (unsigned long long stream_min : {~0ull, 0ull}) {
        const unsigned n = 1000;
        std::vector<float> in(n), out(n + 16, -1.0f);
        for (unsigned i = 0; i < n; ++i) in[i] = static_cast<float>(i);
        const float* ip = in.data();
        float* op = out.data();
        void* args[] = {&ip, &op};
        rt_cpu_fault fault{};
        rt_cpu_launch L = launch(4, 1, 256, 1, n, 1, &fault);
        L.stream_min_bytes = stream_min;
        entry_inc(&L, args);
        for (unsigned i = 0; i < n; ++i) ASSERT_EQ(out[i], in[i] + 1.0f) << i << " stream_min " << stream_min;
        for (unsigned i = n; i < n + 16; ++i) ASSERT_EQ(out[i], -1.0f) << "a staged row ran past the global size";
    }
}
