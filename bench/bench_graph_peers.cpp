// bench_graph_peers.cpp — graph replay of 1,000 empty kernels vs PoCL's command buffer and oneTBB's flow_graph, and the seed's pipeline as a graph vs streams.
//
// Every side of a row builds its DAG once (untimed) and replays it; the sides alternate run by run (ours, then each
// peer) so all of them see the same machine load, as the rest of runtime-bench-core does. A run replays back to back
// for about GraphPeerOptions::run_ms after one untimed re-warm; its figure is seconds per node (DAG rows) or per
// iteration (pipeline rows).
#include "bench_graph_peers.hpp"

#include "bench_check.hpp"
#include "graph_shape.hpp"
#include "peer_opencl.hpp"
#include "peer_tbb.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

namespace rtbench {
namespace {

// The graph rows' kernels: the DAG nodes (empty, and the counting form of GraphShape) and the seed's kernel.
constexpr const char* kGraphKernels = R"(
RT_KERNEL void empty() {}
RT_KERNEL void count(unsigned* c) { atomic_inc(c); }
RT_KERNEL void my_kernel(const float* input_data, float* output_data, int size) {
    int idx = get_global_id(0);
    if (idx < size) output_data[idx] = input_data[idx] * 2.0f;
}
)";

/// One way of doing a row's work. `once` does one unit (a whole replay, an iteration) and returns when it has
/// completed; a unit is `per` of the row's unit (1,000 nodes per replay; 1 iteration). Ours (`cell` null) checks its
/// calls with RT_CHECK; a peer's `once` throws PeerError, which ends that side's measurements and fills its cell.
struct Side {
    PeerCell* cell = nullptr;
    std::function<void()> once;
    double per = 1;
    int replays = 0;
    std::vector<double> secs;  // seconds per row unit, one per run
};

Side side(PeerCell* cell, std::function<void()> once, double per) {
    Side s;
    s.cell = cell;
    s.once = std::move(once);
    s.per = per;
    return s;
}

/// Lets the previous side's spinning worker threads (ours, PoCL's, oneTBB's) park before the next side runs.
void pause_between() { std::this_thread::sleep_for(std::chrono::milliseconds(3)); }

/// Runs `f` for `s`; a PeerError ends the side (its cell says why). False when the side is over.
template <class F>
bool guarded(Side& s, F&& f) {
    if (s.cell && !s.cell->note.empty()) return false;
    try {
        f();
        return true;
    } catch (const PeerError& e) {
        s.cell->note = std::string("error: ") + e.what();
        std::fprintf(stderr, "runtime-bench-core: peer %s: %s\n", s.cell->name.c_str(), e.what());
        return false;
    }
}

/// Calibrates each side (two untimed units, then a timed one sets `replays`), then `runs` alternating runs.
void measure(std::vector<Side>& sides, const GraphPeerOptions& o) {
    for (Side& s : sides)
        guarded(s, [&] {
            s.once();
            s.once();
            const auto t0 = Clock::now();
            s.once();
            const double t = std::max(seconds_between(t0, Clock::now()), 1e-7);
            s.replays = std::clamp(static_cast<int>(o.run_ms * 1e-3 / t), 3, 200);
        });
    for (int r = 0; r < o.runs; ++r) {
        for (Side& s : sides) {
            pause_between();
            guarded(s, [&] {
                for (int i = 0; i < std::max(1, s.replays / 10); ++i) s.once();
                const auto t0 = Clock::now();
                for (int i = 0; i < s.replays; ++i) s.once();
                s.secs.push_back(seconds_between(t0, Clock::now()) / s.replays / s.per);
            });
        }
    }
}

/// Seconds per unit → a Stat in `scale` units per second (1e9: ns, 1e6: us); none without runs.
std::optional<Stat> scaled(const std::vector<double>& secs, double scale) {
    if (secs.empty()) return std::nullopt;
    const Stat s = summarize(secs);
    return Stat{s.median * scale, s.min * scale, s.max * scale, s.samples};
}

/// "yes" when ours is below every peer cell that has a figure, "NO" when not, "" when none has one.
std::string verdict_below(const std::optional<Stat>& ours, const std::vector<const PeerCell*>& peers) {
    bool any = false;
    for (const PeerCell* p : peers) {
        if (!p->stat) continue;
        any = true;
        if (!ours || ours->median >= p->stat->median) return "NO";
    }
    return any ? "yes" : "";
}

// ---------------------------------------------------------------- ours

/// Our resident graph kernels and streams for the rows, released with it.
struct Ours {
    rtModule_t module = nullptr;
    rtFunction_t empty = nullptr, count = nullptr, seed = nullptr;
    rtStream_t s1 = nullptr, s2 = nullptr;
    unsigned* counter = nullptr;  // device memory: the counting graphs' counter

    Ours() {
        RT_CHECK(rtModuleLoadSource(&module, kGraphKernels, nullptr));
        RT_CHECK(rtModuleGetFunction(&empty, module, "empty"));
        RT_CHECK(rtModuleGetFunction(&count, module, "count"));
        RT_CHECK(rtModuleGetFunction(&seed, module, "my_kernel"));
        RT_CHECK(rtStreamCreate(&s1));
        RT_CHECK(rtStreamCreate(&s2));
        void* p = nullptr;
        RT_CHECK(rtMalloc(&p, sizeof(unsigned)));
        counter = static_cast<unsigned*>(p);
    }
    ~Ours() {
        RT_CHECK(rtDeviceSynchronize());
        RT_CHECK(rtFree(counter));
        RT_CHECK(rtStreamDestroy(s1));
        RT_CHECK(rtStreamDestroy(s2));
        RT_CHECK(rtModuleUnload(module));
    }
    Ours(const Ours&) = delete;
    Ours& operator=(const Ours&) = delete;

    /// `shape` of `empty()` (or of `count(counter)`) nodes built with rtGraphAddKernelNode and instantiated.
    rtGraphExec_t instantiate(const GraphShape& shape, bool counting) {
        rtGraph_t g = nullptr;
        RT_CHECK(rtGraphCreate(&g, 0));
        void* arg = counter;
        void* args[] = {&arg};
        rtKernelNodeParams p{};
        p.function = counting ? count : empty;
        p.grid = rtDim3{1, 1, 1};
        p.block = rtDim3{1, 1, 1};
        p.args = counting ? args : nullptr;
        std::vector<rtGraphNode_t> nodes(static_cast<std::size_t>(shape.nodes), nullptr);
        std::vector<rtGraphNode_t> deps;
        for (int i = 0; i < shape.nodes; ++i) {
            deps.clear();
            for (int d : shape.deps(i)) deps.push_back(nodes[static_cast<std::size_t>(d)]);
            RT_CHECK(rtGraphAddKernelNode(&nodes[static_cast<std::size_t>(i)], g, deps.data(), deps.size(), &p));
        }
        rtGraphExec_t x = nullptr;
        RT_CHECK(rtGraphInstantiate(&x, g, 0));
        RT_CHECK(rtGraphDestroy(g));
        return x;
    }
    void replay(rtGraphExec_t x) {
        RT_CHECK(rtGraphLaunch(x, s1));
        RT_CHECK(rtStreamSynchronize(s1));
    }
    void reset_counter() { RT_CHECK(rtMemset(counter, 0, sizeof(unsigned))); }
    unsigned read_counter() {
        unsigned v = 0;
        RT_CHECK(rtMemcpy(&v, counter, sizeof v, RT_MEMCPY_DEVICE_TO_HOST));
        return v;
    }
};

// ---------------------------------------------------------------- DAG rows

constexpr int kVerifyReplays = 2;

std::string count_mismatch(unsigned long long got, const GraphShape& shape) {
    return "the counting " + std::string(shape.name()) + " counted " + std::to_string(got) + " node runs in " +
           std::to_string(kVerifyReplays) + " replays of " + std::to_string(shape.nodes) + " nodes, expected " +
           std::to_string(static_cast<unsigned long long>(kVerifyReplays) * shape.nodes);
}

GraphPeerRow dag_row(const GraphShape& shape, const GraphPeerOptions& o, Ours& ours, OpenClPeer* pocl,
                     const std::string& pocl_missing, TbbPeer* tbb, const std::string& tbb_missing) {
    GraphPeerRow row;
    const bool chain = shape.kind == GraphShape::Chain;
    row.metric = chain ? "graph_chain_1000_peers" : "graph_fanout_1000_peers";
    row.label = chain ? "chain of 1,000: launch+sync, per node" : "fan-out/in of 1,000: launch+sync, per node";
    row.unit = "ns";
    row.peer.name = "PoCL cl_khr_command_buffer replay (out-of-order command buffer, a sync point per edge)";
    row.others.resize(2);
    PeerCell& tbb_cell = row.others[0];
    PeerCell& calls_cell = row.others[1];
    tbb_cell.name = tbb ? tbb->name() + " (default continue_nodes, try_put + wait_for_all)" : "oneTBB flow_graph";
    calls_cell.name = chain ? "PoCL-calls (the same kernels, one clEnqueueNDRangeKernel each, in-order queue)"
                            : "PoCL-calls (the same kernels, one clEnqueueNDRangeKernel each, out-of-order queue, "
                              "an event per node)";
    if (!tbb) tbb_cell.note = "missing: " + tbb_missing;
    if (!pocl) row.peer.note = calls_cell.note = "missing: " + pocl_missing;

    // Ours, verified (exit 2 when wrong), then the timed empty graph.
    {
        rtGraphExec_t check = ours.instantiate(shape, true);
        ours.reset_counter();
        for (int i = 0; i < kVerifyReplays; ++i) ours.replay(check);
        const unsigned got = ours.read_counter();
        RT_CHECK(rtGraphExecDestroy(check));
        if (got != static_cast<unsigned>(kVerifyReplays * shape.nodes))
            verification_failed(row.metric, count_mismatch(got, shape));
    }
    rtGraphExec_t exec = ours.instantiate(shape, false);

    // The peers, each verified with its counting form first (a wrong peer is reported, not measured).
    int pocl_graph = -1;
    if (pocl) {
        try {
            pocl->load_graph_kernels();
            const std::string why = pocl->command_buffer_missing();
            if (!why.empty()) {
                row.peer.note = "missing: " + why;
            } else {
                const int check = pocl->record_graph(shape, true);
                pocl->reset_graph_counter();
                for (int i = 0; i < kVerifyReplays; ++i) pocl->replay_graph(check);
                if (const unsigned got = pocl->graph_counter(); got != unsigned(kVerifyReplays * shape.nodes))
                    row.peer.note = "error: WRONG: " + count_mismatch(got, shape);
                else
                    pocl_graph = pocl->record_graph(shape, false);
            }
        } catch (const PeerError& e) {
            row.peer.note = std::string("error: ") + e.what();
        }
        try {
            if (calls_cell.note.empty()) {
                pocl->reset_graph_counter();
                for (int i = 0; i < kVerifyReplays; ++i) pocl->run_graph_calls(shape, true);
                if (const unsigned got = pocl->graph_counter(); got != unsigned(kVerifyReplays * shape.nodes))
                    calls_cell.note = "error: WRONG: " + count_mismatch(got, shape);
            }
        } catch (const PeerError& e) {
            calls_cell.note = std::string("error: ") + e.what();
        }
    }
    std::optional<TbbPeer::Graph> tbb_graph;
    if (tbb) {
        try {
            TbbPeer::Graph check = tbb->build(shape, true);
            for (int i = 0; i < kVerifyReplays; ++i) check.run();
            if (const auto got = check.counter(); got != static_cast<unsigned long long>(kVerifyReplays) * shape.nodes)
                tbb_cell.note = "error: WRONG: " + count_mismatch(got, shape);
            else
                tbb_graph.emplace(tbb->build(shape, false));
        } catch (const PeerError& e) {
            tbb_cell.note = std::string("error: ") + e.what();
        }
    }

    std::vector<Side> sides(4);
    sides[0] = side(nullptr, [&] { ours.replay(exec); }, double(shape.nodes));
    sides[1] = side(&row.peer, [&] { pocl->replay_graph(pocl_graph); }, double(shape.nodes));
    sides[2] = side(&tbb_cell, [&] { tbb_graph->run(); }, double(shape.nodes));
    sides[3] = side(&calls_cell, [&] { pocl->run_graph_calls(shape, false); }, double(shape.nodes));
    measure(sides, o);
    RT_CHECK(rtGraphExecDestroy(exec));

    row.ours = scaled(sides[0].secs, 1e9);
    for (std::size_t i = 1; i < sides.size(); ++i)
        if (sides[i].cell->note.empty()) sides[i].cell->stat = scaled(sides[i].secs, 1e9);
    row.target = "< PoCL cb, oneTBB";
    row.verdict = verdict_below(row.ours, {&row.peer, &tbb_cell});
    return row;
}

// ---------------------------------------------------------------- the seed's pipeline

/// The seed's pipeline over `n` floats (examples/seed_pipeline.cpp): H2D on stream 1, an event, stream 2 waits for
/// it, runs the seed's kernel (blocks of 256) and copies back.
struct Pipeline {
    Ours& ours;
    unsigned n;
    float* h_in = nullptr;
    float* h_out = nullptr;
    void* d_in = nullptr;
    void* d_out = nullptr;
    rtEvent_t h2d_done = nullptr;

    Pipeline(Ours& o, unsigned count) : ours(o), n(count) {
        void* p = nullptr;
        RT_CHECK(rtMallocHost(&p, bytes()));
        h_in = static_cast<float*>(p);
        RT_CHECK(rtMallocHost(&p, bytes()));
        h_out = static_cast<float*>(p);
        RT_CHECK(rtMalloc(&d_in, bytes()));
        RT_CHECK(rtMalloc(&d_out, bytes()));
        RT_CHECK(rtEventCreateWithFlags(&h2d_done, RT_EVENT_DISABLE_TIMING));
        for (unsigned i = 0; i < n; ++i) h_in[i] = static_cast<float>(static_cast<int>(i % 4093) - 2000) * 0.25f;
        RT_CHECK(rtMemset(d_out, 0, bytes()));
    }
    ~Pipeline() {
        RT_CHECK(rtDeviceSynchronize());
        RT_CHECK(rtEventDestroy(h2d_done));
        RT_CHECK(rtFree(d_in));
        RT_CHECK(rtFree(d_out));
        RT_CHECK(rtFreeHost(h_in));
        RT_CHECK(rtFreeHost(h_out));
    }
    Pipeline(const Pipeline&) = delete;
    Pipeline& operator=(const Pipeline&) = delete;
    std::size_t bytes() const { return std::size_t(n) * sizeof(float); }

    /// The seed's calls, on stream 1 then stream 2 (which ends holding all of the pipeline's work).
    void enqueue() {
        int size = static_cast<int>(n);
        void* args[] = {&d_in, &d_out, &size};
        RT_CHECK(rtMemcpyAsync(d_in, h_in, bytes(), RT_MEMCPY_HOST_TO_DEVICE, ours.s1));
        RT_CHECK(rtEventRecord(h2d_done, ours.s1));
        RT_CHECK(rtStreamWaitEvent(ours.s2, h2d_done));
        RT_CHECK(rtLaunchKernel(ours.seed, rtDim3{(n + 255) / 256, 1, 1}, rtDim3{256, 1, 1}, args, 0, ours.s2));
        RT_CHECK(rtMemcpyAsync(h_out, d_out, bytes(), RT_MEMCPY_DEVICE_TO_HOST, ours.s2));
    }
    /// One iteration the stream way: the calls, then the one synchronize.
    void stream_iteration() {
        enqueue();
        RT_CHECK(rtStreamSynchronize(ours.s2));
    }
    /// The same work as a graph: H2D → the seed's kernel → D2H, each after the one before (the event hand-off of
    /// the stream version is the kernel node's dependency), instantiated.
    rtGraphExec_t instantiate() {
        rtGraph_t g = nullptr;
        RT_CHECK(rtGraphCreate(&g, 0));
        int size = static_cast<int>(n);
        void* args[] = {&d_in, &d_out, &size};
        const rtMemcpyNodeParams h2d{d_in, h_in, bytes(), RT_MEMCPY_HOST_TO_DEVICE};
        const rtMemcpyNodeParams d2h{h_out, d_out, bytes(), RT_MEMCPY_DEVICE_TO_HOST};
        rtKernelNodeParams k{};
        k.function = ours.seed;
        k.grid = rtDim3{(n + 255) / 256, 1, 1};
        k.block = rtDim3{256, 1, 1};
        k.args = args;
        rtGraphNode_t copy_in = nullptr, kernel = nullptr, copy_out = nullptr;
        RT_CHECK(rtGraphAddMemcpyNode(&copy_in, g, nullptr, 0, &h2d));
        RT_CHECK(rtGraphAddKernelNode(&kernel, g, &copy_in, 1, &k));
        RT_CHECK(rtGraphAddMemcpyNode(&copy_out, g, &kernel, 1, &d2h));
        rtGraphExec_t x = nullptr;
        RT_CHECK(rtGraphInstantiate(&x, g, 0));
        RT_CHECK(rtGraphDestroy(g));
        return x;
    }
    /// "" when h_out is twice h_in, else the first wrong element.
    std::string wrong() const {
        for (unsigned i = 0; i < n; ++i)
            if (h_out[i] != h_in[i] * 2.0f)
                return "out[" + std::to_string(i) + "] = " + std::to_string(h_out[i]) + ", expected " +
                       std::to_string(h_in[i] * 2.0f);
        return "";
    }
    void clear_output() { std::fill(h_out, h_out + n, -1.0f); }
};

GraphPeerRow pipeline_row(unsigned n, const char* metric, const char* label, const GraphPeerOptions& o, Ours& ours,
                          OpenClPeer* pocl, const std::string& pocl_missing) {
    GraphPeerRow row;
    row.metric = metric;
    row.label = label;
    row.unit = "us";
    row.peer.name = "PoCL one in-order queue: write, the same kernel, read, clFinish";
    row.others.resize(1);
    PeerCell& streams = row.others[0];
    streams.name = "streams (the same calls on the seed's two streams every iteration, one synchronize)";
    if (!pocl) row.peer.note = "missing: " + pocl_missing;

    Pipeline p(ours, n);
    rtGraphExec_t exec = p.instantiate();
    auto graph_iteration = [&] {
        RT_CHECK(rtGraphLaunch(exec, ours.s1));
        RT_CHECK(rtStreamSynchronize(ours.s1));
    };
    auto peer_iteration = [&] {
        pocl->write(0, p.h_in, p.bytes());
        pocl->launch_twice(p.n, 256);
        pocl->read(1, p.h_out, p.bytes());
        pocl->finish();
    };
    // Each side computes the pipeline once, verified.
    for (auto* side : {"graph", "streams"}) {
        p.clear_output();
        if (std::strcmp(side, "graph") == 0) graph_iteration();
        else p.stream_iteration();
        if (const std::string w = p.wrong(); !w.empty()) verification_failed(row.metric + " (" + side + ")", w);
    }
    if (pocl) {
        try {
            pocl->load_kernels();
            p.clear_output();
            peer_iteration();
            if (const std::string w = p.wrong(); !w.empty()) row.peer.note = "error: WRONG: " + w;
        } catch (const PeerError& e) {
            row.peer.note = std::string("error: ") + e.what();
        }
    }

    std::vector<Side> sides(3);
    sides[0] = side(nullptr, graph_iteration, 1);
    sides[1] = side(&row.peer, peer_iteration, 1);
    sides[2] = side(&streams, [&] { p.stream_iteration(); }, 1);
    measure(sides, o);
    RT_CHECK(rtGraphExecDestroy(exec));

    row.ours = scaled(sides[0].secs, 1e6);
    row.peer.stat = row.peer.note.empty() ? scaled(sides[1].secs, 1e6) : std::nullopt;
    streams.stat = scaled(sides[2].secs, 1e6);
    row.target = "< streams";
    row.verdict = verdict_below(row.ours, {&streams});
    return row;
}

}  // namespace

std::vector<GraphPeerRow> graph_peer_rows(const GraphPeerOptions& options, OpenClPeer* pocl,
                                          const std::string& pocl_missing) {
    std::string tbb_missing;
    std::unique_ptr<TbbPeer> tbb = TbbPeer::open(&tbb_missing);
    if (!tbb) std::fprintf(stderr, "runtime-bench-core: peer oneTBB flow_graph missing: %s\n", tbb_missing.c_str());
    Ours ours;
    std::vector<GraphPeerRow> rows;
    rows.push_back(dag_row({GraphShape::Chain, 1000}, options, ours, pocl, pocl_missing, tbb.get(), tbb_missing));
    rows.push_back(dag_row({GraphShape::FanOut, 1000}, options, ours, pocl, pocl_missing, tbb.get(), tbb_missing));
    rows.push_back(pipeline_row(1024 * 1024, "seed_pipeline_graph", "seed pipeline 4 MiB as a graph, per iter",
                                options, ours, pocl, pocl_missing));
    rows.push_back(pipeline_row(1024, "seed_pipeline_graph_4K", "seed pipeline 4 KiB as a graph, per iter", options,
                                ours, pocl, pocl_missing));
    return rows;
}

}  // namespace rtbench
