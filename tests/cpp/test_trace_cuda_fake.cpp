// test_trace_cuda_fake.cpp — the trace of cuda streams on the fake CUDA driver (tests/fake_cuda): every operation is a
// span timed by the timing events around it (no host function per operation), in stream order; the events come from
// a bounded pool that is reused; past the bound operations are left out, not mistimed; a stop with work still queued
// returns; failures mark the spans of the operations behind them.
#include <dlfcn.h>

#include <runtime/profiler.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "../fake_cuda/fake_cuda.h"
#include "fake_cuda_api.hpp"
#include "test_util.hpp"
#include "trace_json.hpp"

namespace {

using namespace rt_test;
using namespace rt_test::trace_json;

/// The fake's query API, from the library the runtime loaded (dlopen of the same path: the same instance).
struct Fake {
    fake_cuda_host_func_count_fn host_func_count = nullptr;
    fake_cuda_set_kernel_time_ns_fn set_kernel_time_ns = nullptr;
    fake_cuda_event_create_count_fn event_create_count = nullptr;
    fake_cuda_elapsed_time_count_fn elapsed_time_count = nullptr;
    bool loaded = false;
};

const Fake& fake() {
    static const Fake f = [] {
        Fake r;
        r.loaded = fake_cuda_symbol(r.host_func_count, "fake_cuda_host_func_count") &
                   fake_cuda_symbol(r.set_kernel_time_ns, "fake_cuda_set_kernel_time_ns") &
                   fake_cuda_symbol(r.event_create_count, "fake_cuda_event_create_count") &
                   fake_cuda_symbol(r.elapsed_time_count, "fake_cuda_elapsed_time_count");
        return r;
    }();
    return f;
}

constexpr const char* kKernels = "RT_KERNEL void noop() {}\n";
constexpr long long kKernelNs = 3000000;      // the device time each kernel "takes" in TimedByTheGpusEvents
constexpr size_t kMaxTraced = 4096;            // CudaQueue::kMaxTraced
constexpr const char* kWriter = "the trace writer";

/// A fresh runtime on cuda:0 (the fake), a module with `noop`, a trace file per test.
class TraceCudaFake : public ::testing::Test {
protected:
    void SetUp() override {
#ifndef RUNTIME_HAVE_CUDA
        GTEST_SKIP() << "this build has no cuda backend";
#endif
        if (!fake().loaded) GTEST_SKIP() << "RUNTIME_CUDA_DRIVER_LIB does not name the fake CUDA driver";
        ASSERT_RT_OK(rtFinalize());
        int cuda = -1;
        ASSERT_RT_OK(rtGetDeviceByName(&cuda, "cuda:0"));
        ASSERT_RT_OK(rtSetDevice(cuda));
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kKernels, nullptr));
        ASSERT_RT_OK(rtModuleGetFunction(&noop_, module_, "noop"));
        ASSERT_RT_OK(rtStreamCreate(&s_));
        path_ = temp_path(::testing::UnitTest::GetInstance()->current_test_info()->name() + std::string(".json"));
    }
    void TearDown() override {
        if (fake().loaded) fake().set_kernel_time_ns(0);
        if (s_) {
            EXPECT_RT_OK(rtStreamDestroy(s_));
        }
        if (module_) {
            EXPECT_RT_OK(rtModuleUnload(module_));
        }
        rtFinalize();
        std::remove(path_.c_str());
    }
    void launch() { ASSERT_RT_OK(rtLaunchKernel(noop_, rtDim3{1, 1, 1}, rtDim3{32, 1, 1}, nullptr, 0, s_)); }
    /// Waits until the fake has answered `n` more cuEventElapsedTime calls than `base` (the writer resolving pairs:
    /// two a span), or fails after 60 s.
    static void await_resolved(int base, int n) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (fake().elapsed_time_count() - base < n) {
            ASSERT_LT(std::chrono::steady_clock::now(), until) << kWriter << " resolved "
                                                                << fake().elapsed_time_count() - base << " of " << n;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    /// The spans of this test's stream (the track of its first kernel span), by operation number.
    static std::vector<const Json*> stream_spans(const std::vector<Json>& ev) {
        std::vector<const Json*> kernels = select(ev, "X", "kernel"), out;
        if (kernels.empty()) return out;
        const double tid = (*kernels[0])["tid"].n;
        for (const Json* e : select(ev, "X"))
            if ((*e)["tid"].n == tid && (*e)["args"].has("op")) out.push_back(e);
        std::sort(out.begin(), out.end(), [](const Json* a, const Json* b) {
            return (*a)["args"]["op"].n < (*b)["args"]["op"].n;
        });
        return out;
    }
    /// Spans in stream order never overlap (the file's times have 1 ns steps).
    static void expect_in_order(const std::vector<const Json*>& spans) {
        for (size_t i = 1; i < spans.size(); ++i) {
            const Json& a = *spans[i - 1];
            const Json& b = *spans[i];
            EXPECT_LE(a["ts"].n + a["dur"].n, b["ts"].n + 0.0015)
                << a["name"].str() << " (op " << a["args"]["op"].n << ") overlaps " << b["name"].str();
        }
    }

    rtModule_t module_ = nullptr;
    rtFunction_t noop_ = nullptr;
    rtStream_t s_ = nullptr;
    std::string path_;
    Watchdog watchdog_{std::chrono::milliseconds(90000), "TraceCudaFake test"};
};

void nothing(void*) {}

void fail_here(void*) { rtHostFuncSetError(RT_ERROR_UNKNOWN, "the test's host function fails"); }

TEST_F(TraceCudaFake, EveryOperationIsASpanTimedByTheGpusEvents) {
    constexpr size_t n = 4096;
    void* dev = nullptr;
    void* host = nullptr;
    ASSERT_RT_OK(rtMalloc(&dev, n));
    ASSERT_RT_OK(rtMallocHost(&host, n));
    std::memset(host, 7, n);
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtEventCreate(&e));
    // A graph of one kernel node.
    rtGraph_t g = nullptr;
    rtGraphExec_t x = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    rtKernelNodeParams kp{};
    kp.function = noop_;
    kp.grid = rtDim3{1, 1, 1};
    kp.block = rtDim3{32, 1, 1};
    rtGraphNode_t node = nullptr;
    ASSERT_RT_OK(rtGraphAddKernelNode(&node, g, nullptr, 0, &kp));
    ASSERT_RT_OK(rtGraphInstantiate(&x, g, 0));
    fake().set_kernel_time_ns(kKernelNs);

    const int host_funcs = fake().host_func_count();
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY));
    ASSERT_RT_OK(rtMemcpyAsync(dev, host, n, RT_MEMCPY_HOST_TO_DEVICE, s_));
    ASSERT_RT_OK(rtMemsetAsync(dev, 1, n, s_));
    launch();
    ASSERT_RT_OK(rtLaunchHostFunc(s_, nothing, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(s_));  // the record below then captures no failure (no host function for it)
    ASSERT_RT_OK(rtEventRecord(e, s_));
    ASSERT_RT_OK(rtStreamWaitEvent(s_, e));
    ASSERT_RT_OK(rtGraphLaunch(x, s_));
    ASSERT_RT_OK(rtMemcpyAsync(host, dev, n, RT_MEMCPY_DEVICE_TO_HOST, s_));
    ASSERT_RT_OK(rtStreamSynchronize(s_));
    ASSERT_RT_OK(rtProfilerStop());
    EXPECT_EQ(fake().host_func_count() - host_funcs, 1) << "the program's own host function only: none for tracing";

    const std::vector<Json> ev = read_trace(path_);
    const std::vector<const Json*> spans = stream_spans(ev);
    const std::vector<std::string> expected = {"memcpy HtoD", "memset", "noop", "host function", "event record",
                                               "event wait", "graph launch", "memcpy DtoH"};
    ASSERT_EQ(spans.size(), expected.size()) << "one span per operation on the stream's track";
    for (size_t i = 0; i < spans.size(); ++i) {
        const Json& sp = *spans[i];
        EXPECT_EQ(sp["name"].str(), expected[i]) << "op " << i;
        EXPECT_EQ(sp["args"]["status"].str(), "ok") << expected[i];
        if (i > 0) {
            EXPECT_GT(sp["args"]["op"].n, (*spans[i - 1])["args"]["op"].n);
        }
    }
    expect_in_order(spans);
    // The kernel and the graph's kernel node took 3 ms of device time and no host time: only the GPU's events know.
    const double kernel_us = kKernelNs / 1000.0;
    EXPECT_GE((*spans[2])["dur"].n, kernel_us - 0.5) << "the kernel's span is its events' distance";
    EXPECT_GE((*spans[6])["dur"].n, kernel_us - 0.5) << "the graph launch's span is its events' distance";
    EXPECT_GT((*spans[3])["ts"].n, (*spans[2])["ts"].n + kernel_us - 0.5)
        << "the host function started once the kernel's device time had passed";

    ASSERT_RT_OK(rtGraphExecDestroy(x));
    ASSERT_RT_OK(rtGraphDestroy(g));
    ASSERT_RT_OK(rtEventDestroy(e));
    ASSERT_RT_OK(rtFreeHost(host));
    ASSERT_RT_OK(rtFree(dev));
}

TEST_F(TraceCudaFake, TenThousandLaunchesReuseABoundedPoolOfEvents) {
    constexpr int kBatches = 10, kBatch = 1000;
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY));
    const int created = fake().event_create_count();
    const int resolved = fake().elapsed_time_count();
    for (int b = 0; b < kBatches; ++b) {
        for (int i = 0; i < kBatch; ++i) launch();
        ASSERT_RT_OK(rtStreamSynchronize(s_));
        // The writer gives the batch's events back before the next batch needs them (two elapsed times a span).
        await_resolved(resolved, 2 * kBatch * (b + 1));
    }
    const int events = fake().event_create_count() - created;
    ASSERT_RT_OK(rtProfilerStop());
    // A pair per launch in flight (one batch), plus the device's anchors (one a second).
    EXPECT_GE(events, 2);
    EXPECT_LE(events, 2 * kBatch + 60) << "events are reused, not created per operation (" << kBatches * kBatch
                                       << " launches)";
    const std::vector<Json> ev = read_trace(path_);
    const std::vector<const Json*> spans = stream_spans(ev);
    EXPECT_EQ(spans.size(), size_t(kBatches * kBatch));
    expect_in_order(spans);
}

TEST_F(TraceCudaFake, PastThePoolsBoundOperationsAreLeftOutNotMistimed) {
    Gate gate;
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY));
    ASSERT_RT_OK(gate.launch(s_));  // one traced operation, holding back the rest
    constexpr size_t kExtra = 100;
    for (size_t i = 0; i < kMaxTraced - 1 + kExtra; ++i) launch();  // never waits for the GPU
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s_));
    ASSERT_RT_OK(rtProfilerStop());
    const std::vector<Json> ev = read_trace(path_);
    const std::vector<const Json*> spans = stream_spans(ev);
    ASSERT_EQ(spans.size(), kMaxTraced) << "the gate and the launches that fit; the last " << kExtra << " are left out";
    EXPECT_EQ((*spans[0])["name"].str(), "host function");
    EXPECT_EQ(select(ev, "X", "kernel").size(), kMaxTraced - 1) << "no zero-length stand-ins at their enqueue";
    for (const Json* sp : spans) EXPECT_EQ((*sp)["args"]["status"].str(), "ok");
    expect_in_order(spans);
    // Operations left out ran, and the pool is usable again once the GPU caught up.
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY));
    launch();
    ASSERT_RT_OK(rtStreamSynchronize(s_));
    ASSERT_RT_OK(rtProfilerStop());
    EXPECT_EQ(stream_spans(read_trace(path_)).size(), 1u);
}

TEST_F(TraceCudaFake, AStopWithWorkStillQueuedReturnsAndSaysSkipped) {
    Gate gate;
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY));
    ASSERT_RT_OK(gate.launch(s_));
    for (int i = 0; i < 3; ++i) launch();
    ASSERT_RT_OK(rtProfilerStop()) << "returns after a bounded wait (the watchdog fails a hang)";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s_));
    const std::vector<Json> ev = read_trace(path_);
    std::vector<const Json*> spans;
    for (const Json* e : select(ev, "X"))
        if ((*e)["args"].has("op")) spans.push_back(e);
    ASSERT_EQ(spans.size(), 4u) << "the gate and three launches, never seen complete";
    for (const Json* sp : spans) {
        EXPECT_EQ((*sp)["args"]["status"].str(), "skipped") << (*sp)["name"].str();
        EXPECT_EQ((*sp)["dur"].n, 0.0);
    }
    std::sort(spans.begin(), spans.end(), [](const Json* a, const Json* b) {
        return (*a)["args"]["op"].n < (*b)["args"]["op"].n;
    });
    expect_in_order(spans);
}

TEST_F(TraceCudaFake, OperationsBehindAFailureAreFailedSpans) {
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY));
    const int resolved = fake().elapsed_time_count();
    launch();
    ASSERT_RT_OK(rtStreamSynchronize(s_));
    await_resolved(resolved, 2);  // stamped before the failure
    ASSERT_RT_OK(rtLaunchHostFunc(s_, fail_here, nullptr));
    launch();
    await_resolved(resolved, 6);  // both stamped while the stream's failure is pending
    EXPECT_NE(rtStreamSynchronize(s_), RT_SUCCESS) << "the host function's failure";
    ASSERT_RT_OK(rtProfilerStop());
    const std::vector<Json> ev = read_trace(path_);
    const std::vector<const Json*> spans = stream_spans(ev);
    ASSERT_EQ(spans.size(), 3u);
    EXPECT_EQ((*spans[0])["args"]["status"].str(), "ok");
    EXPECT_EQ((*spans[1])["name"].str(), "host function");
    EXPECT_EQ((*spans[1])["args"]["status"].str(), "failed");
    EXPECT_EQ((*spans[2])["args"]["status"].str(), "failed") << "the kernel ran behind the failed host function";
}

TEST_F(TraceCudaFake, ADestroyedStreamStampsItsLastSpans) {
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY));
    for (int i = 0; i < 3; ++i) launch();
    ASSERT_RT_OK(rtStreamDestroy(s_));  // before the writer's next pass, most likely: the queue stamps them itself
    s_ = nullptr;
    ASSERT_RT_OK(rtProfilerStop());
    const std::vector<Json> ev = read_trace(path_);
    const std::vector<const Json*> spans = stream_spans(ev);
    ASSERT_EQ(spans.size(), 3u);
    for (const Json* sp : spans) EXPECT_EQ((*sp)["args"]["status"].str(), "ok");
    expect_in_order(spans);
}

}  // namespace
