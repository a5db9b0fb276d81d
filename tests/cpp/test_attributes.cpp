// test_attributes.cpp — rtPointerGetAttributes, rtDeviceGetAttribute and rtDeviceProp's added fields, on every device.
#include "test_util.hpp"

#include <cstddef>
#include <cstring>

using namespace rt_test;

namespace {

// rtDeviceProp grows into its reserved tail: the size and every first-version offset stay as they were.
static_assert(sizeof(rtDeviceProp) == offsetof(rtDeviceProp, local_memory_per_group) + sizeof(size_t) + 30 * sizeof(int),
              "rtDeviceProp changed size: fields must take the place of reserved ones");
static_assert(offsetof(rtDeviceProp, max_local_memory_per_group) == offsetof(rtDeviceProp, local_memory_per_group) + 8);

class PointerAttributes : public DeviceTest {};

TEST_P(PointerAttributes, DeviceMemoryReportsItsAllocation) {
    DevBuf d(4096);
    ASSERT_NE(d.get(), nullptr);
    rtPointerAttributes a{};
    ASSERT_RT_OK(rtPointerGetAttributes(&a, d.get() + 100));
    EXPECT_EQ(a.type, RT_MEMORY_TYPE_DEVICE);
    EXPECT_EQ(a.device, device());
    EXPECT_EQ(a.base, d.get());
    EXPECT_EQ(a.size, 4096u);
    EXPECT_EQ(a.device_pointer, d.get() + 100);
    rtDeviceProp p{};
    ASSERT_RT_OK(rtGetDeviceProperties(&p, device()));
    EXPECT_EQ(a.host_pointer, p.unified_addressing ? static_cast<void*>(d.get() + 100) : nullptr);
}

TEST_P(PointerAttributes, PinnedRegisteredAndUnknownHostMemory) {
    HostBuf h(512);
    ASSERT_RT_OK(h.status());
    rtPointerAttributes a{};
    ASSERT_RT_OK(rtPointerGetAttributes(&a, h.get() + 8));
    EXPECT_EQ(a.type, RT_MEMORY_TYPE_HOST);
    EXPECT_EQ(a.host_pointer, h.get() + 8);
    EXPECT_EQ(a.base, h.get());
    EXPECT_EQ(a.size, 512u);

    std::vector<unsigned char> mine(1000);
    ASSERT_RT_OK(rtPointerGetAttributes(&a, mine.data()));
    EXPECT_EQ(a.type, RT_MEMORY_TYPE_UNREGISTERED);
    EXPECT_EQ(a.device, -1);
    EXPECT_EQ(a.base, nullptr);
    EXPECT_EQ(a.size, 0u);
    ASSERT_RT_OK(rtHostRegister(mine.data(), mine.size(), RT_HOST_REGISTER_DEFAULT));
    ASSERT_RT_OK(rtPointerGetAttributes(&a, mine.data() + 999));
    EXPECT_EQ(a.type, RT_MEMORY_TYPE_REGISTERED);
    EXPECT_EQ(a.size, 1000u);
    EXPECT_EQ(a.host_pointer, mine.data() + 999);
    ASSERT_RT_OK(rtHostUnregister(mine.data()));
    ASSERT_RT_OK(rtPointerGetAttributes(&a, nullptr));
    EXPECT_EQ(a.type, RT_MEMORY_TYPE_UNREGISTERED);
}

TEST_P(PointerAttributes, FreedMemoryIsUnregisteredAndNullOutputRefused) {
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 256));
    ASSERT_RT_OK(rtFree(p));
    ASSERT_RT_OK(rtDeviceSynchronize());
    rtPointerAttributes a{};
    ASSERT_RT_OK(rtPointerGetAttributes(&a, p));
    EXPECT_EQ(a.type, RT_MEMORY_TYPE_UNREGISTERED);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtPointerGetAttributes(nullptr, p));
    EXPECT_TRUE(contains(last_message(), "attributes is NULL"));
}

TEST_P(PointerAttributes, ManagedMemory) {
    int managed = 0;
    ASSERT_RT_OK(rtDeviceGetAttribute(&managed, RT_DEV_ATTR_MANAGED_MEMORY, device()));
    void* p = nullptr;
    if (!managed) {
        EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtMallocManaged(&p, 64, RT_MEM_ATTACH_GLOBAL));
        return;
    }
    ASSERT_RT_OK(rtMallocManaged(&p, 1024, RT_MEM_ATTACH_GLOBAL));
    rtPointerAttributes a{};
    ASSERT_RT_OK(rtPointerGetAttributes(&a, p));
    EXPECT_EQ(a.type, RT_MEMORY_TYPE_MANAGED);
    EXPECT_EQ(a.host_pointer, p);
    EXPECT_EQ(a.device_pointer, p);
    EXPECT_EQ(a.device, device());
    ASSERT_RT_OK(rtFree(p));
}
RT_INSTANTIATE_DEVICE_TEST(PointerAttributes);

class DeviceAttributes : public DeviceTest {};

TEST_P(DeviceAttributes, MatchTheProperties) {
    rtDeviceProp p{};
    ASSERT_RT_OK(rtGetDeviceProperties(&p, device()));
    auto attr = [&](rtDeviceAttr a) {
        int v = -12345;
        EXPECT_RT_OK(rtDeviceGetAttribute(&v, a, device()));
        return v;
    };
    EXPECT_EQ(attr(RT_DEV_ATTR_MAX_THREADS_PER_BLOCK), p.max_threads_per_block);
    EXPECT_EQ(attr(RT_DEV_ATTR_MAX_BLOCK_DIM_X), p.max_block_size[0]);
    EXPECT_EQ(attr(RT_DEV_ATTR_MAX_BLOCK_DIM_Z), p.max_block_size[2]);
    EXPECT_EQ(attr(RT_DEV_ATTR_MAX_GRID_DIM_X), p.max_grid_size[0]);
    EXPECT_EQ(attr(RT_DEV_ATTR_MAX_GRID_DIM_Y), p.max_grid_size[1]);
    EXPECT_EQ(attr(RT_DEV_ATTR_MULTIPROCESSOR_COUNT), p.compute_units);
    EXPECT_EQ(attr(RT_DEV_ATTR_MAX_SHARED_MEMORY_PER_BLOCK), static_cast<int>(p.local_memory_per_group));
    EXPECT_EQ(attr(RT_DEV_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), static_cast<int>(p.max_local_memory_per_group));
    EXPECT_GE(p.max_local_memory_per_group, p.local_memory_per_group);
    EXPECT_EQ(attr(RT_DEV_ATTR_WARP_SIZE), p.subgroup_size);
    EXPECT_EQ(attr(RT_DEV_ATTR_L2_CACHE_SIZE), p.l2_cache_bytes);
    EXPECT_EQ(attr(RT_DEV_ATTR_COMPUTE_CAPABILITY_MAJOR), p.compute_capability_major);
    EXPECT_EQ(attr(RT_DEV_ATTR_MANAGED_MEMORY), p.managed_memory);
    EXPECT_EQ(attr(RT_DEV_ATTR_UNIFIED_ADDRESSING), 1);
    EXPECT_GE(p.subgroup_size, 1);
    if (backend_of(device()) == "cpu") {
        EXPECT_EQ(p.subgroup_size, 1);
        EXPECT_EQ(attr(RT_DEV_ATTR_INTEGRATED), 1);
        EXPECT_EQ(attr(RT_DEV_ATTR_STREAM_PRIORITIES_SUPPORTED), 1);
        EXPECT_EQ(p.managed_memory, 1);
    }
}

TEST_P(DeviceAttributes, UuidIsStableAndDistinct) {
    rtDeviceProp a{}, b{};
    ASSERT_RT_OK(rtGetDeviceProperties(&a, device()));
    ASSERT_RT_OK(rtGetDeviceProperties(&b, device()));
    EXPECT_EQ(std::memcmp(a.uuid, b.uuid, 16), 0);
    unsigned char zero[16] = {};
    EXPECT_NE(std::memcmp(a.uuid, zero, 16), 0);
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    for (int other = 0; other < n; ++other) {
        if (other == device()) continue;
        rtDeviceProp o{};
        ASSERT_RT_OK(rtGetDeviceProperties(&o, other));
        EXPECT_NE(std::memcmp(a.uuid, o.uuid, 16), 0) << "devices " << device() << " and " << other;
    }
}

TEST_P(DeviceAttributes, BadArgumentsRefused) {
    int v = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDeviceGetAttribute(nullptr, RT_DEV_ATTR_WARP_SIZE, device()));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDeviceGetAttribute(&v, static_cast<rtDeviceAttr>(9999), device()));
    EXPECT_TRUE(contains(last_message(), "attr 9999"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtDeviceGetAttribute(&v, RT_DEV_ATTR_WARP_SIZE, 1000));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtDeviceGetAttribute(&v, RT_DEV_ATTR_WARP_SIZE, -1));
}
RT_INSTANTIATE_DEVICE_TEST(DeviceAttributes);

TEST(ErrorCodes, NewCodesHaveNames) {
    EXPECT_STREQ(rtGetErrorName(RT_ERROR_NOT_INITIALIZED), "RT_ERROR_NOT_INITIALIZED");
    EXPECT_STREQ(rtGetErrorName(RT_ERROR_DEVICE_LOST), "RT_ERROR_DEVICE_LOST");
    EXPECT_EQ(static_cast<int>(RT_ERROR_NOT_INITIALIZED), 22);
    EXPECT_EQ(static_cast<int>(RT_ERROR_DEVICE_LOST), 23);
    EXPECT_STRNE(rtGetErrorString(RT_ERROR_DEVICE_LOST), rtGetErrorString(static_cast<rtError_t>(9998)));
}

}  // namespace
