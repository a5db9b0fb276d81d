// test_host_func.cpp — rtLaunchHostFunc / rtHostFuncSetError: ordering with copies, async error reporting and recovery.
#include "test_util.hpp"

#include <mutex>

namespace {

using rt_test::contains;
using rt_test::last_message;
using rt_test::StreamGuard;

class HostFunc : public rt_test::DeviceTest {};

/// Appends its index to a shared log: the log's order is the execution order.
struct LogEntry {
    std::vector<int>* log;
    std::mutex* mutex;
    int index;
};
void append(void* p) {
    auto* e = static_cast<LogEntry*>(p);
    std::lock_guard<std::mutex> lock(*e->mutex);
    e->log->push_back(e->index);
}

/// Marks the running host function failed with the code and message in a FailSpec.
struct FailSpec {
    rtError_t code;
    const char* message;
    std::atomic<rtError_t> returned{RT_ERROR_UNKNOWN};
};
void fail(void* p) {
    auto* f = static_cast<FailSpec*>(p);
    f->returned = rtHostFuncSetError(f->code, f->message);
}

TEST_P(HostFunc, RunInSubmissionOrder) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    constexpr int kN = 2000;
    std::vector<int> log;
    std::mutex m;
    std::vector<LogEntry> entries(kN);
    for (int i = 0; i < kN; ++i) {
        entries[static_cast<size_t>(i)] = {&log, &m, i};
        ASSERT_RT_OK(rtLaunchHostFunc(s, append, &entries[static_cast<size_t>(i)]));
    }
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_EQ(log.size(), static_cast<size_t>(kN));
    for (int i = 0; i < kN; ++i) ASSERT_EQ(log[static_cast<size_t>(i)], i);
}

/// host fn writes *v=1 → H2D copies *v → host fn writes *v=2 → D2H into *out → host fn reads *out: the device saw
/// exactly 1, and the last host function ran after the D2H had landed.
void ordered_with_copies(int* v, int* out) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    rt_test::DevBuf d(sizeof(int));
    ASSERT_NE(d.get(), nullptr);
    struct Store {
        int* where;
        int value;
    };
    auto store = [](void* p) {
        auto* st = static_cast<Store*>(p);
        *st->where = st->value;
    };
    *v = 0;
    *out = -1;
    int seen_by_fn = -1;
    Store one{v, 1}, two{v, 2};
    struct Peek {
        int* from;
        int* to;
    } peek{out, &seen_by_fn};
    ASSERT_RT_OK(rtLaunchHostFunc(s, store, &one));
    ASSERT_RT_OK(rtMemcpyAsync(d.get(), v, sizeof *v, RT_MEMCPY_HOST_TO_DEVICE, s));
    ASSERT_RT_OK(rtLaunchHostFunc(s, store, &two));
    ASSERT_RT_OK(rtMemcpyAsync(out, d.get(), sizeof *out, RT_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_RT_OK(rtLaunchHostFunc(s, [](void* p) { auto* k = static_cast<Peek*>(p); *k->to = *k->from; }, &peek));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(*out, 1);
    EXPECT_EQ(*v, 2);
    EXPECT_EQ(seen_by_fn, 1) << "host function ran before the preceding D2H copy completed";
}

TEST_P(HostFunc, OrderedWithCopies) {
    // Pinned host memory on every backend: on cuda a pageable source may be read at the call (before the host
    // function that writes it ran) and a copy into pageable memory is synchronous (docs/cuda.md).
    rt_test::HostBuf pinned(2 * sizeof(int));
    ASSERT_RT_OK(pinned.status());
    {
        SCOPED_TRACE("pinned host memory");
        ordered_with_copies(reinterpret_cast<int*>(pinned.get()), reinterpret_cast<int*>(pinned.get()) + 1);
    }
    // Pageable memory where pageable copies run in stream order (cpu).
    if (rt_test::pageable_copies_are_stream_ordered(device())) {
        SCOPED_TRACE("pageable host memory");
        int v = 0, out = 0;
        ordered_with_copies(&v, &out);
    }
}

TEST_P(HostFunc, RunsOnTheDefaultStream) {
    std::atomic<bool> ran{false};
    ASSERT_RT_OK(rtLaunchHostFunc(nullptr, rt_test::set_flag, &ran));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_TRUE(ran.load());
}

TEST_P(HostFunc, NullUserDataIsPassedThrough) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    static std::atomic<int> calls{0};
    static std::atomic<bool> got_null{false};
    calls = 0;
    got_null = false;
    ASSERT_RT_OK(rtLaunchHostFunc(s, [](void* p) { got_null = p == nullptr; ++calls; }, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(calls.load(), 1);
    EXPECT_TRUE(got_null.load());
}

TEST_P(HostFunc, NullFunctionIsInvalidValue) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchHostFunc(s, nullptr, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchHostFunc(nullptr, nullptr, nullptr));
}

TEST_P(HostFunc, SetErrorOutsideAHostFunctionIsInvalidValue) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, "not in a host function"));
    // ... and it marked no stream.
    EXPECT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_RT_OK(rtDeviceSynchronize());
}

TEST_P(HostFunc, SetErrorIsReportedBySynchronizeOnceThenStreamIsClean) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    FailSpec f{RT_ERROR_LAUNCH_FAILED, "sensor-7 unplugged"};
    std::atomic<bool> later_ran{false};
    ASSERT_RT_OK(rtLaunchHostFunc(s, fail, &f));
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &later_ran));  // skipped: behind an unreported failure
    ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    std::string m = last_message();
    EXPECT_TRUE(contains(m, "sensor-7 unplugged"));
    EXPECT_TRUE(contains(m, "host function"));
    EXPECT_TRUE(contains(m, "1 operation(s) queued after it were skipped")) << m;
    EXPECT_EQ(f.returned.load(), RT_SUCCESS) << "rtHostFuncSetError failed inside a host function";
    EXPECT_FALSE(later_ran.load()) << "work queued behind the failure ran";
    EXPECT_RT_OK(rtStreamSynchronize(s)) << "the error was reported twice";
    EXPECT_RT_OK(rtStreamQuery(s));
    // Reported: the stream runs work again.
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &later_ran));
    EXPECT_RT_OK(rtStreamSynchronize(s));
    EXPECT_TRUE(later_ran.load());
}

TEST_P(HostFunc, SetErrorCodeIsPreserved) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    for (rtError_t code : {RT_ERROR_LAUNCH_FAILED, RT_ERROR_OUT_OF_MEMORY, RT_ERROR_UNKNOWN}) {
        FailSpec f{code, "custom failure"};
        ASSERT_RT_OK(rtLaunchHostFunc(s, fail, &f));
        EXPECT_RT_ERROR(code, rtStreamSynchronize(s));
    }
}

TEST_P(HostFunc, SetErrorIsReportedByQuery) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    FailSpec f{RT_ERROR_LAUNCH_FAILED, "query-visible failure"};
    std::atomic<bool> done{false};
    ASSERT_RT_OK(rtLaunchHostFunc(s, fail, &f));
    // Skipped if it comes up before the query below has reported the failure, run if after: the report makes
    // the stream run work again.
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &done));
    rtError_t r = RT_ERROR_NOT_READY;
    ASSERT_TRUE(rt_test::wait_until([&] { return (r = rtStreamQuery(s)) != RT_ERROR_NOT_READY; }));
    EXPECT_EQ(r, RT_ERROR_LAUNCH_FAILED) << rtGetErrorName(r);
    EXPECT_TRUE(contains(last_message(), "query-visible failure"));
    EXPECT_TRUE(contains(last_message(), "host function"));
    EXPECT_RT_OK(rtStreamSynchronize(s)) << "reported once, by the query";
    EXPECT_RT_OK(rtStreamQuery(s));
}

TEST_P(HostFunc, StreamIsUsableAfterAnError) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    FailSpec f{RT_ERROR_LAUNCH_FAILED, "transient"};
    ASSERT_RT_OK(rtLaunchHostFunc(s, fail, &f));
    ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    rt_test::DevBuf d(4096);
    ASSERT_NE(d.get(), nullptr);
    auto src = rt_test::pattern(4096, 9);
    std::vector<unsigned char> got(4096);
    ASSERT_RT_OK(rtMemcpyAsync(d.get(), src.data(), 4096, RT_MEMCPY_HOST_TO_DEVICE, s));
    ASSERT_RT_OK(rtMemcpyAsync(got.data(), d.get(), 4096, RT_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(got, src);
}

TEST_P(HostFunc, ErrorStaysOnItsStream) {
    StreamGuard bad, good;
    ASSERT_RT_OK(bad.status());
    ASSERT_RT_OK(good.status());
    FailSpec f{RT_ERROR_LAUNCH_FAILED, "only on bad"};
    ASSERT_RT_OK(rtLaunchHostFunc(bad, fail, &f));
    std::atomic<bool> ran{false};
    ASSERT_RT_OK(rtLaunchHostFunc(good, rt_test::set_flag, &ran));
    EXPECT_RT_OK(rtStreamSynchronize(good));
    EXPECT_TRUE(ran.load());
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(bad));
}

TEST_P(HostFunc, OnlyTheFirstErrorSinceLastSyncIsReported) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    FailSpec first{RT_ERROR_LAUNCH_FAILED, "first failure"};
    FailSpec second{RT_ERROR_UNKNOWN, "second failure"};
    ASSERT_RT_OK(rtLaunchHostFunc(s, fail, &first));
    ASSERT_RT_OK(rtLaunchHostFunc(s, fail, &second));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    EXPECT_TRUE(contains(last_message(), "first failure"));
    EXPECT_RT_OK(rtStreamSynchronize(s));
}

TEST_P(HostFunc, DeviceSynchronizeReportsAnyStreamsError) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    FailSpec f{RT_ERROR_LAUNCH_FAILED, "seen by device sync"};
    ASSERT_RT_OK(rtLaunchHostFunc(s, fail, &f));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtDeviceSynchronize());
    EXPECT_TRUE(contains(last_message(), "seen by device sync"));
    EXPECT_TRUE(contains(last_message(), "host function"));
}

TEST_P(HostFunc, ErrorOnTheDefaultStream) {
    FailSpec f{RT_ERROR_LAUNCH_FAILED, "default stream failure"};
    ASSERT_RT_OK(rtLaunchHostFunc(nullptr, fail, &f));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(nullptr));
    EXPECT_TRUE(contains(last_message(), "default stream failure"));
    EXPECT_RT_OK(rtStreamSynchronize(nullptr));
}

TEST_P(HostFunc, ErrorMessageGoesToTheSynchronizingThread) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    FailSpec f{RT_ERROR_LAUNCH_FAILED, "reported elsewhere"};
    ASSERT_RT_OK(rtLaunchHostFunc(s, fail, &f));
    rtError_t r = RT_SUCCESS;
    std::string m;
    std::thread t([&] {
        r = rtStreamSynchronize(s);
        m = rtGetLastErrorMessage();
    });
    t.join();
    EXPECT_EQ(r, RT_ERROR_LAUNCH_FAILED) << rtGetErrorName(r);
    EXPECT_TRUE(contains(m, "reported elsewhere"));
}

RT_INSTANTIATE_DEVICE_TEST(HostFunc);

} // namespace
