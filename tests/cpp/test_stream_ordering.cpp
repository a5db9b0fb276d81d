// test_stream_ordering.cpp — cross-stream ordering with rtEventRecord + rtStreamWaitEvent: waits hold, chains and pipelines deliver.
#include "test_util.hpp"

namespace {

using rt_test::EventGuard;
using rt_test::Gate;
using rt_test::StreamGuard;

class Ordering : public rt_test::DeviceTest {};

TEST_P(Ordering, WorkAfterWaitDoesNotRunBeforeTheRecordedWork) {
    StreamGuard a, b;
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    EventGuard e;
    ASSERT_RT_OK(e.status());
    Gate gate;
    std::atomic<bool> b_ran{false};
    // B's work before the wait is a fill observed through an event, not a host function: CUDA may run the host
    // functions of all streams on one thread, where the gate on A would hold it up ("may be serialized").
    rt_test::DevBuf buf(4096);
    EventGuard before;
    ASSERT_RT_OK(before.status());
    ASSERT_RT_OK(rtMemsetAsync(buf.get(), 1, 4096, b));  // not held back
    ASSERT_RT_OK(rtEventRecord(before, b));
    ASSERT_RT_OK(gate.launch(a));
    ASSERT_RT_OK(rtEventRecord(e, a));
    ASSERT_RT_OK(rtStreamWaitEvent(b, e));
    ASSERT_RT_OK(rtLaunchHostFunc(b, rt_test::set_flag, &b_ran));
    EXPECT_TRUE(rt_test::wait_until([&] { return rtEventQuery(before) == RT_SUCCESS; }, std::chrono::milliseconds(5000)))
        << "work queued on B before the wait was held back";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(gate.entered());
    EXPECT_FALSE(b_ran.load()) << "B ran past rtStreamWaitEvent while A was still blocked";
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(b));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(b));
    EXPECT_TRUE(b_ran.load());
    EXPECT_TRUE(gate.left());
    EXPECT_FALSE(gate.timed_out()) << "B only proceeded because the gate timed out";
}

TEST_P(Ordering, WaitUsesTheRecordAtTheTimeOfTheWait) {
    // Re-recording after the wait must not change what B waits for: B waits for the first record only.
    StreamGuard a, b;
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    EventGuard e;
    ASSERT_RT_OK(e.status());
    ASSERT_RT_OK(rtEventRecord(e, a));  // complete at once: A is empty
    ASSERT_RT_OK(rtStreamWaitEvent(b, e));
    Gate gate;
    ASSERT_RT_OK(gate.launch(a));
    ASSERT_RT_OK(rtEventRecord(e, a));  // this record is blocked by the gate
    // B's work is a fill, not a host function (CUDA may serialise the host functions of all streams).
    rt_test::DevBuf buf(4096);
    ASSERT_RT_OK(rtMemsetAsync(buf.get(), 1, 4096, b));
    EXPECT_TRUE(rt_test::wait_until([&] { return rtStreamQuery(b) == RT_SUCCESS; }, std::chrono::milliseconds(5000)))
        << "B waited for a record made after its rtStreamWaitEvent";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(a));
    ASSERT_RT_OK(rtStreamSynchronize(b));
}

TEST_P(Ordering, ChainAcrossThreeStreams) {
    StreamGuard a, b, c;
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    ASSERT_RT_OK(c.status());
    EventGuard ea, eb;
    ASSERT_RT_OK(ea.status());
    ASSERT_RT_OK(eb.status());
    std::vector<int> log;
    std::mutex m;
    struct Step {
        std::vector<int>* log;
        std::mutex* m;
        int id;
    } s1{&log, &m, 1}, s2{&log, &m, 2}, s3{&log, &m, 3};
    auto step = [](void* p) {
        auto* s = static_cast<Step*>(p);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::lock_guard<std::mutex> lock(*s->m);
        s->log->push_back(s->id);
    };
    // Queue in reverse stream order so that nothing but the events can produce 1,2,3.
    ASSERT_RT_OK(rtLaunchHostFunc(a, step, &s1));
    ASSERT_RT_OK(rtEventRecord(ea, a));
    ASSERT_RT_OK(rtStreamWaitEvent(b, ea));
    ASSERT_RT_OK(rtLaunchHostFunc(b, step, &s2));
    ASSERT_RT_OK(rtEventRecord(eb, b));
    ASSERT_RT_OK(rtStreamWaitEvent(c, eb));
    ASSERT_RT_OK(rtLaunchHostFunc(c, step, &s3));
    ASSERT_RT_OK(rtStreamSynchronize(c));
    std::lock_guard<std::mutex> lock(m);
    EXPECT_EQ(log, (std::vector<int>{1, 2, 3}));
}

TEST_P(Ordering, FanInWaitsForEveryProducer) {
    constexpr int kProducers = 6;
    std::vector<std::unique_ptr<StreamGuard>> producers;
    std::vector<std::unique_ptr<EventGuard>> events;
    std::vector<std::unique_ptr<Gate>> gates;
    StreamGuard consumer;
    ASSERT_RT_OK(consumer.status());
    for (int i = 0; i < kProducers; ++i) {
        producers.push_back(std::make_unique<StreamGuard>());
        events.push_back(std::make_unique<EventGuard>());
        gates.push_back(std::make_unique<Gate>());
        ASSERT_RT_OK(producers.back()->status());
        ASSERT_RT_OK(events.back()->status());
        ASSERT_RT_OK(gates.back()->launch(*producers.back()));
        ASSERT_RT_OK(rtEventRecord(*events.back(), *producers.back()));
        ASSERT_RT_OK(rtStreamWaitEvent(consumer, *events.back()));
    }
    std::atomic<bool> consumed{false};
    ASSERT_RT_OK(rtLaunchHostFunc(consumer, rt_test::set_flag, &consumed));
    // Open the gates one at a time; the consumer must stay blocked until the last one.
    for (int i = 0; i < kProducers; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        EXPECT_FALSE(consumed.load()) << "consumer ran with " << (kProducers - i) << " producers still blocked";
        gates[static_cast<size_t>(i)]->open();
    }
    ASSERT_RT_OK(rtStreamSynchronize(consumer));
    EXPECT_TRUE(consumed.load());
}

/// H2D on `up`, D2D on `mid` after an event, D2H on `down` after another: the canonical pipeline, many iterations
/// in flight at once behind a gate, one synchronize at the end. `in[i]`/`out[i]`: the host buffers of iteration i.
void copy_pipeline(const std::vector<unsigned char*>& in, const std::vector<unsigned char*>& out, size_t bytes) {
    const size_t iters = in.size();
    StreamGuard up, mid, down;
    ASSERT_RT_OK(up.status());
    ASSERT_RT_OK(mid.status());
    ASSERT_RT_OK(down.status());
    std::vector<std::unique_ptr<rt_test::DevBuf>> stage1, stage2;
    std::vector<std::unique_ptr<EventGuard>> uploaded, moved;
    for (size_t k = 0; k < iters; ++k) {
        rt_test::fill_pattern(in[k], bytes, static_cast<uint32_t>(1000 + k));
        std::memset(out[k], 0, bytes);
        stage1.push_back(std::make_unique<rt_test::DevBuf>(bytes));
        stage2.push_back(std::make_unique<rt_test::DevBuf>(bytes));
        uploaded.push_back(std::make_unique<EventGuard>(RT_EVENT_DISABLE_TIMING));
        moved.push_back(std::make_unique<EventGuard>(RT_EVENT_DISABLE_TIMING));
        ASSERT_NE(stage1.back()->get(), nullptr);
        ASSERT_NE(stage2.back()->get(), nullptr);
    }
    Gate gate;  // hold the first stage so that every later operation is queued behind real waits
    ASSERT_RT_OK(gate.launch(up));
    for (size_t k = 0; k < iters; ++k) {
        ASSERT_RT_OK(rtMemcpyAsync(stage1[k]->get(), in[k], bytes, RT_MEMCPY_HOST_TO_DEVICE, up));
        ASSERT_RT_OK(rtEventRecord(*uploaded[k], up));
        ASSERT_RT_OK(rtStreamWaitEvent(mid, *uploaded[k]));
        ASSERT_RT_OK(rtMemcpyAsync(stage2[k]->get(), stage1[k]->get(), bytes, RT_MEMCPY_DEVICE_TO_DEVICE, mid));
        ASSERT_RT_OK(rtEventRecord(*moved[k], mid));
        ASSERT_RT_OK(rtStreamWaitEvent(down, *moved[k]));
        ASSERT_RT_OK(rtMemcpyAsync(out[k], stage2[k]->get(), bytes, RT_MEMCPY_DEVICE_TO_HOST, down));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(down));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(down));
    EXPECT_FALSE(gate.timed_out()) << "the pipeline was queued only once the gate had timed out";
    for (size_t k = 0; k < iters; ++k) {
        std::vector<unsigned char> want(bytes);
        rt_test::fill_pattern(want.data(), bytes, static_cast<uint32_t>(1000 + k));
        EXPECT_EQ(rt_test::first_mismatch(out[k], want.data(), bytes), -1) << "iteration " << k;
    }
}

TEST_P(Ordering, CopyPipelineAcrossStreams) {
    constexpr int kIters = 40;
    constexpr size_t kBytes = 64 * 1024 + 3;
    // Pinned host memory on every backend: on cuda a copy with pageable memory is synchronous (the driver reads a
    // pageable source at the call and returns from a copy into pageable memory once it has completed, docs/cuda.md),
    // so behind the gate it would block the thread that opens it.
    std::vector<std::unique_ptr<rt_test::HostBuf>> pinned;
    std::vector<unsigned char*> in, out;
    for (int i = 0; i < 2 * kIters; ++i) {
        pinned.push_back(std::make_unique<rt_test::HostBuf>(kBytes));
        ASSERT_RT_OK(pinned.back()->status());
        (i < kIters ? in : out).push_back(pinned.back()->get());
    }
    {
        SCOPED_TRACE("pinned host memory");
        copy_pipeline(in, out, kBytes);
    }
    // Pageable memory where pageable copies run in stream order (cpu).
    if (!rt_test::pageable_copies_are_stream_ordered(device())) return;
    std::vector<std::vector<unsigned char>> pageable(2 * kIters, std::vector<unsigned char>(kBytes));
    for (int i = 0; i < 2 * kIters; ++i) (i < kIters ? in : out)[static_cast<size_t>(i % kIters)] = pageable[static_cast<size_t>(i)].data();
    SCOPED_TRACE("pageable host memory");
    copy_pipeline(in, out, kBytes);
}

TEST_P(Ordering, DefaultStreamParticipatesInEventOrdering) {
    StreamGuard a;
    ASSERT_RT_OK(a.status());
    EventGuard e;
    ASSERT_RT_OK(e.status());
    Gate gate;
    ASSERT_RT_OK(gate.launch(a));
    ASSERT_RT_OK(rtEventRecord(e, a));
    ASSERT_RT_OK(rtStreamWaitEvent(nullptr, e));
    std::atomic<bool> ran{false};
    ASSERT_RT_OK(rtLaunchHostFunc(nullptr, rt_test::set_flag, &ran));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_FALSE(ran.load()) << "default stream ran past its wait";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_TRUE(ran.load());

    // And the other way: a created stream waits for the default stream.
    Gate gate2;
    EventGuard e2;
    ASSERT_RT_OK(e2.status());
    ASSERT_RT_OK(gate2.launch(nullptr));
    ASSERT_RT_OK(rtEventRecord(e2, nullptr));
    ASSERT_RT_OK(rtStreamWaitEvent(a, e2));
    std::atomic<bool> ran2{false};
    ASSERT_RT_OK(rtLaunchHostFunc(a, rt_test::set_flag, &ran2));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_FALSE(ran2.load()) << "created stream ran past its wait on the default stream";
    gate2.open();
    ASSERT_RT_OK(rtStreamSynchronize(a));
    EXPECT_TRUE(ran2.load());
}

TEST_P(Ordering, WaitOnAStreamOfAnotherDevice) {
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    for (int other = 0; other < n; ++other) {
        ASSERT_RT_OK(rtSetDevice(other));
        rtStream_t remote = nullptr;
        rtEvent_t e = nullptr;
        ASSERT_RT_OK(rtStreamCreate(&remote));
        ASSERT_RT_OK(rtEventCreate(&e));
        ASSERT_RT_OK(rtSetDevice(device()));
        StreamGuard local;
        ASSERT_RT_OK(local.status());
        Gate gate;
        ASSERT_RT_OK(gate.launch(remote, other));
        ASSERT_RT_OK(rtEventRecord(e, remote));
        rtDeviceProp mine{}, theirs{};
        ASSERT_RT_OK(rtGetDeviceProperties(&mine, device()));
        ASSERT_RT_OK(rtGetDeviceProperties(&theirs, other));
        if (std::strcmp(mine.backend, theirs.backend) != 0) {
            // Events order streams of the same backend only (docs/cuda.md): refused, never silently ignored.
            EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamWaitEvent(local, e));
            gate.open();
            ASSERT_RT_OK(rtStreamSynchronize(remote));
            ASSERT_RT_OK(rtStreamDestroy(remote));
            ASSERT_RT_OK(rtEventDestroy(e));
            continue;
        }
        ASSERT_RT_OK(rtStreamWaitEvent(local, e));
        std::atomic<bool> ran{false};
        ASSERT_RT_OK(rtLaunchHostFunc(local, rt_test::set_flag, &ran));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        EXPECT_FALSE(ran.load()) << "device " << device() << " stream ran past a wait on device " << other;
        gate.open();
        ASSERT_RT_OK(rtStreamSynchronize(local));
        EXPECT_TRUE(ran.load());
        ASSERT_RT_OK(rtStreamDestroy(remote));
        ASSERT_RT_OK(rtEventDestroy(e));
    }
}

RT_INSTANTIATE_DEVICE_TEST(Ordering);

} // namespace
