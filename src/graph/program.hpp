// An instantiated graph: a flat, topologically ordered command array with resolved operands, its dependency edges,
// its memory plan and its relocations (which operand bytes point into the arena or into a named buffer). Built once
// by rtGraphInstantiate (or rtGraphExecLoad), lowered by the backend (backend::GraphExecutable), replayed per launch.
#pragma once

#include <cstdint>
#include <memory>
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
class Keepalive;
class ProvisionalSpace;

/// Where an operand points, for the relocations: into the arena (an allocation node's memory) or into a named
/// buffer (rtGraphBindName), at `offset` bytes from its start.
struct Symbol {
    enum class Kind : uint8_t { arena, named };
    Kind kind = Kind::arena;
    uint32_t name = 0;  ///< named: index in Program::names; arena: the allocation's index in Program::slots
    uint64_t offset = 0;
};

/// One operand of one command that holds an address: resolved again whenever the arena or a named buffer moves.
struct Relocation {
    enum class Field : uint8_t { dst, src, arg };
    uint32_t command = 0;
    Field field = Field::dst;
    uint32_t arg_offset = 0;  ///< arg: byte offset in Command::args of the 8-byte address
    Symbol symbol;
};

/// One operation. Child graphs are flattened: their nodes are inlined before the child node's command, which stays
/// (type GRAPH) as the join of the child's last nodes and does nothing when replayed; MEM_ALLOC / MEM_FREE / EMPTY
/// commands do nothing when replayed (their memory is the arena's); WAIT_EVENT / EVENT_RECORD commands do nothing
/// either: the core orders the whole launch after every waited event and records every recorded event after the
/// launch (graph/exec.hpp).
struct Command {
    rtGraphNodeType type = RT_GRAPH_NODE_TYPE_EMPTY;
    uint32_t node = 0;       ///< index of the node in the instantiated graph's flattening order (Program::labels)
    // KERNEL: what launch_impl takes; args as graph::KernelParams (values back to back at arg_offsets).
    std::shared_ptr<CoreFunction> function;
    backend::LaunchShape shape{};
    std::vector<unsigned char> args;
    std::vector<size_t> arg_offsets;
    std::vector<size_t> arg_sizes;
    // MEMCPY / MEMSET: resolved operands.
    void* dst = nullptr;
    const void* src = nullptr;
    size_t bytes = 0;
    backend::CopyKind kind = backend::CopyKind::device_to_device;
    uint8_t value = 0;
    bool elided = false;  ///< nothing to do (0 bytes, or a zero-copy copy onto itself): never queued
    // HOST
    rtHostFn_t fn = nullptr;
    void* user_data = nullptr;
    // WAIT_EVENT / EVENT_RECORD
    std::shared_ptr<Event> event;
    // COLLECTIVE: queued at each replay as the rank's next collective (comm::queue_collective)
    std::shared_ptr<const comm::Collective> collective;
    // MEM_ALLOC: planned place in the arena (and, relocated, its address in dst, for backends that lower allocations)
    uint64_t arena_offset = 0;
    size_t alloc_bytes = 0;
    // Edges: successors are Program::successors[first_successor .. first_successor + successor_count).
    uint32_t first_successor = 0;
    uint32_t successor_count = 0;
    uint32_t predecessor_count = 0;

    /// Pointers to each argument value (for launch_impl), written into `out` (arg_offsets.size() entries).
    void argument_pointers(void** out) const {
        for (size_t i = 0; i < arg_offsets.size(); ++i) out[i] = const_cast<unsigned char*>(args.data()) + arg_offsets[i];
    }
};

/// An allocation node's place in the arena (graph/memory_plan.hpp), and what instantiation knew of it: the
/// provisional range its graph handed out (operands given later, by rtGraphExec*SetParams, are resolved against it).
struct ArenaSlot {
    static constexpr uint32_t kNone = UINT32_MAX;
    uint32_t command = 0;              ///< the MEM_ALLOC command
    uint32_t free_command = kNone;     ///< the MEM_FREE command releasing it; kNone: it keeps its memory and contents from launch to launch
    uintptr_t provisional = 0;         ///< the allocation's address in its graph
    size_t bytes = 0;
    uint64_t offset = 0;               ///< where it lives in the arena
};

/// A named buffer of a program: the size it was named with, and where it is bound now (null: unbound, after a load).
struct ProgramName {
    std::string name;
    size_t bytes = 0;
    void* bound = nullptr;
    size_t bound_bytes = 0;
};

struct Program {
    CoreDevice* device = nullptr;
    std::vector<Command> commands;          ///< topological order: every command after its predecessors
    std::vector<uint32_t> successors;       ///< edge lists of the commands
    std::vector<uint32_t> roots;            ///< commands without predecessors
    std::vector<std::string> labels;        ///< per command: "node 3 (kernel 'scale')", for messages and DOT
    std::vector<uint64_t> node_handles;     ///< per command: the rtGraphNode_t it came from (0: inside a child)
    std::vector<Relocation> relocations;    ///< sorted by command
    std::vector<ProgramName> names;
    std::vector<std::shared_ptr<Event>> waits;    ///< events the launch waits for before it starts
    std::vector<std::shared_ptr<Event>> records;  ///< events recorded after the launch
    bool has_host_nodes = false;
    /// COLLECTIVE commands park the stream's queue until the peers arrive, which a backend's lowering (one queue
    /// operation per launch) cannot: such a program is replayed by the core, command by command.
    bool has_collectives = false;
    /// The instantiated graph's nodes in flattening order (each node, then the nodes of its child graph, if any):
    /// the command of each, and each one's dependencies as flattening indices (sorted; a child graph's first nodes
    /// depend on the child node's dependencies, the child node itself on the child graph's last nodes). What
    /// rtGraphExecUpdate compares a graph with, and what Reachability walks back along (a program built another
    /// way — a load — fills them too, or cannot be updated).
    std::vector<uint32_t> command_of_node;
    std::vector<uint32_t> node_parent;      ///< FlatGraph::Entry::parent of each node
    std::vector<uint32_t> node_dep_begin;   ///< node i's dependencies: node_deps[node_dep_begin[i] .. [i + 1])
    std::vector<uint32_t> node_deps;
    std::vector<ArenaSlot> slots;           ///< per allocation node, in command order
    /// The provisional addresses of the graph it was made from (null for a loaded program): a copy or fill operand
    /// given later that lies in it but in no slot is refused.
    std::shared_ptr<const ProvisionalSpace> provisional;
    // Memory plan (graph/memory_plan.hpp): the arena's size, and the sum of the allocation nodes' sizes.
    size_t arena_bytes = 0;
    size_t allocated_bytes = 0;
    size_t allocations = 0;
    /// The keepalives of the graph and of every child graph its nodes came from (each once): their releases wait for
    /// the program.
    std::vector<std::shared_ptr<Keepalive>> keepalives;

    /// Writes the resolved address of every relocation (arena base + offset, bound name + offset) into its field.
    /// Throws INVALID_VALUE naming the first unbound named buffer.
    void apply_relocations(void* arena_base);
    /// The same for the relocations of one command (relocations are sorted by command).
    void apply_relocations(void* arena_base, uint32_t command);
    /// The first named buffer not bound yet, or null.
    const ProgramName* unbound_name() const;
};

/// Builds the program of `graph`: checks it (no cycle: INVALID_VALUE naming a node on it), flattens child graphs,
/// orders topologically, plans the arena, records relocations of operands inside allocations and named buffers.
/// Every use of an allocation node's memory must run after that node and, when a free node releases it, before the
/// free node (INVALID_VALUE naming the node otherwise): the arena reuses memory on that promise.
std::shared_ptr<Program> instantiate(const Graph& graph);

// ---- shared by instantiate and the executable graph's updates (graph/exec.cpp)

struct Node;
class Reachability;

/// A graph with its child graphs inlined, in flattening order: each node, then (a child node) the nodes of its child
/// graph. A child graph's nodes without dependencies depend on the child node's dependencies; the child node itself
/// runs after the child graph's last nodes (those no other node of the child depends on).
struct FlatGraph {
    static constexpr uint32_t kTop = UINT32_MAX;
    struct Entry {
        const Node* node = nullptr;
        uint32_t parent = kTop;  ///< flattening index of the child node this one belongs to; kTop: the graph's own
        uint32_t local = 0;      ///< its index in its own graph
        uint32_t dep_begin = 0;  ///< dependencies: deps[dep_begin .. dep_begin + dep_count), sorted
        uint32_t dep_count = 0;
    };
    std::vector<Entry> nodes;
    std::vector<uint32_t> deps;
    /// node_label: "node 3 (kernel 'scale')"; a node of the child graph of node 2: "node 2.1 (...)".
    std::string label(uint32_t i) const;
};
/// Throws INVALID_VALUE if the graph has more nodes than a program can index.
FlatGraph flatten(const Graph& graph);

/// A command's parameters taken from its node (operands as the graph has them: provisional and named addresses).
void load_command(Command& command, const Node& node);
/// `label` ("node 3 (kernel 'scale')") with the same node number and `node`'s description (node_label).
std::string relabel(const std::string& label, const Node& node);

/// The address ranges operands are resolved against: allocation nodes' provisional ranges and named buffers.
class OperandMap {
public:
    /// The map of `program` as it is bound now: its slots' provisional ranges, its named buffers where bound.
    static OperandMap of(const Program& program);
    void add_allocation(uintptr_t base, size_t bytes, uint32_t slot, uint64_t arena_offset);
    void add_name(uintptr_t base, size_t bytes, uint32_t name);
    void finish();  ///< call once every range is added
    /// Appends to `out` the relocations of `command` (to be command number `index` of `program`, whose labels and
    /// slots name things in messages), and to `uses` a (index, slot) pair per allocation it touches. Refuses
    /// (INVALID_VALUE) a copy or fill range that starts inside an allocation or named buffer and leaves it, and, when
    /// `space` is given, a copy or fill operand inside `space` but in none of the allocations.
    void resolve(const Program& program, const Command& command, uint32_t index, const ProvisionalSpace* space,
                 std::vector<Relocation>& out, std::vector<std::pair<uint32_t, uint32_t>>& uses) const;

private:
    struct Range {
        uintptr_t base;
        size_t bytes;
        Symbol::Kind kind;
        uint32_t id;  // slot or name
        uint64_t arena_offset;
    };
    const Range* find(uintptr_t p) const;
    std::vector<Range> ranges_;  // sorted by base; they never overlap
};

/// Refuses (INVALID_VALUE naming both nodes) a use — (command, slot) — of an allocation's memory that does not run
/// after the allocation command, or, when a free command releases it, not before that free command.
void check_uses(const Program& program, std::vector<std::pair<uint32_t, uint32_t>> uses, Reachability& reach);

}  // namespace rt::graph
