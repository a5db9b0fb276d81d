// test_cuda_shim.cpp — the cuda backend without a usable driver: no cuda devices, a reason for "cuda:0", device names and order, the rest works.
// The driver library is pointed at a missing file (RUNTIME_CUDA_DRIVER_LIB), so these tests mean the same on machines
// with and without a GPU.
#include <cstdlib>

#include "test_util.hpp"

namespace {

using rt_test::contains;
using rt_test::EnvVar;
using rt_test::last_message;

int cpu_devices_expected() {
    const char* e = std::getenv("RUNTIME_CPU_DEVICES");
    return e && *e ? std::atoi(e) : 1;
}

class CudaShim : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_RT_OK(rtFinalize()); }
    void TearDown() override { rtFinalize(); }
    EnvVar driver_{"RUNTIME_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1"};
    EnvVar backend_{"RUNTIME_BACKEND", nullptr};
};

TEST_F(CudaShim, MissingDriverLeavesOnlyCpuDevices) {
    int n = -1;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    EXPECT_EQ(n, cpu_devices_expected());
    for (int i = 0; i < n; ++i) {
        rtDeviceProp p{};
        ASSERT_RT_OK(rtGetDeviceProperties(&p, i));
        EXPECT_STREQ(p.backend, "cpu");
        EXPECT_EQ(p.backend_ordinal, i) << "cpu devices come first, in order";
    }
}

TEST_F(CudaShim, CudaDeviceNameSaysWhyCudaIsUnavailable) {
    int d = 42;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "cuda:0"));
    EXPECT_EQ(d, 42) << "the output is untouched on failure";
    std::string m = last_message();
#ifdef RUNTIME_HAVE_CUDA
    EXPECT_TRUE(contains(m, "/nonexistent/libcuda.so.1")) << "the message names the driver library tried";
    EXPECT_TRUE(contains(m, "cannot be loaded"));
    EXPECT_TRUE(contains(m, "RUNTIME_CUDA_DRIVER_LIB")) << "and how to point at another one";
#else
    EXPECT_TRUE(contains(m, "no cuda backend"));
#endif
    EXPECT_TRUE(contains(m, "cpu:0")) << "and lists the devices present";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "cuda"));
}

TEST_F(CudaShim, DisabledByEnvironmentSaysSo) {
#ifndef RUNTIME_HAVE_CUDA
    GTEST_SKIP() << "this build has no cuda backend";
#endif
    EnvVar off("RUNTIME_CUDA", "0");
    int d = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "cuda:0"));
    EXPECT_TRUE(contains(last_message(), "RUNTIME_CUDA=0"));
}

TEST_F(CudaShim, CudaEnableZeroSaysSoWithoutOpeningTheDriver) {
#ifdef RUNTIME_HAVE_CUDA
    ASSERT_RT_OK(rtInit("cuda.enable=0"));
    int d = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "cuda:0"));
    EXPECT_TRUE(contains(last_message(), "disabled (rtInit: cuda.enable=0)")) << last_message();
    EXPECT_FALSE(contains(last_message(), "/nonexistent")) << "the driver library is not tried";
#else
    // A build without the backend refuses its options, saying why.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("cuda.enable=0"));
    EXPECT_TRUE(contains(last_message(), "no cuda backend")) << last_message();
#endif
}

TEST_F(CudaShim, DeviceNamesResolveThroughOneParser) {
    int d = -1;
    ASSERT_RT_OK(rtGetDeviceByName(&d, "cpu:0"));
    EXPECT_EQ(d, 0);
    ASSERT_RT_OK(rtGetDeviceByName(&d, " CPU : 0 "));
    EXPECT_EQ(d, 0);
    ASSERT_RT_OK(rtGetDeviceByName(&d, "cpu"));
    EXPECT_EQ(d, 0);
    int n = cpu_devices_expected();
    std::string past = "cpu:" + std::to_string(n);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, past.c_str()));
    EXPECT_TRUE(contains(last_message(), "cpu:0.." + std::to_string(n - 1)));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "tpu:0"));
    EXPECT_TRUE(contains(last_message(), "unknown backend 'tpu'"));
    for (const char* bad : {"", ":0", "cpu:", "cpu:x", "cpu:-1", "cpu:0:1", "cpu 0"}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, bad)) << "'" << bad << "'";
        EXPECT_TRUE(contains(last_message(), "available: cpu:0")) << bad;
    }
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetDeviceByName(&d, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetDeviceByName(nullptr, "cpu:0"));
}

TEST_F(CudaShim, BackendOptionWithoutGpuKeepsCpuFirst) {
    ASSERT_RT_OK(rtInit("backend=cuda"));
    rtDeviceProp p{};
    ASSERT_RT_OK(rtGetDeviceProperties(&p, 0));
    EXPECT_STREQ(p.backend, "cpu") << "no cuda device: the order is unchanged, device 0 is cpu:0";
    int cur = -1;
    ASSERT_RT_OK(rtGetDevice(&cur));
    EXPECT_EQ(cur, 0);
    // A live runtime refuses a different backend choice, like any other option.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("backend=cpu"));
    ASSERT_RT_OK(rtFinalize());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("backend=tpu"));
    EXPECT_TRUE(contains(last_message(), "expected cpu or cuda"));
    {
        EnvVar env("RUNTIME_BACKEND", "gpu");
        int n = 0;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetDeviceCount(&n));
        EXPECT_TRUE(contains(last_message(), "RUNTIME_BACKEND"));
    }
    EnvVar env("RUNTIME_BACKEND", "cuda");
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    EXPECT_EQ(n, cpu_devices_expected());
}

TEST_F(CudaShim, EverythingElseWorksWithoutTheDriver) {
    const size_t n = 1 << 16;
    std::vector<unsigned char> src = rt_test::pattern(n, 7), back(n, 0);
    void* dev = nullptr;
    ASSERT_RT_OK(rtMalloc(&dev, n));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtEventCreate(&e));
    ASSERT_RT_OK(rtMemcpyAsync(dev, src.data(), n, RT_MEMCPY_HOST_TO_DEVICE, s));
    ASSERT_RT_OK(rtEventRecord(e, s));
    ASSERT_RT_OK(rtStreamWaitEvent(nullptr, e));
    ASSERT_RT_OK(rtMemcpyAsync(back.data(), dev, n, RT_MEMCPY_DEVICE_TO_HOST, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_EQ(rt_test::first_mismatch(src.data(), back.data(), n), -1);
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, "RT_KERNEL void fill7(unsigned char* p, int n) {\n"
                                        "    int i = get_global_id(0); if (i < n) p[i] = 7; }\n", nullptr));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "fill7"));
    int count = static_cast<int>(n);
    void* args[] = {&dev, &count};
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{static_cast<unsigned>(n / 256), 1, 1}, rtDim3{256, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtMemcpyAsync(back.data(), dev, n, RT_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(std::count(back.begin(), back.end(), 7), static_cast<long>(n));
    EXPECT_RT_OK(rtModuleUnload(m));
    EXPECT_RT_OK(rtEventDestroy(e));
    EXPECT_RT_OK(rtStreamDestroy(s));
    EXPECT_RT_OK(rtFree(dev));
}

}  // namespace
