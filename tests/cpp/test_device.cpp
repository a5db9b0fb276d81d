// test_device.cpp — device enumeration, per-thread current device, properties, rtDeviceSynchronize, invalid devices.
#include "test_util.hpp"

namespace {

using rt_test::DeviceTest;

int device_count() {
    int n = -1;
    EXPECT_RT_OK(rtGetDeviceCount(&n));
    return n;
}

TEST(DeviceCount, AtLeastOneAndMatchesEnvironment) {
    int n = device_count();
    EXPECT_GE(n, 1);
    if (const char* env = std::getenv("RUNTIME_CPU_DEVICES")) {
        EXPECT_EQ(n, std::atoi(env));
    }
}

TEST(DeviceCount, StableAcrossCalls) { EXPECT_EQ(device_count(), device_count()); }

TEST(DeviceCount, NullOutIsInvalidValue) { EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetDeviceCount(nullptr)); }

TEST(CurrentDevice, DefaultsToZeroOnEveryThread) {
    int d = -1;
    std::thread t([&] { (void)rtGetDevice(&d); });
    t.join();
    EXPECT_EQ(d, 0);
}

TEST(CurrentDevice, NullOutIsInvalidValue) { EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetDevice(nullptr)); }

TEST(CurrentDevice, InvalidIndexIsRejectedAndLeavesCurrentUnchanged) {
    int n = device_count();
    ASSERT_RT_OK(rtSetDevice(n - 1));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtSetDevice(n));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtSetDevice(-1));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtSetDevice(1 << 30));
    int d = -1;
    ASSERT_RT_OK(rtGetDevice(&d));
    EXPECT_EQ(d, n - 1);
    ASSERT_RT_OK(rtSetDevice(0));
}

TEST(CurrentDevice, IsPerThread) {
    int n = device_count();
    ASSERT_RT_OK(rtSetDevice(0));
    std::vector<int> seen(static_cast<size_t>(n), -1);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i)
        threads.emplace_back([i, &seen] {
            if (rtSetDevice(i) != RT_SUCCESS) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));  // overlap with the others
            int d = -1;
            if (rtGetDevice(&d) == RT_SUCCESS) seen[static_cast<size_t>(i)] = d;
        });
    for (auto& t : threads) t.join();
    for (int i = 0; i < n; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], i);
    int d = -1;
    ASSERT_RT_OK(rtGetDevice(&d));
    EXPECT_EQ(d, 0) << "another thread's rtSetDevice changed this thread's current device";
}

TEST(DeviceProperties, InvalidDeviceAndNullOut) {
    rtDeviceProp p;
    int n = device_count();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceProperties(&p, n));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceProperties(&p, -1));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetDeviceProperties(nullptr, 0));
}

class DeviceProps : public DeviceTest {};

TEST_P(DeviceProps, DescribeACpuDevice) {
    rtDeviceProp p;
    std::memset(&p, 0xCD, sizeof p);  // garbage in: every field we check must be written
    ASSERT_RT_OK(rtGetDeviceProperties(&p, device()));
    ASSERT_NE(std::memchr(p.name, '\0', sizeof p.name), nullptr) << "name not terminated";
    ASSERT_NE(std::memchr(p.backend, '\0', sizeof p.backend), nullptr) << "backend not terminated";
    if (std::strcmp(p.backend, "cpu") != 0)
        GTEST_SKIP() << "describes cpu devices; " << p.name << " is described by test_cuda_fake and the GPU check";
    EXPECT_STREQ(p.backend, "cpu");
    EXPECT_TRUE(rt_test::contains(p.name, "cpu:" + std::to_string(device())));
    EXPECT_EQ(p.device_index, device());
    EXPECT_EQ(p.backend_ordinal, device());  // only cpu devices exist, so ordinal == index
    EXPECT_GT(p.total_memory, 0u);
    EXPECT_GE(p.compute_units, 1);
    EXPECT_LE(p.compute_units, 4096);
    EXPECT_GE(p.max_threads_per_block, 1);
    for (int i = 0; i < 3; ++i) {
        EXPECT_GE(p.max_grid_size[i], 1) << i;
        EXPECT_GE(p.max_block_size[i], 1) << i;
    }
    EXPECT_EQ(p.compute_capability_major, 0);
    EXPECT_EQ(p.compute_capability_minor, 0);
    EXPECT_EQ(p.unified_addressing, 1);
}

TEST_P(DeviceProps, NamesAreDistinctPerDevice) {
    rtDeviceProp mine, other;
    ASSERT_RT_OK(rtGetDeviceProperties(&mine, device()));
    for (int i = 0; i < device_count(); ++i) {
        if (i == device()) continue;
        ASSERT_RT_OK(rtGetDeviceProperties(&other, i));
        EXPECT_STRNE(mine.name, other.name);
    }
}

TEST_P(DeviceProps, MemGetInfoTotalMatchesProperties) {
    rtDeviceProp p;
    ASSERT_RT_OK(rtGetDeviceProperties(&p, device()));
    size_t free_b = 0, total_b = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_b, &total_b));
    EXPECT_EQ(total_b, p.total_memory);
    EXPECT_LE(free_b, total_b);
}

TEST_P(DeviceProps, DeviceSynchronizeWaitsForEveryStreamOfTheDevice) {
    constexpr int kStreams = 4;
    rtStream_t s[kStreams];
    std::atomic<bool> done[kStreams];
    int delay = 30;
    for (int i = 0; i < kStreams; ++i) {
        done[i] = false;
        ASSERT_RT_OK(rtStreamCreate(&s[i]));
        ASSERT_RT_OK(rtLaunchHostFunc(s[i], rt_test::sleep_ms, &delay));
        ASSERT_RT_OK(rtLaunchHostFunc(s[i], rt_test::set_flag, &done[i]));
    }
    std::atomic<bool> default_done{false};
    ASSERT_RT_OK(rtLaunchHostFunc(nullptr, rt_test::sleep_ms, &delay));
    ASSERT_RT_OK(rtLaunchHostFunc(nullptr, rt_test::set_flag, &default_done));
    ASSERT_RT_OK(rtDeviceSynchronize());
    for (int i = 0; i < kStreams; ++i) EXPECT_TRUE(done[i].load()) << "stream " << i;
    EXPECT_TRUE(default_done.load());
    for (auto st : s) EXPECT_RT_OK(rtStreamDestroy(st));
}

TEST_P(DeviceProps, DeviceSynchronizeIsPerDevice) {
    // rtDeviceSynchronize on another device must not wait for this device's blocked stream.
    int n = device_count();
    if (n < 2) {
        // With one device, the same check degenerates to: synchronizing an idle device returns.
        ASSERT_RT_OK(rtDeviceSynchronize());
        return;
    }
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    rt_test::Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    int other = (device() + 1) % n;
    std::atomic<rtError_t> res{RT_ERROR_UNKNOWN};
    std::thread t([&] {
        if (rtSetDevice(other) == RT_SUCCESS) res = rtDeviceSynchronize();
    });
    bool returned = rt_test::wait_until([&] { return res.load() != RT_ERROR_UNKNOWN; }, std::chrono::milliseconds(5000));
    gate.open();
    t.join();
    EXPECT_TRUE(returned) << "rtDeviceSynchronize on device " << other << " waited for device " << device();
    EXPECT_EQ(res.load(), RT_SUCCESS);
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

RT_INSTANTIATE_DEVICE_TEST(DeviceProps);

} // namespace
