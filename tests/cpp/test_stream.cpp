// test_stream.cpp — rtStreamCreate/WithFlags/Destroy/Synchronize/Query/WaitEvent: success paths, default stream, garbage handles.
#include "legacy_stream_from_c.h"
#include "test_util.hpp"

namespace {

using rt_test::Gate;
using rt_test::garbage_handle;

class Stream : public rt_test::DeviceTest {};

TEST_P(Stream, CreateSynchronizeQueryDestroy) {
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_NE(s, nullptr);
    EXPECT_RT_OK(rtStreamQuery(s));  // empty stream: complete
    EXPECT_RT_OK(rtStreamSynchronize(s));
    EXPECT_RT_OK(rtStreamDestroy(s));
}

TEST_P(Stream, CreateWithFlags) {
    for (unsigned flags : {RT_STREAM_DEFAULT, RT_STREAM_NON_BLOCKING}) {
        rtStream_t s = nullptr;
        ASSERT_RT_OK(rtStreamCreateWithFlags(&s, flags)) << "flags " << flags;
        ASSERT_NE(s, nullptr);
        std::atomic<bool> ran{false};
        ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &ran));
        ASSERT_RT_OK(rtStreamSynchronize(s));
        EXPECT_TRUE(ran.load());
        EXPECT_RT_OK(rtStreamDestroy(s));
    }
}

TEST_P(Stream, UnknownFlagBitsAreInvalidValue) {
    for (unsigned flags : {0x2u, 0x4u, 0x80000000u, 0xFFFFFFFFu}) {
        rtStream_t s = reinterpret_cast<rtStream_t>(0x1);
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamCreateWithFlags(&s, flags)) << "flags " << flags;
    }
}

TEST_P(Stream, NullOutPointerIsInvalidValue) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamCreate(nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamCreateWithFlags(nullptr, RT_STREAM_DEFAULT));
}

TEST_P(Stream, WaitNativeStreamChecksItsArguments) {
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamWaitNativeStream(s, nullptr));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "CU_STREAM_LEGACY")) << rt_test::last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamWaitNativeStream(garbage_handle<rtStream_t>(), reinterpret_cast<void*>(1)));
    if (rt_test::backend_of(rt_test::current_device()) == "cpu") {
        EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtStreamWaitNativeStream(s, reinterpret_cast<void*>(1)));
        EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "no native streams")) << rt_test::last_message();
        EXPECT_RT_OK(rtStreamSynchronize(s)) << "a refused wait leaves the stream usable";
    }
    EXPECT_RT_OK(rtStreamDestroy(s));
}

TEST_P(Stream, StreamsAreDistinct) {
    constexpr int kN = 64;
    std::vector<rtStream_t> v(kN);
    for (auto& s : v) ASSERT_RT_OK(rtStreamCreate(&s));
    std::sort(v.begin(), v.end());
    EXPECT_EQ(std::adjacent_find(v.begin(), v.end()), v.end()) << "two live streams share a handle";
    for (auto s : v) EXPECT_RT_OK(rtStreamDestroy(s));
}

TEST_P(Stream, ManyCreateDestroyCycles) {
    for (int i = 0; i < 500; ++i) {
        rtStream_t s = nullptr;
        ASSERT_RT_OK(rtStreamCreate(&s)) << "iteration " << i;
        ASSERT_RT_OK(rtStreamDestroy(s)) << "iteration " << i;
    }
}

TEST_P(Stream, QueryIsNotReadyWhileWorkIsPending) {
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(s));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_FALSE(gate.timed_out());
    EXPECT_RT_OK(rtStreamQuery(s));
}

TEST_P(Stream, SynchronizeWaitsForAllQueuedWork) {
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    int delay = 20;
    std::atomic<bool> done{false};
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::sleep_ms, &delay));
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &done));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_TRUE(done.load());
}

TEST_P(Stream, EnqueueReturnsBeforeTheWorkRuns) {
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    Gate gate;
    std::atomic<bool> after{false};
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &after));  // must not block the host
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(after.load()) << "work ran past a blocked host function: not in order";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_TRUE(after.load());
}

TEST_P(Stream, DestroyReturnsAtOnceAndItsWorkStillCompletes) {
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    rt_test::Gate gate;
    std::atomic<bool> done{false};
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &done));
    ASSERT_RT_OK(rtStreamDestroy(s));  // like cudaStreamDestroy: does not wait for the blocked work
    EXPECT_FALSE(done.load());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamSynchronize(s));
    gate.open();
    EXPECT_TRUE(rt_test::wait_until([&] { return done.load(); })) << "the destroyed stream's work never ran";
    EXPECT_RT_OK(rtDeviceSynchronize());
}

TEST_P(Stream, DefaultStreamIsUsableThroughNull) {
    std::atomic<bool> ran{false};
    ASSERT_RT_OK(rtLaunchHostFunc(nullptr, rt_test::set_flag, &ran));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_TRUE(ran.load());
    EXPECT_RT_OK(rtStreamQuery(nullptr));
}

TEST_P(Stream, DefaultStreamCannotBeDestroyed) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamDestroy(nullptr));
    // ... and still works afterwards.
    std::atomic<bool> ran{false};
    ASSERT_RT_OK(rtLaunchHostFunc(nullptr, rt_test::set_flag, &ran));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_TRUE(ran.load());
}

TEST_P(Stream, DefaultStreamIsIndependentOfOtherStreams) {
    // A blocked non-blocking stream does not hold up the default stream. The default stream's work is a fill, not a
    // host function: CUDA may run the host functions of all streams one at a time on one thread, so one blocked
    // host function holds up every other (cuLaunchHostFunc: "may be serialized").
    rt_test::StreamGuard s(RT_STREAM_NON_BLOCKING);
    ASSERT_RT_OK(s.status());
    rt_test::DevBuf buf(4096);
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtMemsetAsync(buf.get(), 7, 4096, nullptr));
    EXPECT_TRUE(rt_test::wait_until([&] { return rtStreamQuery(nullptr) == RT_SUCCESS; }, std::chrono::milliseconds(5000)))
        << "default stream waited for a blocked created stream";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

// ---- the legacy default stream (runtime.h, RT_STREAM_NON_BLOCKING): the reproductions and their converse.

std::vector<unsigned char> read_back(const void* d, size_t n) {
    std::vector<unsigned char> out(n, 0xEE);
    EXPECT_RT_OK(rtMemcpy(out.data(), d, n, RT_MEMCPY_DEVICE_TO_HOST));
    return out;
}

TEST_P(Stream, SynchronousCopyWaitsForEarlierWorkOfABlockingStream) {
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    rt_test::DevBuf d(4096);
    ASSERT_RT_OK(rtMemset(d.get(), 0, 4096));
    static int delay = 100;  // the fill runs late: a copy that does not wait sees the zeros
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::sleep_ms, &delay));
    ASSERT_RT_OK(rtMemsetAsync(d.get(), 7, 4096, s));
    EXPECT_EQ(read_back(d.get(), 4096), std::vector<unsigned char>(4096, 7)) << "rtMemcpy returned stale data";
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

TEST_P(Stream, SynchronousCopyFromCWaitsForABlockingStream) {
    const char* failed = "";
    EXPECT_EQ(legacy_c_copy_after_blocking_stream(&failed), 0) << failed << ": " << rtGetLastErrorMessage();
}

TEST_P(Stream, SynchronousFillWaitsForEarlierWorkOfABlockingStream) {
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    rt_test::DevBuf d(4096);
    static int delay = 100;
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::sleep_ms, &delay));
    ASSERT_RT_OK(rtMemsetAsync(d.get(), 7, 4096, s));
    ASSERT_RT_OK(rtMemset(d.get(), 3, 4096));  // must land after the stream's fill
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(read_back(d.get(), 4096), std::vector<unsigned char>(4096, 3));
}

TEST_P(Stream, BlockingStreamWaitsForEarlierWorkOfTheDefaultStream) {
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    rt_test::DevBuf d(4096);
    ASSERT_RT_OK(rtMemset(d.get(), 0, 4096));
    rt_test::DevBuf copy(4096);
    ASSERT_RT_OK(rtMemset(copy.get(), 0, 4096));
    Gate gate;
    ASSERT_RT_OK(gate.launch(nullptr));
    ASSERT_RT_OK(rtMemsetAsync(d.get(), 5, 4096, nullptr));
    // Device to device: a copy into pageable host memory would block this thread on cuda (docs/cuda.md).
    ASSERT_RT_OK(rtMemcpyAsync(copy.get(), d.get(), 4096, RT_MEMCPY_DEVICE_TO_DEVICE, s));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(s)) << "the stream's copy did not wait for the default stream";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_FALSE(gate.timed_out());
    EXPECT_EQ(read_back(copy.get(), 4096), std::vector<unsigned char>(4096, 5));
}

// (That it waits for no non-blocking stream: DefaultStreamIsIndependentOfOtherStreams.)
TEST_P(Stream, DefaultStreamWaitsForEveryBlockingStream) {
    rt_test::StreamGuard a, b;
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    rt_test::DevBuf d(2 * 4096);
    ASSERT_RT_OK(rtMemset(d.get(), 0, 2 * 4096));
    static int delay = 50;
    auto* base = static_cast<unsigned char*>(d.get());
    ASSERT_RT_OK(rtLaunchHostFunc(a, rt_test::sleep_ms, &delay));
    ASSERT_RT_OK(rtMemsetAsync(base, 1, 4096, a));
    ASSERT_RT_OK(rtLaunchHostFunc(b, rt_test::sleep_ms, &delay));
    ASSERT_RT_OK(rtMemsetAsync(base + 4096, 2, 4096, b));
    std::vector<unsigned char> want(2 * 4096, 1);
    std::fill(want.begin() + 4096, want.end(), 2);
    EXPECT_EQ(read_back(d.get(), 2 * 4096), want);
}

TEST_P(Stream, EventRecordedOnTheDefaultStreamCoversBlockingStreams) {
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    rt_test::EventGuard e;
    ASSERT_RT_OK(e.status());
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtEventRecord(e, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtEventQuery(e)) << "the default stream's record did not wait for the stream";
    gate.open();
    EXPECT_RT_OK(rtEventSynchronize(e));
    EXPECT_FALSE(gate.timed_out());
}

TEST_P(Stream, AFailureOnABlockingStreamReachesTheSynchronousCopyThatWaitedForIt) {
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    rt_test::DevBuf d(64);
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtLaunchHostFunc(s, [](void*) { rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, "broke on purpose"); },
                                  nullptr));
    gate.open();
    std::vector<unsigned char> got(64);
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtMemcpy(got.data(), d.get(), 64, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_NE(std::string(rtGetLastErrorMessage()).find("broke on purpose"), std::string::npos)
        << rtGetLastErrorMessage();
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));  // the stream keeps its own report
    EXPECT_RT_OK(rtMemcpy(got.data(), d.get(), 64, RT_MEMCPY_DEVICE_TO_HOST)) << "reported once, then usable";
}

TEST_P(Stream, GarbageHandlesAreInvalidHandle) {
    rtStream_t g = garbage_handle<rtStream_t>();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamSynchronize(g));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamQuery(g));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamDestroy(g));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtLaunchHostFunc(g, rt_test::sleep_ms, nullptr));
    rt_test::EventGuard e;
    ASSERT_RT_OK(e.status());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamWaitEvent(g, e));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventRecord(e, g));
    int x = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMemcpyAsync(&x, &x, sizeof x, RT_MEMCPY_HOST_TO_HOST, g));
}

TEST_P(Stream, DestroyedStreamIsInvalidHandle) {
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtStreamDestroy(s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamSynchronize(s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamQuery(s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamDestroy(s));
    std::atomic<bool> ran{false};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtLaunchHostFunc(s, rt_test::set_flag, &ran));
    EXPECT_FALSE(ran.load());
}

TEST_P(Stream, DestroyedStreamStaysInvalidAfterNewStreamsAreCreated) {
    rtStream_t old = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&old));
    ASSERT_RT_OK(rtStreamDestroy(old));
    // Handles may be recycled by an allocator; a stale handle must still not alias a live stream
    // silently unless it is the very same value (then it is the new stream and valid).
    std::vector<rtStream_t> fresh(8);
    for (auto& s : fresh) ASSERT_RT_OK(rtStreamCreate(&s));
    bool reused = std::find(fresh.begin(), fresh.end(), old) != fresh.end();
    if (!reused) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamQuery(old));
    }
    for (auto s : fresh) EXPECT_RT_OK(rtStreamDestroy(s));
}

TEST_P(Stream, EventPassedAsStreamIsInvalidHandle) {
    rt_test::EventGuard e;
    ASSERT_RT_OK(e.status());
    auto as_stream = reinterpret_cast<rtStream_t>(e.get());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamSynchronize(as_stream));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamQuery(as_stream));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamDestroy(as_stream));
    EXPECT_RT_OK(rtEventQuery(e));  // the event itself was not harmed
}

TEST_P(Stream, WaitEventErrors) {
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamWaitEvent(s, garbage_handle<rtEvent_t>()));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamWaitEvent(s, reinterpret_cast<rtEvent_t>(s.get())));
    rtEvent_t dead = nullptr;
    ASSERT_RT_OK(rtEventCreate(&dead));
    ASSERT_RT_OK(rtEventDestroy(dead));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamWaitEvent(s, dead));
    // A null event is no handle at all: rejected (CUDA says invalid handle, a null argument check
    // says invalid value; both are acceptable, success or a crash is not).
    rtError_t null_event = rtStreamWaitEvent(s, nullptr);
    EXPECT_TRUE(null_event == RT_ERROR_INVALID_HANDLE || null_event == RT_ERROR_INVALID_VALUE)
        << rtGetErrorName(null_event);
    ASSERT_RT_OK(rtStreamSynchronize(s));  // the stream is still usable
}

TEST_P(Stream, WaitOnNeverRecordedEventDoesNotBlock) {
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    rt_test::EventGuard e;
    ASSERT_RT_OK(e.status());
    std::atomic<bool> ran{false};
    ASSERT_RT_OK(rtStreamWaitEvent(s, e));
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &ran));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_TRUE(ran.load());
}

TEST_P(Stream, WaitEventDoesNotBlockTheHost) {
    rt_test::StreamGuard a, b;
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    rt_test::EventGuard e;
    ASSERT_RT_OK(e.status());
    Gate gate;
    ASSERT_RT_OK(gate.launch(a));
    ASSERT_RT_OK(rtEventRecord(e, a));
    auto t0 = rt_test::Clock::now();
    ASSERT_RT_OK(rtStreamWaitEvent(b, e));  // returns although `e` cannot complete yet
    auto waited = rt_test::Clock::now() - t0;
    EXPECT_LT(waited, std::chrono::seconds(2));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(b));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(b));
    ASSERT_RT_OK(rtStreamSynchronize(a));
}

TEST_P(Stream, WaitOnOwnEventIsHarmless) {
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    rt_test::EventGuard e;
    ASSERT_RT_OK(e.status());
    std::atomic<bool> ran{false};
    ASSERT_RT_OK(rtEventRecord(e, s));
    ASSERT_RT_OK(rtStreamWaitEvent(s, e));
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &ran));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_TRUE(ran.load());
}

TEST_P(Stream, StreamOfAnotherDeviceCanBeSynchronizedFromHere) {
    // Handles are global: a stream created while device i was current can be used while device j is.
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    for (int other = 0; other < n; ++other) {
        ASSERT_RT_OK(rtSetDevice(other));
        rtStream_t s = nullptr;
        ASSERT_RT_OK(rtStreamCreate(&s));
        ASSERT_RT_OK(rtSetDevice(device()));
        std::atomic<bool> ran{false};
        ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &ran));
        ASSERT_RT_OK(rtStreamSynchronize(s));
        EXPECT_TRUE(ran.load());
        ASSERT_RT_OK(rtStreamDestroy(s));
    }
}

RT_INSTANTIATE_DEVICE_TEST(Stream);

} // namespace
