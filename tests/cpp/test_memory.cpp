// test_memory.cpp — rtMalloc/rtFree/rtMallocHost/rtFreeHost/rtMemGetInfo: allocation registry, accounting, rejected frees.
#include "test_util.hpp"

#include <cstdint>

namespace {

using rt_test::DevBuf;

class Memory : public rt_test::DeviceTest {};

TEST_P(Memory, MallocGivesAlignedDistinctUsableMemory) {
    constexpr int kN = 16;
    void* p[kN] = {};
    const size_t sizes[kN] = {1, 2, 3, 255, 256, 257, 4095, 4096, 4097, 65536, 1 << 20, 7, 100, 1000, 10000, 3 << 20};
    for (int i = 0; i < kN; ++i) {
        ASSERT_RT_OK(rtMalloc(&p[i], sizes[i])) << sizes[i] << " bytes";
        ASSERT_NE(p[i], nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p[i]) % 256, 0u) << sizes[i] << " bytes: not 256-byte aligned";
    }
    // No two allocations overlap.
    for (int i = 0; i < kN; ++i)
        for (int j = i + 1; j < kN; ++j) {
            auto a = reinterpret_cast<uintptr_t>(p[i]), b = reinterpret_cast<uintptr_t>(p[j]);
            EXPECT_TRUE(a + sizes[i] <= b || b + sizes[j] <= a) << "allocations " << i << " and " << j << " overlap";
        }
    // Every byte is usable: fill each with its own pattern, read all back.
    for (int i = 0; i < kN; ++i) {
        auto src = rt_test::pattern(sizes[i], static_cast<uint32_t>(i));
        ASSERT_RT_OK(rtMemcpy(p[i], src.data(), sizes[i], RT_MEMCPY_HOST_TO_DEVICE));
    }
    for (int i = 0; i < kN; ++i) {
        auto want = rt_test::pattern(sizes[i], static_cast<uint32_t>(i));
        std::vector<unsigned char> got(sizes[i]);
        ASSERT_RT_OK(rtMemcpy(got.data(), p[i], sizes[i], RT_MEMCPY_DEVICE_TO_HOST));
        EXPECT_EQ(rt_test::first_mismatch(got.data(), want.data(), sizes[i]), -1) << "allocation " << i;
    }
    for (auto q : p) EXPECT_RT_OK(rtFree(q));
}

TEST_P(Memory, MallocZeroGivesNullAndSucceeds) {
    void* p = reinterpret_cast<void*>(0x1);
    ASSERT_RT_OK(rtMalloc(&p, 0));
    EXPECT_EQ(p, nullptr);
}

TEST_P(Memory, NullOutPointerIsInvalidValue) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMalloc(nullptr, 16));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMallocHost(nullptr, 16));
}

TEST_P(Memory, ImpossibleSizeIsOutOfMemoryNamingTheSize) {
    void* p = reinterpret_cast<void*>(0x1);
    const size_t huge = SIZE_MAX - 4095;  // also guards against size + alignment overflowing
    ASSERT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMalloc(&p, huge));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), std::to_string(huge)));
    size_t free_b = 0, total_b = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_b, &total_b));
    const size_t over = total_b + 1;
    ASSERT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMalloc(&p, over));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), std::to_string(over)));
    // A failed allocation takes nothing.
    size_t free_after = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_after, &total_b));
    EXPECT_EQ(free_after, free_b);
}

TEST_P(Memory, FreeNullIsANoOp) {
    EXPECT_RT_OK(rtFree(nullptr));
    EXPECT_RT_OK(rtFreeHost(nullptr));
}

TEST_P(Memory, DoubleFreeIsInvalidValue) {
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 1024));
    ASSERT_RT_OK(rtFree(p));
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(p));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), rt_test::ptr_text(p)));
}

TEST_P(Memory, InteriorPointerFreeIsInvalidValueAndKeepsTheAllocation) {
    DevBuf b(4096);
    ASSERT_NE(b.get(), nullptr);
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(b.get() + 256));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), rt_test::ptr_text(b.get() + 256)));
    // The allocation is still alive and whole.
    auto src = rt_test::pattern(4096, 7);
    ASSERT_RT_OK(rtMemcpy(b.get(), src.data(), 4096, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtFree(b.release()));
}

TEST_P(Memory, NeverAllocatedPointersAreInvalidValue) {
    int on_stack = 0;
    std::vector<char> on_heap(64);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(&on_stack));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(on_heap.data()));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(reinterpret_cast<void*>(0x1000)));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeHost(&on_stack));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeHost(on_heap.data()));
}

TEST_P(Memory, FreeAndFreeHostRejectEachOthersKind) {
    void* host = nullptr;
    void* dev = nullptr;
    ASSERT_RT_OK(rtMallocHost(&host, 4096));
    ASSERT_RT_OK(rtMalloc(&dev, 4096));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(host));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), rt_test::ptr_text(host)));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeHost(dev));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), rt_test::ptr_text(dev)));
    // Both survived the rejected frees.
    EXPECT_RT_OK(rtFreeHost(host));
    EXPECT_RT_OK(rtFree(dev));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeHost(host));  // double free of pinned memory
}

TEST_P(Memory, PinnedHostMemoryIsHostAccessible) {
    void* h = nullptr;
    const size_t n = (1 << 20) + 3;
    ASSERT_RT_OK(rtMallocHost(&h, n));
    ASSERT_NE(h, nullptr);
    rt_test::fill_pattern(h, n, 11);  // plain host stores
    auto want = rt_test::pattern(n, 11);
    EXPECT_EQ(rt_test::first_mismatch(h, want.data(), n), -1);
    EXPECT_RT_OK(rtFreeHost(h));
}

TEST_P(Memory, MallocHostZeroGivesNull) {
    void* h = reinterpret_cast<void*>(0x1);
    ASSERT_RT_OK(rtMallocHost(&h, 0));
    EXPECT_EQ(h, nullptr);
}

TEST_P(Memory, MemGetInfoTracksAllocations) {
    size_t free0 = 0, total0 = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free0, &total0));
    ASSERT_GT(total0, 0u);
    ASSERT_LE(free0, total0);
    const size_t n = 8u << 20;
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, n));
    size_t free1 = 0, total1 = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free1, &total1));
    EXPECT_EQ(total1, total0);
    EXPECT_LE(free1 + n, free0) << "free dropped by less than the allocated size";
    ASSERT_RT_OK(rtFree(p));
    size_t free2 = 0, total2 = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free2, &total2));
    EXPECT_EQ(free2, free0) << "free did not come back after rtFree";
}

TEST_P(Memory, MemGetInfoIsPerDevice) {
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    std::vector<size_t> before(static_cast<size_t>(n));
    size_t total = 0;
    for (int d = 0; d < n; ++d) {
        ASSERT_RT_OK(rtSetDevice(d));
        ASSERT_RT_OK(rtMemGetInfo(&before[static_cast<size_t>(d)], &total));
    }
    ASSERT_RT_OK(rtSetDevice(device()));
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 4u << 20));
    for (int d = 0; d < n; ++d) {
        size_t f = 0;
        ASSERT_RT_OK(rtSetDevice(d));
        ASSERT_RT_OK(rtMemGetInfo(&f, &total));
        if (d == device())
            EXPECT_LE(f + (4u << 20), before[static_cast<size_t>(d)]);
        else
            EXPECT_EQ(f, before[static_cast<size_t>(d)]) << "an allocation on device " << device()
                                                         << " was charged to device " << d;
    }
    ASSERT_RT_OK(rtSetDevice(device()));
    ASSERT_RT_OK(rtFree(p));
}

TEST_P(Memory, MemGetInfoNullArgumentsAreInvalidValue) {
    size_t x = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemGetInfo(nullptr, &x));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemGetInfo(&x, nullptr));
}

TEST_P(Memory, FreeOfMemoryInUseIsDeferredUntilTheWorkCompletes) {
    // rtFree returns at once; queued work using the buffer still sees valid memory, and the memory goes back to
    // the system (reserved bytes drop) once that work has run.
    const size_t n = 1 << 20;
    void* d = nullptr;
    ASSERT_RT_OK(rtMalloc(&d, n));
    // Pinned host memory: on cuda a copy with pageable memory is synchronous (docs/cuda.md) and would block here,
    // behind the gate.
    rt_test::HostBuf src(n), out(n);
    ASSERT_RT_OK(src.status());
    ASSERT_RT_OK(out.status());
    rt_test::fill_pattern(src.get(), n, 3);
    std::memset(out.get(), 0, n);
    rt_test::StreamGuard s;
    ASSERT_RT_OK(s.status());
    rt_test::Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtMemcpyAsync(d, src.get(), n, RT_MEMCPY_HOST_TO_DEVICE, s));
    ASSERT_RT_OK(rtMemcpyAsync(out.get(), d, n, RT_MEMCPY_DEVICE_TO_HOST, s));
    rtMemStats before{}, during{}, after{};
    ASSERT_RT_OK(rtMemGetStats(&before));
    ASSERT_RT_OK(rtFree(d));  // the stream is blocked: this must not wait for it
    ASSERT_RT_OK(rtMemGetStats(&during));
    EXPECT_EQ(during.allocated_bytes + n, before.allocated_bytes);
    EXPECT_EQ(during.reserved_bytes, before.reserved_bytes) << "returned while queued work still uses it";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(d));  // already freed, as far as the caller is concerned
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(rt_test::first_mismatch(out.get(), src.get(), n), -1);
    ASSERT_RT_OK(rtMemGetStats(&after));
    EXPECT_EQ(after.reserved_bytes + n, before.reserved_bytes);
}

TEST_P(Memory, AllocationFromAnotherDeviceCanBeFreedHere) {
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    for (int other = 0; other < n; ++other) {
        ASSERT_RT_OK(rtSetDevice(other));
        void* p = nullptr;
        ASSERT_RT_OK(rtMalloc(&p, 1000));
        ASSERT_RT_OK(rtSetDevice(device()));
        EXPECT_RT_OK(rtFree(p)) << "allocated on device " << other;
    }
}

TEST_P(Memory, ConcurrentAllocFreeFromManyThreads) {
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            if (rtSetDevice(device()) != RT_SUCCESS) {
                ++failures;
                return;
            }
            for (int i = 0; i < 300; ++i) {
                void* p = nullptr;
                size_t sz = 64 + static_cast<size_t>((i * 37 + t * 101) % 5000);
                if (rtMalloc(&p, sz) != RT_SUCCESS || p == nullptr) {
                    ++failures;
                    continue;
                }
                if (rtFree(p) != RT_SUCCESS) ++failures;
            }
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
}

RT_INSTANTIATE_DEVICE_TEST(Memory);

} // namespace
