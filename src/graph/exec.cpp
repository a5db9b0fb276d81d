// Executable graphs: the arena, launches (lowered by the backend, or replayed command by command by the core),
// ordering of one exec's launches across streams, and updates that never disturb launches already queued.
#include "graph/exec.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>

#include "comm/comm.hpp"
#include "core/event.hpp"
#include "core/memory.hpp"
#include "core/module.hpp"
#include "core/runtime.hpp"
#include "core/stream.hpp"
#include "graph/capture.hpp"
#include "graph/memory_plan.hpp"
#include "graph/node_params.hpp"
#include "observe/log.hpp"

namespace rt::graph {

namespace {

/// The (command, slot) pairs of `relocations` that point into the arena.
std::vector<std::pair<uint32_t, uint32_t>> arena_uses(const std::vector<Relocation>& relocations) {
    std::vector<std::pair<uint32_t, uint32_t>> uses;
    for (const Relocation& r : relocations)
        if (r.symbol.kind == Symbol::Kind::arena) uses.emplace_back(r.command, r.symbol.name);
    std::sort(uses.begin(), uses.end());
    return uses;
}

/// Refuses (check_uses) the uses of allocations among `uses` that `p` does not make already: those passed
/// check_uses at instantiation, and the edges cannot change.
void check_new_uses(const Program& p, std::vector<std::pair<uint32_t, uint32_t>> uses) {
    const std::vector<std::pair<uint32_t, uint32_t>> known = arena_uses(p.relocations);
    std::erase_if(uses, [&](const auto& u) { return std::binary_search(known.begin(), known.end(), u); });
    if (uses.empty()) return;
    Reachability reach(p);
    check_uses(p, std::move(uses), reach);
}

/// Replaces the relocations of `command` in the sorted list by `with` (all of that command).
void replace_relocations(std::vector<Relocation>& all, uint32_t command, const std::vector<Relocation>& with) {
    auto first = std::lower_bound(all.begin(), all.end(), command,
                                  [](const Relocation& r, uint32_t c) { return r.command < c; });
    auto last = first;
    while (last != all.end() && last->command == command) ++last;
    all.insert(all.erase(first, last), with.begin(), with.end());
}

}  // namespace

namespace {
/// RUNTIME_GRAPH_LOWERING=0: no executable graph is lowered; the core replays every one command by command, as it
/// does for a backend without lowering (so that path can be exercised on any device). Read at instantiation.
bool lowering_enabled() {
    const char* v = std::getenv("RUNTIME_GRAPH_LOWERING");
    return !(v && std::strcmp(v, "0") == 0);
}
}  // namespace

GraphExec::GraphExec(std::shared_ptr<Program> program, const char* api)
    : device_(program->device), program_(std::move(program)), lower_(lowering_enabled()) {
    Program& p = *program_;
    if (p.arena_bytes) arena_ = allocate_graph_arena(*device_, p.arena_bytes, api);
    try {
        if (!p.unbound_name()) p.apply_relocations(arena_);
        order_event_ = device_->impl().create_event_impl(false, false);
        if (lower_ && !p.has_collectives) lowered_ = device_->impl().compile_graph_impl(program_);
        program_refs_ = program_.use_count();
        for (const Command& c : p.commands) kernel_nodes_ += c.type == RT_GRAPH_NODE_TYPE_KERNEL;
        for (uint32_t c = 0; c < p.node_handles.size(); ++c)
            if (p.node_handles[c]) by_handle_.emplace_back(p.node_handles[c], c);
        std::sort(by_handle_.begin(), by_handle_.end());
        RT_LOG(graph, info, "%s: %zu nodes (%llu kernels) on %s, arena %zu bytes: %s", api, p.commands.size(),
               static_cast<unsigned long long>(kernel_nodes_), device_->label().c_str(), p.arena_bytes,
               lowered_ ? "lowered by the backend (one operation per launch)"
               : lower_ ? "replayed node by node by the core (the backend does not lower graphs)"
                        : "replayed node by node by the core (RUNTIME_GRAPH_LOWERING=0)");
    } catch (...) {
        free_graph_arena(arena_, api);
        throw;
    }
}

GraphExec::~GraphExec() {
    lowered_.reset();
    order_event_.reset();
    try {
        free_graph_arena(arena_, "rtGraphExecDestroy");  // reusable once the work queued so far has run
    } catch (const std::bad_alloc&) {
        // Out of memory while deferring the free: the arena leaks rather than being reused under a launch. (It is
        // registered as this exec's only: nothing else can have freed it, so no other failure is possible.)
    }
}

// ---- launch

void GraphExec::upload(Stream& stream) {
    if (&stream.device() != &device())
        fail(RT_ERROR_INVALID_VALUE, "the executable graph belongs to %s but the stream to %s",
             device().label().c_str(), stream.device().label().c_str());
}

void GraphExec::launch(const std::shared_ptr<Stream>& target) {
    if (target->capture())
        refuse_on_capturing(*target, "rtGraphLaunch", "a capture cannot hold a graph launch (build the graph with "
                            "rtGraphAddChildGraphNode instead)");
    Stream& stream = *target;
    upload(stream);
    std::lock_guard lock(mutex_);
    const Program& p = *program_;
    if (const ProgramName* n = p.unbound_name())
        fail(RT_ERROR_INVALID_VALUE, "named buffer '%s' is not bound (bind it with rtGraphExecSetBuffer before a launch)",
             n->name.c_str());
    backend::Queue& queue = stream.queue();
    const uint64_t op = stream.next_op();
    for (const std::shared_ptr<Event>& e : p.waits)
        if (e->recorded()) queue.wait_impl(e->impl(), trace::Key{});
    order_after_previous(stream);
    last_stream_ = target;
    if (lowered_) {
        trace::enqueue([&] { return trace::graph_op(stream, op, trace_id_, p.commands.size()); },
                       [&](const trace::Key& traced) {
                           queue.launch_graph_impl(lowered_, backend::LaunchReport{&stream.errors(), op, nullptr}, traced);
                       });
    } else {
        // The queued commands name their nodes by Program::labels: the program stays until the stream gets past
        // them (the timeline drops this reference then).
        auto hold = [&] {
            runtime().timeline().defer({StreamPoint{target, queue.position_impl()}}, [keep = program_] {});
        };
        try {
            replay(stream, op);
        } catch (...) {
            hold();
            mark_launch_end(queue);  // the commands queued before the failure stay ordered
            throw;
        }
        hold();
    }
    if (kernel_nodes_) stream.count_kernels(kernel_nodes_);
    mark_launch_end(queue);
    for (const std::shared_ptr<Event>& e : p.records) {
        queue.record_impl(e->impl(), trace::Key{});
        e->mark_recorded();
    }
}

void GraphExec::order_after_previous(Stream& stream) {
    std::shared_ptr<Stream> previous = last_stream_.lock();
    if (!previous || previous.get() == &stream) return;
    if (!several_streams_) {
        // The first launch on another stream: the previous launch (at last_end_ of its stream) was not recorded.
        several_streams_ = true;
        backend::Queue& before = previous->queue();
        if (before.reached_impl(last_end_)) return;
        // Recorded now, the event also covers what was queued there after that launch (and a failure of it), so
        // waiting on it would wait too long: only exact when nothing followed. Otherwise still conservative.
        before.record_impl(*order_event_, trace::Key{});
    }
    stream.queue().wait_impl(*order_event_, trace::Key{});
}

void GraphExec::mark_launch_end(backend::Queue& queue) {
    if (several_streams_) queue.record_impl(*order_event_, trace::Key{});
    else last_end_ = queue.position_impl();
}

void GraphExec::replay(Stream& stream, uint64_t op) {
    const Program& p = *program_;
    backend::Queue& queue = stream.queue();
    AsyncErrorSlot* slot = &stream.errors();
    std::vector<void*> pointers;
    for (size_t i = 0; i < p.commands.size(); ++i) {
        const Command& c = p.commands[i];
        try {
            // Traced: each node that queues work is a graph_node span of its own (the lowered path stamps them in
            // the backend's replay).
            std::optional<trace::Pending> traced;
            if (trace::on()) [[unlikely]] {
                const char* type = c.type == RT_GRAPH_NODE_TYPE_KERNEL                 ? "kernel"
                                   : c.type == RT_GRAPH_NODE_TYPE_MEMCPY && !c.elided ? "memcpy"
                                   : c.type == RT_GRAPH_NODE_TYPE_MEMSET && !c.elided ? "memset"
                                   : c.type == RT_GRAPH_NODE_TYPE_HOST                ? "host"
                                                                                       : nullptr;
                if (type)
                    traced.emplace(trace::graph_node_op(
                        stream, op, i, type,
                        c.type == RT_GRAPH_NODE_TYPE_KERNEL ? c.function->impl()->name().c_str() : p.labels[i].c_str()));
            }
            const trace::Key key = traced ? traced->key() : trace::Key{};
            switch (c.type) {
                case RT_GRAPH_NODE_TYPE_KERNEL:
                    pointers.resize(c.arg_offsets.size());
                    c.argument_pointers(pointers.data());
                    queue.launch_impl(c.function->impl(), c.shape, pointers.data(),
                                      backend::LaunchReport{slot, op, p.labels[i].c_str()}, key);
                    break;
                case RT_GRAPH_NODE_TYPE_MEMCPY:
                    if (!c.elided) queue.copy_impl(c.dst, c.src, c.bytes, c.kind, key);
                    break;
                case RT_GRAPH_NODE_TYPE_MEMSET:
                    if (!c.elided) queue.fill_impl(c.dst, c.value, c.bytes, key);
                    break;
                case RT_GRAPH_NODE_TYPE_HOST:
                    queue.host_call_impl(backend::HostCall{c.fn, c.user_data, slot, op, p.labels[i].c_str()}, key);
                    break;
                case RT_GRAPH_NODE_TYPE_COLLECTIVE:  // traced by the collective itself (a collective span)
                    comm::queue_collective(*c.collective, stream, op, p.labels[i]);
                    break;
                default:  // the arena holds allocations; events are waited before and recorded after the launch
                    break;
            }
        } catch (const Error& e) {
            throw Error(e.code(), format("%s could not be queued (the nodes before it were): %s", p.labels[i].c_str(),
                                         e.what()));
        }
    }
}

// ---- changes

bool GraphExec::held_by_launches() const {
    const bool held = program_.use_count() > program_refs_ || (lowered_ && lowered_.use_count() > 1);
    // A launch's last read happens-before the release of its reference; this makes it happen-before our writes.
    std::atomic_thread_fence(std::memory_order_acquire);
    return held;
}

template <class Change>
void GraphExec::modify(Change&& change) {
    std::vector<uint32_t> changed;
    if (!held_by_launches()) {
        change(*program_, changed);
        if (lowered_)
            for (uint32_t c : changed) lowered_->refresh_impl(c);
        return;
    }
    RT_LOG(graph, debug, "update of an executable graph (%zu nodes) that queued launches still read: applied to a "
           "copy%s", program_->commands.size(), lower_ ? ", lowered again" : "");
    auto copy = std::make_shared<Program>(*program_);
    change(*copy, changed);
    std::shared_ptr<backend::GraphExecutable> lowered = lower_ ? device().impl().compile_graph_impl(copy) : nullptr;
    program_ = std::move(copy);
    lowered_ = std::move(lowered);
    program_refs_ = program_.use_count();
}

uint32_t GraphExec::command_of_handle(uint64_t node, const char* api) const {
    auto it = std::lower_bound(by_handle_.begin(), by_handle_.end(), std::pair<uint64_t, uint32_t>{node, 0});
    if (it == by_handle_.end() || it->first != node)
        fail(RT_ERROR_INVALID_VALUE, "%s: node %p is not a node of the graph this executable graph was instantiated "
             "from", api, reinterpret_cast<void*>(node));
    return it->second;
}

void GraphExec::restage(const Command& staged, uint32_t index, std::vector<Relocation>& relocations) {
    const Program& p = *program_;
    std::vector<std::pair<uint32_t, uint32_t>> uses;
    OperandMap::of(p).resolve(p, staged, index, p.provisional.get(), relocations, uses);
    check_new_uses(p, std::move(uses));
}

void GraphExec::set_kernel_params(uint64_t node, const KernelParams& params) {
    std::lock_guard lock(mutex_);
    const uint32_t index = command_of_handle(node, "rtGraphExecKernelNodeSetParams");
    const Program& p = *program_;
    if (p.commands[index].type != RT_GRAPH_NODE_TYPE_KERNEL)
        fail(RT_ERROR_INVALID_VALUE, "%s is not a kernel node", p.labels[index].c_str());
    if (!params.function || &params.function->device() != &device())
        fail(RT_ERROR_INVALID_VALUE, "%s: the kernel must be one of %s, the executable graph's device",
             p.labels[index].c_str(), device().label().c_str());
    Command staged;
    staged.type = RT_GRAPH_NODE_TYPE_KERNEL;
    staged.function = params.function;
    staged.shape = params.shape;
    staged.args = params.args;
    staged.arg_offsets = params.arg_offsets;
    staged.arg_sizes = params.arg_sizes;
    std::vector<Relocation> relocations;
    restage(staged, index, relocations);
    const bool renamed = staged.function->impl()->name() != p.commands[index].function->impl()->name();
    modify([&](Program& q, std::vector<uint32_t>& changed) {
        Command& c = q.commands[index];
        c.function = std::move(staged.function);
        c.shape = staged.shape;
        c.args = std::move(staged.args);
        c.arg_offsets = std::move(staged.arg_offsets);
        c.arg_sizes = std::move(staged.arg_sizes);
        replace_relocations(q.relocations, index, relocations);
        if (!q.unbound_name()) q.apply_relocations(arena_, index);
        if (renamed) {
            Node described;
            described.type = RT_GRAPH_NODE_TYPE_KERNEL;
            described.kernel.function = c.function;
            q.labels[index] = relabel(q.labels[index], described);
        }
        changed.push_back(index);
    });
}

void GraphExec::set_memory_params(uint64_t node, const MemoryParams& params) {
    std::lock_guard lock(mutex_);
    const uint32_t index = command_of_handle(node, "rtGraphExecMemcpyNodeSetParams");
    const Program& p = *program_;
    const Command& old = p.commands[index];
    if (old.type != RT_GRAPH_NODE_TYPE_MEMCPY)
        fail(RT_ERROR_INVALID_VALUE, "%s is not a memcpy node", p.labels[index].c_str());
    if (params.kind != old.kind && !params.elided && !old.elided)
        fail(RT_ERROR_INVALID_VALUE, "%s: a copy's direction cannot change (the node copies %s, the params %s)",
             p.labels[index].c_str(), copy_direction(old.kind), copy_direction(params.kind));
    Command staged;
    staged.type = RT_GRAPH_NODE_TYPE_MEMCPY;
    staged.dst = params.dst;
    staged.src = params.src;
    staged.bytes = params.bytes;
    staged.kind = params.kind;
    staged.elided = params.elided || params.bytes == 0;
    std::vector<Relocation> relocations;
    restage(staged, index, relocations);
    const bool resized = staged.bytes != old.bytes;
    modify([&](Program& q, std::vector<uint32_t>& changed) {
        Command& c = q.commands[index];
        c.dst = staged.dst;
        c.src = staged.src;
        c.bytes = staged.bytes;
        c.kind = staged.kind;
        c.elided = staged.elided;
        replace_relocations(q.relocations, index, relocations);
        if (!q.unbound_name()) q.apply_relocations(arena_, index);
        if (resized) {
            Node described;
            described.type = c.type;
            described.memory = params;
            q.labels[index] = relabel(q.labels[index], described);
        }
        changed.push_back(index);
    });
}

rtGraphExecUpdateResult GraphExec::update(const Graph& graph, std::string* why) {
    std::lock_guard lock(mutex_);
    const Program& p = *program_;
    const FlatGraph flat = flatten(graph);
    if (&graph.device() != &device()) {
        // Its kernels are another device's (CUDA: another context's); a graph without kernels has other operands.
        auto kernel = std::find_if(flat.nodes.begin(), flat.nodes.end(),
                                   [](const FlatGraph::Entry& e) { return e.node->type == RT_GRAPH_NODE_TYPE_KERNEL; });
        *why = format("the graph belongs to %s but the executable graph to %s%s%s", graph.device().label().c_str(),
                      device().label().c_str(), kernel == flat.nodes.end() ? "" : ": its kernels too, e.g. ",
                      kernel == flat.nodes.end() ? "" : flat.label(static_cast<uint32_t>(kernel - flat.nodes.begin())).c_str());
        return kernel == flat.nodes.end() ? RT_GRAPH_EXEC_UPDATE_ERROR : RT_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED;
    }
    const uint32_t n = static_cast<uint32_t>(p.commands.size());
    if (p.command_of_node.size() != n || p.node_parent.size() != n || p.node_dep_begin.size() != size_t{n} + 1) {
        // Every program is built with its structure (instantiate, and graph_file::load): a safeguard, not a use case.
        *why = "internal error: the executable graph lost the structure of the graph it was made from";
        return RT_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
    }
    if (flat.nodes.size() != n) {
        *why = format("the graph has %zu nodes (those of its child graphs included) but the executable graph was "
                      "made from one with %u", flat.nodes.size(), n);
        return RT_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    }

    // Node for node: kind, place, edges, and what cannot change. The graph's allocation addresses map to the slots
    // of the nodes in the same places.
    std::vector<std::pair<uintptr_t, uint32_t>> slot_of_address;  // the graph's allocation address -> slot
    for (uint32_t s = 0; s < p.slots.size(); ++s)
        slot_of_address.emplace_back(reinterpret_cast<uintptr_t>(flat.nodes[p.commands[p.slots[s].command].node].node->address), s);
    std::sort(slot_of_address.begin(), slot_of_address.end());
    for (uint32_t i = 0; i < n; ++i) {
        const FlatGraph::Entry& e = flat.nodes[i];
        const Node& node = *e.node;
        const uint32_t c = p.command_of_node[i];
        const Command& old = p.commands[c];
        const std::string& label = p.labels[c];
        if (node.type != old.type) {
            *why = format("%s is a %s node in the graph", label.c_str(), node_type_name(node.type));
            return RT_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        }
        const uint32_t* deps = p.node_deps.data() + p.node_dep_begin[i];
        const uint32_t dep_count = p.node_dep_begin[i + 1] - p.node_dep_begin[i];
        if (e.parent != p.node_parent[i] || e.dep_count != dep_count || !std::equal(deps, deps + dep_count, flat.deps.begin() + e.dep_begin)) {
            *why = format("%s has other dependencies in the graph", label.c_str());
            return RT_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        }
        switch (node.type) {
            case RT_GRAPH_NODE_TYPE_KERNEL:
                if (!node.kernel.function || &node.kernel.function->device() != &device()) {
                    *why = format("%s runs a kernel of another device in the graph", label.c_str());
                    return RT_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED;
                }
                break;
            case RT_GRAPH_NODE_TYPE_MEMCPY:
                if (node.memory.kind != old.kind && !node.memory.elided && !old.elided) {
                    *why = format("%s copies in another direction in the graph (%s)", label.c_str(),
                                  "a copy's direction cannot change");
                    return RT_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
                }
                break;
            case RT_GRAPH_NODE_TYPE_WAIT_EVENT:
            case RT_GRAPH_NODE_TYPE_EVENT_RECORD:
                if (node.event != old.event) {
                    *why = format("%s has another event in the graph (an event node's event cannot change)", label.c_str());
                    return RT_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
                }
                break;
            case RT_GRAPH_NODE_TYPE_MEM_ALLOC:
                if (node.alloc_bytes != old.alloc_bytes) {
                    *why = format("%s allocates %zu bytes in the graph (an allocation's size cannot change)",
                                  label.c_str(), node.alloc_bytes);
                    return RT_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
                }
                break;
            case RT_GRAPH_NODE_TYPE_COLLECTIVE:
                if (!node.collective || !old.collective || !(*node.collective == *old.collective)) {
                    *why = format("%s is another collective in the graph (a collective node's communicator, buffers "
                                  "and counts cannot change)", label.c_str());
                    return RT_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
                }
                break;
            case RT_GRAPH_NODE_TYPE_MEM_FREE: {
                const uintptr_t a = reinterpret_cast<uintptr_t>(node.address);
                auto it = std::lower_bound(slot_of_address.begin(), slot_of_address.end(),
                                           std::pair<uintptr_t, uint32_t>{a, 0});
                if (it == slot_of_address.end() || it->first != a || p.slots[it->second].free_command != c) {
                    *why = format("%s frees another allocation in the graph (what a free node frees cannot change)",
                                  label.c_str());
                    return RT_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
                }
                break;
            }
            default:
                break;
        }
    }

    // Named buffers of the graph are those of the executable graph, by name (their bindings stay the exec's).
    std::vector<uint32_t> name_index;
    for (const NamedBuffer& b : graph.names()) {
        auto it = std::find_if(p.names.begin(), p.names.end(), [&](const ProgramName& m) { return m.name == b.name; });
        if (it == p.names.end() || it->bytes != b.bytes) {
            *why = it == p.names.end()
                       ? format("the graph names a buffer '%s' the executable graph does not have", b.name.c_str())
                       : format("the graph names '%s' with %zu bytes, the executable graph with %zu", b.name.c_str(),
                                b.bytes, it->bytes);
            return RT_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
        }
        name_index.push_back(static_cast<uint32_t>(it - p.names.begin()));
    }

    // Operands of the graph, resolved against its own allocation addresses and names.
    OperandMap map;
    for (const auto& [address, s] : slot_of_address) map.add_allocation(address, p.slots[s].bytes, s, p.slots[s].offset);
    for (size_t k = 0; k < graph.names().size(); ++k)
        map.add_name(reinterpret_cast<uintptr_t>(graph.names()[k].ptr), graph.names()[k].bytes, name_index[k]);
    map.finish();
    std::vector<Relocation> relocations;
    std::vector<std::pair<uint32_t, uint32_t>> uses;
    try {
        Command scratch;  // reused: its vectors keep their capacity from node to node
        for (uint32_t c = 0; c < n; ++c) {
            const Node& node = *flat.nodes[p.commands[c].node].node;
            load_command(scratch, node);
            map.resolve(p, scratch, c, &node.graph->provisional(), relocations, uses);
        }
        check_new_uses(p, std::move(uses));
    } catch (const Error& e) {
        if (e.code() != RT_ERROR_INVALID_VALUE) throw;
        *why = e.what();
        return RT_GRAPH_EXEC_UPDATE_ERROR;
    }

    modify([&](Program& q, std::vector<uint32_t>& changed) {
        for (uint32_t c = 0; c < n; ++c) {
            Command& cmd = q.commands[c];
            const Node& node = *flat.nodes[cmd.node].node;
            switch (cmd.type) {
                case RT_GRAPH_NODE_TYPE_KERNEL: {
                    const bool renamed = cmd.function != node.kernel.function &&
                                         cmd.function->impl()->name() != node.kernel.function->impl()->name();
                    load_command(cmd, node);
                    if (renamed) q.labels[c] = relabel(q.labels[c], node);
                    break;
                }
                case RT_GRAPH_NODE_TYPE_MEMCPY:
                case RT_GRAPH_NODE_TYPE_MEMSET: {
                    const bool resized = cmd.bytes != node.memory.bytes;
                    load_command(cmd, node);
                    if (resized) q.labels[c] = relabel(q.labels[c], node);
                    break;
                }
                case RT_GRAPH_NODE_TYPE_HOST:
                    load_command(cmd, node);
                    break;
                default:
                    continue;  // nothing of theirs may change
            }
            changed.push_back(c);
        }
        q.relocations = std::move(relocations);
        if (!q.unbound_name()) q.apply_relocations(arena_);
    });
    return RT_GRAPH_EXEC_UPDATE_SUCCESS;
}

void GraphExec::set_buffer(const std::string& name, void* ptr, size_t bytes) {
    std::lock_guard lock(mutex_);
    const Program& p = *program_;
    auto it = std::find_if(p.names.begin(), p.names.end(), [&](const ProgramName& m) { return m.name == name; });
    if (it == p.names.end()) {
        std::string list;
        for (const ProgramName& m : p.names) list += (list.empty() ? "'" : ", '") + m.name + "'";
        fail(RT_ERROR_INVALID_VALUE, "the executable graph has no named buffer '%s' (%s%s)", name.c_str(),
             p.names.empty() ? "it has none" : "its names: ", list.c_str());
    }
    const uint32_t k = static_cast<uint32_t>(it - p.names.begin());
    if (!ptr) fail(RT_ERROR_INVALID_VALUE, "ptr is NULL (expected %zu bytes for '%s')", it->bytes, name.c_str());
    if (bytes < it->bytes)
        fail(RT_ERROR_INVALID_VALUE, "'%s' was named with %zu bytes, more than the %zu bytes given at %p", name.c_str(),
             it->bytes, bytes, ptr);
    // The buffer must be what each operand in it expects: device memory of this device, or host memory.
    const PointerInfo info = runtime().registry.lookup(ptr);
    const bool device_memory = info.allocation && info.allocation->kind == MemoryKind::device;
    const bool mapped = info.allocation && !device_memory && info.allocation->device->memory().zero_copy();
    if (device_memory && info.allocation->device != &device())
        fail(RT_ERROR_INVALID_VALUE, "'%s': %p is memory of %s, not of %s (the executable graph's device)", name.c_str(),
             ptr, info.allocation->device->label().c_str(), device().label().c_str());
    if (info.allocation && info.available < it->bytes)
        fail(RT_ERROR_INVALID_VALUE, "'%s': only %zu bytes are allocated from %p, fewer than the %zu it was named with",
             name.c_str(), info.available, ptr, it->bytes);
    for (const Relocation& r : p.relocations) {
        if (r.symbol.kind != Symbol::Kind::named || r.symbol.name != k) continue;
        const Command& c = p.commands[r.command];
        bool wants_device = true;
        if (c.type == RT_GRAPH_NODE_TYPE_MEMCPY)
            wants_device = r.field == Relocation::Field::dst
                               ? c.kind == backend::CopyKind::host_to_device || c.kind == backend::CopyKind::device_to_device
                               : c.kind == backend::CopyKind::device_to_host || c.kind == backend::CopyKind::device_to_device;
        if (!mapped && wants_device != device_memory)
            fail(RT_ERROR_INVALID_VALUE, "'%s': %s expects %s memory there, but %p is %s memory", name.c_str(),
                 p.labels[r.command].c_str(), wants_device ? "device" : "host", ptr, device_memory ? "device" : "host");
    }
    modify([&](Program& q, std::vector<uint32_t>& changed) {
        q.names[k].bound = ptr;
        q.names[k].bound_bytes = bytes;
        if (q.unbound_name()) return;
        q.apply_relocations(arena_);
        for (const Relocation& r : q.relocations)
            if (changed.empty() || changed.back() != r.command) changed.push_back(r.command);
    });
}

rtGraphMemoryInfo GraphExec::memory_info() {
    std::lock_guard lock(mutex_);
    return rtGraphMemoryInfo{program_->arena_bytes, program_->allocated_bytes, program_->allocations};
}

}  // namespace rt::graph
