// test_sizes.cpp — sizes and end addresses that wrap are refused (C: RT_ERROR_INVALID_VALUE naming the value; C++: runtime::Error).
#include "test_util.hpp"

#include <runtime/runtime.hpp>

#include <cstdint>

namespace {

TEST(Sizes, HostRegisterOfAWrappingRangeIsRefused) {
    std::vector<unsigned char> host(4096);
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostRegister(host.data(), SIZE_MAX, RT_HOST_REGISTER_DEFAULT));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), std::to_string(SIZE_MAX)));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "wraps"));
    // Nothing was registered: the pointer is not registered memory, and a proper registration still works.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostUnregister(host.data()));
    ASSERT_RT_OK(rtHostRegister(host.data(), host.size(), RT_HOST_REGISTER_DEFAULT));
    EXPECT_RT_OK(rtHostUnregister(host.data()));
}

TEST(Sizes, HostRegisterEndingPastTheAddressSpaceIsRefused) {
    void* near_end = reinterpret_cast<void*>(UINTPTR_MAX - 4095);
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostRegister(near_end, 8192, RT_HOST_REGISTER_DEFAULT));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "8192"));
}

TEST(Sizes, HostOperandOfACopyThatWrapsIsRefused) {
    // Host memory the runtime does not know is bounded by nothing but the address space.
    std::vector<unsigned char> a(64), b(64);
    const size_t count = SIZE_MAX - 16;
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy(a.data(), b.data(), count, RT_MEMCPY_HOST_TO_HOST));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), std::to_string(count)));
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy(a.data(), b.data(), count, RT_MEMCPY_DEFAULT));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "destination"));
    EXPECT_RT_OK(rtMemcpy(a.data(), b.data(), a.size(), RT_MEMCPY_HOST_TO_HOST));
}

TEST(Sizes, DeviceBufferElementCountThatOverflowsIsRefused) {
    // count * sizeof(double) wraps to 8: unchecked, this allocated 8 bytes for 2^61 + 1 elements.
    const size_t count = SIZE_MAX / sizeof(double) + 2;
    try {
        runtime::DeviceBuffer<double> b(count);
        ADD_FAILURE() << "DeviceBuffer<double>(" << count << ") allocated " << b.bytes() << " bytes";
    } catch (const runtime::Error& e) {
        EXPECT_EQ(e.code(), RT_ERROR_INVALID_VALUE);
        EXPECT_TRUE(rt_test::contains(e.what(), std::to_string(count))) << e.what();
    }
}

TEST(Sizes, PinnedBufferElementCountThatOverflowsIsRefused) {
    const size_t count = SIZE_MAX / sizeof(uint32_t) + 3;
    try {
        runtime::PinnedBuffer<uint32_t> b(count);
        ADD_FAILURE() << "PinnedBuffer<uint32_t>(" << count << ") allocated " << b.bytes() << " bytes";
    } catch (const runtime::Error& e) {
        EXPECT_EQ(e.code(), RT_ERROR_INVALID_VALUE);
        EXPECT_TRUE(rt_test::contains(e.what(), std::to_string(count))) << e.what();
    }
}

TEST(Sizes, ImpossibleButNonWrappingSizesStayOutOfMemory) {
    // Sizes that do not wrap are a capacity question, answered as before.
    EXPECT_THROW(runtime::DeviceBuffer<double>(SIZE_MAX / sizeof(double)), runtime::Error);
    void* p = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMalloc(&p, SIZE_MAX));
}

}  // namespace
