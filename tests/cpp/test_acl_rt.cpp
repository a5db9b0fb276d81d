// test_acl_rt.cpp — the AscendCL runtime subset: init and finalize, error reporting, devices and contexts, memory with
// every copy kind and destMax, streams and events; AscendCL's codes on bad input.
#include <pthread.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "test_acl_util.hpp"
#include "test_util.hpp"

/// This file's fixture (its own name keeps CTest's test names unique across the acl test files).
class AclRt : public acl_test::AclTest {};
using acl_test::recent_message;

namespace {

std::string temp_file(const char* name, const char* text) {
    std::string path = ::testing::TempDir() + name;
    std::ofstream(path) << text;
    return path;
}

}  // namespace

// ---------------------------------------------------------------- init and finalize

TEST(AclInit, CallsBeforeInitAreRefused) {
    void* p = nullptr;
    aclrtStream s = nullptr;
    EXPECT_ACL(ACL_ERROR_UNINITIALIZE, aclrtSetDevice(0));
    EXPECT_ACL(ACL_ERROR_UNINITIALIZE, aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_ACL(ACL_ERROR_UNINITIALIZE, aclrtCreateStream(&s));
    EXPECT_ACL(ACL_ERROR_UNINITIALIZE, aclrtMemcpyAsync(&p, 8, &s, 8, ACL_MEMCPY_HOST_TO_HOST, nullptr));
    EXPECT_NE(recent_message().find("aclInit"), std::string::npos);
    EXPECT_ACL(ACL_ERROR_UNINITIALIZE, aclFinalize());
    // Needs no init.
    int32_t major = -1, minor = -1, patch = -1;
    EXPECT_ACL_OK(aclrtGetVersion(&major, &minor, &patch));
    EXPECT_EQ(major, ACL_MAJOR_VERSION);
    EXPECT_EQ(minor, ACL_MINOR_VERSION);
    EXPECT_EQ(patch, ACL_PATCH_VERSION);
    aclrtRunMode mode = ACL_DEVICE;
    EXPECT_ACL_OK(aclrtGetRunMode(&mode));
    EXPECT_EQ(mode, ACL_HOST);
}

TEST(AclInit, RepeatInitFinalizeAndInitAgain) {
    ASSERT_ACL_OK(aclInit(nullptr));
    EXPECT_ACL(ACL_ERROR_REPEAT_INITIALIZE, aclInit(nullptr));
    ASSERT_ACL_OK(aclrtSetDevice(0));
    void* d = nullptr;
    ASSERT_ACL_OK(aclrtMalloc(&d, 256, ACL_MEM_MALLOC_NORMAL_ONLY));
    ASSERT_ACL_OK(aclFinalize());
    EXPECT_ACL(ACL_ERROR_REPEAT_FINALIZE, aclFinalize());
    // Finalize released the context: a new session starts clean.
    ASSERT_ACL_OK(aclInit(""));
    aclrtContext ctx = nullptr;
    EXPECT_ACL(ACL_ERROR_RT_CONTEXT_NULL, aclrtGetCurrentContext(&ctx));
    ASSERT_ACL_OK(aclrtSetDevice(0));
    ASSERT_ACL_OK(aclrtMalloc(&d, 256, ACL_MEM_MALLOC_NORMAL_ONLY));
    EXPECT_ACL_OK(aclrtFree(d));
    ASSERT_ACL_OK(aclFinalize());
}

TEST(AclInit, ConfigurationFile) {
    EXPECT_ACL(ACL_ERROR_INVALID_FILE, aclInit("/nonexistent/dir/acl.json"));
    EXPECT_NE(recent_message().find("/nonexistent/dir/acl.json"), std::string::npos);
    EXPECT_ACL(ACL_ERROR_PARSE_FILE, aclInit(temp_file("acl_bad.json", "dump: yes").c_str()));
    EXPECT_ACL(ACL_ERROR_PARSE_FILE, aclInit(temp_file("acl_open.json", "{\"dump\": {\"x\": \"}\"}").c_str()));
    EXPECT_ACL(ACL_ERROR_PARSE_FILE, aclInit(temp_file("acl_tail.json", "{} {}").c_str()));
    ASSERT_ACL_OK(aclInit(temp_file("acl_empty.json", " {\n} ").c_str()));
    ASSERT_ACL_OK(aclFinalize());
    ASSERT_ACL_OK(aclInit(temp_file("acl_settings.json", "{\"err_msg_mode\": \"1\", \"s\": \"a\\\"}\"}").c_str()));
    ASSERT_ACL_OK(aclFinalize());
}

// ---------------------------------------------------------------- errors

TEST_F(AclRt, RecentErrorMessagesAreFetchedAndCleared) {
    EXPECT_EQ(aclGetRecentErrMsg(), nullptr);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMalloc(nullptr, 16, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtFree(nullptr));
    const char* m = aclGetRecentErrMsg();
    ASSERT_NE(m, nullptr);
    std::string text = m;
    // Newest first, one per line.
    EXPECT_EQ(text.find("aclrtFree: devPtr is NULL"), 0u) << text;
    EXPECT_NE(text.find("\naclrtMalloc: devPtr is NULL"), std::string::npos) << text;
    EXPECT_EQ(aclGetRecentErrMsg(), nullptr);
}

TEST_F(AclRt, LastErrorPeekAndGet) {
    aclrtGetLastError(ACL_RT_THREAD_LEVEL);  // whatever earlier tests of this thread left
    EXPECT_ACL_OK(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL));
    void* p = nullptr;
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtGetLastError(ACL_RT_THREAD_LEVEL));
    EXPECT_ACL_OK(aclrtGetLastError(ACL_RT_THREAD_LEVEL));
    // Per thread: another thread's failure is not this one's.
    std::thread([] { aclrtFree(nullptr); }).join();
    EXPECT_ACL_OK(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL));
    aclrtLastErrLevel bad;
    int v = 7;
    std::memcpy(&bad, &v, sizeof v);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtGetLastError(bad));
}

// ---------------------------------------------------------------- devices and contexts

TEST_F(AclRt, DevicesAndReferenceCounts) {
    uint32_t count = 0;
    ASSERT_ACL_OK(aclrtGetDeviceCount(&count));
    ASSERT_GE(count, 1u);
    EXPECT_ACL(ACL_ERROR_RT_INVALID_DEVICEID, aclrtSetDevice(static_cast<int32_t>(count)));
    EXPECT_ACL(ACL_ERROR_RT_INVALID_DEVICEID, aclrtSetDevice(-1));
    int32_t dev = -1;
    ASSERT_ACL_OK(aclrtGetDevice(&dev));
    EXPECT_EQ(dev, 0);
    EXPECT_NE(aclrtGetSocName(), nullptr);

    // Two references: the first reset keeps the device and its default context.
    ASSERT_ACL_OK(aclrtSetDevice(0));
    aclrtContext ctx = nullptr;
    ASSERT_ACL_OK(aclrtGetCurrentContext(&ctx));
    ASSERT_ACL_OK(aclrtResetDevice(0));
    aclrtContext still = nullptr;
    ASSERT_ACL_OK(aclrtGetCurrentContext(&still));
    EXPECT_EQ(still, ctx);
    void* d = nullptr;
    ASSERT_ACL_OK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_ACL_OK(aclrtFree(d));
    // The last one releases it: no current context any more.
    ASSERT_ACL_OK(aclrtResetDevice(0));
    EXPECT_ACL(ACL_ERROR_RT_CONTEXT_NULL, aclrtGetCurrentContext(&still));
    EXPECT_ACL(ACL_ERROR_RT_CONTEXT_NULL, aclrtGetDevice(&dev));
    EXPECT_ACL(ACL_ERROR_RT_CONTEXT_NULL, aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtResetDevice(0));
    // The old default context is no live context.
    EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtSetCurrentContext(ctx));

    // Force drops every reference at once.
    ASSERT_ACL_OK(aclrtSetDevice(0));
    ASSERT_ACL_OK(aclrtSetDevice(0));
    ASSERT_ACL_OK(aclrtResetDeviceForce(0));
    EXPECT_ACL(ACL_ERROR_RT_CONTEXT_NULL, aclrtGetDevice(&dev));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtResetDevice(0));
    ASSERT_ACL_OK(aclrtSetDevice(0));
}

TEST_F(AclRt, ResetReleasesTheDevicesStreams) {
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    ASSERT_ACL_OK(aclrtResetDevice(0));
    ASSERT_ACL_OK(aclrtSetDevice(0));
    EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtSynchronizeStream(s));
}

TEST_F(AclRt, ContextsAcrossThreads) {
    aclrtContext main_ctx = nullptr;
    ASSERT_ACL_OK(aclrtGetCurrentContext(&main_ctx));
    aclError no_ctx_stream = ACL_SUCCESS, no_ctx_copy = ACL_SUCCESS, with_ctx = -1, dev_ok = -1;
    int32_t dev = -1;
    std::thread([&] {
        // A new thread has no current context until it sets one.
        aclrtStream s = nullptr;
        int x = 0, y = 0;
        no_ctx_stream = aclrtCreateStream(&s);
        no_ctx_copy = aclrtMemcpyAsync(&x, 4, &y, 4, ACL_MEMCPY_HOST_TO_HOST, nullptr);
        with_ctx = aclrtSetCurrentContext(main_ctx);
        dev_ok = aclrtGetDevice(&dev);
        if (aclrtCreateStream(&s) == ACL_SUCCESS) aclrtDestroyStream(s);
    }).join();
    EXPECT_ACL(ACL_ERROR_RT_CONTEXT_NULL, no_ctx_stream);
    EXPECT_ACL(ACL_ERROR_RT_CONTEXT_NULL, no_ctx_copy);
    EXPECT_ACL_OK(with_ctx);
    EXPECT_ACL_OK(dev_ok);
    EXPECT_EQ(dev, 0);

    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtSetCurrentContext(nullptr));
    int not_a_context = 0;
    EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtSetCurrentContext(&not_a_context));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtDestroyContext(main_ctx));  // the default context
    EXPECT_ACL(ACL_ERROR_RT_INVALID_DEVICEID, aclrtCreateContext(&main_ctx, 1 << 20));
}

TEST_F(AclRt, ExplicitContextOnEveryDevice) {
    uint32_t count = 0;
    ASSERT_ACL_OK(aclrtGetDeviceCount(&count));
    aclrtContext def = nullptr;
    ASSERT_ACL_OK(aclrtGetCurrentContext(&def));
    for (int32_t d = 0; d < static_cast<int32_t>(count); ++d) {
        aclrtContext ctx = nullptr;
        ASSERT_ACL_OK(aclrtCreateContext(&ctx, d));
        aclrtContext cur = nullptr;
        ASSERT_ACL_OK(aclrtGetCurrentContext(&cur));
        EXPECT_EQ(cur, ctx);  // made current
        int32_t dev = -1;
        ASSERT_ACL_OK(aclrtGetDevice(&dev));
        EXPECT_EQ(dev, d);
        // Work on the context's device through its default stream.
        void* p = nullptr;
        ASSERT_ACL_OK(aclrtMalloc(&p, 16, ACL_MEM_MALLOC_HUGE_FIRST));
        int in[4] = {1, 2, 3, 4}, out[4] = {};
        ASSERT_ACL_OK(aclrtMemcpyAsync(p, 16, in, 16, ACL_MEMCPY_HOST_TO_DEVICE, nullptr));
        ASSERT_ACL_OK(aclrtMemcpyAsync(out, 16, p, 16, ACL_MEMCPY_DEVICE_TO_HOST, nullptr));
        ASSERT_ACL_OK(aclrtSynchronizeStream(nullptr));
        EXPECT_EQ(std::memcmp(in, out, sizeof in), 0);
        EXPECT_ACL_OK(aclrtFree(p));
        ASSERT_ACL_OK(aclrtSetCurrentContext(def));
        ASSERT_ACL_OK(aclrtDestroyContext(ctx));
        EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtDestroyContext(ctx));
    }
    // A thread whose current context was destroyed has none.
    aclrtContext ctx = nullptr;
    ASSERT_ACL_OK(aclrtCreateContext(&ctx, 0));
    ASSERT_ACL_OK(aclrtDestroyContext(ctx));
    aclrtStream s = nullptr;
    EXPECT_ACL(ACL_ERROR_RT_CONTEXT_NULL, aclrtCreateStream(&s));
}

// ---------------------------------------------------------------- memory

TEST_F(AclRt, CopiesOfEveryKind) {
    constexpr size_t n = 4096;
    std::vector<unsigned char> src = rt_test::pattern(n, 7), back(n), h2h(n);
    void *a = nullptr, *b = nullptr, *pinned = nullptr;
    ASSERT_ACL_OK(aclrtMalloc(&a, n, ACL_MEM_MALLOC_HUGE_FIRST));
    ASSERT_ACL_OK(aclrtMalloc(&b, n, ACL_MEM_MALLOC_NORMAL_ONLY_P2P));
    ASSERT_ACL_OK(aclrtMallocHost(&pinned, n));
    ASSERT_ACL_OK(aclrtMemcpy(h2h.data(), n, src.data(), n, ACL_MEMCPY_HOST_TO_HOST));
    EXPECT_EQ(h2h, src);
    ASSERT_ACL_OK(aclrtMemcpy(a, n, src.data(), n, ACL_MEMCPY_HOST_TO_DEVICE));
    ASSERT_ACL_OK(aclrtMemcpy(b, n, a, n, ACL_MEMCPY_DEVICE_TO_DEVICE));
    ASSERT_ACL_OK(aclrtMemcpy(pinned, n, b, n, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(std::memcmp(pinned, src.data(), n), 0);
    // The buffered and inner kinds are the plain ones; DEFAULT infers.
    ASSERT_ACL_OK(aclrtMemset(b, n, 0, n));
    ASSERT_ACL_OK(aclrtMemcpy(a, n, src.data() + 1, n - 1, ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE));
    ASSERT_ACL_OK(aclrtMemcpy(b, n, a, n, ACL_MEMCPY_INNER_DEVICE_TO_DEVICE));
    ASSERT_ACL_OK(aclrtMemcpy(back.data(), n, b, n - 1, ACL_MEMCPY_DEFAULT));
    EXPECT_EQ(std::memcmp(back.data(), src.data() + 1, n - 1), 0);
    // Asynchronous, on a stream.
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    std::fill(back.begin(), back.end(), 0);
    ASSERT_ACL_OK(aclrtMemsetAsync(a, n, 0x5A, n / 2, s));
    ASSERT_ACL_OK(aclrtMemcpyAsync(back.data(), n, a, n, ACL_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_ACL_OK(aclrtSynchronizeStream(s));
    for (size_t i = 0; i < n / 2; ++i) ASSERT_EQ(back[i], 0x5A) << i;
    EXPECT_EQ(std::memcmp(back.data() + n / 2, src.data() + 1 + n / 2, n / 2 - 1), 0);
    EXPECT_ACL_OK(aclrtDestroyStream(s));
    EXPECT_ACL_OK(aclrtFree(a));
    EXPECT_ACL_OK(aclrtFree(b));
    EXPECT_ACL_OK(aclrtFreeHost(pinned));
}

TEST_F(AclRt, CopyBetweenDevices) {
    uint32_t count = 0;
    ASSERT_ACL_OK(aclrtGetDeviceCount(&count));
    if (count < 2) GTEST_SKIP() << "needs 2 devices (the 2dev rerun has them)";
    constexpr size_t n = 1024;
    std::vector<unsigned char> src = rt_test::pattern(n, 3), back(n);
    void *d0 = nullptr, *d1 = nullptr;
    ASSERT_ACL_OK(aclrtMalloc(&d0, n, ACL_MEM_MALLOC_HUGE_FIRST));
    ASSERT_ACL_OK(aclrtMemcpy(d0, n, src.data(), n, ACL_MEMCPY_HOST_TO_DEVICE));
    ASSERT_ACL_OK(aclrtSetDevice(1));
    ASSERT_ACL_OK(aclrtMalloc(&d1, n, ACL_MEM_MALLOC_HUGE_FIRST));
    ASSERT_ACL_OK(aclrtMemcpy(d1, n, d0, n, ACL_MEMCPY_INTER_DEVICE_TO_DEVICE));
    ASSERT_ACL_OK(aclrtMemcpy(back.data(), n, d1, n, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(back, src);
    int32_t can = -1;
    ASSERT_ACL_OK(aclrtDeviceCanAccessPeer(&can, 0, 1));
    EXPECT_EQ(can, 1);
    EXPECT_ACL(ACL_ERROR_FEATURE_UNSUPPORTED, aclrtDeviceDisablePeerAccess(0));
    EXPECT_ACL_OK(aclrtFree(d1));
    ASSERT_ACL_OK(aclrtResetDevice(1));
}

TEST_F(AclRt, CopyAndFillArgumentsAreChecked) {
    char host[128] = {}, other[64] = {};
    void* d = nullptr;
    ASSERT_ACL_OK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    // destMax / maxCount too small.
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMemcpy(d, 32, host, 64, ACL_MEMCPY_HOST_TO_DEVICE));
    EXPECT_NE(recent_message().find("destMax 32"), std::string::npos);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMemcpyAsync(d, 63, host, 64, ACL_MEMCPY_HOST_TO_DEVICE, nullptr));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMemset(d, 16, 0, 17));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMemsetAsync(d, 16, 0, 17, nullptr));
    // NULL operands.
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMemcpy(nullptr, 64, host, 64, ACL_MEMCPY_HOST_TO_DEVICE));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMemcpyAsync(d, 64, nullptr, 64, ACL_MEMCPY_HOST_TO_DEVICE, nullptr));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMemset(nullptr, 64, 0, 64));
    // Unknown kinds.
    for (int k : {8, -1, 1000}) {
        aclrtMemcpyKind kind;
        std::memcpy(&kind, &k, sizeof k);
        EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMemcpy(d, 64, host, 64, kind)) << k;
        EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMemcpyAsync(d, 64, host, 64, kind, nullptr)) << k;
        EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMemcpy2d(d, 8, host, 8, 8, 8, kind)) << k;
    }
    // A kind that contradicts the operands: the runtime's check, passed through.
    EXPECT_ACL(ACL_ERROR_RT_PARAM_INVALID, aclrtMemcpy(other, 64, host, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    // A copy past the allocation.
    EXPECT_ACL(ACL_ERROR_RT_PARAM_INVALID, aclrtMemcpy(d, 128, host, 64 + 1, ACL_MEMCPY_HOST_TO_DEVICE));
    EXPECT_ACL_OK(aclrtFree(d));
    int local = 0;
    EXPECT_ACL(ACL_ERROR_RT_PARAM_INVALID, aclrtFree(&local));
}

TEST_F(AclRt, AllocationPoliciesAndLimits) {
    for (int p : {0, 1, 2, 3, 4, 5, 6, 7, 0x100, 0x1000, 0x1001, 0x102}) {
        aclrtMemMallocPolicy policy;
        std::memcpy(&policy, &p, sizeof p);
        void* d = nullptr;
        ASSERT_ACL_OK(aclrtMalloc(&d, 100, policy)) << p;
        ASSERT_NE(d, nullptr);
        EXPECT_ACL_OK(aclrtFree(d));
    }
    void* d = nullptr;
    for (int p : {8, 0x200, -1}) {
        aclrtMemMallocPolicy policy;
        std::memcpy(&policy, &p, sizeof p);
        EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMalloc(&d, 100, policy)) << p;
    }
    EXPECT_ACL(ACL_ERROR_FEATURE_UNSUPPORTED, aclrtMalloc(&d, 100, ACL_MEM_ACCESS_USER_SPACE_READONLY));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMalloc(&d, 0, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMallocHost(&d, 0));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMallocHost(nullptr, 8));
    size_t free_bytes = 0, total = 0;
    ASSERT_ACL_OK(aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total));
    EXPECT_GT(total, 0u);
    EXPECT_LE(free_bytes, total);
    EXPECT_ACL(ACL_ERROR_RT_MEMORY_ALLOCATION, aclrtMalloc(&d, total + 1, ACL_MEM_MALLOC_HUGE_FIRST));
    ASSERT_ACL_OK(aclrtGetMemInfo(ACL_DDR_MEM, &free_bytes, &total));
    aclrtMemAttr bad;
    int v = 18;
    std::memcpy(&bad, &v, sizeof v);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtGetMemInfo(bad, &free_bytes, &total));
}

TEST_F(AclRt, Copy2d) {
    constexpr size_t width = 5, height = 3, spitch = 8, dpitch = 16;
    std::vector<unsigned char> src = rt_test::pattern(spitch * height, 11), back(width * height);
    void* d = nullptr;
    ASSERT_ACL_OK(aclrtMalloc(&d, dpitch * height, ACL_MEM_MALLOC_HUGE_FIRST));
    ASSERT_ACL_OK(aclrtMemcpy2d(d, dpitch, src.data(), spitch, width, height, ACL_MEMCPY_HOST_TO_DEVICE));
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    ASSERT_ACL_OK(aclrtMemcpy2dAsync(back.data(), width, d, dpitch, width, height, ACL_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_ACL_OK(aclrtSynchronizeStream(s));
    for (size_t r = 0; r < height; ++r)
        EXPECT_EQ(std::memcmp(back.data() + r * width, src.data() + r * spitch, width), 0) << r;
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMemcpy2d(d, 4, src.data(), spitch, width, height,
                                                      ACL_MEMCPY_HOST_TO_DEVICE));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtMemcpy2d(d, dpitch, src.data(), 4, width, height,
                                                      ACL_MEMCPY_HOST_TO_DEVICE));
    EXPECT_ACL_OK(aclrtDestroyStream(s));
    EXPECT_ACL_OK(aclrtFree(d));
}

// ---------------------------------------------------------------- streams and events

TEST_F(AclRt, EventsOrderStreamsAndTime) {
    aclrtStream a = nullptr, b = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&a));
    ASSERT_ACL_OK(aclrtCreateStreamWithConfig(&b, 0, ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC));
    aclrtEvent start = nullptr, done = nullptr;
    ASSERT_ACL_OK(aclrtCreateEvent(&start));
    ASSERT_ACL_OK(aclrtCreateEventWithFlag(&done, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE));
    constexpr size_t n = 1 << 16;
    std::vector<unsigned char> src = rt_test::pattern(n, 5), back(n);
    void* d = nullptr;
    ASSERT_ACL_OK(aclrtMalloc(&d, n, ACL_MEM_MALLOC_HUGE_FIRST));
    rt_test::Gate gate;
    ASSERT_EQ(gate.launch(static_cast<rtStream_t>(a)), RT_SUCCESS);
    ASSERT_ACL_OK(aclrtRecordEvent(start, a));
    ASSERT_ACL_OK(aclrtMemcpyAsync(d, n, src.data(), n, ACL_MEMCPY_HOST_TO_DEVICE, a));
    ASSERT_ACL_OK(aclrtRecordEvent(done, a));
    ASSERT_ACL_OK(aclrtStreamWaitEvent(b, done));
    ASSERT_ACL_OK(aclrtMemcpyAsync(back.data(), n, d, n, ACL_MEMCPY_DEVICE_TO_HOST, b));
    // Held by the gate: nothing has run.
    aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_COMPLETE;
    ASSERT_ACL_OK(aclrtQueryEventStatus(done, &st));
    EXPECT_EQ(st, ACL_EVENT_RECORDED_STATUS_NOT_READY);
    aclrtEventStatus old_st = ACL_EVENT_STATUS_COMPLETE;
    ASSERT_ACL_OK(aclrtQueryEvent(done, &old_st));
    EXPECT_EQ(old_st, ACL_EVENT_STATUS_NOT_READY);
    aclrtStreamStatus ss = ACL_STREAM_STATUS_COMPLETE;
    ASSERT_ACL_OK(aclrtStreamQuery(b, &ss));
    EXPECT_EQ(ss, ACL_STREAM_STATUS_NOT_READY);
    float ms = -1;
    EXPECT_ACL(ACL_ERROR_RT_EVENT_NOT_COMPLETE, aclrtEventElapsedTime(&ms, start, done));
    EXPECT_ACL(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, aclrtSynchronizeStreamWithTimeout(b, 1));
    EXPECT_ACL(ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, aclrtSynchronizeEventWithTimeout(done, 1));
    gate.open();
    ASSERT_ACL_OK(aclrtSynchronizeStreamWithTimeout(b, -1));
    EXPECT_EQ(back, src);
    ASSERT_ACL_OK(aclrtSynchronizeEventWithTimeout(done, 60000));
    ASSERT_ACL_OK(aclrtSynchronizeEvent(done));
    ASSERT_ACL_OK(aclrtQueryEventStatus(done, &st));
    EXPECT_EQ(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);
    ASSERT_ACL_OK(aclrtStreamQuery(b, &ss));
    EXPECT_EQ(ss, ACL_STREAM_STATUS_COMPLETE);
    ASSERT_ACL_OK(aclrtEventElapsedTime(&ms, start, done));
    EXPECT_GE(ms, 0.0f);
    EXPECT_TRUE(std::isfinite(ms));
    // Reset is accepted and the event records again.
    ASSERT_ACL_OK(aclrtResetEvent(done, a));
    ASSERT_ACL_OK(aclrtRecordEvent(done, a));
    ASSERT_ACL_OK(aclrtSynchronizeDevice());
    EXPECT_ACL_OK(aclrtDestroyEvent(start));
    EXPECT_ACL_OK(aclrtDestroyEvent(done));
    EXPECT_ACL_OK(aclrtDestroyStream(a));
    EXPECT_ACL_OK(aclrtDestroyStream(b));
    EXPECT_ACL_OK(aclrtFree(d));
}

TEST_F(AclRt, StreamAndEventArgumentsAreChecked) {
    aclrtStream s = nullptr;
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtCreateStream(nullptr));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtCreateStreamWithConfig(&s, 8, 0));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtCreateStreamWithConfig(&s, 0, 0x80));
    EXPECT_ACL(ACL_ERROR_FEATURE_UNSUPPORTED, aclrtCreateStreamWithConfig(&s, 0, ACL_STREAM_PERSISTENT));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtDestroyStream(nullptr));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtSynchronizeStreamWithTimeout(nullptr, 0));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtSynchronizeStreamWithTimeout(nullptr, -2));
    aclrtStreamStatus ss;
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtStreamQuery(nullptr, nullptr));
    ASSERT_ACL_OK(aclrtStreamQuery(nullptr, &ss));
    ASSERT_ACL_OK(aclrtCreateStreamWithConfig(&s, 7, ACL_STREAM_HUGE));
    ASSERT_ACL_OK(aclrtDestroyStream(s));
    EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtSynchronizeStream(s));  // destroyed

    aclrtEvent e = nullptr, untimed = nullptr;
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtCreateEventWithFlag(&e, 0x4));
    EXPECT_ACL(ACL_ERROR_FEATURE_UNSUPPORTED, aclrtCreateEventWithFlag(&e, ACL_EVENT_IPC));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtRecordEvent(nullptr, nullptr));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtStreamWaitEvent(nullptr, nullptr));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtSynchronizeEventWithTimeout(e, 0));
    ASSERT_ACL_OK(aclrtCreateEventWithFlag(&untimed, ACL_EVENT_SYNC));
    ASSERT_ACL_OK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_TIME_LINE));
    ASSERT_ACL_OK(aclrtRecordEvent(untimed, nullptr));
    ASSERT_ACL_OK(aclrtRecordEvent(e, nullptr));
    ASSERT_ACL_OK(aclrtStreamWaitEvent(nullptr, untimed));
    ASSERT_ACL_OK(aclrtSynchronizeStream(nullptr));
    float ms = 0;
    EXPECT_ACL(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, aclrtEventElapsedTime(&ms, untimed, e));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtEventElapsedTime(nullptr, e, e));
    ASSERT_ACL_OK(aclrtDestroyEvent(untimed));
    EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtEventElapsedTime(&ms, untimed, e));
    EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtRecordEvent(untimed, nullptr));
    EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtResetEvent(untimed, nullptr));
    ASSERT_ACL_OK(aclrtDestroyEvent(e));
}

// ---------------------------------------------------------------- base helpers

TEST(AclBase, Float16AndDataTypeSizes) {
    EXPECT_EQ(aclFloatToFloat16(1.0f), 0x3C00);
    EXPECT_EQ(aclFloatToFloat16(-2.0f), 0xC000);
    EXPECT_EQ(aclFloatToFloat16(65504.0f), 0x7BFF);
    EXPECT_EQ(aclFloatToFloat16(65520.0f), 0x7C00);        // rounds past the largest finite value
    EXPECT_EQ(aclFloatToFloat16(std::ldexp(1.0f, -24)), 0x0001);
    EXPECT_EQ(aclFloatToFloat16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // a tie rounds to even
    EXPECT_EQ(aclFloatToFloat16(-0.0f), 0x8000);
    EXPECT_EQ(aclFloatToFloat16(NAN) & 0x7C00, 0x7C00);
    EXPECT_NE(aclFloatToFloat16(NAN) & 0x03FF, 0);
    EXPECT_EQ(aclFloat16ToFloat(0x3C00), 1.0f);
    EXPECT_EQ(aclFloat16ToFloat(0x7BFF), 65504.0f);
    EXPECT_EQ(aclFloat16ToFloat(0x0001), std::ldexp(1.0f, -24));
    EXPECT_TRUE(std::isinf(aclFloat16ToFloat(0xFC00)));
    EXPECT_TRUE(std::isnan(aclFloat16ToFloat(0x7E00)));
    for (uint32_t h = 0; h < 0x7C00; ++h)  // every finite value survives the round trip
        ASSERT_EQ(aclFloatToFloat16(aclFloat16ToFloat(static_cast<aclFloat16>(h))), h) << h;
    EXPECT_EQ(aclDataTypeSize(ACL_FLOAT), 4u);
    EXPECT_EQ(aclDataTypeSize(ACL_FLOAT16), 2u);
    EXPECT_EQ(aclDataTypeSize(ACL_BF16), 2u);
    EXPECT_EQ(aclDataTypeSize(ACL_INT64), 8u);
    EXPECT_EQ(aclDataTypeSize(ACL_COMPLEX128), 16u);
    EXPECT_EQ(aclDataTypeSize(ACL_STRING), 0u);
    EXPECT_EQ(aclDataTypeSize(ACL_DT_UNDEFINED), 0u);
}

// ---------------------------------------------------------------- fixes: handles, buffered copies, device reset

TEST_F(AclRt, BufferedCopyLetsTheCallerReuseTheSourceAtOnce) {
    constexpr size_t n = 4096;
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    void* dev = nullptr;
    ASSERT_ACL_OK(aclrtMalloc(&dev, n, ACL_MEM_MALLOC_HUGE_FIRST));
    std::vector<unsigned char> src(n, 0x5A), back(n, 0);
    acl_test::Gate gate;
    ASSERT_ACL_OK(aclrtLaunchHostFunc(s, acl_test::Gate::hold, &gate));  // the copy cannot run before open()
    ASSERT_ACL_OK(aclrtMemcpyAsync(dev, n, src.data(), n, ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE, s));
    std::memset(src.data(), 0x11, n);  // AscendCL allows this once the call has returned
    gate.open();
    ASSERT_ACL_OK(aclrtSynchronizeStream(s));
    ASSERT_ACL_OK(aclrtMemcpy(back.data(), n, dev, n, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(back, std::vector<unsigned char>(n, 0x5A));
    EXPECT_ACL_OK(aclrtFree(dev));
    EXPECT_ACL_OK(aclrtDestroyStream(s));
}

TEST_F(AclRt, HandleChecksKeepTheStreamsPendingFailure) {
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    aclrtEvent e = nullptr;
    ASSERT_ACL_OK(aclrtCreateEvent(&e));
    acl_test::make_stream_fail(s);
    ASSERT_ACL_OK(aclrtSubscribeReport(static_cast<uint64_t>(pthread_self()), s));
    ASSERT_ACL_OK(aclrtResetEvent(e, s));
    EXPECT_NE(aclrtSynchronizeStream(s), ACL_SUCCESS);  // still pending: neither call reported it
    EXPECT_NE(recent_message().find("failing host function"), std::string::npos);
    ASSERT_ACL_OK(aclrtSynchronizeStream(s));  // reported once
    ASSERT_ACL_OK(aclrtUnSubscribeReport(static_cast<uint64_t>(pthread_self()), s));
    EXPECT_ACL_OK(aclrtDestroyEvent(e));
    EXPECT_ACL_OK(aclrtDestroyStream(s));
    EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtSubscribeReport(static_cast<uint64_t>(pthread_self()), s));
}

TEST_F(AclRt, EventsWithoutSyncAreNotWaitedForOrReset) {
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    aclrtEvent timing = nullptr, ex = nullptr, sync = nullptr;
    ASSERT_ACL_OK(aclrtCreateEventWithFlag(&timing, ACL_EVENT_TIME_LINE));
    ASSERT_ACL_OK(aclrtCreateEventExWithFlag(&ex, ACL_EVENT_SYNC));
    ASSERT_ACL_OK(aclrtCreateEventWithFlag(&sync, ACL_EVENT_SYNC));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtStreamWaitEvent(s, timing));
    EXPECT_NE(recent_message().find("without ACL_EVENT_SYNC"), std::string::npos);
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtResetEvent(timing, s));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtResetEvent(ex, s));
    EXPECT_NE(recent_message().find("aclrtCreateEventExWithFlag"), std::string::npos);
    EXPECT_ACL_OK(aclrtStreamWaitEvent(s, ex));
    EXPECT_ACL_OK(aclrtRecordEvent(sync, s));
    EXPECT_ACL_OK(aclrtStreamWaitEvent(s, sync));
    EXPECT_ACL_OK(aclrtResetEvent(sync, s));
    ASSERT_ACL_OK(aclrtSynchronizeStream(s));
    for (aclrtEvent e : {timing, ex, sync}) EXPECT_ACL_OK(aclrtDestroyEvent(e));
    EXPECT_ACL_OK(aclrtDestroyStream(s));
}

TEST_F(AclRt, ForcedResetDestroysTheDevicesExplicitContexts) {
    aclrtContext mine = nullptr;
    ASSERT_ACL_OK(aclrtCreateContext(&mine, 0));
    ASSERT_ACL_OK(aclrtResetDeviceForce(0));
    EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtSetCurrentContext(mine));
    EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtDestroyContext(mine));
    EXPECT_ACL(ACL_ERROR_INVALID_PARAM, aclrtResetDevice(0));  // nothing left in use
    aclrtContext current = nullptr;
    EXPECT_ACL(ACL_ERROR_RT_CONTEXT_NULL, aclrtGetCurrentContext(&current));
    // The device starts over cleanly, and a later reset releases it again.
    ASSERT_ACL_OK(aclrtCreateContext(&mine, 0));
    ASSERT_ACL_OK(aclrtDestroyContext(mine));
    ASSERT_ACL_OK(aclrtSetDevice(0));  // for TearDown's symmetry
}

TEST_F(AclRt, ADestroyedContextsHandleStaysRefused) {
    aclrtContext first = nullptr, second = nullptr;
    ASSERT_ACL_OK(aclrtCreateContext(&first, 0));
    ASSERT_ACL_OK(aclrtDestroyContext(first));
    ASSERT_ACL_OK(aclrtCreateContext(&second, 0));  // may sit where the first one was
    EXPECT_NE(first, second);
    EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtSetCurrentContext(first));
    EXPECT_ACL(ACL_ERROR_RT_INVALID_HANDLE, aclrtDestroyContext(first));
    ASSERT_ACL_OK(aclrtSetCurrentContext(second));
    ASSERT_ACL_OK(aclrtDestroyContext(second));
}

TEST_F(AclRt, SetDeviceDuringTheDevicesResetWaitsForIt) {
    // The device's last reference is reset while its stream is held: the runtime's reset waits for the stream, and a
    // thread that sets the device meanwhile gets a context the reset does not destroy.
    aclrtStream held = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&held));
    acl_test::Gate gate;
    ASSERT_ACL_OK(aclrtLaunchHostFunc(held, acl_test::Gate::hold, &gate));
    aclError reset = ACL_ERROR_INTERNAL_ERROR;
    std::thread resetter([&] { reset = aclrtResetDevice(0); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // usually inside the reset by now; either order passes
    aclError set = ACL_ERROR_INTERNAL_ERROR, made = ACL_ERROR_INTERNAL_ERROR, used = ACL_ERROR_INTERNAL_ERROR;
    std::thread user([&] {
        set = aclrtSetDevice(0);
        aclrtStream s = nullptr;
        made = aclrtCreateStream(&s);
        if (made == ACL_SUCCESS) {
            aclrtSynchronizeStream(s);
            used = aclrtDestroyStream(s);
        }
        aclrtResetDevice(0);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.open();
    resetter.join();
    user.join();
    EXPECT_ACL_OK(reset);
    EXPECT_ACL_OK(set);
    EXPECT_ACL_OK(made);
    EXPECT_ACL_OK(used);  // the stream outlived the reset
    ASSERT_ACL_OK(aclrtSetDevice(0));  // the fixture's reference was reset above
}

TEST(AclFinalizeFromQueue, IsRefusedAndChangesNothing) {
    ASSERT_ACL_OK(aclInit(nullptr));
    ASSERT_ACL_OK(aclrtSetDevice(0));
    aclrtStream s = nullptr;
    ASSERT_ACL_OK(aclrtCreateStream(&s));
    std::atomic<aclError> inside{ACL_SUCCESS};
    ASSERT_ACL_OK(aclrtLaunchHostFunc(s, [](void* p) { static_cast<std::atomic<aclError>*>(p)->store(aclFinalize()); },
                                      &inside));
    ASSERT_ACL_OK(aclrtSynchronizeStream(s));
    EXPECT_EQ(inside.load(), ACL_ERROR_RT_NO_PERMISSION);
    void* p = nullptr;  // still initialised
    EXPECT_ACL_OK(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_ACL_OK(aclrtFree(p));
    EXPECT_ACL_OK(aclrtDestroyStream(s));
    EXPECT_ACL_OK(aclFinalize());
}
