// test_errors.cpp — rtGetErrorName / rtGetErrorString / rtGetLastErrorMessage: names, strings, thread-locality.
#include "test_util.hpp"

#include <set>

namespace {

struct NamedCode {
    rtError_t code;
    const char* name;
};

const NamedCode kCodes[] = {
    {RT_SUCCESS, "RT_SUCCESS"},
    {RT_ERROR_INVALID_VALUE, "RT_ERROR_INVALID_VALUE"},
    {RT_ERROR_INVALID_DEVICE, "RT_ERROR_INVALID_DEVICE"},
    {RT_ERROR_INVALID_HANDLE, "RT_ERROR_INVALID_HANDLE"},
    {RT_ERROR_OUT_OF_MEMORY, "RT_ERROR_OUT_OF_MEMORY"},
    {RT_ERROR_NOT_READY, "RT_ERROR_NOT_READY"},
    {RT_ERROR_COMPILE_FAILED, "RT_ERROR_COMPILE_FAILED"},
    {RT_ERROR_LAUNCH_FAILED, "RT_ERROR_LAUNCH_FAILED"},
    {RT_ERROR_NOT_SUPPORTED, "RT_ERROR_NOT_SUPPORTED"},
    {RT_ERROR_NOT_FOUND, "RT_ERROR_NOT_FOUND"},
    {RT_ERROR_NOT_PERMITTED, "RT_ERROR_NOT_PERMITTED"},
    {RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, "RT_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
    {RT_ERROR_STREAM_CAPTURE_INVALIDATED, "RT_ERROR_STREAM_CAPTURE_INVALIDATED"},
    {RT_ERROR_STREAM_CAPTURE_UNJOINED, "RT_ERROR_STREAM_CAPTURE_UNJOINED"},
    {RT_ERROR_STREAM_CAPTURE_IMPLICIT, "RT_ERROR_STREAM_CAPTURE_IMPLICIT"},
    {RT_ERROR_STREAM_CAPTURE_WRONG_THREAD, "RT_ERROR_STREAM_CAPTURE_WRONG_THREAD"},
    {RT_ERROR_STREAM_CAPTURE_ISOLATION, "RT_ERROR_STREAM_CAPTURE_ISOLATION"},
    {RT_ERROR_CAPTURED_EVENT, "RT_ERROR_CAPTURED_EVENT"},
    {RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE"},
    {RT_ERROR_ILLEGAL_STATE, "RT_ERROR_ILLEGAL_STATE"},
    {RT_ERROR_INVALID_IMAGE, "RT_ERROR_INVALID_IMAGE"},
    {RT_ERROR_TIMEOUT, "RT_ERROR_TIMEOUT"},
    {RT_ERROR_NOT_INITIALIZED, "RT_ERROR_NOT_INITIALIZED"},
    {RT_ERROR_DEVICE_LOST, "RT_ERROR_DEVICE_LOST"},
    {RT_ERROR_UNKNOWN, "RT_ERROR_UNKNOWN"},
};

/// Provokes a failure on the calling thread (an invalid device index).
rtError_t fail_once() { return rtSetDevice(-1); }

TEST(ErrorName, EveryCodeHasItsEnumeratorName) {
    for (const auto& c : kCodes) {
        const char* n = rtGetErrorName(c.code);
        ASSERT_NE(n, nullptr) << "code " << c.code;
        EXPECT_STREQ(n, c.name);
    }
}

TEST(ErrorName, UnknownCodesAreUnrecognized) {
    // Values inside the enumeration's range (0..1023) but not enumerators: casting anything
    // outside that range would be undefined behaviour in C++.
    EXPECT_STREQ(rtGetErrorName(static_cast<rtError_t>(1000)), "RT_ERROR_UNRECOGNIZED");
    EXPECT_STREQ(rtGetErrorName(static_cast<rtError_t>(24)), "RT_ERROR_UNRECOGNIZED");
}

TEST(ErrorString, EveryCodeHasADistinctNonEmptyDescription) {
    std::set<std::string> seen;
    for (const auto& c : kCodes) {
        const char* s = rtGetErrorString(c.code);
        ASSERT_NE(s, nullptr) << c.name;
        EXPECT_GT(std::strlen(s), 0u) << c.name;
        EXPECT_TRUE(seen.insert(s).second) << c.name << " shares its description \"" << s << "\"";
    }
}

TEST(ErrorString, UnknownCodeStillGivesAString) {
    const char* s = rtGetErrorString(static_cast<rtError_t>(1000));
    ASSERT_NE(s, nullptr);
    EXPECT_GT(std::strlen(s), 0u);
}

TEST(LastErrorMessage, NeverNull) { ASSERT_NE(rtGetLastErrorMessage(), nullptr); }

TEST(LastErrorMessage, FreshThreadStartsEmpty) {
    ASSERT_RT_ERROR(RT_ERROR_INVALID_DEVICE, fail_once());  // this thread has a message ...
    std::string other;
    std::thread t([&] { other = rt_test::last_message(); });
    t.join();
    EXPECT_EQ(other, "");  // ... a new thread does not see it
}

TEST(LastErrorMessage, FailureDescribesTheProblem) {
    ASSERT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtSetDevice(1000));
    std::string m = rt_test::last_message();
    EXPECT_FALSE(m.empty());
    EXPECT_TRUE(rt_test::contains(m, "1000")) << "the message should name the rejected index";
}

TEST(LastErrorMessage, SuccessfulCallsDoNotClearIt) {
    ASSERT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtSetDevice(777));
    std::string before = rt_test::last_message();
    ASSERT_FALSE(before.empty());
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    ASSERT_RT_OK(rtSetDevice(0));
    EXPECT_EQ(rt_test::last_message(), before);
}

TEST(LastErrorMessage, NextFailureReplacesIt) {
    ASSERT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtSetDevice(4242));
    ASSERT_TRUE(rt_test::contains(rt_test::last_message(), "4242"));
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetDeviceCount(nullptr));
    std::string m = rt_test::last_message();
    EXPECT_FALSE(m.empty());
    EXPECT_FALSE(rt_test::contains(m, "4242")) << "stale detail from the previous failure";
}

TEST(LastErrorMessage, IsThreadLocal) {
    // Thread A fails with one detail, thread B with another; each sees only its own, even while the
    // other keeps failing concurrently.
    std::atomic<bool> a_ok{true}, b_ok{true};
    auto worker = [](int bad_index, std::atomic<bool>& ok) {
        for (int i = 0; i < 2000; ++i) {
            if (rtSetDevice(bad_index) != RT_ERROR_INVALID_DEVICE) ok = false;
            std::string m = rtGetLastErrorMessage();
            if (m.find(std::to_string(bad_index)) == std::string::npos) ok = false;
        }
    };
    std::thread a(worker, 31337, std::ref(a_ok));
    std::thread b(worker, 27182, std::ref(b_ok));
    a.join();
    b.join();
    EXPECT_TRUE(a_ok.load());
    EXPECT_TRUE(b_ok.load());
    // The main thread's message is untouched by the workers.
    ASSERT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtSetDevice(-5));
    std::string mine = rt_test::last_message();
    std::thread c([] { (void)rtSetDevice(99999); });
    c.join();
    EXPECT_EQ(rt_test::last_message(), mine);
}

TEST(LastErrorMessage, PointerStaysValidUntilNextFailureOnThisThread) {
    ASSERT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtSetDevice(5555));
    const char* p = rtGetLastErrorMessage();
    std::string copy = p;
    std::thread t([] { (void)rtSetDevice(6666); });  // another thread failing must not overwrite it
    t.join();
    EXPECT_EQ(std::string(p), copy);
}

} // namespace

TEST(DataType, SizesOfEveryTypeAndZeroForOthers) {
    EXPECT_EQ(rtDataTypeSize(RT_INT8), 1u);
    EXPECT_EQ(rtDataTypeSize(RT_UINT8), 1u);
    EXPECT_EQ(rtDataTypeSize(RT_FLOAT16), 2u);
    EXPECT_EQ(rtDataTypeSize(RT_BFLOAT16), 2u);
    EXPECT_EQ(rtDataTypeSize(RT_INT32), 4u);
    EXPECT_EQ(rtDataTypeSize(RT_UINT32), 4u);
    EXPECT_EQ(rtDataTypeSize(RT_FLOAT32), 4u);
    EXPECT_EQ(rtDataTypeSize(RT_INT64), 8u);
    EXPECT_EQ(rtDataTypeSize(RT_UINT64), 8u);
    EXPECT_EQ(rtDataTypeSize(RT_FLOAT64), 8u);
    EXPECT_EQ(rtDataTypeSize(static_cast<rtDataType>(10)), 0u);
    EXPECT_EQ(rtDataTypeSize(static_cast<rtDataType>(-1)), 0u);
}
