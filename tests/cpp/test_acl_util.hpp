// test_acl_util.hpp — shared helpers of the AscendCL face's tests: aclError assertions that print the code and the
// recent error message, and a fixture that runs each test between aclInit + aclrtSetDevice(0) and aclFinalize.
#pragma once

#include <acl/acl.h>

#include <gtest/gtest.h>

#include <string>

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

}  // namespace acl_test

#define ASSERT_ACL(code, expr) ASSERT_PRED_FORMAT2(::acl_test::acl_is, (code), (expr))
#define EXPECT_ACL(code, expr) EXPECT_PRED_FORMAT2(::acl_test::acl_is, (code), (expr))
#define ASSERT_ACL_OK(expr) ASSERT_ACL(ACL_SUCCESS, expr)
#define EXPECT_ACL_OK(expr) EXPECT_ACL(ACL_SUCCESS, expr)
