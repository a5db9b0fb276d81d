// Instantiation: a graph flattened, checked, topologically ordered, memory-planned and relocated into a Program.
#include "graph/program.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/event.hpp"
#include "core/module.hpp"
#include "graph/graph.hpp"
#include "graph/memory_plan.hpp"
#include "graph/node_params.hpp"

namespace rt::graph {

namespace {

/// Nodes of `g` once flattened (each node, plus the flattened nodes of its child graph).
size_t flat_size(const Graph& g) {
    size_t n = 0;
    for (const auto& node : g.nodes()) {
        ++n;
        if (node->type == RT_GRAPH_NODE_TYPE_GRAPH && node->child) n += flat_size(*node->child);
    }
    return n;
}

/// Writes the nodes of `g` into f.nodes[first ..]. `entry`: what its nodes without dependencies depend on. Returns
/// in `sinks` the flattening indices of its last nodes.
void flatten_into(const Graph& g, uint32_t parent, std::vector<uint32_t> entry, uint32_t first, FlatGraph& f,
                  std::vector<uint32_t>& sinks) {
    const auto& nodes = g.nodes();
    std::vector<uint32_t> flat_of(nodes.size());
    std::vector<char> has_successor(nodes.size(), 0);
    uint32_t next = first;
    for (size_t k = 0; k < nodes.size(); ++k) {
        flat_of[k] = next;
        next += 1;
        if (nodes[k]->type == RT_GRAPH_NODE_TYPE_GRAPH && nodes[k]->child)
            next += static_cast<uint32_t>(flat_size(*nodes[k]->child));
    }
    std::vector<uint32_t> deps, child_sinks;
    for (size_t k = 0; k < nodes.size(); ++k) {
        const Node& n = *nodes[k];
        const uint32_t i = flat_of[k];
        deps.clear();
        for (const Node* d : n.deps) {
            if (d->graph != &g || d->index >= nodes.size() || nodes[d->index].get() != d)
                fail(RT_ERROR_INVALID_VALUE, "node %zu of the graph depends on a node of another graph", k);
            deps.push_back(flat_of[d->index]);
            has_successor[d->index] = 1;
        }
        if (n.deps.empty()) deps = entry;
        if (n.type == RT_GRAPH_NODE_TYPE_GRAPH && n.child) {
            child_sinks.clear();
            flatten_into(*n.child, i, deps, i + 1, f, child_sinks);
            if (!child_sinks.empty()) deps = child_sinks;
        }
        std::sort(deps.begin(), deps.end());
        FlatGraph::Entry& e = f.nodes[i];
        e.node = &n;
        e.parent = parent;
        e.local = static_cast<uint32_t>(k);
        e.dep_begin = static_cast<uint32_t>(f.deps.size());
        e.dep_count = static_cast<uint32_t>(deps.size());
        f.deps.insert(f.deps.end(), deps.begin(), deps.end());
    }
    for (size_t k = 0; k < nodes.size(); ++k)
        if (!has_successor[k]) sinks.push_back(flat_of[k]);
}

}  // namespace

std::string relabel(const std::string& label, const Node& node) {
    // "node <id> (...)": the id has no space.
    return node_label(node, std::string_view(label).substr(5, label.find(' ', 5) - 5));
}

namespace {
std::string path_of(const FlatGraph& f, uint32_t i) {
    std::string path = std::to_string(f.nodes[i].local);
    for (uint32_t p = f.nodes[i].parent; p != FlatGraph::kTop; p = f.nodes[p].parent)
        path = std::to_string(f.nodes[p].local) + "." + path;
    return path;
}
}  // namespace

std::string FlatGraph::label(uint32_t i) const { return node_label(*nodes[i].node, path_of(*this, i)); }

FlatGraph flatten(const Graph& graph) {
    FlatGraph f;
    const size_t total = flat_size(graph);
    if (total >= UINT32_MAX / 2)
        fail(RT_ERROR_INVALID_VALUE, "the graph has %zu nodes once its child graphs are inlined (at most %u)", total,
             UINT32_MAX / 2 - 1);
    f.nodes.resize(total);
    std::vector<uint32_t> sinks;
    flatten_into(graph, FlatGraph::kTop, {}, 0, f, sinks);
    return f;
}

void load_command(Command& c, const Node& n) {
    c.type = n.type;
    switch (n.type) {
        case RT_GRAPH_NODE_TYPE_KERNEL:
            c.function = n.kernel.function;
            c.shape = n.kernel.shape;
            c.args = n.kernel.args;
            c.arg_offsets = n.kernel.arg_offsets;
            c.arg_sizes = n.kernel.arg_sizes;
            break;
        case RT_GRAPH_NODE_TYPE_MEMCPY:
            c.dst = n.memory.dst;
            c.src = n.memory.src;
            c.bytes = n.memory.bytes;
            c.kind = n.memory.kind;
            c.elided = n.memory.elided || n.memory.bytes == 0;
            break;
        case RT_GRAPH_NODE_TYPE_MEMSET:
            c.dst = n.memory.dst;
            c.bytes = n.memory.bytes;
            c.value = n.memory.value;
            c.elided = n.memory.elided || n.memory.bytes == 0;
            break;
        case RT_GRAPH_NODE_TYPE_HOST:
            c.fn = n.host.fn;
            c.user_data = n.host.user_data;
            break;
        case RT_GRAPH_NODE_TYPE_WAIT_EVENT:
        case RT_GRAPH_NODE_TYPE_EVENT_RECORD:
            c.event = n.event;
            break;
        case RT_GRAPH_NODE_TYPE_MEM_ALLOC:
            c.alloc_bytes = n.alloc_bytes;
            break;
        case RT_GRAPH_NODE_TYPE_COLLECTIVE:
            c.collective = n.collective;
            break;
        default:
            break;
    }
}

// ---- operands

void OperandMap::add_allocation(uintptr_t base, size_t bytes, uint32_t slot, uint64_t arena_offset) {
    if (bytes) ranges_.push_back({base, bytes, Symbol::Kind::arena, slot, arena_offset});
}

void OperandMap::add_name(uintptr_t base, size_t bytes, uint32_t name) {
    if (bytes) ranges_.push_back({base, bytes, Symbol::Kind::named, name, 0});
}

OperandMap OperandMap::of(const Program& p) {
    OperandMap map;
    for (uint32_t s = 0; s < p.slots.size(); ++s)
        map.add_allocation(p.slots[s].provisional, p.slots[s].bytes, s, p.slots[s].offset);
    for (uint32_t k = 0; k < p.names.size(); ++k)
        if (p.names[k].bound) map.add_name(reinterpret_cast<uintptr_t>(p.names[k].bound), p.names[k].bytes, k);
    map.finish();
    return map;
}

void OperandMap::finish() {
    std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.base < b.base; });
}

const OperandMap::Range* OperandMap::find(uintptr_t p) const {
    // Nearly every program has no or few ranges: the common word is answered by the first comparison.
    if (ranges_.empty() || p < ranges_.front().base) return nullptr;
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), p, [](uintptr_t v, const Range& r) { return v < r.base; });
    const Range& r = *(it - 1);
    // A range's end address is its own, so that a kernel's "end" argument relocates with it: an allocation's
    // (ProvisionalSpace leaves gaps), and a named buffer's unless another named buffer starts there (then `r`, the
    // last range starting at or before p, is that one).
    return p - r.base <= r.bytes ? &r : nullptr;
}

void OperandMap::resolve(const Program& program, const Command& c, uint32_t index, const ProvisionalSpace* space,
                         std::vector<Relocation>& out, std::vector<std::pair<uint32_t, uint32_t>>& uses) const {
    auto what = [&](const Range& r) {
        return r.kind == Symbol::Kind::arena ? program.labels[program.slots[r.id].command]
                                             : "named buffer '" + program.names[r.id].name + "'";
    };
    auto add = [&](Relocation::Field field, uint32_t arg_offset, const Range& r, uintptr_t p) {
        Relocation rel;
        rel.command = index;
        rel.field = field;
        rel.arg_offset = arg_offset;
        rel.symbol.kind = r.kind;
        rel.symbol.name = r.id;
        rel.symbol.offset = r.arena_offset + (p - r.base);
        out.push_back(rel);
        if (r.kind == Symbol::Kind::arena) uses.emplace_back(index, r.id);
    };
    auto operand = [&](Relocation::Field field, const void* ptr, const char* role) {
        const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
        const Range* r = find(p);
        // A copy or fill (of at least one byte) at a named buffer's end is of the memory after it, not in it.
        if (r && r->kind == Symbol::Kind::named && p - r->base == r->bytes) r = nullptr;
        if (r) {
            if (c.bytes > r->bytes - (p - r->base))
                fail(RT_ERROR_INVALID_VALUE,
                     "%s: its %s %p + %zu bytes runs past the end of %s (%zu bytes from %p)",
                     program.labels[index].c_str(), role, ptr, c.bytes, what(*r).c_str(), r->bytes,
                     reinterpret_cast<void*>(r->base));
            add(field, 0, *r, p);
            return;
        }
        uintptr_t base = 0;
        size_t bytes = 0;
        if (space && p && space->find(ptr, &base, &bytes))
            fail(RT_ERROR_INVALID_VALUE,
                 "%s: its %s %p is the memory of an allocation node that is not part of this graph",
                 program.labels[index].c_str(), role, ptr);
    };
    switch (c.type) {
        case RT_GRAPH_NODE_TYPE_KERNEL:
            // Any 8-byte word of an argument (at a multiple of 8 from the argument's start, as a pointer member of
            // a struct is) whose value lies in a range is taken for a pointer into it.
            for (size_t i = 0; i < c.arg_offsets.size(); ++i)
                for (size_t w = 0; w + 8 <= c.arg_sizes[i]; w += 8) {
                    uintptr_t v;
                    std::memcpy(&v, c.args.data() + c.arg_offsets[i] + w, sizeof v);
                    if (const Range* r = find(v))
                        add(Relocation::Field::arg, static_cast<uint32_t>(c.arg_offsets[i] + w), *r, v);
                }
            break;
        case RT_GRAPH_NODE_TYPE_MEMCPY:
            if (c.bytes == 0) break;
            operand(Relocation::Field::dst, c.dst, "destination");
            operand(Relocation::Field::src, c.src, "source");
            break;
        case RT_GRAPH_NODE_TYPE_MEMSET:
            if (c.bytes == 0) break;
            operand(Relocation::Field::dst, c.dst, "destination");
            break;
        case RT_GRAPH_NODE_TYPE_MEM_ALLOC: {
            // Its own place in the arena, in dst: for backends that lower allocations.
            if (c.alloc_bytes == 0) break;
            auto slot = std::lower_bound(program.slots.begin(), program.slots.end(), index,
                                         [](const ArenaSlot& s, uint32_t c) { return s.command < c; });
            if (slot == program.slots.end() || slot->command != index) break;
            Relocation rel;
            rel.command = index;
            rel.field = Relocation::Field::dst;
            rel.symbol.name = static_cast<uint32_t>(slot - program.slots.begin());
            rel.symbol.offset = slot->offset;
            out.push_back(rel);
            break;
        }
        default:
            break;
    }
}

void check_uses(const Program& program, std::vector<std::pair<uint32_t, uint32_t>> uses, Reachability& reach) {
    std::sort(uses.begin(), uses.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second < b.second : a.first < b.first;
    });
    uses.erase(std::unique(uses.begin(), uses.end()), uses.end());
    for (size_t begin = 0; begin < uses.size();) {
        size_t end = begin;
        while (end < uses.size() && uses[end].second == uses[begin].second) ++end;
        const ArenaSlot& slot = program.slots[uses[begin].second];
        uint32_t last = uses[end - 1].first;  // sorted by command within the slot
        if (slot.free_command != ArenaSlot::kNone) last = std::max(last, slot.free_command);
        reach.mark_descendants(slot.command, last);
        for (size_t k = begin; k < end; ++k)
            if (!reach.marked(uses[k].first))
                fail(RT_ERROR_INVALID_VALUE,
                     "%s uses the memory of %s but does not run after it (add a path of dependencies from the "
                     "allocation node to it)",
                     program.labels[uses[k].first].c_str(), program.labels[slot.command].c_str());
        if (slot.free_command != ArenaSlot::kNone) {
            reach.mark_ancestors(slot.free_command, uses[begin].first);
            for (size_t k = begin; k < end; ++k)
                if (!reach.marked(uses[k].first))
                    fail(RT_ERROR_INVALID_VALUE,
                         "%s uses the memory of %s but does not run before %s, which frees it (add a path of "
                         "dependencies from it to the free node)",
                         program.labels[uses[k].first].c_str(), program.labels[slot.command].c_str(),
                         program.labels[slot.free_command].c_str());
        }
        begin = end;
    }
}

// ---- relocations

namespace {
void apply_one(Program& p, const Relocation& r, void* arena_base) {
    void* address;
    if (r.symbol.kind == Symbol::Kind::arena) {
        address = static_cast<unsigned char*>(arena_base) + r.symbol.offset;
    } else {
        const ProgramName& n = p.names[r.symbol.name];
        if (!n.bound)
            fail(RT_ERROR_INVALID_VALUE, "named buffer '%s' is not bound (rtGraphExecSetBuffer binds it)", n.name.c_str());
        address = static_cast<unsigned char*>(n.bound) + r.symbol.offset;
    }
    Command& c = p.commands[r.command];
    switch (r.field) {
        case Relocation::Field::dst: c.dst = address; break;
        case Relocation::Field::src: c.src = address; break;
        case Relocation::Field::arg: std::memcpy(c.args.data() + r.arg_offset, &address, sizeof address); break;
    }
}
}  // namespace

const ProgramName* Program::unbound_name() const {
    for (const ProgramName& n : names)
        if (!n.bound) return &n;
    return nullptr;
}

void Program::apply_relocations(void* arena_base) {
    if (const ProgramName* n = unbound_name())
        fail(RT_ERROR_INVALID_VALUE, "named buffer '%s' is not bound (rtGraphExecSetBuffer binds it)", n->name.c_str());
    for (const Relocation& r : relocations) apply_one(*this, r, arena_base);
}

void Program::apply_relocations(void* arena_base, uint32_t command) {
    auto it = std::lower_bound(relocations.begin(), relocations.end(), command,
                               [](const Relocation& r, uint32_t c) { return r.command < c; });
    for (; it != relocations.end() && it->command == command; ++it) apply_one(*this, *it, arena_base);
}

// ---- instantiate

std::shared_ptr<Program> instantiate(const Graph& graph) {
    FlatGraph flat = flatten(graph);
    const uint32_t n = static_cast<uint32_t>(flat.nodes.size());

    // Kahn's algorithm over the flattened nodes, ready nodes taken in flattening order.
    std::vector<uint32_t> succ_begin(n + 1, 0), succ(flat.deps.size()), indegree(n);
    for (uint32_t i = 0; i < n; ++i) {
        indegree[i] = flat.nodes[i].dep_count;
        for (uint32_t k = 0; k < flat.nodes[i].dep_count; ++k) ++succ_begin[flat.deps[flat.nodes[i].dep_begin + k] + 1];
    }
    for (uint32_t i = 0; i < n; ++i) succ_begin[i + 1] += succ_begin[i];
    {
        std::vector<uint32_t> fill(succ_begin.begin(), succ_begin.end() - 1);
        for (uint32_t i = 0; i < n; ++i)
            for (uint32_t k = 0; k < flat.nodes[i].dep_count; ++k) succ[fill[flat.deps[flat.nodes[i].dep_begin + k]]++] = i;
    }
    std::vector<uint32_t> order;
    order.reserve(n);
    for (uint32_t i = 0; i < n; ++i)
        if (indegree[i] == 0) order.push_back(i);
    for (size_t head = 0; head < order.size(); ++head) {
        const uint32_t v = order[head];
        for (uint32_t k = succ_begin[v]; k < succ_begin[v + 1]; ++k)
            if (--indegree[succ[k]] == 0) order.push_back(succ[k]);
    }
    if (order.size() < n) {
        // Every node left has a dependency left: walking dependencies from one must come back to a node seen.
        std::vector<char> seen(n, 0);
        uint32_t v = 0;
        while (indegree[v] == 0) ++v;
        while (!seen[v]) {
            seen[v] = 1;
            const FlatGraph::Entry& e = flat.nodes[v];
            for (uint32_t k = 0; k < e.dep_count; ++k)
                if (uint32_t d = flat.deps[e.dep_begin + k]; indegree[d] != 0) {
                    v = d;
                    break;
                }
        }
        fail(RT_ERROR_INVALID_VALUE, "the graph has a cycle: %s depends, through other nodes, on itself",
             flat.label(v).c_str());
    }

    auto program = std::make_shared<Program>();
    Program& p = *program;
    p.device = &graph.device();
    {
        auto keep = [&](const std::shared_ptr<Keepalive>& k) {
            if (std::find(p.keepalives.begin(), p.keepalives.end(), k) == p.keepalives.end()) p.keepalives.push_back(k);
        };
        keep(graph.keepalive());
        for (const FlatGraph::Entry& e : flat.nodes)  // every child graph is a child node's (even an empty one)
            if (e.node->type == RT_GRAPH_NODE_TYPE_GRAPH && e.node->child) keep(e.node->child->keepalive());
    }
    p.provisional = graph.provisional_ptr();
    p.commands.resize(n);
    p.labels.resize(n);
    p.node_handles.resize(n);
    p.command_of_node.resize(n);
    for (uint32_t c = 0; c < n; ++c) p.command_of_node[order[c]] = c;
    p.node_parent.resize(n);
    for (uint32_t i = 0; i < n; ++i) p.node_parent[i] = flat.nodes[i].parent;
    p.node_dep_begin.resize(n + 1);
    p.node_deps.reserve(flat.deps.size());
    for (uint32_t i = 0; i < n; ++i) {
        p.node_dep_begin[i] = static_cast<uint32_t>(p.node_deps.size());
        const FlatGraph::Entry& e = flat.nodes[i];
        p.node_deps.insert(p.node_deps.end(), flat.deps.begin() + e.dep_begin, flat.deps.begin() + e.dep_begin + e.dep_count);
    }
    p.node_dep_begin[n] = static_cast<uint32_t>(p.node_deps.size());

    // Commands, and their edges in command numbers.
    p.successors.resize(succ.size());
    uint32_t edge = 0;
    for (uint32_t c = 0; c < n; ++c) {
        const uint32_t v = order[c];
        const Node& node = *flat.nodes[v].node;
        Command& cmd = p.commands[c];
        load_command(cmd, node);
        cmd.node = v;
        cmd.predecessor_count = flat.nodes[v].dep_count;
        cmd.first_successor = edge;
        cmd.successor_count = succ_begin[v + 1] - succ_begin[v];
        for (uint32_t k = succ_begin[v]; k < succ_begin[v + 1]; ++k) p.successors[edge++] = p.command_of_node[succ[k]];
        if (cmd.predecessor_count == 0) p.roots.push_back(c);
        p.labels[c] = node_label(node, path_of(flat, v));
        p.node_handles[c] = flat.nodes[v].parent == FlatGraph::kTop ? node.handle : 0;
        switch (node.type) {
            case RT_GRAPH_NODE_TYPE_HOST: p.has_host_nodes = true; break;
            case RT_GRAPH_NODE_TYPE_COLLECTIVE: p.has_collectives = true; break;
            case RT_GRAPH_NODE_TYPE_WAIT_EVENT:
                if (std::find(p.waits.begin(), p.waits.end(), node.event) == p.waits.end()) p.waits.push_back(node.event);
                break;
            case RT_GRAPH_NODE_TYPE_EVENT_RECORD:
                if (std::find(p.records.begin(), p.records.end(), node.event) == p.records.end())
                    p.records.push_back(node.event);
                break;
            case RT_GRAPH_NODE_TYPE_MEM_ALLOC: {
                ArenaSlot s;
                s.command = c;
                s.provisional = reinterpret_cast<uintptr_t>(node.address);
                s.bytes = node.alloc_bytes;
                p.slots.push_back(s);
                break;
            }
            default: break;
        }
    }

    // Free nodes, matched to their allocations by address.
    {
        std::vector<std::pair<uintptr_t, uint32_t>> by_base;
        for (uint32_t s = 0; s < p.slots.size(); ++s) by_base.emplace_back(p.slots[s].provisional, s);
        std::sort(by_base.begin(), by_base.end());
        for (uint32_t c = 0; c < n; ++c) {
            if (p.commands[c].type != RT_GRAPH_NODE_TYPE_MEM_FREE) continue;
            const uintptr_t a = reinterpret_cast<uintptr_t>(flat.nodes[order[c]].node->address);
            auto it = std::lower_bound(by_base.begin(), by_base.end(), std::pair<uintptr_t, uint32_t>{a, 0});
            if (it == by_base.end() || it->first != a)
                fail(RT_ERROR_INVALID_VALUE, "%s frees %p, which is not the address of an allocation node of this graph",
                     p.labels[c].c_str(), reinterpret_cast<void*>(a));
            ArenaSlot& slot = p.slots[it->second];
            if (slot.free_command != ArenaSlot::kNone)
                fail(RT_ERROR_INVALID_VALUE, "%s frees the memory of %s, which %s frees already", p.labels[c].c_str(),
                     p.labels[slot.command].c_str(), p.labels[slot.free_command].c_str());
            slot.free_command = c;
        }
    }

    plan_memory(p);
    for (const ArenaSlot& s : p.slots) p.commands[s.command].arena_offset = s.offset;

    for (const NamedBuffer& b : graph.names()) p.names.push_back({b.name, b.bytes, b.ptr, b.bytes});

    const OperandMap map = OperandMap::of(p);
    std::vector<std::pair<uint32_t, uint32_t>> uses;
    for (uint32_t c = 0; c < n; ++c)
        map.resolve(p, p.commands[c], c, &flat.nodes[order[c]].node->graph->provisional(), p.relocations, uses);
    for (uint32_t s = 0; s < p.slots.size(); ++s)
        if (p.slots[s].free_command != ArenaSlot::kNone) uses.emplace_back(p.slots[s].free_command, s);
    Reachability reach(p);
    check_uses(p, std::move(uses), reach);
    return program;
}

}  // namespace rt::graph
