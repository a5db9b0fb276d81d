// test_graph_cuda_fake.cpp — executable graphs lowered to native CUDA graphs, against the fake CUDA driver
// (tests/fake_cuda): the nodes and dependencies the driver receives, one cuGraphLaunch per launch, results equal to
// the stream version, updates taken into the instantiated graph (launches already queued keep theirs), failures
// naming the node, lifetimes. No GPU: kernels run no code here, so results come from copies, fills and host nodes
// (scripts/gpu-check.sh runs the graph suites on a GPU).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "../fake_cuda/fake_cuda.h"
#include "fake_cuda_api.hpp"
#include "test_util.hpp"

namespace {

using rt_test::contains;
using rt_test::DevBuf;
using rt_test::EventGuard;
using rt_test::ExecGuard;
using rt_test::Gate;
using rt_test::GraphGuard;
using rt_test::HostBuf;
using rt_test::last_message;
using rt_test::StreamGuard;

constexpr int kIllegalAddress = 700;  // CUDA_ERROR_ILLEGAL_ADDRESS
constexpr int kUnified = 4;           // CU_MEMORYTYPE_UNIFIED

/// The fake's query API, from the library the runtime loaded (dlopen of the same path: the same instance).
struct Fake {
    fake_cuda_launch_count_fn launch_count = nullptr;
    fake_cuda_last_launch_fn last_launch = nullptr;
    fake_cuda_inject_fault_fn inject_fault = nullptr;
    fake_cuda_assert_next_launch_at_fn assert_next_launch_at = nullptr;
    fake_cuda_exec_nodes_fn exec_nodes = nullptr;
    fake_cuda_graph_launch_count_fn graph_launches = nullptr;
    fake_cuda_graph_instantiate_count_fn instantiations = nullptr;
    fake_cuda_live_graphs_fn live_graphs = nullptr;
    fake_cuda_live_graph_execs_fn live_execs = nullptr;
    fake_cuda_host_func_count_fn host_func_count = nullptr;
    bool loaded = false;
};

const Fake& fake() {
    static const Fake f = [] {
        Fake r;
        using rt_test::fake_cuda_symbol;
        r.loaded = fake_cuda_symbol(r.launch_count, "fake_cuda_launch_count") &
                   fake_cuda_symbol(r.last_launch, "fake_cuda_last_launch") &
                   fake_cuda_symbol(r.inject_fault, "fake_cuda_inject_fault") &
                   fake_cuda_symbol(r.assert_next_launch_at, "fake_cuda_assert_next_launch_at") &
                   fake_cuda_symbol(r.exec_nodes, "fake_cuda_exec_nodes") &
                   fake_cuda_symbol(r.graph_launches, "fake_cuda_graph_launch_count") &
                   fake_cuda_symbol(r.instantiations, "fake_cuda_graph_instantiate_count") &
                   fake_cuda_symbol(r.live_graphs, "fake_cuda_live_graphs") &
                   fake_cuda_symbol(r.live_execs, "fake_cuda_live_graph_execs") &
                   fake_cuda_symbol(r.host_func_count, "fake_cuda_host_func_count");
        return r;
    }();
    return f;
}

/// The nodes of the executable graph instantiated last, as the driver runs them.
std::vector<FakeCudaGraphNode> exec_nodes() {
    int n = fake().exec_nodes(nullptr, 0);
    std::vector<FakeCudaGraphNode> v(n > 0 ? static_cast<size_t>(n) : 0);
    if (n > 0) fake().exec_nodes(v.data(), n);
    return v;
}

std::vector<int> deps_of(const FakeCudaGraphNode& n) { return std::vector<int>(n.deps, n.deps + n.num_deps); }

/// The index of the only node `pred` accepts (-1 and a test failure otherwise).
template <class Pred>
int only(const std::vector<FakeCudaGraphNode>& nodes, Pred pred, const char* what) {
    int found = -1, count = 0;
    for (size_t i = 0; i < nodes.size(); ++i)
        if (pred(nodes[i])) found = static_cast<int>(i), ++count;
    EXPECT_EQ(count, 1) << what;
    return count == 1 ? found : -1;
}



const char* kKernels = R"(
RT_KERNEL void scale(float* x, float a, int32_t n) {
    int32_t i = (int32_t)get_global_id(0);
    if (i < n) x[i] *= a;
}
RT_KERNEL void noop() {}
)";

/// Every test starts on a fresh runtime with cuda:0 current and kKernels loaded.
class GraphCudaFake : public ::testing::Test {
protected:
    void SetUp() override {
#ifndef RUNTIME_HAVE_CUDA
        GTEST_SKIP() << "this build has no cuda backend";
#endif
        if (!fake().loaded) GTEST_SKIP() << "RUNTIME_CUDA_DRIVER_LIB does not name the fake CUDA driver";
        ASSERT_RT_OK(rtFinalize());
        ASSERT_RT_OK(rtGetDeviceByName(&cuda_, "cuda:0")) << "the fake driver must provide cuda:0";
        ASSERT_RT_OK(rtSetDevice(cuda_));
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kKernels, nullptr));
        ASSERT_RT_OK(rtModuleGetFunction(&scale_, module_, "scale"));
        ASSERT_RT_OK(rtModuleGetFunction(&noop_, module_, "noop"));
    }
    void TearDown() override {
        if (module_) rtModuleUnload(module_);
        rtFinalize();
    }

    static rtError_t kernel(rtGraphNode_t* node, rtGraph_t g, std::vector<rtGraphNode_t> deps, rtFunction_t f,
                            void** args, unsigned grid = 1, unsigned block = 64) {
        rtKernelNodeParams p{};
        p.function = f;
        p.grid = rtDim3{grid, 1, 1};
        p.block = rtDim3{block, 1, 1};
        p.args = args;
        return rtGraphAddKernelNode(node, g, deps.data(), deps.size(), &p);
    }
    static rtError_t copy(rtGraphNode_t* node, rtGraph_t g, std::vector<rtGraphNode_t> deps, void* dst, const void* src,
                          size_t bytes) {
        rtMemcpyNodeParams p{dst, src, bytes, RT_MEMCPY_DEFAULT};
        return rtGraphAddMemcpyNode(node, g, deps.data(), deps.size(), &p);
    }
    static rtError_t fill(rtGraphNode_t* node, rtGraph_t g, std::vector<rtGraphNode_t> deps, void* dst, int value,
                          size_t bytes) {
        rtMemsetNodeParams p{dst, value, bytes};
        return rtGraphAddMemsetNode(node, g, deps.data(), deps.size(), &p);
    }
    static rtError_t host(rtGraphNode_t* node, rtGraph_t g, std::vector<rtGraphNode_t> deps, rtHostFn_t fn,
                          void* user_data) {
        rtHostNodeParams p{fn, user_data};
        return rtGraphAddHostNode(node, g, deps.data(), deps.size(), &p);
    }

    int cuda_ = -1;
    rtModule_t module_ = nullptr;
    rtFunction_t scale_ = nullptr, noop_ = nullptr;
    rt_test::Watchdog watchdog_{std::chrono::milliseconds(45000), "GraphCudaFake test"};
};

// ------------------------------------------------------------------------------------------------ the lowering

// Every command becomes one node of the native graph, with the program's edges as its dependencies: kernels with the
// launch's parameter array (the exact global size first), copies with unified addresses, fills, host functions, and
// empty nodes for what runs no work (empty nodes, allocations, event nodes: the core handles those around the launch).
TEST_F(GraphCudaFake, EveryNodeKindAndItsDependenciesReachTheDriver) {
    DevBuf d(256);
    HostBuf out(256);
    ASSERT_RT_OK(out.status());
    std::memset(out.get(), 0, 256);
    std::atomic<bool> ran{false};
    GraphGuard g;
    rtGraphNode_t root, set, k, d2h, h, side, join, alloc, free_node;
    ASSERT_RT_OK(rtGraphAddEmptyNode(&root, g, nullptr, 0));
    ASSERT_RT_OK(fill(&set, g, {root}, d.get(), 7, 256));
    void* x = d.get();
    float a = 2.0f;
    int32_t n = 64;
    void* args[] = {&x, &a, &n};
    ASSERT_RT_OK(kernel(&k, g, {set}, scale_, args));
    ASSERT_RT_OK(copy(&d2h, g, {k}, out.get(), d.get(), 256));
    ASSERT_RT_OK(host(&h, g, {d2h}, rt_test::set_flag, &ran));
    ASSERT_RT_OK(kernel(&side, g, {root}, noop_, nullptr, 2, 32));
    rtMemAllocNodeParams ap{512, nullptr};
    ASSERT_RT_OK(rtGraphAddMemAllocNode(&alloc, g, &side, 1, &ap));
    ASSERT_RT_OK(rtGraphAddMemFreeNode(&free_node, g, &alloc, 1, ap.ptr));
    rtGraphNode_t ends[] = {h, free_node};
    ASSERT_RT_OK(rtGraphAddEmptyNode(&join, g, ends, 2));

    const int before = fake().instantiations();
    ExecGuard xg;
    ASSERT_RT_OK(rtGraphInstantiate(xg.out(), g, 0));
    EXPECT_EQ(fake().instantiations(), before + 1) << "instantiated once, at rtGraphInstantiate";
    const std::vector<FakeCudaGraphNode> nodes = exec_nodes();
    ASSERT_EQ(nodes.size(), 9u) << "one node per node of the graph";
    auto kernel_named = [](const char* name) {
        return [name](const FakeCudaGraphNode& v) {
            return v.kind == FAKE_CUDA_NODE_KERNEL && std::strcmp(v.kernel, name) == 0;
        };
    };
    const int iset = only(nodes, [](const FakeCudaGraphNode& v) { return v.kind == FAKE_CUDA_NODE_MEMSET; }, "memset");
    const int ik = only(nodes, kernel_named("scale"), "scale");
    const int iside = only(nodes, kernel_named("noop"), "noop");
    const int icopy = only(nodes, [](const FakeCudaGraphNode& v) { return v.kind == FAKE_CUDA_NODE_MEMCPY; }, "memcpy");
    const int ih = only(nodes, [](const FakeCudaGraphNode& v) { return v.kind == FAKE_CUDA_NODE_HOST; }, "host");
    const int iroot = only(
        nodes, [](const FakeCudaGraphNode& v) { return v.kind == FAKE_CUDA_NODE_EMPTY && v.num_deps == 0; }, "the root");
    ASSERT_TRUE(iset >= 0 && ik >= 0 && iside >= 0 && icopy >= 0 && ih >= 0 && iroot >= 0);
    // The allocation and its free are empty nodes after the noop kernel; the join waits for the host node and them.
    const int ialloc = only(nodes, [&](const FakeCudaGraphNode& v) {
        return v.kind == FAKE_CUDA_NODE_EMPTY && deps_of(v) == std::vector<int>{iside};
    }, "the allocation");
    ASSERT_GE(ialloc, 0);
    const int ifree = only(nodes, [&](const FakeCudaGraphNode& v) {
        return v.kind == FAKE_CUDA_NODE_EMPTY && deps_of(v) == std::vector<int>{ialloc};
    }, "the free");
    ASSERT_GE(ifree, 0);
    std::vector<int> join_deps = {ih, ifree};
    std::sort(join_deps.begin(), join_deps.end());
    only(nodes, [&](const FakeCudaGraphNode& v) { return v.kind == FAKE_CUDA_NODE_EMPTY && deps_of(v) == join_deps; },
         "the join");

    EXPECT_EQ(deps_of(nodes[static_cast<size_t>(iset)]), std::vector<int>{iroot});
    EXPECT_EQ(deps_of(nodes[static_cast<size_t>(ik)]), std::vector<int>{iset});
    EXPECT_EQ(deps_of(nodes[static_cast<size_t>(icopy)]), std::vector<int>{ik});
    EXPECT_EQ(deps_of(nodes[static_cast<size_t>(ih)]), std::vector<int>{icopy});
    EXPECT_EQ(deps_of(nodes[static_cast<size_t>(iside)]), std::vector<int>{iroot});

    const FakeCudaGraphNode& kn = nodes[static_cast<size_t>(ik)];
    EXPECT_EQ(kn.grid[0], 1u);
    EXPECT_EQ(kn.block[0], 64u);
    EXPECT_EQ(kn.param_u64[0], 64u) << "a bounded kernel takes the exact global size first";
    EXPECT_EQ(kn.param_u64[1], reinterpret_cast<uintptr_t>(d.get()));
    float a_seen = 0;
    std::memcpy(&a_seen, &kn.param_u64[2], sizeof a_seen);
    EXPECT_EQ(a_seen, 2.0f);
    EXPECT_EQ(kn.param_u64[3] & 0xffffffffu, 64u);
    EXPECT_EQ(nodes[static_cast<size_t>(iside)].grid[0], 2u);
    EXPECT_EQ(nodes[static_cast<size_t>(iside)].block[0], 32u);
    EXPECT_EQ(nodes[static_cast<size_t>(iside)].param_u64[0], 64u) << "2 x 32 items";
    EXPECT_EQ(nodes[static_cast<size_t>(icopy)].bytes, 256u);
    EXPECT_EQ(nodes[static_cast<size_t>(icopy)].dst_memory_type, kUnified) << "as cuMemcpyAsync takes its operands";
    EXPECT_EQ(nodes[static_cast<size_t>(icopy)].src_memory_type, kUnified);
    EXPECT_EQ(nodes[static_cast<size_t>(iset)].bytes, 256u);
    EXPECT_EQ(nodes[static_cast<size_t>(iset)].value, 7u);

    // One launch: one cuGraphLaunch, its kernel nodes counted as the driver's launches, no cuLaunchKernel.
    StreamGuard s;
    const int graphs = fake().graph_launches(), launches = fake().launch_count(), host_funcs = fake().host_func_count();
    ASSERT_RT_OK(rtGraphLaunch(xg, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(fake().graph_launches(), graphs + 1);
    EXPECT_EQ(fake().launch_count(), launches + 2);
    EXPECT_EQ(fake().host_func_count(), host_funcs) << "the host node is the graph's, not a cuLaunchHostFunc";
    EXPECT_TRUE(ran.load());
    for (int i = 0; i < 256; ++i) ASSERT_EQ(out.get()[i], 7) << "byte " << i;
}

// The same copies and fills as stream operations and as a graph, captured or built, give the same bytes: pinned and
// pageable host memory, host-to-device, device-to-device, device-to-host, host-to-host (pageable: a host node, as the
// stream path runs it on the callback thread; pinned: a memcpy node), a fill inside a buffer.
TEST_F(GraphCudaFake, AGraphGivesTheBytesOfTheSameOperationsOnAStream) {
    constexpr size_t kBytes = 4096;
    const std::vector<unsigned char> input = rt_test::pattern(kBytes, 11);
    HostBuf pinned_in(kBytes), pinned_out(kBytes), pinned_copy(kBytes);
    std::memcpy(pinned_in.get(), input.data(), kBytes);
    DevBuf d1(kBytes), d2(kBytes);
    std::vector<unsigned char> pageable_out(kBytes), pageable_copy(kBytes);

    struct Outputs {
        std::vector<unsigned char> pinned_out, pageable_out, pageable_copy, pinned_copy;
    };
    auto outputs = [&] {
        Outputs o{{pinned_out.get(), pinned_out.get() + kBytes}, pageable_out, pageable_copy,
                  {pinned_copy.get(), pinned_copy.get() + kBytes}};
        return o;
    };
    auto clear = [&] {
        std::memset(pinned_out.get(), 0, kBytes);
        std::memset(pinned_copy.get(), 0, kBytes);
        std::fill(pageable_out.begin(), pageable_out.end(), 0);
        std::fill(pageable_copy.begin(), pageable_copy.end(), 0);
        ASSERT_RT_OK(rtMemset(d1.get(), 0, kBytes));
        ASSERT_RT_OK(rtMemset(d2.get(), 0, kBytes));
    };

    auto enqueue = [&](rtStream_t s) {
        ASSERT_RT_OK(rtMemcpyAsync(d1.get(), input.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE, s));
        ASSERT_RT_OK(rtMemsetAsync(d1.get() + 1000, 0xab, 300, s));
        ASSERT_RT_OK(rtMemcpyAsync(d2.get(), d1.get(), kBytes, RT_MEMCPY_DEVICE_TO_DEVICE, s));
        ASSERT_RT_OK(rtMemcpyAsync(pinned_out.get(), d2.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST, s));
        ASSERT_RT_OK(rtMemcpyAsync(pageable_out.data(), d2.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST, s));
        ASSERT_RT_OK(rtMemcpyAsync(pageable_copy.data(), pinned_out.get(), kBytes, RT_MEMCPY_HOST_TO_HOST, s));
        ASSERT_RT_OK(rtMemcpyAsync(pinned_copy.get(), pinned_in.get(), kBytes, RT_MEMCPY_HOST_TO_HOST, s));
    };
    StreamGuard s;
    clear();
    enqueue(s);
    ASSERT_RT_OK(rtStreamSynchronize(s));
    const Outputs stream_version = outputs();
    EXPECT_NE(stream_version.pinned_out, std::vector<unsigned char>(kBytes, 0));
    auto replays_equal = [&](rtGraphExec_t x, const char* what) {
        for (int run = 0; run < 3; ++run) {
            clear();
            ASSERT_RT_OK(rtGraphLaunch(x, s));
            ASSERT_RT_OK(rtStreamSynchronize(s));
            const Outputs graph_version = outputs();
            EXPECT_EQ(graph_version.pinned_out, stream_version.pinned_out) << what << ", run " << run;
            EXPECT_EQ(graph_version.pageable_out, stream_version.pageable_out) << what << ", run " << run;
            EXPECT_EQ(graph_version.pageable_copy, stream_version.pageable_copy) << what << ", run " << run;
            EXPECT_EQ(graph_version.pinned_copy, stream_version.pinned_copy) << what << ", run " << run;
        }
    };
    auto kinds_are_lowered = [&](const char* what) {
        int memcpys = 0, hosts = 0, memsets = 0;
        for (const FakeCudaGraphNode& v : exec_nodes()) {
            memcpys += v.kind == FAKE_CUDA_NODE_MEMCPY;
            hosts += v.kind == FAKE_CUDA_NODE_HOST;
            memsets += v.kind == FAKE_CUDA_NODE_MEMSET;
        }
        EXPECT_EQ(memcpys, 5) << what << ": H2D, D2D, two D2H and the pinned H2H";
        EXPECT_EQ(hosts, 1) << what << ": the pageable host-to-host copy";
        EXPECT_EQ(memsets, 1) << what;
    };

    // Captured from the stream.
    {
        StreamGuard c;
        ASSERT_RT_OK(rtStreamBeginCapture(c, RT_STREAM_CAPTURE_MODE_GLOBAL));
        enqueue(c);
        rtGraph_t captured = nullptr;
        ASSERT_RT_OK(rtStreamEndCapture(c, &captured));
        ExecGuard x;
        ASSERT_RT_OK(rtGraphInstantiate(x.out(), captured, 0));
        ASSERT_RT_OK(rtGraphDestroy(captured));
        kinds_are_lowered("captured");
        replays_equal(x, "captured");
    }

    GraphGuard g;
    rtGraphNode_t h2d, set, d2d, out1, out2, h2h, pinned_h2h;
    ASSERT_RT_OK(copy(&h2d, g, {}, d1.get(), input.data(), kBytes));
    ASSERT_RT_OK(fill(&set, g, {h2d}, d1.get() + 1000, 0xab, 300));
    ASSERT_RT_OK(copy(&d2d, g, {set}, d2.get(), d1.get(), kBytes));
    ASSERT_RT_OK(copy(&out1, g, {d2d}, pinned_out.get(), d2.get(), kBytes));
    ASSERT_RT_OK(copy(&out2, g, {d2d}, pageable_out.data(), d2.get(), kBytes));
    ASSERT_RT_OK(copy(&h2h, g, {out1}, pageable_copy.data(), pinned_out.get(), kBytes));
    ASSERT_RT_OK(copy(&pinned_h2h, g, {}, pinned_copy.get(), pinned_in.get(), kBytes));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    kinds_are_lowered("explicit");
    replays_equal(x, "explicit");
}

// Allocation nodes live in the executable graph's arena: operands inside them reach the driver relocated.
TEST_F(GraphCudaFake, OperandsInAllocationsAreTheArenas) {
    HostBuf out(1024);
    std::memset(out.get(), 0, 1024);
    GraphGuard g;
    rtGraphNode_t alloc, set, d2h, release;
    rtMemAllocNodeParams ap{1024, nullptr};
    ASSERT_RT_OK(rtGraphAddMemAllocNode(&alloc, g, nullptr, 0, &ap));
    ASSERT_RT_OK(fill(&set, g, {alloc}, ap.ptr, 0x5a, 1024));
    ASSERT_RT_OK(copy(&d2h, g, {set}, out.get(), ap.ptr, 1024));
    ASSERT_RT_OK(rtGraphAddMemFreeNode(&release, g, &d2h, 1, ap.ptr));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    for (const FakeCudaGraphNode& v : exec_nodes())
        if (v.kind == FAKE_CUDA_NODE_MEMSET) {
            EXPECT_EQ(v.bytes, 1024u);
        }
    StreamGuard s;
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    for (int i = 0; i < 1024; ++i) ASSERT_EQ(out.get()[i], 0x5a) << "byte " << i;
}

// RUNTIME_GRAPH_LOWERING=0: the core replays the same graph command by command, with the same results and no
// native graph.
TEST_F(GraphCudaFake, WithoutLoweringTheCoreReplaysOnTheStream) {
    HostBuf out(512);
    std::memset(out.get(), 0, 512);
    DevBuf d(512);
    std::atomic<bool> ran{false};
    GraphGuard g;
    rtGraphNode_t set, d2h, h;
    ASSERT_RT_OK(fill(&set, g, {}, d.get(), 3, 512));
    ASSERT_RT_OK(copy(&d2h, g, {set}, out.get(), d.get(), 512));
    ASSERT_RT_OK(host(&h, g, {d2h}, rt_test::set_flag, &ran));
    ExecGuard x;
    const int instantiations = fake().instantiations(), graphs = fake().graph_launches();
    {
        rt_test::EnvVar off("RUNTIME_GRAPH_LOWERING", "0");
        ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    }
    StreamGuard s;
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(fake().instantiations(), instantiations);
    EXPECT_EQ(fake().graph_launches(), graphs);
    EXPECT_TRUE(ran.load());
    for (int i = 0; i < 512; ++i) ASSERT_EQ(out.get()[i], 3) << "byte " << i;
}

// ------------------------------------------------------------------------------------------------ updates

// A kernel node's new parameters go into the instantiated graph (no new instantiation) and reach the next launch.
TEST_F(GraphCudaFake, KernelNodeUpdatesReachTheInstantiatedGraph) {
    DevBuf d(1024);
    GraphGuard g;
    rtGraphNode_t k;
    void* x = d.get();
    float a = 2.0f;
    int32_t n = 64;
    void* args[] = {&x, &a, &n};
    ASSERT_RT_OK(kernel(&k, g, {}, scale_, args));
    ExecGuard xg;
    ASSERT_RT_OK(rtGraphInstantiate(xg.out(), g, 0));
    const int instantiations = fake().instantiations();

    void* y = d.get() + 512;
    float b = 5.0f;
    int32_t m = 100;
    void* args2[] = {&y, &b, &m};
    rtKernelNodeParams p{};
    p.function = scale_;
    p.grid = rtDim3{2, 1, 1};
    p.block = rtDim3{64, 1, 1};
    p.args = args2;
    p.global[0] = 100;
    ASSERT_RT_OK(rtGraphExecKernelNodeSetParams(xg, k, &p));
    EXPECT_EQ(fake().instantiations(), instantiations) << "updated in place";
    std::vector<FakeCudaGraphNode> nodes = exec_nodes();
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_EQ(nodes[0].grid[0], 2u);
    EXPECT_EQ(nodes[0].param_u64[0], 100u) << "the new exact global size";
    EXPECT_EQ(nodes[0].param_u64[1], reinterpret_cast<uintptr_t>(y));

    StreamGuard s;
    ASSERT_RT_OK(rtGraphLaunch(xg, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    FakeCudaLaunch l{};
    ASSERT_TRUE(fake().last_launch(&l));
    EXPECT_STREQ(l.kernel, "scale");
    EXPECT_EQ(l.param_u64[1], reinterpret_cast<uintptr_t>(y));
    EXPECT_EQ(l.param_u64[3] & 0xffffffffu, 100u);

    // Another kernel of the device in the same node.
    rtKernelNodeParams q{};
    q.function = noop_;
    q.grid = rtDim3{1, 1, 1};
    q.block = rtDim3{1, 1, 1};
    ASSERT_RT_OK(rtGraphExecKernelNodeSetParams(xg, k, &q));
    ASSERT_RT_OK(rtGraphLaunch(xg, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_TRUE(fake().last_launch(&l));
    EXPECT_STREQ(l.kernel, "noop");
    EXPECT_EQ(fake().instantiations(), instantiations);
}

// A copy's new operands reach launches made after the update; a launch queued before it (held by a gate) copies
// with the old ones.
TEST_F(GraphCudaFake, LaunchesQueuedBeforeAnUpdateKeepTheirOperands) {
    DevBuf d(256);
    ASSERT_RT_OK(rtMemset(d.get(), 9, 256));
    HostBuf first(256), second(256);
    GraphGuard g;
    rtGraphNode_t d2h;
    ASSERT_RT_OK(copy(&d2h, g, {}, first.get(), d.get(), 256));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    const int instantiations = fake().instantiations();
    std::memset(first.get(), 0, 256);
    std::memset(second.get(), 0, 256);

    StreamGuard s;
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    rtMemcpyNodeParams p{second.get(), d.get(), 256, RT_MEMCPY_DEVICE_TO_HOST};
    ASSERT_RT_OK(rtGraphExecMemcpyNodeSetParams(x, d2h, &p));
    EXPECT_EQ(fake().instantiations(), instantiations) << "updated in place while a launch is queued";
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    EXPECT_EQ(first.get()[0], 0) << "nothing ran yet";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    for (int i = 0; i < 256; ++i) {
        ASSERT_EQ(first.get()[i], 9) << "the first launch copied to the old destination, byte " << i;
        ASSERT_EQ(second.get()[i], 9) << "the second to the new one, byte " << i;
    }

    // A copy that becomes empty (0 bytes) is another kind of node: the graph is instantiated anew, before the next
    // launch, and copies nothing.
    std::memset(second.get(), 0, 256);
    rtMemcpyNodeParams none{second.get(), d.get(), 0, RT_MEMCPY_DEVICE_TO_HOST};
    ASSERT_RT_OK(rtGraphExecMemcpyNodeSetParams(x, d2h, &none));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(fake().instantiations(), instantiations + 1);
    std::vector<FakeCudaGraphNode> nodes = exec_nodes();
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_EQ(nodes[0].kind, FAKE_CUDA_NODE_EMPTY);
    EXPECT_EQ(second.get()[0], 0);
    EXPECT_EQ(fake().live_execs(), 1) << "the old instantiation was released";
}

struct Tally {
    std::atomic<int> a{0}, b{0};
};
void count_a(void* p) { static_cast<Tally*>(p)->a.fetch_add(1); }
void count_b(void* p) { static_cast<Tally*>(p)->b.fetch_add(1); }

// rtGraphExecUpdate gives a host node another function; a launch queued before it runs the old one.
TEST_F(GraphCudaFake, AnUpdatedHostNodeRunsItsNewFunctionFromTheNextLaunch) {
    Tally tally;
    GraphGuard g, other;
    rtGraphNode_t h, h2;
    ASSERT_RT_OK(host(&h, g, {}, count_a, &tally));
    ASSERT_RT_OK(host(&h2, other, {}, count_b, &tally));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    StreamGuard s;
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    rtGraphExecUpdateResult result = RT_GRAPH_EXEC_UPDATE_ERROR;
    ASSERT_RT_OK(rtGraphExecUpdate(x, other, &result));
    EXPECT_EQ(result, RT_GRAPH_EXEC_UPDATE_SUCCESS);
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(tally.a.load(), 1);
    EXPECT_EQ(tally.b.load(), 1);
    ASSERT_RT_OK(rtGraphLaunch(x, s));  // no launch in flight: changed in place the next time
    ASSERT_RT_OK(rtGraphExecUpdate(x, g, nullptr));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(tally.a.load(), 2);
    EXPECT_EQ(tally.b.load(), 2);
}

// ------------------------------------------------------------------------------------------------ failures

void fail_odd(void*) { rtHostFuncSetError(RT_ERROR_INVALID_VALUE, "the input was odd"); }

// A failing host node fails the launch naming its node; host nodes after it are skipped; the next launch runs.
TEST_F(GraphCudaFake, AFailedHostNodeIsNamedAndTheNextLaunchRuns) {
    GraphGuard g;
    rtGraphNode_t root, bad, after;
    ASSERT_RT_OK(rtGraphAddEmptyNode(&root, g, nullptr, 0));
    ASSERT_RT_OK(host(&bad, g, {root}, fail_odd, nullptr));
    std::atomic<bool> ran{false};
    ASSERT_RT_OK(host(&after, g, {bad}, rt_test::set_flag, &ran));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    StreamGuard s;
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamSynchronize(s));
    EXPECT_TRUE(contains(last_message(), "(node 1 of the graph launched as operation #")) << last_message();
    EXPECT_TRUE(contains(last_message(), "the input was odd")) << last_message();
    EXPECT_FALSE(ran.load()) << "the host node after the failed one was skipped";
    // The graph without the failing function runs to the end.
    GraphGuard fixed;
    rtGraphNode_t r2, ok2, after2;
    ASSERT_RT_OK(rtGraphAddEmptyNode(&r2, fixed, nullptr, 0));
    ASSERT_RT_OK(host(&ok2, fixed, {r2}, rt_test::set_flag, &ran));
    ASSERT_RT_OK(host(&after2, fixed, {ok2}, rt_test::set_flag, &ran));
    ASSERT_RT_OK(rtGraphExecUpdate(x, fixed, nullptr));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_TRUE(ran.load());
}

// A host node still to run when an event is recorded behind the launch: the event carries its failure, in stream
// order, to a stream that waits for it (as for host functions).
TEST_F(GraphCudaFake, AnEventRecordedBehindAFailingHostNodeCarriesTheFailure) {
    GraphGuard g;
    rtGraphNode_t bad;
    ASSERT_RT_OK(host(&bad, g, {}, fail_odd, nullptr));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    StreamGuard s, waiter;
    EventGuard e;
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtEventRecord(e, s));
    ASSERT_RT_OK(rtStreamWaitEvent(waiter, e));
    gate.open();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamSynchronize(waiter));
    EXPECT_TRUE(contains(last_message(), "dependency failed")) << last_message();
    EXPECT_TRUE(contains(last_message(), "the input was odd")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamSynchronize(s));
}

// A failed rt_assert in a kernel node is reported at the next synchronize naming the node, when one kernel node can
// have failed there: the only one of its kernel, or the only one whose shape holds the failing block and thread.
TEST_F(GraphCudaFake, AFailedAssertNamesTheKernelNode) {
    DevBuf d(4096);
    void* x = d.get();
    float a = 2.0f;
    int32_t n = 256;
    void* args[] = {&x, &a, &n};
    GraphGuard g;
    rtGraphNode_t first, small, large;
    ASSERT_RT_OK(kernel(&first, g, {}, noop_, nullptr, 1, 256));
    ASSERT_RT_OK(kernel(&small, g, {first}, scale_, args, 1, 64));
    ASSERT_RT_OK(kernel(&large, g, {first}, scale_, args, 4, 64));
    ExecGuard xg;
    ASSERT_RT_OK(rtGraphInstantiate(xg.out(), g, 0));
    StreamGuard s;

    // Thread 200 lies only in the noop node's blocks.
    const unsigned thread200[3] = {200, 0, 0};
    fake().assert_next_launch_at("noop", "x < 4", "k.cu", 3, nullptr, thread200);
    ASSERT_RT_OK(rtGraphLaunch(xg, s));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "kernel 'noop' (node 0 of the graph launched as operation #")) << msg;
    EXPECT_TRUE(contains(msg, "rt_assert(x < 4) failed at k.cu:3")) << msg;

    // Block 2 lies only in the larger node's grid.
    const unsigned block[3] = {2, 0, 0}, thread[3] = {5, 0, 0};
    fake().assert_next_launch_at("scale", "i < n", "s.cu", 9, block, thread);
    ASSERT_RT_OK(rtGraphLaunch(xg, s));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    msg = last_message();
    EXPECT_TRUE(contains(msg, "kernel 'scale' (node 2 of the graph launched as operation #")) << msg;
    EXPECT_TRUE(contains(msg, "in block (2,0,0) thread (5,0,0)")) << msg;

    // Block 0 thread 0 lies in every node: each is named as one it may be.
    fake().assert_next_launch_at("scale", "i < n", "s.cu", 9, nullptr, nullptr);
    ASSERT_RT_OK(rtGraphLaunch(xg, s));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    msg = last_message();
    EXPECT_TRUE(contains(msg, "a kernel of the graph launched as operation #")) << msg;
    EXPECT_TRUE(contains(msg, "node 0 (kernel 'noop'), node 1 (kernel 'scale'), node 2 (kernel 'scale')")) << msg;
    EXPECT_TRUE(contains(msg, "rt_assert(i < n) failed at s.cu:9")) << msg;

    // Reported once each; the stream and the device go on, and a kernel launched after the graph is named again.
    ASSERT_RT_OK(rtGraphLaunch(xg, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    fake().assert_next_launch_at(nullptr, "y", "t.cu", 1, nullptr, nullptr);
    ASSERT_RT_OK(rtLaunchKernel(noop_, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, nullptr, 0, s));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    EXPECT_TRUE(contains(last_message(), "kernel 'noop' (operation #")) << last_message();
}

// A sticky fault in a kernel node loses the device, as a faulting launch does; the message names the node.
TEST_F(GraphCudaFake, AStickyFaultInAKernelNodeNamesItAndLosesTheDevice) {
    GraphGuard g;
    rtGraphNode_t k;
    ASSERT_RT_OK(kernel(&k, g, {}, noop_, nullptr));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    StreamGuard s;
    fake().inject_fault(kIllegalAddress);
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    EXPECT_TRUE(contains(last_message(), "kernel 'noop' (node 0 of the graph launched as operation #")) << last_message();
    EXPECT_TRUE(contains(last_message(), "CUDA_ERROR_ILLEGAL_ADDRESS")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_DEVICE_LOST, rtGraphLaunch(x, s));
    EXPECT_TRUE(contains(last_message(), "unusable")) << last_message();
    // Teardown of a lost device releases the executable graph too (no leak, no hang).
    rtGraphExecDestroy(x.release());
    rtStreamDestroy(s.get());
    ASSERT_RT_OK(rtFinalize());
    EXPECT_EQ(fake().live_execs(), 0);
}

// A host node cannot call CUDA (it runs on the driver's thread): the runtime refuses instead of deadlocking.
TEST_F(GraphCudaFake, CudaCallsFromAHostNodeAreRefused) {
    struct Probe {
        int device = -1;
        rtError_t set = RT_ERROR_UNKNOWN, result = RT_SUCCESS;
    } probe;
    probe.device = cuda_;
    GraphGuard g;
    rtGraphNode_t h;
    ASSERT_RT_OK(host(&h, g, {}, [](void* p) {
        auto* probe = static_cast<Probe*>(p);
        probe->set = rtSetDevice(probe->device);
        void* mem = nullptr;
        probe->result = rtMalloc(&mem, 256);
        if (mem) rtFree(mem);
    }, &probe));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    StreamGuard s;
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_RT_OK(probe.set);
    EXPECT_EQ(probe.result, RT_ERROR_NOT_PERMITTED);
}

// A kernel of a foreign module (a PTX file) runs whole work-groups: a node that asks for an exact global size other
// than grid x block is refused at instantiation, naming the node, as its launch on a stream is refused; an update to
// such a shape is refused too, and the launches after it say so (the instantiated graph no longer matches).
TEST_F(GraphCudaFake, AForeignKernelNodeWithAnExactSizeIsRefusedNamingIt) {
    const char* ptx = ".version 8.0\n.target sm_90\n.address_size 64\n\n"
                      ".visible .entry add_k(\n\t.param .u64 add_k_param_0,\n\t.param .u32 add_k_param_1\n)\n{\n\tret;\n}\n";
    const std::string path = ::testing::TempDir() + "graph_cuda_fake_" + std::to_string(::getpid()) + ".ptx";
    { std::ofstream(path, std::ios::binary) << ptx; }
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadFile(&m, path.c_str()));
    std::remove(path.c_str());
    rtFunction_t add = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&add, m, "add_k"));
    DevBuf d(1024);
    void* p = d.get();
    uint32_t n = 10;
    void* args[] = {&p, &n};
    rtKernelNodeParams exact{};
    exact.function = add;
    exact.grid = rtDim3{1, 1, 1};
    exact.block = rtDim3{64, 1, 1};
    exact.args = args;
    exact.global[0] = 10;
    {
        GraphGuard g;
        rtGraphNode_t root, k;
        ASSERT_RT_OK(rtGraphAddEmptyNode(&root, g, nullptr, 0));
        ASSERT_RT_OK(rtGraphAddKernelNode(&k, g, &root, 1, &exact));
        rtGraphExec_t x = nullptr;
        EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtGraphInstantiate(&x, g, 0));
        EXPECT_TRUE(contains(last_message(), "node 1 (kernel 'add_k')")) << last_message();
        EXPECT_TRUE(contains(last_message(), "exact global size")) << last_message();
        EXPECT_EQ(x, nullptr);
    }
    // Over grid x block it is lowered; an update to an exact size is refused, and so are the launches after it.
    GraphGuard g;
    rtGraphNode_t k;
    rtKernelNodeParams whole = exact;
    whole.global[0] = 0;
    ASSERT_RT_OK(rtGraphAddKernelNode(&k, g, nullptr, 0, &whole));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    StreamGuard s;
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtGraphExecKernelNodeSetParams(x, k, &exact));
    EXPECT_TRUE(contains(last_message(), "add_k")) << last_message();
    const int graphs = fake().graph_launches();
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtGraphLaunch(x, s));
    EXPECT_TRUE(contains(last_message(), "node 0 (kernel 'add_k')")) << last_message();
    EXPECT_EQ(fake().graph_launches(), graphs);
    // Back to grid x block: it launches again.
    ASSERT_RT_OK(rtGraphExecKernelNodeSetParams(x, k, &whole));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(fake().graph_launches(), graphs + 1);
    ASSERT_RT_OK(rtGraphExecDestroy(x.release()));
    ASSERT_RT_OK(rtModuleUnload(m));
}

// ------------------------------------------------------------------------------------------------ lifetimes, order

// Destroying the executable graph while launches are queued: they run to the end, host nodes included.
TEST_F(GraphCudaFake, DestroyWhileLaunchesAreQueuedLetsThemRun) {
    Tally tally;
    DevBuf d(128);
    ASSERT_RT_OK(rtMemset(d.get(), 4, 128));
    HostBuf out(128);
    std::memset(out.get(), 0, 128);
    GraphGuard g;
    rtGraphNode_t d2h, h;
    ASSERT_RT_OK(copy(&d2h, g, {}, out.get(), d.get(), 128));
    ASSERT_RT_OK(host(&h, g, {d2h}, count_a, &tally));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    const int live = fake().live_execs();
    StreamGuard s;
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtGraphExecDestroy(x.release()));
    EXPECT_EQ(fake().live_execs(), live - 1) << "the driver's executable graph goes at once (launches hold theirs)";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(tally.a.load(), 2);
    for (int i = 0; i < 128; ++i) ASSERT_EQ(out.get()[i], 4) << "byte " << i;
}

// Launches of one executable graph from several threads, each on its own stream, run one at a time (the core orders
// them; its host node sees no other run of itself) and every one runs.
TEST_F(GraphCudaFake, OneExecutableGraphLaunchedFromSeveralThreadsRunsOneLaunchAtATime) {
    struct Runs {
        std::atomic<int> inside{0}, overlaps{0}, count{0};
    } runs;
    GraphGuard g;
    rtGraphNode_t h;
    ASSERT_RT_OK(host(&h, g, {}, [](void* p) {
        auto* r = static_cast<Runs*>(p);
        if (r->inside.fetch_add(1) != 0) r->overlaps.fetch_add(1);
        std::this_thread::yield();
        r->inside.fetch_sub(1);
        r->count.fetch_add(1);
    }, &runs));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    constexpr int kThreads = 4, kLaunches = 25;
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            if (rtSetDevice(cuda_) != RT_SUCCESS) return failures.fetch_add(1), void();
            rtStream_t s = nullptr;
            if (rtStreamCreate(&s) != RT_SUCCESS) return failures.fetch_add(1), void();
            for (int i = 0; i < kLaunches; ++i)
                if (rtGraphLaunch(x, s) != RT_SUCCESS) failures.fetch_add(1);
            if (rtStreamSynchronize(s) != RT_SUCCESS) failures.fetch_add(1);
            rtStreamDestroy(s);
        });
    for (auto& t : threads) t.join();
    ASSERT_RT_OK(rtDeviceSynchronize());
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(runs.count.load(), kThreads * kLaunches);
    EXPECT_EQ(runs.overlaps.load(), 0);
}

// Bad input to the lowered path is refused with a message, never a crash: a stream of another device.
TEST_F(GraphCudaFake, AStreamOfAnotherDeviceIsRefused) {
    GraphGuard g;
    rtGraphNode_t k;
    ASSERT_RT_OK(kernel(&k, g, {}, noop_, nullptr));
    ExecGuard x;
    ASSERT_RT_OK(rtGraphInstantiate(x.out(), g, 0));
    int cpu = -1;
    ASSERT_RT_OK(rtGetDeviceByName(&cpu, "cpu:0"));
    ASSERT_RT_OK(rtSetDevice(cpu));
    StreamGuard other;
    const int graphs = fake().graph_launches();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphLaunch(x, other));
    EXPECT_TRUE(contains(last_message(), "cuda:0")) << last_message();
    EXPECT_EQ(fake().graph_launches(), graphs);
    ASSERT_RT_OK(rtSetDevice(cuda_));
}

}  // namespace
