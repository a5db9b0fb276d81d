// The sound core: deferred work on the timeline, failures that travel, what queue context may not do, teardown.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/runtime.h"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using rt_test::contains;
using rt_test::Gate;
using rt_test::last_message;
using rt_test::StreamGuard;

class SoundCore : public ::testing::Test {
protected:
    rt_test::Watchdog watchdog_{30s, "sound core test"};  // a deadlock fails the test instead of hanging CTest
};

struct FailSpec {
    const char* message;
};
void fail_fn(void* p) { rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, static_cast<FailSpec*>(p)->message); }

// Finding 1 (C): a host function that frees memory, possibly in use by queued work, must not wait for
// its own stream; unregistering (which must wait) is refused at once.
TEST_F(SoundCore, HostFunctionMayFreeButNotWait) {
    void* d = nullptr;
    void* h = nullptr;
    ASSERT_RT_OK(rtMalloc(&d, 1 << 20));
    ASSERT_RT_OK(rtMallocHost(&h, 4096));
    std::vector<char> registered(4096);
    ASSERT_RT_OK(rtHostRegister(registered.data(), registered.size(), RT_HOST_REGISTER_DEFAULT));
    struct Calls {
        void* d;
        void* h;
        void* reg;
        rtError_t free_d = RT_ERROR_UNKNOWN, free_h = RT_ERROR_UNKNOWN, unregister = RT_ERROR_UNKNOWN;
    } calls{d, h, registered.data()};
    StreamGuard s, busy;
    ASSERT_RT_OK(s.status());
    Gate gate;  // keeps another stream's work pending, so the frees cannot complete at once
    ASSERT_RT_OK(gate.launch(busy));
    ASSERT_RT_OK(rtLaunchHostFunc(
        s,
        [](void* p) {
            auto* c = static_cast<Calls*>(p);
            c->free_d = rtFree(c->d);
            c->free_h = rtFreeHost(c->h);
            c->unregister = rtHostUnregister(c->reg);
        },
        &calls));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(calls.free_d, RT_SUCCESS);
    EXPECT_EQ(calls.free_h, RT_SUCCESS);
    EXPECT_EQ(calls.unregister, RT_ERROR_NOT_PERMITTED);
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(busy));
    EXPECT_RT_OK(rtHostUnregister(registered.data()));  // still registered: the refused call changed nothing
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(d));  // freed once, by the host function
}

// Finding 5: a host function that waits for queued work gets NOT_PERMITTED at once, naming the call.
TEST_F(SoundCore, HostFunctionThatWaitsIsRefused) {
    StreamGuard s;
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtEventCreate(&e));
    ASSERT_RT_OK(rtEventRecord(e, s));
    struct Calls {
        rtStream_t s;
        rtEvent_t e;
        rtError_t sync = RT_SUCCESS, device = RT_SUCCESS, event = RT_SUCCESS, copy = RT_SUCCESS, fin = RT_SUCCESS;
        std::string message = {};
    } c{s, e};
    ASSERT_RT_OK(rtLaunchHostFunc(
        s,
        [](void* p) {
            auto* c = static_cast<Calls*>(p);
            c->sync = rtStreamSynchronize(c->s);
            c->message = rtGetLastErrorMessage();
            c->device = rtDeviceSynchronize();
            c->event = rtEventSynchronize(c->e);
            char a = 1, b = 0;
            c->copy = rtMemcpy(&b, &a, 1, RT_MEMCPY_HOST_TO_HOST);
            c->fin = rtFinalize();
        },
        &c));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(c.sync, RT_ERROR_NOT_PERMITTED);
    EXPECT_TRUE(contains(c.message, "rtStreamSynchronize")) << c.message;
    EXPECT_TRUE(contains(c.message, "host function")) << c.message;
    EXPECT_EQ(c.device, RT_ERROR_NOT_PERMITTED);
    EXPECT_EQ(c.event, RT_ERROR_NOT_PERMITTED);
    EXPECT_EQ(c.copy, RT_ERROR_NOT_PERMITTED);
    EXPECT_EQ(c.fin, RT_ERROR_NOT_PERMITTED);
    EXPECT_RT_OK(rtEventDestroy(e));
}

// Finding 2: allocation under pool pressure waits for in-flight frees without holding the memory lock, so a
// host function reading statistics meanwhile does not deadlock.
TEST_F(SoundCore, StatisticsFromAHostFunctionWhileAllocatingUnderPressure) {
    constexpr size_t kPool = size_t{4} << 20;
    ASSERT_RT_OK(rtEnablePoolAllocator(kPool, 1 << 20, RT_POOL_DEFAULT));
    void* a = nullptr;
    ASSERT_RT_OK(rtMalloc(&a, kPool));
    StreamGuard s;
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtMemsetAsync(a, 7, kPool, s));
    rtMemStats seen{};
    std::atomic<bool> stats_ran{false};
    struct Ctx {
        rtMemStats* seen;
        std::atomic<bool>* ran;
        rtError_t r = RT_ERROR_UNKNOWN;
    } ctx{&seen, &stats_ran};
    ASSERT_RT_OK(rtLaunchHostFunc(
        s,
        [](void* p) {
            auto* c = static_cast<Ctx*>(p);
            c->r = rtMemGetStats(c->seen);
            c->ran->store(true);
        },
        &ctx));
    ASSERT_RT_OK(rtFree(a));  // pending: the memset on s still uses it
    rtError_t alloc = RT_ERROR_UNKNOWN;
    void* b = nullptr;
    std::thread t([&] { alloc = rtMalloc(&b, kPool); });  // full pool: waits for s (outside the lock)
    std::this_thread::sleep_for(20ms);                    // likely inside that wait (either way must succeed)
    gate.open();
    t.join();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_TRUE(stats_ran.load());
    EXPECT_EQ(ctx.r, RT_SUCCESS);
    EXPECT_EQ(alloc, RT_SUCCESS) << last_message();
    EXPECT_EQ(b, a) << "the pool's only range was reused";
    EXPECT_RT_OK(rtFree(b));
    EXPECT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
}

// Finding 3: destroying a stream returns at once, and memory its queued work uses stays valid until that work
// is done even when freed meanwhile (the stream stays listed until idle).
TEST_F(SoundCore, DestroyThenFreeOfMemoryItsWorkUses) {
    const size_t n = size_t{4} << 20;
    auto src = rt_test::pattern(n, 11);
    std::vector<unsigned char> out(n, 0);
    void* d = nullptr;
    ASSERT_RT_OK(rtMalloc(&d, n));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    Gate gate;
    std::atomic<bool> done{false};
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtMemcpyAsync(d, src.data(), n, RT_MEMCPY_HOST_TO_DEVICE, s));
    ASSERT_RT_OK(rtMemcpyAsync(out.data(), d, n, RT_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &done));
    ASSERT_RT_OK(rtStreamDestroy(s));  // returns although the stream is blocked
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamQuery(s));
    ASSERT_RT_OK(rtFree(d));  // deferred: the destroyed stream's copies still use it
    EXPECT_FALSE(done.load());
    gate.open();
    ASSERT_TRUE(rt_test::wait_until([&] { return done.load(); }));
    EXPECT_EQ(rt_test::first_mismatch(out.data(), src.data(), n), -1);
}

// Finding 4: a failure travels to events recorded behind it and to streams that wait for them; the work
// queued behind it is skipped and counted; everything is usable after the report.
TEST_F(SoundCore, FailureTravelsThroughEventsToConsumers) {
    StreamGuard a, b;
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtEventCreate(&e));
    FailSpec f{"producer broke"};
    std::atomic<bool> a_after{false}, b_after{false};
    Gate gate;
    ASSERT_RT_OK(gate.launch(a));
    ASSERT_RT_OK(rtLaunchHostFunc(a, fail_fn, &f));
    ASSERT_RT_OK(rtEventRecord(e, a));
    ASSERT_RT_OK(rtLaunchHostFunc(a, rt_test::set_flag, &a_after));
    ASSERT_RT_OK(rtStreamWaitEvent(b, e));
    ASSERT_RT_OK(rtLaunchHostFunc(b, rt_test::set_flag, &b_after));
    gate.open();

    ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtEventSynchronize(e));
    EXPECT_TRUE(contains(last_message(), "producer broke")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtEventQuery(e));  // every time, until recorded again

    ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(b));
    std::string m = last_message();
    EXPECT_TRUE(contains(m, "dependency failed")) << m;
    EXPECT_TRUE(contains(m, "producer broke")) << m;
    char handle[32];
    std::snprintf(handle, sizeof handle, "%p", static_cast<void*>(a.get()));
    EXPECT_TRUE(contains(m, handle)) << "the message names the producing stream: " << m;
    EXPECT_FALSE(b_after.load()) << "the consumer ran work behind the failed dependency";

    ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(a));
    EXPECT_TRUE(contains(last_message(), "1 operation(s) queued after it were skipped")) << last_message();
    EXPECT_FALSE(a_after.load());

    // Reported: both streams and the event work again.
    EXPECT_RT_OK(rtStreamSynchronize(a));
    EXPECT_RT_OK(rtStreamSynchronize(b));
    ASSERT_RT_OK(rtEventRecord(e, a));
    ASSERT_RT_OK(rtStreamWaitEvent(b, e));
    ASSERT_RT_OK(rtLaunchHostFunc(b, rt_test::set_flag, &b_after));
    EXPECT_RT_OK(rtStreamSynchronize(b));
    EXPECT_RT_OK(rtEventSynchronize(e));
    EXPECT_TRUE(b_after.load());
    EXPECT_RT_OK(rtEventDestroy(e));
}

// An event recorded on a stream whose failure has not been reported carries it, whether the record is queued
// or the stream is already idle.
TEST_F(SoundCore, EventRecordedAfterAnUnreportedFailureCarriesIt) {
    StreamGuard a, b;
    struct Ctx {
        std::atomic<bool> failed{false};
    } ctx;
    ASSERT_RT_OK(rtLaunchHostFunc(
        a,
        [](void* p) {
            rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, "failed before the record");
            static_cast<Ctx*>(p)->failed = true;
        },
        &ctx));
    ASSERT_TRUE(rt_test::wait_until([&] { return ctx.failed.load(); }));
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtEventCreate(&e));
    ASSERT_RT_OK(rtEventRecord(e, a));
    std::atomic<bool> done{false};
    ASSERT_RT_OK(rtStreamWaitEvent(b, e));
    ASSERT_RT_OK(rtLaunchHostFunc(b, rt_test::set_flag, &done));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(b));
    EXPECT_TRUE(contains(last_message(), "failed before the record")) << last_message();
    EXPECT_FALSE(done.load());
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtEventSynchronize(e));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(a));
    EXPECT_RT_OK(rtEventDestroy(e));
}

// A queued record owns what it writes: the event recorded again (or destroyed) before the record runs must not
// leave it writing freed memory (found by the fuzzer; ASan reports it).
TEST_F(SoundCore, EventRecordedAgainOrDestroyedBeforeItsRecordRan) {
    StreamGuard a(RT_STREAM_NON_BLOCKING);  // the default stream's record does not wait for (and carry) a's failure
    Gate gate;
    ASSERT_RT_OK(gate.launch(a));
    rtEvent_t e = nullptr, gone = nullptr;
    ASSERT_RT_OK(rtEventCreate(&e));
    ASSERT_RT_OK(rtEventCreate(&gone));
    FailSpec f{"behind the gate"};
    ASSERT_RT_OK(rtLaunchHostFunc(a, fail_fn, &f));
    ASSERT_RT_OK(rtEventRecord(e, a));
    ASSERT_RT_OK(rtEventRecord(gone, a));
    ASSERT_RT_OK(rtEventRecord(e, nullptr));  // again, on the idle default stream: replaces the queued record
    ASSERT_RT_OK(rtEventDestroy(gone));
    gate.open();
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(a));
    EXPECT_RT_OK(rtEventSynchronize(e)) << "the latest record (on a healthy stream) carries no failure";
    EXPECT_RT_OK(rtEventDestroy(e));
}

// rtDeviceSynchronize reports every failed stream of the device, not only the first.
TEST_F(SoundCore, DeviceSynchronizeReportsEveryFailedStream) {
    StreamGuard a, b, c;
    FailSpec fa{"first stream broke"}, fb{"second stream broke"};
    ASSERT_RT_OK(rtLaunchHostFunc(a, fail_fn, &fa));
    ASSERT_RT_OK(rtLaunchHostFunc(b, fail_fn, &fb));
    static int no_delay = 0;
    ASSERT_RT_OK(rtLaunchHostFunc(c, rt_test::sleep_ms, &no_delay));
    ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtDeviceSynchronize());
    std::string m = last_message();
    EXPECT_TRUE(contains(m, "2 stream(s) failed")) << m;
    EXPECT_TRUE(contains(m, "first stream broke")) << m;
    EXPECT_TRUE(contains(m, "second stream broke")) << m;
    EXPECT_RT_OK(rtDeviceSynchronize());
    EXPECT_RT_OK(rtStreamSynchronize(a));
    EXPECT_RT_OK(rtStreamSynchronize(b));
}

// Host functions run on runtime threads, never on the thread that is synchronizing.
TEST_F(SoundCore, HostFunctionsNeverRunInsideSynchronize) {
    StreamGuard s;
    const auto me = std::this_thread::get_id();
    std::thread::id ran_on[64];
    for (auto& id : ran_on) {
        ASSERT_RT_OK(rtLaunchHostFunc(
            s, [](void* p) { *static_cast<std::thread::id*>(p) = std::this_thread::get_id(); }, &id));
        ASSERT_RT_OK(rtStreamSynchronize(s));  // the stream was idle: the caller could have run it
    }
    for (const auto& id : ran_on) EXPECT_NE(id, me);
}

// rtStreamDeferRelease: called once, after the work queued before it, or at once when nothing is pending.
TEST_F(SoundCore, DeferReleaseRunsOnceTheWorkBeforeItCompleted) {
    StreamGuard s;
    std::atomic<int> released{0};
    auto count = [](void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); };
    ASSERT_RT_OK(rtStreamDeferRelease(s, count, &released));  // idle stream: runs before returning
    EXPECT_EQ(released.load(), 1);
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtStreamDeferRelease(s, count, &released));
    EXPECT_EQ(released.load(), 1);
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(released.load(), 2) << "synchronize returns after what waited for the work has run";
    // A failed stream still releases (skipped work counts as completed).
    FailSpec f{"broken"};
    Gate gate2;
    ASSERT_RT_OK(gate2.launch(s));
    ASSERT_RT_OK(rtLaunchHostFunc(s, fail_fn, &f));
    ASSERT_RT_OK(rtStreamDeferRelease(s, count, &released));
    gate2.open();
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    EXPECT_EQ(released.load(), 3);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamDeferRelease(s, nullptr, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE,
                    rtStreamDeferRelease(reinterpret_cast<rtStream_t>(uintptr_t{0x12345}), count, &released));
    EXPECT_EQ(released.load(), 3);
}

// A release that frees memory and destroys a stream (as a Python finalizer would) runs without waiting.
TEST_F(SoundCore, ReleaseMayFreeAndDestroy) {
    StreamGuard s;
    struct Ctx {
        void* d = nullptr;
        rtStream_t other = nullptr;
        rtStream_t self = nullptr;
        rtError_t free_r = RT_ERROR_UNKNOWN, destroy_r = RT_ERROR_UNKNOWN, sync_r = RT_SUCCESS;
        std::atomic<bool> ran{false};
    } ctx;
    ASSERT_RT_OK(rtMalloc(&ctx.d, 1 << 16));
    ASSERT_RT_OK(rtStreamCreate(&ctx.other));
    ctx.self = s;
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtStreamDeferRelease(
        s,
        [](void* p) {
            auto* c = static_cast<Ctx*>(p);
            c->free_r = rtFree(c->d);
            c->destroy_r = rtStreamDestroy(c->other);
            c->sync_r = rtStreamSynchronize(c->self);
            c->ran = true;
        },
        &ctx));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_TRUE(ctx.ran.load());
    EXPECT_EQ(ctx.free_r, RT_SUCCESS);
    EXPECT_EQ(ctx.destroy_r, RT_SUCCESS);
    EXPECT_EQ(ctx.sync_r, RT_ERROR_NOT_PERMITTED);
}

// Finding 11: with several devices, frees and destroyed streams pending across devices are settled by the
// timeline before any device goes at rtFinalize (ASan catches a stream or pool used after its device).
TEST_F(SoundCore, FinalizeWithWorkPendingOnEveryDevice) {
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    std::vector<Gate> gates(static_cast<size_t>(n));
    std::vector<std::atomic<bool>> done(static_cast<size_t>(n));
    for (int dev = 0; dev < n; ++dev) {
        ASSERT_RT_OK(rtSetDevice(dev));
        ASSERT_RT_OK(rtEnablePoolAllocator(size_t{8} << 20, 1 << 20, RT_POOL_DEFAULT));
        rtStream_t s = nullptr;
        ASSERT_RT_OK(rtStreamCreate(&s));
        void* p = nullptr;
        ASSERT_RT_OK(rtMalloc(&p, 1 << 20));
        ASSERT_RT_OK(gates[static_cast<size_t>(dev)].launch(s));
        ASSERT_RT_OK(rtMemsetAsync(p, dev, 1 << 20, s));
        ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &done[static_cast<size_t>(dev)]));
        ASSERT_RT_OK(rtFree(p));            // pooled, pending on every stream of every device
        ASSERT_RT_OK(rtStreamDestroy(s));  // pending on the timeline
    }
    std::thread opener([&] {
        std::this_thread::sleep_for(10ms);
        for (auto& g : gates) g.open();
    });
    ASSERT_RT_OK(rtFinalize());  // waits for every device's work, then settles the timeline
    opener.join();
    for (auto& d : done) EXPECT_TRUE(d.load());
    // A gate that timed out means something waited for it before it was opened (enabling the next device's pool
    // must not wait for another device's work).
    for (auto& g : gates) EXPECT_FALSE(g.timed_out());
    ASSERT_RT_OK(rtSetDevice(0));
}

}  // namespace
