// Saved executable graphs (rtGraphExecSave / rtGraphExecLoad): the file format, and a program's trip to and from it.
//
// A file is a 40-byte header and a body, little-endian throughout:
//
//   offset  0  magic "RTGRAPH\0" (8 bytes)
//           8  u32 format version (kFormatVersion)
//          12  u16 x3 version of the library that wrote it (major, minor, patch), u16 0
//          20  u32 0
//          24  u64 body bytes (the file is exactly 40 + this long)
//          32  u64 checksum: FNV-1a 64 over bytes 0..31 and then the body (detects damage, not tampering)
//          40  body
//
// The body (str = u32 length + bytes, blob = u64 length + bytes):
//   str backend (the kernel target's cache name: "cpu", "cuda"), str build identity (kernels::build_identity)
//   u32 modules, each: u8 has_source, str source, str options, str origin (the file an rtModuleLoadFile module came
//       from, for messages), blob binary (the built code for the build identity above; may be empty)
//   u32 names, each: str name, u64 bytes
//   u64 arena bytes
//   u32 commands (topological order), each: u32 type (rtGraphNodeType), u32 node (its flattening index), str label,
//       then by type
//         KERNEL: u32 module, str kernel, u32 grid[3], u32 block[3], u64 shared bytes, u64 global[3],
//                 u32 arguments, (u64 offset, u64 size) each, blob argument values (relocated words are 0)
//         MEMCPY: u8 kind (backend::CopyKind), u64 bytes        MEMSET: u8 value, u64 bytes
//         EMPTY, GRAPH (a child graph's own node), MEM_ALLOC, MEM_FREE: nothing
//   u32 nodes (as many as commands, in flattening order), each: u32 parent (the child-graph node it belongs to;
//       0xffffffff: none), u32 dependencies, u32 each (ascending): the edges, and what rtGraphExecUpdate compares
//   u32 slots (one per MEM_ALLOC command, in command order), each: u32 command, u32 free command (0xffffffff: none),
//       u64 bytes, u64 arena offset (the memory plan)
//   u32 relocations (by command), each: u32 command, u8 field (Relocation::Field), u32 argument offset, u8 symbol
//       kind (Symbol::Kind), u32 name or slot, u64 offset (in the named buffer, or in the arena)
//
// Reading checks every length and count against the bytes left, every index against its table, that the nodes'
// dependencies go from earlier commands to later ones, every operand's extent against its allocation or named
// buffer, that copies and fills reach memory only through relocations (a file that passes holds no address of the
// process that wrote it), and that every use of an allocation runs between its allocation and free commands. The
// memory plan is taken as saved (overlapping allocations would only race inside the arena: a damaged file is caught
// by the checksum, and a loaded graph's kernels are trusted as code anyway, as an rtModuleLoadFile module is).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graph/program.hpp"

namespace rt {
class CoreDevice;
}

namespace rt::graph::file {

constexpr char kMagic[8] = {'R', 'T', 'G', 'R', 'A', 'P', 'H', '\0'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 40;

/// The checksum of a file: FNV-1a 64 over its first 32 bytes and its body (`file` holds at least the header).
uint64_t checksum(std::string_view file);

/// A kernel module as the file holds it.
struct SavedModule {
    bool has_source = false;
    std::string source, options;
    std::string origin;  ///< the rtModuleLoadFile path it came from ("" for source)
    std::string binary;  ///< built code for SavedGraph::identity; empty when none was saved
};

/// A command as the file holds it (the fields its type uses).
struct SavedCommand {
    rtGraphNodeType type = RT_GRAPH_NODE_TYPE_EMPTY;
    uint32_t node = 0;
    std::string label;
    uint32_t module = 0;  // KERNEL
    std::string kernel;
    backend::LaunchShape shape{};
    std::vector<uint64_t> arg_offsets, arg_sizes;
    std::string args;
    uint8_t kind = 0;    // MEMCPY: backend::CopyKind
    uint8_t value = 0;   // MEMSET
    uint64_t bytes = 0;  // MEMCPY, MEMSET
};

/// A node of the flattened graph: the child-graph node it belongs to (kNoParent: none) and its dependencies.
struct SavedNode {
    static constexpr uint32_t kNoParent = UINT32_MAX;
    uint32_t parent = kNoParent;
    std::vector<uint32_t> deps;
};

struct SavedGraph {
    std::string backend, identity;
    std::vector<SavedModule> modules;
    std::vector<std::pair<std::string, uint64_t>> names;
    uint64_t arena_bytes = 0;
    std::vector<SavedCommand> commands;
    std::vector<SavedNode> nodes;
    std::vector<ArenaSlot> slots;  ///< provisional unused (0)
    std::vector<Relocation> relocations;
};

/// The file's bytes: header and body.
std::string encode(const SavedGraph& graph);
/// Parses and checks a file's bytes (see above). Anything wrong: rt::Error(INVALID_VALUE) saying what and where,
/// prefixed with `what` (e.g. "'graph.rtg'").
SavedGraph decode(std::string_view bytes, const std::string& what);

/// rtGraphExecSave: `program` (held by the caller; not changed) written to `path` atomically (a complete file or
/// none). Operands that point anywhere but into the arena or a named buffer, host nodes and event nodes:
/// NOT_SUPPORTED naming the node (and the pointer); a file that cannot be written: INVALID_VALUE naming it.
void save(const Program& program, const std::string& path);

/// rtGraphExecLoad's program: the file at `path` read, checked and made ready for `device` — each module from its
/// saved code when the build identity is this device's target's (or cannot be known here and the code loads),
/// else rebuilt from its source; every kernel launch validated for `device`. Named buffers are unbound.
std::shared_ptr<Program> load(const std::string& path, CoreDevice& device);

}  // namespace rt::graph::file
