// peer_tbb_plugin.cpp — libruntime-bench-tbb.so: oneTBB flow_graph graphs of empty continue_nodes behind the C table of peer_tbb.hpp.
#include "peer_tbb.hpp"

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/version.h>

#include <atomic>
#include <cstdio>
#include <deque>
#include <exception>
#include <string>

namespace {

namespace flow = oneapi::tbb::flow;
using Node = flow::continue_node<flow::continue_msg>;

/// One DAG: continue_nodes (the default policy, as a flow_graph user writes them) joined by make_edge. A
/// continue_node runs once all its predecessors have signalled it, so the sink of a fan-out waits for every branch.
struct TbbGraph {
    flow::graph graph;
    std::deque<Node> nodes;  // continue_nodes are neither copyable nor movable
    std::atomic<unsigned long long> count{0};
};

void write_error(char* err, std::size_t len, const char* what) {
    if (err && len) std::snprintf(err, len, "%s", what);
}

const char* plugin_name() {
    static const std::string name = std::string("oneTBB ") + TBB_runtime_version() + " flow_graph";
    return name.c_str();
}

void* plugin_build(int kind, int nodes, int counting, char* err, std::size_t err_len) {
    if ((kind != rtbench::GraphShape::Chain && kind != rtbench::GraphShape::FanOut) || nodes < 3) {
        write_error(err, err_len, "build: kind must be 0 (chain) or 1 (fan-out) and nodes >= 3");
        return nullptr;
    }
    try {
        auto* g = new TbbGraph;
        const rtbench::GraphShape shape{static_cast<rtbench::GraphShape::Kind>(kind), nodes};
        for (int i = 0; i < nodes; ++i) {
            if (counting) {
                std::atomic<unsigned long long>* c = &g->count;
                g->nodes.emplace_back(g->graph, [c](const flow::continue_msg&) { c->fetch_add(1, std::memory_order_relaxed); });
            } else {
                g->nodes.emplace_back(g->graph, [](const flow::continue_msg&) {});
            }
            for (int d : shape.deps(i)) flow::make_edge(g->nodes[static_cast<std::size_t>(d)], g->nodes.back());
        }
        return g;
    } catch (const std::exception& e) {
        write_error(err, err_len, e.what());
        return nullptr;
    }
}

int plugin_run(void* graph, char* err, std::size_t err_len) {
    try {
        auto* g = static_cast<TbbGraph*>(graph);
        g->nodes.front().try_put(flow::continue_msg());
        g->graph.wait_for_all();
        return 0;
    } catch (const std::exception& e) {
        write_error(err, err_len, e.what());
        return 1;
    }
}

unsigned long long plugin_counter(void* graph) {
    return static_cast<TbbGraph*>(graph)->count.load(std::memory_order_acquire);
}

void plugin_destroy(void* graph) { delete static_cast<TbbGraph*>(graph); }

const RtbenchTbbApi kApi = {rtbench::kTbbPluginAbi, plugin_name, plugin_build, plugin_run, plugin_counter,
                            plugin_destroy};

}  // namespace

extern "C" __attribute__((visibility("default"))) const RtbenchTbbApi* rtbench_tbb_plugin() { return &kApi; }
