// test_memory_pool.cpp — memory strategies: pool allocator, stream-ordered reuse, caching, zero copy, statistics (run with RUNTIME_CPU_MEMORY=64M).
#include "test_util.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <random>

namespace {

using rt_test::DevBuf;
using rt_test::Gate;
using rt_test::HostBuf;
using rt_test::StreamGuard;

constexpr size_t kKiB = size_t(1) << 10;
constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kGiB = size_t(1) << 30;

size_t round256(size_t n) { return (n + 255) / 256 * 256; }

rtMemStats mem_stats() {
    rtMemStats s;
    std::memset(&s, 0xAB, sizeof s);
    EXPECT_RT_OK(rtMemGetStats(&s));
    return s;
}

size_t device_free() {
    size_t f = 0, t = 0;
    EXPECT_RT_OK(rtMemGetInfo(&f, &t));
    return f;
}

/// Resident bytes of the pages in [p, p + bytes) (mincore). Exact for one region, unlike the process's
/// resident set, which sanitizer shadow memory and other threads move by tens of MiB at any moment.
size_t resident_in(const void* p, size_t bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in_core((bytes + page - 1) / page);
    if (mincore(const_cast<void*>(p), bytes, in_core.data()) != 0) {
        ADD_FAILURE() << "mincore failed: [" << p << ", +" << bytes << ") is not one mapped range";
        return 0;
    }
    size_t pages = 0;
    for (unsigned char c : in_core) pages += c & 1u;
    return pages * page;
}

/// Resident set size of this process in bytes (/proc/self/statm, second field).
size_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    size_t pages_total = 0, pages_resident = 0;
    statm >> pages_total >> pages_resident;
    return pages_resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

/// Device memory from rtMallocAsync/rtMalloc freed at scope exit with rtFree (unless released).
class PoolPtr {
public:
    PoolPtr() = default;
    ~PoolPtr() {
        if (p_) rtFree(p_);
    }
    PoolPtr(const PoolPtr&) = delete;
    PoolPtr& operator=(const PoolPtr&) = delete;
    void** out() { return &p_; }
    void* get() const { return p_; }
    unsigned char* bytes() const { return static_cast<unsigned char*>(p_); }
    void* release() {
        void* p = p_;
        p_ = nullptr;
        return p;
    }

private:
    void* p_ = nullptr;
};

/// Every test starts and ends with the default strategies: no pool, no reuse, no zero copy.
class MemoryPoolTest : public rt_test::DeviceTest {
protected:
    void SetUp() override {
        rt_test::DeviceTest::SetUp();
        ASSERT_RT_OK(rtEnableZeroCopy(0));
        ASSERT_RT_OK(rtEnableMemoryReuse(0));
        ASSERT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
    }
    void TearDown() override {
        EXPECT_RT_OK(rtSetDevice(device()));
        EXPECT_RT_OK(rtDeviceSynchronize());
        EXPECT_RT_OK(rtEnableZeroCopy(0));
        EXPECT_RT_OK(rtEnableMemoryReuse(0));
        EXPECT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
        rtMemStats s = mem_stats();
        EXPECT_EQ(s.num_live_allocations, 0u) << "the test leaked device memory";
        EXPECT_EQ(s.allocated_bytes, 0u);
        EXPECT_EQ(s.reserved_bytes, 0u) << "no pool and no live allocation: nothing may stay reserved";
    }
};

// ---------------------------------------------------------------- enabling and argument errors

TEST_P(MemoryPoolTest, EnableRejectsBadArguments) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEnablePoolAllocator(64 * kMiB, 0, RT_POOL_DEFAULT));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "block_size"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEnablePoolAllocator(64 * kMiB, 3 * 4096, RT_POOL_DEFAULT))
        << "block size not a power of two";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEnablePoolAllocator(64 * kMiB, 2048, RT_POOL_DEFAULT))
        << "block size below a page";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEnablePoolAllocator(1 * kMiB, 2 * kMiB, RT_POOL_DEFAULT))
        << "block larger than the pool";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEnablePoolAllocator(64 * kMiB, 2 * kMiB, 0x2u));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "flags"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEnablePoolAllocator(64 * kMiB, 2 * kMiB, 0x80000000u));
    // Nothing half-enabled by the refusals.
    EXPECT_EQ(mem_stats().pool_size, 0u);
    // An address space no machine has: refused, not wrapped round to a tiny pool.
    rtError_t huge = rtEnablePoolAllocator(SIZE_MAX - 100, 2 * kMiB, RT_POOL_DEFAULT);
    EXPECT_TRUE(huge == RT_ERROR_OUT_OF_MEMORY || huge == RT_ERROR_INVALID_VALUE)
        << "rtEnablePoolAllocator(SIZE_MAX - 100) returned " << rtGetErrorName(huge)
        << ", pool_size now " << mem_stats().pool_size;
    ASSERT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
    EXPECT_EQ(mem_stats().pool_size, 0u);
}

TEST_P(MemoryPoolTest, EnableDisableAndPoolSize) {
    ASSERT_RT_OK(rtEnablePoolAllocator(32 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    rtMemStats s = mem_stats();
    EXPECT_EQ(s.pool_size, 32 * kMiB);
    EXPECT_EQ(s.largest_free_block, 32 * kMiB);
    EXPECT_EQ(s.reserved_bytes, 0u) << "enabling commits nothing";
    // A pool size that is not a multiple of the block is rounded up to whole blocks.
    ASSERT_RT_OK(rtEnablePoolAllocator(10 * kMiB + 1, 1 * kMiB, RT_POOL_GROW));
    s = mem_stats();
    EXPECT_GE(s.pool_size, 10 * kMiB + 1);
    EXPECT_EQ(s.pool_size % kMiB, 0u);
    ASSERT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
    EXPECT_EQ(mem_stats().pool_size, 0u);
    EXPECT_EQ(mem_stats().largest_free_block, 0u);
    // Reuse without a pool enables a default pool (the device's capacity).
    ASSERT_RT_OK(rtEnableMemoryReuse(1));
    size_t free_b = 0, total_b = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_b, &total_b));
    EXPECT_GE(mem_stats().pool_size, total_b);
    ASSERT_RT_OK(rtEnableMemoryReuse(0));
}

TEST_P(MemoryPoolTest, ReEnablingWhileAllocationsLiveIsRefused) {
    ASSERT_RT_OK(rtEnablePoolAllocator(32 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    void* a = nullptr;
    void* b = nullptr;
    ASSERT_RT_OK(rtMalloc(&a, 1000));
    ASSERT_RT_OK(rtMallocAsync(&b, 5000, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEnablePoolAllocator(64 * kMiB, 2 * kMiB, RT_POOL_DEFAULT));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "live")) << rt_test::last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT))
        << "disabling the pool under live allocations";
    EXPECT_EQ(mem_stats().pool_size, 32 * kMiB) << "the refused call changed the pool";
    ASSERT_RT_OK(rtFree(a));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEnablePoolAllocator(64 * kMiB, 2 * kMiB, RT_POOL_DEFAULT));
    ASSERT_RT_OK(rtFreeAsync(b, s));
    // The stream-ordered free is still pending (or already done): either way no allocation is live.
    ASSERT_RT_OK(rtEnablePoolAllocator(64 * kMiB, 2 * kMiB, RT_POOL_DEFAULT));
    EXPECT_EQ(mem_stats().pool_size, 64 * kMiB);
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

TEST_P(MemoryPoolTest, AsyncAllocationArgumentErrors) {
    ASSERT_RT_OK(rtEnablePoolAllocator(32 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMallocAsync(nullptr, 100, s));
    void* p = reinterpret_cast<void*>(1);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMallocAsync(&p, 100, rt_test::garbage_handle<rtStream_t>()));
    ASSERT_RT_OK(rtMallocAsync(&p, 0, s));
    EXPECT_EQ(p, nullptr) << "size 0 gives NULL";
    EXPECT_RT_OK(rtFreeAsync(nullptr, s)) << "freeing NULL is a no-op";
    int host = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeAsync(&host, s));
    ASSERT_RT_OK(rtMallocAsync(&p, 4096, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtFreeAsync(p, rt_test::garbage_handle<rtStream_t>()));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeAsync(static_cast<char*>(p) + 256, s)) << "inside, not the start";
    ASSERT_RT_OK(rtFreeAsync(p, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeAsync(p, s)) << "double free";
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "double free")) << rt_test::last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemGetStats(nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

TEST_P(MemoryPoolTest, AllocationLargerThanThePoolIsOutOfMemoryUnlessItGrows) {
    ASSERT_RT_OK(rtEnablePoolAllocator(8 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    void* p = nullptr;
    ASSERT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMalloc(&p, 16 * kMiB));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), std::to_string(16 * kMiB)));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "RT_POOL_GROW")) << rt_test::last_message();

    ASSERT_RT_OK(rtEnablePoolAllocator(8 * kMiB, 1 * kMiB, RT_POOL_GROW));
    rtMemStats s0 = mem_stats();
    PoolPtr in_pool, a, b;
    ASSERT_RT_OK(rtMalloc(in_pool.out(), 6 * kMiB));
    ASSERT_RT_OK(rtMalloc(a.out(), 16 * kMiB)) << "RT_POOL_GROW serves it outside the pool";
    ASSERT_RT_OK(rtMalloc(b.out(), 4 * kMiB)) << "does not fit beside the 6 MiB: served outside the pool";
    rtMemStats s1 = mem_stats();
    EXPECT_EQ(s1.allocated_bytes - s0.allocated_bytes, 26 * kMiB);
    EXPECT_EQ(s1.reserved_bytes - s0.reserved_bytes, 6 * kMiB + 16 * kMiB + 4 * kMiB)
        << "reserved = committed pool blocks (6 MiB) + direct allocations (20 MiB)";
    // The grown allocations are real memory: write and read back.
    std::vector<unsigned char> pat = rt_test::pattern(16 * kMiB, 7), back(16 * kMiB);
    ASSERT_RT_OK(rtMemcpy(a.get(), pat.data(), pat.size(), RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtMemcpy(back.data(), a.get(), back.size(), RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(rt_test::first_mismatch(pat.data(), back.data(), pat.size()), -1);
    ASSERT_RT_OK(rtFree(a.release()));
    ASSERT_RT_OK(rtFree(b.release()));
    ASSERT_RT_OK(rtFree(in_pool.release()));
    EXPECT_EQ(mem_stats().reserved_bytes, 0u) << "reuse off: everything returned";
}

// ---------------------------------------------------------------- random traces: no overlap, ever

enum class TraceMode { pool_reuse, pool_no_reuse, no_pool };

/// Replays a random trace (fixed seed) over several streams, mixing rtMallocAsync/rtFreeAsync and
/// rtMalloc/rtFree: every allocation is 256-byte aligned, no two live allocations intersect, and each is
/// fully written (a pattern copied in on its stream) and read back before its free; the read-backs are
/// checked once the streams have run them, so a range handed out while queued work still used it shows.
void run_trace(TraceMode mode, size_t steps, uint32_t seed) {
    if (mode != TraceMode::no_pool) {
        ASSERT_RT_OK(rtEnablePoolAllocator(1 * kGiB, 2 * kMiB, RT_POOL_DEFAULT));
    }
    ASSERT_RT_OK(rtEnableMemoryReuse(mode == TraceMode::pool_reuse ? 1 : 0));
    if (mode == TraceMode::no_pool) {
        ASSERT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
    }

    constexpr int kStreams = 4;  // three created streams and the default stream
    std::vector<std::unique_ptr<StreamGuard>> guards;
    std::vector<rtStream_t> streams{nullptr};
    for (int i = 1; i < kStreams; ++i) {
        guards.push_back(std::make_unique<StreamGuard>());
        ASSERT_RT_OK(guards.back()->status());
        streams.push_back(guards.back()->get());
    }
    std::vector<std::unique_ptr<rt_test::EventGuard>> events;
    for (int i = 0; i < kStreams; ++i) {
        events.push_back(std::make_unique<rt_test::EventGuard>(RT_EVENT_DISABLE_TIMING));
        ASSERT_RT_OK(events.back()->status());
    }

    // One immutable source of random bytes: allocation i copies in the window starting at its own offset.
    constexpr size_t kSource = 16 * kMiB;
    const std::vector<unsigned char> source = rt_test::pattern(kSource, seed);

    struct Live {
        size_t size;
        int stream;
        size_t src_offset;
        int id;
    };
    struct Check {
        std::vector<unsigned char> back;
        size_t src_offset;
        uintptr_t address;
        int id;
    };
    std::map<uintptr_t, Live> live;   // address -> allocation
    std::vector<uintptr_t> live_list; // for random choice
    std::vector<Check> checks;
    size_t live_bytes = 0, check_bytes = 0, total_allocated = 0;
    int next_id = 0;
    static int one_ms = 1;

    std::mt19937_64 rng(seed);
    auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
    auto chance = [&](double p) { return uniform(0, 1) < p; };
    auto pick = [&](size_t n) { return static_cast<size_t>(std::uniform_int_distribution<size_t>(0, n - 1)(rng)); };
    auto random_size = [&]() -> size_t {
        // Mostly small, a tenth up to 8 MiB; log-uniform within each range.
        double lo = 0, hi = std::log(64.0 * 1024);
        if (chance(0.1)) lo = hi, hi = std::log(8.0 * 1024 * 1024);
        return std::max<size_t>(1, static_cast<size_t>(std::exp(uniform(lo, hi))));
    };
    auto verify = [&]() {
        ASSERT_RT_OK(rtDeviceSynchronize());
        for (const Check& c : checks) {
            long long bad = rt_test::first_mismatch(c.back.data(), source.data() + c.src_offset, c.back.size());
            ASSERT_EQ(bad, -1) << "allocation #" << c.id << " at " << rt_test::ptr_text(reinterpret_cast<void*>(c.address))
                               << " of " << c.back.size() << " bytes was overwritten at byte " << bad
                               << " while its queued work still used it";
        }
        checks.clear();
        check_bytes = 0;
    };
    auto free_one = [&]() {
        size_t idx = pick(live_list.size());
        uintptr_t addr = live_list[idx];
        live_list[idx] = live_list.back();
        live_list.pop_back();
        Live l = live.at(addr);
        live.erase(addr);
        live_bytes -= l.size;
        rtStream_t s = streams[static_cast<size_t>(l.stream)];
        void* p = reinterpret_cast<void*>(addr);
        Check c{std::vector<unsigned char>(l.size), l.src_offset, addr, l.id};
        ASSERT_RT_OK(rtMemcpyAsync(c.back.data(), p, l.size, RT_MEMCPY_DEVICE_TO_HOST, s));
        check_bytes += l.size;
        checks.push_back(std::move(c));
        double r = uniform(0, 1);
        if (r < 0.55) {
            ASSERT_RT_OK(rtFreeAsync(p, s));
        } else if (r < 0.7) {
            // Freed on another stream that was ordered after the owner's work by an event.
            int other = static_cast<int>(pick(kStreams));
            ASSERT_RT_OK(rtEventRecord(*events[static_cast<size_t>(l.stream)], s));
            ASSERT_RT_OK(rtStreamWaitEvent(streams[static_cast<size_t>(other)], *events[static_cast<size_t>(l.stream)]));
            ASSERT_RT_OK(rtFreeAsync(p, streams[static_cast<size_t>(other)]));
        } else {
            ASSERT_RT_OK(rtFree(p));
        }
    };

    for (size_t step = 0; step < steps; ++step) {
        bool allocate = live_list.empty() || (live_list.size() < 48 && chance(0.55));
        if (allocate) {
            size_t n = random_size();
            if (live_bytes + n > 24 * kMiB) {
                free_one();
                if (::testing::Test::HasFatalFailure()) return;
                continue;
            }
            int si = static_cast<int>(pick(kStreams));
            rtStream_t s = streams[static_cast<size_t>(si)];
            void* p = nullptr;
            if (chance(0.7)) {
                ASSERT_RT_OK(rtMallocAsync(&p, n, s)) << "step " << step << " size " << n;
            } else {
                ASSERT_RT_OK(rtMalloc(&p, n)) << "step " << step << " size " << n;
            }
            ASSERT_NE(p, nullptr);
            auto a = reinterpret_cast<uintptr_t>(p);
            ASSERT_EQ(a % 256, 0u) << "allocation of " << n << " bytes not 256-byte aligned";
            // No intersection with any live allocation (each taken as its 256-byte rounded extent).
            auto next = live.lower_bound(a);
            if (next != live.end()) {
                ASSERT_LE(a + round256(n), next->first)
                    << "step " << step << ": new [" << rt_test::ptr_text(p) << ", +" << n << ") overlaps live "
                    << rt_test::ptr_text(reinterpret_cast<void*>(next->first)) << " of " << next->second.size;
            }
            if (next != live.begin()) {
                auto prev = std::prev(next);
                ASSERT_LE(prev->first + round256(prev->second.size), a)
                    << "step " << step << ": new " << rt_test::ptr_text(p) << " of " << n << " bytes overlaps live "
                    << rt_test::ptr_text(reinterpret_cast<void*>(prev->first)) << " of " << prev->second.size;
            }
            size_t off = (static_cast<size_t>(next_id) * 4099 * 64) % (kSource - n + 1);
            if (chance(0.15)) {
                ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::sleep_ms, &one_ms));  // lag the stream
            }
            ASSERT_RT_OK(rtMemcpyAsync(p, source.data() + off, n, RT_MEMCPY_HOST_TO_DEVICE, s));
            live.emplace(a, Live{n, si, off, next_id});
            live_list.push_back(a);
            live_bytes += n;
            total_allocated += n;
            ++next_id;
        } else {
            free_one();
            if (::testing::Test::HasFatalFailure()) return;
        }
        if (check_bytes > 48 * kMiB) {
            verify();
            if (::testing::Test::HasFatalFailure()) return;
        }
    }
    while (!live_list.empty()) {
        free_one();
        if (::testing::Test::HasFatalFailure()) return;
    }
    verify();
    if (::testing::Test::HasFatalFailure()) return;
    ::testing::Test::RecordProperty("allocations", next_id);
    rtMemStats s = mem_stats();
    EXPECT_EQ(s.num_live_allocations, 0u);
    EXPECT_EQ(s.allocated_bytes, 0u);
    if (mode == TraceMode::pool_no_reuse || mode == TraceMode::no_pool) {
        ASSERT_RT_OK(rtDeviceSynchronize());
        ASSERT_RT_OK(rtMemEmptyCache());  // pending frees become free now that the streams are idle
        EXPECT_EQ(mem_stats().reserved_bytes, 0u);
    }
    (void)total_allocated;
}

TEST_P(MemoryPoolTest, RandomTracePoolWithReuseNeverOverlaps) {
    rtMemStats before = mem_stats();
    run_trace(TraceMode::pool_reuse, rt_test::scaled(4000, 500), 1234u + static_cast<uint32_t>(device()));
    rtMemStats after = mem_stats();
    EXPECT_GT(after.num_cache_hits - before.num_cache_hits, after.num_cache_misses - before.num_cache_misses)
        << "a caching pool should serve most allocations of a trace from memory it holds";
}

TEST_P(MemoryPoolTest, RandomTracePoolWithoutReuseNeverOverlaps) {
    run_trace(TraceMode::pool_no_reuse, rt_test::scaled(3000, 375), 99u + static_cast<uint32_t>(device()));
}

TEST_P(MemoryPoolTest, RandomTracePlainAllocatorNeverOverlaps) {
    run_trace(TraceMode::no_pool, rt_test::scaled(1500, 187), 7u + static_cast<uint32_t>(device()));
}

// ---------------------------------------------------------------- stream-ordered reuse

/// Block stream A with a gate; queue on A a copy of a pattern into pooled X and a read-back of X; free X
/// (rtFreeAsync on A, or rtFree) while A is still blocked; allocate the same size for stream B (or
/// stream-less) and write it. B must not receive X's range while A can still use it; A's read-back must
/// find its pattern intact.
void cross_stream_hazard(bool free_async, bool alloc_async) {
    SCOPED_TRACE(std::string(free_async ? "rtFreeAsync(X, A)" : "rtFree(X)") + " then " +
                 (alloc_async ? "rtMallocAsync(B)" : "rtMalloc"));
    constexpr size_t kSize = 1 * kMiB;
    StreamGuard a, b;
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    std::vector<unsigned char> pat = rt_test::pattern(kSize, 42), back(kSize, 0);
    void* x = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&x, kSize, a));
    Gate gate;
    ASSERT_RT_OK(gate.launch(a));
    ASSERT_RT_OK(rtMemcpyAsync(x, pat.data(), kSize, RT_MEMCPY_HOST_TO_DEVICE, a));
    ASSERT_RT_OK(rtMemcpyAsync(back.data(), x, kSize, RT_MEMCPY_DEVICE_TO_HOST, a));
    // A safety net: if the free blocked on A, the gate opens after 3 s and the test reports it.
    std::atomic<bool> freed{false};
    std::thread opener([&] {
        auto until = rt_test::Clock::now() + std::chrono::seconds(3);
        while (!freed.load() && rt_test::Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (!freed.load()) gate.open();
    });
    rtError_t fe = free_async ? rtFreeAsync(x, a) : rtFree(x);
    bool gate_was_open = gate.left();
    freed.store(true);
    opener.join();
    ASSERT_RT_OK(fe);
    EXPECT_FALSE(gate_was_open) << "freeing pooled memory blocked until the stream using it ran";

    void* y = nullptr;
    if (alloc_async) {
        ASSERT_RT_OK(rtMallocAsync(&y, kSize, b));
    } else {
        ASSERT_RT_OK(rtMalloc(&y, kSize));
    }
    EXPECT_NE(y, x) << "X was handed out while stream A, blocked, still had a copy into it queued";
    ASSERT_RT_OK(rtMemsetAsync(y, 0xEE, kSize, b));
    ASSERT_RT_OK(rtStreamSynchronize(b));  // B's write has landed while A is still blocked
    EXPECT_FALSE(gate.left()) << "the gate opened early: the hazard window was not tested";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(a));
    EXPECT_EQ(rt_test::first_mismatch(back.data(), pat.data(), kSize), -1)
        << "A's copy into X was corrupted by B's use of the same memory";
    ASSERT_RT_OK(rtFree(y));
}

TEST_P(MemoryPoolTest, FreedBlockIsNotReusedByAnotherStreamWhileInUse) {
    ASSERT_RT_OK(rtEnablePoolAllocator(64 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    for (int reuse = 0; reuse < 2; ++reuse) {
        ASSERT_RT_OK(rtEnableMemoryReuse(reuse));
        SCOPED_TRACE(reuse ? "reuse on" : "reuse off");
        for (bool free_async : {true, false})
            for (bool alloc_async : {true, false}) {
                cross_stream_hazard(free_async, alloc_async);
                if (HasFatalFailure()) return;
            }
    }
}

TEST_P(MemoryPoolTest, FreedBlockIsReusedByTheSameStreamAtOnce) {
    ASSERT_RT_OK(rtEnablePoolAllocator(64 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    ASSERT_RT_OK(rtEnableMemoryReuse(1));
    constexpr size_t kSize = 3 * kMiB + 100;
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    std::vector<unsigned char> pat1 = rt_test::pattern(kSize, 1), pat2 = rt_test::pattern(kSize, 2);
    std::vector<unsigned char> back1(kSize), back2(kSize);
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    void* x = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&x, kSize, s));
    ASSERT_RT_OK(rtMemcpyAsync(x, pat1.data(), kSize, RT_MEMCPY_HOST_TO_DEVICE, s));
    ASSERT_RT_OK(rtMemcpyAsync(back1.data(), x, kSize, RT_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_RT_OK(rtFreeAsync(x, s));
    rtMemStats s0 = mem_stats();
    void* y = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&y, kSize, s));
    EXPECT_EQ(y, x) << "stream order makes X safe for later work on the same stream: it should be reused at once";
    rtMemStats s1 = mem_stats();
    EXPECT_EQ(s1.num_cache_hits - s0.num_cache_hits, 1u);
    EXPECT_EQ(s1.num_cache_misses, s0.num_cache_misses);
    EXPECT_EQ(s1.reserved_bytes, s0.reserved_bytes);
    ASSERT_RT_OK(rtMemcpyAsync(y, pat2.data(), kSize, RT_MEMCPY_HOST_TO_DEVICE, s));
    ASSERT_RT_OK(rtMemcpyAsync(back2.data(), y, kSize, RT_MEMCPY_DEVICE_TO_HOST, s));
    EXPECT_FALSE(gate.left());
    // Meanwhile another stream asking for the same size must get other memory.
    StreamGuard other;
    ASSERT_RT_OK(other.status());
    void* z = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&z, kSize, other));
    EXPECT_NE(z, x);
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(rt_test::first_mismatch(back1.data(), pat1.data(), kSize), -1);
    EXPECT_EQ(rt_test::first_mismatch(back2.data(), pat2.data(), kSize), -1);
    ASSERT_RT_OK(rtFreeAsync(y, s));
    ASSERT_RT_OK(rtFreeAsync(z, other));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtStreamSynchronize(other));
}

TEST_P(MemoryPoolTest, FreeAsyncBecomesReusableByOthersOnceTheStreamPassesIt) {
    ASSERT_RT_OK(rtEnablePoolAllocator(16 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    ASSERT_RT_OK(rtEnableMemoryReuse(1));
    StreamGuard a, b;
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    // Fill the whole pool so that only X's range can serve the next request.
    void* x = nullptr;
    void* rest = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&x, 8 * kMiB, a));
    ASSERT_RT_OK(rtMallocAsync(&rest, 8 * kMiB, a));
    Gate gate;
    ASSERT_RT_OK(gate.launch(a));
    ASSERT_RT_OK(rtMemsetAsync(x, 1, 8 * kMiB, a));
    ASSERT_RT_OK(rtFreeAsync(x, a));
    ASSERT_RT_OK(rtStreamSynchronize(b));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(a));
    // A has passed the free: B may now have the range.
    void* y = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&y, 8 * kMiB, b)) << "the range freed on A was not released after A passed the free";
    EXPECT_EQ(y, x);
    ASSERT_RT_OK(rtFreeAsync(y, b));
    ASSERT_RT_OK(rtFreeAsync(rest, a));
    ASSERT_RT_OK(rtDeviceSynchronize());
}

TEST_P(MemoryPoolTest, OutOfRoomWaitsForPendingFreesInsteadOfFailing) {
    // The only room is a range still pending on a lagging stream: the allocation waits for it.
    ASSERT_RT_OK(rtEnablePoolAllocator(8 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    StreamGuard a, b;
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    void* x = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&x, 8 * kMiB, a));
    static int sleep_for = 50;
    ASSERT_RT_OK(rtLaunchHostFunc(a, rt_test::sleep_ms, &sleep_for));
    ASSERT_RT_OK(rtMemsetAsync(x, 3, 8 * kMiB, a));
    ASSERT_RT_OK(rtFreeAsync(x, a));
    void* y = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&y, 8 * kMiB, b));
    EXPECT_EQ(rtStreamQuery(a), RT_SUCCESS) << "X was handed to B before A ran its memset";
    ASSERT_RT_OK(rtFreeAsync(y, b));
    ASSERT_RT_OK(rtDeviceSynchronize());
}

TEST_P(MemoryPoolTest, FreeAsyncNeverBlocks) {
    // rtFreeAsync is documented "Never blocks": with a pool and without one, on a stream held by a gate.
    for (int pooled = 1; pooled >= 0; --pooled) {
        SCOPED_TRACE(pooled ? "pool" : "no pool (direct allocation)");
        if (pooled) {
            ASSERT_RT_OK(rtEnablePoolAllocator(64 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
        } else {
            ASSERT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
        }
        StreamGuard s;
        ASSERT_RT_OK(s.status());
        void* x = nullptr;
        ASSERT_RT_OK(rtMallocAsync(&x, 256 * kKiB, s));
        Gate gate;
        ASSERT_RT_OK(gate.launch(s));
        ASSERT_RT_OK(rtMemsetAsync(x, 7, 256 * kKiB, s));
        std::atomic<bool> returned{false};
        std::thread opener([&] {
            auto until = rt_test::Clock::now() + std::chrono::seconds(2);
            while (!returned.load() && rt_test::Clock::now() < until)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            gate.open();
        });
        rtError_t e = rtFreeAsync(x, s);
        bool blocked = gate.left();
        returned.store(true);
        opener.join();
        ASSERT_RT_OK(e);
        EXPECT_FALSE(blocked) << "rtFreeAsync waited for the stream's queued work (it is documented never to block)";
        ASSERT_RT_OK(rtStreamSynchronize(s));
    }
}

TEST_P(MemoryPoolTest, ConcurrentThreadsNeverShareARange) {
    // Threads allocating and freeing at once on their own streams (pool, reuse on): no range is ever
    // live twice. The live set is shared, so an overlap between threads shows too.
    ASSERT_RT_OK(rtEnablePoolAllocator(256 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    ASSERT_RT_OK(rtEnableMemoryReuse(1));
    std::mutex mutex;
    std::map<uintptr_t, size_t> live;
    std::atomic<int> failures{0};
    std::string first_failure;
    auto fail = [&](const std::string& what) {
        std::lock_guard<std::mutex> lock(mutex);
        if (failures++ == 0) first_failure = what;
    };
    auto worker = [&](int t) {
        if (rtSetDevice(device()) != RT_SUCCESS) return fail("rtSetDevice");
        rtStream_t s = nullptr;
        if (rtStreamCreate(&s) != RT_SUCCESS) return fail("rtStreamCreate");
        std::mt19937 rng(static_cast<uint32_t>(100 + t));
        std::vector<std::pair<void*, size_t>> mine;
        for (size_t i = 0, n = rt_test::scaled(3000, 400); i < n && failures.load() == 0; ++i) {
            if (mine.size() < 16 && (mine.empty() || rng() % 2)) {
                size_t n = 1 + rng() % (512 * kKiB);
                void* p = nullptr;
                rtError_t e = (rng() % 2) ? rtMallocAsync(&p, n, s) : rtMalloc(&p, n);
                if (e != RT_SUCCESS) return fail(std::string("allocation: ") + rt_test::last_message());
                auto a = reinterpret_cast<uintptr_t>(p);
                {
                    std::lock_guard<std::mutex> lock(mutex);
                    auto next = live.lower_bound(a);
                    bool overlap = next != live.end() && a + round256(n) > next->first;
                    if (next != live.begin()) {
                        auto prev = std::prev(next);
                        overlap = overlap || prev->first + round256(prev->second) > a;
                    }
                    if (overlap) {
                        if (failures++ == 0)
                            first_failure = "thread " + std::to_string(t) + " got " + rt_test::ptr_text(p) +
                                            " of " + std::to_string(n) + " bytes, overlapping a live range";
                        return;
                    }
                    live.emplace(a, n);
                }
                rtMemsetAsync(p, t, n, s);
                mine.emplace_back(p, n);
            } else {
                size_t k = rng() % mine.size();
                auto [p, n] = mine[k];
                mine[k] = mine.back();
                mine.pop_back();
                {
                    std::lock_guard<std::mutex> lock(mutex);
                    live.erase(reinterpret_cast<uintptr_t>(p));
                }
                rtError_t e = (rng() % 2) ? rtFreeAsync(p, s) : rtFree(p);
                if (e != RT_SUCCESS) return fail(std::string("free: ") + rt_test::last_message());
            }
        }
        for (auto& [p, n] : mine) {
            {
                std::lock_guard<std::mutex> lock(mutex);
                live.erase(reinterpret_cast<uintptr_t>(p));
            }
            rtFreeAsync(p, s);
        }
        rtStreamSynchronize(s);
        rtStreamDestroy(s);
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) threads.emplace_back(worker, t);
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0) << first_failure;
    rtMemStats st = mem_stats();
    EXPECT_EQ(st.num_live_allocations, 0u);
    EXPECT_EQ(st.allocated_bytes, 0u);
}

TEST_P(MemoryPoolTest, MemoryOfAnotherDeviceIsFreedToItsOwnPool) {
    int count = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&count));
    if (count < 2) GTEST_SKIP() << "needs two devices (the _2dev run)";
    const int other = (device() + 1) % count;
    ASSERT_RT_OK(rtSetDevice(other));
    ASSERT_RT_OK(rtEnablePoolAllocator(16 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 3 * kMiB));
    rtMemStats other_before = mem_stats();
    ASSERT_RT_OK(rtSetDevice(device()));
    rtMemStats mine_before = mem_stats();
    EXPECT_EQ(mine_before.allocated_bytes, 0u) << "the other device's allocation was counted here";
    ASSERT_RT_OK(rtFree(p));  // current device is not the owner
    EXPECT_EQ(mem_stats().num_frees, mine_before.num_frees);
    ASSERT_RT_OK(rtSetDevice(other));
    rtMemStats other_after = mem_stats();
    EXPECT_EQ(other_after.allocated_bytes, 0u);
    EXPECT_EQ(other_after.num_frees - other_before.num_frees, 1u);
    EXPECT_EQ(other_after.reserved_bytes, 0u);
    ASSERT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
    ASSERT_RT_OK(rtSetDevice(device()));
}

// ---------------------------------------------------------------- statistics

TEST_P(MemoryPoolTest, StatisticsAreExactWithAPool) {
    ASSERT_RT_OK(rtEnablePoolAllocator(64 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    ASSERT_RT_OK(rtEnableMemoryReuse(1));
    ASSERT_RT_OK(rtMemResetPeakStats());
    rtMemStats s0 = mem_stats();
    EXPECT_EQ(s0.allocated_bytes, 0u);
    EXPECT_EQ(s0.reserved_bytes, 0u);
    EXPECT_EQ(s0.peak_allocated_bytes, 0u);
    EXPECT_EQ(s0.peak_reserved_bytes, 0u);
    EXPECT_EQ(s0.num_live_allocations, 0u);
    EXPECT_EQ(s0.pool_size, 64 * kMiB);
    EXPECT_EQ(s0.largest_free_block, 64 * kMiB);

    const size_t na = 1000, nb = 3000, nc = 1536 * kKiB;
    void *a = nullptr, *b = nullptr, *c = nullptr;
    ASSERT_RT_OK(rtMalloc(&a, na));  // commits block 0: miss
    rtMemStats s = mem_stats();
    EXPECT_EQ(s.allocated_bytes, na);
    EXPECT_EQ(s.reserved_bytes, 1 * kMiB);
    EXPECT_EQ(s.num_allocs - s0.num_allocs, 1u);
    EXPECT_EQ(s.num_cache_misses - s0.num_cache_misses, 1u);
    EXPECT_EQ(s.num_cache_hits - s0.num_cache_hits, 0u);
    EXPECT_EQ(s.num_live_allocations, 1u);

    ASSERT_RT_OK(rtMalloc(&b, nb));  // fits in block 0: hit
    ASSERT_RT_OK(rtMalloc(&c, nc));  // at offset 4096, runs into block 1: miss
    s = mem_stats();
    EXPECT_EQ(s.allocated_bytes, na + nb + nc) << "requested bytes exactly, not rounded";
    EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
    EXPECT_EQ(s.num_allocs - s0.num_allocs, 3u);
    EXPECT_EQ(s.num_cache_hits - s0.num_cache_hits, 1u);
    EXPECT_EQ(s.num_cache_misses - s0.num_cache_misses, 2u);
    EXPECT_EQ(s.num_live_allocations, 3u);
    EXPECT_EQ(s.peak_allocated_bytes, na + nb + nc);
    EXPECT_EQ(s.peak_reserved_bytes, 2 * kMiB);
    EXPECT_EQ(s.largest_free_block, 64 * kMiB - round256(na) - round256(nb) - nc);

    ASSERT_RT_OK(rtFree(b));
    s = mem_stats();
    EXPECT_EQ(s.allocated_bytes, na + nc);
    EXPECT_EQ(s.num_frees - s0.num_frees, 1u);
    EXPECT_EQ(s.num_live_allocations, 2u);
    EXPECT_EQ(s.reserved_bytes, 2 * kMiB) << "reuse on: the block stays";
    EXPECT_EQ(s.peak_allocated_bytes, na + nb + nc);

    ASSERT_RT_OK(rtMalloc(&b, nb));  // the same size again: from the cache
    s = mem_stats();
    EXPECT_EQ(s.num_cache_hits - s0.num_cache_hits, 2u);
    EXPECT_EQ(s.num_cache_misses - s0.num_cache_misses, 2u);

    ASSERT_RT_OK(rtFree(a));
    ASSERT_RT_OK(rtFree(b));
    ASSERT_RT_OK(rtFree(c));
    s = mem_stats();
    EXPECT_EQ(s.allocated_bytes, 0u);
    EXPECT_EQ(s.num_live_allocations, 0u);
    EXPECT_EQ(s.num_allocs - s0.num_allocs, 4u);
    EXPECT_EQ(s.num_frees - s0.num_frees, 4u);
    EXPECT_EQ(s.reserved_bytes, 2 * kMiB) << "cached";
    EXPECT_EQ(s.peak_allocated_bytes, na + nb + nc);
    EXPECT_EQ(s.peak_reserved_bytes, 2 * kMiB);
    EXPECT_EQ(s.largest_free_block, 64 * kMiB) << "freed ranges coalesce";

    ASSERT_RT_OK(rtMemResetPeakStats());
    s = mem_stats();
    EXPECT_EQ(s.peak_allocated_bytes, 0u);
    EXPECT_EQ(s.peak_reserved_bytes, 2 * kMiB) << "peaks restart from the current values";

    size_t free_before = device_free();
    ASSERT_RT_OK(rtMemEmptyCache());
    s = mem_stats();
    EXPECT_EQ(s.reserved_bytes, 0u);
    EXPECT_EQ(s.peak_reserved_bytes, 2 * kMiB);
    EXPECT_EQ(device_free() - free_before, 2 * kMiB) << "the cache went back to the device";
    ASSERT_RT_OK(rtMemResetPeakStats());
    EXPECT_EQ(mem_stats().peak_reserved_bytes, 0u);
}

TEST_P(MemoryPoolTest, StatisticsAreExactWithoutAPool) {
    ASSERT_RT_OK(rtMemResetPeakStats());
    rtMemStats s0 = mem_stats();
    DevBuf a(1000), b(5 * kMiB + 3);
    ASSERT_NE(a.get(), nullptr);
    ASSERT_NE(b.get(), nullptr);
    rtMemStats s = mem_stats();
    EXPECT_EQ(s.allocated_bytes, 5 * kMiB + 1003);
    EXPECT_EQ(s.reserved_bytes, 5 * kMiB + 1003) << "direct allocations are reserved as requested";
    EXPECT_EQ(s.num_allocs - s0.num_allocs, 2u);
    EXPECT_EQ(s.num_cache_misses - s0.num_cache_misses, 2u);
    EXPECT_EQ(s.num_cache_hits - s0.num_cache_hits, 0u);
    EXPECT_EQ(s.largest_free_block, 0u);
    EXPECT_EQ(s.pool_size, 0u);
    a.reset();
    s = mem_stats();
    EXPECT_EQ(s.allocated_bytes, 5 * kMiB + 3);
    EXPECT_EQ(s.reserved_bytes, 5 * kMiB + 3);
    EXPECT_EQ(s.peak_allocated_bytes, 5 * kMiB + 1003);
    EXPECT_EQ(s.num_frees - s0.num_frees, 1u);
    b.reset();
    EXPECT_EQ(mem_stats().reserved_bytes, 0u);
    // Failed allocations are counted as such, not as allocations.
    void* p = nullptr;
    ASSERT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMalloc(&p, 1 * kGiB));
    s = mem_stats();
    EXPECT_EQ(s.num_ooms - s0.num_ooms, 1u);
    EXPECT_EQ(s.num_allocs - s0.num_allocs, 2u);
}

TEST_P(MemoryPoolTest, CacheHitsWithReuseAndMissesWithout) {
    ASSERT_RT_OK(rtEnablePoolAllocator(64 * kMiB, 2 * kMiB, RT_POOL_DEFAULT));
    for (int reuse = 1; reuse >= 0; --reuse) {
        SCOPED_TRACE(reuse ? "reuse on" : "reuse off");
        ASSERT_RT_OK(rtEnableMemoryReuse(reuse));
        rtMemStats s0 = mem_stats();
        void* p = nullptr;
        ASSERT_RT_OK(rtMalloc(&p, 4 * kMiB));
        ASSERT_RT_OK(rtFree(p));
        rtMemStats s1 = mem_stats();
        EXPECT_EQ(s1.num_cache_misses - s0.num_cache_misses, 1u);
        EXPECT_EQ(s1.reserved_bytes, reuse ? 4 * kMiB : 0u)
            << (reuse ? "cached blocks stay reserved" : "without reuse a free returns the blocks at once");
        void* q = nullptr;
        ASSERT_RT_OK(rtMalloc(&q, 4 * kMiB));
        rtMemStats s2 = mem_stats();
        EXPECT_EQ(s2.num_cache_hits - s1.num_cache_hits, reuse ? 1u : 0u);
        EXPECT_EQ(s2.num_cache_misses - s1.num_cache_misses, reuse ? 0u : 1u);
        if (reuse) {
            EXPECT_EQ(q, p) << "the cached range of the same size";
        }
        ASSERT_RT_OK(rtFree(q));
        if (reuse) {
            EXPECT_EQ(mem_stats().reserved_bytes, 4 * kMiB);
            // Turning reuse off returns the cache.
            ASSERT_RT_OK(rtEnableMemoryReuse(0));
            EXPECT_EQ(mem_stats().reserved_bytes, 0u);
        }
    }
}

TEST_P(MemoryPoolTest, ReuseOffReturnsEveryBlockAfterFrees) {
    ASSERT_RT_OK(rtEnablePoolAllocator(64 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    size_t free0 = device_free();
    std::vector<void*> ptrs;
    std::mt19937 rng(5);
    for (int i = 0; i < 40; ++i) {
        void* p = nullptr;
        size_t n = 1 + rng() % (700 * kKiB);
        if (i % 2) {
            ASSERT_RT_OK(rtMallocAsync(&p, n, s));
        } else {
            ASSERT_RT_OK(rtMalloc(&p, n));
        }
        ASSERT_RT_OK(rtMemsetAsync(p, i, n, s));
        ptrs.push_back(p);
    }
    EXPECT_GT(mem_stats().reserved_bytes, 0u);
    EXPECT_EQ(free0 - device_free(), mem_stats().reserved_bytes) << "the device is charged for the committed blocks";
    std::shuffle(ptrs.begin(), ptrs.end(), rng);
    for (size_t i = 0; i < ptrs.size(); ++i) {
        if (i % 2) {
            ASSERT_RT_OK(rtFreeAsync(ptrs[i], s));
        } else {
            ASSERT_RT_OK(rtFree(ptrs[i]));
        }
    }
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtMemEmptyCache());  // frees still pending on the (now idle) stream are settled
    EXPECT_EQ(mem_stats().reserved_bytes, 0u);
    EXPECT_EQ(device_free(), free0);
}

TEST_P(MemoryPoolTest, EmptyCacheReturnsCachedBlocks) {
    ASSERT_RT_OK(rtEnablePoolAllocator(64 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    ASSERT_RT_OK(rtEnableMemoryReuse(1));
    size_t free0 = device_free();
    void* keep = nullptr;
    ASSERT_RT_OK(rtMalloc(&keep, 100));
    std::vector<void*> ptrs(8);
    for (void*& p : ptrs) ASSERT_RT_OK(rtMalloc(&p, 2 * kMiB));
    size_t reserved_full = mem_stats().reserved_bytes;
    EXPECT_EQ(reserved_full, 17 * kMiB);
    for (void* p : ptrs) ASSERT_RT_OK(rtFree(p));
    EXPECT_EQ(mem_stats().reserved_bytes, reserved_full) << "reuse on: freed blocks are cached";
    EXPECT_EQ(free0 - device_free(), reserved_full);
    ASSERT_RT_OK(rtMemEmptyCache());
    EXPECT_EQ(mem_stats().reserved_bytes, 1 * kMiB) << "only the block under the live allocation stays";
    EXPECT_EQ(free0 - device_free(), 1 * kMiB);
    ASSERT_RT_OK(rtFree(keep));
    ASSERT_RT_OK(rtMemEmptyCache());
    EXPECT_EQ(mem_stats().reserved_bytes, 0u);
    EXPECT_EQ(device_free(), free0);
}

// ---------------------------------------------------------------- resident memory and out of memory

TEST_P(MemoryPoolTest, PoolReservesAddressSpaceWithoutCommitting) {
    size_t free0 = device_free();
    ASSERT_RT_OK(rtEnablePoolAllocator(4 * kGiB, 2 * kMiB, RT_POOL_DEFAULT));
    EXPECT_EQ(mem_stats().pool_size, 4 * kGiB) << "a pool larger than the device: only commits count";
    EXPECT_EQ(device_free(), free0) << "reserving commits nothing";
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 10 * kMiB + 5));
    // The first block of an empty pool is at its base, so [p, p + 4 GiB) is the whole reservation:
    // mincore() fails unless all of it is mapped, and it counts the pages resident in it alone.
    EXPECT_EQ(resident_in(p, 4 * kGiB), 0u) << "committing makes nothing resident before it is written";
    ASSERT_RT_OK(rtMemset(p, 0x5A, 10 * kMiB + 5));  // touch every page
    EXPECT_EQ(free0 - device_free(), 12 * kMiB) << "six 2 MiB blocks committed, nothing more";
    EXPECT_EQ(mem_stats().reserved_bytes, 12 * kMiB);
    size_t resident = resident_in(p, 4 * kGiB);
    EXPECT_GE(resident, 10 * kMiB + 5) << "the memory written is resident";
    EXPECT_LE(resident, 12 * kMiB) << "resident memory of a 4 GiB pool beyond its six committed blocks";
    ASSERT_RT_OK(rtFree(p));
    EXPECT_EQ(device_free(), free0);
    EXPECT_EQ(resident_in(p, 4 * kGiB), 0u) << "decommitted blocks left resident memory behind";
}

TEST_P(MemoryPoolTest, PoolBookkeepingDoesNotGrowWithTheReservedSize) {
    // Resident memory grows only with use: a large pool of small blocks must not cost resident memory
    // in proportion to its size before anything is allocated: 256 GiB of 4 KiB blocks is 64 M blocks,
    // and per-block state written up front would be at least 64 MiB per byte it keeps for a block.
    // The process's resident set moves by tens of MiB on its own under sanitizers, hence the margin.
    size_t rss0 = resident_bytes();
    ASSERT_RT_OK(rtEnablePoolAllocator(256 * kGiB, 4096, RT_POOL_DEFAULT));
    size_t rss1 = resident_bytes();
    size_t grown = rss1 - std::min(rss0, rss1);
    EXPECT_LT(grown, 128 * kMiB) << "enabling an empty 256 GiB pool of 4 KiB blocks made " << grown / kMiB
                                 << " MiB resident";
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 1000));
    ASSERT_RT_OK(rtMemset(p, 1, 1000));
    EXPECT_EQ(mem_stats().reserved_bytes, 4096u);
    ASSERT_RT_OK(rtFree(p));
}

TEST_P(MemoryPoolTest, OutOfMemoryStatesTheFiguresAndRecovers) {
    size_t free_b = 0, total_b = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_b, &total_b));
    ASSERT_EQ(total_b, 64 * kMiB) << "CTest runs this file with RUNTIME_CPU_MEMORY=64M";
    ASSERT_EQ(free_b, total_b) << "something else holds device memory";
    ASSERT_RT_OK(rtEnablePoolAllocator(256 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    ASSERT_RT_OK(rtEnableMemoryReuse(1));
    rtMemStats s0 = mem_stats();
    constexpr size_t kChunk = 4 * kMiB;
    std::vector<void*> ptrs;
    rtError_t e = RT_SUCCESS;
    for (int i = 0; i < 100; ++i) {
        void* p = nullptr;
        e = rtMalloc(&p, kChunk);
        if (e != RT_SUCCESS) break;
        ptrs.push_back(p);
    }
    ASSERT_EQ(e, RT_ERROR_OUT_OF_MEMORY);
    std::string msg = rt_test::last_message();
    EXPECT_EQ(ptrs.size(), total_b / kChunk) << "every byte of the device is usable by the pool";
    EXPECT_TRUE(rt_test::contains(msg, std::to_string(kChunk)));
    EXPECT_TRUE(rt_test::contains(msg, "free"));
    EXPECT_TRUE(rt_test::contains(msg, "reserved"));
    EXPECT_TRUE(rt_test::contains(msg, "largest free block"));
    EXPECT_EQ(mem_stats().num_ooms - s0.num_ooms, 1u);
    EXPECT_EQ(mem_stats().num_allocs - s0.num_allocs, ptrs.size());

    // Recovery: free one, allocate again, and the memory works.
    ASSERT_RT_OK(rtFree(ptrs.back()));
    ptrs.pop_back();
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, kChunk)) << "after freeing 4 MiB, 4 MiB must fit again";
    ptrs.push_back(p);
    std::vector<unsigned char> pat = rt_test::pattern(kChunk, 3), back(kChunk);
    ASSERT_RT_OK(rtMemcpy(p, pat.data(), kChunk, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtMemcpy(back.data(), p, kChunk, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(rt_test::first_mismatch(back.data(), pat.data(), kChunk), -1);

    // Cached blocks are released to serve a request that needs new ones: free every other chunk (their
    // blocks stay cached, in 4 MiB holes), then ask for 16 MiB, which no hole holds.
    for (size_t i = 0; i < ptrs.size(); i += 2) ASSERT_RT_OK(rtFree(ptrs[i]));
    std::vector<void*> kept;
    for (size_t i = 1; i < ptrs.size(); i += 2) kept.push_back(ptrs[i]);
    void* big = nullptr;
    ASSERT_RT_OK(rtMalloc(&big, 16 * kMiB)) << "the pool must give cached blocks back and retry: "
                                            << rt_test::last_message();
    ASSERT_RT_OK(rtMemset(big, 1, 16 * kMiB));
    ASSERT_RT_OK(rtFree(big));
    for (void* q : kept) ASSERT_RT_OK(rtFree(q));
    ASSERT_RT_OK(rtMemEmptyCache());
    EXPECT_EQ(device_free(), total_b);
}

TEST_P(MemoryPoolTest, OutOfMemoryWithAsyncAllocationRecovers) {
    ASSERT_RT_OK(rtEnablePoolAllocator(128 * kMiB, 2 * kMiB, RT_POOL_DEFAULT));
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    void* a = nullptr;
    void* b = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&a, 40 * kMiB, s));
    ASSERT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMallocAsync(&b, 40 * kMiB, s));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), std::to_string(40 * kMiB)));
    ASSERT_RT_OK(rtFreeAsync(a, s));
    ASSERT_RT_OK(rtMallocAsync(&b, 40 * kMiB, s)) << "the range freed on the same stream serves it";
    ASSERT_RT_OK(rtMemsetAsync(b, 9, 40 * kMiB, s));
    ASSERT_RT_OK(rtFreeAsync(b, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

// ---------------------------------------------------------------- zero copy

TEST_P(MemoryPoolTest, DevicePointerOfHostMemoryNeedsZeroCopy) {
    HostBuf h(64 * kKiB);
    ASSERT_RT_OK(h.status());
    void* d = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtHostGetDevicePointer(&d, h.get(), 0));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "rtEnableZeroCopy")) << rt_test::last_message();
    ASSERT_RT_OK(rtEnableZeroCopy(1));
    ASSERT_RT_OK(rtHostGetDevicePointer(&d, h.get(), 0));
    EXPECT_EQ(d, static_cast<void*>(h.get())) << "cpu: the device address is the host address";
    ASSERT_RT_OK(rtHostGetDevicePointer(&d, h.get() + 1000, 0));
    EXPECT_EQ(d, static_cast<void*>(h.get() + 1000)) << "an interior pointer maps too";
    // Errors.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostGetDevicePointer(nullptr, h.get(), 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostGetDevicePointer(&d, nullptr, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostGetDevicePointer(&d, h.get(), 1));
    std::vector<char> plain(4096);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostGetDevicePointer(&d, plain.data(), 0)) << "pageable memory";
    DevBuf dev(4096);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostGetDevicePointer(&d, dev.get(), 0)) << "device memory";
    ASSERT_RT_OK(rtEnableZeroCopy(0));
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtHostGetDevicePointer(&d, h.get(), 0));
}

TEST_P(MemoryPoolTest, CopiesBetweenMappedMemoryAndItselfAreElided) {
    constexpr size_t kSize = 1 * kMiB + 17;
    HostBuf h(kSize);
    ASSERT_RT_OK(h.status());
    rt_test::fill_pattern(h.get(), kSize, 11);
    const std::vector<unsigned char> pat = rt_test::pattern(kSize, 11);
    ASSERT_RT_OK(rtEnableZeroCopy(1));
    void* d = nullptr;
    ASSERT_RT_OK(rtHostGetDevicePointer(&d, h.get(), 0));
    StreamGuard s;
    ASSERT_RT_OK(s.status());

    rtMemStats s0 = mem_stats();
    ASSERT_RT_OK(rtMemcpy(d, h.get(), kSize, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtMemcpy(h.get(), d, kSize, RT_MEMCPY_DEVICE_TO_HOST));
    ASSERT_RT_OK(rtMemcpyAsync(static_cast<char*>(d) + 64, h.get() + 64, 1000, RT_MEMCPY_HOST_TO_DEVICE, s));
    ASSERT_RT_OK(rtMemcpyAsync(h.get(), d, kSize, RT_MEMCPY_DEFAULT, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    rtMemStats s1 = mem_stats();
    EXPECT_EQ(s1.num_elided_copies - s0.num_elided_copies, 4u);
    EXPECT_EQ(s1.elided_copy_bytes - s0.elided_copy_bytes, 3 * kSize + 1000);
    EXPECT_EQ(rt_test::first_mismatch(h.get(), pat.data(), kSize), -1) << "an elided copy changed the data";

    // A copy to other device memory really moves the bytes, and is not counted as elided.
    DevBuf other(kSize);
    ASSERT_NE(other.get(), nullptr);
    ASSERT_RT_OK(rtMemset(other.get(), 0, kSize));
    ASSERT_RT_OK(rtMemcpy(other.get(), d, kSize, RT_MEMCPY_DEVICE_TO_DEVICE));
    std::vector<unsigned char> back(kSize);
    ASSERT_RT_OK(rtMemcpy(back.data(), other.get(), kSize, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(rt_test::first_mismatch(back.data(), pat.data(), kSize), -1);
    ASSERT_RT_OK(rtMemset(other.get(), 0, kSize));
    ASSERT_RT_OK(rtMemcpy(other.get(), h.get(), kSize, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtMemcpy(back.data(), other.get(), kSize, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(rt_test::first_mismatch(back.data(), pat.data(), kSize), -1);
    // Back into the mapped buffer from device memory: a real copy too.
    std::memset(h.get(), 0, kSize);
    ASSERT_RT_OK(rtMemcpy(d, other.get(), kSize, RT_MEMCPY_DEVICE_TO_DEVICE));
    EXPECT_EQ(rt_test::first_mismatch(h.get(), pat.data(), kSize), -1);
    rtMemStats s2 = mem_stats();
    EXPECT_EQ(s2.num_elided_copies, s1.num_elided_copies);
    EXPECT_EQ(s2.elided_copy_bytes, s1.elided_copy_bytes);

    // Zero copy off: nothing is elided, and pinned memory is no longer accepted as device memory.
    ASSERT_RT_OK(rtEnableZeroCopy(0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy(other.get(), h.get(), kSize, RT_MEMCPY_DEVICE_TO_DEVICE));
    ASSERT_RT_OK(rtMemcpy(other.get(), h.get(), kSize, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_EQ(mem_stats().num_elided_copies, s1.num_elided_copies);
}

constexpr const char* kInPlaceKernel = R"(
RT_KERNEL void affine(float* v, int32_t n, float a, float b) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) v[i] = v[i] * a + b;
}
)";

TEST_P(MemoryPoolTest, KernelUsesRegisteredHostMemoryInPlace) {
    constexpr int32_t kN = 10000;
    std::vector<float> v(kN);
    for (int32_t i = 0; i < kN; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
    ASSERT_RT_OK(rtHostRegister(v.data(), v.size() * sizeof(float), RT_HOST_REGISTER_DEFAULT));
    ASSERT_RT_OK(rtEnableZeroCopy(1));
    void* d = nullptr;
    ASSERT_RT_OK(rtHostGetDevicePointer(&d, v.data(), 0));
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, kInPlaceKernel, nullptr));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "affine"));
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    int32_t n = kN;
    float a = 2.0f, b = 1.0f;
    void* args[] = {&d, &n, &a, &b};
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{(kN + 127) / 128, 1, 1}, rtDim3{128, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    for (int32_t i = 0; i < kN; ++i)
        ASSERT_EQ(v[static_cast<size_t>(i)], static_cast<float>(i) * 2.0f + 1.0f) << "element " << i;

    // Pinned memory from rtMallocHost, through its device pointer, with an elided upload around it.
    HostBuf h(kN * sizeof(float));
    ASSERT_RT_OK(h.status());
    auto* hf = reinterpret_cast<float*>(h.get());
    for (int32_t i = 0; i < kN; ++i) hf[i] = 1.0f;
    void* hd = nullptr;
    ASSERT_RT_OK(rtHostGetDevicePointer(&hd, h.get(), 0));
    rtMemStats s0 = mem_stats();
    ASSERT_RT_OK(rtMemcpyAsync(hd, h.get(), kN * sizeof(float), RT_MEMCPY_HOST_TO_DEVICE, s));
    void* args2[] = {&hd, &n, &a, &b};
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{(kN + 127) / 128, 1, 1}, rtDim3{128, 1, 1}, args2, 0, s));
    ASSERT_RT_OK(rtMemcpyAsync(h.get(), hd, kN * sizeof(float), RT_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(mem_stats().num_elided_copies - s0.num_elided_copies, 2u);
    for (int32_t i = 0; i < kN; ++i) ASSERT_EQ(hf[i], 3.0f) << "element " << i;

    ASSERT_RT_OK(rtModuleUnload(m));
    ASSERT_RT_OK(rtHostUnregister(v.data()));
}

TEST_P(MemoryPoolTest, HostRegisterErrors) {
    std::vector<unsigned char> buf(64 * kKiB);
    unsigned char* base = buf.data();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostRegister(nullptr, 4096, RT_HOST_REGISTER_DEFAULT));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostRegister(base, 0, RT_HOST_REGISTER_DEFAULT));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostRegister(base, 4096, 0x40u)) << "unknown flags";
    ASSERT_RT_OK(rtHostRegister(base + 8 * kKiB, 8 * kKiB, RT_HOST_REGISTER_DEFAULT));
    // Overlapping the registered range: from the left, from the right, inside, and exactly.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostRegister(base + 4 * kKiB, 8 * kKiB, 0)) << "overlaps its start";
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "overlaps")) << rt_test::last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostRegister(base + 12 * kKiB, 8 * kKiB, 0)) << "overlaps its end";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostRegister(base + 10 * kKiB, 1 * kKiB, 0)) << "inside it";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostRegister(base + 8 * kKiB, 8 * kKiB, 0)) << "the same range again";
    // Adjacent ranges are fine.
    ASSERT_RT_OK(rtHostRegister(base + 16 * kKiB, 4 * kKiB, 0));
    ASSERT_RT_OK(rtHostRegister(base, 8 * kKiB, 0));
    // Overlapping pinned memory from rtMallocHost.
    HostBuf h(8192);
    ASSERT_RT_OK(h.status());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostRegister(h.get() + 100, 100, 0));

    // Unregister errors: NULL, never registered, an interior pointer, twice.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostUnregister(nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostUnregister(base + 32 * kKiB));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostUnregister(base + 9 * kKiB)) << "inside, not its start";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostUnregister(h.get())) << "rtMallocHost memory is freed, not unregistered";
    ASSERT_RT_OK(rtHostUnregister(base + 8 * kKiB));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtHostUnregister(base + 8 * kKiB)) << "twice";
    ASSERT_RT_OK(rtHostUnregister(base + 16 * kKiB));
    ASSERT_RT_OK(rtHostUnregister(base));
    // Registered memory is host memory to copies when zero copy is off, and can be re-registered.
    ASSERT_RT_OK(rtHostRegister(base, buf.size(), 0));
    DevBuf d(4096);
    rt_test::fill_pattern(base, 4096, 5);
    ASSERT_RT_OK(rtMemcpy(d.get(), base, 4096, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtMemcpy(base + 4096, d.get(), 4096, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(std::memcmp(base, base + 4096, 4096), 0);
    ASSERT_RT_OK(rtHostUnregister(base));
}

TEST_P(MemoryPoolTest, HostRegisterRejectsARangeContainingARegisteredOne) {
    std::vector<unsigned char> buf(64 * kKiB);
    unsigned char* base = buf.data();
    ASSERT_RT_OK(rtHostRegister(base + 8 * kKiB, 4 * kKiB, 0));
    // Neither end of [base, +32 KiB) lies in the registered range, but the range contains it.
    rtError_t e = rtHostRegister(base, 32 * kKiB, 0);
    EXPECT_EQ(e, RT_ERROR_INVALID_VALUE) << "registering a range that contains a registered range was "
                                         << rtGetErrorName(e);
    if (e == RT_SUCCESS) {
        EXPECT_RT_OK(rtHostUnregister(base));
    }
    ASSERT_RT_OK(rtHostUnregister(base + 8 * kKiB));
}

RT_INSTANTIATE_DEVICE_TEST(MemoryPoolTest);

}  // namespace
