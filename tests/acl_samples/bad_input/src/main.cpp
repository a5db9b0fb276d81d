// AscendCL error-code sample: every call here is wrong on purpose (called before aclInit, NULL pointers, destMax too
// small, unknown copy kinds, a thread without a context, handles already destroyed, features an NPU has and this
// device does not) and must fail with AscendCL's code and leave a message. Prints PASS when every call does.
#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "acl/acl.h"

namespace {

int g_failures = 0;

// `call` must return `code` and leave a non-empty message for aclGetRecentErrMsg.
#define EXPECT_CODE(call, code) ExpectCode((call), (code), #call, __LINE__)
// `call` must succeed.
#define EXPECT_OK(call) ExpectCode((call), ACL_SUCCESS, #call, __LINE__)

void ExpectCode(aclError got, aclError want, const char *text, int line) {
    const char *msg = aclGetRecentErrMsg();
    if (got != want) {
        std::printf("[ERROR] line %d: %s returned %d, expected %d (%s)\n", line, text, (int)got, (int)want,
                    msg ? msg : "no message");
        ++g_failures;
    } else if (want != ACL_SUCCESS && (msg == nullptr || msg[0] == '\0')) {
        std::printf("[ERROR] line %d: %s returned %d without a message\n", line, text, (int)got);
        ++g_failures;
    } else if (want != ACL_SUCCESS) {
        std::printf("[INFO] %s -> %d: %s\n", text, (int)got, msg);
    }
}

void *NoContextThread(void *arg) {
    aclrtStream *stream = static_cast<aclrtStream *>(arg);
    aclrtContext context = nullptr;
    EXPECT_CODE(aclrtGetCurrentContext(&context), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_CODE(aclrtCreateStream(stream), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_CODE(aclrtProcessReport(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    return nullptr;
}

}  // namespace

int main() {
    // ---- before aclInit
    void *ptr = nullptr;
    EXPECT_CODE(aclrtSetDevice(0), ACL_ERROR_UNINITIALIZE);
    EXPECT_CODE(aclrtMalloc(&ptr, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_UNINITIALIZE);
    EXPECT_CODE(aclFinalize(), ACL_ERROR_UNINITIALIZE);
    aclrtRunMode mode;
    EXPECT_OK(aclrtGetRunMode(&mode));  // needs no aclInit
    EXPECT_CODE(aclInit("/nonexistent/acl_config.json"), ACL_ERROR_INVALID_FILE);

    // ---- initialised
    EXPECT_OK(aclInit(nullptr));
    EXPECT_CODE(aclInit(nullptr), ACL_ERROR_REPEAT_INITIALIZE);
    uint32_t count = 0;
    EXPECT_CODE(aclrtGetDeviceCount(nullptr), ACL_ERROR_INVALID_PARAM);
    EXPECT_OK(aclrtGetDeviceCount(&count));
    EXPECT_CODE(aclrtSetDevice(static_cast<int32_t>(count)), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_CODE(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_OK(aclrtSetDevice(0));

    aclrtContext context = nullptr;
    EXPECT_OK(aclrtCreateContext(&context, 0));
    aclrtStream stream = nullptr;
    EXPECT_CODE(aclrtCreateStream(nullptr), ACL_ERROR_INVALID_PARAM);
    EXPECT_OK(aclrtCreateStream(&stream));

    // A thread without a current context.
    pthread_t thread;
    aclrtStream orphan = nullptr;
    if (pthread_create(&thread, nullptr, NoContextThread, &orphan) != 0) {
        std::printf("[ERROR] pthread_create failed\n");
        return 1;
    }
    pthread_join(thread, nullptr);

    // ---- memory
    EXPECT_CODE(aclrtMalloc(nullptr, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtMalloc(&ptr, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtMalloc(&ptr, 64, static_cast<aclrtMemMallocPolicy>(77)), ACL_ERROR_INVALID_PARAM);
    void *dev = nullptr;
    void *dev2 = nullptr;
    EXPECT_OK(aclrtMalloc(&dev, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_OK(aclrtMalloc(&dev2, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    char host[256];
    std::memset(host, 1, sizeof(host));
    EXPECT_CODE(aclrtMemcpy(dev, 128, host, 256, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);  // destMax
    EXPECT_CODE(aclrtMemcpy(nullptr, 256, host, 256, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtMemcpy(dev, 256, nullptr, 256, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtMemcpy(dev, 256, host, 256, static_cast<aclrtMemcpyKind>(42)), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtMemcpyAsync(dev, 128, dev2, 256, ACL_MEMCPY_DEVICE_TO_DEVICE, stream), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtMemcpyAsync(dev, 256, dev2, 256, static_cast<aclrtMemcpyKind>(-1), stream),
                ACL_ERROR_INVALID_PARAM);
    // The kind says the destination is device memory; it is the host's.
    EXPECT_CODE(aclrtMemcpy(host, 256, dev, 256, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_CODE(aclrtMemset(dev, 128, 0, 256), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtMemsetAsync(nullptr, 256, 0, 256, stream), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtFree(nullptr), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtGetMemInfo(ACL_HBM_MEM, nullptr, nullptr), ACL_ERROR_INVALID_PARAM);
    EXPECT_OK(aclrtMemcpy(dev, 256, host, 256, ACL_MEMCPY_HOST_TO_DEVICE));

    // ---- streams, events, callbacks, capture
    EXPECT_CODE(aclrtSynchronizeStreamWithTimeout(stream, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtDestroyStream(nullptr), ACL_ERROR_INVALID_PARAM);
    aclrtStream unsupported = nullptr;
    EXPECT_CODE(aclrtCreateStreamWithConfig(&unsupported, 0, ACL_STREAM_PERSISTENT), ACL_ERROR_FEATURE_UNSUPPORTED);
    EXPECT_CODE(aclrtCreateStreamWithConfig(&unsupported, 8, 0), ACL_ERROR_INVALID_PARAM);
    aclrtEvent event = nullptr;
    EXPECT_CODE(aclrtCreateEventWithFlag(&event, ACL_EVENT_IPC), ACL_ERROR_FEATURE_UNSUPPORTED);
    EXPECT_CODE(aclrtCreateEventWithFlag(&event, 0x40000000U), ACL_ERROR_INVALID_PARAM);
    EXPECT_OK(aclrtCreateEventWithFlag(&event, ACL_EVENT_SYNC));
    aclrtEvent timed = nullptr;
    EXPECT_OK(aclrtCreateEvent(&timed));
    EXPECT_OK(aclrtRecordEvent(timed, stream));
    EXPECT_OK(aclrtRecordEvent(event, stream));
    EXPECT_OK(aclrtSynchronizeStream(stream));
    float ms = 0.0f;
    EXPECT_CODE(aclrtEventElapsedTime(&ms, timed, event), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
    EXPECT_CODE(aclrtEventElapsedTime(nullptr, timed, timed), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtLaunchCallback([](void *) {}, nullptr, ACL_CALLBACK_BLOCK, stream), ACL_ERROR_RT_STREAM_NO_CB_REG);
    EXPECT_CODE(aclrtLaunchCallback(nullptr, nullptr, ACL_CALLBACK_BLOCK, stream), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclrtUnSubscribeReport(static_cast<uint64_t>(pthread_self()), stream), ACL_ERROR_RT_STREAM_SUBSCRIBE);
    aclmdlRI modelRI = nullptr;
    EXPECT_CODE(aclmdlRICaptureEnd(stream, &modelRI), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
    EXPECT_CODE(aclmdlRICaptureBegin(nullptr, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT);
    // aclrtGetLastError reports the latest failure, then clears it.
    EXPECT_CODE(aclrtFree(nullptr), ACL_ERROR_INVALID_PARAM);
    if (aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL) != ACL_ERROR_INVALID_PARAM ||
        aclrtGetLastError(ACL_RT_THREAD_LEVEL) != ACL_ERROR_INVALID_PARAM ||
        aclrtGetLastError(ACL_RT_THREAD_LEVEL) != ACL_SUCCESS) {
        std::printf("[ERROR] aclrtGetLastError / aclrtPeekAtLastError do not report the latest failure\n");
        ++g_failures;
    }

    // ---- handles used after their release
    EXPECT_OK(aclrtDestroyEvent(event));
    EXPECT_OK(aclrtDestroyEvent(timed));
    EXPECT_OK(aclrtFree(dev));
    EXPECT_OK(aclrtFree(dev2));
    EXPECT_OK(aclrtDestroyStream(stream));
    EXPECT_OK(aclrtDestroyContext(context));
    EXPECT_CODE(aclrtDestroyContext(context), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_OK(aclrtResetDevice(0));
    EXPECT_OK(aclFinalize());
    EXPECT_CODE(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    EXPECT_CODE(aclrtSetDevice(0), ACL_ERROR_UNINITIALIZE);

    if (g_failures != 0) {
        std::printf("FAIL: %d checks\n", g_failures);
        return 1;
    }
    std::printf("PASS\n");
    return 0;
}
