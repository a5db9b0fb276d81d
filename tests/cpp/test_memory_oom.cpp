// test_memory_oom.cpp — device capacity limits: run by CTest with RUNTIME_CPU_MEMORY=32M so exhaustion is cheap and exact.
#include "test_util.hpp"

namespace {

constexpr size_t kMiB = size_t(1) << 20;

/// The capacity CTest configured (tests/CMakeLists.txt sets RUNTIME_CPU_MEMORY=32M for this file).
size_t configured_capacity() {
    const char* env = std::getenv("RUNTIME_CPU_MEMORY");
    if (!env) return 0;
    char* end = nullptr;
    unsigned long long v = std::strtoull(env, &end, 10);
    switch (end ? *end : '\0') {
    case 'K': case 'k': v <<= 10; break;
    case 'M': case 'm': v <<= 20; break;
    case 'G': case 'g': v <<= 30; break;
    default: break;
    }
    return static_cast<size_t>(v);
}

class MemoryLimit : public rt_test::DeviceTest {
protected:
    void SetUp() override {
        rt_test::DeviceTest::SetUp();
        cap_ = configured_capacity();
        ASSERT_GE(cap_, 4 * kMiB) << "run through CTest: RUNTIME_CPU_MEMORY must be set (e.g. 32M)";
    }
    size_t cap_ = 0;
};

TEST_P(MemoryLimit, EnvironmentSetsTheCapacity) {
    size_t free_b = 0, total_b = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_b, &total_b));
    EXPECT_EQ(total_b, cap_);
    rtDeviceProp p;
    ASSERT_RT_OK(rtGetDeviceProperties(&p, device()));
    EXPECT_EQ(p.total_memory, cap_);
}

TEST_P(MemoryLimit, OverCapacityIsOutOfMemoryNamingTheRequest) {
    void* p = nullptr;
    const size_t request = cap_ + 1;
    ASSERT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMalloc(&p, request));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), std::to_string(request)));
}

TEST_P(MemoryLimit, SecondLargeAllocationFailsAndSucceedsAfterFree) {
    const size_t big = cap_ * 5 / 8;  // two of these cannot fit
    void* a = nullptr;
    void* b = nullptr;
    ASSERT_RT_OK(rtMalloc(&a, big));
    ASSERT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMalloc(&b, big));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), std::to_string(big)));
    ASSERT_RT_OK(rtFree(a));
    ASSERT_RT_OK(rtMalloc(&b, big)) << "memory was not returned by rtFree";
    ASSERT_RT_OK(rtFree(b));
}

TEST_P(MemoryLimit, ExhaustWithSmallAllocationsThenRecoverEverything) {
    size_t free0 = 0, total = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free0, &total));
    std::vector<void*> blocks;
    const size_t block = 256 * 1024;
    rtError_t last = RT_SUCCESS;
    for (size_t i = 0; i < 2 * cap_ / block; ++i) {  // bounded: must hit the limit well before
        void* p = nullptr;
        last = rtMalloc(&p, block);
        if (last != RT_SUCCESS) break;
        blocks.push_back(p);
    }
    EXPECT_EQ(last, RT_ERROR_OUT_OF_MEMORY) << rtGetErrorName(last);
    EXPECT_LE(blocks.size() * block, cap_) << "handed out more than the capacity";
    EXPECT_GE(blocks.size() * block, cap_ / 2) << "ran out far below the capacity";
    size_t free_full = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_full, &total));
    EXPECT_LT(free_full, block) << "rtMemGetInfo reports room that rtMalloc refused";
    for (void* p : blocks) ASSERT_RT_OK(rtFree(p));
    size_t free1 = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free1, &total));
    EXPECT_EQ(free1, free0);
}

TEST_P(MemoryLimit, OutOfMemoryLeavesRuntimeUsable) {
    void* p = nullptr;
    ASSERT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMalloc(&p, cap_ * 2));
    rt_test::DevBuf b(1024);
    ASSERT_NE(b.get(), nullptr);
    auto src = rt_test::pattern(1024, 5);
    std::vector<unsigned char> got(1024);
    ASSERT_RT_OK(rtMemcpy(b.get(), src.data(), 1024, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtMemcpy(got.data(), b.get(), 1024, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(got, src);
}

TEST_P(MemoryLimit, DevicesHaveSeparateCapacities) {
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    const size_t big = cap_ * 5 / 8;
    void* mine = nullptr;
    ASSERT_RT_OK(rtMalloc(&mine, big));
    for (int d = 0; d < n; ++d) {
        if (d == device()) continue;
        ASSERT_RT_OK(rtSetDevice(d));
        void* other = nullptr;
        EXPECT_RT_OK(rtMalloc(&other, big)) << "device " << d << " is charged for device " << device();
        EXPECT_RT_OK(rtFree(other));
    }
    ASSERT_RT_OK(rtSetDevice(device()));
    ASSERT_RT_OK(rtFree(mine));
}

RT_INSTANTIATE_DEVICE_TEST(MemoryLimit);

} // namespace
