// Node parameters checked once for every way a node is made, and the one wording of a node in messages.
#include "graph/node_params.hpp"

#include <cstring>

#include "comm/comm.hpp"
#include "comm/reduce.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/module.hpp"
#include "core/runtime.hpp"

namespace rt::graph {

namespace {

/// A graph's allocation nodes as device memory of the graph's device (for the shared copy and fill checks).
class GraphMemory final : public ExtraDeviceMemory {
public:
    explicit GraphMemory(const Graph& graph) : graph_(graph) {}
    bool lookup(const void* p, const CoreDevice** device, size_t* available, std::string* what) const override {
        const Node* a = graph_.allocation_at(p);
        if (!a) return false;
        *device = &graph_.device();
        *available = a->alloc_bytes - (static_cast<const char*>(p) - static_cast<const char*>(a->address));
        *what = format("memory of allocation node %u of the graph (%p, %zu bytes)", a->index, a->address,
                       a->alloc_bytes);
        return true;
    }

private:
    const Graph& graph_;
};

size_t align_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

}  // namespace

KernelParams make_kernel_params(const Graph& graph, const CoreFunction& function, backend::LaunchShape shape,
                                void* const* args, int num_args, const size_t* arg_sizes) {
    const backend::Function& f = *function.impl();
    const char* name = f.name().c_str();
    if (&function.device() != &graph.device())
        fail(RT_ERROR_INVALID_VALUE, "kernel '%s' was loaded for %s but the graph belongs to %s", name,
             function.device().label().c_str(), graph.device().label().c_str());
    const int arity = f.num_args();
    const std::vector<size_t>& sizes = f.arg_sizes();
    if (arity < 0 || sizes.size() != static_cast<size_t>(arity))
        fail(RT_ERROR_NOT_SUPPORTED, "kernel '%s': the runtime does not know its parameters (a precompiled module "
             "whose backend does not describe them), so a graph node cannot copy its arguments; load the kernel "
             "from source (rtModuleLoadSource)", name);
    KernelParams p;
    p.shape = validate_launch(graph.device(), function, shape, args, num_args, arg_sizes);
    p.function = std::const_pointer_cast<CoreFunction>(function.shared_from_this());
    p.arg_offsets.resize(sizes.size());
    p.arg_sizes = sizes;
    size_t total = 0;
    // 8-byte alignment keeps every address-sized word where the relocations look for it (graph/program.hpp).
    for (size_t i = 0; i < sizes.size(); ++i) {
        total = align_up(total, sizes[i] >= 16 ? 16 : 8);
        p.arg_offsets[i] = total;
        total += sizes[i];
    }
    p.args.assign(total, 0);
    for (size_t i = 0; i < sizes.size(); ++i)
        if (sizes[i]) std::memcpy(p.args.data() + p.arg_offsets[i], args[i], sizes[i]);
    return p;
}

MemoryParams make_copy_params(const Graph& graph, void* dst, const void* src, size_t bytes, int kind, const char* api) {
    GraphMemory memory(graph);
    MemoryParams p;
    p.kind = check_copy(graph.device(), dst, src, bytes, kind, api, &p.elided, &memory);
    p.dst = dst;
    p.src = src;
    p.bytes = bytes;
    return p;
}

MemoryParams make_fill_params(const Graph& graph, void* dst, int value, size_t bytes, const char* api) {
    GraphMemory memory(graph);
    check_fill(graph.device(), dst, bytes, api, &memory);
    MemoryParams p;
    p.dst = dst;
    p.bytes = bytes;
    p.value = static_cast<uint8_t>(value);
    p.elided = bytes == 0;
    return p;
}

std::unique_ptr<Node> make_alloc_node(Graph& graph, size_t bytes, const char* api) {
    if (bytes == 0) fail(RT_ERROR_INVALID_VALUE, "%s: bytes is 0 (expected the size of the allocation)", api);
    auto n = std::make_unique<Node>();
    n->type = RT_GRAPH_NODE_TYPE_MEM_ALLOC;
    n->alloc_bytes = bytes;
    n->address = graph.provisional().reserve(bytes);
    return n;
}

std::unique_ptr<Node> make_free_node(const Graph& graph, void* ptr, const std::vector<Node*>& deps, const char* api) {
    if (!ptr) fail(RT_ERROR_INVALID_VALUE, "%s: ptr is NULL (expected the address of an allocation node of the graph)", api);
    const Node* a = graph.allocation_at(ptr);
    if (!a) {
        if (is_provisional_address(ptr))
            fail(RT_ERROR_INVALID_VALUE, "%s: %p is the address of another graph's allocation node (a graph frees its "
                 "own allocations only)", api, ptr);
        fail(RT_ERROR_INVALID_VALUE, "%s: %p is not the address of an allocation node of this graph (memory from "
             "rtMalloc or rtMallocAsync is freed by rtFree or rtFreeAsync)", api, ptr);
    }
    if (a->address != ptr)
        fail(RT_ERROR_INVALID_VALUE, "%s: %p is %zu bytes inside the memory of allocation node %u (%p), not its start",
             api, ptr, static_cast<size_t>(static_cast<char*>(ptr) - static_cast<char*>(a->address)), a->index,
             a->address);
    if (const Node* f = graph.freed_by(a))
        fail(RT_ERROR_INVALID_VALUE, "%s: the memory of allocation node %u (%p) is already freed by node %u", api,
             a->index, ptr, f->index);
    // The free must run after the allocation: `a` among the ancestors of `deps`.
    std::vector<char> seen(graph.nodes().size(), 0);
    std::vector<const Node*> stack(deps.begin(), deps.end());
    bool reached = false;
    while (!stack.empty() && !reached) {
        const Node* n = stack.back();
        stack.pop_back();
        if (seen[n->index]) continue;
        seen[n->index] = 1;
        reached = n == a;
        for (const Node* d : n->deps) stack.push_back(d);
    }
    if (!reached)
        fail(RT_ERROR_INVALID_VALUE, "%s: the free of %p must run after allocation node %u: make it depend on that "
             "node (directly or through other nodes)", api, ptr, a->index);
    auto n = std::make_unique<Node>();
    n->type = RT_GRAPH_NODE_TYPE_MEM_FREE;
    n->address = ptr;
    return n;
}

const char* node_type_name(rtGraphNodeType type) {
    switch (type) {
        case RT_GRAPH_NODE_TYPE_KERNEL: return "kernel";
        case RT_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
        case RT_GRAPH_NODE_TYPE_MEMSET: return "memset";
        case RT_GRAPH_NODE_TYPE_HOST: return "host function";
        case RT_GRAPH_NODE_TYPE_GRAPH: return "child graph";
        case RT_GRAPH_NODE_TYPE_EMPTY: return "empty";
        case RT_GRAPH_NODE_TYPE_WAIT_EVENT: return "event wait";
        case RT_GRAPH_NODE_TYPE_EVENT_RECORD: return "event record";
        case RT_GRAPH_NODE_TYPE_MEM_ALLOC: return "alloc";
        case RT_GRAPH_NODE_TYPE_MEM_FREE: return "free";
        case RT_GRAPH_NODE_TYPE_COLLECTIVE: return "collective";
    }
    return "unknown node type";
}

KernelParams make_kernel_params(const Graph& graph, const rtKernelNodeParams& params) {
    std::shared_ptr<CoreFunction> f = runtime().functions.find(reinterpret_cast<uint64_t>(params.function));
    if (!f)
        fail(RT_ERROR_INVALID_HANDLE, "params->function %p is not a kernel of a loaded module (never looked up, or "
             "unloaded)", static_cast<void*>(params.function));
    const backend::LaunchShape shape{{params.grid.x, params.grid.y, params.grid.z},
                                     {params.block.x, params.block.y, params.block.z},
                                     params.shared_bytes,
                                     {params.global[0], params.global[1], params.global[2]}};
    return make_kernel_params(graph, *f, shape, params.args);
}

const char* copy_direction(backend::CopyKind kind) {
    switch (kind) {
        case backend::CopyKind::host_to_host: return "host→host";
        case backend::CopyKind::host_to_device: return "host→device";
        case backend::CopyKind::device_to_host: return "device→host";
        case backend::CopyKind::device_to_device: return "device→device";
    }
    return "?";
}

std::string node_kind_text(const Node& node) {
    switch (node.type) {
        case RT_GRAPH_NODE_TYPE_KERNEL:
            return format("kernel '%s'", node.kernel.function ? node.kernel.function->impl()->name().c_str() : "?");
        case RT_GRAPH_NODE_TYPE_MEMCPY:
            return format("memcpy %s %zu B", copy_direction(node.memory.kind), node.memory.bytes);
        case RT_GRAPH_NODE_TYPE_MEMSET: return format("memset %zu B", node.memory.bytes);
        case RT_GRAPH_NODE_TYPE_GRAPH:
        {
            const size_t n = node.child ? node.child->nodes().size() : 0;
            return format("child graph (%zu node%s)", n, n == 1 ? "" : "s");
        }
        case RT_GRAPH_NODE_TYPE_MEM_ALLOC: return format("alloc %zu B", node.alloc_bytes);
        case RT_GRAPH_NODE_TYPE_COLLECTIVE: {
            if (!node.collective || node.collective->calls.empty()) return "collective";
            const comm::Call& first = node.collective->calls.front();
            if (node.collective->calls.size() > 1)
                return format("collective: %zu sends/receives of rank %d", node.collective->calls.size(),
                              node.collective->comm->rank());
            return format("collective %s %zu x %s, rank %d of %d", comm::api_name(first.kind), first.count,
                          comm::type_name(first.type), node.collective->comm->rank(), node.collective->comm->size());
        }
        default: return node_type_name(node.type);
    }
}

std::string node_label(const Node& node, std::string_view id) {
    std::string s = "node ";
    s.append(id);
    s += " (";
    s += node_kind_text(node);
    s += ')';
    return s;
}

std::string node_label(const Node& node) { return node_label(node, std::to_string(node.index)); }

}  // namespace rt::graph
