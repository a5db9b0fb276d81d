// test_kernel_staging.cpp — cpu kernels with a staged twin (RT_ROW_STAGING, src/backends/cpu/cpu_entry.h): which launches stream their rows, where the rows land, faults (run with RUNTIME_CPU_STREAM_MIN_BYTES=64K).
#include "test_util.hpp"

#include <cmath>
#include <cstring>

using namespace rt_test;

namespace {

constexpr unsigned long long kStreamMin = 64 * 1024;  // CTest's RUNTIME_CPU_STREAM_MIN_BYTES for this file

/// Kernels with hand-written twins that store something the kernel itself does not (+1000, +1), so each
/// test sees which of the two ran; @runtime.jit generates twins that store the same values.
const char* const kSource = R"rtsrc(
// 1-D: out[i] = in[i] * 2; the twin stores in[i] * 2 + 1000.
RT_KERNEL void twice(float* out, const float* in) {
    int64_t i = (int64_t)get_global_id(0);
    out[i] = in[i] * 2.0f;
}
#if RT_ROW_STAGING  // the twins are cpu-only: CUDA compiles the kernels alone
struct rt_staging_twice { enum { count = 1, clipped = 0 }; static constexpr unsigned bytes[1] = {4}; };
void rt_staged_twice(unsigned char* rt_stage, float* out, const float* in) {
    int64_t i = (int64_t)get_global_id(0);
    ((float*)(rt_stage + 0 * RT_STAGE_BYTES))[get_local_id(0)] = in[i] * 2.0f + 1000.0f;
}
long long rt_row_twice(void** rt_dst, float* out, const float* in) {
    int64_t i = (int64_t)get_global_id(0);
    rt_dst[0] = (void*)&out[i];
    return 1LL << 62;
}
#endif

// 3-D, two outputs of different widths at an odd offset into rows of `pitch` elements, z planes of
// `plane` elements: a[o] = id code (double), b[o] = low byte of x + y (uint8); the twin adds 1 to each.
RT_KERNEL void code3(double* a, uint8_t* b, int64_t pitch, int64_t plane) {
    int64_t x = (int64_t)get_global_id(0), y = (int64_t)get_global_id(1), z = (int64_t)get_global_id(2);
    int64_t o = z * plane + y * pitch + x + 3;
    a[o] = (double)(z * 1000000 + y * 1000 + x);
    b[o] = (uint8_t)(x + y);
}
#if RT_ROW_STAGING  // the twins are cpu-only: CUDA compiles the kernels alone
struct rt_staging_code3 { enum { count = 2, clipped = 0 }; static constexpr unsigned bytes[2] = {8, 1}; };
void rt_staged_code3(unsigned char* rt_stage, double* a, uint8_t* b, int64_t pitch, int64_t plane) {
    int64_t x = (int64_t)get_global_id(0), y = (int64_t)get_global_id(1), z = (int64_t)get_global_id(2);
    ((double*)(rt_stage + 0 * RT_STAGE_BYTES))[get_local_id(0)] = (double)(z * 1000000 + y * 1000 + x) + 1.0;
    ((uint8_t*)(rt_stage + 1 * RT_STAGE_BYTES))[get_local_id(0)] = (uint8_t)(x + y + 1);
}
long long rt_row_code3(void** rt_dst, double* a, uint8_t* b, int64_t pitch, int64_t plane) {
    int64_t x = (int64_t)get_global_id(0), y = (int64_t)get_global_id(1), z = (int64_t)get_global_id(2);
    int64_t o = z * plane + y * pitch + x + 3;
    rt_dst[0] = (void*)&a[o];
    rt_dst[1] = (void*)&b[o];
    return 1LL << 62;
}
#endif

// Guarded: if (i < n) out[i] = in[i] * 2. The twin, the kernel without its guard, stores in[i] * 2 + 1000;
// the row function clips each row to the items below n.
RT_KERNEL void guarded(float* out, const float* in, int64_t n) {
    int64_t i = (int64_t)get_global_id(0);
    if (i < n) out[i] = in[i] * 2.0f;
}
#if RT_ROW_STAGING
struct rt_staging_guarded { enum { count = 1, clipped = 1 }; static constexpr unsigned bytes[1] = {4}; };
void rt_staged_guarded(unsigned char* rt_stage, float* out, const float* in, int64_t n) {
    int64_t i = (int64_t)get_global_id(0);
    ((float*)(rt_stage + 0 * RT_STAGE_BYTES))[get_local_id(0)] = in[i] * 2.0f + 1000.0f;
}
long long rt_row_guarded(void** rt_dst, float* out, const float* in, int64_t n) {
    int64_t i = (int64_t)get_global_id(0);
    if (n - i <= 0) return 0;
    rt_dst[0] = (void*)&out[i];
    return n - i;
}
#endif

// A twin that traps (reads *bad) in the item given: faults of staged launches are reported like any other.
RT_KERNEL void trapping(float* out, const int64_t* bad, int64_t at) {
    int64_t i = (int64_t)get_global_id(0);
    out[i] = 1.0f;
}
#if RT_ROW_STAGING  // the twins are cpu-only: CUDA compiles the kernels alone
struct rt_staging_trapping { enum { count = 1, clipped = 0 }; static constexpr unsigned bytes[1] = {4}; };
void rt_staged_trapping(unsigned char* rt_stage, float* out, const int64_t* bad, int64_t at) {
    int64_t i = (int64_t)get_global_id(0);
    ((float*)(rt_stage + 0 * RT_STAGE_BYTES))[get_local_id(0)] = i == at ? (float)*bad : 2.0f;
}
long long rt_row_trapping(void** rt_dst, float* out, const int64_t* bad, int64_t at) {
    int64_t i = (int64_t)get_global_id(0);
    rt_dst[0] = (void*)&out[i];
    return 1LL << 62;
}
#endif
)rtsrc";

class Staging : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kSource, nullptr));
        ASSERT_RT_OK(rtStreamCreate(&stream_));
    }
    void TearDown() override {
        if (stream_) {
            EXPECT_RT_OK(rtStreamDestroy(stream_));
        }
        if (module_) {
            EXPECT_RT_OK(rtModuleUnload(module_));
        }
        for (void* p : mems_) EXPECT_RT_OK(rtFree(p));
    }
    rtFunction_t fn(const char* name) {
        rtFunction_t f = nullptr;
        EXPECT_RT_OK(rtModuleGetFunction(&f, module_, name));
        return f;
    }
    template <class T>
    T* device(size_t count) {
        void* p = nullptr;
        EXPECT_RT_OK(rtMalloc(&p, count * sizeof(T)));
        mems_.push_back(p);
        return static_cast<T*>(p);
    }
    template <class T>
    std::vector<T> host(const T* d, size_t count) {
        std::vector<T> h(count);
        EXPECT_RT_OK(rtMemcpy(h.data(), d, count * sizeof(T), RT_MEMCPY_DEVICE_TO_HOST));
        return h;
    }

    rtModule_t module_ = nullptr;
    rtStream_t stream_ = nullptr;
    std::vector<void*> mems_;
};

/// Runs `twice` over n items (block `block`) into a buffer of n + 64 floats whose tail must stay untouched.
std::vector<float> run_twice(Staging& t, rtFunction_t f, rtStream_t s, size_t n, unsigned block,
                             std::vector<float>* tail_out) {
    (void)t;
    std::vector<float> in(n);
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i % 1013);
    void *din = nullptr, *dout = nullptr;
    EXPECT_RT_OK(rtMalloc(&din, n * sizeof(float)));
    EXPECT_RT_OK(rtMalloc(&dout, (n + 64) * sizeof(float)));
    EXPECT_RT_OK(rtMemcpy(din, in.data(), n * sizeof(float), RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_RT_OK(rtMemset(dout, 0xFF, (n + 64) * sizeof(float)));  // NaN everywhere
    void* args[] = {&dout, &din};
    unsigned grid = static_cast<unsigned>((n + block - 1) / block);
    EXPECT_RT_OK(launch_ex(f, {grid, 1, 1}, {block, 1, 1}, args, 2, nullptr, 0, s, n));
    EXPECT_RT_OK(rtStreamSynchronize(s));
    std::vector<float> out(n + 64);
    EXPECT_RT_OK(rtMemcpy(out.data(), dout, out.size() * sizeof(float), RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_RT_OK(rtFree(din));
    EXPECT_RT_OK(rtFree(dout));
    tail_out->assign(out.begin() + static_cast<long>(n), out.end());
    out.resize(n);
    for (size_t i = 0; i < n; ++i) out[i] -= in[i] * 2.0f;  // 0: the kernel ran; 1000: the twin did
    return out;
}

TEST_F(Staging, LaunchesBelowTheThresholdRunTheKernel) {
    size_t n = kStreamMin / sizeof(float) - 1;  // one float short of the threshold
    std::vector<float> tail;
    std::vector<float> diff = run_twice(*this, fn("twice"), stream_, n, 256, &tail);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(diff[i], 0.0f) << "item " << i;
    for (float v : tail) ASSERT_TRUE(std::isnan(v)) << "written past the global size";
}

TEST_F(Staging, LaunchesAtTheThresholdStreamEveryRowToItsPlace) {
    // Sizes and blocks that leave partial groups, rows shorter than a cache line and rows that start
    // mid-line: every item lands once, at its own address, and nothing past the end is written.
    for (auto [n, block] : std::vector<std::pair<size_t, unsigned>>{
             {kStreamMin / 4, 256}, {kStreamMin / 4 + 5, 1000}, {kStreamMin / 4 + 777, 7}, {300001, 1024}, {100003, 1}}) {
        SCOPED_TRACE("n = " + std::to_string(n) + ", block = " + std::to_string(block));
        std::vector<float> tail;
        std::vector<float> diff = run_twice(*this, fn("twice"), stream_, n, block, &tail);
        size_t wrong = 0;
        for (size_t i = 0; i < n; ++i) wrong += diff[i] != 1000.0f;
        EXPECT_EQ(wrong, 0u) << "items not written by the staged twin (first: " << diff[0] << ")";
        for (float v : tail) ASSERT_TRUE(std::isnan(v)) << "written past the global size";
    }
}

TEST_F(Staging, AGuardedKernelRunsItsTwinOverTheItemsThatPassTheGuardAtAnySize) {
    // Clipped rows run the twin (which vectorises) below the threshold too, copying plainly; above it they
    // stream. Either way only the items below n are written.
    for (auto [global, n] : std::vector<std::pair<size_t, int64_t>>{{5000, 3001}, {40000, 30001}, {40000, 0},
                                                                     {1030, 1030}, {1030, 1}}) {
        SCOPED_TRACE("global = " + std::to_string(global) + ", n = " + std::to_string(n));
        float* in = device<float>(global);
        float* out = device<float>(global + 16);
        std::vector<float> h_in(global);
        for (size_t i = 0; i < global; ++i) h_in[i] = static_cast<float>(i % 977);
        ASSERT_RT_OK(rtMemcpy(in, h_in.data(), global * sizeof(float), RT_MEMCPY_HOST_TO_DEVICE));
        ASSERT_RT_OK(rtMemset(out, 0xFF, (global + 16) * sizeof(float)));
        void* args[] = {&out, &in, &n};
        ASSERT_RT_OK(launch_ex(fn("guarded"), {static_cast<unsigned>((global + 1023) / 1024), 1, 1}, {1024, 1, 1}, args,
                               3, nullptr, 0, stream_, global));
        ASSERT_RT_OK(rtStreamSynchronize(stream_));
        std::vector<float> h = host(out, global + 16);
        size_t wrong = 0, stray = 0;
        for (size_t i = 0; i < global + 16; ++i) {
            if ((int64_t)i < n) wrong += h[i] != h_in[i] * 2.0f + 1000.0f;
            else stray += !std::isnan(h[i]);
        }
        EXPECT_EQ(wrong, 0u) << "items below n not written by the twin";
        EXPECT_EQ(stray, 0u) << "items at or past n written";
    }
}

TEST_F(Staging, ThreeDimensionalRowsOfTwoOutputsAtOddOffsets) {
    const unsigned long long gx = 1029, gy = 37, gz = 3;  // x: whole groups and a partial one
    const int64_t pitch = 1100, plane = pitch * 40;
    const size_t count = static_cast<size_t>(plane * 3 + 16);
    double* a = device<double>(count);
    uint8_t* b = device<uint8_t>(count);
    ASSERT_GE(gx * gy * gz * 9, kStreamMin) << "the launch must stream";
    ASSERT_RT_OK(rtMemset(a, 0, count * sizeof(double)));
    ASSERT_RT_OK(rtMemset(b, 0xEE, count));
    void* args[] = {&a, &b, const_cast<int64_t*>(&pitch), const_cast<int64_t*>(&plane)};
    for (unsigned bx : {256u, 100u}) {
        for (unsigned by : {1u, 4u}) {
            SCOPED_TRACE("block " + std::to_string(bx) + " x " + std::to_string(by));
            rtDim3 block{bx, by, 1};
            rtDim3 grid{static_cast<unsigned>((gx + bx - 1) / bx), static_cast<unsigned>((gy + by - 1) / by),
                        static_cast<unsigned>(gz)};
            ASSERT_RT_OK(launch_ex(fn("code3"), grid, block, args, 4, nullptr, 0, stream_, gx, gy, gz));
            ASSERT_RT_OK(rtStreamSynchronize(stream_));
            std::vector<double> ha = host(a, count);
            std::vector<uint8_t> hb = host(b, count);
            size_t wrong = 0, stray = 0;
            std::vector<char> item(count, 0);
            for (int64_t z = 0; z < (int64_t)gz; ++z)
                for (int64_t y = 0; y < (int64_t)gy; ++y)
                    for (int64_t x = 0; x < (int64_t)gx; ++x) {
                        int64_t o = z * plane + y * pitch + x + 3;
                        item[o] = 1;
                        wrong += ha[o] != (double)(z * 1000000 + y * 1000 + x) + 1.0;
                        wrong += hb[o] != (uint8_t)(x + y + 1);
                    }
            for (size_t o = 0; o < count; ++o)
                if (!item[o]) stray += ha[o] != 0.0 || hb[o] != 0xEE;
            EXPECT_EQ(wrong, 0u) << "outputs not at their item's address";
            EXPECT_EQ(stray, 0u) << "bytes written outside the items' addresses";
        }
    }
}

TEST_F(Staging, AFaultInAStagedLaunchIsReportedAndTheStreamRecovers) {
    const size_t n = kStreamMin;  // 4 bytes per item: streams
    float* out = device<float>(n);
    int64_t* bad = nullptr;
    int64_t at = 40000;
    void* args[] = {&out, &bad, &at};
    ASSERT_RT_OK(launch_ex(fn("trapping"), {static_cast<unsigned>(n / 256), 1, 1}, {256, 1, 1}, args, 3, nullptr, 0,
                           stream_, n));
    ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(stream_));
    std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "trapping")) << msg;
    EXPECT_TRUE(contains(msg, "SIGSEGV")) << msg;

    at = -1;  // no item traps: the same launch now completes, staged
    ASSERT_RT_OK(launch_ex(fn("trapping"), {static_cast<unsigned>(n / 256), 1, 1}, {256, 1, 1}, args, 3, nullptr, 0,
                           stream_, n));
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    std::vector<float> h = host(out, n);
    size_t wrong = 0;
    for (float v : h) wrong += v != 2.0f;
    EXPECT_EQ(wrong, 0u);
}

TEST_F(Staging, StreamedOutputIsVisibleToTheNextOperationOnTheStream) {
    // Streaming stores are weakly ordered: a copy queued right behind the launch must see all of them.
    const size_t n = 1 << 20;
    float* in = device<float>(n);
    float* out = device<float>(n);
    std::vector<float> ones(n, 1.0f), back(n, 0.0f);
    ASSERT_RT_OK(rtMemcpy(in, ones.data(), n * sizeof(float), RT_MEMCPY_HOST_TO_DEVICE));
    void* args[] = {&out, &in};
    for (int round = 0; round < 5; ++round) {
        ASSERT_RT_OK(rtMemsetAsync(out, 0, n * sizeof(float), stream_));
        ASSERT_RT_OK(launch_ex(fn("twice"), {static_cast<unsigned>(n / 1024), 1, 1}, {1024, 1, 1}, args, 2, nullptr, 0,
                               stream_, n));
        ASSERT_RT_OK(rtMemcpyAsync(back.data(), out, n * sizeof(float), RT_MEMCPY_DEVICE_TO_HOST, stream_));
        ASSERT_RT_OK(rtStreamSynchronize(stream_));
        size_t wrong = 0;
        for (float v : back) wrong += v != 1002.0f;
        ASSERT_EQ(wrong, 0u) << "round " << round;
    }
}

}  // namespace
