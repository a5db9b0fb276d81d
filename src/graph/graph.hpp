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

namespace rt::graph {

class Graph;

/// What a graph keeps alive for as long as it or any program made from it exists (shared by clones and programs):
/// the releases attached by rtStreamDeferRelease during a capture (run once, when the last owner goes, after the
/// launches queued by then have completed — through the timeline).
class Keepalive {
public:
    ~Keepalive();  ///< defers every release after all queued work (Timeline::defer_after(unfinished_points, ...))
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
};

struct Node {
    rtGraphNodeType type = RT_GRAPH_NODE_TYPE_EMPTY;
    Graph* graph = nullptr;
    uint32_t index = 0;           ///< position in graph->nodes() (the order of addition)
    uint64_t handle = 0;          ///< its rtGraphNode_t (Runtime's node table); 0 for nodes of a graph copy inside
                                  ///< a child node
    std::vector<Node*> deps;      ///< predecessors, nodes of the same graph, no duplicates
    KernelParams kernel;                  // KERNEL
    MemoryParams memory;                  // MEMCPY, MEMSET
    backend::HostCall host{};             // HOST (slot and op_index unused here)
    std::shared_ptr<Event> event;         // EVENT_RECORD, WAIT_EVENT
    std::shared_ptr<Graph> child;         // GRAPH: a copy of the child graph, owned by the node
    size_t alloc_bytes = 0;               // MEM_ALLOC
    void* address = nullptr;              // MEM_ALLOC: the allocation's (provisional) address; MEM_FREE: what it frees
};

/// Addresses handed out by allocation nodes before any memory exists: reserved, never accessible host address space
/// (one PROT_NONE mapping per graph, grown in chunks), so that no real allocation of any backend — unified addressing
/// included — can have them. Instantiation maps them to arena offsets (graph/memory_plan.hpp).
class ProvisionalSpace {
public:
    ~ProvisionalSpace();
    /// A fresh range of `bytes` (256-byte aligned); throws OUT_OF_MEMORY if address space cannot be reserved.
    void* reserve(size_t bytes);
    /// The range containing `p`: its start and size; false if `p` is not in any.
    bool find(const void* p, uintptr_t* base, size_t* bytes) const;

private:
    struct Range { uintptr_t base; size_t bytes; };
    std::vector<std::pair<void*, size_t>> mappings_;
    std::map<uintptr_t, size_t> ranges_;  // start -> size
    uintptr_t next_ = 0, end_ = 0;
};

/// An external buffer named by rtGraphBindName.
struct NamedBuffer {
    std::string name;
    void* ptr = nullptr;
    size_t bytes = 0;
};

/// A graph: nodes in the order of addition, each with its dependencies. Not thread-safe (as CUDA's: the caller
/// serialises calls on one graph); the C API takes mutex() around every call.
class Graph {
public:
    explicit Graph(CoreDevice& device);
    ~Graph();  ///< erases the node handles it gave out
    CoreDevice& device() const { return *device_; }
    std::mutex& mutex() { return mutex_; }

    const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
    /// Adds a node after `deps` (checked: nodes of this graph, no duplicates) and gives it a handle when `handles`.
    /// The params in `node` were validated by the caller (graph/node_params.hpp).
    Node* add(std::unique_ptr<Node> node, const std::vector<Node*>& deps);
    /// The node behind a handle if it belongs to this graph; throws INVALID_VALUE naming the handle otherwise.
    Node* node_of(rtGraphNode_t handle, const char* role) const;

    /// A deep copy: same nodes, parameters, edges, names; nodes get handles when `with_handles`.
    std::shared_ptr<Graph> clone(bool with_handles) const;

    ProvisionalSpace& provisional() { return *provisional_; }
    const std::shared_ptr<ProvisionalSpace>& provisional_ptr() const { return provisional_; }
    std::vector<NamedBuffer>& names() { return names_; }
    const std::vector<NamedBuffer>& names() const { return names_; }
    const std::shared_ptr<Keepalive>& keepalive() const { return keepalive_; }

    /// Whether nodes get handles when added (false for the copy inside a child node).
    bool with_handles = true;

private:
    CoreDevice* device_;
    std::mutex mutex_;
    std::vector<std::unique_ptr<Node>> nodes_;
    std::shared_ptr<ProvisionalSpace> provisional_;  // shared by clones: their nodes keep the same addresses
    std::vector<NamedBuffer> names_;
    std::shared_ptr<Keepalive> keepalive_;
};

}  // namespace rt::graph
