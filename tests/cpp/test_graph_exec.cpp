// test_graph_exec.cpp — executable graphs built with the C API: results of every node kind, child graphs, events,
// memory planning figures, updates that succeed and that are refused, failures in nodes, ordering, destruction.
#include "test_util.hpp"

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

using namespace rt_test;

namespace {

RT_TEST_TEMP_CACHE_DIR("graph-exec");

const char* const kSource = R"rtsrc(
RT_KERNEL void add(int32_t* data, int32_t n, int32_t delta) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) data[i] += delta;
}
RT_KERNEL void scale(const int32_t* in, int32_t* out, int32_t n, int32_t factor) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) out[i] = in[i] * factor;
}
RT_KERNEL void store_ptr(int32_t* p, uint64_t* out) { out[0] = (uint64_t)p; }
// Fails (rt_assert) when data[0] == bad; otherwise stores 7 into data[1].
RT_KERNEL void checked(int32_t* data, int32_t bad) {
    if (get_global_id(0) != 0) return;
    rt_assert(data[0] != bad);
    data[1] = 7;
}
)rtsrc";

constexpr int kN = 64;
constexpr size_t kBytes = kN * sizeof(int32_t);

/// The order host nodes ran in.
struct Log {
    std::mutex mutex;
    std::vector<int> order;
};



/// The parameter: a device index, plus kCoreReplay for the runs with RUNTIME_GRAPH_LOWERING=0, where the core
/// replays every executable graph command by command (what a backend without lowering gets, cuda's path).
constexpr int kCoreReplay = 1 << 16;

std::vector<int> devices_and_modes() {
    std::vector<int> v = device_indices();
    const size_t n = v.size();
    for (size_t i = 0; i < n; ++i) v.push_back(v[i] | kCoreReplay);
    return v;
}

std::string mode_name(const ::testing::TestParamInfo<int>& info) {
    return "dev" + std::to_string(info.param & ~kCoreReplay) + ((info.param & kCoreReplay) ? "_core_replay" : "");
}

class GraphExecTest : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        if (GetParam() & kCoreReplay) lowering_.emplace("RUNTIME_GRAPH_LOWERING", "0");
        ASSERT_RT_OK(rtSetDevice(device()));
        if (!launches_execute(device())) GTEST_SKIP() << "kernels do not run on this device (fake driver)";
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kSource, nullptr));
        ASSERT_RT_OK(rtModuleGetFunction(&add_, module_, "add"));
        ASSERT_RT_OK(rtModuleGetFunction(&scale_, module_, "scale"));
        ASSERT_RT_OK(rtModuleGetFunction(&checked_, module_, "checked"));
        ASSERT_RT_OK(rtModuleGetFunction(&store_ptr_, module_, "store_ptr"));
    }
    void TearDown() override {
        if (module_) {
            EXPECT_RT_OK(rtModuleUnload(module_));
        }
    }

    static rtKernelNodeParams kernel_params(rtFunction_t f, void** args, unsigned items = kN) {
        rtKernelNodeParams p{};
        p.function = f;
        p.grid = rtDim3{(items + 63) / 64, 1, 1};
        p.block = rtDim3{64, 1, 1};
        p.args = args;
        p.global[0] = items;
        return p;
    }
    /// add(data, n, delta) after `deps`.
    rtError_t add_node(rtGraphNode_t* node, rtGraph_t g, std::vector<rtGraphNode_t> deps, void* data, int32_t delta,
                       int32_t n = kN) {
        void* args[] = {&data, &n, &delta};
        rtKernelNodeParams p = kernel_params(add_, args);
        return rtGraphAddKernelNode(node, g, deps.data(), deps.size(), &p);
    }
    rtError_t scale_node(rtGraphNode_t* node, rtGraph_t g, std::vector<rtGraphNode_t> deps, const void* in, void* out,
                         int32_t factor) {
        int32_t n = kN;
        void* args[] = {&in, &out, &n, &factor};
        rtKernelNodeParams p = kernel_params(scale_, args);
        return rtGraphAddKernelNode(node, g, deps.data(), deps.size(), &p);
    }
    static rtError_t copy_node(rtGraphNode_t* node, rtGraph_t g, std::vector<rtGraphNode_t> deps, void* dst,
                               const void* src, size_t bytes, rtMemcpyKind kind = RT_MEMCPY_DEFAULT) {
        rtMemcpyNodeParams p{dst, src, bytes, kind};
        return rtGraphAddMemcpyNode(node, g, deps.data(), deps.size(), &p);
    }
    static rtError_t fill_node(rtGraphNode_t* node, rtGraph_t g, std::vector<rtGraphNode_t> deps, void* dst, int value,
                               size_t bytes) {
        rtMemsetNodeParams p{dst, value, bytes};
        return rtGraphAddMemsetNode(node, g, deps.data(), deps.size(), &p);
    }
    static rtError_t alloc_node(rtGraphNode_t* node, void** ptr, rtGraph_t g, std::vector<rtGraphNode_t> deps,
                                size_t bytes) {
        rtMemAllocNodeParams p{bytes, nullptr};
        rtError_t e = rtGraphAddMemAllocNode(node, g, deps.data(), deps.size(), &p);
        *ptr = p.ptr;
        return e;
    }
    static std::vector<int32_t> read(const void* d, size_t count = kN) {
        std::vector<int32_t> v(count, -1);
        EXPECT_RT_OK(rtMemcpy(v.data(), d, count * sizeof(int32_t), RT_MEMCPY_DEVICE_TO_HOST));
        return v;
    }
    static void write(void* d, const std::vector<int32_t>& v) {
        ASSERT_RT_OK(rtMemcpy(d, v.data(), v.size() * sizeof(int32_t), RT_MEMCPY_HOST_TO_DEVICE));
    }
    static std::vector<int32_t> iota(int32_t from = 0) {
        std::vector<int32_t> v(kN);
        for (int i = 0; i < kN; ++i) v[static_cast<size_t>(i)] = from + i;
        return v;
    }

    int device() const { return GetParam() & ~kCoreReplay; }

    rtModule_t module_ = nullptr;
    rtFunction_t add_ = nullptr, scale_ = nullptr, checked_ = nullptr, store_ptr_ = nullptr;

private:
    std::optional<EnvVar> lowering_;
    // Below the per-test CTest TIMEOUT (60 s) so a hang reports itself with the test name.
    Watchdog watchdog_{std::chrono::milliseconds(45000),
                       ::testing::UnitTest::GetInstance()->current_test_info()
                           ? ::testing::UnitTest::GetInstance()->current_test_info()->name()
                           : "test"};
};

// ---------------------------------------------------------------- results

TEST_P(GraphExecTest, CopiesKernelsFillsAndHostNodesRunInDependencyOrder) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    DevBuf a(kBytes), b(kBytes), c(kBytes);
    HostBuf in(kBytes), out(kBytes);
    const std::vector<int32_t> input = iota(1);
    std::memcpy(in.get(), input.data(), kBytes);
    std::memset(out.get(), 0, kBytes);

    // H2D → add 10 → scale ×3 into b → D2H; in parallel: fill c with 0x01; a host node after the D2H reads out.
    GraphGuard g;
    ASSERT_RT_OK(g.status());
    rtGraphNode_t h2d, k1, k2, d2h, fill, host;
    ASSERT_RT_OK(copy_node(&h2d, g, {}, a.get(), in.get(), kBytes, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(add_node(&k1, g, {h2d}, a.get(), 10));
    ASSERT_RT_OK(scale_node(&k2, g, {k1}, a.get(), b.get(), 3));
    ASSERT_RT_OK(copy_node(&d2h, g, {k2}, out.get(), b.get(), kBytes));
    ASSERT_RT_OK(fill_node(&fill, g, {}, c.get(), 1, kBytes));
    struct Seen {
        const int32_t* out;
        int32_t last = -1;
        int calls = 0;
    } seen{reinterpret_cast<const int32_t*>(out.get())};
    rtHostNodeParams hp{[](void* p) {
                            auto* s = static_cast<Seen*>(p);
                            s->last = s->out[kN - 1];
                            ++s->calls;
                        },
                        &seen};
    ASSERT_RT_OK(rtGraphAddHostNode(&host, g, &d2h, 1, &hp));

    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    for (int launch = 0; launch < 3; ++launch) {
        ASSERT_RT_OK(rtGraphLaunch(x, s));
        ASSERT_RT_OK(rtStreamSynchronize(s));
        const auto* o = reinterpret_cast<const int32_t*>(out.get());
        for (int i = 0; i < kN; ++i) ASSERT_EQ(o[i], (input[static_cast<size_t>(i)] + 10) * 3) << "item " << i;
        EXPECT_EQ(seen.last, (input[kN - 1] + 10) * 3) << "the host node ran after the copy it depends on";
        EXPECT_EQ(seen.calls, launch + 1);
    }
    for (int32_t v : read(c.get())) ASSERT_EQ(v, 0x01010101);
}

TEST_P(GraphExecTest, TheExecutableGraphDoesNotDependOnItsGraph) {
    DevBuf a(kBytes);
    write(a.get(), iota());
    ExecGuard x;
    {
        GraphGuard g;
        rtGraphNode_t k;
        ASSERT_RT_OK(add_node(&k, g, {}, a.get(), 5));
        ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    }  // destroyed
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    std::vector<int32_t> v = read(a.get());
    for (int i = 0; i < kN; ++i) ASSERT_EQ(v[static_cast<size_t>(i)], i + 10);
}

TEST_P(GraphExecTest, ChildGraphsRunInPlaceOfTheirNode) {
    DevBuf a(kBytes);
    write(a.get(), iota());
    GraphGuard child;
    rtGraphNode_t c1, c2;
    ASSERT_RT_OK(add_node(&c1, child, {}, a.get(), 1));
    ASSERT_RT_OK(add_node(&c2, child, {c1}, a.get(), 2));

    // fill a with 0 → child (+1, +2) → child again (+1, +2) → add 100; changes to `child` afterwards do not count.
    GraphGuard g;
    rtGraphNode_t fill, n1, n2, last;
    ASSERT_RT_OK(fill_node(&fill, g, {}, a.get(), 0, kBytes));
    ASSERT_RT_OK(rtGraphAddChildGraphNode(&n1, g, &fill, 1, child));
    ASSERT_RT_OK(rtGraphAddChildGraphNode(&n2, g, &n1, 1, child));
    ASSERT_RT_OK(add_node(&last, g, {n2}, a.get(), 100));
    rtGraphNode_t later;
    ASSERT_RT_OK(add_node(&later, child, {c2}, a.get(), 1000));

    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    for (int32_t v : read(a.get())) ASSERT_EQ(v, 106);
}

TEST_P(GraphExecTest, AnEmptyGraphLaunchesAndRecordsItsEvents) {
    EventGuard e;
    GraphGuard g;
    rtGraphNode_t n;
    ASSERT_RT_OK(rtGraphAddEventRecordNode(&n, g, nullptr, 0, e));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtEventSynchronize(e));
    ASSERT_RT_OK(rtEventQuery(e));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
}

// ---------------------------------------------------------------- events

TEST_P(GraphExecTest, AWaitNodeHoldsTheLaunchUntilTheEventAndARecordNodeFollowsIt) {
    StreamGuard s1, s2;
    EventGuard before, after;
    DevBuf a(kBytes);
    write(a.get(), iota());
    HostBuf out(kBytes);

    // s2: gate → fill a with 0x02 → record `before`. The graph waits for `before`, adds 1, copies out, and records
    // `after`.
    Gate gate;
    ASSERT_RT_OK(gate.launch(s2));
    ASSERT_RT_OK(rtMemsetAsync(a.get(), 2, kBytes, s2));
    ASSERT_RT_OK(rtEventRecord(before, s2));

    GraphGuard g;
    rtGraphNode_t wait, k, d2h, rec;
    ASSERT_RT_OK(rtGraphAddEventWaitNode(&wait, g, nullptr, 0, before));
    ASSERT_RT_OK(add_node(&k, g, {wait}, a.get(), 1));
    ASSERT_RT_OK(copy_node(&d2h, g, {k}, out.get(), a.get(), kBytes));
    ASSERT_RT_OK(rtGraphAddEventRecordNode(&rec, g, &d2h, 1, after));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    ASSERT_RT_OK(rtGraphLaunch(x, s1));

    // The gate holds s2, so `before` cannot complete, so neither can the launch nor `after`.
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(s1));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtEventQuery(after));
    gate.open();
    ASSERT_RT_OK(rtEventSynchronize(after));
    const auto* o = reinterpret_cast<const int32_t*>(out.get());
    for (int i = 0; i < kN; ++i) ASSERT_EQ(o[i], 0x02020202 + 1) << "item " << i;
    ASSERT_RT_OK(rtStreamSynchronize(s1));
    ASSERT_RT_OK(rtStreamSynchronize(s2));
}

// ---------------------------------------------------------------- memory planning

TEST_P(GraphExecTest, AChainOfAllocationsReusesOneAllocationsMemory) {
    // alloc → fill → add → copy out → free, three times in a chain: each allocation may reuse the previous one's.
    constexpr size_t kAlloc = 4096;
    GraphGuard g;
    HostBuf out(3 * kBytes);
    std::vector<rtGraphNode_t> tail;
    for (int stage = 0; stage < 3; ++stage) {
        rtGraphNode_t al, fill, k, d2h, fr;
        void* p = nullptr;
        ASSERT_RT_OK(alloc_node(&al, &p, g, tail, kAlloc));
        ASSERT_NE(p, nullptr);
        ASSERT_RT_OK(fill_node(&fill, g, {al}, p, stage + 1, kBytes));
        ASSERT_RT_OK(add_node(&k, g, {fill}, p, stage));
        ASSERT_RT_OK(copy_node(&d2h, g, {k}, out.get() + stage * kBytes, p, kBytes));
        ASSERT_RT_OK(rtGraphAddMemFreeNode(&fr, g, &d2h, 1, p));
        tail = {fr};
    }
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    rtGraphMemoryInfo info{};
    ASSERT_RT_OK(rtGraphExecGetMemoryInfo(x, &info));
    EXPECT_EQ(info.allocations, 3u);
    EXPECT_EQ(info.allocated_bytes, 3 * kAlloc);
    EXPECT_EQ(info.arena_bytes, kAlloc) << "each allocation is freed before the next one is made";

    for (int launch = 0; launch < 2; ++launch) {
        std::memset(out.get(), 0, 3 * kBytes);
        ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        const auto* o = reinterpret_cast<const int32_t*>(out.get());
        for (int stage = 0; stage < 3; ++stage) {
            const int32_t byte = stage + 1;
            const int32_t filled = byte | byte << 8 | byte << 16 | byte << 24;
            for (int i = 0; i < kN; ++i) ASSERT_EQ(o[stage * kN + i], filled + stage) << "stage " << stage;
        }
    }
}

TEST_P(GraphExecTest, AllocationsAliveAtTheSameTimeDoNotShare) {
    GraphGuard g;
    HostBuf out(3 * kBytes);
    // Three independent branches (alloc → fill → copy out → free), plus one allocation no node frees.
    std::vector<rtGraphNode_t> frees;
    for (int branch = 0; branch < 3; ++branch) {
        rtGraphNode_t al, fill, d2h, fr;
        void* p = nullptr;
        ASSERT_RT_OK(alloc_node(&al, &p, g, {}, 1000));  // 1024 once aligned
        ASSERT_RT_OK(fill_node(&fill, g, {al}, p, 0x10 + branch, kBytes));
        ASSERT_RT_OK(copy_node(&d2h, g, {fill}, out.get() + branch * kBytes, p, kBytes));
        ASSERT_RT_OK(rtGraphAddMemFreeNode(&fr, g, &d2h, 1, p));
        frees.push_back(fr);
    }
    rtGraphNode_t kept;
    void* q = nullptr;
    // After every free, but never freed itself: it keeps its memory and contents from launch to launch, so the
    // branches' memory, reused at the next launch, cannot be its.
    ASSERT_RT_OK(alloc_node(&kept, &q, g, frees, 512));

    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    rtGraphMemoryInfo info{};
    ASSERT_RT_OK(rtGraphExecGetMemoryInfo(x, &info));
    EXPECT_EQ(info.allocations, 4u);
    EXPECT_EQ(info.allocated_bytes, 3 * 1000u + 512u);
    EXPECT_EQ(info.arena_bytes, 3 * 1024u + 512u) << "the branches overlap in time; the kept allocation shares with none";

    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    const auto* o = reinterpret_cast<const unsigned char*>(out.get());
    for (int branch = 0; branch < 3; ++branch)
        for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(o[branch * kBytes + i], 0x10 + branch) << "branch " << branch;
}

TEST_P(GraphExecTest, AllocationsWithoutAFreeNodeLiveToTheEnd) {
    GraphGuard g;
    rtGraphNode_t a1, a2, f1;
    void *p1 = nullptr, *p2 = nullptr;
    ASSERT_RT_OK(alloc_node(&a1, &p1, g, {}, 256));
    ASSERT_RT_OK(fill_node(&f1, g, {a1}, p1, 1, 256));
    ASSERT_RT_OK(alloc_node(&a2, &p2, g, {f1}, 256));  // after a1's use, but a1 is never freed
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    rtGraphMemoryInfo info{};
    ASSERT_RT_OK(rtGraphExecGetMemoryInfo(x, &info));
    EXPECT_EQ(info.arena_bytes, 512u);
    EXPECT_EQ(info.allocated_bytes, 512u);
    EXPECT_EQ(info.allocations, 2u);
}

TEST_P(GraphExecTest, AnAllocationWithoutAFreeNodeKeepsItsContentsFromLaunchToLaunch) {
    // b: alloc → fill 0xAA → free; then a (never freed): copy out what it held at the end of the previous launch,
    // then fill 0x11. b's fill must not land in a's memory.
    GraphGuard g;
    HostBuf out(256);
    std::memset(out.get(), 0, 256);
    rtGraphNode_t nb, fb, freeb, na, cp, fa;
    void *b = nullptr, *a = nullptr;
    ASSERT_RT_OK(alloc_node(&nb, &b, g, {}, 256));
    ASSERT_RT_OK(fill_node(&fb, g, {nb}, b, 0xAA, 256));
    ASSERT_RT_OK(rtGraphAddMemFreeNode(&freeb, g, &fb, 1, b));
    ASSERT_RT_OK(alloc_node(&na, &a, g, {freeb}, 256));
    ASSERT_RT_OK(copy_node(&cp, g, {na}, out.get(), a, 256, RT_MEMCPY_DEVICE_TO_HOST));
    ASSERT_RT_OK(fill_node(&fa, g, {cp}, a, 0x11, 256));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, RT_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    rtGraphMemoryInfo info{};
    ASSERT_RT_OK(rtGraphExecGetMemoryInfo(x, &info));
    EXPECT_EQ(info.arena_bytes, 512u) << "a shares with no allocation";
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    const auto* o = static_cast<const unsigned char*>(out.get());
    for (size_t i = 0; i < 256; ++i) ASSERT_EQ(o[i], 0x11) << "byte " << i << " of what a held after the first launch";
}

TEST_P(GraphExecTest, KernelArgumentsAndCopiesReachTheArena) {
    // alloc p → copy iota into p → add 3 (kernel argument p) → scale p into q (alloc) → copy q out; frees at the end.
    GraphGuard g;
    HostBuf in(kBytes), out(kBytes);
    const std::vector<int32_t> input = iota();
    std::memcpy(in.get(), input.data(), kBytes);
    rtGraphNode_t ap, aq, h2d, k1, k2, d2h, fp, fq;
    void *p = nullptr, *q = nullptr;
    ASSERT_RT_OK(alloc_node(&ap, &p, g, {}, kBytes));
    ASSERT_RT_OK(alloc_node(&aq, &q, g, {}, kBytes));
    ASSERT_RT_OK(copy_node(&h2d, g, {ap}, p, in.get(), kBytes));
    ASSERT_RT_OK(add_node(&k1, g, {h2d}, p, 3));
    ASSERT_RT_OK(scale_node(&k2, g, {k1, aq}, p, q, -2));
    ASSERT_RT_OK(copy_node(&d2h, g, {k2}, out.get(), q, kBytes));
    ASSERT_RT_OK(rtGraphAddMemFreeNode(&fp, g, &d2h, 1, p));
    ASSERT_RT_OK(rtGraphAddMemFreeNode(&fq, g, &d2h, 1, q));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    rtGraphMemoryInfo info{};
    ASSERT_RT_OK(rtGraphExecGetMemoryInfo(x, &info));
    EXPECT_EQ(info.arena_bytes, 2 * kBytes);
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    const auto* o = reinterpret_cast<const int32_t*>(out.get());
    for (int i = 0; i < kN; ++i) ASSERT_EQ(o[i], (i + 3) * -2) << "item " << i;
}

TEST_P(GraphExecTest, AUseOfAllocatedMemoryOutsideItsLifetimeIsRefused) {
    {  // a fill that does not depend on the allocation node
        GraphGuard g;
        rtGraphNode_t al, fill;
        void* p = nullptr;
        ASSERT_RT_OK(alloc_node(&al, &p, g, {}, 1024));
        rtGraphNode_t other;
        ASSERT_RT_OK(rtGraphAddEmptyNode(&other, g, nullptr, 0));
        ASSERT_RT_OK(fill_node(&fill, g, {other}, p, 0, 1024));
        ExecGuard x;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphInstantiate(x.out(), g, 0));
        EXPECT_TRUE(contains(last_message(), "node 2 (")) << last_message();
        EXPECT_TRUE(contains(last_message(), "does not run after")) << last_message();
        EXPECT_EQ(static_cast<rtGraphExec_t>(x), nullptr);
    }
    {  // a kernel that runs after the allocation but not before its free
        GraphGuard g;
        rtGraphNode_t al, fill, fr, k;
        void* p = nullptr;
        ASSERT_RT_OK(alloc_node(&al, &p, g, {}, kBytes));
        ASSERT_RT_OK(fill_node(&fill, g, {al}, p, 0, kBytes));
        ASSERT_RT_OK(rtGraphAddMemFreeNode(&fr, g, &fill, 1, p));
        ASSERT_RT_OK(add_node(&k, g, {al}, p, 1));
        ExecGuard x;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphInstantiate(x.out(), g, 0));
        EXPECT_TRUE(contains(last_message(), "node 3 (kernel 'add')")) << last_message();
        EXPECT_TRUE(contains(last_message(), "does not run before node 2 (")) << last_message();
    }
}

// ---------------------------------------------------------------- updates

/// add(a, n, delta) → scale(a → b, factor) → copy b → out, built the same way each time.
struct Pipeline {
    rtGraph_t graph = nullptr;
    rtGraphNode_t k1 = nullptr, k2 = nullptr, d2h = nullptr;
};

class GraphUpdate : public GraphExecTest {
protected:
    Pipeline build(int32_t delta, int32_t factor, void* out) {
        Pipeline p;
        EXPECT_RT_OK(rtGraphCreate(&p.graph, 0));
        EXPECT_RT_OK(add_node(&p.k1, p.graph, {}, a_.get(), delta));
        EXPECT_RT_OK(scale_node(&p.k2, p.graph, {p.k1}, a_.get(), b_.get(), factor));
        EXPECT_RT_OK(copy_node(&p.d2h, p.graph, {p.k2}, out, b_.get(), kBytes));
        graphs_.push_back(p.graph);
        return p;
    }
    void TearDown() override {
        for (rtGraph_t g : graphs_) EXPECT_RT_OK(rtGraphDestroy(g));
        GraphExecTest::TearDown();
    }
    /// Launches `x` once with a = iota and returns out.
    std::vector<int32_t> run(rtGraphExec_t x, const HostBuf& out) {
        write(a_.get(), iota());
        EXPECT_RT_OK(rtGraphLaunch(x, nullptr));
        EXPECT_RT_OK(rtStreamSynchronize(nullptr));
        const auto* o = reinterpret_cast<const int32_t*>(out.get());
        return std::vector<int32_t>(o, o + kN);
    }
    static std::vector<int32_t> expected(int32_t delta, int32_t factor) {
        std::vector<int32_t> v(kN);
        for (int i = 0; i < kN; ++i) v[static_cast<size_t>(i)] = (i + delta) * factor;
        return v;
    }

    DevBuf a_{kBytes}, b_{kBytes};
    HostBuf out_{kBytes}, other_out_{kBytes};
    std::vector<rtGraph_t> graphs_;
};

TEST_P(GraphUpdate, AGraphOfTheSameShapeGivesItsParameters) {
    Pipeline p = build(1, 2, out_.get());
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), p.graph, 0));
    EXPECT_EQ(run(x, out_), expected(1, 2));

    Pipeline q = build(5, -3, other_out_.get());
    rtGraphExecUpdateResult result = RT_GRAPH_EXEC_UPDATE_ERROR;
    ASSERT_RT_OK(rtGraphExecUpdate(x, q.graph, &result));
    EXPECT_EQ(result, RT_GRAPH_EXEC_UPDATE_SUCCESS);
    EXPECT_EQ(run(x, other_out_), expected(5, -3));
    ASSERT_RT_OK(rtGraphExecUpdate(x, p.graph, nullptr));  // back, result not asked for
    EXPECT_EQ(run(x, out_), expected(1, 2));
}

TEST_P(GraphUpdate, LaunchesQueuedBeforeAnUpdateKeepTheirParameters) {
    StreamGuard s;
    Pipeline p = build(1, 2, out_.get());
    Pipeline q = build(1, 10, other_out_.get());
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), p.graph, 0));
    write(a_.get(), iota());
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtGraphLaunch(x, s));  // held by the gate
    ASSERT_RT_OK(rtGraphExecUpdate(x, q.graph, nullptr));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    std::memset(out_.get(), 0, kBytes);
    std::memset(other_out_.get(), 0, kBytes);
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    // First launch: a = iota + 1, out = a * 2. Second: a += 1, other_out = a * 10.
    const auto* o = reinterpret_cast<const int32_t*>(out_.get());
    const auto* r = reinterpret_cast<const int32_t*>(other_out_.get());
    for (int i = 0; i < kN; ++i) {
        ASSERT_EQ(o[i], (i + 1) * 2) << "item " << i;
        ASSERT_EQ(r[i], (i + 2) * 10) << "item " << i;
    }
}

TEST_P(GraphUpdate, RefusedUpdatesSayWhatDifferedAndChangeNothing) {
    Pipeline p = build(1, 2, out_.get());
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), p.graph, 0));
    auto refused = [&](rtGraph_t g, rtGraphExecUpdateResult want, const char* words) {
        rtGraphExecUpdateResult result = RT_GRAPH_EXEC_UPDATE_SUCCESS;
        EXPECT_RT_ERROR(RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, rtGraphExecUpdate(x, g, &result));
        EXPECT_EQ(result, want) << last_message();
        EXPECT_TRUE(contains(last_message(), words)) << last_message();
        EXPECT_EQ(run(x, out_), expected(1, 2)) << "a refused update leaves the executable graph as it was";
    };
    {  // one node more
        Pipeline q = build(1, 2, out_.get());
        rtGraphNode_t extra;
        ASSERT_RT_OK(rtGraphAddEmptyNode(&extra, q.graph, &q.d2h, 1));
        refused(q.graph, RT_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, "4 nodes");
    }
    {  // another edge: the copy also depends on the first kernel
        rtGraph_t g;
        ASSERT_RT_OK(rtGraphCreate(&g, 0));
        graphs_.push_back(g);
        rtGraphNode_t k1, k2, d2h;
        ASSERT_RT_OK(add_node(&k1, g, {}, a_.get(), 1));
        ASSERT_RT_OK(scale_node(&k2, g, {k1}, a_.get(), b_.get(), 2));
        ASSERT_RT_OK(copy_node(&d2h, g, {k1, k2}, out_.get(), b_.get(), kBytes));
        refused(g, RT_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, "node 2 (");
    }
    {  // the second node is a fill instead of a kernel
        rtGraph_t g;
        ASSERT_RT_OK(rtGraphCreate(&g, 0));
        graphs_.push_back(g);
        rtGraphNode_t k1, f, d2h;
        ASSERT_RT_OK(add_node(&k1, g, {}, a_.get(), 1));
        ASSERT_RT_OK(fill_node(&f, g, {k1}, b_.get(), 0, kBytes));
        ASSERT_RT_OK(copy_node(&d2h, g, {f}, out_.get(), b_.get(), kBytes));
        refused(g, RT_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, "node 1 (kernel 'scale')");
    }
    {  // the copy goes the other way (device to device instead of device to host)
        rtGraph_t g;
        ASSERT_RT_OK(rtGraphCreate(&g, 0));
        graphs_.push_back(g);
        rtGraphNode_t k1, k2, d2d;
        ASSERT_RT_OK(add_node(&k1, g, {}, a_.get(), 1));
        ASSERT_RT_OK(scale_node(&k2, g, {k1}, a_.get(), b_.get(), 2));
        ASSERT_RT_OK(copy_node(&d2d, g, {k2}, a_.get(), b_.get(), kBytes));
        refused(g, RT_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, "node 2 (");
    }
}

TEST_P(GraphUpdate, UpdatesReachTheNodesOfChildGraphs) {
    // child graph (add delta) → copy a out.
    auto with_child = [&](int32_t delta) {
        rtGraph_t child, g;
        EXPECT_RT_OK(rtGraphCreate(&child, 0));
        EXPECT_RT_OK(rtGraphCreate(&g, 0));
        graphs_.push_back(child);
        graphs_.push_back(g);
        rtGraphNode_t k, c, d2h;
        EXPECT_RT_OK(add_node(&k, child, {}, a_.get(), delta));
        EXPECT_RT_OK(rtGraphAddChildGraphNode(&c, g, nullptr, 0, child));
        EXPECT_RT_OK(copy_node(&d2h, g, {c}, out_.get(), a_.get(), kBytes));
        return g;
    };
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), with_child(3), 0));
    EXPECT_EQ(run(x, out_), expected(3, 1));
    ASSERT_RT_OK(rtGraphExecUpdate(x, with_child(-4), nullptr));
    EXPECT_EQ(run(x, out_), expected(-4, 1));

    rtGraph_t child, g;  // an empty child graph, then an empty node in its place: another type
    ASSERT_RT_OK(rtGraphCreate(&child, 0));
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    graphs_.push_back(child);
    graphs_.push_back(g);
    rtGraphNode_t c;
    ASSERT_RT_OK(rtGraphAddChildGraphNode(&c, g, nullptr, 0, child));
    ExecGuard y;
    ASSERT_RT_OK(rtGraphInstantiate(y.out(), g, 0));
    rtGraph_t e;
    ASSERT_RT_OK(rtGraphCreate(&e, 0));
    graphs_.push_back(e);
    ASSERT_RT_OK(rtGraphAddEmptyNode(&c, e, nullptr, 0));
    rtGraphExecUpdateResult result;
    EXPECT_RT_ERROR(RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, rtGraphExecUpdate(y, e, &result));
    EXPECT_EQ(result, RT_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
    EXPECT_TRUE(contains(last_message(), "node 0 (child graph")) << last_message();
}

TEST_P(GraphUpdate, AllocationSizesAndEventsCannotChange) {
    auto with_alloc = [&](size_t bytes, rtEvent_t e) {
        rtGraph_t g;
        EXPECT_RT_OK(rtGraphCreate(&g, 0));
        graphs_.push_back(g);
        rtGraphNode_t al, fill, fr, rec;
        void* p = nullptr;
        EXPECT_RT_OK(alloc_node(&al, &p, g, {}, bytes));
        EXPECT_RT_OK(fill_node(&fill, g, {al}, p, 0, 256));
        EXPECT_RT_OK(rtGraphAddMemFreeNode(&fr, g, &fill, 1, p));
        EXPECT_RT_OK(rtGraphAddEventRecordNode(&rec, g, &fr, 1, e));
        return g;
    };
    EventGuard e1, e2;
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), with_alloc(1024, e1), 0));
    rtGraphExecUpdateResult result;
    ASSERT_RT_OK(rtGraphExecUpdate(x, with_alloc(1024, e1), &result)) << "a graph built again with new addresses";
    EXPECT_EQ(result, RT_GRAPH_EXEC_UPDATE_SUCCESS);
    EXPECT_RT_ERROR(RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, rtGraphExecUpdate(x, with_alloc(2048, e1), &result));
    EXPECT_EQ(result, RT_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED);
    EXPECT_TRUE(contains(last_message(), "node 0 (")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, rtGraphExecUpdate(x, with_alloc(1024, e2), &result));
    EXPECT_EQ(result, RT_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED);
    EXPECT_TRUE(contains(last_message(), "node 3 (")) << last_message();
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtEventSynchronize(e1));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
}

TEST_P(GraphUpdate, BadHandlesAreRefusedWithResultError) {
    Pipeline p = build(1, 2, out_.get());
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), p.graph, 0));
    rtGraphExecUpdateResult result = RT_GRAPH_EXEC_UPDATE_SUCCESS;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphExecUpdate(x, garbage_handle<rtGraph_t>(), &result));
    EXPECT_EQ(result, RT_GRAPH_EXEC_UPDATE_ERROR);
    result = RT_GRAPH_EXEC_UPDATE_SUCCESS;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphExecUpdate(garbage_handle<rtGraphExec_t>(), p.graph, &result));
    EXPECT_EQ(result, RT_GRAPH_EXEC_UPDATE_ERROR);
}

TEST_P(GraphUpdate, AGraphOfAnotherDeviceIsRefused) {
    int count = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&count));
    int other = -1;
    for (int d = 0; d < count && other < 0; ++d)
        if (d != device() && backend_of(d) == backend_of(device())) other = d;
    if (other < 0) GTEST_SKIP() << "one device of this backend";
    Pipeline p = build(1, 2, out_.get());
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), p.graph, 0));
    GraphGuard empty_here;
    rtGraphNode_t e;
    ASSERT_RT_OK(rtGraphAddEmptyNode(&e, empty_here, nullptr, 0));
    ExecGuard y;
    ASSERT_RT_OK(rtGraphInstantiate(y.out(), empty_here, 0));

    ASSERT_RT_OK(rtSetDevice(other));
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, kSource, nullptr));
    rtFunction_t add = nullptr, scale = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&add, m, "add"));
    ASSERT_RT_OK(rtModuleGetFunction(&scale, m, "scale"));
    {
        DevBuf a(kBytes), b(kBytes);
        GraphGuard g, empty_there;
        rtGraphNode_t k1, k2, d2h, e2;
        void* pa = a.get();
        void* pb = b.get();
        int32_t n = kN, delta = 1, factor = 2;
        void* add_args[] = {&pa, &n, &delta};
        void* scale_args[] = {&pa, &pb, &n, &factor};
        rtKernelNodeParams kp1 = kernel_params(add, add_args), kp2 = kernel_params(scale, scale_args);
        ASSERT_RT_OK(rtGraphAddKernelNode(&k1, g, nullptr, 0, &kp1));
        ASSERT_RT_OK(rtGraphAddKernelNode(&k2, g, &k1, 1, &kp2));
        ASSERT_RT_OK(copy_node(&d2h, g, {k2}, out_.get(), b.get(), kBytes));
        ASSERT_RT_OK(rtGraphAddEmptyNode(&e2, empty_there, nullptr, 0));
        rtGraphExecUpdateResult result = RT_GRAPH_EXEC_UPDATE_SUCCESS;
        EXPECT_RT_ERROR(RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, rtGraphExecUpdate(x, g, &result));
        EXPECT_EQ(result, RT_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED);
        EXPECT_TRUE(contains(last_message(), "node 0 (kernel 'add')")) << last_message();
        EXPECT_RT_ERROR(RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, rtGraphExecUpdate(y, empty_there, &result));
        EXPECT_EQ(result, RT_GRAPH_EXEC_UPDATE_ERROR);
        EXPECT_TRUE(contains(last_message(), "belongs to")) << last_message();
    }
    EXPECT_RT_OK(rtModuleUnload(m));
    ASSERT_RT_OK(rtSetDevice(device()));
    EXPECT_EQ(run(x, out_), expected(1, 2));
}

TEST_P(GraphUpdate, KernelNodeParametersChangeForLaterLaunches) {
    Pipeline p = build(1, 2, out_.get());
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), p.graph, 0));
    EXPECT_EQ(run(x, out_), expected(1, 2));

    void* in = a_.get();
    void* out = b_.get();
    int32_t n = kN, factor = 7;
    void* args[] = {&in, &out, &n, &factor};
    rtKernelNodeParams kp = kernel_params(scale_, args);
    ASSERT_RT_OK(rtGraphExecKernelNodeSetParams(x, p.k2, &kp));
    EXPECT_EQ(run(x, out_), expected(1, 7));

    // Another kernel of the same device in the first node: checked(a, bad = 0) stores 7 into a[1] unless a[0] == 0.
    void* data = a_.get();
    int32_t bad = -1;
    void* cargs[] = {&data, &bad};
    rtKernelNodeParams cp = kernel_params(checked_, cargs, 1);
    ASSERT_RT_OK(rtGraphExecKernelNodeSetParams(x, p.k1, &cp));
    std::vector<int32_t> want = expected(0, 7);
    want[1] = 7 * 7;
    EXPECT_EQ(run(x, out_), want);

    // Refused, changing nothing: a node of another kind, a node of another graph, wrong arguments, NULL params.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecKernelNodeSetParams(x, p.d2h, &kp));
    EXPECT_TRUE(contains(last_message(), "node 2 (")) << last_message();
    Pipeline q = build(1, 2, out_.get());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecKernelNodeSetParams(x, q.k2, &kp));
    void* short_args[] = {&in};
    rtKernelNodeParams bad_params = kernel_params(scale_, short_args);
    bad_params.args = nullptr;
    EXPECT_NE(rtGraphExecKernelNodeSetParams(x, p.k2, &bad_params), RT_SUCCESS);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecKernelNodeSetParams(x, p.k2, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE,
                    rtGraphExecKernelNodeSetParams(x, garbage_handle<rtGraphNode_t>(), &kp));
    EXPECT_EQ(run(x, out_), want);
}

TEST_P(GraphUpdate, MemcpyNodeParametersChangeForLaterLaunches) {
    Pipeline p = build(1, 2, out_.get());
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), p.graph, 0));
    rtMemcpyNodeParams cp{other_out_.get(), b_.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST};
    ASSERT_RT_OK(rtGraphExecMemcpyNodeSetParams(x, p.d2h, &cp));
    std::memset(out_.get(), 0, kBytes);
    EXPECT_EQ(run(x, other_out_), expected(1, 2));
    for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(out_.get()[i], 0) << "the old destination is no longer written";

    rtMemcpyNodeParams other_way{a_.get(), b_.get(), kBytes, RT_MEMCPY_DEVICE_TO_DEVICE};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecMemcpyNodeSetParams(x, p.d2h, &other_way));
    rtMemcpyNodeParams too_long{other_out_.get(), b_.get(), kBytes + 1, RT_MEMCPY_DEVICE_TO_HOST};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecMemcpyNodeSetParams(x, p.d2h, &too_long));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecMemcpyNodeSetParams(x, p.k1, &cp));
    EXPECT_EQ(run(x, other_out_), expected(1, 2));
}

// ---------------------------------------------------------------- failures

TEST_P(GraphExecTest, AFailedNodeFailsTheLaunchNamingItAndTheStreamStaysUsable) {
    StreamGuard s;
    DevBuf a(kBytes);
    GraphGuard g;
    rtGraphNode_t e, k, after;
    ASSERT_RT_OK(rtGraphAddEmptyNode(&e, g, nullptr, 0));
    void* data = a.get();
    int32_t bad = 5;
    void* args[] = {&data, &bad};
    rtKernelNodeParams kp = kernel_params(checked_, args, 1);
    ASSERT_RT_OK(rtGraphAddKernelNode(&k, g, &e, 1, &kp));
    ASSERT_RT_OK(fill_node(&after, g, {k}, a.get(), 0x33, 4));  // a[0]: runs only after a successful check
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));

    write(a.get(), std::vector<int32_t>(kN, 5));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    const std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "kernel 'checked' (node 1 of the graph launched as operation #")) << msg;
    EXPECT_TRUE(contains(msg, "rt_assert")) << msg;
    std::vector<int32_t> v = read(a.get());
    // On cuda the GPU's work queued behind a failed kernel still runs (docs/cuda.md, graph.h): only the cpu device
    // can keep the node after the failed one from running.
    if (backend_of(device()) != "cuda") {
        EXPECT_EQ(v[0], 5) << "the node after the failed one did not run";
    }
    EXPECT_EQ(v[1], 5);

    write(a.get(), std::vector<int32_t>(kN, 1));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtStreamSynchronize(s)) << "the failure was reported once";
    v = read(a.get());
    EXPECT_EQ(v[0], 0x33333333);
    EXPECT_EQ(v[1], 7);
}

TEST_P(GraphExecTest, AFailedHostNodeIsNamed) {
    StreamGuard s;
    GraphGuard g;
    rtGraphNode_t e, h, after;
    ASSERT_RT_OK(rtGraphAddEmptyNode(&e, g, nullptr, 0));
    rtHostNodeParams hp{[](void*) { rtHostFuncSetError(RT_ERROR_INVALID_VALUE, "the input was odd"); }, nullptr};
    ASSERT_RT_OK(rtGraphAddHostNode(&h, g, &e, 1, &hp));
    std::atomic<bool> ran{false};
    rtHostNodeParams set{set_flag, &ran};
    ASSERT_RT_OK(rtGraphAddHostNode(&after, g, &h, 1, &set));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamSynchronize(s));
    EXPECT_TRUE(contains(last_message(), "(node 1 of the graph launched as operation #")) << last_message();
    EXPECT_TRUE(contains(last_message(), "the input was odd")) << last_message();
    EXPECT_FALSE(ran.load()) << "the node that depends on the failed one did not run";
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

// ---------------------------------------------------------------- ordering and lifetime

TEST_P(GraphExecTest, LaunchesOnTwoStreamsRunOneAtATimeInOrder) {
    StreamGuard s1, s2;
    Log log;
    struct Counter {
        std::atomic<int> next{0};
        Log* log;
    } counter{{0}, &log};
    GraphGuard g;
    rtGraphNode_t h;
    rtHostNodeParams hp{[](void* p) {
                            auto* c = static_cast<Counter*>(p);
                            std::lock_guard lock(c->log->mutex);
                            c->log->order.push_back(c->next.fetch_add(1));
                        },
                        &counter};
    ASSERT_RT_OK(rtGraphAddHostNode(&h, g, nullptr, 0, &hp));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));

    Gate gate;
    ASSERT_RT_OK(gate.launch(s1));
    ASSERT_RT_OK(rtGraphLaunch(x, s1));  // held by the gate
    ASSERT_RT_OK(rtGraphLaunch(x, s2));  // must wait for the launch on s1
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(s2));
    EXPECT_TRUE(log.order.empty());
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s2));
    ASSERT_RT_OK(rtStreamSynchronize(s1));
    EXPECT_EQ(log.order, (std::vector<int>{0, 1}));
}

TEST_P(GraphExecTest, DestroyWhileLaunchesAreQueuedLetsThemFinish) {
    StreamGuard s;
    HostBuf out(kBytes);
    std::memset(out.get(), 0, kBytes);
    GraphGuard g;
    rtGraphNode_t al, fill, k, d2h, fr;
    void* p = nullptr;
    ASSERT_RT_OK(alloc_node(&al, &p, g, {}, kBytes));
    ASSERT_RT_OK(fill_node(&fill, g, {al}, p, 0, kBytes));
    ASSERT_RT_OK(add_node(&k, g, {fill}, p, 9));
    ASSERT_RT_OK(copy_node(&d2h, g, {k}, out.get(), p, kBytes));
    ASSERT_RT_OK(rtGraphAddMemFreeNode(&fr, g, &d2h, 1, p));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    ASSERT_RT_OK(rtGraphDestroy(g.release()));

    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    rtGraphExec_t handle = x.release();
    ASSERT_RT_OK(rtGraphExecDestroy(handle));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphLaunch(handle, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphExecDestroy(handle));
    // Memory allocated now must not be the arena the queued launches still use: filled (on another stream, so
    // before the launches run), it must keep its bytes once they ran (their fill and kernel would change them).
    DevBuf other(kBytes);
    StreamGuard s2;
    ASSERT_RT_OK(rtMemsetAsync(other.get(), 0x7f, kBytes, s2));
    ASSERT_RT_OK(rtStreamSynchronize(s2));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    const auto* o = reinterpret_cast<const int32_t*>(out.get());
    for (int i = 0; i < kN; ++i) ASSERT_EQ(o[i], 9) << "item " << i;
    std::vector<unsigned char> back(kBytes);
    ASSERT_RT_OK(rtMemcpy(back.data(), other.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST));
    for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(back[i], 0x7f) << "byte " << i << " of memory allocated after the destroy";
}

TEST_P(GraphExecTest, AFailureQueuedAfterALaunchDoesNotReachTheNextLaunchOnAnotherStream) {
    StreamGuard s1, s2;
    std::atomic<int> runs{0};
    GraphGuard g;
    rtGraphNode_t h;
    rtHostNodeParams hp{[](void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }, &runs};
    ASSERT_RT_OK(rtGraphAddHostNode(&h, g, nullptr, 0, &hp));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    auto fail_host = [](void*) { rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, "unrelated failure"); };

    // The first launch on a second stream, the previous launch done: nothing to wait for.
    ASSERT_RT_OK(rtGraphLaunch(x, s1));
    ASSERT_RT_OK(rtStreamSynchronize(s1));
    ASSERT_RT_OK(rtLaunchHostFunc(s1, fail_host, nullptr));  // nothing to do with x
    ASSERT_RT_OK(rtGraphLaunch(x, s2));
    EXPECT_RT_OK(rtStreamSynchronize(s2));
    EXPECT_EQ(runs.load(), 2);
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s1));

    // From then on, every launch is followed by what the next one on another stream waits for, and only that. The
    // gate holds s1 so that the failure is queued, not yet happened, when s2's launch is queued.
    Gate gate;
    ASSERT_RT_OK(gate.launch(s1));
    ASSERT_RT_OK(rtGraphLaunch(x, s1));
    ASSERT_RT_OK(rtLaunchHostFunc(s1, fail_host, nullptr));
    ASSERT_RT_OK(rtGraphLaunch(x, s2));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(s2)) << "it waits for the launch on s1";
    gate.open();
    EXPECT_RT_OK(rtStreamSynchronize(s2)) << "the failure queued after the launch on s1 is not s2's";
    EXPECT_EQ(runs.load(), 4);
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s1));
}

TEST_P(GraphExecTest, UploadsDoNotRaceWithParameterUpdates) {
    // device() is read by rtGraphUpload (and rtGraphLaunch) without the exec's mutex while updates replace the
    // program under it: ThreadSanitizer checks that the two never share memory unordered.
    DevBuf d(kBytes);
    ASSERT_RT_OK(rtMemset(d.get(), 0, kBytes));
    void* p = d.get();
    int32_t n = kN, delta = 1;
    void* args[] = {&p, &n, &delta};
    rtKernelNodeParams kp = kernel_params(add_, args);
    GraphGuard g;
    rtGraphNode_t k;
    ASSERT_RT_OK(rtGraphAddKernelNode(&k, g, nullptr, 0, &kp));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    StreamGuard s;
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    std::atomic<bool> done{false};
    std::atomic<int> failures{0};
    std::thread uploader([&] {
        while (!done.load())
            if (rtGraphUpload(x, s) != RT_SUCCESS) failures.fetch_add(1);
    });
    for (int i = 0; i < 200; ++i) {
        ASSERT_RT_OK(rtGraphLaunch(x, s));                          // held by the gate: the change copies the program
        ASSERT_RT_OK(rtGraphExecKernelNodeSetParams(x, k, &kp));
    }
    done = true;
    uploader.join();
    EXPECT_EQ(failures.load(), 0);
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(read(d.get()), std::vector<int32_t>(kN, 200));
}

TEST_P(GraphExecTest, FreeingTheMemoryOfAnAllocationNodeIsRefused) {
    // A kernel sees the arena's real address; rtFree / rtFreeAsync of it must not free the executable graph's memory.
    DevBuf out(sizeof(uint64_t));
    GraphGuard g;
    rtGraphNode_t al, k, fill;
    void* a = nullptr;
    ASSERT_RT_OK(alloc_node(&al, &a, g, {}, 256));
    void* o = out.get();
    void* args[] = {&a, &o};
    rtKernelNodeParams kp = kernel_params(store_ptr_, args, 1);
    ASSERT_RT_OK(rtGraphAddKernelNode(&k, g, &al, 1, &kp));
    ASSERT_RT_OK(fill_node(&fill, g, {k}, a, 0x11, 256));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    uint64_t address = 0;
    ASSERT_RT_OK(rtMemcpy(&address, out.get(), sizeof address, RT_MEMCPY_DEVICE_TO_HOST));
    void* real = reinterpret_cast<void*>(address);
    ASSERT_NE(real, a) << "the kernel sees the arena, not the graph's address";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(real));
    EXPECT_NE(std::string(rtGetLastErrorMessage()).find("executable graph"), std::string::npos) << rtGetLastErrorMessage();
    StreamGuard s;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeAsync(real, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(static_cast<char*>(real) + 16));
    // Still device memory for copies and fills, of the size the arena has.
    unsigned char first = 0;
    ASSERT_RT_OK(rtMemcpy(&first, real, 1, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(first, 0x11);
    ASSERT_RT_OK(rtMemset(real, 0x22, 256));
    // The arena is still the exec's: its next launch writes there, not into memory handed out since.
    DevBuf mine(256);
    ASSERT_RT_OK(rtMemset(mine.get(), 0, 256));
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    ASSERT_RT_OK(rtMemcpy(&first, mine.get(), 1, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(first, 0);
    ASSERT_RT_OK(rtMemcpy(&first, real, 1, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(first, 0x11);
}

// ---------------------------------------------------------------- bad input

TEST_P(GraphExecTest, BadArgumentsAreRefused) {
    GraphGuard g;
    rtGraphExec_t x = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphInstantiate(nullptr, g, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphInstantiate(&x, nullptr, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphInstantiate(&x, garbage_handle<rtGraph_t>(), 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphInstantiate(&x, g, 2));
    EXPECT_TRUE(contains(last_message(), "flags")) << last_message();
    EXPECT_EQ(x, nullptr);
    ASSERT_RT_OK(rtGraphInstantiate(&x, g, RT_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));

    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphLaunch(nullptr, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphLaunch(garbage_handle<rtGraphExec_t>(), nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphLaunch(x, garbage_handle<rtStream_t>()));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphUpload(x, garbage_handle<rtStream_t>()));
    ASSERT_RT_OK(rtGraphUpload(x, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecGetMemoryInfo(x, nullptr));
    rtGraphMemoryInfo info{1, 1, 1};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphExecGetMemoryInfo(garbage_handle<rtGraphExec_t>(), &info));
    ASSERT_RT_OK(rtGraphExecGetMemoryInfo(x, &info));
    EXPECT_EQ(info.arena_bytes, 0u);
    EXPECT_EQ(info.allocations, 0u);
    ASSERT_RT_OK(rtGraphExecDestroy(x));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphExecDestroy(x));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphExecDestroy(nullptr));
}

TEST_P(GraphExecTest, AStreamOfAnotherDeviceIsRefused) {
    int count = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&count));
    int other = -1;
    for (int d = 0; d < count && other < 0; ++d)
        if (d != device() && backend_of(d) == backend_of(device())) other = d;
    if (other < 0) GTEST_SKIP() << "one device of this backend";
    GraphGuard g;
    rtGraphNode_t e;
    ASSERT_RT_OK(rtGraphAddEmptyNode(&e, g, nullptr, 0));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    ASSERT_RT_OK(rtSetDevice(other));
    StreamGuard s;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphLaunch(x, s));
    EXPECT_TRUE(contains(last_message(), "belongs to")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphUpload(x, s));
    ASSERT_RT_OK(rtSetDevice(device()));
}

INSTANTIATE_TEST_SUITE_P(AllDevices, GraphExecTest, ::testing::ValuesIn(devices_and_modes()), mode_name);
INSTANTIATE_TEST_SUITE_P(AllDevices, GraphUpdate, ::testing::ValuesIn(devices_and_modes()), mode_name);

}  // namespace
