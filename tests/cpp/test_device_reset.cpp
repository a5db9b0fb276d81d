// test_device_reset.cpp — rtDeviceReset: the device's streams, events, modules and memory go, queued work completes
// first, other devices and host memory are untouched; rtFuncGetAttributes and the occupancy helpers.
#include "test_util.hpp"

#include <atomic>

using namespace rt_test;

namespace {

const char* const kSource = R"rtsrc(
RT_KERNEL void scale(float* x, float f) { x[get_global_id(0)] *= f; }
RT_KERNEL void with_local(float* x) {
    RT_LOCAL float tile[256];
    tile[get_local_id(0)] = x[get_global_id(0)];
    rt_barrier();
    x[get_global_id(0)] = tile[get_local_size(0) - 1 - get_local_id(0)];
}
)rtsrc";

class DeviceReset : public DeviceTest {};

void slow_set(void* p) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    static_cast<std::atomic<int>*>(p)->store(1);
}

TEST_P(DeviceReset, DestroysTheDevicesObjectsAfterItsWork) {
    rtStream_t s = nullptr;
    rtEvent_t e = nullptr;
    rtModule_t m = nullptr;
    rtFunction_t f = nullptr;
    void* d = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtEventCreate(&e));
    ASSERT_RT_OK(rtModuleLoadSource(&m, kSource, nullptr));
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "scale"));
    ASSERT_RT_OK(rtMalloc(&d, 1024));
    HostBuf pinned(64);
    ASSERT_RT_OK(pinned.status());
    std::atomic<int> ran{0};
    ASSERT_RT_OK(rtLaunchHostFunc(s, slow_set, &ran));
    ASSERT_RT_OK(rtEventRecord(e, s));
    size_t live_before = 0;
    rtMemStats stats{};
    ASSERT_RT_OK(rtMemGetStats(&stats));
    live_before = stats.num_live_allocations;

    ASSERT_RT_OK(rtDeviceReset());
    EXPECT_EQ(ran.load(), 1);  // queued work completed first
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamSynchronize(s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventQuery(e));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleGetFunction(&f, m, "scale"));
    rtFuncAttributes fa{};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtFuncGetAttributes(&fa, f));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(d));  // already gone
    rtPointerAttributes pa{};
    ASSERT_RT_OK(rtPointerGetAttributes(&pa, d));
    EXPECT_EQ(pa.type, RT_MEMORY_TYPE_UNREGISTERED);
    ASSERT_RT_OK(rtMemGetStats(&stats));
    EXPECT_EQ(stats.num_live_allocations + 1, live_before);
    // Pinned host memory stays; the device works as new.
    ASSERT_RT_OK(rtPointerGetAttributes(&pa, pinned.get()));
    EXPECT_EQ(pa.type, RT_MEMORY_TYPE_HOST);
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtMalloc(&d, 64));
    ASSERT_RT_OK(rtMemsetAsync(d, 1, 64, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtStreamDestroy(s));
    ASSERT_RT_OK(rtFree(d));
}

TEST_P(DeviceReset, LeavesOtherDevicesAlone) {
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    if (n < 2) GTEST_SKIP() << "one device (rerun with RUNTIME_CPU_DEVICES=2)";
    const int other = device() == 0 ? 1 : 0;
    ASSERT_RT_OK(rtSetDevice(other));
    StreamGuard theirs;
    DevBuf their_memory(256);
    ASSERT_RT_OK(rtSetDevice(device()));
    ASSERT_RT_OK(rtDeviceReset());
    ASSERT_RT_OK(rtSetDevice(other));
    ASSERT_RT_OK(rtMemsetAsync(their_memory.get(), 3, 256, theirs));
    ASSERT_RT_OK(rtStreamSynchronize(theirs));
    ASSERT_RT_OK(rtSetDevice(device()));
}

void try_reset(void* p) { *static_cast<rtError_t*>(p) = rtDeviceReset(); }

TEST_P(DeviceReset, RefusedInQueueContext) {
    StreamGuard s;
    rtError_t inside = RT_SUCCESS;
    ASSERT_RT_OK(rtLaunchHostFunc(s, try_reset, &inside));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(inside, RT_ERROR_NOT_PERMITTED);
}
RT_INSTANTIATE_DEVICE_TEST(DeviceReset);

class FuncAttributes : public DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kSource, nullptr));
        ASSERT_RT_OK(rtModuleGetFunction(&scale_, module_, "scale"));
        ASSERT_RT_OK(rtModuleGetFunction(&local_, module_, "with_local"));
    }
    void TearDown() override {
        if (module_) {
            EXPECT_RT_OK(rtModuleUnload(module_));
        }
    }
    rtModule_t module_ = nullptr;
    rtFunction_t scale_ = nullptr, local_ = nullptr;
};

TEST_P(FuncAttributes, ReportTheKernel) {
    rtDeviceProp p{};
    ASSERT_RT_OK(rtGetDeviceProperties(&p, device()));
    rtFuncAttributes a{};
    ASSERT_RT_OK(rtFuncGetAttributes(&a, scale_));
    EXPECT_EQ(a.num_params, 2);
    EXPECT_EQ(a.shared_size_bytes, 0u);
    EXPECT_EQ(a.max_threads_per_block, p.max_threads_per_block);
    EXPECT_EQ(a.uses_barriers, 0);
    ASSERT_RT_OK(rtFuncGetAttributes(&a, local_));
    EXPECT_EQ(a.num_params, 1);
    EXPECT_GE(a.shared_size_bytes, 256 * sizeof(float));
    EXPECT_EQ(a.uses_barriers, backend_of(device()) == "cpu" ? 1 : a.uses_barriers);
    EXPECT_EQ(static_cast<size_t>(a.max_dynamic_shared_size_bytes) + a.shared_size_bytes, p.local_memory_per_group);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFuncGetAttributes(nullptr, scale_));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtFuncGetAttributes(&a, garbage_handle<rtFunction_t>()));
}

TEST_P(FuncAttributes, Occupancy) {
    rtDeviceProp p{};
    ASSERT_RT_OK(rtGetDeviceProperties(&p, device()));
    int groups = -1;
    ASSERT_RT_OK(rtOccupancyMaxActiveBlocksPerMultiprocessor(&groups, scale_, 64, 0));
    EXPECT_GE(groups, 1);
    if (backend_of(device()) == "cpu") {
        EXPECT_EQ(groups, 1);
    }
    // Too many items, or too much local memory: no group fits.
    ASSERT_RT_OK(rtOccupancyMaxActiveBlocksPerMultiprocessor(&groups, scale_, p.max_threads_per_block + 1, 0));
    EXPECT_EQ(groups, 0);
    ASSERT_RT_OK(rtOccupancyMaxActiveBlocksPerMultiprocessor(&groups, local_, 64, p.local_memory_per_group));
    EXPECT_EQ(groups, 0);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtOccupancyMaxActiveBlocksPerMultiprocessor(&groups, scale_, 0, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtOccupancyMaxActiveBlocksPerMultiprocessor(nullptr, scale_, 1, 0));

    int grid = 0, block = 0;
    ASSERT_RT_OK(rtOccupancyMaxPotentialBlockSize(&grid, &block, scale_, 0, 0));
    EXPECT_GE(block, 1);
    EXPECT_LE(block, p.max_threads_per_block);
    EXPECT_GE(grid, p.compute_units);
    ASSERT_RT_OK(rtOccupancyMaxPotentialBlockSize(&grid, &block, scale_, 0, 32));
    EXPECT_LE(block, 32);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtOccupancyMaxPotentialBlockSize(&grid, &block, local_, p.local_memory_per_group, 0));
    EXPECT_TRUE(contains(last_message(), "dynamic shared memory"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtOccupancyMaxPotentialBlockSize(&grid, &block, scale_, 0, -1));
}
RT_INSTANTIATE_DEVICE_TEST(FuncAttributes);

}  // namespace
