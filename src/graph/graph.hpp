// The Graph Executor's model: graphs of nodes (built by capture or by rtGraphAdd*Node), checked when added, and the
// programs instantiated from them (graph/program.hpp). Device-independent: backends see only programs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "runtime/runtime.h"

namespace rt {
class CoreDevice;
class CoreFunction;
class Event;
}  // namespace rt

namespace rt::comm {
struct Collective;
}  // namespace rt::comm

namespace rt::graph {

class Graph;

/// What a graph keeps alive for as long as it or any program made from it exists (shared by clones and programs):
/// the releases attached by rtStreamDeferRelease during a capture (run once, when the last owner goes, after the
/// launches queued by then have completed — through the timeline). A graph's child nodes own copies of their child
/// graphs, which share those graphs' keepalives: nothing else refers to a keepalive (a program holds those of every
/// graph its nodes came from), so graphs holding copies of each other make no cycle. Thread-safe.
class Keepalive {
public:
    Keepalive() = default;
    Keepalive(const Keepalive&) = delete;
    Keepalive& operator=(const Keepalive&) = delete;
    ~Keepalive();  ///< defers every release after all queued work (Timeline::defer_after(unfinished_points, ...));
                   ///< runs them at once when no runtime is running (after rtFinalize waited for all work)
    void add_release(rtHostFn_t release, void* user_data);

private:
    std::mutex mutex_;
    std::vector<std::pair<rtHostFn_t, void*>> releases_;
};

/// A kernel node's parameters: the function (kept alive: its module's code stays loaded), the validated shape
/// (global[] filled in), and the argument values copied back to back, argument i at arg_offsets[i] with
/// arg_sizes[i] bytes (the function's parameter sizes).
struct KernelParams {
    std::shared_ptr<CoreFunction> function;
    backend::LaunchShape shape{};
    std::vector<unsigned char> args;
    std::vector<size_t> arg_offsets;
    std::vector<size_t> arg_sizes;
};

/// Operands of copies and fills, as checked when the node was added (kind resolved: never DEFAULT).
struct MemoryParams {
    void* dst = nullptr;
    const void* src = nullptr;  // copies
    size_t bytes = 0;
    backend::CopyKind kind = backend::CopyKind::device_to_device;  // copies
    uint8_t value = 0;                                              // fills
    /// Nothing to do: 0 bytes, or (copies) dst == src in host memory the device maps (zero copy, which the stream
    /// path counts as an elided copy). Replays skip it (a backend's memcpy must never see dst == src).
    bool elided = false;
};

struct Node {
    rtGraphNodeType type = RT_GRAPH_NODE_TYPE_EMPTY;
    Graph* graph = nullptr;
    uint32_t index = 0;           ///< position in graph->nodes() (the order of addition)
    uint64_t handle = 0;          ///< its rtGraphNode_t (Runtime's node table); 0 in a graph not published (a
                                  ///< capture under way, the graph copy inside a child node)
    std::vector<Node*> deps;      ///< predecessors, nodes of the same graph, no duplicates
    KernelParams kernel;                  // KERNEL
    MemoryParams memory;                  // MEMCPY, MEMSET
    backend::HostCall host{};             // HOST (slot and op_index unused here)
    std::shared_ptr<Event> event;         // EVENT_RECORD, WAIT_EVENT
    std::shared_ptr<Graph> child;         // GRAPH: a copy of the child graph, owned by the node
    size_t alloc_bytes = 0;               // MEM_ALLOC
    void* address = nullptr;              // MEM_ALLOC: the allocation's (provisional) address; MEM_FREE: what it frees
    std::shared_ptr<const comm::Collective> collective;  // COLLECTIVE: the rank's call(s), checked when captured
};

/// Addresses handed out by allocation nodes before any memory exists: reserved, never accessible host address space
/// (one PROT_NONE mapping per graph, grown in chunks), so that no real allocation of any backend — unified addressing
/// included — can have them. Instantiation maps them to arena offsets (graph/memory_plan.hpp).
/// Thread-safe (clones share one space). Ranges are separated by unreserved gaps of at least 256 bytes, so the
/// address one past a range's end (a C "end pointer") belongs to that range and to no other.
class ProvisionalSpace {
public:
    ProvisionalSpace() = default;
    ProvisionalSpace(const ProvisionalSpace&) = delete;
    ProvisionalSpace& operator=(const ProvisionalSpace&) = delete;
    ~ProvisionalSpace();
    /// A fresh range of `bytes` (> 0; 256-byte aligned); throws OUT_OF_MEMORY if address space cannot be reserved.
    void* reserve(size_t bytes);
    /// The range containing `p`, its end included ([base, base + bytes]): its start and size; false if none.
    bool find(const void* p, uintptr_t* base, size_t* bytes) const;

private:
    mutable std::mutex mutex_;
    std::vector<std::pair<void*, size_t>> mappings_;
    std::map<uintptr_t, size_t> ranges_;  // start -> size
    uintptr_t next_ = 0, end_ = 0;
};

/// Whether `p` lies in the reserved space of any graph's ProvisionalSpace (an allocation node's address used outside
/// its graph). One relaxed load when no graph has allocation nodes. Thread-safe.
bool is_provisional_address(const void* p);

/// An external buffer named by rtGraphBindName.
struct NamedBuffer {
    std::string name;
    void* ptr = nullptr;
    size_t bytes = 0;
};

/// A graph: nodes in the order of addition, each with its dependencies. Not thread-safe (as CUDA's: the caller
/// serialises calls on one graph); the C API takes mutex() around every call. Always owned by a shared_ptr (make one
/// with std::make_shared): node handles alias it.
///
/// Node handles: a graph gives its nodes handles (Runtime::graph_nodes, each an aliasing reference to the graph, so
/// a handle being used keeps its graph alive) once it is published (graph/handles.hpp: publish_graph, which sets
/// with_handles), and every node added afterwards gets one. Because the handles own the graph, they must be
/// released explicitly: release_handles() (rtGraphDestroy). A graph that is never published (a capture's graph until
/// rtStreamEndCapture succeeds, a child node's copy) has none and simply goes with its last reference.
class Graph : public std::enable_shared_from_this<Graph> {
public:
    explicit Graph(CoreDevice& device);
    ~Graph();
    CoreDevice& device() const { return *device_; }
    std::mutex& mutex() { return mutex_; }

    const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
    /// Adds a node after `deps` (checked: nodes of this graph, no duplicates) and gives it a handle when
    /// with_handles. The params in `node` were validated by the caller (graph/node_params.hpp); MEM_ALLOC and
    /// MEM_FREE nodes are recorded (allocation_at, freed_by). Refused (INVALID_HANDLE) once release_handles() ran.
    Node* add(std::unique_ptr<Node> node, const std::vector<Node*>& deps);
    /// The node behind a handle if it belongs to this graph; throws INVALID_VALUE naming the handle (and `role`,
    /// e.g. "deps[2]") otherwise.
    Node* node_of(rtGraphNode_t handle, const char* role) const;
    /// The C API's dependency list as nodes: `ndeps` handles of this graph's nodes, no duplicates, `deps` NULL only
    /// when ndeps is 0. Throws INVALID_VALUE naming the offending entry.
    std::vector<Node*> resolve_deps(const rtGraphNode_t* deps, size_t ndeps) const;

    /// A deep copy: same nodes, parameters, edges, names, allocation addresses (the provisional space and the
    /// keepalive are shared); nodes get handles when `with_handles` (the copy is then published: handles.hpp).
    std::shared_ptr<Graph> clone(bool with_handles) const;

    /// Gives every node without a handle one and has later nodes get one too (publish_graph calls it).
    void assign_handles();
    /// Erases every node handle given out (rtGraphDestroy); later add() calls are refused. Idempotent.
    void release_handles();

    /// The MEM_ALLOC node whose memory holds `p` — [address, address + alloc_bytes), its end included when
    /// `include_end` — or null.
    const Node* allocation_at(const void* p, bool include_end = false) const;
    /// The MEM_FREE node that frees the allocation of `alloc` (a MEM_ALLOC node of this graph), or null.
    const Node* freed_by(const Node* alloc) const;
    /// Whether any node, in this graph or a child graph, is a MEM_ALLOC or MEM_FREE node.
    bool has_memory_nodes() const { return has_memory_nodes_; }

    ProvisionalSpace& provisional() { return *provisional_; }
    const std::shared_ptr<ProvisionalSpace>& provisional_ptr() const { return provisional_; }
    std::vector<NamedBuffer>& names() { return names_; }
    const std::vector<NamedBuffer>& names() const { return names_; }
    const std::shared_ptr<Keepalive>& keepalive() const { return keepalive_; }

    /// Whether nodes get handles when added (set by assign_handles; false for a capture's graph under way and for
    /// the copy inside a child node).
    bool with_handles = false;

private:
    CoreDevice* device_;
    std::mutex mutex_;
    std::vector<std::unique_ptr<Node>> nodes_;
    std::map<uintptr_t, Node*> allocations_;         // MEM_ALLOC nodes by address
    std::map<const Node*, Node*> frees_;             // MEM_ALLOC node -> its MEM_FREE node
    bool has_memory_nodes_ = false;
    bool released_ = false;                          // release_handles() ran
    std::shared_ptr<ProvisionalSpace> provisional_;  // shared by clones: their nodes keep the same addresses
    std::vector<NamedBuffer> names_;
    std::shared_ptr<Keepalive> keepalive_;
};

}  // namespace rt::graph
