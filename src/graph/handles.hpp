// The C handles of graphs and nodes: look-ups that refuse garbage, stale or wrong-kind handles, and publication.
#pragma once

#include <memory>

#include "graph/graph.hpp"

namespace rt::graph {

/// The live graph behind `graph`; INVALID_HANDLE otherwise (NULL included).
std::shared_ptr<Graph> find_graph(rtGraph_t graph);
/// The live node behind `node` (the reference keeps its graph alive); INVALID_HANDLE otherwise (NULL included, and
/// nodes of a destroyed graph).
std::shared_ptr<Node> find_node(rtGraphNode_t node);
/// The C handle of a node of a published graph.
inline rtGraphNode_t node_handle(const Node& node) { return reinterpret_cast<rtGraphNode_t>(node.handle); }

/// Gives `graph` a handle in Runtime::graphs and its nodes handles (Graph::assign_handles): what rtGraphCreate,
/// rtGraphClone and rtStreamEndCapture return. The graph lives until rtGraphDestroy (destroy_graph).
rtGraph_t publish_graph(std::shared_ptr<Graph> graph);
/// rtGraphDestroy: erases the graph's handle and its nodes' handles; INVALID_HANDLE if `graph` is not live.
/// Executable graphs and queued launches made from it keep what they use (programs own their copies).
void destroy_graph(rtGraph_t graph);

}  // namespace rt::graph
