// Graphviz DOT text of a graph (rtGraphDebugDotPrint): a node per node, labelled as in messages, an edge per dependency.
#pragma once

#include <string>

#include "graph/graph.hpp"

namespace rt::graph {

/// The graph as a DOT digraph: node i of the graph is `n<i>` (a child graph's node j of node i: `n<i>_<j>`, in a
/// cluster `cluster_n<i>`), labelled node_label() plus its main parameters — every parameter when `verbose`; an
/// edge `n<d> -> n<i>` per dependency, and a dashed edge from a child node to the roots of its graph. Caller holds
/// the graph's mutex.
std::string to_dot(const Graph& graph, bool verbose);

}  // namespace rt::graph
