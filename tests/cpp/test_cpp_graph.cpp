// Tests of the C++ graph API (runtime.hpp): Stream::capture / begin_capture / end_capture, runtime::Graph built
// node by node, runtime::GraphExec (launch, update, set_kernel_params, memory_info, save / load), errors, lifetimes.
#include <runtime/runtime.hpp>

#include "test_cpp_util.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

using rt_cpp_test::all_devices;
using rt_cpp_test::eventually;

// A scratch file removed at the end of the scope.
struct TempPath {
    std::filesystem::path path;
    explicit TempPath(const std::string& name)
        : path(std::filesystem::temp_directory_path() /
               (name + "." + std::to_string(::getpid()) + "." + std::to_string(counter()++))) {}
    ~TempPath() {
        std::error_code ec;
        std::filesystem::remove(path, ec);
    }
    static std::atomic<int>& counter() {
        static std::atomic<int> c{0};
        return c;
    }
};

std::string read_file(const std::filesystem::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

constexpr const char* kSource = R"(
RT_KERNEL void axpb(float* x, float a, float b, int n) {
    int i = (int)get_global_id(0);
    if (i < n) x[i] = a * x[i] + b;
}
RT_KERNEL void add(float* out, const float* x, const float* y, int n) {
    int i = (int)get_global_id(0);
    if (i < n) out[i] = x[i] + y[i];
}
)";

class CppGraph : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        runtime::set_device(GetParam());
        module_ = std::make_unique<runtime::Module>(runtime::Module::from_source(kSource));
    }
    void TearDown() override {
        module_.reset();
        runtime::set_device(0);
    }
    runtime::Kernel axpb() const { return module_->kernel("axpb"); }
    runtime::Kernel add() const { return module_->kernel("add"); }
    static constexpr int n = 1000;
    static constexpr runtime::LaunchConfig shape{.grid = 4, .block = 256};
    std::unique_ptr<runtime::Module> module_;
};

// ------------------------------------------------------------------------------- capture

TEST_P(CppGraph, CaptureRecordsAndReplayGivesTheStreamResult) {
    std::vector<float> in(n), out(n, 0.0f), direct(n, 0.0f);
    std::iota(in.begin(), in.end(), 0.0f);
    runtime::DeviceBuffer<float> d(n);
    runtime::Stream s;
    auto calls = std::make_shared<std::atomic<int>>(0);
    auto work = [&](std::vector<float>& dst) {
        s.copy(d.data(), in.data(), d.bytes(), RT_MEMCPY_HOST_TO_DEVICE);
        s.launch(axpb(), shape, d, 2.0f, 1.0f, n);
        s.copy(dst.data(), d.data(), d.bytes(), RT_MEMCPY_DEVICE_TO_HOST);
        s.launch_host_func([calls] { ++*calls; });
    };
    runtime::Graph g = s.capture([&] { work(out); });
    EXPECT_EQ(s.capture_status(), RT_STREAM_CAPTURE_STATUS_NONE);
    s.synchronize();
    EXPECT_EQ(calls->load(), 0);  // captured, not run
    EXPECT_EQ(out, std::vector<float>(n, 0.0f));

    const auto nodes = g.nodes();
    ASSERT_EQ(nodes.size(), 4u);
    EXPECT_EQ(g.size(), 4u);
    const rtGraphNodeType kinds[] = {RT_GRAPH_NODE_TYPE_MEMCPY, RT_GRAPH_NODE_TYPE_KERNEL, RT_GRAPH_NODE_TYPE_MEMCPY,
                                     RT_GRAPH_NODE_TYPE_HOST};
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        EXPECT_EQ(nodes[i].type(), kinds[i]) << i;
        const auto deps = nodes[i].dependencies();
        if (i == 0) EXPECT_TRUE(deps.empty());
        else EXPECT_EQ(deps, std::vector<runtime::GraphNode>{nodes[i - 1]}) << i;
    }

    runtime::GraphExec exec = g.instantiate();
    exec.launch(s);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(calls->load(), 2);
    work(direct);
    s.synchronize();
    EXPECT_EQ(out, direct);
    for (int i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<std::size_t>(i)], 2.0f * static_cast<float>(i) + 1.0f);
}

TEST_P(CppGraph, BeginAndEndCaptureAndStatus) {
    runtime::Stream s;
    runtime::DeviceBuffer<unsigned char> d(64);
    EXPECT_EQ(s.capture_status(), RT_STREAM_CAPTURE_STATUS_NONE);
    s.begin_capture(RT_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    EXPECT_EQ(s.capture_status(), RT_STREAM_CAPTURE_STATUS_ACTIVE);
    EXPECT_RT_ERROR(s.begin_capture(), RT_ERROR_ILLEGAL_STATE);
    s.memset(d, 5);
    runtime::Graph g = s.end_capture();
    EXPECT_EQ(g.size(), 1u);
    EXPECT_RT_ERROR((void)s.end_capture(), RT_ERROR_ILLEGAL_STATE);  // not capturing
    runtime::Stream def = runtime::Stream::default_stream();
    EXPECT_RT_ERROR(def.begin_capture(), RT_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}

TEST_P(CppGraph, CaptureHelperEndsTheCaptureWhenTheBodyThrows) {
    runtime::Stream s;
    runtime::DeviceBuffer<unsigned char> d(64);
    EXPECT_THROW((void)s.capture([&] {
        s.memset(d, 1);
        throw std::runtime_error("body failed");
    }), std::runtime_error);
    EXPECT_EQ(s.capture_status(), RT_STREAM_CAPTURE_STATUS_NONE);
    s.memset(d, 3);  // usable again
    std::vector<unsigned char> h(64);
    d.copy_to_host(h, s);
    s.synchronize();
    EXPECT_EQ(h, std::vector<unsigned char>(64, 3));
}

TEST_P(CppGraph, ForbiddenCallInvalidatesTheCapture) {
    runtime::Stream s;
    runtime::DeviceBuffer<float> d(16);
    std::vector<float> h(16);
    s.begin_capture();
    EXPECT_RT_ERROR(d.copy_to_host(h), RT_ERROR_STREAM_CAPTURE_UNSUPPORTED);  // a synchronous copy
    EXPECT_EQ(s.capture_status(), RT_STREAM_CAPTURE_STATUS_INVALIDATED);
    EXPECT_RT_ERROR((void)s.end_capture(), RT_ERROR_STREAM_CAPTURE_INVALIDATED);
    EXPECT_EQ(s.capture_status(), RT_STREAM_CAPTURE_STATUS_NONE);
    // The capture helper reports the same way.
    EXPECT_RT_ERROR((void)s.capture([&] { s.synchronize(); }), RT_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT_EQ(s.capture_status(), RT_STREAM_CAPTURE_STATUS_NONE);
}

TEST_P(CppGraph, CapturedCallablesLiveAsLongAsAnExecutableGraph) {
    runtime::Stream s;
    auto token = std::make_shared<int>(7);
    std::weak_ptr<int> watch = token;
    std::atomic<int> seen{0};
    runtime::Graph g = s.capture([&, token] { s.launch_host_func([token, &seen] { seen += *token; }); });
    token.reset();
    EXPECT_FALSE(watch.expired());  // the graph owns the callable
    runtime::GraphExec exec(g);
    g = runtime::Graph();  // the captured graph is gone: the executable graph keeps what it kept
    EXPECT_FALSE(watch.expired());
    exec.launch(s);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(seen.load(), 14);
    { runtime::GraphExec gone = std::move(exec); }
    EXPECT_EQ(exec.native_handle(), nullptr);
    EXPECT_TRUE(eventually([&] { return watch.expired(); }));
}

// ------------------------------------------------------------------------------- explicit graphs

TEST_P(CppGraph, ExplicitGraphWithAllocationsCopiesAndKernels) {
    runtime::Graph g;
    std::vector<float> in(n), out(n, -1.0f);
    std::iota(in.begin(), in.end(), 1.0f);
    const std::size_t bytes = n * sizeof(float);
    auto a = g.add_alloc(bytes);
    auto b = g.add_alloc(bytes, {a.node});
    auto up = g.add_copy(a.ptr, in.data(), bytes, RT_MEMCPY_HOST_TO_DEVICE, {b.node});
    auto fill = g.add_memset(b.ptr, 0, bytes, {b.node});
    auto k1 = g.add_kernel(axpb(), shape, {up}, static_cast<float*>(a.ptr), 3.0f, 0.0f, n);
    auto k2 = g.add_kernel(add(), shape, {k1, fill}, static_cast<float*>(b.ptr), static_cast<const float*>(a.ptr),
                           static_cast<const float*>(a.ptr), n);
    auto down = g.add_copy(out.data(), b.ptr, bytes, RT_MEMCPY_DEVICE_TO_HOST, {k2});
    auto fa = g.add_free(a.ptr, {down});
    g.add_free(b.ptr, {fa});
    EXPECT_EQ(g.size(), 9u);
    EXPECT_EQ(k2.dependencies().size(), 2u);
    EXPECT_EQ(a.node.type(), RT_GRAPH_NODE_TYPE_MEM_ALLOC);
    EXPECT_EQ(fa.type(), RT_GRAPH_NODE_TYPE_MEM_FREE);

    runtime::GraphExec exec(g);
    const runtime::GraphMemoryInfo info = exec.memory_info();
    EXPECT_EQ(info.allocations, 2u);
    EXPECT_EQ(info.allocated_bytes, 2 * bytes);
    EXPECT_GE(info.arena_bytes, 2 * bytes);  // both live at once: no reuse possible
    runtime::Stream s;
    exec.launch(s);
    s.synchronize();
    for (int i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<std::size_t>(i)], 6.0f * static_cast<float>(i + 1)) << i;

    // A copy of the graph runs the same.
    runtime::Graph c = g.clone();
    EXPECT_EQ(c.size(), g.size());
    std::fill(out.begin(), out.end(), -1.0f);
    c.instantiate().launch(s);
    s.synchronize();
    EXPECT_EQ(out[1], 12.0f);
}

TEST_P(CppGraph, KernelNodeArgumentsAreCheckedAgainstTheKernel) {
    runtime::Graph g;
    runtime::DeviceBuffer<float> d(n);
    EXPECT_RT_ERROR(g.add_kernel(axpb(), shape, {}, d, 1.0f, 2.0f), RT_ERROR_INVALID_VALUE);     // 3 of 4
    EXPECT_RT_ERROR(g.add_kernel(axpb(), shape, {}, d, 1.0, 2.0f, n), RT_ERROR_INVALID_VALUE);   // a double
    EXPECT_EQ(g.size(), 0u);
    auto k = g.add_kernel(axpb(), shape, {}, d, 1.0f, 2.0f, n);
    runtime::GraphExec exec(g);
    EXPECT_RT_ERROR(exec.set_kernel_params(k, axpb(), shape, d, 1.0f), RT_ERROR_INVALID_VALUE);
    runtime::GraphNode none(nullptr);
    EXPECT_THROW((void)none.type(), runtime::Error);
}

TEST_P(CppGraph, ChildGraphsEventsAndEmptyNodes) {
    runtime::DeviceBuffer<float> d(n);
    runtime::Graph child;
    child.add_kernel(axpb(), shape, {}, d, 1.0f, 1.0f, n);  // d += 1
    runtime::Graph g;
    runtime::Event done({.enable_timing = false});
    auto fill = g.add_memset(d.data(), 0, d.bytes());
    auto c1 = g.add_child(child, {fill});
    auto c2 = g.add_child(child, {c1});
    auto join = g.add_empty({c1, c2});
    g.add_event_record(done, {join});
    EXPECT_EQ(c1.type(), RT_GRAPH_NODE_TYPE_GRAPH);
    EXPECT_EQ(join.type(), RT_GRAPH_NODE_TYPE_EMPTY);
    runtime::Stream s;
    g.instantiate().launch(s);
    done.synchronize();
    std::vector<float> h(n);
    d.copy_to_host(h);
    EXPECT_EQ(h, std::vector<float>(n, 2.0f));
}

// ------------------------------------------------------------------------------- update

TEST_P(CppGraph, UpdateAndSetParams) {
    runtime::Stream s;
    runtime::DeviceBuffer<float> d(n);
    auto capture = [&](float b, bool extra) {
        return s.capture([&] {
            s.memset(d, 0);
            s.launch(axpb(), shape, d, 1.0f, b, n);
            if (extra) s.memset(d, 0);
        });
    };
    auto value = [&] {
        std::vector<float> h(n);
        d.copy_to_host(h, s);
        s.synchronize();
        return h[0];
    };
    runtime::Graph g = capture(1.0f, false);
    runtime::GraphExec exec(g);
    exec.launch(s);
    EXPECT_EQ(value(), 1.0f);
    exec.update(capture(5.0f, false));
    exec.launch(s);
    EXPECT_EQ(value(), 5.0f);
    try {
        exec.update(capture(7.0f, true));
        ADD_FAILURE() << "an update with another topology was accepted";
    } catch (const runtime::GraphUpdateError& e) {
        EXPECT_EQ(e.code(), RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
        EXPECT_EQ(e.result(), RT_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    }
    exec.launch(s);
    EXPECT_EQ(value(), 5.0f);  // unchanged
    exec.set_kernel_params(g.nodes()[1], axpb(), shape, d, 1.0f, 9.0f, n);
    exec.launch(s);
    EXPECT_EQ(value(), 9.0f);
}

// ------------------------------------------------------------------------------- save, load, DOT

TEST_P(CppGraph, SaveLoadAndBindBuffers) {
    runtime::DeviceBuffer<float> x(n), y(n);
    runtime::Graph g;
    g.add_kernel(add(), shape, {}, y, x, x, n);  // y = 2x
    g.bind_name("x", x);
    g.bind_name("y", y);
    runtime::GraphExec exec(g);
    TempPath file("cpp_graph_save");
    exec.save(file.path.string());
    runtime::GraphExec loaded = runtime::GraphExec::load(file.path.string());
    runtime::Stream s;
    EXPECT_RT_ERROR(loaded.launch(s), RT_ERROR_INVALID_VALUE);  // unbound named buffers
    runtime::DeviceBuffer<float> x2(n), y2(n);
    std::vector<float> in(n), out(n);
    std::iota(in.begin(), in.end(), 0.0f);
    x2.copy_from_host(in);
    loaded.set_buffer("x", x2);
    loaded.set_buffer("y", y2);
    loaded.launch(s);
    y2.copy_to_host(out, s);
    s.synchronize();
    for (int i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<std::size_t>(i)], 2.0f * static_cast<float>(i)) << i;
    EXPECT_RT_ERROR(loaded.set_buffer("nope", x2), RT_ERROR_INVALID_VALUE);
    EXPECT_THROW((void)runtime::GraphExec::load(file.path.string() + ".missing"), runtime::Error);
}

TEST_P(CppGraph, DotOutput) {
    runtime::Graph g;
    auto a = g.add_empty();
    auto b = g.add_empty({a});
    g.add_empty({a, b});
    TempPath file("cpp_graph_dot");
    g.to_dot(file.path.string());
    const std::string text = read_file(file.path);
    EXPECT_EQ(text.rfind("digraph", 0), 0u) << text;
    std::size_t edges = 0;
    for (std::size_t at = text.find("->"); at != std::string::npos; at = text.find("->", at + 2)) ++edges;
    EXPECT_EQ(edges, 3u) << text;
    EXPECT_THROW(g.to_dot("/nonexistent-dir/x.dot"), runtime::Error);
}

TEST_P(CppGraph, MovedFromHandlesAreEmpty) {
    runtime::Graph g;
    g.add_empty();
    runtime::Graph h = std::move(g);
    EXPECT_EQ(g.native_handle(), nullptr);
    EXPECT_EQ(h.size(), 1u);
    runtime::GraphExec e(h);
    runtime::GraphExec f = std::move(e);
    EXPECT_EQ(e.native_handle(), nullptr);
    runtime::Stream s;
    f.launch(s);
    s.synchronize();
}

// ------------------------------------------------------------------------------- the example of docs/graphs.md
// (tests/python/test_graph.py checks that the document's C++ example is this text, between the markers)

TEST_P(CppGraph, DocsExample) {
    runtime::Kernel scale = axpb();
    // docs-example-begin
    runtime::Stream stream;
    std::vector<float> host(1000, 1.0f);
    runtime::DeviceBuffer<float> dev(host.size());

    // Capture once: the calls queue nothing, they become the graph's nodes.
    runtime::Graph graph = stream.capture([&] {
        dev.copy_from_host(host, stream);
        stream.launch(scale, {.grid = 4, .block = 256}, dev, 2.0f, 1.0f, 1000);  // x = 2x + 1
        dev.copy_to_host(host, stream);
    });
    runtime::GraphExec exec = graph.instantiate();

    // Replay: one operation of the stream each time.
    for (int i = 0; i < 3; ++i) exec.launch(stream);
    stream.synchronize();  // host[i] == 15: ((1 * 2 + 1) * 2 + 1) * 2 + 1
    // docs-example-end
    EXPECT_EQ(host, std::vector<float>(1000, 15.0f));
}

INSTANTIATE_TEST_SUITE_P(Devices, CppGraph, ::testing::ValuesIn(all_devices()),
                         [](const ::testing::TestParamInfo<int>& info) {
                             return "device" + std::to_string(info.param);
                         });

} // namespace
