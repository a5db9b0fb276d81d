// AscendCL runtime sample, written in the shape CANN application samples have: init -> device -> context -> streams
// -> memory and copies both ways -> events -> callbacks served by a report thread -> a captured model run instance
// -> teardown. Every result is checked; the program prints PASS and exits 0 only when all of them hold.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "acl/acl.h"

namespace {

int g_failures = 0;

#define CHECK_ACL(call)                                                                                   \
    do {                                                                                                  \
        aclError ret_ = (call);                                                                           \
        if (ret_ != ACL_SUCCESS) {                                                                        \
            std::printf("[ERROR] %s:%d %s returned %d: %s\n", __FILE__, __LINE__, #call, (int)ret_,      \
                        aclGetRecentErrMsg() ? aclGetRecentErrMsg() : "(no message)");                  \
            return false;                                                                                 \
        }                                                                                                 \
    } while (0)

#define EXPECT_TRUE(cond, ...)                                                            \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            std::printf("[ERROR] %s:%d check failed: %s: ", __FILE__, __LINE__, #cond);   \
            std::printf(__VA_ARGS__);                                                     \
            std::printf("\n");                                                            \
            ++g_failures;                                                                 \
            return false;                                                                 \
        }                                                                                 \
    } while (0)

const int32_t kDeviceId = 0;
const size_t kCount = 256 * 1024;  // int32 elements: 1 MiB buffers
const size_t kBytes = kCount * sizeof(int32_t);

struct Resources {
    aclrtContext context = nullptr;
    aclrtStream stream = nullptr;
    aclrtStream stream2 = nullptr;
    void *devA = nullptr;
    void *devB = nullptr;
    void *host = nullptr;   // pinned (aclrtMallocHost)
    void *host2 = nullptr;  // pinned
};

int32_t Pattern(size_t i, int32_t seed) { return static_cast<int32_t>(i * 7 + 3) ^ seed; }

bool InitResources(Resources &res) {
    CHECK_ACL(aclInit(nullptr));
    aclrtRunMode mode;
    CHECK_ACL(aclrtGetRunMode(&mode));
    EXPECT_TRUE(mode == ACL_HOST, "run mode %d, expected ACL_HOST", (int)mode);
    uint32_t count = 0;
    CHECK_ACL(aclrtGetDeviceCount(&count));
    EXPECT_TRUE(count >= 1, "%u devices", count);
    CHECK_ACL(aclrtSetDevice(kDeviceId));
    CHECK_ACL(aclrtCreateContext(&res.context, kDeviceId));
    CHECK_ACL(aclrtSetCurrentContext(res.context));
    aclrtContext current = nullptr;
    CHECK_ACL(aclrtGetCurrentContext(&current));
    EXPECT_TRUE(current == res.context, "current context %p, expected %p", current, res.context);
    int32_t device = -1;
    CHECK_ACL(aclrtGetDevice(&device));
    EXPECT_TRUE(device == kDeviceId, "device %d", device);
    CHECK_ACL(aclrtCreateStream(&res.stream));
    CHECK_ACL(aclrtCreateStream(&res.stream2));
    CHECK_ACL(aclrtMalloc(&res.devA, kBytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_ACL(aclrtMalloc(&res.devB, kBytes, ACL_MEM_MALLOC_NORMAL_ONLY));
    CHECK_ACL(aclrtMallocHost(&res.host, kBytes));
    CHECK_ACL(aclrtMallocHost(&res.host2, kBytes));
    size_t freeBytes = 0, totalBytes = 0;
    CHECK_ACL(aclrtGetMemInfo(ACL_HBM_MEM, &freeBytes, &totalBytes));
    EXPECT_TRUE(totalBytes >= 2 * kBytes && freeBytes <= totalBytes, "free %zu total %zu", freeBytes, totalBytes);
    return true;
}

// H2D, memset, D2D on one stream, an event that a second stream waits for, then D2H on the second stream.
bool CopiesAndEvents(Resources &res) {
    int32_t *host = static_cast<int32_t *>(res.host);
    int32_t *host2 = static_cast<int32_t *>(res.host2);
    for (size_t i = 0; i < kCount; ++i) host[i] = Pattern(i, 0x11);
    CHECK_ACL(aclrtMemcpy(res.devA, kBytes, res.host, kBytes, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_ACL(aclrtMemset(res.devB, kBytes, 0, kBytes));

    aclrtEvent start = nullptr, copied = nullptr;
    CHECK_ACL(aclrtCreateEvent(&start));
    CHECK_ACL(aclrtCreateEventWithFlag(&copied, ACL_EVENT_TIME_LINE | ACL_EVENT_SYNC));
    CHECK_ACL(aclrtRecordEvent(start, res.stream));
    CHECK_ACL(aclrtMemcpyAsync(res.devB, kBytes, res.devA, kBytes, ACL_MEMCPY_DEVICE_TO_DEVICE, res.stream));
    CHECK_ACL(aclrtRecordEvent(copied, res.stream));
    // stream2 overwrites the first half of A only after the D2D copy has read it.
    CHECK_ACL(aclrtStreamWaitEvent(res.stream2, copied));
    CHECK_ACL(aclrtMemsetAsync(res.devA, kBytes, 0x5A, kBytes / 2, res.stream2));
    CHECK_ACL(aclrtMemcpyAsync(res.host2, kBytes, res.devB, kBytes, ACL_MEMCPY_DEVICE_TO_HOST, res.stream2));
    CHECK_ACL(aclrtSynchronizeStream(res.stream2));
    CHECK_ACL(aclrtSynchronizeEvent(copied));

    aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    CHECK_ACL(aclrtQueryEventStatus(copied, &status));
    EXPECT_TRUE(status == ACL_EVENT_RECORDED_STATUS_COMPLETE, "event status %d", (int)status);
    float ms = -1.0f;
    CHECK_ACL(aclrtEventElapsedTime(&ms, start, copied));
    EXPECT_TRUE(ms >= 0.0f, "elapsed %f ms", ms);

    for (size_t i = 0; i < kCount; ++i) {
        EXPECT_TRUE(host2[i] == Pattern(i, 0x11), "B[%zu] = %d, expected %d", i, host2[i], Pattern(i, 0x11));
    }
    std::memset(host2, 0, kBytes);
    CHECK_ACL(aclrtMemcpy(res.host2, kBytes, res.devA, kBytes, ACL_MEMCPY_DEVICE_TO_HOST));
    for (size_t i = 0; i < kCount; ++i) {
        int32_t expected = i < kCount / 2 ? 0x5A5A5A5A : Pattern(i, 0x11);
        EXPECT_TRUE(host2[i] == expected, "A[%zu] = %d, expected %d", i, host2[i], expected);
    }
    CHECK_ACL(aclrtDestroyEvent(start));
    CHECK_ACL(aclrtDestroyEvent(copied));
    return true;
}

// ---- callbacks: a report thread serves the stream's callbacks (aclrtSubscribeReport / aclrtProcessReport)
struct ReportThread {
    aclrtContext context = nullptr;
    std::atomic<bool> subscribed{false};  // the thread serves reports only once a stream is bound to it
    std::atomic<bool> stop{false};
    std::atomic<int> unexpected{0};  // aclrtProcessReport results other than success and its timeout
    pthread_t tid{};
};

void *ReportLoop(void *arg) {
    ReportThread *thread = static_cast<ReportThread *>(arg);
    (void)aclrtSetCurrentContext(thread->context);
    while (!thread->subscribed.load() && !thread->stop.load()) usleep(1000);
    while (!thread->stop.load()) {
        aclError ret = aclrtProcessReport(100);  // ms
        if (ret != ACL_SUCCESS && ret != ACL_ERROR_RT_REPORT_TIMEOUT) {
            std::printf("[ERROR] aclrtProcessReport returned %d: %s\n", (int)ret, aclGetRecentErrMsg());
            thread->unexpected.fetch_add(1);
        }
    }
    return nullptr;
}

struct CallbackData {
    int index = 0;
    int32_t *pinned = nullptr;         // what a blocking callback writes for the copy queued after it
    std::mutex *lock = nullptr;
    std::vector<int> *order = nullptr;
    pthread_t reportThread{};
    std::atomic<int> *wrongThread = nullptr;
    std::atomic<int> *done = nullptr;
};

void Callback(void *userData) {
    CallbackData *data = static_cast<CallbackData *>(userData);
    if (!pthread_equal(pthread_self(), data->reportThread)) data->wrongThread->fetch_add(1);
    if (data->pinned != nullptr) *data->pinned = 1000 + data->index;
    {
        std::lock_guard<std::mutex> guard(*data->lock);
        data->order->push_back(data->index);
    }
    data->done->fetch_add(1);
}

void HostFunc(void *userData) { static_cast<std::atomic<int> *>(userData)->fetch_add(1); }

bool Callbacks(Resources &res) {
    ReportThread thread;
    thread.context = res.context;
    if (pthread_create(&thread.tid, nullptr, ReportLoop, &thread) != 0) {
        std::printf("[ERROR] pthread_create failed\n");
        return false;
    }
    bool ok = [&]() -> bool {
        CHECK_ACL(aclrtSubscribeReport(static_cast<uint64_t>(thread.tid), res.stream));
        thread.subscribed.store(true);
        const int kCallbacks = 8;
        std::mutex lock;
        std::vector<int> order;
        std::atomic<int> wrongThread{0}, done{0}, hostFuncs{0};
        std::vector<CallbackData> data(kCallbacks);
        int32_t *pinned = static_cast<int32_t *>(res.host);
        for (int i = 0; i < kCallbacks; ++i) {
            CallbackData &d = data[i];
            d.index = i;
            d.lock = &lock;
            d.order = &order;
            d.reportThread = thread.tid;
            d.wrongThread = &wrongThread;
            d.done = &done;
            if (i % 2 == 0) {
                // Blocking: the copy queued after it must see what it wrote.
                d.pinned = pinned + i;
                CHECK_ACL(aclrtLaunchCallback(Callback, &d, ACL_CALLBACK_BLOCK, res.stream));
                CHECK_ACL(aclrtMemcpyAsync(static_cast<int32_t *>(res.devB) + i, sizeof(int32_t), pinned + i,
                                           sizeof(int32_t), ACL_MEMCPY_HOST_TO_DEVICE, res.stream));
            } else {
                CHECK_ACL(aclrtLaunchCallback(Callback, &d, ACL_CALLBACK_NO_BLOCK, res.stream));
            }
        }
        CHECK_ACL(aclrtLaunchHostFunc(res.stream, HostFunc, &hostFuncs));
        CHECK_ACL(aclrtSynchronizeStream(res.stream));
        // Non-blocking callbacks may finish after the stream has moved on: wait for them, with a deadline.
        for (int waited = 0; done.load() < kCallbacks && waited < 10000; ++waited) usleep(1000);
        EXPECT_TRUE(done.load() == kCallbacks, "%d of %d callbacks ran", done.load(), kCallbacks);
        EXPECT_TRUE(wrongThread.load() == 0, "%d callbacks ran outside the report thread", wrongThread.load());
        EXPECT_TRUE(hostFuncs.load() == 1, "host function ran %d times", hostFuncs.load());
        {
            std::lock_guard<std::mutex> guard(lock);
            int lastBlocking = -1;
            for (int index : order) {
                if (index % 2 == 0) {
                    EXPECT_TRUE(index > lastBlocking, "blocking callback %d ran after %d", index, lastBlocking);
                    lastBlocking = index;
                }
            }
        }
        std::vector<int32_t> check(kCallbacks);
        CHECK_ACL(aclrtMemcpy(check.data(), kCallbacks * sizeof(int32_t), res.devB, kCallbacks * sizeof(int32_t),
                              ACL_MEMCPY_DEVICE_TO_HOST));
        for (int i = 0; i < kCallbacks; i += 2) {
            EXPECT_TRUE(check[i] == 1000 + i, "the copy after blocking callback %d read %d", i, check[i]);
        }
        return true;
    }();
    // Stop the thread before unbinding it: an unbound thread's aclrtProcessReport fails.
    thread.stop.store(true);
    pthread_join(thread.tid, nullptr);
    if (thread.subscribed.load()) {
        aclError ret = aclrtUnSubscribeReport(static_cast<uint64_t>(thread.tid), res.stream);
        if (ret != ACL_SUCCESS) {
            std::printf("[ERROR] aclrtUnSubscribeReport returned %d: %s\n", (int)ret, aclGetRecentErrMsg());
            ++g_failures;
            return false;
        }
    }
    if (ok && thread.unexpected.load() != 0) {
        std::printf("[ERROR] the report thread saw %d unexpected results\n", thread.unexpected.load());
        ++g_failures;
        return false;
    }
    return ok;
}

// ---- capture: work queued between aclmdlRICaptureBegin and aclmdlRICaptureEnd runs only when the instance runs.
bool Capture(Resources &res) {
    int32_t *host = static_cast<int32_t *>(res.host);
    int32_t *host2 = static_cast<int32_t *>(res.host2);
    for (size_t i = 0; i < kCount; ++i) host[i] = Pattern(i, 0x22);
    CHECK_ACL(aclrtMemcpy(res.devA, kBytes, res.host, kBytes, ACL_MEMCPY_HOST_TO_DEVICE));
    std::memset(host2, 0x7F, kBytes);

    aclmdlRI modelRI = nullptr;
    CHECK_ACL(aclmdlRICaptureBegin(res.stream, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_ACL(aclrtMemsetAsync(res.devB, kBytes, 0, kBytes, res.stream));
    CHECK_ACL(aclrtMemcpyAsync(res.devB, kBytes, res.devA, kBytes, ACL_MEMCPY_DEVICE_TO_DEVICE, res.stream));
    CHECK_ACL(aclrtMemcpyAsync(res.host2, kBytes, res.devB, kBytes, ACL_MEMCPY_DEVICE_TO_HOST, res.stream));
    aclmdlRICaptureStatus status = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    aclmdlRI during = nullptr;
    CHECK_ACL(aclmdlRICaptureGetInfo(res.stream, &status, &during));
    EXPECT_TRUE(status == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, "capture status %d", (int)status);
    CHECK_ACL(aclmdlRICaptureEnd(res.stream, &modelRI));
    EXPECT_TRUE(modelRI != nullptr, "no model run instance");
    EXPECT_TRUE(host2[0] == 0x7F7F7F7F, "captured work ran before the instance was executed");

    CHECK_ACL(aclmdlRIExecuteAsync(modelRI, res.stream));
    CHECK_ACL(aclrtSynchronizeStream(res.stream));
    for (size_t i = 0; i < kCount; ++i) {
        EXPECT_TRUE(host2[i] == Pattern(i, 0x22), "run 1: [%zu] = %d", i, host2[i]);
    }
    // A second run sees the inputs as they are now.
    for (size_t i = 0; i < kCount; ++i) host[i] = Pattern(i, 0x33);
    CHECK_ACL(aclrtMemcpy(res.devA, kBytes, res.host, kBytes, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_ACL(aclmdlRIExecute(modelRI, -1));
    for (size_t i = 0; i < kCount; ++i) {
        EXPECT_TRUE(host2[i] == Pattern(i, 0x33), "run 2: [%zu] = %d", i, host2[i]);
    }
    CHECK_ACL(aclmdlRIDestroy(modelRI));
    return true;
}

bool ReleaseResources(Resources &res) {
    CHECK_ACL(aclrtFree(res.devA));
    CHECK_ACL(aclrtFree(res.devB));
    CHECK_ACL(aclrtFreeHost(res.host));
    CHECK_ACL(aclrtFreeHost(res.host2));
    CHECK_ACL(aclrtDestroyStream(res.stream));
    CHECK_ACL(aclrtDestroyStream(res.stream2));
    CHECK_ACL(aclrtDestroyContext(res.context));
    CHECK_ACL(aclrtResetDevice(kDeviceId));
    CHECK_ACL(aclFinalize());
    return true;
}

}  // namespace

int main() {
    Resources res;
    bool ok = InitResources(res) && CopiesAndEvents(res) && Callbacks(res) && Capture(res);
    bool released = ReleaseResources(res);
    if (!ok || !released || g_failures != 0) {
        std::printf("FAIL\n");
        return 1;
    }
    std::printf("PASS\n");
    return 0;
}
