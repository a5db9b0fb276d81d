// test_acl_model.cpp — model run instances from stream capture (aclmdlRICaptureBegin/GetInfo/End, execute async and
// sync, thread mode exchange, destroy): replays compute the right results; AscendCL's codes on misuse.
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "test_acl_util.hpp"

/// This file's fixture (its own name keeps CTest's test names unique across the acl test files).
class AclModel : public acl_test::AclTest {};

namespace {

void count_call(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }

/// A thread that processes callback reports (aclrtProcessReport in a loop) until destroyed, also when a test returns
/// early; id() is what aclrtSubscribeReport takes.
class ReportThread {
public:
    ReportThread() {
        while (id_.load() == 0) std::this_thread::yield();
    }
    ~ReportThread() {
        stop_.store(true);
        thread_.join();
    }
    uint64_t id() const { return id_.load(); }

private:
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> id_{0};
    std::thread thread_{[this] {  // last: started once the flags exist
        id_.store(static_cast<uint64_t>(pthread_self()));
        while (!stop_.load()) aclrtProcessReport(10);
    }};
};

}  // namespace

TEST_F(AclModel, CaptureAndReplay) {
    constexpr size_t n = 256;
    aclrtStream s = nullptr, run = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    ASSERT_ACL_OK(aclrtCreateStream(&run));
    void *in = nullptr, *out = nullptr, *d = nullptr, *tail = nullptr;
    ASSERT_ACL_OK(aclrtMallocHost(&in, n));
    ASSERT_ACL_OK(aclrtMallocHost(&out, n));
    ASSERT_ACL_OK(aclrtMalloc(&d, n, ACL_MEM_MALLOC_HUGE_FIRST));
    ASSERT_ACL_OK(aclrtMalloc(&tail, n, ACL_MEM_MALLOC_HUGE_FIRST));
    std::atomic<int> host_calls{0};

    aclmdlRICaptureStatus status = ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
    aclmdlRI during = nullptr;
    ASSERT_ACL_OK(aclmdlRICaptureGetInfo(s, &status, &during));
    EXPECT_EQ(status, ACL_MODEL_RI_CAPTURE_STATUS_NONE);
    EXPECT_EQ(during, nullptr);

    ASSERT_ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    // in -> d, the last quarter of d overwritten with 0xEE, d -> out; and a host function.
    ASSERT_ACL_OK(aclrtMemcpyAsync(d, n, in, n, ACL_MEMCPY_HOST_TO_DEVICE, s));
    ASSERT_ACL_OK(aclrtMemsetAsync(tail, n, 0xEE, n / 4, s));
    ASSERT_ACL_OK(aclrtMemcpyAsync(static_cast<char*>(d) + 3 * n / 4, n / 4, tail, n / 4,
                                   ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    ASSERT_ACL_OK(aclrtMemcpyAsync(out, n, d, n, ACL_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_ACL_OK(aclrtLaunchHostFunc(s, count_call, &host_calls));
    ASSERT_ACL_OK(aclmdlRICaptureGetInfo(s, &status, &during));
    EXPECT_EQ(status, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
    EXPECT_NE(during, nullptr);
    aclmdlRI model = nullptr;
    ASSERT_ACL_OK(aclmdlRICaptureEnd(s, &model));
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model, during);
    EXPECT_EQ(host_calls.load(), 0);  // captured, not run
    ASSERT_ACL_OK(aclmdlRICaptureGetInfo(s, &status, nullptr));
    EXPECT_EQ(status, ACL_MODEL_RI_CAPTURE_STATUS_NONE);

    // Each replay reads the input as it is then.
    for (int round = 0; round < 3; ++round) {
        std::memset(in, 10 + round, n);
        std::memset(out, 0, n);
        if (round < 2) {
            ASSERT_ACL_OK(aclmdlRIExecuteAsync(model, run));
            ASSERT_ACL_OK(aclrtSynchronizeStream(run));
        } else {
            ASSERT_ACL_OK(aclmdlRIExecute(model, -1));
        }
        auto* o = static_cast<unsigned char*>(out);
        for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(o[i], i < 3 * n / 4 ? 10 + round : 0xEE) << "round " << round << " byte " << i;
        EXPECT_EQ(host_calls.load(), round + 1);
    }
    ASSERT_ACL_OK(aclmdlRIDebugPrint(model));
    ASSERT_ACL_OK(aclmdlRIDestroy(model));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclmdlRIDestroy(model));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclmdlRIExecuteAsync(model, run));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclmdlRIExecute(nullptr, -1));
    EXPECT_ACL_OK(aclrtFreeHost(in));
    EXPECT_ACL_OK(aclrtFreeHost(out));
}

TEST_F(AclModel, CapturedCallbackRunsAtEveryReplay) {
    ReportThread reporter;
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    ASSERT_ACL_OK(aclrtSubscribeReport(reporter.id(), s));
    std::atomic<int> calls{0};
    ASSERT_ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    ASSERT_ACL_OK(aclrtLaunchCallback(count_call, &calls, ACL_CALLBACK_BLOCK, s));
    aclmdlRI model = nullptr;
    ASSERT_ACL_OK(aclmdlRICaptureEnd(s, &model));
    for (int i = 1; i <= 3; ++i) {
        ASSERT_ACL_OK(aclmdlRIExecuteAsync(model, s));
        ASSERT_ACL_OK(aclrtSynchronizeStream(s));
        EXPECT_EQ(calls.load(), i);  // BLOCK: done when the replay is
    }
    ASSERT_ACL_OK(aclmdlRIDestroy(model));
    ASSERT_ACL_OK(aclrtUnSubscribeReport(reporter.id(), s));
}

TEST_F(AclModel, CaptureMisuse) {
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    aclmdlRI model = nullptr;
    EXPECT_ACL(ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT, aclmdlRICaptureBegin(nullptr, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    aclmdlRICaptureMode bad;
    int v = 3;
    std::memcpy(&bad, &v, sizeof v);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclmdlRICaptureBegin(s, bad));
    EXPECT_ACL(ACL_ERROR_RT_STREAM_NOT_CAPTURED, aclmdlRICaptureEnd(s, &model));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclmdlRICaptureEnd(s, nullptr));

    // An unsafe call during a GLOBAL capture fails and invalidates the capture.
    ASSERT_ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    EXPECT_ACL(ACL_ERROR_RT_STREAM_CAPTURED, aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    void* d = nullptr;
    EXPECT_ACL(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    aclmdlRICaptureStatus status = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    ASSERT_ACL_OK(aclmdlRICaptureGetInfo(s, &status, nullptr));
    EXPECT_EQ(status, ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED);
    EXPECT_ACL(ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED, aclmdlRICaptureEnd(s, &model));
    EXPECT_EQ(model, nullptr);

    // RELAXED in this thread lets the unsafe call through; the capture stays valid.
    ASSERT_ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL));
    aclmdlRICaptureMode mode = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
    ASSERT_ACL_OK(aclmdlRICaptureThreadExchangeMode(&mode));
    EXPECT_EQ(mode, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);  // the thread's initial mode
    ASSERT_ACL_OK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    ASSERT_ACL_OK(aclrtMemsetAsync(d, 64, 1, 64, s));
    ASSERT_ACL_OK(aclmdlRICaptureThreadExchangeMode(&mode));
    EXPECT_EQ(mode, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclmdlRICaptureThreadExchangeMode(nullptr));
    // The capture ends in the thread that began it.
    aclError other_thread = ACL_SUCCESS;
    std::thread([&] { other_thread = aclmdlRICaptureEnd(s, &model); }).join();
    EXPECT_ACL(ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD, other_thread);
    ASSERT_ACL_OK(aclmdlRICaptureEnd(s, &model));
    ASSERT_ACL_OK(aclmdlRIExecute(model, 60000));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclmdlRIExecute(model, 0));
    ASSERT_ACL_OK(aclmdlRIDestroy(model));
    EXPECT_ACL_OK(aclrtFree(d));
}

TEST_F(AclModel, CallbackOnAStreamThatJoinedTheCaptureRunsAtEveryReplay) {
    ReportThread reporter;
    aclrtStream origin = nullptr, joined = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&origin));
    ASSERT_ACL_OK(aclrtCreateStream(&joined));
    ASSERT_ACL_OK(aclrtSubscribeReport(reporter.id(), joined));
    aclrtEvent fork = nullptr, join = nullptr;
    ASSERT_ACL_OK(aclrtCreateEvent(&fork));
    ASSERT_ACL_OK(aclrtCreateEvent(&join));
    std::atomic<int> captured{0}, other{0};
    ASSERT_ACL_OK(aclmdlRICaptureBegin(origin, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    ASSERT_ACL_OK(aclrtRecordEvent(fork, origin));
    ASSERT_ACL_OK(aclrtStreamWaitEvent(joined, fork));  // joined takes part in the capture from here
    ASSERT_ACL_OK(aclrtLaunchCallback(count_call, &captured, ACL_CALLBACK_BLOCK, joined));
    ASSERT_ACL_OK(aclrtRecordEvent(join, joined));
    ASSERT_ACL_OK(aclrtStreamWaitEvent(origin, join));
    aclmdlRI model = nullptr;
    ASSERT_ACL_OK(aclmdlRICaptureEnd(origin, &model));
    EXPECT_EQ(captured.load(), 0);
    for (int i = 1; i <= 3; ++i) {
        ASSERT_ACL_OK(aclmdlRIExecuteAsync(model, origin));
        ASSERT_ACL_OK(aclrtSynchronizeStream(origin));
        EXPECT_EQ(captured.load(), i);
        // Callbacks launched outside the capture, by a new thread, take records freed lately: the captured callback
        // must not be one of them (it would then count `other` at the next replay).
        aclError launched = ACL_ERROR_INTERNAL_ERROR;
        std::thread([&] {
            for (int k = 0; k < 64; ++k) {
                launched = aclrtLaunchCallback(count_call, &other, ACL_CALLBACK_BLOCK, joined);
                if (launched != ACL_SUCCESS) return;
            }
        }).join();
        ASSERT_ACL_OK(launched);
        ASSERT_ACL_OK(aclrtSynchronizeStream(joined));
        EXPECT_EQ(other.load(), 64 * i);
    }
    ASSERT_ACL_OK(aclmdlRIDestroy(model));  // the captured callback's description goes with the graph (ASan checks)
    ASSERT_ACL_OK(aclrtUnSubscribeReport(reporter.id(), joined));
    EXPECT_EQ(captured.load(), 3);
    EXPECT_ACL_OK(aclrtDestroyEvent(fork));
    EXPECT_ACL_OK(aclrtDestroyEvent(join));
}

TEST_F(AclModel, ExecuteLeavesAnEarlierFailureForTheNextSynchronize) {
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    std::atomic<int> calls{0};
    ASSERT_ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ASSERT_ACL_OK(aclrtLaunchHostFunc(s, count_call, &calls));
    aclmdlRI model = nullptr;
    ASSERT_ACL_OK(aclmdlRICaptureEnd(s, &model));
    acl_test::make_stream_fail(nullptr);  // the default stream, where aclmdlRIExecute runs
    EXPECT_ACL(ACL_ERROR_RT_MODEL_EXECUTE, aclmdlRIExecute(model, -1));
    EXPECT_NE(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);  // still the caller's to see
    EXPECT_NE(acl_test::recent_message().find("failing host function"), std::string::npos);
    ASSERT_ACL_OK(aclmdlRIExecute(model, -1));
    EXPECT_EQ(calls.load(), 1);
    ASSERT_ACL_OK(aclmdlRIDestroy(model));
    EXPECT_ACL_OK(aclrtDestroyStream(s));
}

TEST_F(AclModel, DestroyingACapturingStreamIsRefusedAndConcurrentEndsEndItOnce) {
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    ASSERT_ACL_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    std::atomic<int> calls{0};
    ASSERT_ACL_OK(aclrtLaunchHostFunc(s, count_call, &calls));
    EXPECT_NE(aclrtDestroyStream(s), ACL_SUCCESS);  // the capture goes on
    aclmdlRICaptureStatus status = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    ASSERT_ACL_OK(aclmdlRICaptureGetInfo(s, &status, nullptr));
    EXPECT_EQ(status, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
    // RELAXED: any thread may end it; two at once end it once.
    aclmdlRI models[2] = {nullptr, nullptr};
    aclError results[2] = {ACL_ERROR_INTERNAL_ERROR, ACL_ERROR_INTERNAL_ERROR};
    std::thread a([&] { results[0] = aclmdlRICaptureEnd(s, &models[0]); });
    std::thread b([&] { results[1] = aclmdlRICaptureEnd(s, &models[1]); });
    a.join();
    b.join();
    const int winner = results[0] == ACL_SUCCESS ? 0 : 1;
    EXPECT_ACL_OK(results[winner]);
    EXPECT_ACL(ACL_ERROR_RT_STREAM_NOT_CAPTURED, results[1 - winner]);
    EXPECT_EQ(models[1 - winner], nullptr);
    ASSERT_ACL_OK(aclmdlRIExecute(models[winner], -1));
    EXPECT_EQ(calls.load(), 1);
    ASSERT_ACL_OK(aclmdlRIDestroy(models[winner]));
    EXPECT_ACL_OK(aclrtDestroyStream(s));
}
