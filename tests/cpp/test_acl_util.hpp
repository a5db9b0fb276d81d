// test_acl_util.hpp — shared helpers of the AscendCL face's tests: aclError assertions that print the code and the
// recent error message, and a fixture that runs each test between aclInit + aclrtSetDevice(0) and aclFinalize.
#pragma once

#include <acl/acl.h>

#include <gtest/gtest.h>
#include <runtime/runtime.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace acl_test {

inline ::testing::AssertionResult acl_is(const char* expected_text, const char* expr_text, aclError expected,
                                         aclError actual) {
    if (actual == expected) return ::testing::AssertionSuccess();
    const char* msg = aclGetRecentErrMsg();
    return ::testing::AssertionFailure() << expr_text << "\n  returned " << actual << "\n  expected " << expected
                                         << " (" << expected_text << ")\n  recent error message: \""
                                         << (msg ? msg : "(none)") << "\"";
}

/// The recent error messages of this thread (aclGetRecentErrMsg, which clears them), "" when none.
inline std::string recent_message() {
    const char* m = aclGetRecentErrMsg();
    return m ? m : "";
}

/// Each test between aclInit(NULL) + aclrtSetDevice(0) and aclFinalize (which releases whatever the test left).
class AclTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(aclInit(nullptr), ACL_SUCCESS) << recent_message();
        ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS) << recent_message();
        aclGetRecentErrMsg();
    }
    void TearDown() override { EXPECT_EQ(aclFinalize(), ACL_SUCCESS) << recent_message(); }
};

/// A host function that holds its stream until open() (or 30 s, so a broken test fails instead of hanging).
struct Gate {
    std::atomic<bool> is_open{false};
    void open() { is_open.store(true); }
    static void hold(void* p) {
        auto* g = static_cast<Gate*>(p);
        const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!g->is_open.load() && std::chrono::steady_clock::now() < limit)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
};

/// A host function that fails its stream (the failure stays until a synchronize or query reports it).
inline void fail_stream(void*) { rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, "the test's failing host function"); }

/// Queues a failure on `stream` and waits until it has happened, without reporting (clearing) it: an event recorded
/// behind the failure carries it.
inline void make_stream_fail(aclrtStream stream) {
    ASSERT_EQ(aclrtLaunchHostFunc(stream, fail_stream, nullptr), ACL_SUCCESS);
    aclrtEvent behind = nullptr;
    ASSERT_EQ(aclrtCreateEvent(&behind), ACL_SUCCESS);
    ASSERT_EQ(aclrtRecordEvent(behind, stream), ACL_SUCCESS);
    EXPECT_NE(aclrtSynchronizeEvent(behind), ACL_SUCCESS);  // the event carries the stream's failure
    ASSERT_EQ(aclrtDestroyEvent(behind), ACL_SUCCESS);
    aclGetRecentErrMsg();
}

}  // namespace acl_test

#define ASSERT_ACL(code, expr) ASSERT_PRED_FORMAT2(::acl_test::acl_is, (code), (expr))
#define EXPECT_ACL(code, expr) EXPECT_PRED_FORMAT2(::acl_test::acl_is, (code), (expr))
#define ASSERT_ACL_OK(expr) ASSERT_ACL(ACL_SUCCESS, expr)
#define EXPECT_ACL_OK(expr) EXPECT_ACL(ACL_SUCCESS, expr)
