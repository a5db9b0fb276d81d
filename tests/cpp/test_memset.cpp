// test_memset.cpp — rtMemset / rtMemsetAsync: values, offsets, large split fills, bounds and operand errors.
#include "test_util.hpp"

namespace {

using rt_test::contains;
using rt_test::DevBuf;
using rt_test::last_message;
using rt_test::ptr_text;

class Memset : public ::testing::TestWithParam<std::tuple<int, bool>> {
protected:
    void SetUp() override {
        ASSERT_RT_OK(rtSetDevice(std::get<0>(GetParam())));
        if (async()) {
            ASSERT_RT_OK(rtStreamCreate(&stream_));
        }
    }
    void TearDown() override {
        if (stream_) {
            EXPECT_RT_OK(rtStreamDestroy(stream_));
        }
    }
    bool async() const { return std::get<1>(GetParam()); }
    /// Fills in this test's mode, waiting for completion in the async mode.
    rtError_t fill(void* p, int v, size_t n) {
        if (!async()) return rtMemset(p, v, n);
        rtError_t e = rtMemsetAsync(p, v, n, stream_);
        return e != RT_SUCCESS ? e : rtStreamSynchronize(stream_);
    }
    rtError_t issue(void* p, int v, size_t n) { return async() ? rtMemsetAsync(p, v, n, stream_) : rtMemset(p, v, n); }
    std::vector<unsigned char> read(const void* d, size_t n) {
        std::vector<unsigned char> h(n);
        EXPECT_RT_OK(rtMemcpy(h.data(), d, n, RT_MEMCPY_DEVICE_TO_HOST));
        return h;
    }
    rtStream_t stream_ = nullptr;
    rt_test::Watchdog watchdog_{std::chrono::milliseconds(45000), "memset test"};  // below the CTest TIMEOUT
};

TEST_P(Memset, FillsExactlyTheRange) {
    const size_t size = 10000;
    DevBuf d(size);
    ASSERT_NE(d.get(), nullptr);
    auto base = rt_test::pattern(size, 4);
    for (auto [off, n, v] : {std::tuple<size_t, size_t, int>{0, size, 0xAB}, {1, 1, 0x00}, {13, 4000, 0x5A},
                             {size - 3, 3, 0xFF}, {256, 256, 0x01}}) {
        ASSERT_RT_OK(rtMemcpy(d.get(), base.data(), size, RT_MEMCPY_HOST_TO_DEVICE));
        ASSERT_RT_OK(fill(d.get() + off, v, n)) << "offset " << off << " count " << n;
        auto want = base;
        std::memset(want.data() + off, v, n);
        auto got = read(d.get(), size);
        EXPECT_EQ(rt_test::first_mismatch(got.data(), want.data(), size), -1) << "offset " << off << " count " << n;
    }
}

TEST_P(Memset, ValueIsTruncatedToUnsignedChar) {
    DevBuf d(64);
    ASSERT_NE(d.get(), nullptr);
    ASSERT_RT_OK(fill(d.get(), 0x1C3, 64));
    auto got = read(d.get(), 64);
    EXPECT_EQ(std::count(got.begin(), got.end(), 0xC3), 64);
    ASSERT_RT_OK(fill(d.get(), -1, 64));
    got = read(d.get(), 64);
    EXPECT_EQ(std::count(got.begin(), got.end(), 0xFF), 64);
}

TEST_P(Memset, LargeFillTakesTheSplitPath) {
    const size_t size = (64u << 20) + 4097;
    DevBuf d(size);
    ASSERT_NE(d.get(), nullptr);
    ASSERT_RT_OK(fill(d.get(), 0, size));
    ASSERT_RT_OK(fill(d.get() + 1, 0x77, size - 2));
    auto got = read(d.get(), size);
    EXPECT_EQ(got.front(), 0);
    EXPECT_EQ(got.back(), 0);
    EXPECT_EQ(static_cast<size_t>(std::count(got.begin() + 1, got.end() - 1, 0x77)), size - 2);
}

TEST_P(Memset, CountZeroIsANoOp) {
    DevBuf d(16);
    ASSERT_NE(d.get(), nullptr);
    ASSERT_RT_OK(fill(d.get(), 1, 16));
    EXPECT_RT_OK(fill(d.get(), 2, 0));
    auto got = read(d.get(), 16);
    EXPECT_EQ(std::count(got.begin(), got.end(), 1), 16);
}

TEST_P(Memset, OverrunIsInvalidValueAndWritesNothing) {
    DevBuf d(1000);
    ASSERT_NE(d.get(), nullptr);
    ASSERT_RT_OK(fill(d.get(), 0, 1000));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(d.get(), 9, 1001));
    std::string m = last_message();
    EXPECT_TRUE(contains(m, ptr_text(d.get())));
    EXPECT_TRUE(contains(m, "1001"));
    EXPECT_TRUE(contains(m, "1000"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(d.get() + 900, 9, 101));
    m = last_message();
    EXPECT_TRUE(contains(m, ptr_text(d.get() + 900)));
    EXPECT_TRUE(contains(m, "101"));
    EXPECT_TRUE(contains(m, "100"));
    if (stream_) {
        ASSERT_RT_OK(rtStreamSynchronize(stream_));
    }
    auto got = read(d.get(), 1000);
    EXPECT_EQ(std::count(got.begin(), got.end(), 0), 1000) << "a rejected memset wrote bytes";
    EXPECT_RT_OK(fill(d.get() + 900, 9, 100));  // exactly what is left: fine
}

TEST_P(Memset, HostMemoryIsInvalidValue) {
    std::vector<unsigned char> h(64, 3);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(h.data(), 0, 64));
    EXPECT_TRUE(contains(last_message(), ptr_text(h.data())));
    rt_test::HostBuf pinned(64);
    ASSERT_RT_OK(pinned.status());
    std::memset(pinned.get(), 3, 64);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(pinned.get(), 0, 64));
    EXPECT_TRUE(contains(last_message(), ptr_text(pinned.get())));
    if (stream_) {
        ASSERT_RT_OK(rtStreamSynchronize(stream_));
    }
    EXPECT_EQ(std::count(h.begin(), h.end(), 3), 64);
    EXPECT_EQ(std::count(pinned.get(), pinned.get() + 64, 3), 64);
}

TEST_P(Memset, FreedAndNullPointersAreInvalidValue) {
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 256));
    ASSERT_RT_OK(rtFree(p));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(p, 0, 16));
    EXPECT_TRUE(contains(last_message(), ptr_text(p)));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(nullptr, 0, 16));
}

TEST_P(Memset, OrderedWithCopiesOnTheStream) {
    if (!async()) {
        DevBuf d(128);
        ASSERT_NE(d.get(), nullptr);
        ASSERT_RT_OK(rtMemset(d.get(), 0x11, 128));
        auto got = read(d.get(), 128);  // a synchronous memset has landed when it returns
        EXPECT_EQ(std::count(got.begin(), got.end(), 0x11), 128);
        return;
    }
    DevBuf d(128);
    ASSERT_NE(d.get(), nullptr);
    std::vector<unsigned char> a(128), b(128), c(128);
    ASSERT_RT_OK(rtMemsetAsync(d.get(), 0x11, 128, stream_));
    ASSERT_RT_OK(rtMemcpyAsync(a.data(), d.get(), 128, RT_MEMCPY_DEVICE_TO_HOST, stream_));
    ASSERT_RT_OK(rtMemsetAsync(d.get() + 64, 0x22, 64, stream_));
    ASSERT_RT_OK(rtMemcpyAsync(b.data(), d.get(), 128, RT_MEMCPY_DEVICE_TO_HOST, stream_));
    ASSERT_RT_OK(rtMemsetAsync(d.get(), 0x33, 128, stream_));
    ASSERT_RT_OK(rtMemcpyAsync(c.data(), d.get(), 128, RT_MEMCPY_DEVICE_TO_HOST, stream_));
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_EQ(std::count(a.begin(), a.end(), 0x11), 128);
    EXPECT_EQ(std::count(b.begin(), b.begin() + 64, 0x11), 64);
    EXPECT_EQ(std::count(b.begin() + 64, b.end(), 0x22), 64);
    EXPECT_EQ(std::count(c.begin(), c.end(), 0x33), 128);
}

INSTANTIATE_TEST_SUITE_P(AllDevices, Memset,
                         ::testing::Combine(::testing::ValuesIn(rt_test::device_indices()), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, bool>>& i) {
                             return "dev" + std::to_string(std::get<0>(i.param)) +
                                    (std::get<1>(i.param) ? "_async" : "_sync");
                         });

TEST(MemsetAsync, GarbageStreamIsInvalidHandle) {
    rt_test::DevBuf d(16);
    ASSERT_NE(d.get(), nullptr);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMemsetAsync(d.get(), 0, 16, rt_test::garbage_handle<rtStream_t>()));
}

TEST(MemsetAsync, DefaultStream) {
    rt_test::DevBuf d(4096);
    ASSERT_NE(d.get(), nullptr);
    ASSERT_RT_OK(rtMemsetAsync(d.get(), 0x42, 4096, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    std::vector<unsigned char> h(4096);
    ASSERT_RT_OK(rtMemcpy(h.data(), d.get(), 4096, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(std::count(h.begin(), h.end(), 0x42), 4096);
}

} // namespace
