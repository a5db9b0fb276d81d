// test_memcpy.cpp — rtMemcpy / rtMemcpyAsync: every kind, DEFAULT inference, offsets, ≥64 MiB split copies, every rejected case.
#include "test_util.hpp"

namespace {

using rt_test::contains;
using rt_test::DevBuf;
using rt_test::HostBuf;
using rt_test::last_message;
using rt_test::ptr_text;
using rt_test::StreamGuard;

/// How a copy is issued: synchronously, async on a created stream, async on the default stream.
enum class Mode { Sync, AsyncStream, AsyncDefault };

struct Param {
    int device;
    Mode mode;
};

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
    const char* m = info.param.mode == Mode::Sync ? "sync" : info.param.mode == Mode::AsyncStream ? "async" : "asyncDefault";
    return "dev" + std::to_string(info.param.device) + "_" + m;
}

std::vector<Param> all_params() {
    std::vector<Param> v;
    for (int d : rt_test::device_indices())
        for (Mode m : {Mode::Sync, Mode::AsyncStream, Mode::AsyncDefault}) v.push_back({d, m});
    return v;
}

class Memcpy : public ::testing::TestWithParam<Param> {
protected:
    void SetUp() override {
        ASSERT_RT_OK(rtSetDevice(GetParam().device));
        if (GetParam().mode == Mode::AsyncStream) {
            ASSERT_RT_OK(rtStreamCreate(&stream_));
        }
    }
    void TearDown() override {
        if (stream_) {
            EXPECT_RT_OK(rtStreamDestroy(stream_));
        }
    }
    /// Issues the copy in this test's mode and, for async modes, waits for it.
    rtError_t copy(void* dst, const void* src, size_t n, rtMemcpyKind kind) {
        switch (GetParam().mode) {
        case Mode::Sync: return rtMemcpy(dst, src, n, kind);
        case Mode::AsyncStream:
        case Mode::AsyncDefault: {
            rtError_t e = rtMemcpyAsync(dst, src, n, kind, stream_);
            if (e != RT_SUCCESS) return e;
            return rtStreamSynchronize(stream_);
        }
        }
        return RT_ERROR_UNKNOWN;
    }
    /// Issues the copy without waiting (validation errors must be immediate in every mode).
    rtError_t issue(void* dst, const void* src, size_t n, rtMemcpyKind kind) {
        if (GetParam().mode == Mode::Sync) return rtMemcpy(dst, src, n, kind);
        return rtMemcpyAsync(dst, src, n, kind, stream_);
    }

    /// Host → device (H2D or DEFAULT) → device (D2D or DEFAULT) → host (D2H or DEFAULT), checking bytes.
    void round_trip(size_t n, size_t dev_off, size_t host_off, bool inferred, uint32_t seed) {
        DevBuf a(n + dev_off), b(n + dev_off);
        ASSERT_NE(a.get(), nullptr);
        ASSERT_NE(b.get(), nullptr);
        std::vector<unsigned char> src(n + host_off), dst(n + host_off, 0);
        rt_test::fill_pattern(src.data() + host_off, n, seed);
        auto k = [inferred](rtMemcpyKind explicit_kind) { return inferred ? RT_MEMCPY_DEFAULT : explicit_kind; };
        ASSERT_RT_OK(copy(a.get() + dev_off, src.data() + host_off, n, k(RT_MEMCPY_HOST_TO_DEVICE)));
        ASSERT_RT_OK(copy(b.get() + dev_off, a.get() + dev_off, n, k(RT_MEMCPY_DEVICE_TO_DEVICE)));
        ASSERT_RT_OK(copy(dst.data() + host_off, b.get() + dev_off, n, k(RT_MEMCPY_DEVICE_TO_HOST)));
        EXPECT_EQ(rt_test::first_mismatch(dst.data() + host_off, src.data() + host_off, n), -1)
            << n << " bytes, device offset " << dev_off << ", host offset " << host_off;
        for (size_t i = 0; i < host_off; ++i) ASSERT_EQ(dst[i], 0) << "wrote before the destination";
    }

    rtStream_t stream_ = nullptr;  // null in Sync / AsyncDefault modes (= the default stream)
    rt_test::Watchdog watchdog_{std::chrono::milliseconds(45000), "memcpy test"};  // below the CTest TIMEOUT
};

TEST_P(Memcpy, RoundTripSmallSizesExplicitKinds) {
    for (size_t n : {1u, 2u, 3u, 7u, 64u, 255u, 256u, 257u, 4096u, 65537u}) round_trip(n, 0, 0, false, static_cast<uint32_t>(n));
}

TEST_P(Memcpy, RoundTripInferredKinds) {
    for (size_t n : {1u, 100u, 4096u, 1u << 20}) round_trip(n, 0, 0, true, static_cast<uint32_t>(n) + 1);
}

TEST_P(Memcpy, RoundTripAtOffsetsWithinAllocations) {
    for (size_t off : {1u, 3u, 255u, 4097u}) round_trip(1000, off, off % 7, false, static_cast<uint32_t>(off));
}

TEST_P(Memcpy, LargeCopiesTakeTheSplitPath) {
    // Many 4 MiB pieces, past the streaming threshold (16 MiB: 64 MiB, or 16 under the sanitizers), and not a
    // multiple of any plausible chunk size, so chunk edges and the tail are checked.
    const size_t n = rt_test::scaled(64u << 20, 16u << 20) + 12345;
    round_trip(n, 0, 0, false, 99);
}

TEST_P(Memcpy, LargeCopyAtAnOffsetInferred) {
    const size_t n = rt_test::scaled(64u << 20, 16u << 20) + 777;
    round_trip(n, 4096 + 3, 5, true, 123);
}

TEST_P(Memcpy, PinnedHostOperands) {
    const size_t n = (1u << 20) + 17;
    HostBuf src(n), dst(n);
    ASSERT_RT_OK(src.status());
    ASSERT_RT_OK(dst.status());
    rt_test::fill_pattern(src.get(), n, 42);
    std::memset(dst.get(), 0, n);
    DevBuf d(n);
    ASSERT_NE(d.get(), nullptr);
    ASSERT_RT_OK(copy(d.get(), src.get(), n, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(copy(dst.get(), d.get(), n, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(rt_test::first_mismatch(dst.get(), src.get(), n), -1);
    std::memset(dst.get(), 0, n);
    ASSERT_RT_OK(copy(d.get(), src.get(), n, RT_MEMCPY_DEFAULT));
    ASSERT_RT_OK(copy(dst.get(), d.get(), n, RT_MEMCPY_DEFAULT));
    EXPECT_EQ(rt_test::first_mismatch(dst.get(), src.get(), n), -1);
}

TEST_P(Memcpy, HostToHostUnregisteredAndPinned) {
    const size_t n = 10000;
    auto a = rt_test::pattern(n, 8);
    std::vector<unsigned char> b(n, 0);
    ASSERT_RT_OK(copy(b.data(), a.data(), n, RT_MEMCPY_HOST_TO_HOST));
    EXPECT_EQ(b, a);
    HostBuf p(n);
    ASSERT_RT_OK(p.status());
    ASSERT_RT_OK(copy(p.get(), a.data(), n, RT_MEMCPY_HOST_TO_HOST));
    EXPECT_EQ(rt_test::first_mismatch(p.get(), a.data(), n), -1);
    std::vector<unsigned char> c(n, 0);
    ASSERT_RT_OK(copy(c.data(), p.get(), n, RT_MEMCPY_DEFAULT));  // inferred H2H
    EXPECT_EQ(c, a);
}

TEST_P(Memcpy, DeviceToDeviceWithinOneAllocationDisjointRanges) {
    const size_t n = 8192;
    DevBuf d(2 * n);
    ASSERT_NE(d.get(), nullptr);
    auto src = rt_test::pattern(n, 77);
    ASSERT_RT_OK(copy(d.get(), src.data(), n, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(copy(d.get() + n, d.get(), n, RT_MEMCPY_DEVICE_TO_DEVICE));
    std::vector<unsigned char> got(n);
    ASSERT_RT_OK(copy(got.data(), d.get() + n, n, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(got, src);
}

TEST_P(Memcpy, DeviceToDeviceAcrossDevices) {
    int count = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&count));
    const size_t n = 50000;
    auto src = rt_test::pattern(n, 5);
    DevBuf here(n);
    ASSERT_NE(here.get(), nullptr);
    ASSERT_RT_OK(copy(here.get(), src.data(), n, RT_MEMCPY_HOST_TO_DEVICE));
    for (int other = 0; other < count; ++other) {
        ASSERT_RT_OK(rtSetDevice(other));
        void* there = nullptr;
        ASSERT_RT_OK(rtMalloc(&there, n));
        ASSERT_RT_OK(rtSetDevice(GetParam().device));
        ASSERT_RT_OK(copy(there, here.get(), n, RT_MEMCPY_DEVICE_TO_DEVICE)) << "to device " << other;
        std::vector<unsigned char> got(n);
        ASSERT_RT_OK(copy(got.data(), there, n, RT_MEMCPY_DEFAULT));
        EXPECT_EQ(got, src) << "device " << other;
        EXPECT_RT_OK(rtFree(there));
    }
}

TEST_P(Memcpy, CountZeroIsANoOp) {
    DevBuf d(16);
    ASSERT_NE(d.get(), nullptr);
    unsigned char h[16] = {1, 2, 3};
    for (rtMemcpyKind k : {RT_MEMCPY_HOST_TO_HOST, RT_MEMCPY_HOST_TO_DEVICE, RT_MEMCPY_DEVICE_TO_HOST,
                           RT_MEMCPY_DEVICE_TO_DEVICE, RT_MEMCPY_DEFAULT}) {
        void* dst = (k == RT_MEMCPY_HOST_TO_DEVICE || k == RT_MEMCPY_DEVICE_TO_DEVICE) ? static_cast<void*>(d.get()) : h;
        const void* src = (k == RT_MEMCPY_DEVICE_TO_HOST || k == RT_MEMCPY_DEVICE_TO_DEVICE) ? static_cast<void*>(d.get()) : h;
        EXPECT_RT_OK(copy(dst, src, 0, k)) << "kind " << k;
    }
    EXPECT_EQ(h[0], 1);
}

TEST_P(Memcpy, AsyncCopiesOnOneStreamRunInOrder) {
    if (GetParam().mode == Mode::Sync) {
        // Sync mode: consecutive copies are trivially ordered; check that each has landed on return.
        DevBuf d(4);
        ASSERT_NE(d.get(), nullptr);
        for (uint32_t i = 0; i < 50; ++i) {
            ASSERT_RT_OK(rtMemcpy(d.get(), &i, 4, RT_MEMCPY_HOST_TO_DEVICE));
            uint32_t back = ~i;
            ASSERT_RT_OK(rtMemcpy(&back, d.get(), 4, RT_MEMCPY_DEVICE_TO_HOST));
            ASSERT_EQ(back, i);
        }
        return;
    }
    // Async: N writes of different values into one device word, each followed by a read into its
    // own host slot; in-order execution makes slot i hold value i.
    constexpr int kN = 200;
    DevBuf d(sizeof(uint32_t));
    ASSERT_NE(d.get(), nullptr);
    std::vector<uint32_t> values(kN), slots(kN, 0xFFFFFFFFu);
    for (int i = 0; i < kN; ++i) values[static_cast<size_t>(i)] = static_cast<uint32_t>(i * 7 + 1);
    for (int i = 0; i < kN; ++i) {
        ASSERT_RT_OK(rtMemcpyAsync(d.get(), &values[static_cast<size_t>(i)], 4, RT_MEMCPY_HOST_TO_DEVICE, stream_));
        ASSERT_RT_OK(rtMemcpyAsync(&slots[static_cast<size_t>(i)], d.get(), 4, RT_MEMCPY_DEVICE_TO_HOST, stream_));
    }
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    for (int i = 0; i < kN; ++i) EXPECT_EQ(slots[static_cast<size_t>(i)], values[static_cast<size_t>(i)]) << i;
}

TEST_P(Memcpy, AsyncCopyDoesNotRunBeforePrecedingWork) {
    if (GetParam().mode == Mode::Sync) {
        // A synchronous copy is not held up by a stuck non-blocking stream (blocking ones: test_stream's legacy tests).
        StreamGuard s(RT_STREAM_NON_BLOCKING);
        ASSERT_RT_OK(s.status());
        rt_test::Gate gate;
        ASSERT_RT_OK(gate.launch(s));
        DevBuf d(64);
        ASSERT_NE(d.get(), nullptr);
        auto src = rt_test::pattern(64, 1);
        ASSERT_RT_OK(rtMemcpy(d.get(), src.data(), 64, RT_MEMCPY_HOST_TO_DEVICE));
        EXPECT_FALSE(gate.left()) << "the gate opened by itself: the synchronous copy waited 20 s for it";
        gate.open();
        ASSERT_RT_OK(rtStreamSynchronize(s));
        return;
    }
    // Pinned host memory on every backend; pageable memory too where pageable copies run in stream order (cpu). On
    // cuda the driver reads a pageable source at the call and returns from a copy into pageable memory only once it
    // has completed (docs/cuda.md): behind the gate that would block the thread that opens it.
    auto check = [&](unsigned char* src, unsigned char* got, const char* what) {
        SCOPED_TRACE(what);
        DevBuf d(1024);
        ASSERT_NE(d.get(), nullptr);
        rt_test::fill_pattern(src, 1024, 2);
        std::memset(got, 0, 1024);
        rt_test::Gate gate;
        ASSERT_RT_OK(gate.launch(stream_));
        ASSERT_RT_OK(rtMemcpyAsync(d.get(), src, 1024, RT_MEMCPY_HOST_TO_DEVICE, stream_));
        ASSERT_RT_OK(rtMemcpyAsync(got, d.get(), 1024, RT_MEMCPY_DEVICE_TO_HOST, stream_));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        EXPECT_EQ(std::count(got, got + 1024, 0), 1024) << "copy ran before the blocked work";
        gate.open();
        ASSERT_RT_OK(rtStreamSynchronize(stream_));
        EXPECT_FALSE(gate.timed_out()) << "the copies were queued only once the gate had timed out";
        EXPECT_EQ(rt_test::first_mismatch(got, src, 1024), -1);
    };
    HostBuf src(1024), got(1024);
    ASSERT_RT_OK(src.status());
    ASSERT_RT_OK(got.status());
    check(src.get(), got.get(), "pinned host memory");
    if (rt_test::pageable_copies_are_stream_ordered(GetParam().device)) {
        std::vector<unsigned char> psrc(1024), pgot(1024);
        check(psrc.data(), pgot.data(), "pageable host memory");
    }
}

// ------------------------------------------------------------------ rejected copies

TEST_P(Memcpy, KindContradictingOperandsIsInvalidValueNamingThePointer) {
    DevBuf d(4096);
    ASSERT_NE(d.get(), nullptr);
    HostBuf pinned(4096);
    ASSERT_RT_OK(pinned.status());
    std::vector<unsigned char> h(4096, 0);
    struct Case {
        const char* what;
        void* dst;
        const void* src;
        rtMemcpyKind kind;
        const void* culprit;
    };
    const Case cases[] = {
        {"H2D, dst unregistered host", h.data(), h.data(), RT_MEMCPY_HOST_TO_DEVICE, h.data()},
        {"H2D, dst pinned host", pinned.get(), h.data(), RT_MEMCPY_HOST_TO_DEVICE, pinned.get()},
        {"D2H, src unregistered host", h.data(), h.data(), RT_MEMCPY_DEVICE_TO_HOST, h.data()},
        {"D2H, src pinned host", h.data(), pinned.get(), RT_MEMCPY_DEVICE_TO_HOST, pinned.get()},
        {"D2D, dst host", h.data(), d.get(), RT_MEMCPY_DEVICE_TO_DEVICE, h.data()},
        {"D2D, src host", d.get(), h.data(), RT_MEMCPY_DEVICE_TO_DEVICE, h.data()},
        {"D2D, src pinned", d.get(), pinned.get(), RT_MEMCPY_DEVICE_TO_DEVICE, pinned.get()},
        {"H2H, dst device", d.get(), h.data(), RT_MEMCPY_HOST_TO_HOST, d.get()},
        {"H2H, src device", h.data(), d.get(), RT_MEMCPY_HOST_TO_HOST, d.get()},
    };
    for (const auto& c : cases) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(c.dst, c.src, 16, c.kind)) << c.what;
        EXPECT_TRUE(contains(last_message(), ptr_text(c.culprit))) << c.what;
    }
    // Nothing was half-done: the host buffer is still all zeros.
    EXPECT_EQ(std::count(h.begin(), h.end(), 0), 4096);
    if (stream_) {  // no deferred error either
        ASSERT_RT_OK(rtStreamSynchronize(stream_));
    }
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
}

TEST_P(Memcpy, DeviceOperandOnTheHostSideOfTheKindIsInvalidValue) {
    // SPEC §3: a direction that contradicts the operands is an error. H2D reading from device memory
    // or D2H writing into device memory contradicts the stated direction just as much.
    DevBuf d(4096);
    ASSERT_NE(d.get(), nullptr);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(d.get(), d.get() + 2048, 16, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_TRUE(contains(last_message(), ptr_text(d.get() + 2048)));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(d.get(), d.get() + 2048, 16, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_TRUE(contains(last_message(), ptr_text(d.get())));
}

TEST_P(Memcpy, OverrunIsInvalidValueNamingPointerAskedAndAvailable) {
    const size_t size = 1000;
    DevBuf d(size), e(size);
    ASSERT_NE(d.get(), nullptr);
    ASSERT_NE(e.get(), nullptr);
    std::vector<unsigned char> h(4 * size, 0);
    struct Case {
        const char* what;
        void* dst;
        const void* src;
        size_t count;
        rtMemcpyKind kind;
        const void* culprit;
        size_t available;
    };
    const Case cases[] = {
        {"H2D past the end", d.get(), h.data(), size + 1, RT_MEMCPY_HOST_TO_DEVICE, d.get(), size},
        {"H2D from an offset", d.get() + 600, h.data(), 401, RT_MEMCPY_HOST_TO_DEVICE, d.get() + 600, 400},
        {"D2H past the end", h.data(), d.get() + 10, size, RT_MEMCPY_DEVICE_TO_HOST, d.get() + 10, size - 10},
        {"D2D dst overrun", d.get() + 999, e.get(), 2, RT_MEMCPY_DEVICE_TO_DEVICE, d.get() + 999, 1},
        {"D2D src overrun", d.get(), e.get() + 500, 501, RT_MEMCPY_DEVICE_TO_DEVICE, e.get() + 500, 500},
        {"DEFAULT H2D overrun", d.get() + 1, h.data(), size, RT_MEMCPY_DEFAULT, d.get() + 1, size - 1},
        {"DEFAULT D2H overrun", h.data(), d.get(), 3 * size, RT_MEMCPY_DEFAULT, d.get(), size},
    };
    for (const auto& c : cases) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(c.dst, c.src, c.count, c.kind)) << c.what;
        std::string m = last_message();
        EXPECT_TRUE(contains(m, ptr_text(c.culprit))) << c.what;
        EXPECT_TRUE(contains(m, std::to_string(c.count))) << c.what << ": bytes asked";
        EXPECT_TRUE(contains(m, std::to_string(c.available))) << c.what << ": bytes available";
    }
    EXPECT_EQ(std::count(h.begin(), h.end(), 0), static_cast<long>(h.size())) << "a rejected copy wrote bytes";
    // Exactly the bytes available is fine.
    EXPECT_RT_OK(copy(d.get() + 600, h.data(), 400, RT_MEMCPY_HOST_TO_DEVICE));
}

TEST_P(Memcpy, PinnedHostOverrunIsInvalidValue) {
    // Pinned host memory is registered too: copying past its end is caught like a device overrun.
    HostBuf pinned(1000);
    ASSERT_RT_OK(pinned.status());
    DevBuf d(4096);
    ASSERT_NE(d.get(), nullptr);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(pinned.get(), d.get(), 1001, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_TRUE(contains(last_message(), ptr_text(pinned.get())));
    EXPECT_TRUE(contains(last_message(), "1001"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(d.get(), pinned.get() + 500, 501, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_TRUE(contains(last_message(), ptr_text(pinned.get() + 500)));
    EXPECT_RT_OK(copy(d.get(), pinned.get() + 500, 500, RT_MEMCPY_HOST_TO_DEVICE));
}

TEST_P(Memcpy, OnePastTheEndIsNotInsideTheAllocation) {
    // A registry lookup must not attribute the address just past an allocation to it.
    const size_t size = 4096;
    DevBuf d(size);
    ASSERT_NE(d.get(), nullptr);
    unsigned char h[8] = {};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(d.get() + size, h, 1, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_TRUE(contains(last_message(), ptr_text(d.get() + size)));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(h, d.get() + size, 1, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_RT_OK(copy(d.get() + size - 1, h, 1, RT_MEMCPY_HOST_TO_DEVICE));  // the last byte is inside
}

TEST_P(Memcpy, InteriorPointerOfFreedAllocationIsInvalidValue) {
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 8192));
    ASSERT_RT_OK(rtFree(p));
    unsigned char h[64] = {};
    void* inner = static_cast<unsigned char*>(p) + 100;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(inner, h, 64, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_TRUE(contains(last_message(), ptr_text(inner)));
}

TEST_P(Memcpy, OverrunIntoAnAdjacentAllocationIsRejected) {
    // Consecutive allocations may be contiguous; the bytes after one belong to the next, not to it.
    std::vector<std::unique_ptr<DevBuf>> bufs;
    for (int i = 0; i < 8; ++i) {
        bufs.push_back(std::make_unique<DevBuf>(256));
        ASSERT_NE(bufs.back()->get(), nullptr);
    }
    std::vector<unsigned char> h(512, 0);
    for (auto& b : bufs) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(b->get(), h.data(), 512, RT_MEMCPY_HOST_TO_DEVICE));
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(b->get() + 128, b->get(), 256, RT_MEMCPY_DEVICE_TO_DEVICE));
    }
}

TEST_P(Memcpy, FreedPointerIsInvalidValueNamingIt) {
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 4096));
    ASSERT_RT_OK(rtFree(p));
    std::vector<unsigned char> h(64, 0);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(p, h.data(), 64, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_TRUE(contains(last_message(), ptr_text(p)));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(h.data(), p, 64, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_TRUE(contains(last_message(), ptr_text(p)));
    DevBuf live(64);
    ASSERT_NE(live.get(), nullptr);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(live.get(), p, 64, RT_MEMCPY_DEVICE_TO_DEVICE));
    EXPECT_TRUE(contains(last_message(), ptr_text(p)));
}

TEST_P(Memcpy, InvalidKindIsInvalidValue) {
    DevBuf d(64);
    ASSERT_NE(d.get(), nullptr);
    std::vector<unsigned char> h(64);
    for (int k : {5, 7, 100}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(d.get(), h.data(), 64, static_cast<rtMemcpyKind>(k))) << k;
    }
}

TEST_P(Memcpy, NullOperandsAreInvalidValue) {
    DevBuf d(64);
    ASSERT_NE(d.get(), nullptr);
    std::vector<unsigned char> h(64);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(nullptr, h.data(), 64, RT_MEMCPY_HOST_TO_HOST));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(h.data(), nullptr, 64, RT_MEMCPY_HOST_TO_HOST));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(nullptr, h.data(), 64, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(h.data(), nullptr, 64, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(nullptr, d.get(), 64, RT_MEMCPY_DEFAULT));
}

TEST_P(Memcpy, RejectedCopyLeavesStreamClean) {
    // Validation errors are synchronous; the stream carries no deferred error afterwards.
    DevBuf d(100);
    ASSERT_NE(d.get(), nullptr);
    std::vector<unsigned char> h(200);
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, issue(d.get(), h.data(), 200, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_RT_OK(rtStreamQuery(stream_));
    EXPECT_RT_OK(copy(d.get(), h.data(), 100, RT_MEMCPY_HOST_TO_DEVICE));
}

INSTANTIATE_TEST_SUITE_P(AllDevices, Memcpy, ::testing::ValuesIn(all_params()), param_name);

TEST(MemcpyAsync, GarbageStreamIsInvalidHandle) {
    std::vector<unsigned char> a(16), b(16);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE,
                    rtMemcpyAsync(a.data(), b.data(), 16, RT_MEMCPY_HOST_TO_HOST, rt_test::garbage_handle<rtStream_t>()));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtStreamDestroy(s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMemcpyAsync(a.data(), b.data(), 16, RT_MEMCPY_HOST_TO_HOST, s));
}

} // namespace
