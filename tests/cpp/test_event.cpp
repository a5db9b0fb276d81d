// test_event.cpp — rtEventCreate/WithFlags/Destroy/Record/Query/Synchronize/ElapsedTime: semantics and error cases.
#include "test_util.hpp"

namespace {

using rt_test::EventGuard;
using rt_test::Gate;
using rt_test::garbage_handle;
using rt_test::StreamGuard;

class Event : public rt_test::DeviceTest {};

TEST_P(Event, CreateAndDestroy) {
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtEventCreate(&e));
    ASSERT_NE(e, nullptr);
    EXPECT_RT_OK(rtEventDestroy(e));
}

TEST_P(Event, CreateWithEveryValidFlagCombination) {
    for (unsigned flags : {RT_EVENT_DEFAULT, RT_EVENT_BLOCKING_SYNC, RT_EVENT_DISABLE_TIMING,
                           RT_EVENT_BLOCKING_SYNC | RT_EVENT_DISABLE_TIMING}) {
        rtEvent_t e = nullptr;
        ASSERT_RT_OK(rtEventCreateWithFlags(&e, flags)) << "flags " << flags;
        ASSERT_RT_OK(rtEventRecord(e, nullptr));
        ASSERT_RT_OK(rtEventSynchronize(e)) << "flags " << flags;
        EXPECT_RT_OK(rtEventQuery(e));
        EXPECT_RT_OK(rtEventDestroy(e));
    }
}

TEST_P(Event, UnknownFlagBitsAndNullOutAreInvalidValue) {
    rtEvent_t e = nullptr;
    for (unsigned flags : {0x4u, 0x100u, 0x80000000u}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEventCreateWithFlags(&e, flags)) << "flags " << flags;
    }
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEventCreate(nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEventCreateWithFlags(nullptr, RT_EVENT_DEFAULT));
}

TEST_P(Event, NeverRecordedIsComplete) {
    EventGuard e;
    ASSERT_RT_OK(e.status());
    EXPECT_RT_OK(rtEventQuery(e));
    EXPECT_RT_OK(rtEventSynchronize(e));
}

TEST_P(Event, RecordOnEmptyStreamCompletesAtOnce) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    EventGuard e;
    ASSERT_RT_OK(e.status());
    ASSERT_RT_OK(rtEventRecord(e, s));
    ASSERT_TRUE(rt_test::wait_until([&] { return rtEventQuery(e) == RT_SUCCESS; }, std::chrono::milliseconds(5000)));
}

TEST_P(Event, QueryAndSynchronizeFollowTheRecordedWork) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    EventGuard e;
    ASSERT_RT_OK(e.status());
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtEventRecord(e, s));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtEventQuery(e));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtEventQuery(e));
    gate.open();
    ASSERT_RT_OK(rtEventSynchronize(e));
    EXPECT_TRUE(gate.left());
    EXPECT_FALSE(gate.timed_out());
    EXPECT_RT_OK(rtEventQuery(e));
}

TEST_P(Event, CapturesOnlyWorkQueuedBeforeTheRecord) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    EventGuard e;
    ASSERT_RT_OK(e.status());
    ASSERT_RT_OK(rtEventRecord(e, s));
    Gate gate;  // queued after the record: must not delay the event
    ASSERT_RT_OK(gate.launch(s));
    EXPECT_TRUE(rt_test::wait_until([&] { return rtEventQuery(e) == RT_SUCCESS; }, std::chrono::milliseconds(5000)))
        << "event waited for work queued after its record";
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(s));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

TEST_P(Event, ReRecordTracksTheMostRecentRecord) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    EventGuard e;
    ASSERT_RT_OK(e.status());
    ASSERT_RT_OK(rtEventRecord(e, s));
    ASSERT_RT_OK(rtEventSynchronize(e));
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtEventRecord(e, s));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtEventQuery(e));
    gate.open();
    ASSERT_RT_OK(rtEventSynchronize(e));
    EXPECT_TRUE(gate.left());
}

TEST_P(Event, RecordOnDefaultStream) {
    EventGuard e;
    ASSERT_RT_OK(e.status());
    std::atomic<bool> ran{false};
    ASSERT_RT_OK(rtLaunchHostFunc(nullptr, rt_test::set_flag, &ran));
    ASSERT_RT_OK(rtEventRecord(e, nullptr));
    ASSERT_RT_OK(rtEventSynchronize(e));
    EXPECT_TRUE(ran.load());
}

TEST_P(Event, SynchronizeFromManyThreads) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    EventGuard e(RT_EVENT_BLOCKING_SYNC);
    ASSERT_RT_OK(e.status());
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtEventRecord(e, s));
    std::atomic<int> returned{0}, ok{0};
    std::vector<std::thread> waiters;
    for (int i = 0; i < 4; ++i)
        waiters.emplace_back([&] {
            rtError_t r = rtEventSynchronize(e);
            if (r == RT_SUCCESS && gate.left()) ++ok;
            ++returned;
        });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(returned.load(), 0) << "rtEventSynchronize returned before the recorded work completed";
    gate.open();
    for (auto& t : waiters) t.join();
    EXPECT_EQ(ok.load(), 4);
}

TEST_P(Event, DestroyWhilePendingIsAllowed) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtEventCreate(&e));
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtEventRecord(e, s));
    ASSERT_RT_OK(rtEventDestroy(e));  // resources released once the record completes
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventQuery(e));
}

TEST_P(Event, ElapsedTimeAroundASleepIsPositiveAndMonotone) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    EventGuard e1, e2, e3;
    ASSERT_RT_OK(e1.status());
    ASSERT_RT_OK(e2.status());
    ASSERT_RT_OK(e3.status());
    int d1 = 30, d2 = 15;
    ASSERT_RT_OK(rtEventRecord(e1, s));
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::sleep_ms, &d1));
    ASSERT_RT_OK(rtEventRecord(e2, s));
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::sleep_ms, &d2));
    ASSERT_RT_OK(rtEventRecord(e3, s));
    ASSERT_RT_OK(rtEventSynchronize(e3));
    float t12 = -1, t23 = -1, t13 = -1, t11 = -1;
    ASSERT_RT_OK(rtEventElapsedTime(&t12, e1, e2));
    ASSERT_RT_OK(rtEventElapsedTime(&t23, e2, e3));
    ASSERT_RT_OK(rtEventElapsedTime(&t13, e1, e3));
    ASSERT_RT_OK(rtEventElapsedTime(&t11, e1, e1));
    // Sleeps never end early; a VM may make them much longer, hence generous upper bounds.
    EXPECT_GE(t12, d1 * 0.95f);
    EXPECT_LT(t12, 5000.f);
    EXPECT_GE(t23, d2 * 0.95f);
    EXPECT_LT(t23, 5000.f);
    EXPECT_GT(t13, t12);
    EXPECT_NEAR(t13, t12 + t23, 0.5f);
    EXPECT_EQ(t11, 0.f);
}

TEST_P(Event, ElapsedTimeIsSignedLikeCuda) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    EventGuard a, b;
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    int d = 10;
    ASSERT_RT_OK(rtEventRecord(a, s));
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::sleep_ms, &d));
    ASSERT_RT_OK(rtEventRecord(b, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    float fwd = 0, back = 0;
    ASSERT_RT_OK(rtEventElapsedTime(&fwd, a, b));
    ASSERT_RT_OK(rtEventElapsedTime(&back, b, a));
    EXPECT_GT(fwd, 0.f);
    EXPECT_FLOAT_EQ(back, -fwd);
}

TEST_P(Event, ElapsedTimeAcrossStreamsMeasuresWallClock) {
    StreamGuard a, b;
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    EventGuard start, stop;
    ASSERT_RT_OK(start.status());
    ASSERT_RT_OK(stop.status());
    ASSERT_RT_OK(rtEventRecord(start, a));
    ASSERT_RT_OK(rtEventSynchronize(start));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_RT_OK(rtEventRecord(stop, b));
    ASSERT_RT_OK(rtEventSynchronize(stop));
    float ms = 0;
    ASSERT_RT_OK(rtEventElapsedTime(&ms, start, stop));
    EXPECT_GE(ms, 19.f);
}

TEST_P(Event, ElapsedTimeErrors) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    EventGuard timed, other, untimed(RT_EVENT_DISABLE_TIMING), never;
    ASSERT_RT_OK(timed.status());
    ASSERT_RT_OK(other.status());
    ASSERT_RT_OK(untimed.status());
    ASSERT_RT_OK(never.status());
    ASSERT_RT_OK(rtEventRecord(timed, s));
    ASSERT_RT_OK(rtEventRecord(untimed, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    float ms = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEventElapsedTime(nullptr, timed, timed));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventElapsedTime(&ms, timed, untimed));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventElapsedTime(&ms, untimed, timed));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventElapsedTime(&ms, timed, never));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventElapsedTime(&ms, never, timed));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventElapsedTime(&ms, timed, garbage_handle<rtEvent_t>()));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventElapsedTime(&ms, garbage_handle<rtEvent_t>(), timed));

    // Not yet completed: NOT_READY (then fine once it completes).
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtEventRecord(other, s));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtEventElapsedTime(&ms, timed, other));
    gate.open();
    ASSERT_RT_OK(rtEventSynchronize(other));
    EXPECT_RT_OK(rtEventElapsedTime(&ms, timed, other));
    EXPECT_GE(ms, 0.f);
}

TEST_P(Event, GarbageDestroyedAndWrongKindHandlesAreInvalidHandle) {
    rtEvent_t g = garbage_handle<rtEvent_t>();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventQuery(g));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventSynchronize(g));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventRecord(g, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventDestroy(g));

    rtEvent_t dead = nullptr;
    ASSERT_RT_OK(rtEventCreate(&dead));
    ASSERT_RT_OK(rtEventDestroy(dead));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventQuery(dead));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventSynchronize(dead));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventRecord(dead, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventDestroy(dead));

    StreamGuard s;
    ASSERT_RT_OK(s.status());
    auto stream_as_event = reinterpret_cast<rtEvent_t>(s.get());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventQuery(stream_as_event));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventRecord(stream_as_event, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventDestroy(stream_as_event));
    EXPECT_RT_OK(rtStreamQuery(s));  // the stream itself was not harmed
}

TEST_P(Event, NullEventIsRejected) {
    // NULL is no event (unlike a NULL stream): rejected with a handle or value error, never a crash.
    for (rtError_t r : {rtEventQuery(nullptr), rtEventSynchronize(nullptr), rtEventRecord(nullptr, nullptr),
                        rtEventDestroy(nullptr)}) {
        EXPECT_TRUE(r == RT_ERROR_INVALID_HANDLE || r == RT_ERROR_INVALID_VALUE) << rtGetErrorName(r);
    }
}

TEST_P(Event, ManyEventsCreateRecordDestroy) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    std::vector<rtEvent_t> ev(256);
    for (auto& e : ev) {
        ASSERT_RT_OK(rtEventCreate(&e));
        ASSERT_RT_OK(rtEventRecord(e, s));
    }
    ASSERT_RT_OK(rtEventSynchronize(ev.back()));
    for (auto e : ev) EXPECT_RT_OK(rtEventQuery(e));  // in order: the last done implies all done
    for (auto e : ev) EXPECT_RT_OK(rtEventDestroy(e));
}

RT_INSTANTIATE_DEVICE_TEST(Event);

} // namespace
