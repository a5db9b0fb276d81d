// test_trace.cpp — the timeline trace (rtProfilerStart/Stop, RUNTIME_TRACE): the file of a known program is parsed and
// its tracks, spans, nesting, flows and counters checked; a killed program leaves a readable file, an exit without
// rtProfilerStop a complete one; the refusals.
#include "test_util.hpp"
#include "trace_json.hpp"

#include <runtime/profiler.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

// LeakSanitizer's hook: no leak check in a child forked from this (multi-threaded) test process. The child is a copy
// of the parent's memory without its other threads: what those threads held only on their stacks or in registers
// (a timeline thread's local vector, say) reads as leaked there (google/sanitizers#836). The parent, and children
// that exec this program afresh (TraceFile), are checked as usual.
static const pid_t g_test_process = ::getpid();
extern "C" int __lsan_is_turned_off() { return ::getpid() != g_test_process; }

namespace {

using namespace rt_test;
using namespace rt_test::trace_json;

constexpr const char* kSource = R"(
RT_KERNEL void scale(float* x, float a, uint32_t n) {
    size_t i = get_global_id(0);
    if (i < n) x[i] *= a;
}
RT_KERNEL void fail_if(uint32_t* c, uint32_t bad) { rt_assert(c[0] != bad); }
)";

class Trace : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_RT_OK(rtSetDevice(0));
        if (backend_of(0) != "cpu") GTEST_SKIP() << "device 0 is not a cpu device";
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kSource, nullptr));
        ASSERT_RT_OK(rtModuleGetFunction(&scale_, module_, "scale"));
        ASSERT_RT_OK(rtModuleGetFunction(&fail_if_, module_, "fail_if"));
        path_ = temp_path(::testing::UnitTest::GetInstance()->current_test_info()->name() + std::string(".json"));
    }
    void TearDown() override {
        if (module_) {
            EXPECT_RT_OK(rtModuleUnload(module_));
        }
        std::remove(path_.c_str());
    }
    void launch_scale(float* x, float a, uint32_t n, rtStream_t s) {
        void* args[] = {&x, &a, &n};
        ASSERT_RT_OK(rtLaunchKernel(scale_, rtDim3{(n + 63) / 64, 1, 1}, rtDim3{64, 1, 1}, args, 0, s));
    }

    rtModule_t module_ = nullptr;
    rtFunction_t scale_ = nullptr, fail_if_ = nullptr;
    std::string path_;
    Watchdog watchdog_{std::chrono::milliseconds(60000), "Trace test"};
};

// ---------------------------------------------------------------- the seed's pipelining pattern

TEST_F(Trace, PipelineHasTracksSpansFlowsAndCounters) {
    constexpr uint32_t n = 4096;
    constexpr size_t bytes = n * sizeof(float);
    std::vector<float> host(n, 2.0f), back(n, 0.0f);
    rtStream_t a = nullptr, b = nullptr;
    rtEvent_t done = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&a));
    ASSERT_RT_OK(rtStreamCreate(&b));
    ASSERT_RT_OK(rtEventCreate(&done));

    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_DEFAULT));
    void* d = nullptr;
    ASSERT_RT_OK(rtMalloc(&d, bytes));
    ASSERT_RT_OK(rtMemcpyAsync(d, host.data(), bytes, RT_MEMCPY_HOST_TO_DEVICE, a));
    launch_scale(static_cast<float*>(d), 3.0f, n, a);
    ASSERT_RT_OK(rtEventRecord(done, a));
    ASSERT_RT_OK(rtStreamWaitEvent(b, done));
    launch_scale(static_cast<float*>(d), 0.5f, n, b);
    ASSERT_RT_OK(rtMemsetAsync(static_cast<char*>(d) + bytes - 4, 0, 4, b));
    ASSERT_RT_OK(rtMemcpyAsync(back.data(), d, bytes, RT_MEMCPY_DEVICE_TO_HOST, b));
    ASSERT_RT_OK(rtStreamSynchronize(b));
    ASSERT_RT_OK(rtFree(d));
    ASSERT_RT_OK(rtProfilerStop());
    EXPECT_FLOAT_EQ(back[0], 3.0f);
    EXPECT_FLOAT_EQ(back[n - 1], 0.0f);

    const std::vector<Json> ev = read_trace(path_);
    // One process name, every event of this process.
    int process_names = 0;
    for (const Json& e : ev) {
        EXPECT_EQ(static_cast<int>(e["pid"].n), ::getpid());
        if (e["ph"].str() == "M" && e["name"].str() == "process_name") {
            ++process_names;
            EXPECT_EQ(e["args"]["name"].str(), "runtime " + std::to_string(::getpid()));
        }
    }
    EXPECT_EQ(process_names, 1);

    // Two named stream tracks with a sort index each.
    std::map<long, std::string> names;
    std::set<long> sorted;
    for (const Json* m : select(ev, "M")) {
        if ((*m)["name"].str() == "thread_name") names[static_cast<long>((*m)["tid"].n)] = (*m)["args"]["name"].str();
        if ((*m)["name"].str() == "thread_sort_index") sorted.insert(static_cast<long>((*m)["tid"].n));
    }
    std::vector<const Json*> kernels = select(ev, "X", "kernel");
    ASSERT_EQ(kernels.size(), 2u);
    const long ta = static_cast<long>((*kernels[0])["tid"].n), tb = static_cast<long>((*kernels[1])["tid"].n);
    // Which kernel ran on which stream: the one on `a` scaled by 3 first (its queue order is the file's order of
    // stream a's spans, checked below); find them by track.
    ASSERT_NE(ta, tb);
    for (long t : {ta, tb}) {
        ASSERT_TRUE(names.count(t)) << "track " << t << " has no name";
        EXPECT_EQ(names[t].rfind("cpu:0 stream ", 0), 0u) << names[t];
        EXPECT_NE(names[t], "cpu:0 stream 0");
        EXPECT_TRUE(sorted.count(t));
    }
    for (const Json* k : kernels) {
        EXPECT_EQ((*k)["name"].str(), "scale");
        const Json& args = (*k)["args"];
        EXPECT_EQ(args["grid"][0].n, n / 64);
        EXPECT_EQ(args["grid"][1].n, 1);
        EXPECT_EQ(args["block"][0].n, 64);
        EXPECT_EQ(args["shared"].n, 0);
        EXPECT_EQ(args["status"].str(), "ok");
        EXPECT_GE(args["queued_us"].n, 0);
        EXPECT_GE((*k)["dur"].n, 0);
    }

    // Per track: the spans in operation order, never overlapping, each with its arguments.
    auto spans_of = [&](long tid) {
        std::vector<const Json*> out;
        for (const Json* x : select(ev, "X"))
            if (static_cast<long>((*x)["tid"].n) == tid) out.push_back(x);
        std::sort(out.begin(), out.end(), [](const Json* l, const Json* r) { return (*l)["ts"].n < (*r)["ts"].n; });
        return out;
    };
    auto summary = [](const std::vector<const Json*>& spans) {
        std::vector<std::string> s;
        for (const Json* x : spans) s.push_back((*x)["name"].str());
        return s;
    };
    // Which track is a's: the one with the HtoD copy.
    std::vector<const Json*> sa = spans_of(ta), sb = spans_of(tb);
    if (!sa.empty() && (*sa[0])["name"].str() != "memcpy HtoD") std::swap(sa, sb);
    EXPECT_EQ(summary(sa), (std::vector<std::string>{"memcpy HtoD", "scale", "event record"}));
    EXPECT_EQ(summary(sb), (std::vector<std::string>{"event wait", "scale", "memset", "memcpy DtoH"}));
    for (const auto* spans : {&sa, &sb}) {
        for (size_t i = 0; i + 1 < spans->size(); ++i) {
            const Json& x = *(*spans)[i];
            const Json& y = *(*spans)[i + 1];
            EXPECT_LE(x["ts"].n + x["dur"].n, y["ts"].n + 0.0015) << x["name"].str() << " overlaps " << y["name"].str();
            EXPECT_LT(x["args"]["op"].n, y["args"]["op"].n);
        }
    }
    ASSERT_EQ(sa.size(), 3u);
    ASSERT_EQ(sb.size(), 4u);
    EXPECT_EQ((*sa[0])["cat"].str(), "copy");
    EXPECT_EQ((*sa[0])["args"]["bytes"].n, bytes);
    EXPECT_EQ((*sa[0])["args"]["direction"].str(), "HtoD");
    EXPECT_EQ((*sb[3])["args"]["direction"].str(), "DtoH");
    EXPECT_EQ((*sb[2])["cat"].str(), "fill");
    EXPECT_EQ((*sb[2])["args"]["bytes"].n, 4);
    EXPECT_EQ((*sa[2])["cat"].str(), "event");
    EXPECT_EQ((*sa[2])["args"]["event"].n, (*sb[0])["args"]["event"].n);
    // The program's order: b's work after the wait starts after the record ended.
    const Json& record = *sa[2];
    const Json& wait = *sb[0];
    EXPECT_GE((*sb[1])["ts"].n + 0.0015, record["ts"].n + record["dur"].n);

    // The flow: from inside the record span to inside the wait span, one id.
    std::vector<const Json*> starts = select(ev, "s"), ends = select(ev, "f");
    ASSERT_EQ(starts.size(), 1u);
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ((*starts[0])["id"].n, (*ends[0])["id"].n);
    EXPECT_EQ((*ends[0])["bp"].str(), "e");
    EXPECT_EQ((*starts[0])["tid"].n, record["tid"].n);
    EXPECT_EQ((*ends[0])["tid"].n, wait["tid"].n);
    EXPECT_GE((*starts[0])["ts"].n + 0.0015, record["ts"].n);
    EXPECT_LE((*starts[0])["ts"].n, record["ts"].n + record["dur"].n + 0.0015);
    EXPECT_GE((*ends[0])["ts"].n + 0.0015, wait["ts"].n);
    EXPECT_LE((*ends[0])["ts"].n, wait["ts"].n + wait["dur"].n + 0.0015);

    // Host API calls on this thread's track.
    std::vector<const Json*> api = select(ev, "X", "api");
    std::set<std::string> calls;
    for (const Json* c : api) calls.insert((*c)["name"].str());
    for (const char* c : {"rtMalloc", "rtMemcpyAsync", "rtLaunchKernel", "rtEventRecord", "rtStreamWaitEvent",
                          "rtStreamSynchronize", "rtFree"})
        EXPECT_TRUE(calls.count(c)) << c << " has no api span";
    ASSERT_FALSE(api.empty());
    const long host_track = static_cast<long>((*api[0])["tid"].n);
    EXPECT_EQ(host_track, 1000000 + static_cast<long>(::gettid()));
    EXPECT_EQ(names[host_track], "host thread " + std::to_string(::gettid()));

    // Memory counters: the allocation shows, then its free.
    std::vector<const Json*> counters = select(ev, "C");
    ASSERT_FALSE(counters.empty());
    double peak = 0;
    for (const Json* c : counters) {
        EXPECT_EQ((*c)["name"].str(), "memory cpu:0");
        peak = std::max(peak, (*c)["args"]["allocated"].n);
        EXPECT_GE((*c)["args"]["reserved"].n, (*c)["args"]["allocated"].n);
    }
    EXPECT_GE(peak, bytes);
    EXPECT_LT((*counters.back())["args"]["allocated"].n, peak);

    EXPECT_RT_OK(rtEventDestroy(done));
    EXPECT_RT_OK(rtStreamDestroy(a));
    EXPECT_RT_OK(rtStreamDestroy(b));
}

TEST_F(Trace, RecordsAndWaitsThatNeedNothingStillLieInStreamOrder) {
    constexpr uint32_t n = 1 << 16;
    DevBuf x(n * sizeof(float));
    ASSERT_RT_OK(rtMemset(x.get(), 0, n * sizeof(float)));
    rtStream_t a = nullptr, b = nullptr;
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&a));
    ASSERT_RT_OK(rtStreamCreate(&b));
    ASSERT_RT_OK(rtEventCreate(&e));
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY));
    ASSERT_RT_OK(rtEventRecord(e, a));  // a is idle: complete at once
    ASSERT_RT_OK(rtStreamSynchronize(a));
    for (int i = 0; i < 4; ++i) launch_scale(reinterpret_cast<float*>(x.get()), 1.0f, n, b);
    ASSERT_RT_OK(rtStreamWaitEvent(b, e));  // complete already: waits for nothing
    ASSERT_RT_OK(rtEventRecord(e, b));
    ASSERT_RT_OK(rtStreamWaitEvent(b, e));  // implied by b's own order
    ASSERT_RT_OK(rtStreamSynchronize(b));
    ASSERT_RT_OK(rtProfilerStop());
    const std::vector<Json> ev = read_trace(path_);
    std::vector<const Json*> sb;
    for (const Json* x2 : select(ev, "X"))
        if ((*x2)["tid"].n == (*select(ev, "X", "kernel")[0])["tid"].n) sb.push_back(x2);
    std::sort(sb.begin(), sb.end(), [](auto* l, auto* r) { return (*l)["args"]["op"].n < (*r)["args"]["op"].n; });
    std::vector<std::string> names;
    for (const Json* x2 : sb) names.push_back((*x2)["name"].str());
    EXPECT_EQ(names, (std::vector<std::string>{"scale", "scale", "scale", "scale", "event wait", "event record",
                                               "event wait"}));
    for (size_t i = 0; i + 1 < sb.size(); ++i)
        EXPECT_LE((*sb[i])["ts"].n + (*sb[i])["dur"].n, (*sb[i + 1])["ts"].n + 0.0015) << i;
    EXPECT_EQ(select(ev, "s").size(), 2u);  // both waits name a record
    EXPECT_EQ(select(ev, "f").size(), 2u);
    EXPECT_RT_OK(rtEventDestroy(e));
    EXPECT_RT_OK(rtStreamDestroy(a));
    EXPECT_RT_OK(rtStreamDestroy(b));
}

// ---------------------------------------------------------------- graphs, flags, status

TEST_F(Trace, GraphLaunchNodesNestInsideTheLaunch) {
    constexpr uint32_t n = 256;
    DevBuf x(n * sizeof(float));
    rtGraph_t g = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    rtGraphNode_t prev = nullptr;
    float* p = reinterpret_cast<float*>(x.get());
    for (int i = 0; i < 3; ++i) {
        float a = 2.0f;
        uint32_t count = n;
        void* args[] = {&p, &a, &count};
        rtKernelNodeParams k{};
        k.function = scale_;
        k.grid = rtDim3{n / 64, 1, 1};
        k.block = rtDim3{64, 1, 1};
        k.args = args;
        rtGraphNode_t node = nullptr;
        ASSERT_RT_OK(rtGraphAddKernelNode(&node, g, prev ? &prev : nullptr, prev ? 1 : 0, &k));
        prev = node;
    }
    rtGraphExec_t exec = nullptr;
    ASSERT_RT_OK(rtGraphInstantiate(&exec, g, 0));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY));
    ASSERT_RT_OK(rtGraphLaunch(exec, s));
    ASSERT_RT_OK(rtGraphLaunch(exec, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtProfilerStop());

    const std::vector<Json> ev = read_trace(path_);
    EXPECT_TRUE(select(ev, "X", "api").empty());  // RT_PROFILER_NO_API_CALLS
    EXPECT_TRUE(select(ev, "C").empty());         // RT_PROFILER_NO_MEMORY
    std::vector<const Json*> launches = select(ev, "X", "graph"), nodes = select(ev, "X", "graph_node");
    ASSERT_EQ(launches.size(), 2u);
    ASSERT_EQ(nodes.size(), 6u);
    // The file's order is the writer's (descriptions joined with their stamps), not the stream's: its op is.
    std::sort(launches.begin(), launches.end(), [](auto* l, auto* r) { return (*l)["args"]["op"].n < (*r)["args"]["op"].n; });
    EXPECT_LT((*launches[0])["args"]["op"].n, (*launches[1])["args"]["op"].n);
    for (const Json* l : launches) {
        EXPECT_EQ((*l)["name"].str(), "graph launch");
        EXPECT_EQ((*l)["args"]["nodes"].n, 3);
        EXPECT_EQ((*l)["args"]["graph"].n, (*launches[0])["args"]["graph"].n);
        std::set<double> indices;
        for (const Json* nd : nodes) {
            if ((*nd)["args"]["op"].n != (*l)["args"]["op"].n) continue;
            EXPECT_EQ((*nd)["tid"].n, (*l)["tid"].n);
            EXPECT_EQ((*nd)["name"].str(), "scale");
            EXPECT_EQ((*nd)["args"]["type"].str(), "kernel");
            EXPECT_GE((*nd)["ts"].n + 0.0015, (*l)["ts"].n);
            EXPECT_LE((*nd)["ts"].n + (*nd)["dur"].n, (*l)["ts"].n + (*l)["dur"].n + 0.0015);
            indices.insert((*nd)["args"]["node"].n);
        }
        EXPECT_EQ(indices, (std::set<double>{0, 1, 2}));
    }
    EXPECT_LE((*launches[0])["ts"].n + (*launches[0])["dur"].n, (*launches[1])["ts"].n + 0.0015);
    // A chain: the nodes of one launch run one after the other, in index order.
    std::vector<const Json*> first;
    for (const Json* nd : nodes)
        if ((*nd)["args"]["op"].n == (*launches[0])["args"]["op"].n) first.push_back(nd);
    std::sort(first.begin(), first.end(), [](auto* l, auto* r) { return (*l)["args"]["node"].n < (*r)["args"]["node"].n; });
    for (size_t i = 0; i + 1 < first.size(); ++i)
        EXPECT_LE((*first[i])["ts"].n + (*first[i])["dur"].n, (*first[i + 1])["ts"].n + 0.0015);

    EXPECT_RT_OK(rtStreamDestroy(s));
    EXPECT_RT_OK(rtGraphExecDestroy(exec));
    EXPECT_RT_OK(rtGraphDestroy(g));
}

TEST_F(Trace, GraphNodesOfACoreReplayAreSpansOfTheirOwn) {
    // RUNTIME_GRAPH_LOWERING=0 (read at instantiation): the core queues the nodes one by one.
    constexpr uint32_t n = 256;
    DevBuf x(n * sizeof(float));
    rtGraph_t g = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    rtGraphNode_t prev = nullptr;
    float* p = reinterpret_cast<float*>(x.get());
    float a = 2.0f;
    uint32_t count = n;
    void* args[] = {&p, &a, &count};
    for (int i = 0; i < 2; ++i) {
        rtKernelNodeParams k{};
        k.function = scale_;
        k.grid = rtDim3{n / 64, 1, 1};
        k.block = rtDim3{64, 1, 1};
        k.args = args;
        rtGraphNode_t node = nullptr;
        ASSERT_RT_OK(rtGraphAddKernelNode(&node, g, prev ? &prev : nullptr, prev ? 1 : 0, &k));
        prev = node;
    }
    rtMemsetNodeParams m{x.get(), 0, 64};
    rtGraphNode_t fill = nullptr;
    ASSERT_RT_OK(rtGraphAddMemsetNode(&fill, g, &prev, 1, &m));
    ASSERT_EQ(::setenv("RUNTIME_GRAPH_LOWERING", "0", 1), 0);
    rtGraphExec_t exec = nullptr;
    const rtError_t instantiated = rtGraphInstantiate(&exec, g, 0);
    ::unsetenv("RUNTIME_GRAPH_LOWERING");
    ASSERT_RT_OK(instantiated);
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY));
    ASSERT_RT_OK(rtGraphLaunch(exec, s));
    ASSERT_RT_OK(rtGraphLaunch(exec, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtProfilerStop());

    const std::vector<Json> ev = read_trace(path_);
    EXPECT_TRUE(select(ev, "X", "graph").empty());  // no lowered launch: its nodes are the stream's operations
    std::vector<const Json*> nodes = select(ev, "X", "graph_node");
    ASSERT_EQ(nodes.size(), 6u);
    std::sort(nodes.begin(), nodes.end(), [](auto* l, auto* r) { return (*l)["ts"].n < (*r)["ts"].n; });
    std::set<double> ops;
    for (size_t i = 0; i < nodes.size(); ++i) {
        const Json& nd = *nodes[i];
        EXPECT_EQ(nd["tid"].n, (*nodes[0])["tid"].n);
        EXPECT_EQ(nd["args"]["status"].str(), "ok");
        EXPECT_GE(nd["args"]["queued_us"].n, 0);
        EXPECT_EQ(nd["args"]["type"].str(), i % 3 == 2 ? "memset" : "kernel") << i;
        if (i % 3 != 2) {
            EXPECT_EQ(nd["name"].str(), "scale");
        } else {
            EXPECT_FALSE(nd["name"].str().empty());
        }
        ops.insert(nd["args"]["op"].n);
        if (i % 3) {
            EXPECT_EQ(nd["args"]["op"].n, (*nodes[i - 1])["args"]["op"].n);  // one launch's nodes
        }
        if (i + 1 < nodes.size()) {
            EXPECT_LE(nd["ts"].n + nd["dur"].n, (*nodes[i + 1])["ts"].n + 0.0015);
        }
    }
    EXPECT_EQ(ops.size(), 2u);
    std::set<double> indices{(*nodes[0])["args"]["node"].n, (*nodes[1])["args"]["node"].n, (*nodes[2])["args"]["node"].n};
    EXPECT_EQ(indices.size(), 3u);

    EXPECT_RT_OK(rtStreamDestroy(s));
    EXPECT_RT_OK(rtGraphExecDestroy(exec));
    EXPECT_RT_OK(rtGraphDestroy(g));
}

TEST_F(Trace, AsyncAllocationsAreMemorySpansOfTheirStream) {
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY));
    void* p = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&p, 4096, s));
    ASSERT_RT_OK(rtMemsetAsync(p, 0, 4096, s));
    ASSERT_RT_OK(rtFreeAsync(p, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    void* q = nullptr;
    ASSERT_RT_OK(rtMalloc(&q, 512));  // not stream-ordered: no span
    ASSERT_RT_OK(rtFree(q));
    EXPECT_EQ(rtFreeAsync(reinterpret_cast<void*>(0x10), s), RT_ERROR_INVALID_VALUE);  // refused: no span either
    ASSERT_RT_OK(rtProfilerStop());

    const std::vector<Json> ev = read_trace(path_);
    std::vector<const Json*> mem = select(ev, "X", "memory"), fills = select(ev, "X", "fill");
    ASSERT_EQ(mem.size(), 2u);
    ASSERT_EQ(fills.size(), 1u);
    std::sort(mem.begin(), mem.end(), [](auto* l, auto* r) { return (*l)["ts"].n < (*r)["ts"].n; });
    EXPECT_EQ((*mem[0])["name"].str(), "malloc async");
    EXPECT_EQ((*mem[1])["name"].str(), "free async");
    for (const Json* m : mem) {
        EXPECT_EQ((*m)["args"]["bytes"].n, 4096);
        EXPECT_EQ((*m)["args"]["status"].str(), "ok");
        EXPECT_EQ((*m)["args"]["queued_us"].n, 0);
        EXPECT_EQ((*m)["tid"].n, (*fills[0])["tid"].n);  // the stream's track
    }
    EXPECT_LE((*mem[0])["ts"].n, (*fills[0])["ts"].n + 0.0015);
    EXPECT_EQ((*mem[0])["args"]["op"].n, 0);  // before the stream's first operation
    EXPECT_EQ((*mem[1])["args"]["op"].n, (*fills[0])["args"]["op"].n);
    EXPECT_RT_OK(rtStreamDestroy(s));
}

TEST_F(Trace, ManyOperationsFromSeveralThreadsAreAllWrittenOnce) {
    // More records than a chunk holds, on threads that record while the writer drains (a pause lets it flush).
    constexpr int kThreads = 3, kLaunches = 1500;
    DevBuf x(64 * sizeof(float));
    std::vector<rtStream_t> streams(kThreads);
    for (rtStream_t& s : streams) ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_DEFAULT));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < kLaunches; ++i) {
                if (i == kLaunches / 2) std::this_thread::sleep_for(std::chrono::milliseconds(150));
                launch_scale(reinterpret_cast<float*>(x.get()), 1.0f, 64, streams[t]);
            }
        });
    for (std::thread& t : threads) t.join();
    for (rtStream_t s : streams) ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtProfilerStop());

    const std::vector<Json> ev = read_trace(path_);
    std::map<double, std::set<double>> ops;  // track -> operation numbers
    for (const Json* k : select(ev, "X", "kernel")) {
        EXPECT_EQ((*k)["args"]["status"].str(), "ok");
        EXPECT_GE((*k)["dur"].n, 0);
        EXPECT_TRUE(ops[(*k)["tid"].n].insert((*k)["args"]["op"].n).second) << "written twice";
    }
    ASSERT_EQ(ops.size(), static_cast<size_t>(kThreads));
    for (const auto& [track, numbers] : ops) {
        EXPECT_EQ(numbers.size(), static_cast<size_t>(kLaunches)) << track;
        EXPECT_EQ(*numbers.begin(), 1);
        EXPECT_EQ(*numbers.rbegin(), kLaunches);
    }
    size_t launches = 0;
    for (const Json* a : select(ev, "X", "api")) launches += (*a)["name"].str() == "rtLaunchKernel";
    EXPECT_EQ(launches, static_cast<size_t>(kThreads * kLaunches));
    for (rtStream_t s : streams) EXPECT_RT_OK(rtStreamDestroy(s));
}

TEST_F(Trace, FailedAndSkippedOperationsSaySo) {
    DevBuf c(sizeof(uint32_t));
    ASSERT_RT_OK(rtMemset(c.get(), 0, sizeof(uint32_t)));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS));
    uint32_t* cp = reinterpret_cast<uint32_t*>(c.get());
    uint32_t bad = 0;
    void* args[] = {&cp, &bad};
    ASSERT_RT_OK(rtLaunchKernel(fail_if_, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtMemsetAsync(c.get(), 1, sizeof(uint32_t), s));
    EXPECT_NE(rtStreamSynchronize(s), RT_SUCCESS);
    ASSERT_RT_OK(rtProfilerStop());
    const std::vector<Json> ev = read_trace(path_);
    std::vector<const Json*> k = select(ev, "X", "kernel"), f = select(ev, "X", "fill");
    ASSERT_EQ(k.size(), 1u);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ((*k[0])["name"].str(), "fail_if");
    EXPECT_EQ((*k[0])["args"]["status"].str(), "failed");
    EXPECT_EQ((*f[0])["args"]["status"].str(), "skipped");
    EXPECT_RT_OK(rtStreamDestroy(s));
}

TEST_F(Trace, OperationsBeforeStartAndAfterStopAreNotWritten) {
    DevBuf x(64);
    ASSERT_RT_OK(rtMemset(x.get(), 0, 64));
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY));
    ASSERT_RT_OK(rtMemset(x.get(), 1, 32));
    ASSERT_RT_OK(rtProfilerStop());
    ASSERT_RT_OK(rtMemset(x.get(), 2, 16));
    std::vector<const Json*> fills;
    const std::vector<Json> ev = read_trace(path_);
    fills = select(ev, "X", "fill");
    ASSERT_EQ(fills.size(), 1u);
    EXPECT_EQ((*fills[0])["args"]["bytes"].n, 32);
    EXPECT_GE(track_of(ev, "cpu:0 stream 0"), 1);  // rtMemset runs on the default stream
}

// ---------------------------------------------------------------- refusals

TEST_F(Trace, RefusesBadArgumentsAndStates) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtProfilerStart(nullptr, 0));
    EXPECT_TRUE(contains(last_message(), "path is NULL"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtProfilerStart("", 0));
    EXPECT_TRUE(contains(last_message(), "path is empty"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtProfilerStart(path_.c_str(), 0x10));
    EXPECT_TRUE(contains(last_message(), "flags 0x10 has unknown bits"));
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtProfilerStop());
    EXPECT_TRUE(contains(last_message(), "no trace is being written"));
    EXPECT_RT_ERROR(RT_ERROR_UNKNOWN, rtProfilerStart("/nonexistent-dir-of-rt-tests/t.json", 0));
    EXPECT_TRUE(contains(last_message(), "/nonexistent-dir-of-rt-tests/t.json"));
    EXPECT_TRUE(contains(last_message(), "No such file or directory"));

    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), 0));
    const std::string other = path_ + ".other";
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtProfilerStart(other.c_str(), 0));
    EXPECT_TRUE(contains(last_message(), path_));
    EXPECT_FALSE(std::filesystem::exists(other));  // refused before anything was created
    ASSERT_RT_OK(rtProfilerStop());
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtProfilerStop());
    read_trace(path_);  // the refusals left a complete file
    // A second trace after a stop: a fresh file.
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), 0));
    ASSERT_RT_OK(rtProfilerStop());
    read_trace(path_);
}

TEST_F(Trace, StartAndStopFromManyThreadsStayConsistent) {
    std::atomic<int> started{0}, stopped{0};
    std::vector<std::thread> threads;
    DevBuf x(4096);
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 20; ++i) {
                if (rtProfilerStart(path_.c_str(), 0) == RT_SUCCESS) started.fetch_add(1);
                rtMemsetAsync(x.get() + t * 1024, i, 1024, nullptr);
                if (rtProfilerStop() == RT_SUCCESS) stopped.fetch_add(1);
            }
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(started.load(), stopped.load());
    EXPECT_GE(started.load(), 1);
    ASSERT_RT_OK(rtDeviceSynchronize());
    read_trace(path_);
}

// ---------------------------------------------------------------- the file outlives the program

/// Runs this test binary again as the trace child (g_trace_child, below) with `env` added; returns its wait status.
/// `kill_when`: kills it with SIGKILL once the predicate holds (polled), instead of waiting for it to exit.
int run_child(const std::vector<std::string>& env, const std::function<bool()>& kill_when = nullptr,
              const std::string& stderr_path = "") {
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::string filter = "--gtest_filter=-*";  // (the child leaves before gtest would run anything)
    std::vector<std::string> vars;
    for (char** e = environ; *e; ++e) vars.emplace_back(*e);
    for (const std::string& v : env) vars.push_back(v);
    std::vector<char*> envp, argv{self.data(), filter.data(), nullptr};
    for (std::string& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (!stderr_path.empty())
        posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int spawned = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) return -1;
    if (kill_when) {
        const bool seen = wait_until(kill_when, 30s);
        ::kill(pid, SIGKILL);
        if (!seen) ADD_FAILURE() << "the child never reached the point to kill it at";
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
}

/// The child's program: the pipelining loop of the parent tests, on and on (until killed) or `rounds` times.
/// The child's program: `rounds` rounds (-1: until killed) of a copy, a kernel and a synchronize. Returns 0, or the
/// number of the step that failed (its message on stderr).
int child_program(long rounds) {
    auto failed = [](rtError_t e, const char* what) {
        if (e == RT_SUCCESS) return false;
        std::fprintf(stderr, "trace child: %s: %s\n", what, rtGetLastErrorMessage());
        return true;
    };
    rtModule_t m = nullptr;
    rtFunction_t f = nullptr;
    if (failed(rtModuleLoadSource(&m, kSource, nullptr), "rtModuleLoadSource")) return 11;
    if (failed(rtModuleGetFunction(&f, m, "scale"), "rtModuleGetFunction")) return 12;
    constexpr uint32_t n = 1024;
    std::vector<float> host(n, 1.0f);
    void* d = nullptr;
    if (failed(rtMalloc(&d, n * sizeof(float)), "rtMalloc")) return 13;
    for (long i = 0; rounds < 0 || i < rounds; ++i) {
        float* p = static_cast<float*>(d);
        float a = 1.0f;
        uint32_t count = n;
        void* args[] = {&p, &a, &count};
        if (failed(rtMemcpyAsync(d, host.data(), n * sizeof(float), RT_MEMCPY_HOST_TO_DEVICE, nullptr), "rtMemcpyAsync"))
            return 14;
        if (failed(rtLaunchKernel(f, rtDim3{n / 64, 1, 1}, rtDim3{64, 1, 1}, args, 0, nullptr), "rtLaunchKernel"))
            return 15;
        if (failed(rtStreamSynchronize(nullptr), "rtStreamSynchronize")) return 16;
    }
    return 0;
}

// The TraceFile tests run this executable again with RT_TEST_TRACE_CHILD set: before gtest starts, the child starts
// the trace of RT_TEST_TRACE_PATH (if set; RUNTIME_TRACE starts its own), runs child_program and leaves — "exit":
// through exit() without rtProfilerStop (the exit handler completes the file), "forever": only when killed.
const bool g_trace_child = [] {
    const char* mode = std::getenv("RT_TEST_TRACE_CHILD");
    if (!mode) return true;
    int rc = 0;
    if (const char* path = std::getenv("RT_TEST_TRACE_PATH"); path && rtProfilerStart(path, 0) != RT_SUCCESS) {
        std::fprintf(stderr, "trace child: rtProfilerStart: %s\n", rtGetLastErrorMessage());
        rc = 10;
    }
    if (rc == 0) rc = child_program(std::string(mode) == "forever" ? -1 : 20);
    std::fflush(stderr);
    std::exit(rc);
}();

TEST_F(Trace, AForkedChildExitsWithoutTouchingTheParentsTrace) {
    ASSERT_RT_OK(rtProfilerStart(path_.c_str(), 0));
    // Forked once the writer thread has started and waits for its first flush (~100 ms): GCC 12's AddressSanitizer
    // takes no allocator locks across fork (LLVM added them in 18, llvm-project PR 75290), so a fork while another
    // thread is inside malloc — the writer allocating as it starts — can deadlock the child in the sanitizer's
    // allocator, not in the runtime (seen once in CI). The runtime itself must not care when the fork comes.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const pid_t pid = ::fork();
    if (pid == 0) std::exit(rtProfilerStop() == RT_SUCCESS ? 0 : 3);  // its exit handler runs too: neither may hang
    ASSERT_GT(pid, 0);
    int status = 0;
    if (!wait_until([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, 30s)) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        FAIL() << "the forked child hangs at its exit";
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    DevBuf x(64);
    ASSERT_RT_OK(rtMemset(x.get(), 0, 64));
    ASSERT_RT_OK(rtProfilerStop());
    const std::vector<Json> ev = read_trace(path_);
    EXPECT_EQ(select(ev, "X", "fill").size(), 1u);  // the parent's trace goes on, complete and closed once
}

TEST(TraceFile, AKilledProgramLeavesAReadableTrace) {
    const std::string path = temp_path("killed.json");
    const int status = run_child({"RT_TEST_TRACE_CHILD=forever", "RT_TEST_TRACE_PATH=" + path},
                                 [&] { return read_text(path).find("\"cat\":\"kernel\"") != std::string::npos; });
    ASSERT_TRUE(WIFSIGNALED(status));
    const std::vector<Json> ev = read_trace(path, false);
    EXPECT_FALSE(select(ev, "X", "kernel").empty());
    EXPECT_FALSE(select(ev, "X", "copy").empty());
    std::remove(path.c_str());
}

TEST(TraceFile, AnExitWithoutStopCompletesTheTrace) {
    const std::string path = temp_path("exit.json");
    const int status = run_child({"RT_TEST_TRACE_CHILD=exit", "RT_TEST_TRACE_PATH=" + path});
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    const std::vector<Json> ev = read_trace(path, true);
    EXPECT_EQ(select(ev, "X", "kernel").size(), 20u);
    EXPECT_EQ(select(ev, "X", "copy").size(), 20u);
    std::remove(path.c_str());
}

TEST(TraceFile, RuntimeTraceStartsATraceAtInit) {
    const std::string path = temp_path("env.json");
    const int status = run_child({"RT_TEST_TRACE_CHILD=exit", "RUNTIME_TRACE=" + path});
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    const std::vector<Json> ev = read_trace(path, true);
    EXPECT_EQ(select(ev, "X", "kernel").size(), 20u);
    EXPECT_GE(track_of(ev, "cpu:0 stream 0"), 1);
    EXPECT_FALSE(select(ev, "X", "api").empty());
    std::remove(path.c_str());
}

TEST(TraceFile, AnUnwritableRuntimeTraceWarnsAndRunsOn) {
    const std::string err = temp_path("stderr.txt");
    const int status = run_child({"RT_TEST_TRACE_CHILD=exit", "RUNTIME_TRACE=/nonexistent-dir-of-rt-tests/t.json"},
                                 nullptr, err);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    const std::string text = read_text(err);
    EXPECT_TRUE(contains(text, "RUNTIME_TRACE=/nonexistent-dir-of-rt-tests/t.json")) << text;
    EXPECT_TRUE(contains(text, "No such file or directory")) << text;
    std::remove(err.c_str());
}

}  // namespace
