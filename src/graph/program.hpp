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

namespace rt::graph {

class Graph;
class Keepalive;

/// Where an operand points, for the relocations: into the arena (an allocation node's memory) or into a named
/// buffer (rtGraphBindName), at `offset` bytes from its start.
struct Symbol {
    enum class Kind : uint8_t { arena, named };
    Kind kind = Kind::arena;
    uint32_t name = 0;  ///< named: index in Program::names
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

/// One operation. Child graphs are flattened; MEM_ALLOC / MEM_FREE / EMPTY commands do nothing when replayed (their
/// memory is the arena's); WAIT_EVENT / EVENT_RECORD commands do nothing either: the core orders the whole launch
/// after every waited event and records every recorded event after the launch (graph/exec.hpp).
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
    // HOST
    rtHostFn_t fn = nullptr;
    void* user_data = nullptr;
    // WAIT_EVENT / EVENT_RECORD
    std::shared_ptr<Event> event;
    // MEM_ALLOC: planned place in the arena
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
    std::vector<Relocation> relocations;
    std::vector<ProgramName> names;
    std::vector<std::shared_ptr<Event>> waits;    ///< events the launch waits for before it starts
    std::vector<std::shared_ptr<Event>> records;  ///< events recorded after the launch
    bool has_host_nodes = false;
    // Memory plan (graph/memory_plan.hpp): the arena's size, and the sum of the allocation nodes' sizes.
    size_t arena_bytes = 0;
    size_t allocated_bytes = 0;
    size_t allocations = 0;
    std::shared_ptr<Keepalive> keepalive;   ///< the graph's releases, alive as long as the program

    /// Writes the resolved address of every relocation (arena base + offset, bound name + offset) into its field.
    /// Throws INVALID_VALUE naming the first unbound named buffer.
    void apply_relocations(void* arena_base);
};

/// Builds the program of `graph`: checks it (no cycle: INVALID_VALUE naming a node on it), flattens child graphs,
/// orders topologically, plans the arena, records relocations of operands inside allocations and named buffers.
std::shared_ptr<Program> instantiate(const Graph& graph);

}  // namespace rt::graph
