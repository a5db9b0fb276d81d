// The graph model: graphs of checked nodes, their C handles, provisional addresses of allocation nodes, keepalives.
#include "graph/graph.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <shared_mutex>

#include "core/error.hpp"
#include "core/runtime.hpp"
#include "core/timeline.hpp"
#include "graph/handles.hpp"

namespace rt::graph {

// ---------------------------------------------------------------- Keepalive

Keepalive::~Keepalive() {
    if (releases_.empty()) return;
    auto run = [releases = std::move(releases_)] {
        for (const auto& [release, user_data] : releases) release(user_data);
    };
    // No runtime: rtFinalize waited for all work, nothing queued can still use what the releases free.
    Runtime* r = detail::g_runtime.load(std::memory_order_acquire);
    if (!r) {
        run();
        return;
    }
    try {
        r->timeline().defer_after(unfinished_points, std::move(run));
    } catch (...) {
        // Out of memory: leak rather than release what queued work may still use.
    }
}

void Keepalive::add_release(rtHostFn_t release, void* user_data) {
    std::lock_guard lock(mutex_);
    releases_.emplace_back(release, user_data);
}

// ---------------------------------------------------------------- ProvisionalSpace

namespace {

constexpr size_t kRangeAlign = 256;
constexpr size_t kRangeGap = 256;              // between ranges: an end pointer belongs to one range only
constexpr size_t kChunkBytes = size_t{256} << 20;  // address space only (PROT_NONE, never committed)

/// Every live mapping of every ProvisionalSpace, for is_provisional_address. Never destroyed: graphs may outlive
/// static destruction (a runtime that was never finalized).
struct ReservedMappings {
    std::shared_mutex mutex;
    std::map<uintptr_t, size_t> mappings;  // start -> bytes
    std::atomic<size_t> count{0};
};
ReservedMappings& reserved_mappings() {
    static ReservedMappings* r = new ReservedMappings;
    return *r;
}

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

}  // namespace

bool is_provisional_address(const void* p) {
    ReservedMappings& r = reserved_mappings();
    if (r.count.load(std::memory_order_relaxed) == 0) return false;
    const auto a = reinterpret_cast<uintptr_t>(p);
    std::shared_lock lock(r.mutex);
    auto it = r.mappings.upper_bound(a);
    if (it == r.mappings.begin()) return false;
    --it;
    return a - it->first < it->second;
}

ProvisionalSpace::~ProvisionalSpace() {
    ReservedMappings& r = reserved_mappings();
    {
        std::unique_lock lock(r.mutex);
        for (const auto& [base, bytes] : mappings_) r.mappings.erase(reinterpret_cast<uintptr_t>(base));
        r.count.fetch_sub(mappings_.size(), std::memory_order_relaxed);
    }
    for (const auto& [base, bytes] : mappings_) ::munmap(base, bytes);
}

void* ProvisionalSpace::reserve(size_t bytes) {
    if (bytes == 0) fail(RT_ERROR_INVALID_VALUE, "an allocation node of 0 bytes (expected its size)");
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    if (bytes > SIZE_MAX / 2)
        fail(RT_ERROR_OUT_OF_MEMORY, "cannot reserve %zu bytes of address space for an allocation node", bytes);
    const size_t need = round_up(bytes, kRangeAlign) + kRangeGap;
    std::lock_guard lock(mutex_);
    if (end_ - next_ < need) {
        const size_t map_bytes = std::max(kChunkBytes, round_up(need, page));
        void* m = ::mmap(nullptr, map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
            fail(RT_ERROR_OUT_OF_MEMORY, "cannot reserve %zu bytes of address space for an allocation node (mmap: %s)",
                 bytes, std::strerror(errno));
        try {
            mappings_.emplace_back(m, map_bytes);
            ReservedMappings& r = reserved_mappings();
            std::unique_lock global(r.mutex);
            r.mappings.emplace(reinterpret_cast<uintptr_t>(m), map_bytes);
            r.count.fetch_add(1, std::memory_order_relaxed);
        } catch (...) {
            if (!mappings_.empty() && mappings_.back().first == m) mappings_.pop_back();
            ::munmap(m, map_bytes);
            throw;
        }
        next_ = reinterpret_cast<uintptr_t>(m);
        end_ = next_ + map_bytes;
    }
    const uintptr_t base = next_;
    ranges_.emplace(base, bytes);
    next_ += need;
    return reinterpret_cast<void*>(base);
}

bool ProvisionalSpace::find(const void* p, uintptr_t* base, size_t* bytes) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard lock(mutex_);
    auto it = ranges_.upper_bound(a);
    if (it == ranges_.begin()) return false;
    --it;
    if (a - it->first > it->second) return false;
    *base = it->first;
    *bytes = it->second;
    return true;
}

// ---------------------------------------------------------------- Graph

Graph::Graph(CoreDevice& device)
    : device_(&device), provisional_(std::make_shared<ProvisionalSpace>()), keepalive_(std::make_shared<Keepalive>()) {}

// Node handles own the graph (aliasing references), so none is live here: nothing to erase.
Graph::~Graph() = default;

namespace {
/// `deps` are nodes of `graph` without duplicates; `role(i)` names entry i in messages.
template <class Role>
void check_deps(const Graph& graph, const std::vector<Node*>& deps, Role&& role) {
    for (size_t i = 0; i < deps.size(); ++i) {
        if (!deps[i]) fail(RT_ERROR_INVALID_VALUE, "%s is NULL (expected a node of the graph)", role(i).c_str());
        if (deps[i]->graph != &graph)
            fail(RT_ERROR_INVALID_VALUE, "%s is a node of another graph (expected a node of this graph)",
                 role(i).c_str());
    }
    auto duplicate = [&](size_t i, size_t j) {
        fail(RT_ERROR_INVALID_VALUE, "%s and %s are the same node (node %u): a dependency is listed once",
             role(i).c_str(), role(j).c_str(), deps[i]->index);
    };
    if (deps.size() <= 16) {
        for (size_t j = 1; j < deps.size(); ++j)
            for (size_t i = 0; i < j; ++i)
                if (deps[i] == deps[j]) duplicate(i, j);
        return;
    }
    std::vector<std::pair<uint32_t, size_t>> order(deps.size());
    for (size_t i = 0; i < deps.size(); ++i) order[i] = {deps[i]->index, i};
    std::sort(order.begin(), order.end());
    for (size_t k = 1; k < order.size(); ++k)
        if (order[k].first == order[k - 1].first) duplicate(order[k - 1].second, order[k].second);
}
}  // namespace

Node* Graph::add(std::unique_ptr<Node> node, const std::vector<Node*>& deps) {
    if (released_) fail(RT_ERROR_INVALID_HANDLE, "the graph was destroyed");
    check_deps(*this, deps, [](size_t i) { return format("dependency %zu", i); });
    if (nodes_.size() >= UINT32_MAX) fail(RT_ERROR_OUT_OF_MEMORY, "a graph has at most %u nodes", UINT32_MAX);
    // Everything that may throw happens before the node is in: a failed add changes nothing.
    if (nodes_.size() == nodes_.capacity()) nodes_.reserve(std::max<size_t>(16, nodes_.capacity() * 2));
    Node* n = node.get();
    n->graph = this;
    n->index = static_cast<uint32_t>(nodes_.size());
    n->deps = deps;
    n->handle = 0;
    if (n->type == RT_GRAPH_NODE_TYPE_MEM_ALLOC) {
        allocations_.emplace(reinterpret_cast<uintptr_t>(n->address), n);
    } else if (n->type == RT_GRAPH_NODE_TYPE_MEM_FREE) {
        const Node* a = allocation_at(n->address);
        if (!a || a->address != n->address)
            fail(RT_ERROR_INVALID_VALUE, "a free node for %p, which is not the address of an allocation node of the "
                 "graph", n->address);
        frees_.emplace(a, n);
    }
    try {
        if (with_handles)
            n->handle = runtime().graph_nodes.insert(std::shared_ptr<Node>(shared_from_this(), n));
    } catch (...) {
        if (n->type == RT_GRAPH_NODE_TYPE_MEM_ALLOC) allocations_.erase(reinterpret_cast<uintptr_t>(n->address));
        if (n->type == RT_GRAPH_NODE_TYPE_MEM_FREE)
            for (auto it = frees_.begin(); it != frees_.end(); ++it)
                if (it->second == n) {
                    frees_.erase(it);
                    break;
                }
        throw;
    }
    if (n->type == RT_GRAPH_NODE_TYPE_MEM_ALLOC || n->type == RT_GRAPH_NODE_TYPE_MEM_FREE ||
        (n->type == RT_GRAPH_NODE_TYPE_GRAPH && n->child && n->child->has_memory_nodes()))
        has_memory_nodes_ = true;
    nodes_.push_back(std::move(node));  // capacity reserved: does not throw
    return n;
}

Node* Graph::node_of(rtGraphNode_t handle, const char* role) const {
    std::shared_ptr<Node> n = runtime().graph_nodes.find(reinterpret_cast<uint64_t>(handle));
    if (!n)
        fail(RT_ERROR_INVALID_VALUE, "%s (%p) is not a live node (never created, or its graph was destroyed)", role,
             static_cast<void*>(handle));
    if (n->graph != this)
        fail(RT_ERROR_INVALID_VALUE, "%s (%p) is node %u of another graph (expected a node of this graph)", role,
             static_cast<void*>(handle), n->index);
    return n.get();  // ours: it lives as long as this graph
}

std::vector<Node*> Graph::resolve_deps(const rtGraphNode_t* deps, size_t ndeps) const {
    if (ndeps > 0 && !deps)
        fail(RT_ERROR_INVALID_VALUE, "deps is NULL but ndeps is %zu (expected %zu node handles, or ndeps 0)", ndeps,
             ndeps);
    std::vector<Node*> out;
    out.reserve(ndeps);
    for (size_t i = 0; i < ndeps; ++i) out.push_back(node_of(deps[i], format("deps[%zu]", i).c_str()));
    check_deps(*this, out, [](size_t i) { return format("deps[%zu]", i); });
    return out;
}

std::shared_ptr<Graph> Graph::clone(bool with_handles_now) const {
    auto g = std::make_shared<Graph>(*device_);
    g->provisional_ = provisional_;
    g->keepalive_ = keepalive_;
    g->names_ = names_;
    g->has_memory_nodes_ = has_memory_nodes_;
    g->nodes_.reserve(nodes_.size());
    for (const std::unique_ptr<Node>& src : nodes_) {
        auto n = std::make_unique<Node>(*src);
        n->graph = g.get();
        n->handle = 0;
        for (Node*& d : n->deps) d = g->nodes_[d->index].get();
        if (n->child) n->child = n->child->clone(false);
        if (n->type == RT_GRAPH_NODE_TYPE_MEM_ALLOC) g->allocations_.emplace(reinterpret_cast<uintptr_t>(n->address), n.get());
        g->nodes_.push_back(std::move(n));
    }
    for (const auto& [alloc, free] : frees_) g->frees_.emplace(g->nodes_[alloc->index].get(), g->nodes_[free->index].get());
    if (with_handles_now) g->assign_handles();
    return g;
}

void Graph::assign_handles() {
    with_handles = true;
    std::shared_ptr<Graph> self = shared_from_this();
    size_t i = 0;
    try {
        for (; i < nodes_.size(); ++i)
            if (!nodes_[i]->handle)
                nodes_[i]->handle = runtime().graph_nodes.insert(std::shared_ptr<Node>(self, nodes_[i].get()));
    } catch (...) {
        // Handles own the graph: none may stay behind a failure, or it would never go.
        for (const std::unique_ptr<Node>& n : nodes_)
            if (n->handle) {
                runtime().graph_nodes.erase(n->handle);
                n->handle = 0;
            }
        with_handles = false;
        throw;
    }
}

void Graph::release_handles() {
    released_ = true;
    with_handles = false;
    std::shared_ptr<Graph> self = shared_from_this();  // the last handle may be the last owner
    for (const std::unique_ptr<Node>& n : nodes_)
        if (n->handle) runtime().graph_nodes.erase(n->handle);
}

const Node* Graph::allocation_at(const void* p, bool include_end) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = allocations_.upper_bound(a);
    if (it == allocations_.begin()) return nullptr;
    --it;
    const size_t offset = a - it->first;
    const size_t bytes = it->second->alloc_bytes;
    return offset < bytes || (include_end && offset == bytes) ? it->second : nullptr;
}

const Node* Graph::freed_by(const Node* alloc) const {
    auto it = frees_.find(alloc);
    return it == frees_.end() ? nullptr : it->second;
}

// ---------------------------------------------------------------- handles

std::shared_ptr<Graph> find_graph(rtGraph_t graph) {
    std::shared_ptr<Graph> g = runtime().graphs.find(reinterpret_cast<uint64_t>(graph));
    if (!g)
        fail(RT_ERROR_INVALID_HANDLE, "graph %p is not a live graph (never created, or destroyed)",
             static_cast<void*>(graph));
    return g;
}

std::shared_ptr<Node> find_node(rtGraphNode_t node) {
    std::shared_ptr<Node> n = runtime().graph_nodes.find(reinterpret_cast<uint64_t>(node));
    if (!n)
        fail(RT_ERROR_INVALID_HANDLE, "node %p is not a live graph node (never created, or its graph was destroyed)",
             static_cast<void*>(node));
    return n;
}

rtGraph_t publish_graph(std::shared_ptr<Graph> graph) {
    std::lock_guard lock(graph->mutex());
    graph->assign_handles();
    try {
        return reinterpret_cast<rtGraph_t>(runtime().graphs.insert(graph));
    } catch (...) {
        graph->release_handles();
        throw;
    }
}

void destroy_graph(rtGraph_t graph) {
    std::shared_ptr<Graph> g = runtime().graphs.erase(reinterpret_cast<uint64_t>(graph));
    if (!g)
        fail(RT_ERROR_INVALID_HANDLE, "graph %p is not a live graph (never created, or destroyed)",
             static_cast<void*>(graph));
    std::lock_guard lock(g->mutex());
    g->release_handles();
}

}  // namespace rt::graph
