// test_memory_guard.cpp — cpu device memory lives in runtime-owned mappings: an overrun traps on a guard page or stays in a redzone, never in the host's heap.
#include "test_util.hpp"

#include <fstream>
#include <sstream>

using namespace rt_test;

namespace {

const char* const kSource = R"rtsrc(
// Writes value to out[0..n): past the end of out when n exceeds its element count.
RT_KERNEL void fill_n(float* out, uint64_t n, float value) {
    size_t i = get_global_id(0);
    if (i < n) out[i] = value;
}
)rtsrc";

bool is_cpu(int device) {
    rtDeviceProp p{};
    return rtGetDeviceProperties(&p, device) == RT_SUCCESS && std::strcmp(p.backend, "cpu") == 0;
}

/// The [heap] mapping of this process (the malloc heap grown by brk), or {0, 0} if it has none.
std::pair<uintptr_t, uintptr_t> malloc_heap() {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        if (line.find("[heap]") == std::string::npos) continue;
        std::istringstream in(line);
        uintptr_t lo = 0, hi = 0;
        char dash = 0;
        in >> std::hex >> lo >> dash >> hi;
        return {lo, hi};
    }
    return {0, 0};
}

class MemoryGuard : public DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        if (HasFatalFailure()) return;
        if (!is_cpu(device())) GTEST_SKIP() << "where cpu device memory lives";
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kSource, nullptr));
        ASSERT_RT_OK(rtModuleGetFunction(&fill_, module_, "fill_n"));
    }
    void TearDown() override {
        if (module_) rtModuleUnload(module_);
        DeviceTest::TearDown();
    }
    /// fill_n(p, n, value) over n items rounded up to groups of 256, on `s`.
    void launch_fill(rtStream_t s, void* p, uint64_t n, float value) {
        void* args[] = {&p, &n, &value};
        const unsigned groups = static_cast<unsigned>((n + 255) / 256);
        ASSERT_RT_OK(rtLaunchKernel(fill_, rtDim3{groups, 1, 1}, rtDim3{256, 1, 1}, args, 0, s));
    }
    rtModule_t module_ = nullptr;
    rtFunction_t fill_ = nullptr;
};

TEST_P(MemoryGuard, DeviceMemoryIsNotInTheMallocHeap) {
    // Sizes on both sides of the slab/mapping boundary, a kernel's typical small buffers among them.
    for (size_t bytes : {size_t{1}, size_t{40}, size_t{4000}, size_t{4120}, size_t{32767}, size_t{32768},
                         size_t{1} << 20}) {
        DevBuf b(bytes);
        ASSERT_TRUE(b.get()) << bytes;
        const auto heap = malloc_heap();
        const auto p = reinterpret_cast<uintptr_t>(b.get());
        EXPECT_FALSE(p >= heap.first && p < heap.second) << bytes << " bytes at " << b.get() << " lie in [heap]";
        EXPECT_EQ(p % 256, 0u) << bytes;
        ASSERT_RT_OK(rtMemset(b.get(), 0x5a, bytes));  // the whole allocation is usable
    }
}

TEST_P(MemoryGuard, SmallOverrunLeavesTheNeighbourUnchanged) {
    // Overruns shorter than a small block's class rounding and redzone: 10 elements written by 64 items, and the
    // README's 1,030 elements by 1,280 items (its kernel launched the CUDA way), each with a neighbour allocated
    // right after it.
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    for (auto [elements, items] : {std::pair<size_t, uint64_t>{10, 64}, {1030, 1280}}) {
        DevBuf small(elements * sizeof(float)), neighbour(elements * sizeof(float));
        ASSERT_RT_OK(rtMemset(neighbour.get(), 0, neighbour.size()));
        launch_fill(s, small.get(), items, 7.0f);
        ASSERT_RT_OK(rtStreamSynchronize(s));  // the overrun stays inside the small block's slot
        std::vector<float> r(elements, -1.0f);
        ASSERT_RT_OK(rtMemcpy(r.data(), neighbour.get(), neighbour.size(), RT_MEMCPY_DEVICE_TO_HOST));
        for (size_t i = 0; i < elements; ++i) ASSERT_EQ(r[i], 0.0f) << "neighbour element " << i << " changed";
    }
}

TEST_P(MemoryGuard, OverrunOfALargeAllocationTrapsAndNamesTheKernel) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    const size_t elements = 100000;  // 400,000 bytes: a mapping of its own, a guard page after it
    DevBuf big(elements * sizeof(float));
    launch_fill(s, big.get(), elements + 4096, 1.0f);  // 16 KiB past the end
    ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    const std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "fill_n")) << msg;
    EXPECT_TRUE(contains(msg, "SIGSEGV")) << msg;
    // The stream and the memory stay usable.
    launch_fill(s, big.get(), elements, 2.0f);
    ASSERT_RT_OK(rtStreamSynchronize(s));
    float last = 0;
    ASSERT_RT_OK(rtMemcpy(&last, big.get() + (elements - 1) * sizeof(float), sizeof last, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(last, 2.0f);
}

TEST_P(MemoryGuard, ManySmallAllocationsAreDistinctAndReused) {
    // Slots of one class never overlap, and freed ones are handed out again (the slab does not grow without bound).
    std::vector<void*> ptrs(300);
    for (void*& p : ptrs) ASSERT_RT_OK(rtMalloc(&p, 100));
    std::vector<void*> sorted = ptrs;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 1; i < sorted.size(); ++i)
        EXPECT_GE(static_cast<char*>(sorted[i]) - static_cast<char*>(sorted[i - 1]), 100 + 256) << "a redzone apart";
    void* first = ptrs.back();
    ASSERT_RT_OK(rtFree(first));
    ASSERT_RT_OK(rtDeviceSynchronize());
    void* again = nullptr;
    ASSERT_RT_OK(rtMalloc(&again, 100));
    EXPECT_EQ(again, first) << "the freed slot is reused";
    ptrs.back() = again;
    for (void* p : ptrs) ASSERT_RT_OK(rtFree(p));
}

RT_INSTANTIATE_DEVICE_TEST(MemoryGuard);

}  // namespace
