// Graphviz DOT text of a graph, with the node labels of messages (graph/node_params.hpp).
#include "graph/dot.hpp"

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/event.hpp"
#include "core/module.hpp"
#include "graph/node_params.hpp"

namespace rt::graph {

namespace {

/// A DOT quoted string's body: quotes and backslashes escaped, newlines as \n (a centred line break).
std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out + '"';
}

const char* shape_of(rtGraphNodeType type) {
    switch (type) {
        case RT_GRAPH_NODE_TYPE_KERNEL: return "box";
        case RT_GRAPH_NODE_TYPE_MEMCPY:
        case RT_GRAPH_NODE_TYPE_MEMSET: return "box, style=rounded";
        case RT_GRAPH_NODE_TYPE_HOST: return "hexagon";
        case RT_GRAPH_NODE_TYPE_GRAPH: return "box3d";
        case RT_GRAPH_NODE_TYPE_EMPTY: return "ellipse";
        case RT_GRAPH_NODE_TYPE_WAIT_EVENT:
        case RT_GRAPH_NODE_TYPE_EVENT_RECORD: return "diamond";
        case RT_GRAPH_NODE_TYPE_MEM_ALLOC:
        case RT_GRAPH_NODE_TYPE_MEM_FREE: return "cylinder";
        case RT_GRAPH_NODE_TYPE_COLLECTIVE: return "octagon";
    }
    return "box";
}

/// An argument's value: as a little-endian integer in hex up to 8 bytes, else its bytes in hex.
std::string arg_value(const unsigned char* p, size_t n) {
    if (n <= 8) {
        unsigned long long v = 0;
        for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
        return format("0x%llx", v);
    }
    std::string s;
    for (size_t i = 0; i < n; ++i) s += format("%02x", p[i]);
    return s;
}

/// The lines under a node's label: its main parameters, or all of them.
std::string details(const Node& n, bool verbose) {
    std::string s;
    const auto line = [&s](const std::string& l) { s += '\n' + l; };
    switch (n.type) {
        case RT_GRAPH_NODE_TYPE_KERNEL: {
            const backend::LaunchShape& sh = n.kernel.shape;
            line(format("grid %ux%ux%u, block %ux%ux%u", sh.grid[0], sh.grid[1], sh.grid[2], sh.block[0], sh.block[1],
                        sh.block[2]));
            if (!verbose) break;
            line(format("global %llux%llux%llu, shared %zu B", sh.global[0], sh.global[1], sh.global[2],
                        sh.shared_bytes));
            for (size_t i = 0; i < n.kernel.arg_offsets.size(); ++i)
                line(format("arg %zu (%zu B): %s", i, n.kernel.arg_sizes[i],
                            arg_value(n.kernel.args.data() + n.kernel.arg_offsets[i], n.kernel.arg_sizes[i]).c_str()));
            break;
        }
        case RT_GRAPH_NODE_TYPE_MEMCPY:
            if (verbose) line(format("dst %p, src %p", n.memory.dst, n.memory.src));
            if (verbose && n.memory.elided) line("elided: nothing moves");
            break;
        case RT_GRAPH_NODE_TYPE_MEMSET:
            line(format("value 0x%02x", n.memory.value));
            if (verbose) line(format("dst %p", n.memory.dst));
            break;
        case RT_GRAPH_NODE_TYPE_HOST:
            if (verbose)
                line(format("fn %p, user_data %p", reinterpret_cast<void*>(n.host.fn), n.host.user_data));
            break;
        case RT_GRAPH_NODE_TYPE_WAIT_EVENT:
        case RT_GRAPH_NODE_TYPE_EVENT_RECORD:
            if (verbose && n.event) line(format("event %p of %s", static_cast<void*>(n.event.get()),
                                                n.event->device().label().c_str()));
            break;
        case RT_GRAPH_NODE_TYPE_MEM_ALLOC:
            if (verbose) line(format("address %p", n.address));
            break;
        case RT_GRAPH_NODE_TYPE_MEM_FREE:
            line(format("address %p", n.address));
            break;
        default: break;
    }
    return s;
}

void write_nodes(std::string& out, const Graph& g, const std::string& prefix, const std::string& id_prefix,
                 const std::string& indent, bool verbose) {
    for (const std::unique_ptr<Node>& node : g.nodes()) {
        const Node& n = *node;
        const std::string id = prefix + std::to_string(n.index);
        const std::string label = node_label(n, id_prefix + std::to_string(n.index)) + details(n, verbose);
        out += indent + "n" + id + " [label=" + quoted(label) + ", shape=" + shape_of(n.type) + "];\n";
        for (const Node* d : n.deps) out += indent + "n" + prefix + std::to_string(d->index) + " -> n" + id + ";\n";
        if (n.type != RT_GRAPH_NODE_TYPE_GRAPH || !n.child) continue;
        out += indent + "subgraph cluster_n" + id + " {\n";
        out += indent + "  label=" + quoted(node_label(n, id_prefix + std::to_string(n.index))) + ";\n";
        out += indent + "  style=dashed;\n";
        write_nodes(out, *n.child, id + "_", id_prefix + std::to_string(n.index) + ".", indent + "  ", verbose);
        out += indent + "}\n";
        for (const std::unique_ptr<Node>& c : n.child->nodes())
            if (c->deps.empty())
                out += indent + "n" + id + " -> n" + id + "_" + std::to_string(c->index) + " [style=dashed];\n";
    }
}

}  // namespace

std::string to_dot(const Graph& graph, bool verbose) {
    std::string title = format("graph of %s: %zu nodes", graph.device().label().c_str(), graph.nodes().size());
    if (verbose)
        for (const NamedBuffer& b : graph.names())
            title += format("\nbuffer '%s': %p, %zu B", b.name.c_str(), b.ptr, b.bytes);
    std::string out = "digraph rtGraph {\n";
    out += "  label=" + quoted(title) + ";\n  labelloc=t;\n";
    out += "  node [fontname=\"monospace\"];\n";
    write_nodes(out, graph, "", "", "  ", verbose);
    out += "}\n";
    return out;
}

}  // namespace rt::graph
