// C API: explicit graphs — creation, nodes of every kind, queries, clone, destruction, DOT output, named buffers.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "capi/capi_common.hpp"
#include "core/checked_size.hpp"
#include "core/memory.hpp"
#include "graph/dot.hpp"
#include "graph/handles.hpp"
#include "graph/node_params.hpp"

using namespace rt;
using namespace rt::graph;

namespace {


/// Every rtGraphAdd*Node: the graph locked, `deps` resolved and checked, then `make(graph, deps)` builds the node's
/// params (throwing if they are bad: nothing is added), the node is added and its handle written to `*node`.
template <class Make>
void add_node(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps, Make&& make) {
    require_out(node, "node");
    std::shared_ptr<Graph> g = find_graph(graph);
    std::lock_guard lock(g->mutex());
    std::vector<Node*> d = g->resolve_deps(deps, ndeps);
    std::unique_ptr<Node> n = make(*g, d);
    *node = node_handle(*g->add(std::move(n), d));
}

std::unique_ptr<Node> node_of_type(rtGraphNodeType type) {
    auto n = std::make_unique<Node>();
    n->type = type;
    return n;
}

std::shared_ptr<Event> event_for(const Graph& g, rtEvent_t event, const char* api) {
    std::shared_ptr<Event> e = runtime().event(event);
    if (e->device().info().backend != g.device().info().backend)
        fail(RT_ERROR_INVALID_VALUE, "%s: the event belongs to %s but the graph to %s (events order work of the same "
             "backend only)", api, e->device().label().c_str(), g.device().label().c_str());
    if (e->interprocess())
        fail(RT_ERROR_NOT_SUPPORTED, "%s: the event was created with RT_EVENT_INTERPROCESS; a graph cannot record or "
             "wait for an interprocess event (record it on a stream after the graph launch)", api);
    return e;
}

/// rtGraphGetNodes / rtGraphNodeGetDependencies: `*count` is the capacity of `out` (NULL: only the count is asked).
void write_nodes(const std::vector<const Node*>& nodes, rtGraphNode_t* out, size_t* count, const char* what) {
    if (out) {
        if (*count < nodes.size())
            fail(RT_ERROR_INVALID_VALUE, "*count = %zu but there are %zu %s (pass NULL to ask for the count)", *count,
                 nodes.size(), what);
        for (size_t i = 0; i < nodes.size(); ++i) out[i] = node_handle(*nodes[i]);
    }
    *count = nodes.size();
}

/// rtGraphBindName's name rule: 1..63 characters of [A-Za-z0-9_.-].
void check_buffer_name(const char* name) {
    if (!name) fail(RT_ERROR_INVALID_VALUE, "name is NULL (expected 1..63 characters of [A-Za-z0-9_.-])");
    const size_t n = std::strlen(name);
    if (n == 0 || n > 63)
        fail(RT_ERROR_INVALID_VALUE, "name has %zu characters (expected 1..63 characters of [A-Za-z0-9_.-])", n);
    for (size_t i = 0; i < n; ++i) {
        const unsigned char c = static_cast<unsigned char>(name[i]);
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                        c == '.' || c == '-';
        if (!ok)
            fail(RT_ERROR_INVALID_VALUE, "name '%s': character %zu (0x%02x) is not one of [A-Za-z0-9_.-]", name, i, c);
    }
}

}  // namespace

extern "C" {

RT_API rtError_t rtGraphCreate(rtGraph_t* graph, unsigned int flags) {
    return capi_call("rtGraphCreate", [&] {
        require_out(graph, "graph");
        if (flags != 0) fail(RT_ERROR_INVALID_VALUE, "flags 0x%x must be 0", flags);
        *graph = publish_graph(std::make_shared<Graph>(runtime().current_device()));
    });
}

RT_API rtError_t rtGraphAddKernelNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps,
                                      const rtKernelNodeParams* params) {
    return capi_call("rtGraphAddKernelNode", [&] {
        add_node(node, graph, deps, ndeps, [&](Graph& g, const std::vector<Node*>&) {
            if (!params) fail(RT_ERROR_INVALID_VALUE, "params is NULL (expected an rtKernelNodeParams)");
            auto n = node_of_type(RT_GRAPH_NODE_TYPE_KERNEL);
            n->kernel = make_kernel_params(g, *params);
            return n;
        });
    });
}

RT_API rtError_t rtGraphAddMemcpyNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps,
                                      const rtMemcpyNodeParams* params) {
    return capi_call("rtGraphAddMemcpyNode", [&] {
        add_node(node, graph, deps, ndeps, [&](Graph& g, const std::vector<Node*>&) {
            if (!params) fail(RT_ERROR_INVALID_VALUE, "params is NULL (expected an rtMemcpyNodeParams)");
            auto n = node_of_type(RT_GRAPH_NODE_TYPE_MEMCPY);
            n->memory = make_copy_params(g, params->dst, params->src, params->count, kind_value(params->kind),
                                         "rtGraphAddMemcpyNode");
            return n;
        });
    });
}

RT_API rtError_t rtGraphAddMemsetNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps,
                                      const rtMemsetNodeParams* params) {
    return capi_call("rtGraphAddMemsetNode", [&] {
        add_node(node, graph, deps, ndeps, [&](Graph& g, const std::vector<Node*>&) {
            if (!params) fail(RT_ERROR_INVALID_VALUE, "params is NULL (expected an rtMemsetNodeParams)");
            auto n = node_of_type(RT_GRAPH_NODE_TYPE_MEMSET);
            n->memory = make_fill_params(g, params->dst, params->value, params->count, "rtGraphAddMemsetNode");
            return n;
        });
    });
}

RT_API rtError_t rtGraphAddHostNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps,
                                    const rtHostNodeParams* params) {
    return capi_call("rtGraphAddHostNode", [&] {
        add_node(node, graph, deps, ndeps, [&](Graph&, const std::vector<Node*>&) {
            if (!params) fail(RT_ERROR_INVALID_VALUE, "params is NULL (expected an rtHostNodeParams)");
            if (!params->fn) fail(RT_ERROR_INVALID_VALUE, "params->fn is NULL (expected a host function)");
            auto n = node_of_type(RT_GRAPH_NODE_TYPE_HOST);
            n->host = backend::HostCall{params->fn, params->user_data, nullptr, 0};
            return n;
        });
    });
}

RT_API rtError_t rtGraphAddEmptyNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps) {
    return capi_call("rtGraphAddEmptyNode", [&] {
        add_node(node, graph, deps, ndeps,
                 [&](Graph&, const std::vector<Node*>&) { return node_of_type(RT_GRAPH_NODE_TYPE_EMPTY); });
    });
}

RT_API rtError_t rtGraphAddChildGraphNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps,
                                          size_t ndeps, rtGraph_t child) {
    return capi_call("rtGraphAddChildGraphNode", [&] {
        require_out(node, "node");
        std::shared_ptr<Graph> g = find_graph(graph);
        std::shared_ptr<Graph> c = runtime().graphs.find(reinterpret_cast<uint64_t>(child));
        if (!c)
            fail(RT_ERROR_INVALID_HANDLE, "child %p is not a live graph (never created, or destroyed)",
                 static_cast<void*>(child));
        // Both locked (in a deadlock-free order), or the one when a graph takes a copy of itself.
        std::unique_lock<std::mutex> graph_lock(g->mutex(), std::defer_lock), child_lock;
        if (c == g) {
            graph_lock.lock();
        } else {
            child_lock = std::unique_lock<std::mutex>(c->mutex(), std::defer_lock);
            std::lock(graph_lock, child_lock);
        }
        std::vector<Node*> d = g->resolve_deps(deps, ndeps);
        if (&c->device() != &g->device())
            fail(RT_ERROR_INVALID_VALUE, "the child graph belongs to %s but the graph to %s", c->device().label().c_str(),
                 g->device().label().c_str());
        if (c->has_memory_nodes())
            fail(RT_ERROR_INVALID_VALUE, "the child graph has allocation or free nodes, which a child graph may not "
                 "have (as CUDA's): add them to the parent graph");
        auto n = node_of_type(RT_GRAPH_NODE_TYPE_GRAPH);
        n->child = c->clone(false);
        *node = node_handle(*g->add(std::move(n), d));
    });
}

RT_API rtError_t rtGraphAddEventRecordNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps,
                                           size_t ndeps, rtEvent_t event) {
    return capi_call("rtGraphAddEventRecordNode", [&] {
        add_node(node, graph, deps, ndeps, [&](Graph& g, const std::vector<Node*>&) {
            auto n = node_of_type(RT_GRAPH_NODE_TYPE_EVENT_RECORD);
            n->event = event_for(g, event, "rtGraphAddEventRecordNode");
            return n;
        });
    });
}

RT_API rtError_t rtGraphAddEventWaitNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps,
                                         size_t ndeps, rtEvent_t event) {
    return capi_call("rtGraphAddEventWaitNode", [&] {
        add_node(node, graph, deps, ndeps, [&](Graph& g, const std::vector<Node*>&) {
            auto n = node_of_type(RT_GRAPH_NODE_TYPE_WAIT_EVENT);
            n->event = event_for(g, event, "rtGraphAddEventWaitNode");
            return n;
        });
    });
}

RT_API rtError_t rtGraphAddMemAllocNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps,
                                        rtMemAllocNodeParams* params) {
    return capi_call("rtGraphAddMemAllocNode", [&] {
        void* address = nullptr;
        add_node(node, graph, deps, ndeps, [&](Graph& g, const std::vector<Node*>&) {
            if (!params) fail(RT_ERROR_INVALID_VALUE, "params is NULL (expected an rtMemAllocNodeParams)");
            auto n = make_alloc_node(g, params->bytes, "rtGraphAddMemAllocNode");
            address = n->address;
            return n;
        });
        params->ptr = address;
    });
}

RT_API rtError_t rtGraphAddMemFreeNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps,
                                       void* ptr) {
    return capi_call("rtGraphAddMemFreeNode", [&] {
        add_node(node, graph, deps, ndeps, [&](Graph& g, const std::vector<Node*>& d) {
            return make_free_node(g, ptr, d, "rtGraphAddMemFreeNode");
        });
    });
}

RT_API rtError_t rtGraphGetNodes(rtGraph_t graph, rtGraphNode_t* nodes, size_t* count) {
    return capi_call("rtGraphGetNodes", [&] {
        require_out(count, "count");
        std::shared_ptr<Graph> g = find_graph(graph);
        std::lock_guard lock(g->mutex());
        std::vector<const Node*> all;
        all.reserve(g->nodes().size());
        for (const std::unique_ptr<Node>& n : g->nodes()) all.push_back(n.get());
        write_nodes(all, nodes, count, "nodes in the graph");
    });
}

RT_API rtError_t rtGraphNodeGetType(rtGraphNode_t node, rtGraphNodeType* type) {
    return capi_call("rtGraphNodeGetType", [&] {
        require_out(type, "type");
        *type = find_node(node)->type;  // fixed when the node was added: no lock needed
    });
}

RT_API rtError_t rtGraphNodeGetDependencies(rtGraphNode_t node, rtGraphNode_t* deps, size_t* count) {
    return capi_call("rtGraphNodeGetDependencies", [&] {
        require_out(count, "count");
        std::shared_ptr<Node> n = find_node(node);
        std::lock_guard lock(n->graph->mutex());
        write_nodes(std::vector<const Node*>(n->deps.begin(), n->deps.end()), deps, count, "dependencies of the node");
    });
}

RT_API rtError_t rtGraphClone(rtGraph_t* clone, rtGraph_t original) {
    return capi_call("rtGraphClone", [&] {
        require_out(clone, "clone");
        std::shared_ptr<Graph> g = find_graph(original);
        std::shared_ptr<Graph> c;
        {
            std::lock_guard lock(g->mutex());
            c = g->clone(false);
        }
        *clone = publish_graph(std::move(c));
    });
}

RT_API rtError_t rtGraphDestroy(rtGraph_t graph) {
    return capi_call("rtGraphDestroy", [&] { destroy_graph(graph); });
}

RT_API rtError_t rtGraphDebugDotPrint(rtGraph_t graph, const char* path, unsigned int flags) {
    return capi_call("rtGraphDebugDotPrint", [&] {
        if (!path || !*path) fail(RT_ERROR_INVALID_VALUE, "path is %s (expected a file to write)", path ? "empty" : "NULL");
        if (flags & ~RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE)
            fail(RT_ERROR_INVALID_VALUE, "flags 0x%x has unknown bits (expected 0 or RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE)",
                 flags);
        std::shared_ptr<Graph> g = find_graph(graph);
        std::string text;
        {
            std::lock_guard lock(g->mutex());
            text = to_dot(*g, (flags & RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE) != 0);
        }
        std::FILE* f = std::fopen(path, "w");
        if (!f) fail(RT_ERROR_INVALID_VALUE, "cannot open '%s' for writing: %s", path, std::strerror(errno));
        const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
        const int write_errno = errno;
        if (std::fclose(f) != 0 || !written)
            fail(RT_ERROR_INVALID_VALUE, "cannot write '%s': %s", path, std::strerror(written ? errno : write_errno));
    });
}

RT_API rtError_t rtGraphBindName(rtGraph_t graph, const char* name, void* ptr, size_t bytes) {
    return capi_call("rtGraphBindName", [&] {
        std::shared_ptr<Graph> g = find_graph(graph);
        check_buffer_name(name);
        if (!ptr) fail(RT_ERROR_INVALID_VALUE, "buffer '%s': ptr is NULL (expected the buffer's address)", name);
        if (bytes == 0) fail(RT_ERROR_INVALID_VALUE, "buffer '%s': bytes is 0 (expected the buffer's size)", name);
        require_range(ptr, bytes, "rtGraphBindName");
        std::lock_guard lock(g->mutex());
        const auto lo = reinterpret_cast<uintptr_t>(ptr), hi = lo + bytes;
        for (const NamedBuffer& b : g->names()) {
            if (b.name == name)
                fail(RT_ERROR_INVALID_VALUE, "the graph already has a buffer named '%s' (%p, %zu bytes)", name, b.ptr,
                     b.bytes);
            const auto blo = reinterpret_cast<uintptr_t>(b.ptr), bhi = blo + b.bytes;
            if (lo < bhi && blo < hi)
                fail(RT_ERROR_INVALID_VALUE, "buffer '%s' [%p, +%zu) overlaps buffer '%s' [%p, +%zu): named buffers "
                     "do not overlap", name, ptr, bytes, b.name.c_str(), b.ptr, b.bytes);
        }
        // Named buffers are external memory: never an allocation node's (the graph's own).
        if (const Node* a = g->allocation_at(ptr))
            fail(RT_ERROR_INVALID_VALUE, "buffer '%s': %p is memory of allocation node %u of the graph (name external "
                 "buffers only: inputs and outputs)", name, ptr, a->index);
        if (is_provisional_address(ptr))
            fail(RT_ERROR_INVALID_VALUE, "buffer '%s': %p is the address of another graph's allocation node", name, ptr);
        const PointerInfo info = runtime().registry.lookup(ptr);
        if (info.allocation) {
            const Allocation& a = *info.allocation;
            if (a.kind == MemoryKind::device && a.device != &g->device())
                fail(RT_ERROR_INVALID_VALUE, "buffer '%s': %p is device memory of %s but the graph belongs to %s", name,
                     ptr, a.device->label().c_str(), g->device().label().c_str());
            if (bytes > info.available)
                fail(RT_ERROR_INVALID_VALUE, "buffer '%s': %zu bytes named but only %zu bytes available from %p in its "
                     "allocation (%p, %zu bytes)", name, bytes, info.available, ptr, reinterpret_cast<void*>(a.base),
                     a.size);
        }
        g->names().push_back(NamedBuffer{name, ptr, bytes});
    });
}

}  // extern "C"
