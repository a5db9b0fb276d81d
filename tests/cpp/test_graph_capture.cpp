// test_graph_capture.cpp — stream capture: every operation becomes a node with its stream-order dependencies, fork and
// join through events, the rules of each capture mode (this thread and others), nested and unjoined captures,
// isolation between captures, the default stream, and graphs that replay what the stream would have done.
#include "test_util.hpp"

#include <set>

using namespace rt_test;

namespace {

RT_TEST_TEMP_CACHE_DIR("graph-capture");

const char* const kSource = R"rtsrc(
RT_KERNEL void axpb(float* x, int32_t n, float a, float b) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) x[i] = x[i] * a + b;
}
RT_KERNEL void add(const float* x, float* y, int32_t n) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) y[i] = y[i] + x[i];
}
)rtsrc";

std::vector<rtGraphNode_t> nodes_of(rtGraph_t g) {
    size_t n = 0;
    EXPECT_RT_OK(rtGraphGetNodes(g, nullptr, &n));
    std::vector<rtGraphNode_t> v(n);
    if (n) {
        EXPECT_RT_OK(rtGraphGetNodes(g, v.data(), &n));
    }
    v.resize(n);
    return v;
}

rtGraphNodeType type_of(rtGraphNode_t node) {
    rtGraphNodeType t = RT_GRAPH_NODE_TYPE_EMPTY;
    EXPECT_RT_OK(rtGraphNodeGetType(node, &t));
    return t;
}

std::vector<rtGraphNodeType> types_of(rtGraph_t g) {
    std::vector<rtGraphNodeType> v;
    for (rtGraphNode_t n : nodes_of(g)) v.push_back(type_of(n));
    return v;
}

/// The dependencies of `node` as a set (their order is not part of the contract).
std::set<rtGraphNode_t> deps_of(rtGraphNode_t node) {
    size_t n = 0;
    EXPECT_RT_OK(rtGraphNodeGetDependencies(node, nullptr, &n));
    std::vector<rtGraphNode_t> v(n);
    if (n) {
        EXPECT_RT_OK(rtGraphNodeGetDependencies(node, v.data(), &n));
    }
    return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)};
}

rtStreamCaptureStatus status_of(rtStream_t s, unsigned long long* id = nullptr) {
    rtStreamCaptureStatus st = RT_STREAM_CAPTURE_STATUS_NONE;
    EXPECT_RT_OK(rtStreamGetCaptureInfo(s, &st, id));
    return st;
}


/// Restores the calling thread's capture mode at scope exit.
struct ThreadMode {
    rtStreamCaptureMode previous;
    explicit ThreadMode(rtStreamCaptureMode mode) : previous(mode) {
        EXPECT_RT_OK(rtThreadExchangeStreamCaptureMode(&previous));
    }
    ~ThreadMode() { rtThreadExchangeStreamCaptureMode(&previous); }
};

/// Runs `fn` on another thread and returns what it returned.
rtError_t on_other_thread(const std::function<rtError_t()>& fn, std::string* message = nullptr) {
    rtError_t e = RT_ERROR_UNKNOWN;
    std::thread t([&] {
        e = fn();
        if (message) *message = last_message();
    });
    t.join();
    return e;
}

class Capture : public DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kSource, nullptr));
        ASSERT_RT_OK(rtModuleGetFunction(&axpb_, module_, "axpb"));
        ASSERT_RT_OK(rtModuleGetFunction(&add_, module_, "add"));
    }
    void TearDown() override {
        if (module_) rtModuleUnload(module_);
    }

public:
    rtError_t axpb(rtStream_t s, void* x, int n, float a, float b) {
        void* args[] = {&x, &n, &a, &b};
        return rtLaunchKernel(axpb_, rtDim3{static_cast<unsigned>((n + 63) / 64), 1, 1}, rtDim3{64, 1, 1}, args, 0, s);
    }
    rtError_t add(rtStream_t s, const void* x, void* y, int n) {
        void* args[] = {&x, &y, &n};
        return rtLaunchKernel(add_, rtDim3{static_cast<unsigned>((n + 63) / 64), 1, 1}, rtDim3{64, 1, 1}, args, 0, s);
    }

protected:
    /// Ends the capture on `s` expecting `code`; the message must contain `needle`; no graph comes back.
    void expect_end_fails(rtStream_t s, rtError_t code, const std::string& needle) {
        rtGraph_t g = reinterpret_cast<rtGraph_t>(0x1);
        EXPECT_RT_ERROR(code, rtStreamEndCapture(s, &g));
        EXPECT_TRUE(contains(last_message(), needle));
        EXPECT_EQ(g, nullptr);
        EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_NONE);
    }
    /// The stream runs work again: a fill and a synchronize.
    void expect_usable(rtStream_t s) {
        DevBuf d(64);
        ASSERT_NE(d.get(), nullptr);
        EXPECT_RT_OK(rtMemsetAsync(d.get(), 3, 64, s));
        EXPECT_RT_OK(rtStreamSynchronize(s));
        unsigned char h[64] = {};
        ASSERT_RT_OK(rtMemcpy(h, d.get(), 64, RT_MEMCPY_DEVICE_TO_HOST));
        EXPECT_EQ(h[63], 3);
    }

    rtModule_t module_ = nullptr;
    rtFunction_t axpb_ = nullptr, add_ = nullptr;
};

// ---------------------------------------------------------------- what a capture records

TEST_P(Capture, EmptyCaptureGivesAnEmptyGraphAndUniqueIds) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_NONE);
    std::set<unsigned long long> ids;
    for (int i = 0; i < 3; ++i) {
        ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
        unsigned long long id = 0;
        EXPECT_EQ(status_of(s, &id), RT_STREAM_CAPTURE_STATUS_ACTIVE);
        EXPECT_NE(id, 0u);
        ids.insert(id);
        GraphGuard g{nullptr};
        ASSERT_RT_OK(rtStreamEndCapture(s, g.out()));
        ASSERT_NE(static_cast<rtGraph_t>(g), nullptr);
        EXPECT_TRUE(nodes_of(g).empty());
        unsigned long long after = 12345;
        EXPECT_EQ(status_of(s, &after), RT_STREAM_CAPTURE_STATUS_NONE);
        EXPECT_EQ(after, 12345u) << "the id is written only while capturing";
    }
    EXPECT_EQ(ids.size(), 3u);
}

TEST_P(Capture, EveryOperationBecomesANodeInStreamOrderAndNothingRuns) {
    StreamGuard s, other;
    ASSERT_RT_OK(s.status());
    constexpr int kN = 256;
    constexpr size_t kBytes = kN * sizeof(float);
    DevBuf d(kBytes);
    ASSERT_NE(d.get(), nullptr);
    std::vector<float> before(kN, 5.0f), host(kN, 1.0f);
    ASSERT_RT_OK(rtMemcpy(d.get(), before.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE));
    EventGuard outside, rec;
    ASSERT_RT_OK(rtEventRecord(outside, other));
    std::atomic<bool> ran{false};

    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_RT_OK(rtMemcpyAsync(d.get(), host.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE, s));
    EXPECT_RT_OK(rtMemsetAsync(d.get(), 0, kBytes, s));
    EXPECT_RT_OK(axpb(s, d.get(), kN, 2.0f, 1.0f));
    EXPECT_RT_OK(rtLaunchHostFunc(s, set_flag, &ran));
    EXPECT_RT_OK(rtEventRecord(rec, s));
    EXPECT_RT_OK(rtStreamWaitEvent(s, outside));
    void* a = nullptr;
    EXPECT_RT_OK(rtMallocAsync(&a, 1024, s));
    EXPECT_NE(a, nullptr);
    EXPECT_RT_OK(rtMemsetAsync(a, 1, 1024, s));  // the allocation's address is device memory inside the capture
    EXPECT_RT_OK(rtMemcpyAsync(d.get(), a, 0, RT_MEMCPY_DEVICE_TO_DEVICE, s));  // 0 bytes: no node, as on a stream
    EXPECT_RT_OK(rtFreeAsync(a, s));
    void* none = reinterpret_cast<void*>(0x1);
    EXPECT_RT_OK(rtMallocAsync(&none, 0, s));
    EXPECT_EQ(none, nullptr);
    GraphGuard g{nullptr};
    ASSERT_RT_OK(rtStreamEndCapture(s, g.out()));

    const std::vector<rtGraphNodeType> expected = {
        RT_GRAPH_NODE_TYPE_MEMCPY,       RT_GRAPH_NODE_TYPE_MEMSET,     RT_GRAPH_NODE_TYPE_KERNEL,
        RT_GRAPH_NODE_TYPE_HOST,         RT_GRAPH_NODE_TYPE_EVENT_RECORD, RT_GRAPH_NODE_TYPE_WAIT_EVENT,
        RT_GRAPH_NODE_TYPE_MEM_ALLOC,    RT_GRAPH_NODE_TYPE_MEMSET,     RT_GRAPH_NODE_TYPE_MEM_FREE};
    EXPECT_EQ(types_of(g), expected);
    std::vector<rtGraphNode_t> nodes = nodes_of(g);
    ASSERT_EQ(nodes.size(), expected.size());
    EXPECT_TRUE(deps_of(nodes[0]).empty());
    for (size_t i = 1; i < nodes.size(); ++i)
        EXPECT_EQ(deps_of(nodes[i]), std::set<rtGraphNode_t>{nodes[i - 1]}) << "node " << i;

    // Captured, not run: the stream has nothing queued, the host function did not run, the memory is unchanged.
    EXPECT_RT_OK(rtStreamSynchronize(s));
    EXPECT_FALSE(ran.load());
    std::vector<float> now(kN, 0.0f);
    ASSERT_RT_OK(rtMemcpy(now.data(), d.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(now, before);
}

TEST_P(Capture, ForkAndJoinThroughEventsGiveEdgesNotNodes) {
    StreamGuard s1, s2, s3;
    ASSERT_RT_OK(s1.status());
    DevBuf x(1024), y(1024), z(1024);
    EventGuard fork, join2, join3;
    ASSERT_RT_OK(rtStreamBeginCapture(s1, RT_STREAM_CAPTURE_MODE_GLOBAL));
    unsigned long long id1 = 0, id2 = 0, id3 = 0;
    EXPECT_EQ(status_of(s1, &id1), RT_STREAM_CAPTURE_STATUS_ACTIVE);
    EXPECT_RT_OK(rtMemsetAsync(x.get(), 0, 1024, s1));    // 0
    EXPECT_RT_OK(rtEventRecord(fork, s1));                // 1
    EXPECT_EQ(status_of(s2), RT_STREAM_CAPTURE_STATUS_NONE);
    EXPECT_RT_OK(rtStreamWaitEvent(s2, fork));            // s2 joins the capture
    EXPECT_RT_OK(rtStreamWaitEvent(s3, fork));            // s3 too
    EXPECT_EQ(status_of(s2, &id2), RT_STREAM_CAPTURE_STATUS_ACTIVE);
    EXPECT_EQ(status_of(s3, &id3), RT_STREAM_CAPTURE_STATUS_ACTIVE);
    EXPECT_EQ(id2, id1);
    EXPECT_EQ(id3, id1);
    EXPECT_RT_OK(rtMemsetAsync(y.get(), 1, 1024, s2));    // 2
    EXPECT_RT_OK(rtMemsetAsync(z.get(), 2, 1024, s3));    // 3
    EXPECT_RT_OK(rtMemsetAsync(x.get(), 3, 1024, s1));    // 4
    EXPECT_RT_OK(rtEventRecord(join2, s2));               // 5
    EXPECT_RT_OK(rtEventRecord(join3, s3));               // 6
    EXPECT_RT_OK(rtStreamWaitEvent(s1, join2));           // edges
    EXPECT_RT_OK(rtStreamWaitEvent(s1, join3));
    EXPECT_RT_OK(rtStreamWaitEvent(s1, join3));           // twice: no duplicate edge
    EXPECT_RT_OK(rtMemcpyAsync(y.get(), x.get(), 1024, RT_MEMCPY_DEVICE_TO_DEVICE, s1));  // 7
    GraphGuard g{nullptr};
    ASSERT_RT_OK(rtStreamEndCapture(s1, g.out()));
    EXPECT_EQ(status_of(s2), RT_STREAM_CAPTURE_STATUS_NONE);
    EXPECT_EQ(status_of(s3), RT_STREAM_CAPTURE_STATUS_NONE);

    std::vector<rtGraphNode_t> n = nodes_of(g);
    ASSERT_EQ(n.size(), 8u);
    EXPECT_EQ(types_of(g), (std::vector<rtGraphNodeType>{
                               RT_GRAPH_NODE_TYPE_MEMSET, RT_GRAPH_NODE_TYPE_EVENT_RECORD, RT_GRAPH_NODE_TYPE_MEMSET,
                               RT_GRAPH_NODE_TYPE_MEMSET, RT_GRAPH_NODE_TYPE_MEMSET, RT_GRAPH_NODE_TYPE_EVENT_RECORD,
                               RT_GRAPH_NODE_TYPE_EVENT_RECORD, RT_GRAPH_NODE_TYPE_MEMCPY}));
    using Set = std::set<rtGraphNode_t>;
    EXPECT_EQ(deps_of(n[1]), Set{n[0]});
    EXPECT_EQ(deps_of(n[2]), Set{n[1]});
    EXPECT_EQ(deps_of(n[3]), Set{n[1]});
    EXPECT_EQ(deps_of(n[4]), Set{n[1]});
    EXPECT_EQ(deps_of(n[5]), Set{n[2]});
    EXPECT_EQ(deps_of(n[6]), Set{n[3]});
    EXPECT_EQ(deps_of(n[7]), (Set{n[4], n[5], n[6]}));
    expect_usable(s2);
    expect_usable(s3);
}

TEST_P(Capture, ForkedStreamWithoutWorkNeedsNoJoin) {
    StreamGuard s1, s2;
    DevBuf x(64);
    EventGuard e;
    ASSERT_RT_OK(rtStreamBeginCapture(s1, RT_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_RT_OK(rtEventRecord(e, s1));
    EXPECT_RT_OK(rtStreamWaitEvent(s2, e));
    EXPECT_RT_OK(rtMemsetAsync(x.get(), 0, 64, s1));
    GraphGuard g{nullptr};
    EXPECT_RT_OK(rtStreamEndCapture(s1, g.out()));  // nothing on s2 that s1 does not already follow
    EXPECT_EQ(nodes_of(g).size(), 2u);
}

TEST_P(Capture, UnjoinedWorkIsNamedAndEveryStreamIsUsableAgain) {
    StreamGuard s1, s2;
    DevBuf x(64);
    EventGuard e;
    ASSERT_RT_OK(rtStreamBeginCapture(s1, RT_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_RT_OK(rtEventRecord(e, s1));
    EXPECT_RT_OK(rtStreamWaitEvent(s2, e));
    EXPECT_RT_OK(rtMemsetAsync(x.get(), 0, 64, s2));  // never joined back
    EXPECT_RT_OK(rtMemsetAsync(x.get(), 1, 64, s1));
    rtGraph_t none = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtStreamEndCapture(s2, &none));
    EXPECT_TRUE(contains(last_message(), "begun on")) << "a joined stream does not end the capture";
    expect_end_fails(s1, RT_ERROR_STREAM_CAPTURE_UNJOINED, ptr_text(s2.get()));
    EXPECT_TRUE(contains(last_message(), "unjoined"));
    EXPECT_EQ(status_of(s2), RT_STREAM_CAPTURE_STATUS_NONE);
    expect_usable(s1);
    expect_usable(s2);
    // And each can capture again.
    ASSERT_RT_OK(rtStreamBeginCapture(s2, RT_STREAM_CAPTURE_MODE_GLOBAL));
    GraphGuard g{nullptr};
    EXPECT_RT_OK(rtStreamEndCapture(s2, g.out()));
}

TEST_P(Capture, SeveralStreamsCaptureEveryKindOfOperation) {
    StreamGuard s1, s2;
    constexpr int kN = 128;
    DevBuf x(kN * sizeof(float)), y(kN * sizeof(float));
    std::vector<float> h(kN, 2.0f);
    EventGuard fork, join, outside;
    ASSERT_RT_OK(rtEventRecord(outside, nullptr));
    std::atomic<bool> ran{false};
    ASSERT_RT_OK(rtStreamBeginCapture(s1, RT_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    EXPECT_RT_OK(rtEventRecord(fork, s1));                                                        // 0
    EXPECT_RT_OK(rtStreamWaitEvent(s2, fork));
    void* tmp = nullptr;
    EXPECT_RT_OK(rtMallocAsync(&tmp, kN * sizeof(float), s2));                                    // 1
    EXPECT_RT_OK(rtMemcpyAsync(tmp, h.data(), kN * sizeof(float), RT_MEMCPY_HOST_TO_DEVICE, s2));  // 2
    EXPECT_RT_OK(axpb(s2, tmp, kN, 3.0f, 0.0f));                                                  // 3
    EXPECT_RT_OK(rtStreamWaitEvent(s2, outside));                                                 // 4
    EXPECT_RT_OK(rtLaunchHostFunc(s1, set_flag, &ran));                                           // 5
    EXPECT_RT_OK(rtMemsetAsync(y.get(), 0, kN * sizeof(float), s1));                              // 6
    EXPECT_RT_OK(rtEventRecord(join, s2));                                                        // 7
    EXPECT_RT_OK(rtStreamWaitEvent(s1, join));
    EXPECT_RT_OK(add(s1, tmp, y.get(), kN));                                                      // 8
    EXPECT_RT_OK(rtFreeAsync(tmp, s1));                                                           // 9
    GraphGuard g{nullptr};
    ASSERT_RT_OK(rtStreamEndCapture(s1, g.out()));
    std::vector<rtGraphNode_t> n = nodes_of(g);
    ASSERT_EQ(n.size(), 10u);
    EXPECT_EQ(types_of(g), (std::vector<rtGraphNodeType>{
                               RT_GRAPH_NODE_TYPE_EVENT_RECORD, RT_GRAPH_NODE_TYPE_MEM_ALLOC, RT_GRAPH_NODE_TYPE_MEMCPY,
                               RT_GRAPH_NODE_TYPE_KERNEL, RT_GRAPH_NODE_TYPE_WAIT_EVENT, RT_GRAPH_NODE_TYPE_HOST,
                               RT_GRAPH_NODE_TYPE_MEMSET, RT_GRAPH_NODE_TYPE_EVENT_RECORD, RT_GRAPH_NODE_TYPE_KERNEL,
                               RT_GRAPH_NODE_TYPE_MEM_FREE}));
    using Set = std::set<rtGraphNode_t>;
    EXPECT_EQ(deps_of(n[1]), Set{n[0]});
    EXPECT_EQ(deps_of(n[2]), Set{n[1]});
    EXPECT_EQ(deps_of(n[3]), Set{n[2]});
    EXPECT_EQ(deps_of(n[4]), Set{n[3]});
    EXPECT_EQ(deps_of(n[5]), Set{n[0]});
    EXPECT_EQ(deps_of(n[6]), Set{n[5]});
    EXPECT_EQ(deps_of(n[7]), Set{n[4]});
    EXPECT_EQ(deps_of(n[8]), (Set{n[6], n[7]}));
    EXPECT_EQ(deps_of(n[9]), Set{n[8]});
    EXPECT_FALSE(ran.load());
}

// ---------------------------------------------------------------- the rules, per mode

/// Calls that are no stream operation and therefore forbidden during a capture in GLOBAL and THREAD_LOCAL modes.
struct UnsafeCall {
    const char* name;
    std::function<rtError_t(void* dev, void* host)> call;
};
std::vector<UnsafeCall> unsafe_calls() {
    return {
        {"rtMalloc", [](void*, void*) { void* p = nullptr; return rtMalloc(&p, 64); }},
        {"rtFree", [](void* dev, void*) { return rtFree(dev); }},
        {"rtMemcpy", [](void* dev, void* host) { return rtMemcpy(host, dev, 64, RT_MEMCPY_DEVICE_TO_HOST); }},
        {"rtMemset", [](void* dev, void*) { return rtMemset(dev, 0, 64); }},
        {"rtDeviceSynchronize", [](void*, void*) { return rtDeviceSynchronize(); }},
    };
}

TEST_P(Capture, UnsafeCallsInvalidateAGlobalOrThreadLocalCaptureOfThisThread) {
    for (rtStreamCaptureMode mode : {RT_STREAM_CAPTURE_MODE_GLOBAL, RT_STREAM_CAPTURE_MODE_THREAD_LOCAL}) {
        for (const UnsafeCall& u : unsafe_calls()) {
            SCOPED_TRACE(std::string(u.name) + " in mode " + std::to_string(mode));
            StreamGuard s;
            DevBuf d(64);
            unsigned char host[64];
            ASSERT_RT_OK(rtStreamBeginCapture(s, mode));
            EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, u.call(d.get(), host));
            EXPECT_TRUE(contains(last_message(), u.name));
            EXPECT_TRUE(contains(last_message(), "RT_STREAM_CAPTURE_MODE_RELAXED")) << "says how to allow it";
            EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_INVALIDATED);
            // Operations on an invalidated capture fail saying why.
            EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_INVALIDATED, rtMemsetAsync(d.get(), 0, 64, s));
            EXPECT_TRUE(contains(last_message(), u.name));
            expect_end_fails(s, RT_ERROR_STREAM_CAPTURE_INVALIDATED, u.name);
            expect_usable(s);
        }
    }
}

TEST_P(Capture, SynchronizingOrQueryingACapturingStreamIsRefusedInEveryMode) {
    for (rtStreamCaptureMode mode :
         {RT_STREAM_CAPTURE_MODE_GLOBAL, RT_STREAM_CAPTURE_MODE_THREAD_LOCAL, RT_STREAM_CAPTURE_MODE_RELAXED}) {
        for (int query = 0; query < 2; ++query) {
            SCOPED_TRACE(std::to_string(mode) + (query ? " query" : " synchronize"));
            StreamGuard s1, s2;
            EventGuard e;
            ASSERT_RT_OK(rtStreamBeginCapture(s1, mode));
            ASSERT_RT_OK(rtEventRecord(e, s1));
            ASSERT_RT_OK(rtStreamWaitEvent(s2, e));
            // The joined stream is as much part of the capture as the origin.
            EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, query ? rtStreamQuery(s2) : rtStreamSynchronize(s2));
            EXPECT_TRUE(contains(last_message(), ptr_text(s2.get())));
            EXPECT_EQ(status_of(s1), RT_STREAM_CAPTURE_STATUS_INVALIDATED);
            EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, query ? rtStreamQuery(s1) : rtStreamSynchronize(s1));
            expect_end_fails(s1, RT_ERROR_STREAM_CAPTURE_INVALIDATED, query ? "querying" : "synchronizing");
            expect_usable(s1);
            expect_usable(s2);
        }
    }
}

TEST_P(Capture, RelaxedCaptureAllowsUnsafeCallsOfItsThread) {
    rtStream_t s = nullptr;  // non-blocking: the synchronous copies below use the default stream
    ASSERT_RT_OK(rtStreamCreateWithFlags(&s, RT_STREAM_NON_BLOCKING));
    DevBuf d(64);
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_RELAXED));
    void* p = nullptr;
    EXPECT_RT_OK(rtMalloc(&p, 64));
    EXPECT_RT_OK(rtFree(p));
    unsigned char host[64];
    EXPECT_RT_OK(rtMemset(d.get(), 0, 64));
    EXPECT_RT_OK(rtMemcpy(host, d.get(), 64, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, rtDeviceSynchronize())
        << "the mode allows it, but it would wait for the capturing stream";
    EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_INVALIDATED);
    expect_end_fails(s, RT_ERROR_STREAM_CAPTURE_INVALIDATED, "rtDeviceSynchronize");
    EXPECT_RT_OK(rtStreamDestroy(s));
}

TEST_P(Capture, ThreadRelaxedModeAllowsUnsafeCallsDuringItsOwnCapture) {
    StreamGuard s;
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    {
        ThreadMode relaxed(RT_STREAM_CAPTURE_MODE_RELAXED);
        EXPECT_EQ(relaxed.previous, RT_STREAM_CAPTURE_MODE_GLOBAL);
        void* p = nullptr;
        EXPECT_RT_OK(rtMalloc(&p, 64));
        EXPECT_RT_OK(rtFree(p));
    }
    {
        ThreadMode thread_local_mode(RT_STREAM_CAPTURE_MODE_THREAD_LOCAL);  // still this thread's capture
        void* p = nullptr;
        EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, rtMalloc(&p, 64));
    }
    expect_end_fails(s, RT_ERROR_STREAM_CAPTURE_INVALIDATED, "rtMalloc");
}

TEST_P(Capture, GlobalCaptureForbidsUnsafeCallsOfOtherThreadsInGlobalMode) {
    StreamGuard s;
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    // Another thread in THREAD_LOCAL or RELAXED mode is not concerned by this thread's capture.
    for (rtStreamCaptureMode mode : {RT_STREAM_CAPTURE_MODE_THREAD_LOCAL, RT_STREAM_CAPTURE_MODE_RELAXED}) {
        EXPECT_RT_OK(on_other_thread([mode] {
            ThreadMode m(mode);
            void* p = nullptr;
            rtError_t e = rtMalloc(&p, 64);
            if (e == RT_SUCCESS) e = rtFree(p);
            return e;
        })) << "thread mode " << mode;
    }
    EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_ACTIVE);
    std::string message;
    EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, on_other_thread([] {
                        void* p = nullptr;
                        return rtMalloc(&p, 64);  // this thread's mode: the initial GLOBAL
                    }, &message));
    EXPECT_TRUE(contains(message, "another thread"));
    EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_INVALIDATED);
    expect_end_fails(s, RT_ERROR_STREAM_CAPTURE_INVALIDATED, "rtMalloc was called by another thread");
}

TEST_P(Capture, ThreadLocalAndRelaxedCapturesDoNotConcernOtherThreads) {
    for (rtStreamCaptureMode mode : {RT_STREAM_CAPTURE_MODE_THREAD_LOCAL, RT_STREAM_CAPTURE_MODE_RELAXED}) {
        StreamGuard s;
        ASSERT_RT_OK(rtStreamBeginCapture(s, mode));
        EXPECT_RT_OK(on_other_thread([] {
            void* p = nullptr;
            rtError_t e = rtMalloc(&p, 64);
            if (e == RT_SUCCESS) e = rtFree(p);
            return e;
        })) << "capture mode " << mode;
        EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_ACTIVE);
        GraphGuard g{nullptr};
        EXPECT_RT_OK(rtStreamEndCapture(s, g.out()));
    }
}

TEST_P(Capture, ExchangeStreamCaptureModeSwapsThisThreadsMode) {
    rtStreamCaptureMode m = RT_STREAM_CAPTURE_MODE_RELAXED;
    ASSERT_RT_OK(rtThreadExchangeStreamCaptureMode(&m));
    EXPECT_EQ(m, RT_STREAM_CAPTURE_MODE_GLOBAL) << "initially GLOBAL";
    rtStreamCaptureMode seen = RT_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    EXPECT_RT_OK(on_other_thread([&] {
        rtStreamCaptureMode mine = RT_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        rtError_t e = rtThreadExchangeStreamCaptureMode(&mine);
        seen = mine;
        return e;
    }));
    EXPECT_EQ(seen, RT_STREAM_CAPTURE_MODE_GLOBAL) << "each thread has its own mode";
    m = RT_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    ASSERT_RT_OK(rtThreadExchangeStreamCaptureMode(&m));
    EXPECT_EQ(m, RT_STREAM_CAPTURE_MODE_RELAXED);
    m = RT_STREAM_CAPTURE_MODE_GLOBAL;
    ASSERT_RT_OK(rtThreadExchangeStreamCaptureMode(&m));
    EXPECT_EQ(m, RT_STREAM_CAPTURE_MODE_THREAD_LOCAL);

    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtThreadExchangeStreamCaptureMode(nullptr));
    int bad = 3;
    rtStreamCaptureMode bad_mode;
    std::memcpy(&bad_mode, &bad, sizeof bad);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtThreadExchangeStreamCaptureMode(&bad_mode));
    EXPECT_TRUE(contains(last_message(), "3"));
    m = RT_STREAM_CAPTURE_MODE_GLOBAL;
    ASSERT_RT_OK(rtThreadExchangeStreamCaptureMode(&m));
    EXPECT_EQ(m, RT_STREAM_CAPTURE_MODE_GLOBAL) << "a refused exchange changes nothing";
}

// ---------------------------------------------------------------- begin and end

TEST_P(Capture, BeginIsRefusedOnTheDefaultStreamOnACapturingStreamAndWithABadMode) {
    EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, rtStreamBeginCapture(nullptr, RT_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_TRUE(contains(last_message(), "default stream"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE,
                    rtStreamBeginCapture(garbage_handle<rtStream_t>(), RT_STREAM_CAPTURE_MODE_GLOBAL));
    StreamGuard s1, s2;
    int bad = -1;
    rtStreamCaptureMode bad_mode;
    std::memcpy(&bad_mode, &bad, sizeof bad);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamBeginCapture(s1, bad_mode));
    EXPECT_EQ(status_of(s1), RT_STREAM_CAPTURE_STATUS_NONE);

    ASSERT_RT_OK(rtStreamBeginCapture(s1, RT_STREAM_CAPTURE_MODE_GLOBAL));
    unsigned long long id = 0;
    status_of(s1, &id);
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtStreamBeginCapture(s1, RT_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_TRUE(contains(last_message(), "already capturing"));
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtStreamBeginCapture(s1, RT_STREAM_CAPTURE_MODE_RELAXED));
    EventGuard e;
    ASSERT_RT_OK(rtEventRecord(e, s1));
    ASSERT_RT_OK(rtStreamWaitEvent(s2, e));
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtStreamBeginCapture(s2, RT_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_TRUE(contains(last_message(), "joined"));
    // A refused nested begin breaks nothing.
    unsigned long long still = 0;
    EXPECT_EQ(status_of(s1, &still), RT_STREAM_CAPTURE_STATUS_ACTIVE);
    EXPECT_EQ(still, id);
    GraphGuard g{nullptr};
    EXPECT_RT_OK(rtStreamEndCapture(s1, g.out()));
    EXPECT_EQ(nodes_of(g).size(), 1u);
}

TEST_P(Capture, EndIsRefusedWhereNoCaptureWasBegun) {
    StreamGuard s;
    rtGraph_t g = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtStreamEndCapture(s, &g));
    EXPECT_TRUE(contains(last_message(), "not capturing"));
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtStreamEndCapture(nullptr, &g));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamEndCapture(garbage_handle<rtStream_t>(), &g));
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamEndCapture(s, nullptr));
    EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_ACTIVE) << "a NULL out pointer ends nothing";
    GraphGuard ok{nullptr};
    EXPECT_RT_OK(rtStreamEndCapture(s, ok.out()));
}

TEST_P(Capture, EndFromAnotherThreadNeedsRelaxedMode) {
    for (rtStreamCaptureMode mode : {RT_STREAM_CAPTURE_MODE_GLOBAL, RT_STREAM_CAPTURE_MODE_THREAD_LOCAL}) {
        StreamGuard s;
        ASSERT_RT_OK(rtStreamBeginCapture(s, mode));
        rtStream_t raw = s;
        rtGraph_t g = nullptr;
        std::string message;
        EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_WRONG_THREAD,
                        on_other_thread([&] { return rtStreamEndCapture(raw, &g); }, &message));
        EXPECT_TRUE(contains(message, "another thread"));
        EXPECT_EQ(g, nullptr);
        EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_ACTIVE) << "the capture stays its thread's";
        GraphGuard mine{nullptr};
        EXPECT_RT_OK(rtStreamEndCapture(s, mine.out()));
    }
    StreamGuard s;
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_RELAXED));
    DevBuf d(64);
    ASSERT_RT_OK(rtMemsetAsync(d.get(), 0, 64, s));
    rtStream_t raw = s;
    GraphGuard g{nullptr};
    EXPECT_RT_OK(on_other_thread([&] { return rtStreamEndCapture(raw, g.out()); }));
    EXPECT_EQ(nodes_of(g).size(), 1u);
}

TEST_P(Capture, ACapturingStreamCannotBeDestroyed) {
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtStreamDestroy(s));
    EXPECT_TRUE(contains(last_message(), "end the capture first"));
    GraphGuard g{nullptr};
    EXPECT_RT_OK(rtStreamEndCapture(s, g.out()));
    EXPECT_RT_OK(rtStreamDestroy(s));
}

TEST_P(Capture, GetCaptureInfoChecksItsArguments) {
    StreamGuard s;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamGetCaptureInfo(s, nullptr, nullptr));
    rtStreamCaptureStatus st = RT_STREAM_CAPTURE_STATUS_ACTIVE;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamGetCaptureInfo(garbage_handle<rtStream_t>(), &st, nullptr));
    EXPECT_RT_OK(rtStreamGetCaptureInfo(nullptr, &st, nullptr));
    EXPECT_EQ(st, RT_STREAM_CAPTURE_STATUS_NONE);
}

// ---------------------------------------------------------------- events, isolation, the default stream

TEST_P(Capture, TwoCapturesAreIsolated) {
    StreamGuard s1, s2;
    DevBuf x(64), y(64);
    EventGuard e1;
    ASSERT_RT_OK(rtStreamBeginCapture(s1, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtStreamBeginCapture(s2, RT_STREAM_CAPTURE_MODE_GLOBAL));
    unsigned long long id1 = 0, id2 = 0;
    status_of(s1, &id1);
    status_of(s2, &id2);
    EXPECT_NE(id1, id2);
    EXPECT_RT_OK(rtMemsetAsync(x.get(), 1, 64, s1));
    EXPECT_RT_OK(rtMemsetAsync(y.get(), 2, 64, s2));
    EXPECT_RT_OK(rtMemsetAsync(y.get(), 3, 64, s2));
    EXPECT_RT_OK(rtEventRecord(e1, s1));
    EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_ISOLATION, rtStreamWaitEvent(s2, e1));
    EXPECT_TRUE(contains(last_message(), std::to_string(id1)));
    EXPECT_EQ(status_of(s2), RT_STREAM_CAPTURE_STATUS_INVALIDATED);
    EXPECT_EQ(status_of(s1), RT_STREAM_CAPTURE_STATUS_ACTIVE);
    expect_end_fails(s2, RT_ERROR_STREAM_CAPTURE_INVALIDATED, "another");
    GraphGuard g1;
    ASSERT_RT_OK(rtStreamEndCapture(s1, g1.out()));
    EXPECT_EQ(types_of(g1),
              (std::vector<rtGraphNodeType>{RT_GRAPH_NODE_TYPE_MEMSET, RT_GRAPH_NODE_TYPE_EVENT_RECORD}));
}

TEST_P(Capture, TwoThreadsCaptureAtTheSameTime) {
    constexpr int kThreads = 4, kOps = 200;
    std::vector<std::thread> threads;
    std::vector<size_t> counts(kThreads, 0);
    std::vector<unsigned long long> ids(kThreads, 0);
    std::vector<std::string> errors(kThreads);
    const int dev = device();
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            auto check = [&](rtError_t e, const char* what) {
                if (e != RT_SUCCESS && errors[t].empty()) errors[t] = std::string(what) + ": " + last_message();
                return e == RT_SUCCESS;
            };
            if (!check(rtSetDevice(dev), "rtSetDevice")) return;
            rtStream_t s = nullptr, side = nullptr;
            if (!check(rtStreamCreate(&s), "rtStreamCreate") || !check(rtStreamCreate(&side), "rtStreamCreate")) return;
            rtEvent_t fork = nullptr, join = nullptr;
            check(rtEventCreate(&fork), "rtEventCreate");
            check(rtEventCreate(&join), "rtEventCreate");
            check(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_THREAD_LOCAL), "begin");
            rtStreamCaptureStatus st;
            check(rtStreamGetCaptureInfo(s, &st, &ids[static_cast<size_t>(t)]), "info");
            void* a = nullptr;
            check(rtMallocAsync(&a, 4096, s), "rtMallocAsync");
            check(rtEventRecord(fork, s), "record");
            check(rtStreamWaitEvent(side, fork), "fork");
            for (int i = 0; i < kOps; ++i)
                check(rtMemsetAsync(a, i, 4096, i % 2 ? s : side), "rtMemsetAsync");
            check(rtEventRecord(join, side), "record");
            check(rtStreamWaitEvent(s, join), "join");
            check(rtFreeAsync(a, s), "rtFreeAsync");
            rtGraph_t g = nullptr;
            if (check(rtStreamEndCapture(s, &g), "end")) {
                size_t n = 0;
                check(rtGraphGetNodes(g, nullptr, &n), "rtGraphGetNodes");
                counts[static_cast<size_t>(t)] = n;
                rtGraphDestroy(g);
            }
            rtEventDestroy(fork);
            rtEventDestroy(join);
            rtStreamDestroy(side);
            rtStreamDestroy(s);
        });
    for (auto& t : threads) t.join();
    for (int t = 0; t < kThreads; ++t) {
        EXPECT_EQ(errors[static_cast<size_t>(t)], "") << "thread " << t;
        EXPECT_EQ(counts[static_cast<size_t>(t)], static_cast<size_t>(kOps + 4)) << "thread " << t;
    }
    EXPECT_EQ(std::set<unsigned long long>(ids.begin(), ids.end()).size(), static_cast<size_t>(kThreads));
}

TEST_P(Capture, AnEventRecordedInACaptureHasNoWorkToWaitFor) {
    StreamGuard s, other;
    EventGuard e;
    ASSERT_RT_OK(rtEventRecord(e, other));  // a real record first
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtEventRecord(e, s));
    EXPECT_RT_ERROR(RT_ERROR_CAPTURED_EVENT, rtEventQuery(e));
    EXPECT_RT_ERROR(RT_ERROR_CAPTURED_EVENT, rtEventSynchronize(e));
    EXPECT_TRUE(contains(last_message(), "under way"));
    float ms = 0;
    EXPECT_RT_ERROR(RT_ERROR_CAPTURED_EVENT, rtEventElapsedTime(&ms, e, e));
    EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_ACTIVE) << "asking about the event breaks no capture";
    GraphGuard g{nullptr};
    ASSERT_RT_OK(rtStreamEndCapture(s, g.out()));
    // After the capture the event is still the capture's until it is recorded outside one.
    EXPECT_RT_ERROR(RT_ERROR_CAPTURED_EVENT, rtEventQuery(e));
    EXPECT_TRUE(contains(last_message(), "ended"));
    EXPECT_RT_ERROR(RT_ERROR_CAPTURED_EVENT, rtStreamWaitEvent(other, e));
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_RT_ERROR(RT_ERROR_CAPTURED_EVENT, rtStreamWaitEvent(s, e));  // of a capture that ended
    expect_end_fails(s, RT_ERROR_STREAM_CAPTURE_INVALIDATED, "ended");
    ASSERT_RT_OK(rtEventRecord(e, other));
    EXPECT_RT_OK(rtEventSynchronize(e));
    EXPECT_RT_OK(rtEventQuery(e));
    EXPECT_RT_OK(rtStreamWaitEvent(s, e));
    EXPECT_RT_OK(rtStreamSynchronize(s));
}

TEST_P(Capture, TheDefaultStreamIsUnusableWhileABlockingStreamCaptures) {
    StreamGuard s;  // rtStreamCreate: blocking
    DevBuf d(64);
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_RELAXED));
    rtStreamCaptureStatus st;
    EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_IMPLICIT, rtStreamGetCaptureInfo(nullptr, &st, nullptr));
    EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_ACTIVE) << "asking does not invalidate (as CUDA)";
    EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_IMPLICIT, rtMemsetAsync(d.get(), 0, 64, nullptr));
    EXPECT_TRUE(contains(last_message(), "RT_STREAM_NON_BLOCKING"));
    EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_INVALIDATED);
    EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_IMPLICIT, rtStreamSynchronize(nullptr));
    expect_end_fails(s, RT_ERROR_STREAM_CAPTURE_INVALIDATED, "default stream");
    EXPECT_RT_OK(rtMemsetAsync(d.get(), 0, 64, nullptr));
    EXPECT_RT_OK(rtStreamSynchronize(nullptr));

    // Every way of using it: launches, host functions, records, waits, the synchronous copy (relaxed thread).
    EventGuard rec;
    std::vector<std::pair<const char*, std::function<rtError_t()>>> uses = {
        {"kernel", [&] { return axpb(nullptr, d.get(), 16, 1.0f, 0.0f); }},
        {"host function", [&] { static std::atomic<bool> flag; return rtLaunchHostFunc(nullptr, set_flag, &flag); }},
        {"record", [&] { return rtEventRecord(rec, nullptr); }},
        {"rtMemcpy", [&] { unsigned char h[64]; return rtMemcpy(h, d.get(), 64, RT_MEMCPY_DEVICE_TO_HOST); }},
        {"rtMallocAsync", [&] { void* p = nullptr; return rtMallocAsync(&p, 64, nullptr); }},
    };
    for (auto& [what, use] : uses) {
        SCOPED_TRACE(what);
        ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_RELAXED));
        EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_IMPLICIT, use());
        expect_end_fails(s, RT_ERROR_STREAM_CAPTURE_INVALIDATED, "default stream");
    }
}

TEST_P(Capture, ANonBlockingCaptureLeavesTheDefaultStreamUsable) {
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreateWithFlags(&s, RT_STREAM_NON_BLOCKING));
    DevBuf d(64);
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_RT_OK(rtMemsetAsync(d.get(), 7, 64, nullptr));
    EXPECT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_RT_OK(rtMemsetAsync(d.get(), 8, 64, s));
    EXPECT_EQ(status_of(nullptr), RT_STREAM_CAPTURE_STATUS_NONE);
    GraphGuard g{nullptr};
    EXPECT_RT_OK(rtStreamEndCapture(s, g.out()));
    EXPECT_EQ(nodes_of(g).size(), 1u);
    unsigned char h[64] = {};
    ASSERT_RT_OK(rtMemcpy(h, d.get(), 64, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(h[0], 7) << "the captured fill did not run";
    EXPECT_RT_OK(rtStreamDestroy(s));
}

TEST_P(Capture, TheDefaultStreamCannotJoinACapture) {
    StreamGuard s;
    rtStream_t nb = nullptr;
    ASSERT_RT_OK(rtStreamCreateWithFlags(&nb, RT_STREAM_NON_BLOCKING));
    EventGuard e;
    ASSERT_RT_OK(rtStreamBeginCapture(nb, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtEventRecord(e, nb));
    EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, rtStreamWaitEvent(nullptr, e));
    EXPECT_TRUE(contains(last_message(), "default stream"));
    GraphGuard g{nullptr};
    EXPECT_RT_OK(rtStreamEndCapture(nb, g.out()));
    EXPECT_RT_OK(rtStreamDestroy(nb));
}

TEST_P(Capture, AStreamOfAnotherDeviceCannotJoin) {
    int count = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&count));
    int other = -1;
    for (int i = 0; i < count && other < 0; ++i)
        if (i != device() && backend_of(i) == backend_of(device())) other = i;
    if (other < 0) GTEST_SKIP() << "one device of this backend (the _2dev rerun has two)";
    StreamGuard s;
    EventGuard e;
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtEventRecord(e, s));
    ASSERT_RT_OK(rtSetDevice(other));
    rtStream_t there = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&there));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamWaitEvent(there, e));
    EXPECT_TRUE(contains(last_message(), "one device"));
    EXPECT_EQ(status_of(there), RT_STREAM_CAPTURE_STATUS_NONE);
    EXPECT_RT_OK(rtStreamDestroy(there));
    ASSERT_RT_OK(rtSetDevice(device()));
    GraphGuard g{nullptr};
    EXPECT_RT_OK(rtStreamEndCapture(s, g.out()));
}

// ---------------------------------------------------------------- refused operations

TEST_P(Capture, OperationsThatCannotBeCapturedInvalidateTheCapture) {
    StreamGuard s;
    DevBuf d(64);
    void* outside = nullptr;
    ASSERT_RT_OK(rtMalloc(&outside, 64));
    struct Case {
        const char* what;
        std::function<rtError_t()> call;
        rtError_t code;
        const char* says;
    };
    float f = 1.0f;
    std::vector<Case> cases = {
        {"copy to NULL", [&] { return rtMemcpyAsync(nullptr, &f, 4, RT_MEMCPY_HOST_TO_DEVICE, s); },
         RT_ERROR_INVALID_VALUE, "rtMemcpyAsync"},
        {"fill of host memory", [&] { return rtMemsetAsync(&f, 0, 4, s); }, RT_ERROR_INVALID_VALUE, "rtMemsetAsync"},
        {"kernel with a zero grid",
         [&] {
             void* x = d.get();
             int n = 1;
             float a = 1, b = 0;
             void* args[] = {&x, &n, &a, &b};
             return rtLaunchKernel(axpb_, rtDim3{0, 1, 1}, rtDim3{1, 1, 1}, args, 0, s);
         },
         RT_ERROR_INVALID_VALUE, "grid"},
        {"free of memory from outside the capture", [&] { return rtFreeAsync(outside, s); }, RT_ERROR_INVALID_VALUE,
         "rtFreeAsync"},
        {"native stream wait", [&] { return rtStreamWaitNativeStream(s, reinterpret_cast<void*>(1)); },
         RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, "rtStreamWaitNativeStream"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
        EXPECT_RT_ERROR(c.code, c.call());
        EXPECT_EQ(status_of(s), RT_STREAM_CAPTURE_STATUS_INVALIDATED);
        expect_end_fails(s, RT_ERROR_STREAM_CAPTURE_INVALIDATED, c.says);
        expect_usable(s);
    }
    EXPECT_RT_OK(rtFree(outside)) << "the refused free left the memory allocated";
}

TEST_P(Capture, FreeAsyncFreesAnAllocationOfTheCaptureOnce) {
    StreamGuard s;
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    void* a = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&a, 512, s));
    EXPECT_RT_OK(rtFreeAsync(nullptr, s)) << "as on a stream";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeAsync(static_cast<char*>(a) + 16, s));  // not its start
    expect_end_fails(s, RT_ERROR_STREAM_CAPTURE_INVALIDATED, "rtFreeAsync");
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtMallocAsync(&a, 512, s));
    ASSERT_RT_OK(rtFreeAsync(a, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeAsync(a, s));  // a second free of it
    expect_end_fails(s, RT_ERROR_STREAM_CAPTURE_INVALIDATED, "rtFreeAsync");
}

TEST_P(Capture, DeferReleaseGoesWithTheGraph) {
    StreamGuard s;
    std::atomic<bool> released{false};
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtStreamDeferRelease(s, set_flag, &released));
    GraphGuard g{nullptr};
    ASSERT_RT_OK(rtStreamEndCapture(s, g.out()));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_FALSE(released.load()) << "the graph holds it";
    ASSERT_RT_OK(rtGraphDestroy(g.release()));
    EXPECT_TRUE(wait_until([&] { return released.load(); })) << "released once the graph is gone";

    // A failed capture drops its graph, releases included.
    std::atomic<bool> dropped{false};
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtStreamDeferRelease(s, set_flag, &dropped));
    EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, rtStreamQuery(s));
    expect_end_fails(s, RT_ERROR_STREAM_CAPTURE_INVALIDATED, "querying");
    EXPECT_TRUE(wait_until([&] { return dropped.load(); }));
}

TEST_P(Capture, ReleasesRunWhenGraphsHoldCopiesOfEachOther) {
    // Each graph's child node holds a copy of the other (and of what it held then): no keepalive may hold another,
    // or a's release would wait for b's keepalive, which waits for a's.
    StreamGuard s;
    std::atomic<bool> released{false};
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtStreamDeferRelease(s, set_flag, &released));
    rtGraph_t a = nullptr, b = nullptr;
    ASSERT_RT_OK(rtStreamEndCapture(s, &a));
    ASSERT_RT_OK(rtGraphCreate(&b, 0));
    rtGraphNode_t in_b, in_a;
    ASSERT_RT_OK(rtGraphAddChildGraphNode(&in_b, b, nullptr, 0, a));
    ASSERT_RT_OK(rtGraphAddChildGraphNode(&in_a, a, nullptr, 0, b));
    // An executable graph of b holds a's release through the copy of a inside it.
    rtGraphExec_t x = nullptr;
    ASSERT_RT_OK(rtGraphInstantiate(&x, b, 0));
    ASSERT_RT_OK(rtGraphDestroy(a));
    ASSERT_RT_OK(rtGraphDestroy(b));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_FALSE(released.load()) << "the executable graph holds it";
    ASSERT_RT_OK(rtGraphExecDestroy(x));
    EXPECT_TRUE(wait_until([&] { return released.load(); })) << "released once no graph or executable graph holds it";
}

TEST_P(Capture, FinalizeEndsACaptureUnderWay) {
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    std::atomic<bool> released{false};
    ASSERT_RT_OK(rtStreamDeferRelease(s, set_flag, &released));
    TearDown();  // the module goes with the runtime
    module_ = nullptr;
    ASSERT_RT_OK(rtFinalize());
    EXPECT_TRUE(released.load());
    ASSERT_RT_OK(rtSetDevice(device()));
    void* p = nullptr;
    EXPECT_RT_OK(rtMalloc(&p, 64)) << "no capture rule outlives its runtime";
    EXPECT_RT_OK(rtFree(p));
}

// ---------------------------------------------------------------- capture, instantiate, launch

/// Host function: counts its runs.
void count(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }

/// A two-stream pipeline with every kind of operation: out = 5 * in + 1, per element, and *runs incremented.
struct Pipeline {
    static constexpr int kN = 1000;
    static constexpr size_t kBytes = kN * sizeof(float);
    std::vector<float> in = std::vector<float>(kN), out = std::vector<float>(kN, -1.0f);
    DevBuf x{kBytes}, y{kBytes};
    EventGuard fork, join;
    std::atomic<int> runs{0};

    Pipeline() {
        for (int i = 0; i < kN; ++i) in[static_cast<size_t>(i)] = static_cast<float>(i % 97) - 40.0f;
    }
    /// Queues it on s1 (which waits for s2 at the end).
    rtError_t enqueue(Capture& t, rtStream_t s1, rtStream_t s2) {
        rtError_t e = rtMemcpyAsync(x.get(), in.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE, s1);
        if (e == RT_SUCCESS) e = rtEventRecord(fork, s1);
        if (e == RT_SUCCESS) e = rtStreamWaitEvent(s2, fork);
        void* tmp = nullptr;
        if (e == RT_SUCCESS) e = rtMallocAsync(&tmp, kBytes, s2);
        if (e == RT_SUCCESS) e = rtMemsetAsync(tmp, 0, kBytes, s2);
        if (e == RT_SUCCESS) e = t.add(s2, x.get(), tmp, kN);            // tmp = x
        if (e == RT_SUCCESS) e = t.axpb(s2, tmp, kN, 3.0f, 1.0f);          // tmp = 3x + 1
        if (e == RT_SUCCESS) e = rtMemsetAsync(y.get(), 0, kBytes, s1);
        if (e == RT_SUCCESS) e = t.add(s1, x.get(), y.get(), kN);        // y = x
        if (e == RT_SUCCESS) e = t.axpb(s1, y.get(), kN, 2.0f, 0.0f);      // y = 2x
        if (e == RT_SUCCESS) e = rtEventRecord(join, s2);
        if (e == RT_SUCCESS) e = rtStreamWaitEvent(s1, join);
        if (e == RT_SUCCESS) e = t.add(s1, tmp, y.get(), kN);            // y = 5x + 1
        if (e == RT_SUCCESS) e = rtFreeAsync(tmp, s1);
        if (e == RT_SUCCESS) e = rtMemcpyAsync(out.data(), y.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST, s1);
        if (e == RT_SUCCESS) e = rtLaunchHostFunc(s1, count, &runs);
        return e;
    }
    bool expected() const {
        for (int i = 0; i < kN; ++i)
            if (out[static_cast<size_t>(i)] != 5.0f * in[static_cast<size_t>(i)] + 1.0f) return false;
        return true;
    }
};

TEST_P(Capture, ALaunchOfTheCapturedGraphDoesWhatTheStreamsDid) {
    if (!launches_execute(device())) GTEST_SKIP() << "kernels do not run on the fake driver";
    StreamGuard s1, s2;
    Pipeline streamed;
    ASSERT_RT_OK(streamed.enqueue(*this, s1, s2));
    ASSERT_RT_OK(rtStreamSynchronize(s1));
    ASSERT_TRUE(streamed.expected());
    ASSERT_EQ(streamed.runs.load(), 1);

    Pipeline captured;
    ASSERT_RT_OK(rtStreamBeginCapture(s1, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(captured.enqueue(*this, s1, s2));
    GraphGuard g{nullptr};
    ASSERT_RT_OK(rtStreamEndCapture(s1, g.out()));
    EXPECT_EQ(captured.runs.load(), 0);
    rtGraphExec_t exec = nullptr;
    ASSERT_RT_OK(rtGraphInstantiate(&exec, g, 0));
    for (int launch = 1; launch <= 3; ++launch) {
        std::fill(captured.out.begin(), captured.out.end(), -1.0f);
        ASSERT_RT_OK(rtGraphLaunch(exec, s1));
        ASSERT_RT_OK(rtStreamSynchronize(s1));
        EXPECT_EQ(captured.out, streamed.out) << "launch " << launch;
        EXPECT_EQ(captured.runs.load(), launch);
    }
    // The events recorded in the capture were recorded by the launches: they are real records again.
    EXPECT_RT_OK(rtEventSynchronize(captured.join));
    EXPECT_RT_OK(rtEventQuery(captured.fork));
    rtGraphMemoryInfo info{};
    ASSERT_RT_OK(rtGraphExecGetMemoryInfo(exec, &info));
    EXPECT_EQ(info.allocations, 1u);
    EXPECT_EQ(info.allocated_bytes, Pipeline::kBytes);
    EXPECT_RT_OK(rtGraphExecDestroy(exec));
}

TEST_P(Capture, GraphLaunchOnACapturingStreamIsRefused) {
    StreamGuard s, other;
    DevBuf d(64);
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtMemsetAsync(d.get(), 9, 64, s));
    GraphGuard g{nullptr};
    ASSERT_RT_OK(rtStreamEndCapture(s, g.out()));
    rtGraphExec_t exec = nullptr;
    ASSERT_RT_OK(rtGraphInstantiate(&exec, g, 0));
    ASSERT_RT_OK(rtStreamBeginCapture(other, RT_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_RT_ERROR(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, rtGraphLaunch(exec, other));
    EXPECT_TRUE(contains(last_message(), "rtGraphAddChildGraphNode"));
    expect_end_fails(other, RT_ERROR_STREAM_CAPTURE_INVALIDATED, "rtGraphLaunch");
    ASSERT_RT_OK(rtGraphLaunch(exec, other));
    ASSERT_RT_OK(rtStreamSynchronize(other));
    unsigned char h[64] = {};
    ASSERT_RT_OK(rtMemcpy(h, d.get(), 64, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(h[17], 9);
    EXPECT_RT_OK(rtGraphExecDestroy(exec));
}

TEST_P(Capture, AWaitForAnOutsideEventHoldsEveryLaunch) {
    StreamGuard s, other;
    EventGuard outside;
    std::atomic<int> runs{0};
    ASSERT_RT_OK(rtEventRecord(outside, other));
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtStreamWaitEvent(s, outside));
    ASSERT_RT_OK(rtLaunchHostFunc(s, count, &runs));
    GraphGuard g{nullptr};
    ASSERT_RT_OK(rtStreamEndCapture(s, g.out()));
    rtGraphExec_t exec = nullptr;
    ASSERT_RT_OK(rtGraphInstantiate(&exec, g, 0));
    for (int launch = 1; launch <= 2; ++launch) {
        Gate gate;
        ASSERT_RT_OK(gate.launch(other));
        ASSERT_RT_OK(rtEventRecord(outside, other));  // the record current at the launch is the one waited for
        ASSERT_RT_OK(rtGraphLaunch(exec, s));
        ASSERT_TRUE(wait_until([&] { return gate.entered(); }));
        EXPECT_EQ(runs.load(), launch - 1) << "the host node waits for the event";
        gate.open();
        ASSERT_RT_OK(rtStreamSynchronize(s));
        EXPECT_EQ(runs.load(), launch);
    }
    EXPECT_RT_OK(rtGraphExecDestroy(exec));
}

RT_INSTANTIATE_DEVICE_TEST(Capture);

}  // namespace
