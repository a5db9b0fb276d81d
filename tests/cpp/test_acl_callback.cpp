// test_acl_callback.cpp — callbacks run by a report thread (aclrtSubscribeReport, aclrtLaunchCallback with both block
// types, aclrtProcessReport and its timeout, aclrtUnSubscribeReport) and aclrtLaunchHostFunc.
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_acl_util.hpp"

/// This file's fixture (its own name keeps CTest's test names unique across the acl test files).
class AclCallback : public acl_test::AclTest {};

namespace {

/// A report thread as CANN samples write one: aclrtProcessReport in a loop until told to stop.
class ReportThread {
public:
    ReportThread() {
        thread_ = std::thread([this] {
            id_.store(static_cast<uint64_t>(pthread_self()));
            while (!stop_.load()) {
                aclError e = aclrtProcessReport(20);
                if (e == ACL_SUCCESS) processed_.fetch_add(1);
                else if (e == ACL_ERROR_RT_THREAD_SUBSCRIBE) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                else if (e != ACL_ERROR_RT_REPORT_TIMEOUT) other_.store(e);
            }
        });
        while (id_.load() == 0) std::this_thread::yield();
    }
    ~ReportThread() {
        stop_.store(true);
        thread_.join();
    }
    uint64_t id() const { return id_.load(); }
    aclError other_error() const { return other_.load(); }

private:
    std::atomic<uint64_t> id_{0};
    std::atomic<bool> stop_{false};
    std::atomic<int> processed_{0};
    std::atomic<aclError> other_{ACL_SUCCESS};
    std::thread thread_;
};

struct Log {
    std::atomic<int> calls{0};
    std::atomic<uint64_t> thread{0};
    std::vector<int> order;  // appended by callbacks and host functions; they run one after another
};

struct Step {
    Log* log;
    int value;
};

void record_step(void* p) {
    auto* s = static_cast<Step*>(p);
    s->log->thread.store(static_cast<uint64_t>(pthread_self()));
    s->log->order.push_back(s->value);
    s->log->calls.fetch_add(1);
}

}  // namespace

TEST_F(AclCallback, CallbacksRunOnTheSubscribedThreadInStreamOrder) {
    ReportThread reporter;
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    ASSERT_ACL_OK(aclrtSubscribeReport(reporter.id(), s));
    Log log;
    // BLOCK callbacks hold the stream until they return, so the host functions between them see them done.
    std::vector<Step> steps;
    steps.reserve(6);
    for (int i = 0; i < 3; ++i) {
        steps.push_back({&log, 2 * i});
        steps.push_back({&log, 2 * i + 1});
    }
    for (int i = 0; i < 3; ++i) {
        ASSERT_ACL_OK(aclrtLaunchCallback(record_step, &steps[2 * i], ACL_CALLBACK_BLOCK, s));
        ASSERT_ACL_OK(aclrtLaunchHostFunc(s, record_step, &steps[2 * i + 1]));
    }
    ASSERT_ACL_OK(aclrtSynchronizeStream(s));
    EXPECT_EQ(log.order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(log.calls.load(), 6);

    // NO_BLOCK: the stream goes on; the callback still runs, on the report thread.
    Log quick;
    Step q{&quick, 9};
    ASSERT_ACL_OK(aclrtLaunchCallback(record_step, &q, ACL_CALLBACK_NO_BLOCK, s));
    ASSERT_ACL_OK(aclrtSynchronizeStream(s));
    while (quick.calls.load() == 0) std::this_thread::yield();
    EXPECT_EQ(quick.thread.load(), reporter.id());
    EXPECT_EQ(quick.order, std::vector<int>{9});

    // Many callbacks in flight at once (more than the record pool holds, so some come from the heap).
    Log many;
    Step m{&many, 1};
    constexpr int kMany = 5000;
    for (int i = 0; i < kMany; ++i)
        ASSERT_ACL_OK(aclrtLaunchCallback(record_step, &m, i % 2 ? ACL_CALLBACK_NO_BLOCK : ACL_CALLBACK_BLOCK, s));
    ASSERT_ACL_OK(aclrtSynchronizeStream(s));
    while (many.calls.load() < kMany) std::this_thread::yield();
    EXPECT_EQ(many.calls.load(), kMany);

    ASSERT_ACL_OK(aclrtUnSubscribeReport(reporter.id(), s));
    EXPECT_ACL(ACL_ERROR_RT_STREAM_NO_CB_REG, aclrtLaunchCallback(record_step, &q, ACL_CALLBACK_BLOCK, s));
    EXPECT_ACL_OK(aclrtDestroyStream(s));
    EXPECT_ACL_OK(reporter.other_error());
}

TEST_F(AclCallback, SubscriptionErrors) {
    aclrtStream s = nullptr, t = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    ASSERT_ACL_OK(aclrtCreateStream(&t));
    const uint64_t me = static_cast<uint64_t>(pthread_self());
    // Not subscribed yet.
    EXPECT_ACL(ACL_ERROR_RT_THREAD_SUBSCRIBE, aclrtProcessReport(10));
    Log log;
    Step st{&log, 1};
    EXPECT_ACL(ACL_ERROR_RT_STREAM_NO_CB_REG, aclrtLaunchCallback(record_step, &st, ACL_CALLBACK_NO_BLOCK, s));
    EXPECT_ACL(ACL_ERROR_RT_STREAM_NO_CB_REG, aclrtLaunchCallback(record_step, &st, ACL_CALLBACK_NO_BLOCK, nullptr));
    EXPECT_ACL(ACL_ERROR_RT_STREAM_SUBSCRIBE, aclrtUnSubscribeReport(me, s));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtSubscribeReport(me, nullptr));

    ASSERT_ACL_OK(aclrtSubscribeReport(me, s));
    EXPECT_ACL(ACL_ERROR_RT_STREAM_SUBSCRIBE, aclrtSubscribeReport(me, s));
    EXPECT_ACL(ACL_ERROR_RT_STREAM_SUBSCRIBE, aclrtSubscribeReport(me + 1, s));
    ASSERT_ACL_OK(aclrtSubscribeReport(me, t));  // one thread, several streams
    // Nothing launched: the wait runs out.
    EXPECT_ACL(ACL_ERROR_RT_REPORT_TIMEOUT, aclrtProcessReport(5));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtProcessReport(0));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtProcessReport(-2));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtLaunchCallback(nullptr, &st, ACL_CALLBACK_NO_BLOCK, s));
    aclrtCallbackBlockType bad;
    int v = 2;
    std::memcpy(&bad, &v, sizeof v);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtLaunchCallback(record_step, &st, bad, s));

    // This thread processes its own callbacks: a NO_BLOCK one launched on t arrives once t gets there.
    ASSERT_ACL_OK(aclrtLaunchCallback(record_step, &st, ACL_CALLBACK_NO_BLOCK, t));
    ASSERT_ACL_OK(aclrtSynchronizeStream(t));
    ASSERT_ACL_OK(aclrtProcessReport(-1));
    EXPECT_EQ(log.calls.load(), 1);
    EXPECT_EQ(log.thread.load(), me);

    EXPECT_ACL(ACL_ERROR_RT_STREAM_SUBSCRIBE, aclrtUnSubscribeReport(me + 1, s));
    ASSERT_ACL_OK(aclrtUnSubscribeReport(me, s));
    ASSERT_ACL_OK(aclrtDestroyStream(t));  // ends t's subscription
    EXPECT_ACL(ACL_ERROR_RT_THREAD_SUBSCRIBE, aclrtProcessReport(5));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtLaunchHostFunc(s, nullptr, nullptr));
    ASSERT_ACL_OK(aclrtDestroyStream(s));
}

TEST(AclCallbackFinalize, ReleasesABlockedCallbackThatNoThreadProcesses) {
    // A BLOCK callback whose report thread never processes it: aclFinalize still drains the stream, and neither
    // callback runs.
    ASSERT_ACL_OK(aclInit(nullptr));
    ASSERT_ACL_OK(aclrtSetDevice(0));
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    ASSERT_ACL_OK(aclrtSubscribeReport(static_cast<uint64_t>(pthread_self()), s));
    Log log;
    Step st{&log, 1};
    ASSERT_ACL_OK(aclrtLaunchCallback(record_step, &st, ACL_CALLBACK_BLOCK, s));
    ASSERT_ACL_OK(aclrtLaunchCallback(record_step, &st, ACL_CALLBACK_NO_BLOCK, s));
    EXPECT_ACL_OK(aclFinalize());
    EXPECT_EQ(log.calls.load(), 0);
}

TEST(AclCallbackFinalize, ACallbackRunningAtFinalizeFinishesAndTheNextSessionWorks) {
    // aclFinalize while a report thread runs a BLOCK callback: the trampoline stops waiting, the report thread finishes
    // the callback and releases its record; the next session's callbacks run normally.
    ASSERT_ACL_OK(aclInit(nullptr));
    ASSERT_ACL_OK(aclrtSetDevice(0));
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    struct Slow {
        std::atomic<bool> started{false};
        acl_test::Gate gate;
        std::atomic<int> calls{0};
    } slow;
    std::atomic<uint64_t> id{0};
    std::atomic<aclError> processed{ACL_ERROR_INTERNAL_ERROR};
    std::thread reporter([&] {
        id.store(static_cast<uint64_t>(pthread_self()));
        while (!slow.started.load() && processed.load() == ACL_ERROR_INTERNAL_ERROR) {
            aclError e = aclrtProcessReport(10);
            if (e == ACL_SUCCESS) processed.store(e);
        }
    });
    while (id.load() == 0) std::this_thread::yield();
    ASSERT_ACL_OK(aclrtSubscribeReport(id.load(), s));
    ASSERT_ACL_OK(aclrtLaunchCallback([](void* p) {
        auto* w = static_cast<Slow*>(p);
        w->started.store(true);
        acl_test::Gate::hold(&w->gate);
        w->calls.fetch_add(1);
    }, &slow, ACL_CALLBACK_BLOCK, s));
    while (!slow.started.load()) std::this_thread::yield();
    EXPECT_ACL_OK(aclFinalize());  // returns while the callback still runs
    EXPECT_EQ(slow.calls.load(), 0);
    slow.gate.open();
    reporter.join();
    EXPECT_EQ(slow.calls.load(), 1);
    EXPECT_ACL_OK(processed.load());

    ASSERT_ACL_OK(aclInit(nullptr));
    ASSERT_ACL_OK(aclrtSetDevice(0));
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    const uint64_t me = static_cast<uint64_t>(pthread_self());
    ASSERT_ACL_OK(aclrtSubscribeReport(me, s));
    Log log;
    std::vector<Step> steps;
    for (int i = 0; i < 100; ++i) steps.push_back({&log, i});
    for (Step& st : steps) ASSERT_ACL_OK(aclrtLaunchCallback(record_step, &st, ACL_CALLBACK_NO_BLOCK, s));
    ASSERT_ACL_OK(aclrtSynchronizeStream(s));
    while (log.calls.load() < 100) ASSERT_ACL_OK(aclrtProcessReport(1000));
    std::vector<int> expected(100);
    for (int i = 0; i < 100; ++i) expected[i] = i;
    EXPECT_EQ(log.order, expected);
    EXPECT_ACL_OK(aclFinalize());
}

TEST(AclCallbackExecutors, BlockedStreamsOutnumberingTheExecutorsAllFinish) {
    // One runtime executor, three streams each held by a BLOCK callback: the report thread runs them one by one and
    // every stream finishes (the trampoline's wait holds an executor, never the report thread).
    const char* old = std::getenv("RUNTIME_EXECUTORS");
    const std::string saved = old ? old : "";
    ::setenv("RUNTIME_EXECUTORS", "1", 1);
    const aclError init = aclInit(nullptr);
    if (old) ::setenv("RUNTIME_EXECUTORS", saved.c_str(), 1);
    else ::unsetenv("RUNTIME_EXECUTORS");
    ASSERT_ACL_OK(init);
    ASSERT_ACL_OK(aclrtSetDevice(0));
    {
        ReportThread reporter;
        constexpr int kStreams = 3;
        aclrtStream streams[kStreams];
        Log logs[kStreams];
        std::vector<Step> steps;
        steps.reserve(2 * kStreams);
        for (int i = 0; i < kStreams; ++i) {
            ASSERT_ACL_OK(aclrtCreateStream(&streams[i]));
            ASSERT_ACL_OK(aclrtSubscribeReport(reporter.id(), streams[i]));
            steps.push_back({&logs[i], 1});
            steps.push_back({&logs[i], 2});
        }
        for (int i = 0; i < kStreams; ++i) {
            ASSERT_ACL_OK(aclrtLaunchCallback(record_step, &steps[2 * i], ACL_CALLBACK_BLOCK, streams[i]));
            ASSERT_ACL_OK(aclrtLaunchHostFunc(streams[i], record_step, &steps[2 * i + 1]));
        }
        for (int i = 0; i < kStreams; ++i) {
            ASSERT_ACL_OK(aclrtSynchronizeStream(streams[i]));
            EXPECT_EQ(logs[i].order, (std::vector<int>{1, 2})) << "stream " << i;
            ASSERT_ACL_OK(aclrtUnSubscribeReport(reporter.id(), streams[i]));
            ASSERT_ACL_OK(aclrtDestroyStream(streams[i]));
        }
        EXPECT_ACL_OK(reporter.other_error());
    }
    EXPECT_ACL_OK(aclFinalize());
}

TEST(AclCallbackFinalize, AReportThreadWaitingWithoutLimitReturnsAtFinalize) {
    ASSERT_ACL_OK(aclInit(nullptr));
    ASSERT_ACL_OK(aclrtSetDevice(0));
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    std::atomic<uint64_t> id{0};
    std::atomic<bool> subscribed{false};
    aclError result = ACL_SUCCESS;
    std::thread reporter([&] {
        id.store(static_cast<uint64_t>(pthread_self()));
        while (!subscribed.load()) std::this_thread::yield();
        result = aclrtProcessReport(-1);  // inside the wait or not yet there when aclFinalize runs: both return
    });
    while (id.load() == 0) std::this_thread::yield();
    ASSERT_ACL_OK(aclrtSubscribeReport(id.load(), s));
    subscribed.store(true);
    ASSERT_ACL_OK(aclFinalize());
    reporter.join();
    EXPECT_ACL(ACL_ERROR_UNINITIALIZE, result);
}
