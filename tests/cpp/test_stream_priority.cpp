// test_stream_priority.cpp — rtStreamCreateWithPriority / rtDeviceGetStreamPriorityRange (and the cpu executors'
// priority order), rtStreamSynchronizeWithTimeout and rtEventSynchronizeWithTimeout, and their C++ faces.
#include "test_util.hpp"

#include <mutex>
#include <runtime/runtime.hpp>

using namespace rt_test;

namespace {

class StreamPriority : public DeviceTest {};

TEST_P(StreamPriority, RangeAndClamping) {
    int least = 99, greatest = 99;
    ASSERT_RT_OK(rtDeviceGetStreamPriorityRange(&least, &greatest));
    EXPECT_EQ(least, 0);
    EXPECT_LE(greatest, 0);
    if (backend_of(device()) == "cpu") {
        EXPECT_EQ(greatest, -2);
    }
    ASSERT_RT_OK(rtDeviceGetStreamPriorityRange(nullptr, nullptr));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreateWithPriority(&s, RT_STREAM_NON_BLOCKING, greatest - 100));
    int p = 1;
    ASSERT_RT_OK(rtStreamGetPriority(s, &p));
    EXPECT_EQ(p, greatest);  // clamped, as CUDA does
    ASSERT_RT_OK(rtStreamDestroy(s));
    ASSERT_RT_OK(rtStreamCreateWithPriority(&s, RT_STREAM_DEFAULT, 5));
    ASSERT_RT_OK(rtStreamGetPriority(s, &p));
    EXPECT_EQ(p, 0);
    ASSERT_RT_OK(rtStreamDestroy(s));
    ASSERT_RT_OK(rtStreamGetPriority(nullptr, &p));
    EXPECT_EQ(p, 0);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamCreateWithPriority(&s, 0x8, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamCreateWithPriority(nullptr, 0, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamGetPriority(nullptr, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamGetPriority(garbage_handle<rtStream_t>(), &p));
}

struct Order {
    std::mutex mutex;
    std::vector<int> seen;
};
struct Mark {
    Order* order;
    int id;
};
void record_mark(void* p) {
    auto* m = static_cast<Mark*>(p);
    std::lock_guard lock(m->order->mutex);
    m->order->seen.push_back(m->id);
}

// With one executor (this file runs with RUNTIME_EXECUTORS=1) busy behind a gate, a low- and then a high-priority
// stream become ready: the executor takes the high-priority one first once the gate opens.
TEST_P(StreamPriority, CpuExecutorRunsTheHigherPriorityReadyStreamFirst) {
    if (backend_of(device()) != "cpu") GTEST_SKIP() << "the executor order is the cpu backend's";
    int least = 0, greatest = 0;
    ASSERT_RT_OK(rtDeviceGetStreamPriorityRange(&least, &greatest));
    rtStream_t busy = nullptr, low = nullptr, high = nullptr;
    ASSERT_RT_OK(rtStreamCreateWithPriority(&busy, 0, least));
    ASSERT_RT_OK(rtStreamCreateWithPriority(&low, 0, least));
    ASSERT_RT_OK(rtStreamCreateWithPriority(&high, 0, greatest));
    Order order;
    Mark lows[3] = {{&order, 10}, {&order, 11}, {&order, 12}}, highs[3] = {{&order, 20}, {&order, 21}, {&order, 22}};
    {
        Gate gate;
        ASSERT_RT_OK(gate.launch(busy));
        ASSERT_TRUE(wait_until([&] { return gate.entered(); }));
        for (Mark& m : lows) ASSERT_RT_OK(rtLaunchHostFunc(low, record_mark, &m));
        for (Mark& m : highs) ASSERT_RT_OK(rtLaunchHostFunc(high, record_mark, &m));
        gate.open();
        ASSERT_RT_OK(rtStreamSynchronize(busy));
        ASSERT_RT_OK(rtStreamSynchronize(low));
        ASSERT_RT_OK(rtStreamSynchronize(high));
    }
    EXPECT_EQ(order.seen, (std::vector<int>{20, 21, 22, 10, 11, 12}));
    for (rtStream_t s : {busy, low, high}) ASSERT_RT_OK(rtStreamDestroy(s));
}
RT_INSTANTIATE_DEVICE_TEST(StreamPriority);

class SyncTimeout : public DeviceTest {};

TEST_P(SyncTimeout, StreamTimesOutThenCompletes) {
    StreamGuard s;
    ASSERT_RT_OK(rtStreamSynchronizeWithTimeout(s, 0));  // idle: at once
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    EXPECT_RT_ERROR(RT_ERROR_TIMEOUT, rtStreamSynchronizeWithTimeout(s, 20));
    EXPECT_TRUE(contains(last_message(), "did not complete within 20 ms"));
    EXPECT_TRUE(contains(last_message(), "stream"));
    EXPECT_RT_ERROR(RT_ERROR_TIMEOUT, rtStreamSynchronizeWithTimeout(s, 0));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronizeWithTimeout(s, -1));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamSynchronizeWithTimeout(garbage_handle<rtStream_t>(), 10));
}

void fail_here(void*) { rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, "deliberate"); }

TEST_P(SyncTimeout, ReportsTheStreamsFailure) {
    StreamGuard s;
    ASSERT_RT_OK(rtLaunchHostFunc(s, fail_here, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronizeWithTimeout(s, 10000));
    EXPECT_TRUE(contains(last_message(), "deliberate"));
    ASSERT_RT_OK(rtStreamSynchronizeWithTimeout(s, 10000));  // reported once, then cleared
}

TEST_P(SyncTimeout, EventTimesOutThenCompletes) {
    StreamGuard s;
    EventGuard e;
    ASSERT_RT_OK(rtEventSynchronizeWithTimeout(e, 0));  // never recorded: complete
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtEventRecord(e, s));
    EXPECT_RT_ERROR(RT_ERROR_TIMEOUT, rtEventSynchronizeWithTimeout(e, 15));
    EXPECT_TRUE(contains(last_message(), "did not complete within 15 ms"));
    EXPECT_TRUE(contains(last_message(), "event"));
    gate.open();
    ASSERT_RT_OK(rtEventSynchronizeWithTimeout(e, -1));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventSynchronizeWithTimeout(garbage_handle<rtEvent_t>(), 10));
}

TEST_P(SyncTimeout, CppFaces) {
    runtime::Stream s = runtime::Stream::with_priority(-1);
    EXPECT_EQ(s.priority(), backend_of(device()) == "cpu" ? -1 : s.priority());
    runtime::Event e;
    {
        Gate gate;
        ASSERT_RT_OK(gate.launch(s.native_handle()));
        e.record(s);
        EXPECT_FALSE(s.synchronize_for(std::chrono::milliseconds(5)));
        EXPECT_FALSE(e.synchronize_for(std::chrono::milliseconds(5)));
        gate.open();
        EXPECT_TRUE(s.synchronize_for(std::chrono::milliseconds(-1)));
        EXPECT_TRUE(e.synchronize_for(std::chrono::milliseconds(30000)));
    }
    const runtime::PriorityRange r = runtime::stream_priority_range();
    EXPECT_EQ(r.least, 0);
    EXPECT_EQ(runtime::device_attribute(RT_DEV_ATTR_MULTIPROCESSOR_COUNT), runtime::device_properties().compute_units);
    EXPECT_EQ(runtime::pointer_attributes(nullptr).type, RT_MEMORY_TYPE_UNREGISTERED);
    runtime::PitchedBuffer pb(10, 3);
    EXPECT_GE(pb.pitch(), 10u);
    EXPECT_EQ(runtime::pointer_attributes(pb.data()).type, RT_MEMORY_TYPE_DEVICE);
    std::vector<unsigned char> h(30, 7), back(30, 0);
    s.copy_2d(pb.data(), pb.pitch(), h.data(), 10, 10, 3);
    s.copy_2d(back.data(), 10, pb.data(), pb.pitch(), 10, 3);
    s.synchronize();
    EXPECT_EQ(back, h);
    if (runtime::device_properties().managed_memory) {
        runtime::ManagedBuffer<int> m(8);
        for (int i = 0; i < 8; ++i) m[i] = i;
        s.prefetch(m.data(), m.size_bytes(), device());
        s.memset(m.data(), 0, sizeof(int));
        s.synchronize();
        EXPECT_EQ(m[0], 0);
        EXPECT_EQ(m[7], 7);
        EXPECT_EQ(runtime::pointer_attributes(m.data()).type, RT_MEMORY_TYPE_MANAGED);
    }
    try {
        runtime::enable_peer_access(device());
        ADD_FAILURE() << "enable_peer_access of the current device did not throw";
    } catch (const runtime::Error& err) {
        EXPECT_EQ(err.code(), RT_ERROR_INVALID_DEVICE);
    }
}
RT_INSTANTIATE_DEVICE_TEST(SyncTimeout);

}  // namespace
