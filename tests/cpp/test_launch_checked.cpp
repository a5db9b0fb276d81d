// test_launch_checked.cpp — checked mode in C/C++ (this file runs with RUNTIME_CHECK_BOUNDS=1): launches are checked against the allocation registry.
#include "test_util.hpp"

using namespace rt_test;

namespace {

const char* const kSource = R"rtsrc(
RT_KERNEL void store(float* out, uint64_t n) {
    size_t i = get_global_id(0);
    if (i < n) out[i] = 1.0f;
}
)rtsrc";

class LaunchChecked : public DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        if (HasFatalFailure()) return;
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kSource, nullptr));
        ASSERT_RT_OK(rtModuleGetFunction(&store_, module_, "store"));
    }
    void TearDown() override {
        if (module_) rtModuleUnload(module_);
        DeviceTest::TearDown();
    }
    rtModule_t module_ = nullptr;
    rtFunction_t store_ = nullptr;
};

TEST_P(LaunchChecked, MemoryFreedBeforeTheLaunchIsRefused) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 64 * sizeof(float)));
    uint64_t n = 64;
    void* args[] = {&p, &n};
    ASSERT_RT_OK(rtLaunchKernel(store_, rtDim3{1, 1, 1}, rtDim3{64, 1, 1}, args, 0, s));  // live: runs
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtFree(p));
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchKernel(store_, rtDim3{1, 1, 1}, rtDim3{64, 1, 1}, args, 0, s));
    const std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "kernel 'store': argument 0")) << msg;
    EXPECT_TRUE(contains(msg, "already freed")) << msg;
    ASSERT_RT_OK(rtStreamSynchronize(s));  // nothing was queued
}

TEST_P(LaunchChecked, ValuesThatAreNotAddressesOfFreedMemoryPass) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    DevBuf out(16 * sizeof(float));
    void* p = out.get();
    uint64_t n = 16;
    void* args[] = {&p, &n};
    ASSERT_RT_OK(rtLaunchKernel(store_, rtDim3{1, 1, 1}, rtDim3{16, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

RT_INSTANTIATE_DEVICE_TEST(LaunchChecked);

}  // namespace
