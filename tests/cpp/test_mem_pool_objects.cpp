// test_mem_pool_objects.cpp — memory pool objects (rtMemPool_t): creation, attributes, release thresholds, trimming,
// device pools, ownership of frees, destruction with live allocations, the default pool, concurrency.
#include "test_util.hpp"

#include <runtime/runtime.hpp>

#include <cstring>
#include <set>

namespace {

using rt_test::Gate;
using rt_test::StreamGuard;

constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kBlock = 2 * kMiB;  // a created pool of 64 MiB or more commits 2 MiB blocks

rtMemPoolProps pool_props(int device, size_t max_size = 64 * kMiB) {
    rtMemPoolProps p;
    std::memset(&p, 0, sizeof p);
    p.alloc_type = RT_MEM_ALLOCATION_TYPE_PINNED;
    p.handle_types = RT_MEM_HANDLE_TYPE_NONE;
    p.location.type = RT_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device;
    p.max_size = max_size;
    return p;
}

uint64_t attr(rtMemPool_t pool, rtMemPoolAttr a) {
    uint64_t v = 0xABABABAB;
    EXPECT_RT_OK(rtMemPoolGetAttribute(pool, a, &v));
    return v;
}

void set_attr(rtMemPool_t pool, rtMemPoolAttr a, uint64_t v) { EXPECT_RT_OK(rtMemPoolSetAttribute(pool, a, &v)); }

uint64_t reserved(rtMemPool_t p) { return attr(p, RT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT); }
uint64_t used(rtMemPool_t p) { return attr(p, RT_MEMPOOL_ATTR_USED_MEM_CURRENT); }

rtMemStats mem_stats() {
    rtMemStats s;
    std::memset(&s, 0xAB, sizeof s);
    EXPECT_RT_OK(rtMemGetStats(&s));
    return s;
}

/// A created pool destroyed at scope exit.
class PoolGuard {
public:
    explicit PoolGuard(int device, size_t max_size = 64 * kMiB) {
        rtMemPoolProps p = pool_props(device, max_size);
        err_ = rtMemPoolCreate(&pool_, &p);
    }
    ~PoolGuard() {
        if (pool_) rtMemPoolDestroy(pool_);
    }
    PoolGuard(const PoolGuard&) = delete;
    PoolGuard& operator=(const PoolGuard&) = delete;
    rtError_t status() const { return err_; }
    operator rtMemPool_t() const { return pool_; }
    rtMemPool_t release() { return std::exchange(pool_, nullptr); }

private:
    rtMemPool_t pool_ = nullptr;
    rtError_t err_;
};

class MemPoolObjectTest : public rt_test::DeviceTest {
protected:
    void SetUp() override {
        rt_test::DeviceTest::SetUp();
        ASSERT_RT_OK(rtEnableMemoryReuse(0));
        ASSERT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
        ASSERT_RT_OK(rtDeviceGetDefaultMemPool(&default_pool_, device()));
        ASSERT_RT_OK(rtDeviceSetMemPool(device(), default_pool_));
        uint64_t unlimited = UINT64_MAX;
        ASSERT_RT_OK(rtMemPoolSetAttribute(default_pool_, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, &unlimited));
    }
    void TearDown() override {
        EXPECT_RT_OK(rtSetDevice(device()));
        EXPECT_RT_OK(rtDeviceSynchronize());
        EXPECT_RT_OK(rtDeviceSetMemPool(device(), default_pool_));
        uint64_t unlimited = UINT64_MAX;
        EXPECT_RT_OK(rtMemPoolSetAttribute(default_pool_, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, &unlimited));
        EXPECT_RT_OK(rtEnableMemoryReuse(0));
        EXPECT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
        rtMemStats s = mem_stats();
        EXPECT_EQ(s.num_live_allocations, 0u) << "the test leaked device memory";
        EXPECT_EQ(s.allocated_bytes, 0u);
        EXPECT_EQ(s.reserved_bytes, 0u) << "every pool destroyed and freed: nothing may stay reserved";
    }
    rtMemPool_t default_pool_ = nullptr;
};

// ---------------------------------------------------------------- creation and bad input

TEST_P(MemPoolObjectTest, CreateRejectsBadProps) {
    rtMemPool_t pool = nullptr;
    rtMemPoolProps p = pool_props(device());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemPoolCreate(nullptr, &p));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "pool is NULL"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemPoolCreate(&pool, nullptr));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "props is NULL"));

    struct Case {
        const char* field;
        void (*spoil)(rtMemPoolProps&);
        rtError_t code;
    };
    const Case cases[] = {
        {"props->alloc_type", [](rtMemPoolProps& q) { q.alloc_type = RT_MEM_ALLOCATION_TYPE_INVALID; },
         RT_ERROR_INVALID_VALUE},
        {"props->handle_types", [](rtMemPoolProps& q) { q.handle_types = static_cast<rtMemAllocationHandleType>(1); },
         RT_ERROR_INVALID_VALUE},
        {"props->location.type", [](rtMemPoolProps& q) { q.location.type = RT_MEM_LOCATION_TYPE_INVALID; },
         RT_ERROR_INVALID_VALUE},
        {"props->location.id", [](rtMemPoolProps& q) { q.location.id = -1; }, RT_ERROR_INVALID_DEVICE},
        {"props->location.id", [](rtMemPoolProps& q) { q.location.id = 1000; }, RT_ERROR_INVALID_DEVICE},
        {"props->win32_security_attributes", [](rtMemPoolProps& q) { q.win32_security_attributes = &q; },
         RT_ERROR_INVALID_VALUE},
        {"props->usage", [](rtMemPoolProps& q) { q.usage = 1; }, RT_ERROR_INVALID_VALUE},
        {"props->reserved[53]", [](rtMemPoolProps& q) { q.reserved[53] = 1; }, RT_ERROR_INVALID_VALUE},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.field);
        rtMemPoolProps q = pool_props(device());
        c.spoil(q);
        pool = nullptr;
        EXPECT_RT_ERROR(c.code, rtMemPoolCreate(&pool, &q));
        EXPECT_TRUE(rt_test::contains(rt_test::last_message(), c.field));
        EXPECT_EQ(pool, nullptr);
    }
    // Out of address space: a pool larger than anything the device can reserve.
    rtMemPoolProps huge = pool_props(device(), SIZE_MAX - 4096);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemPoolCreate(&pool, &huge));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "too large"));
}

TEST_P(MemPoolObjectTest, BadHandlesAttributesAndValuesAreRefused) {
    auto garbage = rt_test::garbage_handle<rtMemPool_t>();
    uint64_t v = 0;
    void* p = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMemPoolDestroy(garbage));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "not a live memory pool"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMemPoolDestroy(nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMemPoolGetAttribute(garbage, RT_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMemPoolSetAttribute(garbage, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMemPoolTrimTo(garbage, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMallocFromPoolAsync(&p, 256, garbage, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtDeviceSetMemPool(device(), garbage));

    PoolGuard pool(device());
    ASSERT_RT_OK(pool.status());
    // Attributes: unknown numbers, NULL values, values out of range, read-only attributes.
    for (int bad : {0, 9, -1}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemPoolGetAttribute(pool, static_cast<rtMemPoolAttr>(bad), &v));
        EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "is not an rtMemPoolAttr"));
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemPoolSetAttribute(pool, static_cast<rtMemPoolAttr>(bad), &v));
    }
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemPoolGetAttribute(pool, RT_MEMPOOL_ATTR_USED_MEM_CURRENT, nullptr));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "value is NULL"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemPoolSetAttribute(pool, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, nullptr));
    int two = 2;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtMemPoolSetAttribute(pool, RT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &two));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "expected an int, 0 or 1"));
    uint64_t five = 5;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemPoolSetAttribute(pool, RT_MEMPOOL_ATTR_USED_MEM_HIGH, &five));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "can only be set to 0"));
    for (rtMemPoolAttr ro : {RT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, RT_MEMPOOL_ATTR_USED_MEM_CURRENT}) {
        uint64_t zero = 0;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemPoolSetAttribute(pool, ro, &zero));
        EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "read only"));
    }
    // Outputs that are NULL, devices that do not exist.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMallocFromPoolAsync(nullptr, 256, pool, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDeviceGetMemPool(nullptr, device()));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDeviceGetDefaultMemPool(nullptr, device()));
    rtMemPool_t out = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtDeviceGetMemPool(&out, -1));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtDeviceGetDefaultMemPool(&out, 1000));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtDeviceSetMemPool(1000, pool));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "device 1000 is not a device"));
    // The default pool cannot be destroyed.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemPoolDestroy(default_pool_));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "cannot be destroyed"));

    // A destroyed pool's handle is dead for every call.
    rtMemPool_t dead = pool.release();
    ASSERT_RT_OK(rtMemPoolDestroy(dead));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMemPoolDestroy(dead));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMemPoolGetAttribute(dead, RT_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMemPoolTrimTo(dead, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMallocFromPoolAsync(&p, 256, dead, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtDeviceSetMemPool(device(), dead));
    EXPECT_EQ(p, nullptr);
}

// ---------------------------------------------------------------- attributes and statistics

TEST_P(MemPoolObjectTest, AttributesStartAsCudaDocumentsThem) {
    PoolGuard pool(device());
    ASSERT_RT_OK(pool.status());
    for (rtMemPoolAttr a : {RT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, RT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
                            RT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES}) {
        int on = -1;
        ASSERT_RT_OK(rtMemPoolGetAttribute(pool, a, &on));
        EXPECT_EQ(on, 1);
        int off = 0;
        ASSERT_RT_OK(rtMemPoolSetAttribute(pool, a, &off));
        ASSERT_RT_OK(rtMemPoolGetAttribute(pool, a, &on));
        EXPECT_EQ(on, 0);
    }
    EXPECT_EQ(attr(pool, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0u);
    for (rtMemPoolAttr a : {RT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
                            RT_MEMPOOL_ATTR_USED_MEM_CURRENT, RT_MEMPOOL_ATTR_USED_MEM_HIGH})
        EXPECT_EQ(attr(pool, a), 0u);
    set_attr(pool, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, 12345);
    EXPECT_EQ(attr(pool, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD), 12345u);
    // The default pool keeps what the memory strategies cache: its threshold starts unlimited.
    rtMemPool_t def = nullptr;
    ASSERT_RT_OK(rtDeviceGetDefaultMemPool(&def, device()));
    EXPECT_EQ(def, default_pool_);
    EXPECT_EQ(attr(def, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD), UINT64_MAX);
}

TEST_P(MemPoolObjectTest, StatisticsAndHighWaterMarksAreExact) {
    PoolGuard pool(device());
    ASSERT_RT_OK(pool.status());
    set_attr(pool, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, UINT64_MAX);
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    const rtMemStats before = mem_stats();
    void *a = nullptr, *b = nullptr, *c = nullptr;
    ASSERT_RT_OK(rtMallocFromPoolAsync(&a, 1000, pool, s));
    ASSERT_RT_OK(rtMallocFromPoolAsync(&b, 3 * kMiB, pool, s));
    EXPECT_EQ(used(pool), 1000u + 3 * kMiB) << "used counts the bytes asked for";
    EXPECT_EQ(reserved(pool), 2 * kBlock) << "1000 B + 3 MiB (rounded to 256 B) lie in two 2 MiB blocks";
    EXPECT_EQ(attr(pool, RT_MEMPOOL_ATTR_USED_MEM_HIGH), 1000u + 3 * kMiB);
    EXPECT_EQ(attr(pool, RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 2 * kBlock);
    // The device's statistics count the pool's allocations and reservation too.
    rtMemStats mid = mem_stats();
    EXPECT_EQ(mid.allocated_bytes - before.allocated_bytes, 1000u + 3 * kMiB);
    EXPECT_EQ(mid.num_live_allocations - before.num_live_allocations, 2u);
    EXPECT_EQ(mid.reserved_bytes - before.reserved_bytes, 2 * kBlock);
    EXPECT_EQ(mid.num_allocs - before.num_allocs, 2u);

    ASSERT_RT_OK(rtFreeAsync(b, s));
    EXPECT_EQ(used(pool), 1000u);
    EXPECT_EQ(attr(pool, RT_MEMPOOL_ATTR_USED_MEM_HIGH), 1000u + 3 * kMiB) << "the mark stays";
    ASSERT_RT_OK(rtMallocFromPoolAsync(&c, 256, pool, s));
    EXPECT_EQ(used(pool), 1256u);
    // Restarting the marks: from the current values.
    set_attr(pool, RT_MEMPOOL_ATTR_USED_MEM_HIGH, 0);
    EXPECT_EQ(attr(pool, RT_MEMPOOL_ATTR_USED_MEM_HIGH), 1256u);
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtMemPoolTrimTo(pool, 0));
    EXPECT_EQ(reserved(pool), kBlock) << "the block holding the two live allocations stays";
    EXPECT_EQ(attr(pool, RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 2 * kBlock);
    set_attr(pool, RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0);
    EXPECT_EQ(attr(pool, RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH), kBlock);
    ASSERT_RT_OK(rtFreeAsync(a, s));
    ASSERT_RT_OK(rtFreeAsync(c, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(used(pool), 0u);
    EXPECT_EQ(attr(pool, RT_MEMPOOL_ATTR_USED_MEM_HIGH), 1256u);
    const rtMemStats after = mem_stats();
    EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
    EXPECT_EQ(after.num_frees - before.num_frees, 3u);
}

// ---------------------------------------------------------------- independence, reuse, thresholds, trimming

TEST_P(MemPoolObjectTest, TwoPoolsOnOneDeviceAreIndependent) {
    PoolGuard a(device()), b(device());
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    ASSERT_NE(static_cast<rtMemPool_t>(a), static_cast<rtMemPool_t>(b));
    set_attr(a, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, UINT64_MAX);
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    std::vector<void*> from_a(3), from_b(1);
    for (void*& p : from_a) ASSERT_RT_OK(rtMallocFromPoolAsync(&p, kBlock, a, s));
    for (void*& p : from_b) ASSERT_RT_OK(rtMallocFromPoolAsync(&p, kBlock, b, s));
    EXPECT_EQ(used(a), 3 * kBlock);
    EXPECT_EQ(used(b), kBlock);
    EXPECT_EQ(reserved(a), 3 * kBlock);
    EXPECT_EQ(reserved(b), kBlock);
    EXPECT_EQ(attr(b, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0u) << "a's threshold is a's alone";
    // Each pool has its own address space: no allocation of one lies within 64 MiB of the other's.
    for (void* pa : from_a)
        for (void* pb : from_b) {
            const auto x = reinterpret_cast<uintptr_t>(pa), y = reinterpret_cast<uintptr_t>(pb);
            EXPECT_GE(x > y ? x - y : y - x, kBlock);
        }
    for (void* p : from_a) ASSERT_RT_OK(rtFreeAsync(p, s));
    for (void* p : from_b) ASSERT_RT_OK(rtFreeAsync(p, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(reserved(a), 3 * kBlock) << "a keeps its memory (threshold unlimited)";
    EXPECT_EQ(reserved(b), 0u) << "b returns its memory at the synchronize (threshold 0)";
    ASSERT_RT_OK(rtMemPoolTrimTo(b, 0));
    EXPECT_EQ(reserved(a), 3 * kBlock) << "trimming b leaves a alone";
    ASSERT_RT_OK(rtMemPoolTrimTo(a, 0));
    EXPECT_EQ(reserved(a), 0u);
}

TEST_P(MemPoolObjectTest, StreamOrderedReuseWithinAPool) {
    PoolGuard pool(device());
    ASSERT_RT_OK(pool.status());
    set_attr(pool, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, UINT64_MAX);
    StreamGuard s(RT_STREAM_NON_BLOCKING), other(RT_STREAM_NON_BLOCKING);
    ASSERT_RT_OK(s.status());
    ASSERT_RT_OK(other.status());
    constexpr size_t kSize = 3 * kMiB + 100;
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    void *x = nullptr, *y = nullptr, *z = nullptr;
    ASSERT_RT_OK(rtMallocFromPoolAsync(&x, kSize, pool, s));
    ASSERT_RT_OK(rtMemsetAsync(x, 0x5A, kSize, s));
    ASSERT_RT_OK(rtFreeAsync(x, s));
    ASSERT_RT_OK(rtMallocFromPoolAsync(&y, kSize, pool, s));
    EXPECT_EQ(y, x) << "stream order makes x safe for later work on the same stream";
    ASSERT_RT_OK(rtMallocFromPoolAsync(&z, kSize, pool, other));
    EXPECT_NE(z, x) << "another stream must not get memory the gated stream may still use";
    EXPECT_FALSE(gate.left());
    ASSERT_RT_OK(rtFreeAsync(y, s));
    ASSERT_RT_OK(rtFreeAsync(z, other));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtStreamSynchronize(other));
    // Once the free has run, any stream may reuse it.
    void* w = nullptr;
    ASSERT_RT_OK(rtMallocFromPoolAsync(&w, kSize, pool, other));
    EXPECT_TRUE(w == x || w == z);
    EXPECT_EQ(reserved(pool), 2 * ((kSize + kBlock - 1) / kBlock) * kBlock);
    ASSERT_RT_OK(rtFreeAsync(w, other));
    ASSERT_RT_OK(rtStreamSynchronize(other));
}

TEST_P(MemPoolObjectTest, ReleaseThresholdIsHonouredAtSynchronize) {
    PoolGuard pool(device());
    ASSERT_RT_OK(pool.status());
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    rt_test::EventGuard e;
    ASSERT_RT_OK(e.status());
    for (uint64_t threshold : {uint64_t{0}, uint64_t{2 * kBlock}, uint64_t{4 * kBlock}, uint64_t{UINT64_MAX}}) {
        for (int how = 0; how < 3; ++how) {
            SCOPED_TRACE("threshold " + std::to_string(threshold) + ", synchronize " +
                         (how == 0 ? "stream" : how == 1 ? "device" : "event"));
            ASSERT_RT_OK(rtMemPoolTrimTo(pool, 0));
            set_attr(pool, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, threshold);
            std::vector<void*> ptrs(6);
            for (void*& p : ptrs) ASSERT_RT_OK(rtMallocFromPoolAsync(&p, kBlock, pool, s));
            ASSERT_EQ(reserved(pool), 6 * kBlock);
            for (size_t i = 1; i < ptrs.size(); ++i) ASSERT_RT_OK(rtFreeAsync(ptrs[i], s));
            EXPECT_EQ(reserved(pool), 6 * kBlock) << "nothing is released before a synchronize";
            if (how == 0) {
                ASSERT_RT_OK(rtStreamSynchronize(s));
            } else if (how == 1) {
                ASSERT_RT_OK(rtDeviceSynchronize());
            }
            if (how == 2) {
                ASSERT_RT_OK(rtEventRecord(e, s));
                ASSERT_RT_OK(rtEventSynchronize(e));
            }
            const uint64_t live = kBlock;
            const uint64_t r = reserved(pool);
            EXPECT_GE(r, live);
            if (threshold != UINT64_MAX) {
                EXPECT_LE(r, threshold + live);
            }
            // Blocks go back until the reservation is within the threshold (the live one never).
            EXPECT_EQ(r, threshold == UINT64_MAX ? 6 * kBlock : std::max<uint64_t>(threshold, live));
            ASSERT_RT_OK(rtFreeAsync(ptrs[0], s));
            ASSERT_RT_OK(rtStreamSynchronize(s));
        }
    }
}

TEST_P(MemPoolObjectTest, TrimToKeepsWhatItIsAskedToAndWhatIsInUse) {
    PoolGuard pool(device());
    ASSERT_RT_OK(pool.status());
    set_attr(pool, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, UINT64_MAX);
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    std::vector<void*> ptrs(5);
    for (void*& p : ptrs) ASSERT_RT_OK(rtMallocFromPoolAsync(&p, kBlock, pool, s));
    for (size_t i = 1; i < ptrs.size(); ++i) ASSERT_RT_OK(rtFreeAsync(ptrs[i], s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(reserved(pool), 5 * kBlock);
    ASSERT_RT_OK(rtMemPoolTrimTo(pool, 3 * kBlock + 1));
    EXPECT_EQ(reserved(pool), 3 * kBlock);
    ASSERT_RT_OK(rtMemPoolTrimTo(pool, 0));
    EXPECT_EQ(reserved(pool), kBlock) << "memory in use is never trimmed";
    // The live allocation is intact.
    std::vector<unsigned char> back(kBlock);
    ASSERT_RT_OK(rtMemsetAsync(ptrs[0], 0x77, kBlock, s));
    ASSERT_RT_OK(rtMemcpyAsync(back.data(), ptrs[0], kBlock, RT_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(back[0], 0x77);
    EXPECT_EQ(back[kBlock - 1], 0x77);
    ASSERT_RT_OK(rtFreeAsync(ptrs[0], s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtMemPoolTrimTo(pool, 0));
    EXPECT_EQ(reserved(pool), 0u);
}

// ---------------------------------------------------------------- device pools, ownership of frees, destruction

TEST_P(MemPoolObjectTest, SetAndGetTheDevicesPool) {
    rtMemPool_t current = nullptr;
    ASSERT_RT_OK(rtDeviceGetMemPool(&current, device()));
    EXPECT_EQ(current, default_pool_) << "the current pool starts as the default pool";
    PoolGuard pool(device());
    ASSERT_RT_OK(pool.status());
    ASSERT_RT_OK(rtDeviceSetMemPool(device(), pool));
    ASSERT_RT_OK(rtDeviceGetMemPool(&current, device()));
    EXPECT_EQ(current, static_cast<rtMemPool_t>(pool));
    rtMemPool_t def = nullptr;
    ASSERT_RT_OK(rtDeviceGetDefaultMemPool(&def, device()));
    EXPECT_EQ(def, default_pool_) << "setting the current pool leaves the default one";
    ASSERT_RT_OK(rtDeviceSetMemPool(device(), def));
    ASSERT_RT_OK(rtDeviceGetMemPool(&current, device()));
    EXPECT_EQ(current, default_pool_);
}

TEST_P(MemPoolObjectTest, MallocAsyncFollowsTheCurrentPoolAndFreeGoesToTheOwner) {
    PoolGuard a(device()), b(device());
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    const uint64_t default_used = used(default_pool_);
    ASSERT_RT_OK(rtDeviceSetMemPool(device(), a));
    void *x = nullptr, *y = nullptr, *z = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&x, 4096, s));
    EXPECT_EQ(used(a), 4096u);
    EXPECT_EQ(used(b), 0u);
    EXPECT_EQ(used(default_pool_), default_used);
    ASSERT_RT_OK(rtMalloc(&z, 1024));  // rtMalloc never uses a pool object: the device's allocator
    EXPECT_EQ(used(a), 4096u);
    EXPECT_EQ(used(default_pool_), default_used + 1024);
    ASSERT_RT_OK(rtDeviceSetMemPool(device(), b));
    ASSERT_RT_OK(rtMallocAsync(&y, 512, s));
    EXPECT_EQ(used(b), 512u);
    // x goes back to a although b is current now; rtFree of pool memory works too.
    ASSERT_RT_OK(rtFreeAsync(x, s));
    EXPECT_EQ(used(a), 0u);
    EXPECT_EQ(used(b), 512u);
    ASSERT_RT_OK(rtFree(y));
    EXPECT_EQ(used(b), 0u);
    ASSERT_RT_OK(rtFree(z));
    EXPECT_EQ(used(default_pool_), default_used);
    // Freeing again is refused as for any device memory.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeAsync(x, s));
    ASSERT_RT_OK(rtDeviceSetMemPool(device(), default_pool_));
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

TEST_P(MemPoolObjectTest, DestroyWithLiveAllocationsDefersTheRelease) {
    const rtMemStats before = mem_stats();
    rtMemPoolProps props = pool_props(device());
    rtMemPool_t pool = nullptr;
    ASSERT_RT_OK(rtMemPoolCreate(&pool, &props));
    ASSERT_RT_OK(rtDeviceSetMemPool(device(), pool));
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    void* p = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&p, kBlock, s));
    ASSERT_RT_OK(rtMemsetAsync(p, 0x3C, kBlock, s));
    ASSERT_RT_OK(rtMemPoolDestroy(pool));
    // The handle is dead at once, and the device uses its default pool again.
    uint64_t v = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtMemPoolGetAttribute(pool, RT_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
    rtMemPool_t current = nullptr;
    ASSERT_RT_OK(rtDeviceGetMemPool(&current, device()));
    EXPECT_EQ(current, default_pool_);
    void* q = nullptr;
    const uint64_t default_used = used(default_pool_);
    ASSERT_RT_OK(rtMallocAsync(&q, 256, s));
    EXPECT_EQ(used(default_pool_), default_used + 256) << "rtMallocAsync serves from the default pool again";
    ASSERT_RT_OK(rtFreeAsync(q, s));
    // The memory stays valid and counted until it is freed.
    std::vector<unsigned char> back(kBlock);
    ASSERT_RT_OK(rtMemcpyAsync(back.data(), p, kBlock, RT_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(back[0], 0x3C);
    EXPECT_EQ(back[kBlock - 1], 0x3C);
    EXPECT_EQ(mem_stats().reserved_bytes - before.reserved_bytes, kBlock);
    ASSERT_RT_OK(rtFreeAsync(p, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    const rtMemStats after = mem_stats();
    EXPECT_EQ(after.reserved_bytes, before.reserved_bytes) << "the pool went with its last allocation";
    EXPECT_EQ(after.num_live_allocations, before.num_live_allocations);
}

TEST_P(MemPoolObjectTest, DestroyWithFreesStillQueuedKeepsThePoolUntilTheyRun) {
    const rtMemStats before = mem_stats();
    PoolGuard pool(device());
    ASSERT_RT_OK(pool.status());
    StreamGuard s(RT_STREAM_NON_BLOCKING);
    ASSERT_RT_OK(s.status());
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    void* p = nullptr;
    ASSERT_RT_OK(rtMallocFromPoolAsync(&p, kBlock, pool, s));
    ASSERT_RT_OK(rtMemsetAsync(p, 1, kBlock, s));
    ASSERT_RT_OK(rtFreeAsync(p, s));
    ASSERT_RT_OK(rtMemPoolDestroy(pool.release()));
    EXPECT_EQ(mem_stats().reserved_bytes - before.reserved_bytes, kBlock) << "the gated memset still uses it";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(mem_stats().reserved_bytes, before.reserved_bytes);
}

TEST_P(MemPoolObjectTest, DeviceResetFreesPoolMemoryAndKeepsThePools) {
    PoolGuard pool(device());
    ASSERT_RT_OK(pool.status());
    ASSERT_RT_OK(rtDeviceSetMemPool(device(), pool));
    void *p = nullptr, *q = nullptr;
    ASSERT_RT_OK(rtMallocFromPoolAsync(&p, kBlock, pool, nullptr));
    ASSERT_RT_OK(rtMallocAsync(&q, 4096, nullptr));
    EXPECT_EQ(used(pool), kBlock + 4096);
    ASSERT_RT_OK(rtDeviceReset());
    EXPECT_EQ(used(pool), 0u) << "the reset freed the pool's allocations";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(p));
    rtMemPool_t current = nullptr;
    ASSERT_RT_OK(rtDeviceGetMemPool(&current, device()));
    EXPECT_EQ(current, static_cast<rtMemPool_t>(pool)) << "the pools and the current pool stay, as the strategies do";
    ASSERT_RT_OK(rtDeviceSetMemPool(device(), default_pool_));
}

// ---------------------------------------------------------------- the default pool and the memory strategies

TEST_P(MemPoolObjectTest, EnableSwitchesConfigureTheDefaultPool) {
    ASSERT_RT_OK(rtEnablePoolAllocator(64 * kMiB, 1 * kMiB, RT_POOL_DEFAULT));
    ASSERT_RT_OK(rtEnableMemoryReuse(1));
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    void* p = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&p, 3 * kMiB, s));
    EXPECT_EQ(used(default_pool_), 3 * kMiB);
    EXPECT_EQ(reserved(default_pool_), 3 * kMiB) << "three 1 MiB blocks of the enabled pool";
    const rtMemStats st = mem_stats();
    EXPECT_EQ(st.pool_size, 64 * kMiB);
    ASSERT_RT_OK(rtFreeAsync(p, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(reserved(default_pool_), 3 * kMiB) << "reuse on and no threshold: the cache stays";
    // A release threshold on the default pool trims its cache at the next synchronize.
    set_attr(default_pool_, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, 1 * kMiB);
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(reserved(default_pool_), 1 * kMiB);
    ASSERT_RT_OK(rtMemPoolTrimTo(default_pool_, 0));
    EXPECT_EQ(reserved(default_pool_), 0u);
    // The switches leave created pools alone: with reuse off on the device, a created pool still reuses.
    ASSERT_RT_OK(rtEnableMemoryReuse(0));
    PoolGuard pool(device());
    ASSERT_RT_OK(pool.status());
    void *x = nullptr, *y = nullptr;
    ASSERT_RT_OK(rtMallocFromPoolAsync(&x, kBlock, pool, s));
    ASSERT_RT_OK(rtFreeAsync(x, s));
    ASSERT_RT_OK(rtMallocFromPoolAsync(&y, kBlock, pool, s));
    EXPECT_EQ(x, y);
    EXPECT_EQ(reserved(pool), kBlock);
    ASSERT_RT_OK(rtFreeAsync(y, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

TEST_P(MemPoolObjectTest, DefaultPoolHighWaterMarksRestart) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    set_attr(default_pool_, RT_MEMPOOL_ATTR_USED_MEM_HIGH, 0);
    set_attr(default_pool_, RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0);
    const uint64_t base = used(default_pool_);
    EXPECT_EQ(attr(default_pool_, RT_MEMPOOL_ATTR_USED_MEM_HIGH), base);
    void* p = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&p, 5000, s));
    EXPECT_EQ(attr(default_pool_, RT_MEMPOOL_ATTR_USED_MEM_HIGH), base + 5000);
    EXPECT_GE(attr(default_pool_, RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 5000u);
    ASSERT_RT_OK(rtFreeAsync(p, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(attr(default_pool_, RT_MEMPOOL_ATTR_USED_MEM_HIGH), base + 5000);
    set_attr(default_pool_, RT_MEMPOOL_ATTR_USED_MEM_HIGH, 0);
    EXPECT_EQ(attr(default_pool_, RT_MEMPOOL_ATTR_USED_MEM_HIGH), used(default_pool_));
}

// ---------------------------------------------------------------- concurrency

TEST_P(MemPoolObjectTest, ThreadsAllocateAndFreeFromSharedPools) {
    PoolGuard a(device()), b(device());
    ASSERT_RT_OK(a.status());
    ASSERT_RT_OK(b.status());
    set_attr(b, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, 4 * kBlock);
    for (int threads : {2, 4, 8}) {
        SCOPED_TRACE(std::to_string(threads) + " threads");
        std::atomic<int> failures{0};
        std::vector<std::thread> pool_threads;
        const int rounds = static_cast<int>(rt_test::scaled(200, 20));
        for (int t = 0; t < threads; ++t)
            pool_threads.emplace_back([&, t] {
                if (rtSetDevice(device()) != RT_SUCCESS) return void(++failures);
                rtStream_t s = nullptr;
                if (rtStreamCreate(&s) != RT_SUCCESS) return void(++failures);
                rtMemPool_t pool = t % 2 ? static_cast<rtMemPool_t>(b) : static_cast<rtMemPool_t>(a);
                const size_t size = 4096 * static_cast<size_t>(t + 1);
                std::vector<unsigned char> back(size);
                for (int i = 0; i < rounds; ++i) {
                    void* p = nullptr;
                    if (rtMallocFromPoolAsync(&p, size, pool, s) != RT_SUCCESS) {
                        ++failures;
                        break;
                    }
                    const int value = (t * 31 + i) & 0xFF;
                    rtMemsetAsync(p, value, size, s);
                    rtMemcpyAsync(back.data(), p, size, RT_MEMCPY_DEVICE_TO_HOST, s);
                    rtFreeAsync(p, s);
                    if (i % 8 == 7) {
                        if (rtStreamSynchronize(s) != RT_SUCCESS) ++failures;
                        if (back[0] != value || back[size - 1] != value) ++failures;  // nobody else wrote it
                        uint64_t v = 0;
                        rtMemPoolGetAttribute(pool, RT_MEMPOOL_ATTR_USED_MEM_CURRENT, &v);
                        rtMemPoolTrimTo(pool, kBlock);
                    }
                }
                if (rtStreamSynchronize(s) != RT_SUCCESS) ++failures;
                rtStreamDestroy(s);
            });
        for (auto& th : pool_threads) th.join();
        EXPECT_EQ(failures.load(), 0);
        EXPECT_EQ(used(a), 0u);
        EXPECT_EQ(used(b), 0u);
        EXPECT_LE(attr(a, RT_MEMPOOL_ATTR_USED_MEM_HIGH), 4096u * (1 + 3 + 5 + 7));
    }
    ASSERT_RT_OK(rtDeviceSynchronize());
    EXPECT_LE(reserved(b), 4 * kBlock);
}

TEST_P(MemPoolObjectTest, ThreadsCreateSetAndDestroyPools) {
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            if (rtSetDevice(device()) != RT_SUCCESS) return void(++failures);
            for (int i = 0; i < 20; ++i) {
                rtMemPoolProps props = pool_props(device(), 8 * kMiB);
                rtMemPool_t pool = nullptr;
                if (rtMemPoolCreate(&pool, &props) != RT_SUCCESS) return void(++failures);
                rtDeviceSetMemPool(device(), pool);  // races with the others: any of them may be current
                void* p = nullptr;
                if (rtMallocAsync(&p, 1000, nullptr) == RT_SUCCESS) rtFreeAsync(p, nullptr);
                if (rtMemPoolDestroy(pool) != RT_SUCCESS) ++failures;
            }
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    ASSERT_RT_OK(rtDeviceSynchronize());
    rtMemPool_t current = nullptr;
    ASSERT_RT_OK(rtDeviceGetMemPool(&current, device()));
    EXPECT_EQ(current, default_pool_) << "every pool that was current was destroyed: the default one is current";
}

RT_INSTANTIATE_DEVICE_TEST(MemPoolObjectTest);

// ---------------------------------------------------------------- two devices

/// Two cpu devices whatever the environment says: the runtime is made again with them, and again with the defaults
/// at the end (the next test's first call).
TEST(MemPoolTwoDevices, PoolsOfAnotherDeviceAreRefused) {
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtInit("cpu.devices=2"));
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    ASSERT_GE(n, 2);
    for (int dev = 0; dev < 2; ++dev) {
        SCOPED_TRACE("device " + std::to_string(dev));
        ASSERT_RT_OK(rtSetDevice(dev));
        const int other = 1 - dev;
        rtMemPool_t own_default = nullptr, other_default = nullptr;
        ASSERT_RT_OK(rtDeviceGetDefaultMemPool(&own_default, dev));
        ASSERT_RT_OK(rtDeviceGetDefaultMemPool(&other_default, other));
        EXPECT_NE(other_default, own_default);
        {
            PoolGuard foreign(other);
            ASSERT_RT_OK(foreign.status());
            EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDeviceSetMemPool(dev, foreign));
            EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "not to device " + std::to_string(dev)));
            StreamGuard s;
            ASSERT_RT_OK(s.status());
            void* p = nullptr;
            EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMallocFromPoolAsync(&p, 256, foreign, s));
            EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "expected a pool of the stream's device"));
            EXPECT_EQ(p, nullptr);
            EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDeviceSetMemPool(dev, other_default));
            // The pool of the other device serves a stream of its own device, and counts there only.
            ASSERT_RT_OK(rtSetDevice(other));
            StreamGuard s_other;
            ASSERT_RT_OK(s_other.status());
            ASSERT_RT_OK(rtMallocFromPoolAsync(&p, 4096, foreign, s_other));
            EXPECT_EQ(used(foreign), 4096u);
            EXPECT_EQ(mem_stats().allocated_bytes, 4096u);
            ASSERT_RT_OK(rtSetDevice(dev));
            EXPECT_EQ(mem_stats().allocated_bytes, 0u);
            ASSERT_RT_OK(rtFreeAsync(p, s_other));
            ASSERT_RT_OK(rtStreamSynchronize(s_other));
        }
        rtMemPool_t current = nullptr;
        ASSERT_RT_OK(rtDeviceGetMemPool(&current, dev));
        EXPECT_EQ(current, own_default);
    }
    ASSERT_RT_OK(rtFinalize());
}

// ---------------------------------------------------------------- C++ face

TEST(MemPoolCpp, RaiiPoolAllocatesTrimsAndDestroys) {
    ASSERT_RT_OK(rtSetDevice(0));
    runtime::Stream s;
    {
        runtime::MemPool pool(runtime::MemPoolOptions{.device = 0, .max_size = 64 * kMiB, .release_threshold = kBlock});
        EXPECT_TRUE(pool.owns());
        EXPECT_EQ(pool.release_threshold(), kBlock);
        void* p = pool.allocate(3 * kBlock, s);
        EXPECT_EQ(pool.used(), 3 * kBlock);
        EXPECT_EQ(pool.reserved(), 3 * kBlock);
        runtime::free_async(p, s);
        s.synchronize();
        EXPECT_EQ(pool.reserved(), kBlock) << "the threshold at the synchronize";
        pool.trim_to(0);
        EXPECT_EQ(pool.reserved(), 0u);
        pool.make_current();
        EXPECT_EQ(runtime::MemPool::current(0).native_handle(), pool.native_handle());
        EXPECT_FALSE(runtime::MemPool::current(0).owns());
        pool.set_reuse(RT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, false);
        EXPECT_FALSE(pool.reuse(RT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC));
        runtime::MemPool moved = std::move(pool);
        EXPECT_EQ(pool.native_handle(), nullptr);
        EXPECT_TRUE(moved.owns());
    }
    // Destroyed with the object: the device's default pool is current again.
    EXPECT_EQ(runtime::MemPool::current(0).native_handle(), runtime::MemPool::default_pool(0).native_handle());
    try {
        runtime::MemPool::default_pool(1000);
        ADD_FAILURE() << "no exception";
    } catch (const runtime::Error& e) {
        EXPECT_EQ(e.code(), RT_ERROR_INVALID_DEVICE);
    }
}

}  // namespace
