// bench_graph_peers.hpp — the graph rows of runtime-bench-core measured against peers: PoCL's cl_khr_command_buffer and oneTBB's flow_graph replaying the same DAGs, and the seed's pipeline as a graph vs streams.
#pragma once

#include <runtime/runtime.h>

#include <optional>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace rtbench {

class OpenClPeer;

/// One figure of a peer (or of another way of doing the same work): a Stat, or why there is none.
struct PeerCell {
    std::string name;  // its first word is the short name the tables show: "oneTBB 2021.8.0 flow_graph", ...
    std::optional<Stat> stat;
    std::string note;  // "missing: ..." / "error: ..." when there is no stat
};

/// One row: ours and its peers measured alternately, run by run, in the same unit.
struct GraphPeerRow {
    std::string metric;  // JSON name, e.g. "graph_chain_1000_peers"
    std::string label;
    std::string unit;    // "ns" (DAG rows, per node) or "us" (pipeline rows, per iteration)
    std::optional<Stat> ours;
    PeerCell peer;                 // the row's PoCL figure (the table's peer column)
    std::vector<PeerCell> others;  // further peers, each its own ratio
    std::string target;
    std::string verdict;  // "yes" / "NO" / "" (no target or nothing to compare)
};

struct GraphPeerOptions {
    int runs = 11;         // alternating runs per row
    double run_ms = 5.0;   // each run replays back to back for about this long (3..200 replays)
};

/// Measures the graph peer rows on the current device (its own module, streams and buffers, released on return):
///   graph_chain_1000_peers / graph_fanout_1000_peers: a graph of 1,000 empty kernels (chain; fan-out/fan-in, see
///     GraphShape) built with rtGraphAddKernelNode, instantiated once, replayed (rtGraphLaunch + synchronize), per
///     node; beside PoCL replaying the same command buffer (cl_khr_command_buffer), oneTBB flow_graph, and PoCL
///     enqueuing the same kernels one call at a time (the PoCL way without the extension).
///   seed_pipeline_graph / seed_pipeline_graph_4K: the seed's pipeline (H2D → event → kernel → D2H on two streams,
///     examples/seed_pipeline.cpp) as a graph of its three operations, replayed, per iteration; beside the same calls
///     made on the streams every iteration and PoCL doing the pipeline on one queue.
/// `pocl` may be null (its cells then say `pocl_missing`). Every side is verified once, untimed: the counting form of
/// each DAG (GraphShape) must count every node of every replay; the pipelines' output must be twice their input
/// (ours wrong: exit 2; a peer wrong: its cell says so).
std::vector<GraphPeerRow> graph_peer_rows(const GraphPeerOptions& options, OpenClPeer* pocl,
                                          const std::string& pocl_missing);

}  // namespace rtbench
