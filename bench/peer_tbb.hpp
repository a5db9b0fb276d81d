// peer_tbb.hpp — the oneTBB peer of the graph rows: flow_graph running the same DAGs of empty tasks, in a plugin that runtime-bench-core dlopens.
//
// oneTBB is a C++ library (flow_graph is templates over libtbb.so.12), so it cannot be dlopen'ed entry point by entry
// point as libOpenCL is. The peer lives in a small plugin, libruntime-bench-tbb.so (peer_tbb_plugin.cpp, built when
// CMake finds oneTBB), next to the executable; runtime-bench-core opens it at run time through the C table below, so
// the benchmark starts and measures everything else on a machine without oneTBB, and says why the peer is missing.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "graph_shape.hpp"

extern "C" {

/// The plugin's entry points (the layout is versioned by `abi`). Nothing here throws: failures return null / non-zero
/// and write a message into `err` (`err_len` bytes, NUL-terminated).
struct RtbenchTbbApi {
    unsigned abi;  // kTbbPluginAbi
    /// "oneTBB <runtime version> flow_graph".
    const char* (*name)();
    /// A tbb::flow::graph of `nodes` continue_nodes with the edges of GraphShape{kind, nodes}; bodies empty, or
    /// incrementing the graph's counter when `counting`. Null on failure.
    void* (*build)(int kind, int nodes, int counting, char* err, std::size_t err_len);
    /// One replay: try_put to the root, then wait_for_all. 0 on success.
    int (*run)(void* graph, char* err, std::size_t err_len);
    /// How many node bodies of a counting graph have run.
    unsigned long long (*counter)(void* graph);
    void (*destroy)(void* graph);
};

/// The plugin's one exported symbol: its table.
const RtbenchTbbApi* rtbench_tbb_plugin();
}

namespace rtbench {

constexpr unsigned kTbbPluginAbi = 1;
constexpr const char* kTbbPluginFile = "libruntime-bench-tbb.so";

/// oneTBB flow_graph through the plugin. Not thread-safe; used from the main thread only.
class TbbPeer {
public:
    /// The plugin ($RUNTIME_BENCH_TBB_PLUGIN, or libruntime-bench-tbb.so next to the executable); nullptr with the
    /// reason in `why_not` when it was not built, cannot be loaded (e.g. libtbb.so.12 missing) or is another version.
    static std::unique_ptr<TbbPeer> open(std::string* why_not);
    ~TbbPeer();
    TbbPeer(const TbbPeer&) = delete;
    TbbPeer& operator=(const TbbPeer&) = delete;

    const std::string& name() const { return name_; }

    /// A built graph; replayed by run(), destroyed with the handle.
    class Graph {
    public:
        Graph(Graph&& other) noexcept : api_(other.api_), g_(other.g_) { other.g_ = nullptr; }
        Graph(const Graph&) = delete;
        Graph& operator=(const Graph&) = delete;
        Graph& operator=(Graph&&) = delete;
        ~Graph();
        /// One replay (try_put + wait_for_all); throws PeerError on failure.
        void run();
        /// Node bodies run so far (counting graphs).
        unsigned long long counter() const;

    private:
        friend class TbbPeer;
        Graph(const RtbenchTbbApi* api, void* g) : api_(api), g_(g) {}
        const RtbenchTbbApi* api_;
        void* g_;
    };
    /// Throws PeerError when the plugin fails to build it.
    Graph build(const GraphShape& shape, bool counting);

private:
    TbbPeer(const RtbenchTbbApi* api, std::string name) : api_(api), name_(std::move(name)) {}
    const RtbenchTbbApi* api_;
    std::string name_;
};

}  // namespace rtbench
