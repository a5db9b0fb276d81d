// Tests of the C++ API (runtime.hpp): RAII handles, move semantics, exceptions, host callables.
#include <runtime/runtime.hpp>

#include "test_cpp_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

using rt_cpp_test::all_devices;
using rt_cpp_test::eventually;

// ------------------------------------------------------------------------------- free functions

TEST(CppError, MessageIsNameColonDetail) {
    runtime::Error e(RT_ERROR_INVALID_VALUE, "size must be positive");
    EXPECT_EQ(e.code(), RT_ERROR_INVALID_VALUE);
    EXPECT_STREQ(e.what(), "RT_ERROR_INVALID_VALUE: size must be positive");
    EXPECT_STREQ(e.name(), "RT_ERROR_INVALID_VALUE");
    // An empty detail falls back to the code's description.
    runtime::Error f(RT_ERROR_OUT_OF_MEMORY, "");
    EXPECT_EQ(std::string(f.what()), std::string("RT_ERROR_OUT_OF_MEMORY: ") + rtGetErrorString(RT_ERROR_OUT_OF_MEMORY));
    // It is a std::runtime_error, catchable generically.
    EXPECT_THROW(throw runtime::Error(RT_ERROR_UNKNOWN, "x"), std::runtime_error);
}

TEST(CppError, CheckThrowsOnlyOnFailure) {
    EXPECT_NO_THROW(runtime::check(RT_SUCCESS));
    EXPECT_THROW(runtime::check(RT_ERROR_INVALID_HANDLE), runtime::Error);
    EXPECT_THROW(runtime::check(RT_ERROR_NOT_READY), runtime::Error); // only query methods absorb it
}

TEST(CppDevice, EnumerationAndProperties) {
    EXPECT_NO_THROW(runtime::init());
    const int n = runtime::device_count();
    ASSERT_GE(n, 1);
    EXPECT_EQ(runtime::current_device(), 0);
    for (int i = 0; i < n; ++i) {
        const auto p = runtime::device_properties(i);
        EXPECT_FALSE(p.name.empty());
        EXPECT_TRUE(p.backend == "cpu" || p.backend == "cuda") << p.backend;
        EXPECT_GT(p.total_memory, 0u);
        EXPECT_GT(p.compute_units, 0);
        EXPECT_EQ(p.device_index, i);
        if (p.backend == "cpu") {
            EXPECT_TRUE(p.unified_addressing);
        }
    }
    const auto current = runtime::device_properties();
    EXPECT_EQ(current.name, runtime::device_properties(0).name);
    const auto m = runtime::mem_info();
    EXPECT_GT(m.total, 0u);
    EXPECT_LE(m.free, m.total);
    EXPECT_NO_THROW(runtime::synchronize());
}

TEST(CppDevice, BadDeviceThrowsInvalidDevice) {
    const int n = runtime::device_count();
    EXPECT_RT_ERROR(runtime::set_device(n), RT_ERROR_INVALID_DEVICE);
    EXPECT_RT_ERROR(runtime::set_device(-1), RT_ERROR_INVALID_DEVICE);
    EXPECT_RT_ERROR(runtime::device_properties(n + 7), RT_ERROR_INVALID_DEVICE);
    EXPECT_EQ(runtime::current_device(), 0); // a failed set_device changes nothing
}

TEST(CppDevice, InitOptionsAreChecked) {
    EXPECT_RT_ERROR(runtime::init("no_such_option=1"), RT_ERROR_INVALID_VALUE);
}

TEST(CppDevice, HandlesMayOutliveFinalize) {
    auto stream = std::make_unique<runtime::Stream>();
    auto event = std::make_unique<runtime::Event>();
    auto buffer = std::make_unique<runtime::DeviceBuffer<int>>(16);
    auto pinned = std::make_unique<runtime::PinnedBuffer<int>>(16);
    stream->record(*event);
    runtime::finalize();
    // Destructors of handles the runtime already released must neither throw nor crash.
    stream.reset();
    event.reset();
    buffer.reset();
    pinned.reset();
    // The next call initialises again.
    runtime::Stream s;
    runtime::DeviceBuffer<int> d(4);
    std::vector<int> in{1, 2, 3, 4}, out(4);
    d.copy_from_host(in, s);
    d.copy_to_host(out, s);
    s.synchronize();
    EXPECT_EQ(in, out);
}

// ------------------------------------------------------------------------------- per device

class CppApi : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override { runtime::set_device(GetParam()); }
    void TearDown() override { runtime::set_device(0); }
};

TEST_P(CppApi, DeviceBufferSyncRoundTrip) {
    std::vector<float> in(1000), out(1000, -1.0f);
    std::iota(in.begin(), in.end(), 0.5f);
    runtime::DeviceBuffer<float> d(in.size());
    EXPECT_EQ(d.size(), 1000u);
    EXPECT_EQ(d.bytes(), 4000u);
    EXPECT_FALSE(d.empty());
    ASSERT_NE(d.data(), nullptr);
    d.copy_from_host(in);
    d.copy_to_host(out);
    EXPECT_EQ(in, out);
}

TEST_P(CppApi, DeviceBufferAsyncRoundTripWithPinned) {
    runtime::Stream s;
    runtime::PinnedBuffer<int> host(4096);
    ASSERT_EQ(host.size(), 4096u);
    std::iota(host.begin(), host.end(), 7);
    runtime::DeviceBuffer<int> d(host.size());
    runtime::PinnedBuffer<int> back(host.size());
    std::ranges::fill(back, 0);
    d.copy_from_host(host, s);
    d.copy_to_host(back, s);
    s.synchronize();
    EXPECT_TRUE(std::ranges::equal(host, back));
}

TEST_P(CppApi, BoundsAreCheckedByTheLibrary) {
    runtime::DeviceBuffer<float> d(4);
    std::vector<float> big(8, 1.0f);
    EXPECT_RT_ERROR(d.copy_from_host(big), RT_ERROR_INVALID_VALUE);
    EXPECT_RT_ERROR(d.copy_to_host(big), RT_ERROR_INVALID_VALUE);
    // A subrange that fits is fine.
    EXPECT_NO_THROW(d.copy_from_host(std::span<const float>(big).first(4)));
}

TEST_P(CppApi, TypedStreamCopyAndMemset) {
    runtime::Stream s;
    std::vector<std::uint8_t> host(256, 0xAB), back(256, 0);
    runtime::DeviceBuffer<std::uint8_t> a(256), b(256);
    s.copy(a, host);    // H2D
    s.copy(b, a);       // D2D
    s.memset(a, 0x11);  // does not disturb b
    s.copy(back, b);    // D2H
    s.synchronize();
    EXPECT_TRUE(std::ranges::all_of(back, [](auto v) { return v == 0xAB; }));
    s.copy(back, a);
    s.synchronize();
    EXPECT_TRUE(std::ranges::all_of(back, [](auto v) { return v == 0x11; }));
    // Subranges through span().
    s.memset(b.span().subspan(128), 0x22);
    s.copy(back, b);
    s.synchronize();
    EXPECT_EQ(back[127], 0xAB);
    EXPECT_EQ(back[128], 0x22);
    // Raw-pointer overload with an explicit kind.
    s.copy(back.data(), a.data(), 16, RT_MEMCPY_DEVICE_TO_HOST);
    s.synchronize();
    EXPECT_EQ(back[0], 0x11);
}

TEST_P(CppApi, TypedCopyRejectsSmallDestination) {
    runtime::Stream s;
    runtime::DeviceBuffer<int> d(4);
    std::vector<int> host(5, 1);
    EXPECT_RT_ERROR(s.copy(d, host), RT_ERROR_INVALID_VALUE);
    s.synchronize(); // nothing was queued, nothing failed
}

TEST_P(CppApi, DeviceBufferMoveTransfersOwnership) {
    runtime::DeviceBuffer<double> a(64);
    double* p = a.data();
    runtime::DeviceBuffer<double> b(std::move(a));
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(b.data(), p);
    EXPECT_EQ(b.size(), 64u);
    runtime::DeviceBuffer<double> c(8);
    c = std::move(b); // frees c's old allocation
    EXPECT_EQ(c.data(), p);
    EXPECT_EQ(b.data(), nullptr);
    runtime::DeviceBuffer<double> empty;
    EXPECT_TRUE(empty.empty());
    runtime::DeviceBuffer<double> zero(0);
    EXPECT_TRUE(zero.empty());
    static_assert(!std::is_copy_constructible_v<runtime::DeviceBuffer<double>>);
    static_assert(!std::is_copy_constructible_v<runtime::PinnedBuffer<double>>);
}

TEST_P(CppApi, PinnedBufferMoveAndSpan) {
    runtime::PinnedBuffer<float> a(16);
    std::span<float> view = a; // a contiguous range
    EXPECT_EQ(view.data(), a.data());
    EXPECT_EQ(view.size(), 16u);
    float* p = a.data();
    runtime::PinnedBuffer<float> b = std::move(a);
    EXPECT_EQ(b.data(), p);
    EXPECT_EQ(a.data(), nullptr);
    b[3] = 2.5f;
    EXPECT_EQ(b.span()[3], 2.5f);
}

TEST_P(CppApi, StreamMoveAndDefaultStream) {
    runtime::Stream a;
    rtStream_t h = a.native_handle();
    ASSERT_NE(h, nullptr);
    EXPECT_FALSE(a.is_default());
    runtime::Stream b(std::move(a));
    EXPECT_EQ(b.native_handle(), h);
    EXPECT_EQ(a.native_handle(), nullptr);
    runtime::Stream c;
    c = std::move(b); // destroys c's old stream
    EXPECT_EQ(c.native_handle(), h);
    EXPECT_TRUE(c.query());
    c.synchronize();

    auto d = runtime::Stream::default_stream();
    EXPECT_TRUE(d.is_default());
    EXPECT_EQ(d.native_handle(), nullptr);
    std::atomic<bool> ran{false};
    d.launch_host_func([&] { ran = true; });
    d.synchronize();
    EXPECT_TRUE(ran);
    static_assert(!std::is_copy_constructible_v<runtime::Stream>);
    static_assert(!std::is_copy_constructible_v<runtime::Event>);
}

TEST_P(CppApi, QueryReportsNotReadyWithoutThrowing) {
    runtime::Stream s;
    std::atomic<bool> release{false};
    s.launch_host_func([&] {
        while (!release.load()) std::this_thread::sleep_for(100us);
    });
    runtime::Event e;
    s.record(e);
    EXPECT_FALSE(s.query());
    EXPECT_FALSE(e.query());
    release = true;
    s.synchronize();
    EXPECT_TRUE(s.query());
    EXPECT_TRUE(e.query());
}

TEST_P(CppApi, HostCallableRunsInOrderAndIsDestroyedOnce) {
    runtime::Stream s;
    auto token = std::make_shared<int>(0);
    std::vector<int> order;
    for (int i = 0; i < 5; ++i)
        s.launch_host_func([i, &order, token] { order.push_back(i); });
    auto owned = std::make_unique<int>(41); // move-only callables are accepted
    s.launch_host_func([p = std::move(owned), &order] { order.push_back(*p + 1); });
    s.synchronize();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 42}));
    EXPECT_TRUE(eventually([&] { return token.use_count() == 1; })) << "copies of the callable leaked";
}

TEST_P(CppApi, HostFuncExceptionSurfacesAtSynchronizeAndStreamRecovers) {
    runtime::Stream s;
    std::atomic<bool> after{false};
    s.launch_host_func([] { throw std::runtime_error("boom from the cpp host callable"); });
    s.launch_host_func([&] { after = true; }); // skipped: queued behind a failure not yet reported
    try {
        s.synchronize();
        ADD_FAILURE() << "synchronize did not report the host function's exception";
    } catch (const runtime::Error& e) {
        EXPECT_EQ(e.code(), RT_ERROR_LAUNCH_FAILED);
        const std::string what = e.what();
        EXPECT_EQ(what.rfind("RT_ERROR_LAUNCH_FAILED: ", 0), 0u) << what;
        EXPECT_NE(what.find("boom from the cpp host callable"), std::string::npos) << what;
        std::string lower = what;
        std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return std::tolower(c); });
        EXPECT_NE(lower.find("host"), std::string::npos) << "message should name the host function: " << what;
    }
    EXPECT_FALSE(after);
    // Reported once: the stream is usable again.
    EXPECT_NO_THROW(s.synchronize());
    s.launch_host_func([&] { after = true; });
    EXPECT_NO_THROW(s.synchronize());
    EXPECT_TRUE(after);
    std::vector<int> in(32, 9), out(32, 0);
    runtime::DeviceBuffer<int> d(32);
    d.copy_from_host(in, s);
    d.copy_to_host(out, s);
    EXPECT_NO_THROW(s.synchronize());
    EXPECT_EQ(in, out);
}

TEST_P(CppApi, HostFuncExceptionSurfacesAtQuery) {
    runtime::Stream s;
    runtime::Event done;
    s.launch_host_func([] { throw 42; }); // not a std::exception
    s.record(done);
    // The event carries the failure it was recorded behind; the stream reports it once.
    EXPECT_RT_ERROR(done.synchronize(), RT_ERROR_LAUNCH_FAILED);
    EXPECT_RT_ERROR(s.query(), RT_ERROR_LAUNCH_FAILED);
    EXPECT_TRUE(s.query()); // cleared
}

TEST_P(CppApi, EventsOrderStreams) {
    runtime::Stream producer, consumer;
    runtime::Event ready;
    std::atomic<bool> produced{false};
    bool seen = false;
    producer.launch_host_func([&] {
        std::this_thread::sleep_for(20ms);
        produced = true;
    });
    producer.record(ready);
    consumer.wait(ready);
    consumer.launch_host_func([&] { seen = produced.load(); });
    consumer.synchronize();
    EXPECT_TRUE(seen);
    producer.synchronize();
}

TEST_P(CppApi, EventTimingAndOptions) {
    runtime::Stream s;
    runtime::Event start, stop;
    EXPECT_TRUE(start.query()); // never recorded = complete
    start.record(s);
    s.launch_host_func([] { std::this_thread::sleep_for(5ms); });
    stop.record(s);
    stop.synchronize();
    const float ms = start.elapsed_ms(stop);
    EXPECT_GE(ms, 4.0f);
    EXPECT_LT(ms, 5000.0f);

    runtime::Event untimed({.enable_timing = false});
    runtime::Event blocking({.enable_timing = true, .blocking_sync = true});
    untimed.record(s);
    blocking.record(s);
    blocking.synchronize();
    untimed.synchronize();
    EXPECT_THROW((void)start.elapsed_ms(untimed), runtime::Error);

    // Events move like the other handles; record() alone uses the default stream.
    rtEvent_t h = blocking.native_handle();
    runtime::Event moved(std::move(blocking));
    EXPECT_EQ(moved.native_handle(), h);
    EXPECT_EQ(blocking.native_handle(), nullptr);
    moved.record();
    moved.synchronize();
}

TEST_P(CppApi, DestroyingBuffersWaitsForQueuedWork) {
    runtime::Stream s;
    std::vector<float> out(1 << 16, 0.0f);
    {
        runtime::DeviceBuffer<float> d(out.size());
        s.memset(d, 0);
        s.launch_host_func([] { std::this_thread::sleep_for(10ms); });
        d.copy_to_host(out, s);
    } // rtFree waits for the device's queued work, so the copy above read valid memory
    s.synchronize();
    EXPECT_TRUE(std::ranges::all_of(out, [](float v) { return v == 0.0f; }));
}

constexpr const char* kScaleSource = R"(
RT_KERNEL void scale(const float* in, float* out, float factor, int n) {
    int i = (int)get_global_id(0);
    if (i < n) out[i] = in[i] * factor;
}
)";

TEST_P(CppApi, ModuleKernelLaunch) {
    auto module = runtime::Module::from_source(kScaleSource);
    runtime::Kernel scale = module.kernel("scale");
    EXPECT_EQ(scale.num_params(), 4);
    std::vector<float> in(1000), out(1000, 0.0f);
    std::iota(in.begin(), in.end(), 1.0f);
    runtime::DeviceBuffer<float> d_in(in.size()), d_out(in.size());
    runtime::Stream s;
    d_in.copy_from_host(in, s);
    s.launch(scale, {.grid = 4, .block = 256}, d_in, d_out, 3.0f, 1000);
    d_out.copy_to_host(out, s);
    s.synchronize();
    for (std::size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], in[i] * 3.0f) << i;
    // Wrong arity and wrong argument sizes (a double for a float) are refused at the call.
    EXPECT_RT_ERROR(s.launch(scale, {4, 256}, d_in, d_out), RT_ERROR_INVALID_VALUE);
    EXPECT_RT_ERROR(s.launch(scale, {4, 256}, d_in, d_out, 3.0, 1000), RT_ERROR_INVALID_VALUE);
    EXPECT_RT_ERROR((void)module.kernel("no_such_kernel"), RT_ERROR_NOT_FOUND);
    runtime::Module moved = std::move(module);
    EXPECT_EQ(module.native_handle(), nullptr);
    EXPECT_NE(moved.native_handle(), nullptr);
}

TEST_P(CppApi, LaunchWithExactGlobalSize) {
    auto module = runtime::Module::from_source(R"(
RT_KERNEL void twice(const float* in, float* out, unsigned n) {
    size_t i = get_global_id(0);  // launched over exactly n items: no bounds test needed on any backend
    out[i] = in[i] * 2.0f;
})");
    runtime::Kernel twice = module.kernel("twice");
    const unsigned n = 1000;
    std::vector<float> in(1024), out(1024, -1.0f);
    std::iota(in.begin(), in.end(), 1.0f);
    runtime::DeviceBuffer<float> d_in(in.size()), d_out(out.size());
    runtime::Stream s;
    d_in.copy_from_host(in, s);
    d_out.copy_from_host(out, s);
    s.launch(twice, {.grid = 4, .block = 256, .global = {n, 1, 1}}, d_in, d_out, n);
    d_out.copy_to_host(out, s);
    s.synchronize();
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], i < n ? in[i] * 2.0f : -1.0f) << i;
    // A global size the grid does not cover (or that leaves a whole block idle) is refused.
    EXPECT_RT_ERROR(s.launch(twice, {.grid = 4, .block = 256, .global = {1025, 1, 1}}, d_in, d_out, n),
                    RT_ERROR_INVALID_VALUE);
    EXPECT_RT_ERROR(s.launch(twice, {.grid = 4, .block = 256, .global = {768, 1, 1}}, d_in, d_out, n),
                    RT_ERROR_INVALID_VALUE);
}

TEST_P(CppApi, CompileErrorCarriesDiagnostics) {
    try {
        (void)runtime::Module::from_source("RT_KERNEL void broken(float* x) { x[0] = undeclared_name; }");
        ADD_FAILURE() << "compiled a broken kernel";
    } catch (const runtime::Error& e) {
        EXPECT_EQ(e.code(), RT_ERROR_COMPILE_FAILED);
        EXPECT_NE(std::string(e.what()).find("undeclared_name"), std::string::npos) << e.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Devices, CppApi, ::testing::ValuesIn(all_devices()),
                         [](const ::testing::TestParamInfo<int>& info) {
                             return "device" + std::to_string(info.param);
                         });

} // namespace
