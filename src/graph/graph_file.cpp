// Saved executable graphs: encoding and checked decoding of the file format (graph_file.hpp), saving a program with
// its kernels' source and code, loading one back with its kernels loaded or rebuilt for the current device.
#include "graph/graph_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <unordered_map>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/module.hpp"
#include "core/runtime.hpp"
#include "graph/graph.hpp"
#include "graph/memory_plan.hpp"
#include "graph/node_params.hpp"
#include "kernels/dialect.hpp"
#include "kernels/disk_cache.hpp"
#include "kernels/target.hpp"

namespace rt::graph::file {

namespace {

// Bounds of single fields (the bytes left bound every count and length besides).
constexpr size_t kMaxShortText = 4096;  // backend, kernel names, labels, options
constexpr size_t kMaxArgBytes = 1 << 20;
constexpr size_t kMaxNameLength = 63;   // rtGraphBindName's

std::string errno_text() { return std::strerror(errno); }

bool valid_name(const std::string& name) {
    if (name.empty() || name.size() > kMaxNameLength) return false;
    for (char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return false;
    return true;
}

const char* kind_name(backend::CopyKind k) {
    switch (k) {
        case backend::CopyKind::host_to_host: return "host-to-host";
        case backend::CopyKind::host_to_device: return "host-to-device";
        case backend::CopyKind::device_to_host: return "device-to-host";
        case backend::CopyKind::device_to_device: return "device-to-device";
    }
    return "?";
}
bool kind_device_dst(backend::CopyKind k) {
    return k == backend::CopyKind::host_to_device || k == backend::CopyKind::device_to_device;
}
bool kind_device_src(backend::CopyKind k) {
    return k == backend::CopyKind::device_to_host || k == backend::CopyKind::device_to_device;
}
const char* field_name(Relocation::Field f) {
    switch (f) {
        case Relocation::Field::dst: return "destination";
        case Relocation::Field::src: return "source";
        case Relocation::Field::arg: return "argument";
    }
    return "?";
}

// ---------------------------------------------------------------- encoding

class Writer {
public:
    void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
    void u16(uint16_t v) { le(v, 2); }
    void u32(uint32_t v) { le(v, 4); }
    void u64(uint64_t v) { le(v, 8); }
    void str(const std::string& s);  // after count32
    void blob(const std::string& s) {
        u64(s.size());
        out_ += s;
    }
    std::string& bytes() { return out_; }

private:
    void le(uint64_t v, int n) {
        for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
    std::string out_;
};

uint32_t count32(size_t n, const char* what) {
    if (n > UINT32_MAX) fail(RT_ERROR_NOT_SUPPORTED, "the graph has %zu %s, more than a saved graph holds", n, what);
    return static_cast<uint32_t>(n);
}

void Writer::str(const std::string& s) {
    u32(count32(s.size(), "bytes in one text"));
    out_ += s;
}

// ---------------------------------------------------------------- decoding

/// Reads the body; every read is bounds-checked, every failure names the file, the field and where it is.
class Reader {
public:
    Reader(std::string_view body, const std::string& what) : p_(body), what_(what) {}

    [[noreturn]] void bad(const std::string& why) const {
        fail(RT_ERROR_INVALID_VALUE, "%s is corrupted: %s", what_.c_str(), why.c_str());
    }
    size_t left() const { return p_.size() - at_; }
    size_t at() const { return at_; }

    uint8_t u8(const char* field) { return static_cast<uint8_t>(le(1, field)); }
    uint32_t u32(const char* field) { return static_cast<uint32_t>(le(4, field)); }
    uint64_t u64(const char* field) { return le(8, field); }
    /// A count of elements that take at least `min_bytes` each: no more than the bytes left could hold.
    uint32_t count(const char* field, size_t min_bytes) {
        const size_t where = at_;
        uint32_t n = u32(field);
        if (min_bytes > 0 && n > left() / min_bytes)
            bad(format("%s = %u at byte %zu cannot be: the %zu bytes left hold at most %zu", field, n, where, left(),
                       left() / min_bytes));
        return n;
    }
    std::string str(const char* field, size_t max) { return take(u32(field), max, field); }
    std::string blob(const char* field, size_t max) { return take(u64(field), max, field); }

private:
    uint64_t le(int n, const char* field) {
        need(static_cast<size_t>(n), field);
        uint64_t v = 0;
        for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p_[at_ + i])) << (8 * i);
        at_ += static_cast<size_t>(n);
        return v;
    }
    void need(size_t n, const char* field) const {
        if (n > left()) bad(format("%s at byte %zu needs %zu bytes, %zu are left", field, at_, n, left()));
    }
    std::string take(uint64_t n, size_t max, const char* field) {
        if (n > max) bad(format("%s at byte %zu is %llu bytes long, more than %zu", field, at_,
                                static_cast<unsigned long long>(n), max));
        need(static_cast<size_t>(n), field);
        std::string s(p_.substr(at_, static_cast<size_t>(n)));
        at_ += static_cast<size_t>(n);
        return s;
    }

    std::string_view p_;
    size_t at_ = 0;
    const std::string& what_;
};

bool is_saved_type(uint32_t t) {
    return t == RT_GRAPH_NODE_TYPE_KERNEL || t == RT_GRAPH_NODE_TYPE_MEMCPY || t == RT_GRAPH_NODE_TYPE_MEMSET ||
           t == RT_GRAPH_NODE_TYPE_EMPTY || t == RT_GRAPH_NODE_TYPE_GRAPH || t == RT_GRAPH_NODE_TYPE_MEM_ALLOC ||
           t == RT_GRAPH_NODE_TYPE_MEM_FREE;
}

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

uint16_t rd16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t rd32(const unsigned char* p) { return rd16(p) | static_cast<uint32_t>(rd16(p + 2)) << 16; }
uint64_t rd64(const unsigned char* p) { return rd32(p) | static_cast<uint64_t>(rd32(p + 4)) << 32; }

}  // namespace

uint64_t checksum(std::string_view file) {
    uint64_t h = 0xcbf29ce484222325ull;
    auto add = [&](std::string_view part) {
        for (char c : part) {
            h ^= static_cast<uint8_t>(c);
            h *= 0x100000001b3ull;
        }
    };
    add(file.substr(0, 32));
    add(file.substr(kHeaderBytes));
    return h;
}

std::string encode(const SavedGraph& g) {
    Writer w;
    w.str(g.backend);
    w.str(g.identity);
    w.u32(count32(g.modules.size(), "kernel modules"));
    for (const SavedModule& m : g.modules) {
        w.u8(m.has_source ? 1 : 0);
        w.str(m.source);
        w.str(m.options);
        w.str(m.origin);
        w.blob(m.binary);
    }
    w.u32(count32(g.names.size(), "named buffers"));
    for (const auto& [name, bytes] : g.names) {
        w.str(name);
        w.u64(bytes);
    }
    w.u64(g.arena_bytes);
    w.u32(count32(g.commands.size(), "nodes"));
    for (const SavedCommand& c : g.commands) {
        w.u32(static_cast<uint32_t>(c.type));
        w.u32(c.node);
        w.str(c.label);
        switch (c.type) {
            case RT_GRAPH_NODE_TYPE_KERNEL:
                w.u32(c.module);
                w.str(c.kernel);
                for (unsigned v : c.shape.grid) w.u32(v);
                for (unsigned v : c.shape.block) w.u32(v);
                w.u64(c.shape.shared_bytes);
                for (unsigned long long v : c.shape.global) w.u64(v);
                w.u32(count32(c.arg_sizes.size(), "kernel arguments"));
                for (size_t i = 0; i < c.arg_sizes.size(); ++i) {
                    w.u64(c.arg_offsets[i]);
                    w.u64(c.arg_sizes[i]);
                }
                w.blob(c.args);
                break;
            case RT_GRAPH_NODE_TYPE_MEMCPY:
                w.u8(c.kind);
                w.u64(c.bytes);
                break;
            case RT_GRAPH_NODE_TYPE_MEMSET:
                w.u8(c.value);
                w.u64(c.bytes);
                break;
            default:
                break;
        }
    }
    w.u32(count32(g.nodes.size(), "nodes"));
    for (const SavedNode& n : g.nodes) {
        w.u32(n.parent);
        w.u32(count32(n.deps.size(), "dependencies"));
        for (uint32_t d : n.deps) w.u32(d);
    }
    w.u32(count32(g.slots.size(), "allocations"));
    for (const ArenaSlot& s : g.slots) {
        w.u32(s.command);
        w.u32(s.free_command);
        w.u64(s.bytes);
        w.u64(s.offset);
    }
    w.u32(count32(g.relocations.size(), "relocations"));
    for (const Relocation& r : g.relocations) {
        w.u32(r.command);
        w.u8(static_cast<uint8_t>(r.field));
        w.u32(r.arg_offset);
        w.u8(static_cast<uint8_t>(r.symbol.kind));
        w.u32(r.symbol.name);
        w.u64(r.symbol.offset);
    }
    const std::string& body = w.bytes();

    Writer h;
    h.bytes().append(kMagic, sizeof kMagic);
    h.u32(kFormatVersion);
    h.u16(RUNTIME_VERSION_MAJOR);
    h.u16(RUNTIME_VERSION_MINOR);
    h.u16(RUNTIME_VERSION_PATCH);
    h.u16(0);
    h.u32(0);
    h.u64(body.size());
    h.u64(0);
    std::string file = h.bytes() + body;
    const uint64_t sum = checksum(file);
    for (int i = 0; i < 8; ++i) file[32 + i] = static_cast<char>((sum >> (8 * i)) & 0xff);
    return file;
}

SavedGraph decode(std::string_view bytes, const std::string& what) {
    const char* w = what.c_str();
    const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
    // The header: is it ours, which version, is it whole, is it intact — in that order, so each message is the apt one.
    if (bytes.empty()) fail(RT_ERROR_INVALID_VALUE, "%s is empty: not a saved graph (rtGraphExecSave)", w);
    const size_t magic_seen = std::min(bytes.size(), sizeof kMagic);
    if (std::memcmp(bytes.data(), kMagic, magic_seen) != 0) {
        std::string seen;
        for (size_t i = 0; i < magic_seen; ++i) seen += format("%s%02x", i ? " " : "", u[i]);
        fail(RT_ERROR_INVALID_VALUE,
             "%s is not a saved graph (rtGraphExecSave): it starts with the bytes [%s], not the magic \"RTGRAPH\"",
             w, seen.c_str());
    }
    if (bytes.size() < kHeaderBytes)
        fail(RT_ERROR_INVALID_VALUE, "%s is truncated: %zu bytes, fewer than the %zu of a saved graph's header", w,
             bytes.size(), kHeaderBytes);
    const uint32_t version = rd32(u + 8);
    if (version != kFormatVersion)
        fail(RT_ERROR_INVALID_VALUE,
             "%s was written in saved-graph format version %u (by runtime %u.%u.%u); this library (runtime %d.%d.%d) "
             "reads format version %u only: save the graph again with this library", w, version, rd16(u + 12),
             rd16(u + 14), rd16(u + 16), RUNTIME_VERSION_MAJOR, RUNTIME_VERSION_MINOR, RUNTIME_VERSION_PATCH,
             kFormatVersion);
    if (rd16(u + 18) != 0 || rd32(u + 20) != 0)
        fail(RT_ERROR_INVALID_VALUE, "%s is corrupted: its reserved header bytes 18..23 are not 0", w);
    const uint64_t body_bytes = rd64(u + 24);
    const size_t have = bytes.size() - kHeaderBytes;
    if (body_bytes > have)
        fail(RT_ERROR_INVALID_VALUE, "%s is truncated: its header announces %llu bytes after it, the file has %zu", w,
             static_cast<unsigned long long>(body_bytes), have);
    if (body_bytes < have)
        fail(RT_ERROR_INVALID_VALUE,
             "%s is corrupted: its header announces %llu bytes after it, but the file has %zu (bytes appended, or a "
             "damaged header)", w, static_cast<unsigned long long>(body_bytes), have);
    const uint64_t sum = checksum(bytes);
    if (sum != rd64(u + 32))
        fail(RT_ERROR_INVALID_VALUE, "%s is corrupted: its checksum is %016llx, its header says %016llx", w,
             static_cast<unsigned long long>(sum), static_cast<unsigned long long>(rd64(u + 32)));

    Reader r(bytes.substr(kHeaderBytes), what);
    SavedGraph g;
    g.backend = r.str("the backend", kMaxShortText);
    g.identity = r.str("the build identity", r.left());
    const uint32_t modules = r.count("the module count", 1 + 4 * 3 + 8);
    g.modules.resize(modules);
    for (uint32_t i = 0; i < modules; ++i) {
        SavedModule& m = g.modules[i];
        const uint8_t has_source = r.u8("a module's source flag");
        if (has_source > 1) r.bad(format("module %u: source flag %u (expected 0 or 1)", i, has_source));
        m.has_source = has_source == 1;
        m.source = r.str("a module's source", r.left());
        m.options = r.str("a module's options", kMaxShortText);
        m.origin = r.str("a module's origin", kMaxShortText);
        m.binary = r.blob("a module's code", r.left());
        if (!m.has_source && (!m.source.empty() || !m.options.empty()))
            r.bad(format("module %u has no source but %zu bytes of source text and %zu of options", i,
                         m.source.size(), m.options.size()));
        if (m.has_source && m.source.empty()) r.bad(format("module %u has an empty source", i));
        if (!m.has_source && m.binary.empty()) r.bad(format("module %u has neither source nor code", i));
    }
    const uint32_t names = r.count("the named buffer count", 4 + 1 + 8);
    g.names.resize(names);
    std::unordered_map<std::string, uint32_t> name_index;  // duplicates found in linear time, whatever the count
    for (uint32_t i = 0; i < names; ++i) {
        g.names[i].first = r.str("a buffer name", kMaxNameLength);
        g.names[i].second = r.u64("a buffer size");
        if (!valid_name(g.names[i].first))
            r.bad(format("named buffer %u: '%s' is not a name (1..63 characters of [A-Za-z0-9_.-])", i,
                         g.names[i].first.c_str()));
        if (g.names[i].second == 0) r.bad(format("named buffer '%s' has 0 bytes", g.names[i].first.c_str()));
        if (auto [it, fresh] = name_index.emplace(g.names[i].first, i); !fresh)
            r.bad(format("the buffer name '%s' appears twice (%u and %u)", g.names[i].first.c_str(), it->second, i));
    }
    g.arena_bytes = r.u64("the arena size");

    const uint32_t commands = r.count("the command count", 4 + 4 + 4);
    g.commands.resize(commands);
    std::vector<uint32_t> command_of_node(commands, UINT32_MAX);
    auto where = [&](uint32_t i) {
        const SavedCommand& c = g.commands[i];
        return format("command %u (%s: '%s')", i, node_type_name(c.type), c.label.c_str());
    };
    for (uint32_t i = 0; i < commands; ++i) {
        SavedCommand& c = g.commands[i];
        const uint32_t type = r.u32("a command's type");
        if (!is_saved_type(type))
            r.bad(format("command %u of %u has type %u, which no saved graph holds (kernel, memcpy, memset, empty, "
                         "child graph, alloc and free nodes only)", i, commands, type));
        c.type = static_cast<rtGraphNodeType>(type);
        c.node = r.u32("a command's node");
        if (c.node >= commands || command_of_node[c.node] != UINT32_MAX)
            r.bad(format("command %u is node %u, which is %s", i, c.node,
                         c.node >= commands ? "not a node of the graph" : "another command's already"));
        command_of_node[c.node] = i;
        c.label = r.str("a command's label", kMaxShortText);
        if (has_nul(c.label)) r.bad(format("command %u: its label holds a NUL byte", i));
        switch (c.type) {
            case RT_GRAPH_NODE_TYPE_KERNEL: {
                c.module = r.u32("a kernel's module");
                if (c.module >= modules)
                    r.bad(format("%s: module %u, but the file has %u modules", where(i).c_str(), c.module, modules));
                c.kernel = r.str("a kernel's name", kMaxShortText);
                if (c.kernel.empty() || has_nul(c.kernel))
                    r.bad(format("%s: the kernel's name is empty or holds a NUL byte", where(i).c_str()));
                for (unsigned& v : c.shape.grid) v = r.u32("a grid size");
                for (unsigned& v : c.shape.block) v = r.u32("a block size");
                c.shape.shared_bytes = static_cast<size_t>(r.u64("a kernel's shared bytes"));
                for (unsigned long long& v : c.shape.global) v = r.u64("a global size");
                const uint32_t n = r.count("a kernel's argument count", 16);
                c.arg_offsets.resize(n);
                c.arg_sizes.resize(n);
                for (uint32_t a = 0; a < n; ++a) {
                    c.arg_offsets[a] = r.u64("an argument's offset");
                    c.arg_sizes[a] = r.u64("an argument's size");
                }
                c.args = r.blob("a kernel's argument values", kMaxArgBytes);
                uint64_t end = 0;
                for (uint32_t a = 0; a < n; ++a) {
                    const uint64_t o = c.arg_offsets[a], s = c.arg_sizes[a];
                    // Aligned as graph nodes lay them out (node_params.hpp): address words where relocations
                    // look, and no misaligned reads of a value by a backend.
                    const uint64_t align = s >= 16 ? 16 : 8;
                    if (s == 0 || o % align != 0 || o < end || o > c.args.size() || s > c.args.size() - o)
                        r.bad(format("%s: argument %u at bytes %llu..+%llu is not aligned after argument %u inside "
                                     "the %zu bytes of values", where(i).c_str(), a, static_cast<unsigned long long>(o),
                                     static_cast<unsigned long long>(s), a ? a - 1 : 0, c.args.size()));
                    end = o + s;
                }
                break;
            }
            case RT_GRAPH_NODE_TYPE_MEMCPY:
                c.kind = r.u8("a copy's kind");
                if (c.kind > static_cast<uint8_t>(backend::CopyKind::device_to_device))
                    r.bad(format("%s: copy kind %u (expected 0..3)", where(i).c_str(), c.kind));
                c.bytes = r.u64("a copy's size");
                break;
            case RT_GRAPH_NODE_TYPE_MEMSET:
                c.value = r.u8("a fill's value");
                c.bytes = r.u64("a fill's size");
                break;
            default:
                break;
        }
    }

    // The nodes: a child graph's nodes after their child node, dependencies on nodes whose commands come earlier
    // (so the commands' order is topological and the graph has no cycle).
    const uint32_t nodes = r.count("the node count", 8);
    if (nodes != commands) r.bad(format("%u nodes for %u commands (expected one each)", nodes, commands));
    g.nodes.resize(nodes);
    for (uint32_t i = 0; i < nodes; ++i) {
        SavedNode& n = g.nodes[i];
        const uint32_t c = command_of_node[i];
        n.parent = r.u32("a node's parent");
        if (n.parent != SavedNode::kNoParent &&
            (n.parent >= i || g.commands[command_of_node[n.parent]].type != RT_GRAPH_NODE_TYPE_GRAPH))
            r.bad(format("node %u (%s) belongs to node %u, which is not an earlier child-graph node", i,
                         where(c).c_str(), n.parent));
        const uint32_t deps = r.count("a node's dependency count", 4);
        n.deps.resize(deps);
        uint32_t prev = 0;
        for (uint32_t k = 0; k < deps; ++k) {
            const uint32_t d = r.u32("a dependency");
            if (d >= nodes || (k > 0 && d <= prev) || command_of_node[d] >= c)
                r.bad(format("node %u (%s): dependency %u is not a node whose command comes earlier, in ascending "
                             "order", i, where(c).c_str(), d));
            n.deps[k] = prev = d;
        }
    }

    // The memory plan: a slot per allocation command, in command order, inside the arena, freed by a free command.
    const uint32_t slots = r.count("the allocation count", 4 + 4 + 8 + 8);
    g.slots.resize(slots);
    std::vector<uint32_t> freed_by(commands, UINT32_MAX);  // free command -> slot
    uint32_t next_alloc = 0;
    for (uint32_t s = 0; s < slots; ++s) {
        ArenaSlot& x = g.slots[s];
        x.command = r.u32("an allocation's command");
        x.free_command = r.u32("an allocation's free command");
        x.bytes = static_cast<size_t>(r.u64("an allocation's size"));
        x.offset = r.u64("an allocation's arena offset");
        while (next_alloc < commands && g.commands[next_alloc].type != RT_GRAPH_NODE_TYPE_MEM_ALLOC) ++next_alloc;
        if (next_alloc == commands)
            r.bad(format("allocation %u (of command %u) is one more than the graph's %u alloc commands", s, x.command,
                         s));
        if (x.command != next_alloc)
            r.bad(format("allocation %u is of command %u, expected the next alloc command (%u)", s, x.command,
                         next_alloc));
        ++next_alloc;
        if (x.bytes == 0 || x.offset > g.arena_bytes || x.bytes > g.arena_bytes - x.offset)
            r.bad(format("%s: %zu bytes at arena offset %llu do not fit the arena of %llu bytes",
                         where(x.command).c_str(), x.bytes, static_cast<unsigned long long>(x.offset),
                         static_cast<unsigned long long>(g.arena_bytes)));
        if (x.free_command != ArenaSlot::kNone) {
            if (x.free_command >= commands || g.commands[x.free_command].type != RT_GRAPH_NODE_TYPE_MEM_FREE ||
                freed_by[x.free_command] != UINT32_MAX)
                r.bad(format("%s: freed by command %u, which is not a free command of its own", where(x.command).c_str(),
                             x.free_command));
            freed_by[x.free_command] = s;
        }
    }
    while (next_alloc < commands && g.commands[next_alloc].type != RT_GRAPH_NODE_TYPE_MEM_ALLOC) ++next_alloc;
    if (next_alloc < commands) r.bad(format("%s has no place in the memory plan", where(next_alloc).c_str()));
    for (uint32_t c = 0; c < commands; ++c)
        if (g.commands[c].type == RT_GRAPH_NODE_TYPE_MEM_FREE && freed_by[c] == UINT32_MAX)
            r.bad(format("%s frees no allocation", where(c).c_str()));

    const uint32_t relocations = r.count("the relocation count", 4 + 1 + 4 + 1 + 4 + 8);
    g.relocations.resize(relocations);
    // Per command: which operands a relocation resolves (dst, src; kernel words are checked for duplicates below).
    std::vector<uint8_t> resolved(commands, 0);
    std::vector<std::pair<uint32_t, uint32_t>> words;  // (command, argument offset) of kernel relocations
    for (uint32_t i = 0; i < relocations; ++i) {
        Relocation& x = g.relocations[i];
        x.command = r.u32("a relocation's command");
        const uint8_t field = r.u8("a relocation's field");
        x.arg_offset = r.u32("a relocation's argument offset");
        const uint8_t kind = r.u8("a relocation's symbol kind");
        x.symbol.name = r.u32("a relocation's buffer");
        x.symbol.offset = r.u64("a relocation's offset");
        if (x.command >= commands)
            r.bad(format("relocation %u is of command %u, but the graph has %u", i, x.command, commands));
        if (i > 0 && x.command < g.relocations[i - 1].command)
            r.bad(format("relocation %u (of command %u) comes after one of command %u (expected by command)", i,
                         x.command, g.relocations[i - 1].command));
        if (field > static_cast<uint8_t>(Relocation::Field::arg))
            r.bad(format("relocation %u: field %u (expected 0..2)", i, field));
        if (kind > static_cast<uint8_t>(Symbol::Kind::named))
            r.bad(format("relocation %u: symbol kind %u (expected 0 or 1)", i, kind));
        x.field = static_cast<Relocation::Field>(field);
        x.symbol.kind = static_cast<Symbol::Kind>(kind);
        const SavedCommand& c = g.commands[x.command];
        const std::string at = format("relocation %u (the %s of %s)", i, field_name(x.field), where(x.command).c_str());
        // The range the operand may reach: its allocation in the arena, or its named buffer.
        uint64_t begin = 0, end = 0;
        std::string space;
        if (x.symbol.kind == Symbol::Kind::named) {
            if (x.symbol.name >= names)
                r.bad(format("%s: named buffer %u, but the file has %u", at.c_str(), x.symbol.name, names));
            end = g.names[x.symbol.name].second;
            space = "named buffer '" + g.names[x.symbol.name].first + "'";
        } else {
            if (x.symbol.name >= slots)
                r.bad(format("%s: allocation %u, but the file has %u", at.c_str(), x.symbol.name, slots));
            const ArenaSlot& s = g.slots[x.symbol.name];
            begin = s.offset;
            end = s.offset + s.bytes;
            space = "the memory of " + where(s.command);
        }
        const uint64_t o = x.symbol.offset;
        if (x.field == Relocation::Field::arg) {
            if (c.type != RT_GRAPH_NODE_TYPE_KERNEL) r.bad(format("%s: not a kernel", at.c_str()));
            if (x.arg_offset % 8 != 0 || x.arg_offset > c.args.size() || c.args.size() - x.arg_offset < 8)
                r.bad(format("%s: offset %u is not an aligned 8-byte word of the %zu bytes of argument values",
                             at.c_str(), x.arg_offset, c.args.size()));
            if (o < begin || o > end)  // an address one past the end is a kernel's "end" argument
                r.bad(format("%s: offset %llu is outside %s (%llu..%llu)", at.c_str(),
                             static_cast<unsigned long long>(o), space.c_str(), static_cast<unsigned long long>(begin),
                             static_cast<unsigned long long>(end)));
            words.emplace_back(x.command, x.arg_offset);
            continue;
        }
        if (x.arg_offset != 0) r.bad(format("%s: argument offset %u (expected 0)", at.c_str(), x.arg_offset));
        if (c.type == RT_GRAPH_NODE_TYPE_MEM_ALLOC) {  // its own place in the arena (for backends that lower it)
            if (x.field != Relocation::Field::dst || x.symbol.kind != Symbol::Kind::arena ||
                g.slots[x.symbol.name].command != x.command || o != begin)
                r.bad(format("%s: an alloc command's relocation names its own allocation's start", at.c_str()));
        } else {
            const bool copy = c.type == RT_GRAPH_NODE_TYPE_MEMCPY;
            if (!(copy || (c.type == RT_GRAPH_NODE_TYPE_MEMSET && x.field == Relocation::Field::dst)))
                r.bad(format("%s: that command has no such operand", at.c_str()));
            if (o < begin || o > end || c.bytes > end - o)
                r.bad(format("%s: %llu bytes at offset %llu do not fit %s (%llu..%llu)", at.c_str(),
                             static_cast<unsigned long long>(c.bytes), static_cast<unsigned long long>(o),
                             space.c_str(), static_cast<unsigned long long>(begin),
                             static_cast<unsigned long long>(end)));
            if (copy && x.symbol.kind == Symbol::Kind::arena) {
                const auto k = static_cast<backend::CopyKind>(c.kind);
                const bool device_side = x.field == Relocation::Field::dst ? kind_device_dst(k) : kind_device_src(k);
                if (!device_side)
                    r.bad(format("%s: a %s copy takes host memory there, but the arena is device memory", at.c_str(),
                                 kind_name(k)));
            }
        }
        const uint8_t bit = x.field == Relocation::Field::dst ? 1 : 2;
        if (resolved[x.command] & bit) r.bad(format("%s: the operand has two relocations", at.c_str()));
        resolved[x.command] |= bit;
    }
    std::sort(words.begin(), words.end());
    if (auto d = std::adjacent_find(words.begin(), words.end()); d != words.end())
        r.bad(format("%s: the argument word at offset %u has two relocations", where(d->first).c_str(), d->second));
    for (uint32_t i = 0; i < commands; ++i) {
        // Copies and fills of 0 bytes do nothing and have no operands to resolve.
        const SavedCommand& c = g.commands[i];
        const uint8_t want = c.bytes == 0                          ? 0
                             : c.type == RT_GRAPH_NODE_TYPE_MEMCPY ? 3
                             : c.type == RT_GRAPH_NODE_TYPE_MEMSET ? 1
                                                                   : 0;
        if ((resolved[i] & want) != want)
            r.bad(format("%s has no relocation for its %s: a saved graph reaches memory only through its arena and "
                         "named buffers", where(i).c_str(), (resolved[i] & 1) ? "source" : "destination"));
    }
    if (r.left() != 0)
        r.bad(format("%zu bytes follow the last relocation (the graph ends at byte %zu of %zu after the header)",
                     r.left(), r.at(), bytes.size() - kHeaderBytes));
    return g;
}

// ---------------------------------------------------------------- save

namespace {

/// "device memory of cpu:0 (inside an allocation of 4096 bytes at 0x...)", or what else the registry knows of `p`.
std::string describe_pointer(const void* p) {
    const PointerInfo info = runtime().registry.lookup(p);
    if (!info.allocation) return "memory unknown to the runtime (host memory of this process)";
    const Allocation& a = *info.allocation;
    const char* what = a.module_global                            ? "a module global (RT_GLOBAL) of"
                       : a.kind == MemoryKind::device             ? "device memory of"
                       : a.kind == MemoryKind::pinned_host        ? "pinned host memory (rtMallocHost) of"
                                                                  : "registered host memory (rtHostRegister) of";
    return format("%s %s (inside an allocation of %zu bytes at %p)", what, a.device ? a.device->label().c_str() : "?",
                  a.size, reinterpret_cast<void*>(a.base));
}

std::string read_file(const std::string& path, const char* role) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(RT_ERROR_INVALID_VALUE, "cannot open %s '%s': %s", role, path.c_str(), errno_text().c_str());
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(RT_ERROR_INVALID_VALUE, "%s '%s' is not a regular file", role, path.c_str());
    }
    std::string data;
    try {
        data.resize(static_cast<size_t>(st.st_size));
    } catch (...) {
        ::close(fd);
        throw;
    }
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::read(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            std::string why = errno_text();
            ::close(fd);
            fail(RT_ERROR_INVALID_VALUE, "cannot read %s '%s': %s", role, path.c_str(), why.c_str());
        }
        if (n == 0) break;  // shrank while read: what is there is checked like any other content
        done += static_cast<size_t>(n);
    }
    ::close(fd);
    data.resize(done);
    return data;
}

/// Writes `data` to `path` through a temporary name in its directory and rename(2): readers see the old file or the
/// new complete one.
void write_file_atomically(const std::string& path, const std::string& data) {
    static std::atomic<unsigned> counter{0};
    const std::string temp = format("%s.tmp.%ld.%u", path.c_str(), static_cast<long>(::getpid()), counter++);
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) fail(RT_ERROR_INVALID_VALUE, "cannot write '%s': %s", path.c_str(), errno_text().c_str());
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            std::string why = n < 0 ? errno_text() : "no space written";
            ::close(fd);
            ::unlink(temp.c_str());
            fail(RT_ERROR_INVALID_VALUE, "cannot write '%s': %s", path.c_str(), why.c_str());
        }
        done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0 || ::rename(temp.c_str(), path.c_str()) != 0) {
        std::string why = errno_text();
        ::unlink(temp.c_str());
        fail(RT_ERROR_INVALID_VALUE, "cannot write '%s': %s", path.c_str(), why.c_str());
    }
}

/// The module record of `origin`: its source and options, and the code built for `target` (from the disk cache, or
/// built now); a module without source, its file's code. `user` names a node that uses it, for messages.
SavedModule save_module(kernels::Target& target, const ModuleOrigin& origin, const std::string& user) {
    SavedModule m;
    if (origin.has_source) {
        m.has_source = true;
        m.source = origin.source;
        m.options = origin.options;
        // The same program ModuleCache::load_source compiled: normally a disk cache hit.
        const kernels::Image image = kernels::compile(target, kernels::read_program(origin.source, origin.options));
        std::string why;
        if (!kcache::read_bytes(image.path, m.binary, why))
            fail(RT_ERROR_INVALID_VALUE, "%s: cannot read its module's built code '%s': %s", user.c_str(),
                 image.path.c_str(), why.c_str());
        return m;
    }
    m.origin = origin.path;
    if (!origin.binary.empty()) {
        m.binary = origin.binary;
        return m;
    }
    try {
        m.binary = read_file(origin.path, "the module file");
    } catch (const Error& e) {
        fail(RT_ERROR_NOT_SUPPORTED,
             "%s: its kernel comes from a module loaded by rtModuleLoadFile, which a saved graph holds as that file's "
             "code only (no source to rebuild it from), and %s", user.c_str(), e.what());
    }
    if (m.binary.empty())
        fail(RT_ERROR_NOT_SUPPORTED, "%s: its kernel's module file '%s' is empty now", user.c_str(),
             origin.path.c_str());
    return m;
}

}  // namespace

void save(const Program& p, const std::string& path) {
    kernels::Target& target = p.device->impl().kernel_target();
    SavedGraph g;
    g.backend = target.cache_name();
    g.identity = kernels::build_identity(target);
    for (const ProgramName& n : p.names) g.names.emplace_back(n.name, n.bytes);
    g.arena_bytes = p.arena_bytes;
    g.relocations = p.relocations;
    g.slots = p.slots;
    for (ArenaSlot& slot : g.slots) slot.provisional = 0;
    const size_t n = p.command_of_node.size();
    g.nodes.resize(n);
    for (size_t i = 0; i < n; ++i) {
        g.nodes[i].parent = p.node_parent[i];
        g.nodes[i].deps.assign(p.node_deps.begin() + p.node_dep_begin[i], p.node_deps.begin() + p.node_dep_begin[i + 1]);
    }

    // Which operands the relocations cover: dst/src per command, and the kernel argument words.
    std::vector<uint8_t> resolved(p.commands.size(), 0);
    std::vector<std::vector<uint32_t>> words(p.commands.size());
    for (const Relocation& r : p.relocations) {
        if (r.field == Relocation::Field::arg) words[r.command].push_back(r.arg_offset);
        else resolved[r.command] |= r.field == Relocation::Field::dst ? 1 : 2;
    }

    std::map<const ModuleOrigin*, uint32_t> module_index;
    g.commands.resize(p.commands.size());
    for (size_t i = 0; i < p.commands.size(); ++i) {
        const Command& c = p.commands[i];
        const std::string& label = p.labels[i];
        SavedCommand& s = g.commands[i];
        s.type = c.type;
        s.node = c.node;
        s.label = label;
        switch (c.type) {
            case RT_GRAPH_NODE_TYPE_HOST:
                fail(RT_ERROR_NOT_SUPPORTED,
                     "%s: a host function (%p) is code of this process, which a saved graph cannot hold",
                     label.c_str(), reinterpret_cast<void*>(c.fn));
            case RT_GRAPH_NODE_TYPE_EVENT_RECORD:
            case RT_GRAPH_NODE_TYPE_WAIT_EVENT:
                fail(RT_ERROR_NOT_SUPPORTED,
                     "%s %s an event of this process, which a saved graph cannot hold (record or wait for events "
                     "around the launch of the loaded graph instead)", label.c_str(),
                     c.type == RT_GRAPH_NODE_TYPE_EVENT_RECORD ? "records" : "waits for");
            case RT_GRAPH_NODE_TYPE_COLLECTIVE:
                fail(RT_ERROR_NOT_SUPPORTED,
                     "%s: a collective runs over a communicator of this process (its peers, their buffers), which a "
                     "saved graph cannot hold (save the graph around it, and queue the collective by itself)",
                     label.c_str());
            case RT_GRAPH_NODE_TYPE_KERNEL: {
                const std::shared_ptr<const ModuleOrigin>& origin = c.function->origin();
                if (!origin)
                    fail(RT_ERROR_NOT_SUPPORTED,
                         "%s: kernel '%s' was not loaded by rtModuleLoadSource or rtModuleLoadFile, so its code "
                         "cannot be saved", label.c_str(), c.function->impl()->name().c_str());
                auto [it, fresh] = module_index.emplace(origin.get(), static_cast<uint32_t>(g.modules.size()));
                if (fresh) g.modules.push_back(save_module(target, *origin, label));
                s.module = it->second;
                s.kernel = c.function->impl()->name();
                s.shape = c.shape;
                s.arg_offsets.assign(c.arg_offsets.begin(), c.arg_offsets.end());
                s.arg_sizes.assign(c.arg_sizes.begin(), c.arg_sizes.end());
                s.args.assign(reinterpret_cast<const char*>(c.args.data()), c.args.size());
                // Relocated words are rewritten at every binding: saved as 0 (no address of this process in the
                // file). Any other word that points into memory the runtime knows cannot be carried over.
                std::vector<uint32_t>& mine = words[i];
                std::sort(mine.begin(), mine.end());
                for (size_t o = 0; o + 8 <= s.args.size(); o += 8) {
                    if (std::binary_search(mine.begin(), mine.end(), static_cast<uint32_t>(o))) {
                        std::memset(s.args.data() + o, 0, 8);
                        continue;
                    }
                    uint64_t v = 0;
                    std::memcpy(&v, c.args.data() + o, 8);
                    if (v == 0 || !runtime().registry.lookup(reinterpret_cast<const void*>(v)).allocation) continue;
                    size_t a = 0;
                    while (a + 1 < c.arg_offsets.size() && c.arg_offsets[a + 1] <= o) ++a;
                    fail(RT_ERROR_NOT_SUPPORTED,
                         "%s: argument %zu holds the pointer %p, %s, which is neither in a named buffer "
                         "(rtGraphBindName) nor in memory of an allocation node of the graph: it cannot be saved",
                         label.c_str(), a, reinterpret_cast<void*>(v), describe_pointer(reinterpret_cast<void*>(v)).c_str());
                }
                break;
            }
            case RT_GRAPH_NODE_TYPE_MEMCPY:
            case RT_GRAPH_NODE_TYPE_MEMSET: {
                const bool copy = c.type == RT_GRAPH_NODE_TYPE_MEMCPY;
                for (int bit : {1, 2}) {
                    if (c.bytes == 0 || (bit == 2 && !copy)) break;  // 0 bytes: nothing to reach, no relocation
                    if (resolved[i] & bit) continue;
                    const void* ptr = bit == 1 ? c.dst : c.src;
                    fail(RT_ERROR_NOT_SUPPORTED,
                         "%s: its %s %p is %s, neither in a named buffer (rtGraphBindName) nor in memory of an "
                         "allocation node of the graph: it cannot be saved", label.c_str(),
                         bit == 1 ? "destination" : "source", ptr, describe_pointer(ptr).c_str());
                }
                s.bytes = c.bytes;
                s.kind = static_cast<uint8_t>(c.kind);
                s.value = c.value;
                break;
            }
            case RT_GRAPH_NODE_TYPE_MEM_ALLOC:  // its place: the slot's
            case RT_GRAPH_NODE_TYPE_EMPTY:
            case RT_GRAPH_NODE_TYPE_GRAPH:
            case RT_GRAPH_NODE_TYPE_MEM_FREE:
                break;
            default:
                fail(RT_ERROR_NOT_SUPPORTED, "%s: a node of type %d cannot be saved", label.c_str(),
                     static_cast<int>(c.type));
        }
    }
    write_file_atomically(path, encode(g));
}

// ---------------------------------------------------------------- load

namespace {

/// Loads built code from memory: through a private file in the target's cache directory (what Target::load takes),
/// removed once loaded. Throws what Target::load throws for code it cannot load.
std::shared_ptr<backend::Module> load_code(kernels::Target& target, const std::string& code) {
    const std::string temp = kcache::unique_temp_path(kcache::backend_dir(target.cache_name()), "graph-file",
                                                      target.image_extension());
    kcache::store_bytes(temp, code);
    try {
        std::shared_ptr<backend::Module> m = target.load(temp, /*precompiled=*/true);
        ::unlink(temp.c_str());
        return m;
    } catch (...) {
        ::unlink(temp.c_str());
        throw;
    }
}

}  // namespace

std::shared_ptr<Program> load(const std::string& path, CoreDevice& device) {
    const std::string what = "'" + path + "'";
    const SavedGraph g = decode(read_file(path, "the saved graph"), what);

    kernels::Target& target = device.impl().kernel_target();
    // Code fits when it was built for this very target. Where the identity cannot be known (cpu: no compiler here),
    // code of the same backend is tried: the target itself refuses code this machine cannot run.
    bool fits = false;
    try {
        fits = kernels::build_identity(target) == g.identity;
    } catch (const Error&) {
        fits = g.backend == target.cache_name();
    }
    std::vector<std::shared_ptr<backend::Module>> modules(g.modules.size());
    std::vector<std::shared_ptr<const ModuleOrigin>> origins(g.modules.size());
    for (size_t i = 0; i < g.modules.size(); ++i) {
        const SavedModule& m = g.modules[i];
        auto origin = std::make_shared<ModuleOrigin>();
        if (!m.binary.empty() && (fits || !m.has_source)) {
            try {
                modules[i] = load_code(target, m.binary);
            } catch (const Error& e) {
                if (!m.has_source)
                    fail(RT_ERROR_INVALID_VALUE,
                         "%s: module %zu was saved without its source (from the module file '%s', loaded by "
                         "rtModuleLoadFile), and its code (built for %s) cannot be loaded on %s: %s", what.c_str(), i,
                         m.origin.c_str(), g.backend.c_str(), device.label().c_str(), e.what());
                // Code that does not load (damaged, or refused by this machine): rebuilt from the source below.
            }
        }
        if (m.has_source) {
            origin->has_source = true;
            origin->source = m.source;
            origin->options = m.options;
            if (!modules[i]) {
                try {
                    modules[i] = device.impl().kernel_modules().load_source(target, m.source, m.options);
                } catch (const Error& e) {
                    fail(e.code(), "%s: rebuilding module %zu from its source for %s (%s) failed: %s", what.c_str(), i,
                         device.label().c_str(),
                         m.binary.empty() ? "no code was saved" : "the saved code was built for another target",
                         e.what());
                }
            }
        } else {
            origin->path = m.origin;
            origin->binary = m.binary;  // saved again as it came
        }
        origins[i] = std::move(origin);
    }

    auto p = std::make_shared<Program>();
    p->device = &device;
    for (const auto& [name, bytes] : g.names) {
        ProgramName n;
        n.name = name;
        n.bytes = static_cast<size_t>(bytes);
        p->names.push_back(std::move(n));
    }
    p->arena_bytes = static_cast<size_t>(g.arena_bytes);
    p->relocations = g.relocations;
    p->slots = g.slots;
    p->allocations = p->slots.size();
    for (const ArenaSlot& slot : p->slots) p->allocated_bytes += slot.bytes;
    const uint32_t n = static_cast<uint32_t>(g.commands.size());
    p->commands.resize(n);
    p->labels.reserve(n);
    p->node_handles.assign(n, 0);
    // The nodes' dependencies as the program keeps them, and the commands' edges made from them as instantiate
    // makes them (successors in the order of the successor nodes).
    p->command_of_node.resize(n);
    for (uint32_t c = 0; c < n; ++c) p->command_of_node[g.commands[c].node] = c;
    p->node_parent.resize(n);
    p->node_dep_begin.resize(n + 1);
    std::vector<std::vector<uint32_t>> successors(n);
    for (uint32_t i = 0; i < n; ++i) {
        p->node_parent[i] = g.nodes[i].parent;
        p->node_dep_begin[i] = static_cast<uint32_t>(p->node_deps.size());
        p->node_deps.insert(p->node_deps.end(), g.nodes[i].deps.begin(), g.nodes[i].deps.end());
        for (uint32_t d : g.nodes[i].deps) successors[p->command_of_node[d]].push_back(p->command_of_node[i]);
    }
    p->node_dep_begin[n] = static_cast<uint32_t>(p->node_deps.size());
    std::map<std::pair<uint32_t, std::string>, std::shared_ptr<CoreFunction>> functions;
    for (uint32_t i = 0; i < n; ++i) {
        const SavedCommand& s = g.commands[i];
        Command& c = p->commands[i];
        c.type = s.type;
        c.node = s.node;
        p->labels.push_back(s.label);
        c.predecessor_count = static_cast<uint32_t>(g.nodes[s.node].deps.size());
        if (c.predecessor_count == 0) p->roots.push_back(i);
        c.first_successor = static_cast<uint32_t>(p->successors.size());
        c.successor_count = static_cast<uint32_t>(successors[i].size());
        p->successors.insert(p->successors.end(), successors[i].begin(), successors[i].end());
        switch (s.type) {
            case RT_GRAPH_NODE_TYPE_KERNEL: {
                auto& f = functions[{s.module, s.kernel}];
                if (!f) {
                    std::shared_ptr<backend::Function> impl = modules[s.module]->get_function_impl(s.kernel);
                    if (!impl) {
                        std::string names = kernels::join(modules[s.module]->kernel_names());
                        fail(RT_ERROR_INVALID_VALUE, "%s: %s runs kernel '%s', which module %u does not have (its "
                             "kernels: %s)", what.c_str(), s.label.c_str(), s.kernel.c_str(), s.module,
                             names.empty() ? "none" : names.c_str());
                    }
                    f = std::make_shared<CoreFunction>(device, std::move(impl), origins[s.module]);
                }
                const backend::Function& fn = *f->impl();
                const int n = fn.num_args();
                if (n < 0 || static_cast<size_t>(n) != s.arg_sizes.size())
                    fail(RT_ERROR_INVALID_VALUE, "%s: %s saved %zu arguments of kernel '%s', which takes %s here",
                         what.c_str(), s.label.c_str(), s.arg_sizes.size(), s.kernel.c_str(),
                         n < 0 ? "unknown parameters" : format("%d", n).c_str());
                for (size_t a = 0; a < s.arg_sizes.size(); ++a)
                    if (s.arg_sizes[a] != fn.arg_sizes()[a])
                        fail(RT_ERROR_INVALID_VALUE,
                             "%s: %s saved argument %zu of kernel '%s' with %llu bytes; its parameter has %zu here",
                             what.c_str(), s.label.c_str(), a, s.kernel.c_str(),
                             static_cast<unsigned long long>(s.arg_sizes[a]), fn.arg_sizes()[a]);
                c.args.assign(s.args.begin(), s.args.end());
                c.arg_offsets.assign(s.arg_offsets.begin(), s.arg_offsets.end());
                c.arg_sizes.assign(s.arg_sizes.begin(), s.arg_sizes.end());
                std::vector<void*> pointers(c.arg_offsets.size());
                c.argument_pointers(pointers.data());
                try {
                    c.shape = validate_launch(device, *f, s.shape, pointers.data(), n, c.arg_sizes.data());
                } catch (const Error& e) {
                    fail(e.code(), "%s: %s cannot run on %s: %s", what.c_str(), s.label.c_str(),
                         device.label().c_str(), e.what());
                }
                c.function = f;
                break;
            }
            case RT_GRAPH_NODE_TYPE_MEMCPY:
                c.kind = static_cast<backend::CopyKind>(s.kind);
                c.bytes = static_cast<size_t>(s.bytes);
                c.elided = c.bytes == 0;
                break;
            case RT_GRAPH_NODE_TYPE_MEMSET:
                c.value = s.value;
                c.bytes = static_cast<size_t>(s.bytes);
                c.elided = c.bytes == 0;
                break;
            default:
                break;
        }
    }
    for (const ArenaSlot& slot : p->slots) {
        p->commands[slot.command].arena_offset = slot.offset;
        p->commands[slot.command].alloc_bytes = slot.bytes;
    }
    // Every use of an allocation's memory runs after its allocation command and before its free command, as
    // instantiate requires: the memory plan's reuse rests on it.
    std::vector<std::pair<uint32_t, uint32_t>> uses;
    for (const Relocation& r : p->relocations)
        if (r.symbol.kind == Symbol::Kind::arena && p->commands[r.command].type != RT_GRAPH_NODE_TYPE_MEM_ALLOC)
            uses.emplace_back(r.command, r.symbol.name);
    for (uint32_t k = 0; k < p->slots.size(); ++k)
        if (p->slots[k].free_command != ArenaSlot::kNone) uses.emplace_back(p->slots[k].free_command, k);
    Reachability reach(*p);
    try {
        check_uses(*p, std::move(uses), reach);
    } catch (const Error& e) {
        fail(RT_ERROR_INVALID_VALUE, "%s is corrupted: %s", what.c_str(), e.what());
    }
    return p;
}

}  // namespace rt::graph::file
