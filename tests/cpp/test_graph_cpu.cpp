// test_graph_cpu.cpp — the cpu device's graph execution through the C API: branches run concurrently, chains keep
// order, failures name the node and skip what depends on it, host nodes run on runtime threads only, one executable
// launched from several threads runs one launch at a time, wide fan-outs, updates between and during launches.
#include "test_util.hpp"

#include <set>

namespace {

using namespace rt_test;

/// The kernels of these tests. Bounded spins: a test that fails to run branches at once fails, never hangs.
constexpr const char* kSource = R"(
RT_KERNEL void empty() {}
// A chain's order: node i finds c[0] == i; anything else marks c[1].
RT_KERNEL void step(unsigned* c, unsigned i) {
    if (c[0] == i) c[0] = i + 1; else c[1] = 1;
}
RT_KERNEL void count(unsigned* c) { atomic_inc(c); }
RT_KERNEL void mark(unsigned* slots, unsigned i) { slots[i] += 1; }
RT_KERNEL void add(unsigned* c, unsigned v) { c[0] += v; }
// Two kernels that each wait for the other to arrive (flags[me]), until the host gives up (flags[4]); flags[2 + me]:
// it saw the other.
RT_KERNEL void meet(unsigned* flags, unsigned me) {
    atomic_add(&flags[me], 1u);
    while (atomic_add(&flags[4], 0u) == 0)
        if (atomic_add(&flags[1 - me], 0u) != 0) {
            flags[2 + me] = 1;
            return;
        }
}
// One launch at a time: enter finds nobody inside, leave counts the launch.
RT_KERNEL void enter(unsigned* c) { if (atomic_inc(&c[1]) != 0) c[2] = 1; }
RT_KERNEL void leave(unsigned* c) { c[0] += 1; atomic_dec(&c[1]); }
RT_KERNEL void fail_if(unsigned* c, unsigned bad) { rt_assert(c[0] != bad); }
)";

class GraphCpu : public ::testing::Test {
protected:
    // Enough executors for two branches to run at once whatever the machine (the host thread may run a third).
    static void SetUpTestSuite() {
        ASSERT_RT_OK(rtFinalize());
        ASSERT_RT_OK(rtInit("cpu.executors=4"));
    }
    static void TearDownTestSuite() { rtFinalize(); }

    void SetUp() override {
        ASSERT_EQ(backend_of(0), "cpu");
        ASSERT_RT_OK(rtSetDevice(0));
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kSource, nullptr));
        for (auto& [name, f] : {std::pair{"empty", &empty_}, {"step", &step_}, {"count", &count_}, {"mark", &mark_},
                                {"add", &add_}, {"meet", &meet_}, {"enter", &enter_}, {"leave", &leave_},
                                {"fail_if", &fail_if_}})
            ASSERT_RT_OK(rtModuleGetFunction(f, module_, name));
        ASSERT_RT_OK(rtStreamCreate(&stream_));
    }
    void TearDown() override {
        if (stream_) {
            EXPECT_RT_OK(rtStreamDestroy(stream_));
        }
        for (rtGraphExec_t x : execs_) EXPECT_RT_OK(rtGraphExecDestroy(x));
        for (rtGraph_t g : graphs_) EXPECT_RT_OK(rtGraphDestroy(g));
        if (module_) {
            EXPECT_RT_OK(rtModuleUnload(module_));
        }
    }

    rtGraph_t graph() {
        rtGraph_t g = nullptr;
        EXPECT_RT_OK(rtGraphCreate(&g, 0));
        graphs_.push_back(g);
        return g;
    }
    rtGraphExec_t instantiate(rtGraph_t g) {
        rtGraphExec_t x = nullptr;
        EXPECT_RT_OK(rtGraphInstantiate(&x, g, 0));
        if (x) execs_.push_back(x);
        return x;
    }
    /// A kernel node of one work-item running f(args...) (each argument's value is copied when the node is added).
    template <class... A>
    rtGraphNode_t kernel(rtGraph_t g, std::vector<rtGraphNode_t> deps, rtFunction_t f, A... a) {
        void* values[] = {&a..., nullptr};
        rtKernelNodeParams p{};
        p.function = f;
        p.grid = rtDim3{1, 1, 1};
        p.block = rtDim3{1, 1, 1};
        p.args = sizeof...(A) ? values : nullptr;
        rtGraphNode_t n = nullptr;
        EXPECT_RT_OK(rtGraphAddKernelNode(&n, g, deps.data(), deps.size(), &p));
        return n;
    }
    rtGraphNode_t host(rtGraph_t g, std::vector<rtGraphNode_t> deps, rtHostFn_t fn, void* user_data) {
        rtHostNodeParams p{fn, user_data};
        rtGraphNode_t n = nullptr;
        EXPECT_RT_OK(rtGraphAddHostNode(&n, g, deps.data(), deps.size(), &p));
        return n;
    }
    rtGraphNode_t empty(rtGraph_t g, std::vector<rtGraphNode_t> deps) {
        rtGraphNode_t n = nullptr;
        EXPECT_RT_OK(rtGraphAddEmptyNode(&n, g, deps.data(), deps.size()));
        return n;
    }
    std::vector<unsigned> read(const DevBuf& b, size_t n) {
        std::vector<unsigned> v(n);
        EXPECT_RT_OK(rtMemcpy(v.data(), b.get(), n * sizeof(unsigned), RT_MEMCPY_DEVICE_TO_HOST));
        return v;
    }
    void zero(const DevBuf& b, size_t n) { EXPECT_RT_OK(rtMemset(b.get(), 0, n * sizeof(unsigned))); }

    rtModule_t module_ = nullptr;
    rtFunction_t empty_ = nullptr, step_ = nullptr, count_ = nullptr, mark_ = nullptr, add_ = nullptr,
                 meet_ = nullptr, enter_ = nullptr, leave_ = nullptr, fail_if_ = nullptr;
    rtStream_t stream_ = nullptr;
    std::vector<rtGraph_t> graphs_;
    std::vector<rtGraphExec_t> execs_;
    Watchdog watchdog_{std::chrono::milliseconds(45000), "GraphCpu test"};
};

// ---------------------------------------------------------------- concurrency of branches

/// Two host functions that each wait (bounded) for the other to arrive: both see the other only if they run at once.
struct Meeting {
    std::atomic<int> arrived{0};
    std::atomic<int> met{0};
    static void run(void* p) {
        auto* m = static_cast<Meeting*>(p);
        m->arrived.fetch_add(1);
        const auto deadline = Clock::now() + 10s * Watchdog::scale();
        while (m->arrived.load() < 2 && Clock::now() < deadline) std::this_thread::yield();
        if (m->arrived.load() >= 2) m->met.fetch_add(1);
    }
};

TEST_F(GraphCpu, IndependentHostNodesRunAtTheSameTime) {
    rtGraph_t g = graph();
    Meeting m;
    rtGraphNode_t root = empty(g, {});
    rtGraphNode_t a = host(g, {root}, &Meeting::run, &m);
    rtGraphNode_t b = host(g, {root}, &Meeting::run, &m);
    empty(g, {a, b});
    rtGraphExec_t x = instantiate(g);
    for (int launch = 0; launch < 5; ++launch) {
        m.arrived = 0;
        ASSERT_RT_OK(rtGraphLaunch(x, stream_));
        ASSERT_RT_OK(rtStreamSynchronize(stream_));
        ASSERT_EQ(m.met.load(), 2 * (launch + 1)) << "launch " << launch << ": the branches ran one after the other";
    }
}

/// Gives up a wait after 10 s (stretched by RT_TEST_TIME_SCALE), or at once when destroyed: stores 1 at `flag`.
class GiveUp {
public:
    explicit GiveUp(unsigned* flag) : thread_([this, flag] {
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, 10s * Watchdog::scale(), [this] { return done_; });
        std::atomic_ref<unsigned>(*flag).store(1);
    }) {}
    ~GiveUp() {
        {
            std::lock_guard lock(mutex_);
            done_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;
};

TEST_F(GraphCpu, IndependentKernelNodesRunAtTheSameTime) {
    // Roots on independent branches (no host node: the synchronizing thread may run one of them).
    DevBuf flags(5 * sizeof(unsigned));
    for (int launch = 0; launch < 5; ++launch) {
        zero(flags, 5);
        GiveUp give_up(reinterpret_cast<unsigned*>(flags.get()) + 4);  // device memory of the cpu device: host memory
        rtGraph_t g = graph();
        void* f = flags.get();
        rtGraphNode_t a = kernel(g, {}, meet_, f, 0u);
        rtGraphNode_t b = kernel(g, {}, meet_, f, 1u);
        kernel(g, {a, b}, empty_);
        rtGraphExec_t x = instantiate(g);
        ASSERT_RT_OK(rtGraphLaunch(x, stream_));
        ASSERT_RT_OK(rtStreamSynchronize(stream_));
        std::vector<unsigned> v = read(flags, 4);
        ASSERT_EQ(v[2], 1u) << "launch " << launch << ": kernel 0 never saw kernel 1 arrive";
        ASSERT_EQ(v[3], 1u) << "launch " << launch << ": kernel 1 never saw kernel 0 arrive";
    }
}

// ---------------------------------------------------------------- order

TEST_F(GraphCpu, ChainsKeepTheirOrder) {
    constexpr unsigned kLength = 2000;
    DevBuf c(2 * sizeof(unsigned));
    rtGraph_t g = graph();
    rtGraphNode_t prev = nullptr;
    void* p = c.get();
    for (unsigned i = 0; i < kLength; ++i) prev = kernel(g, prev ? std::vector{prev} : std::vector<rtGraphNode_t>{}, step_, p, i);
    rtGraphExec_t x = instantiate(g);
    for (int launch = 0; launch < 3; ++launch) {
        zero(c, 2);
        ASSERT_RT_OK(rtGraphLaunch(x, stream_));
        ASSERT_RT_OK(rtStreamSynchronize(stream_));
        std::vector<unsigned> v = read(c, 2);
        EXPECT_EQ(v[0], kLength) << "launch " << launch;
        EXPECT_EQ(v[1], 0u) << "launch " << launch << ": a node ran before its predecessor";
    }
}

TEST_F(GraphCpu, LaddersOfDiamondsKeepTheirOrder) {
    // step(i) → {step-free side branches} → join → step(i + 1) ...: every fork and join on the way.
    constexpr unsigned kRungs = 300;
    DevBuf c(2 * sizeof(unsigned));
    DevBuf side(sizeof(unsigned));
    rtGraph_t g = graph();
    void* p = c.get();
    void* s = side.get();
    rtGraphNode_t prev = nullptr;
    for (unsigned i = 0; i < kRungs; ++i) {
        rtGraphNode_t n = kernel(g, prev ? std::vector{prev} : std::vector<rtGraphNode_t>{}, step_, p, i);
        rtGraphNode_t l = kernel(g, {n}, count_, s);
        rtGraphNode_t r = kernel(g, {n}, count_, s);
        prev = empty(g, {l, r});
    }
    rtGraphExec_t x = instantiate(g);
    zero(side, 1);
    for (int launch = 0; launch < 3; ++launch) {
        ASSERT_RT_OK(rtMemsetAsync(c.get(), 0, 2 * sizeof(unsigned), stream_));  // in stream order
        ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    }
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    std::vector<unsigned> v = read(c, 2);
    EXPECT_EQ(v[0], kRungs);
    EXPECT_EQ(v[1], 0u) << "a rung ran before the one above it";
    EXPECT_EQ(read(side, 1)[0], 3 * 2 * kRungs);
}

TEST_F(GraphCpu, CopiesFillsKernelsAndHostNodesRunInDependencyOrder) {
    constexpr size_t kN = 1 << 20;  // bytes
    DevBuf a(kN), b(kN);
    std::vector<unsigned char> out(kN, 0xEE);
    struct Check {
        const DevBuf* b;
        bool ok = false;
        static void run(void* p) {
            auto* c = static_cast<Check*>(p);
            // A host node may read device memory of the cpu device directly (host-addressable).
            auto* bytes = static_cast<const unsigned char*>(c->b->get());
            c->ok = bytes[0] == 7 && bytes[kN - 1] == 7 + 5;
        }
    } check{&b};
    rtGraph_t g = graph();
    rtMemsetNodeParams fill{a.get(), 7, kN};
    rtGraphNode_t n_fill = nullptr, n_copy = nullptr, n_back = nullptr;
    ASSERT_RT_OK(rtGraphAddMemsetNode(&n_fill, g, nullptr, 0, &fill));
    rtMemcpyNodeParams copy{b.get(), a.get(), kN, RT_MEMCPY_DEVICE_TO_DEVICE};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&n_copy, g, &n_fill, 1, &copy));
    // The last word of b gets 5 more (byte kN-4 .. kN-1 as an unsigned: its top byte is the last byte).
    void* last_word = static_cast<unsigned char*>(b.get()) + kN - 4;
    rtGraphNode_t n_add = kernel(g, {n_copy}, add_, last_word, 5u << 24);
    rtGraphNode_t n_check = host(g, {n_add}, &Check::run, &check);
    rtMemcpyNodeParams back{out.data(), b.get(), kN, RT_MEMCPY_DEVICE_TO_HOST};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&n_back, g, &n_check, 1, &back));
    rtGraphExec_t x = instantiate(g);
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_TRUE(check.ok) << "the host node did not see the fill, copy and kernel before it";
    EXPECT_EQ(out[0], 7);
    EXPECT_EQ(out[kN / 2], 7);
    EXPECT_EQ(out[kN - 1], 7 + 5);
}

TEST_F(GraphCpu, LaunchesRunInStreamOrderWithTheStreamsOtherWork) {
    DevBuf c(2 * sizeof(unsigned));
    void* p = c.get();
    rtGraph_t g = graph();
    rtGraphNode_t n = kernel(g, {}, step_, p, 1u);  // expects c[0] == 1: after the launch before it
    kernel(g, {n}, step_, p, 2u);
    rtGraphExec_t x = instantiate(g);
    zero(c, 2);
    rtFunction_t f = step_;
    unsigned zero_index = 0, three_index = 3;
    void* a0[] = {&p, &zero_index};
    void* a3[] = {&p, &three_index};
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, a0, 0, stream_));  // 0 → 1
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));                                          // 1 → 2 → 3
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, a3, 0, stream_));  // 3 → 4
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    std::vector<unsigned> v = read(c, 2);
    EXPECT_EQ(v[0], 4u);
    EXPECT_EQ(v[1], 0u) << "the launch did not run between the stream's operations before and after it";
}

// ---------------------------------------------------------------- failures

TEST_F(GraphCpu, AFailedKernelNodeIsNamedAndItsSuccessorsDoNotRun) {
    DevBuf c(sizeof(unsigned));
    void* p = c.get();
    rtGraph_t g = graph();
    rtGraphNode_t n0 = kernel(g, {}, add_, p, 1u);          // node 0: c = 1
    rtGraphNode_t n1 = kernel(g, {n0}, fail_if_, p, 1u);    // node 1: fails (c == 1)
    rtGraphNode_t n2 = kernel(g, {n1}, add_, p, 100u);      // node 2: skipped
    kernel(g, {n2}, add_, p, 1000u);                        // node 3: skipped
    rtGraphExec_t x = instantiate(g);
    zero(c, 1);
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(stream_));
    const std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "kernel 'fail_if' (node 1 of the graph launched as operation #"));
    EXPECT_TRUE(contains(msg, "rt_assert(c[0] != bad) failed"));
    EXPECT_EQ(read(c, 1)[0], 1u) << "a successor of the failed node ran";

    // The stream stays usable, and so does the exec: the same failure again, then a healthy launch.
    zero(c, 1);
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(stream_));
    EXPECT_TRUE(contains(last_message(), "(node 1 of the graph launched as operation #"));
    EXPECT_EQ(read(c, 1)[0], 1u);
    EXPECT_RT_OK(rtMemset(c.get(), 0x10, sizeof(unsigned)));  // c != 1: node 1 passes
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_EQ(read(c, 1)[0], 0x10101010u + 1101u);
}

TEST_F(GraphCpu, AFailureSkipsIndependentBranchesNotYetStarted) {
    // Node 1 fails; the chain hanging off the root's other side is either done before the failure or skipped, never
    // partly run after it: its nodes count in order, so the count is a prefix of 0..kLength.
    constexpr unsigned kLength = 200;
    DevBuf c(2 * sizeof(unsigned));
    DevBuf bad(sizeof(unsigned));
    void* p = c.get();
    void* q = bad.get();
    rtGraph_t g = graph();
    rtGraphNode_t root = empty(g, {});
    rtGraphNode_t f = kernel(g, {root}, fail_if_, q, 0u);
    rtGraphNode_t after = kernel(g, {f}, add_, q, 1u);
    rtGraphNode_t prev = root;
    for (unsigned i = 0; i < kLength; ++i) prev = kernel(g, {prev}, step_, p, i);
    empty(g, {after, prev});
    rtGraphExec_t x = instantiate(g);
    zero(c, 2);
    zero(bad, 1);
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(stream_));
    EXPECT_TRUE(contains(last_message(), "kernel 'fail_if' (node 1 of the graph"));
    std::vector<unsigned> v = read(c, 2);
    EXPECT_LE(v[0], kLength);
    EXPECT_EQ(v[1], 0u);
    EXPECT_EQ(read(bad, 1)[0], 0u) << "the failed node's successor ran";
}

void fail_host(void* p) {
    rtHostFuncSetError(RT_ERROR_INVALID_VALUE, static_cast<const char*>(p));
}

TEST_F(GraphCpu, AFailedHostNodeIsNamedAndItsSuccessorsDoNotRun) {
    DevBuf c(sizeof(unsigned));
    void* p = c.get();
    rtGraph_t g = graph();
    static char why[] = "the sensor was unplugged";
    rtGraphNode_t n0 = empty(g, {});
    rtGraphNode_t n1 = host(g, {n0}, &fail_host, why);
    kernel(g, {n1}, add_, p, 1u);
    rtGraphExec_t x = instantiate(g);
    zero(c, 1);
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamSynchronize(stream_));
    const std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "(node 1 of the graph launched as operation #"));
    EXPECT_TRUE(contains(msg, "failed: the sensor was unplugged"));
    EXPECT_EQ(read(c, 1)[0], 0u) << "the failed host node's successor ran";
    // The stream goes on.
    unsigned two = 2;
    void* args[] = {&p, &two};
    ASSERT_RT_OK(rtLaunchKernel(add_, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, stream_));
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_EQ(read(c, 1)[0], 2u);
}

TEST_F(GraphCpu, ALaunchBehindAPendingFailureIsSkipped) {
    DevBuf c(sizeof(unsigned));
    void* p = c.get();
    rtGraph_t g = graph();
    kernel(g, {}, add_, p, 1u);
    rtGraphExec_t x = instantiate(g);
    zero(c, 1);
    unsigned bad = 0;
    void* args[] = {&p, &bad};
    ASSERT_RT_OK(rtLaunchKernel(fail_if_, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, stream_));  // c == 0: fails
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(stream_));
    EXPECT_TRUE(contains(last_message(), "kernel 'fail_if' (operation #"));
    EXPECT_EQ(read(c, 1)[0], 0u) << "the graph launched behind a failure ran";
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_EQ(read(c, 1)[0], 1u);
}

// ---------------------------------------------------------------- host nodes

struct Threads {
    std::mutex mutex;
    std::set<std::thread::id> ids;
    static void record(void* p) {
        auto* t = static_cast<Threads*>(p);
        std::lock_guard lock(t->mutex);
        t->ids.insert(std::this_thread::get_id());
    }
};

TEST_F(GraphCpu, HostNodesNeverRunOnTheSynchronizingThread) {
    Threads seen;
    rtGraph_t g = graph();
    rtGraphNode_t prev = nullptr;
    for (int i = 0; i < 20; ++i) prev = host(g, prev ? std::vector{prev} : std::vector<rtGraphNode_t>{}, &Threads::record, &seen);
    std::vector<rtGraphNode_t> fan;
    for (int i = 0; i < 20; ++i) fan.push_back(host(g, {prev}, &Threads::record, &seen));
    kernel(g, fan, empty_);
    rtGraphExec_t x = instantiate(g);
    // Synchronize at once, many times: the synchronizing thread would take the queue if it were allowed to.
    for (int launch = 0; launch < 50; ++launch) {
        ASSERT_RT_OK(rtGraphLaunch(x, stream_));
        ASSERT_RT_OK(rtStreamSynchronize(stream_));
    }
    std::lock_guard lock(seen.mutex);
    EXPECT_FALSE(seen.ids.empty());
    EXPECT_EQ(seen.ids.count(std::this_thread::get_id()), 0u) << "a host node ran on the thread inside synchronize";
}

// ---------------------------------------------------------------- one exec, several threads

TEST_F(GraphCpu, AnExecLaunchedFromSeveralThreadsRunsOneLaunchAtATime) {
    constexpr int kThreads = 4, kLaunches = 50;
    DevBuf c(3 * sizeof(unsigned));
    zero(c, 3);
    void* p = c.get();
    rtGraph_t g = graph();
    rtGraphNode_t in = kernel(g, {}, enter_, p);
    std::vector<rtGraphNode_t> middle;
    for (int i = 0; i < 8; ++i) middle.push_back(kernel(g, {in}, empty_));
    kernel(g, middle, leave_, p);
    rtGraphExec_t x = instantiate(g);
    for (bool shared_stream : {false, true}) {
        zero(c, 3);
        std::vector<rtStream_t> streams(kThreads, stream_);
        if (!shared_stream) {
            for (auto& s : streams) ASSERT_RT_OK(rtStreamCreate(&s));
        }
        std::vector<std::thread> threads;
        std::atomic<int> failures{0};
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&, t] {
                for (int i = 0; i < kLaunches; ++i)
                    if (rtGraphLaunch(x, streams[static_cast<size_t>(t)]) != RT_SUCCESS) failures.fetch_add(1);
            });
        for (auto& t : threads) t.join();
        EXPECT_EQ(failures.load(), 0) << last_message();
        for (rtStream_t s : streams) EXPECT_RT_OK(rtStreamSynchronize(s));
        std::vector<unsigned> v = read(c, 3);
        EXPECT_EQ(v[0], unsigned{kThreads * kLaunches}) << (shared_stream ? "one stream" : "a stream per thread");
        EXPECT_EQ(v[2], 0u) << "two launches of one exec overlapped (" << (shared_stream ? "one stream" : "streams") << ")";
        if (!shared_stream) {
            for (rtStream_t s : streams) EXPECT_RT_OK(rtStreamDestroy(s));
        }
    }
}

TEST_F(GraphCpu, ExecsOnSeveralStreamsRunSideBySide) {
    // Different execs share the executors: each completes, each with its own count.
    constexpr int kExecs = 4, kWidth = 64, kLaunches = 20;
    std::vector<std::unique_ptr<DevBuf>> counts;
    std::vector<rtGraphExec_t> xs;
    std::vector<rtStream_t> streams(kExecs);
    for (int e = 0; e < kExecs; ++e) {
        counts.push_back(std::make_unique<DevBuf>(sizeof(unsigned)));
        zero(*counts.back(), 1);
        void* p = counts.back()->get();
        rtGraph_t g = graph();
        rtGraphNode_t root = empty(g, {});
        std::vector<rtGraphNode_t> fan;
        for (int i = 0; i < kWidth; ++i) fan.push_back(kernel(g, {root}, count_, p));
        empty(g, fan);
        xs.push_back(instantiate(g));
        ASSERT_RT_OK(rtStreamCreate(&streams[static_cast<size_t>(e)]));
    }
    for (int i = 0; i < kLaunches; ++i)
        for (int e = 0; e < kExecs; ++e) ASSERT_RT_OK(rtGraphLaunch(xs[static_cast<size_t>(e)], streams[static_cast<size_t>(e)]));
    for (int e = 0; e < kExecs; ++e) {
        EXPECT_RT_OK(rtStreamSynchronize(streams[static_cast<size_t>(e)]));
        EXPECT_EQ(read(*counts[static_cast<size_t>(e)], 1)[0], unsigned{kWidth * kLaunches}) << "exec " << e;
        EXPECT_RT_OK(rtStreamDestroy(streams[static_cast<size_t>(e)]));
    }
}

// ---------------------------------------------------------------- width

TEST_F(GraphCpu, ALargeFanOutRunsEveryNodeOnceEachLaunch) {
    constexpr unsigned kWidth = 5000;
    constexpr int kLaunches = 3;
    DevBuf slots(kWidth * sizeof(unsigned));
    zero(slots, kWidth);
    void* s = slots.get();
    struct Join {
        const DevBuf* slots;
        int launches_seen = 0;
        bool ok = true;
        static void run(void* p) {
            auto* j = static_cast<Join*>(p);
            ++j->launches_seen;
            auto* v = reinterpret_cast<const unsigned*>(j->slots->get());
            for (unsigned i = 0; i < kWidth; ++i)
                if (v[i] != static_cast<unsigned>(j->launches_seen)) j->ok = false;
        }
    } join{&slots};
    rtGraph_t g = graph();
    rtGraphNode_t root = empty(g, {});
    std::vector<rtGraphNode_t> fan;
    fan.reserve(kWidth);
    for (unsigned i = 0; i < kWidth; ++i) fan.push_back(kernel(g, {root}, mark_, s, i));
    host(g, fan, &Join::run, &join);
    rtGraphExec_t x = instantiate(g);
    for (int launch = 0; launch < kLaunches; ++launch) ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_EQ(join.launches_seen, kLaunches);
    EXPECT_TRUE(join.ok) << "the join ran before every node of the fan-out had run exactly once";
    std::vector<unsigned> v = read(slots, kWidth);
    EXPECT_EQ(std::count(v.begin(), v.end(), static_cast<unsigned>(kLaunches)), static_cast<long>(kWidth));
}

TEST_F(GraphCpu, ManyRootsAndAnEmptyGraph) {
    constexpr unsigned kRoots = 300;
    DevBuf c(sizeof(unsigned));
    zero(c, 1);
    void* p = c.get();
    rtGraph_t g = graph();
    for (unsigned i = 0; i < kRoots; ++i) kernel(g, {}, count_, p);
    rtGraphExec_t x = instantiate(g);
    rtGraphExec_t none = instantiate(graph());
    ASSERT_RT_OK(rtGraphLaunch(none, stream_));
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    ASSERT_RT_OK(rtGraphLaunch(none, stream_));
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_EQ(read(c, 1)[0], 2 * kRoots);
}

// ---------------------------------------------------------------- updates

TEST_F(GraphCpu, ParameterUpdatesReachTheNextLaunchesOnly) {
    DevBuf c(sizeof(unsigned));
    zero(c, 1);
    void* p = c.get();
    rtGraph_t g = graph();
    Gate gate;
    rtGraphNode_t n = kernel(g, {}, add_, p, 1u);
    rtGraphExec_t x = instantiate(g);
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));  // + 1
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_EQ(read(c, 1)[0], 1u);

    // In place (no launch in flight): + 10 from now on.
    unsigned ten = 10;
    void* args10[] = {&p, &ten};
    rtKernelNodeParams kp{};
    kp.function = add_;
    kp.grid = rtDim3{1, 1, 1};
    kp.block = rtDim3{1, 1, 1};
    kp.args = args10;
    ASSERT_RT_OK(rtGraphExecKernelNodeSetParams(x, n, &kp));
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_EQ(read(c, 1)[0], 11u);

    // While a launch waits behind a gate: it keeps + 10, the next launch gets + 100.
    ASSERT_RT_OK(gate.launch(stream_));
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    unsigned hundred = 100;
    void* args100[] = {&p, &hundred};
    kp.args = args100;
    ASSERT_RT_OK(rtGraphExecKernelNodeSetParams(x, n, &kp));
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_EQ(read(c, 1)[0], 11u + 10u + 100u);

    // Another kernel with other parameters: count(p).
    void* args_count[] = {&p};
    kp.function = count_;
    kp.args = args_count;
    ASSERT_RT_OK(rtGraphExecKernelNodeSetParams(x, n, &kp));
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_EQ(read(c, 1)[0], 11u + 10u + 100u + 1u);
}

TEST_F(GraphCpu, AWholeGraphUpdateTakesEveryNodesParameters) {
    constexpr unsigned kLength = 100;
    DevBuf a(2 * sizeof(unsigned)), b(2 * sizeof(unsigned));
    auto chain = [&](void* p) {
        rtGraph_t g = graph();
        rtGraphNode_t prev = nullptr;
        for (unsigned i = 0; i < kLength; ++i)
            prev = kernel(g, prev ? std::vector{prev} : std::vector<rtGraphNode_t>{}, step_, p, i);
        return g;
    };
    rtGraphExec_t x = instantiate(chain(a.get()));
    zero(a, 2);
    zero(b, 2);
    rtGraphExecUpdateResult result = RT_GRAPH_EXEC_UPDATE_ERROR;
    ASSERT_RT_OK(rtGraphExecUpdate(x, chain(b.get()), &result));
    EXPECT_EQ(result, RT_GRAPH_EXEC_UPDATE_SUCCESS);
    ASSERT_RT_OK(rtGraphLaunch(x, stream_));
    ASSERT_RT_OK(rtStreamSynchronize(stream_));
    EXPECT_EQ(read(a, 2), (std::vector<unsigned>{0, 0}));
    EXPECT_EQ(read(b, 2), (std::vector<unsigned>{kLength, 0}));
}

}  // namespace
