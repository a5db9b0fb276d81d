// An executable graph (rtGraphExec_t): a program, its arena, and the backend's lowering; launched as one stream
// operation, updated between launches without disturbing launches already queued.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.hpp"
#include "graph/graph.hpp"
#include "graph/program.hpp"
#include "observe/trace.hpp"

namespace rt {
class Stream;
}

namespace rt::graph {

class Graph;

class GraphExec {
public:
    /// Takes an instantiated (or loaded) program: allocates its arena on program->device, applies its relocations
    /// when every named buffer is bound, and lowers it (Device::compile_graph_impl) unless the environment has
    /// RUNTIME_GRAPH_LOWERING=0 (then the core replays it, as for a backend without lowering).
    /// `api` names the call in messages (rtGraphInstantiate, rtGraphExecLoad).
    GraphExec(std::shared_ptr<Program> program, const char* api);
    /// The arena is freed once the work queued so far has run (free_device); queued launches hold the program (core
    /// replay: through the timeline) or the lowered executable (its queue), which holds what it reads of it.
    ~GraphExec();

    /// The program's device, fixed at construction (read without the mutex: no update changes it).
    CoreDevice& device() const { return *device_; }
    /// The current program (launches take a reference; an update replaces it or changes it in place when no launch
    /// holds it). Caller holds mutex().
    const std::shared_ptr<Program>& program() const { return program_; }
    std::mutex& mutex() { return mutex_; }

    /// One operation of `stream` (a stream of device()): waits for the program's waited events and for the previous
    /// launch of this exec if it was on another stream, runs the program (lowered, or replayed command by command),
    /// then records the program's recorded events. Unbound named buffer: INVALID_VALUE naming it. Thread-safe:
    /// launches of one exec are queued one at a time, in the order of the calls.
    void launch(const std::shared_ptr<Stream>& stream);
    /// rtGraphUpload: allocations and lowering are done at construction, so this only checks `stream`.
    void upload(Stream& stream);

    /// rtGraphExecUpdate: takes the parameters of every node of `graph` (locked by the caller), which must match the
    /// instantiated graph node for node and edge for edge. Returns SUCCESS, or what differed first with `*why`
    /// naming the node (the exec is then unchanged). Throws only for failures that are not differences (memory).
    rtGraphExecUpdateResult update(const Graph& graph, std::string* why);
    /// rtGraphExecKernelNodeSetParams / rtGraphExecMemcpyNodeSetParams (graph.h has no memset counterpart): `node`
    /// is a handle of the graph this exec was instantiated from (Program::node_handles); the params were validated
    /// by the caller. INVALID_VALUE when the node is not one of this exec's, or not of that kind.
    void set_kernel_params(uint64_t node, const KernelParams& params);
    void set_memory_params(uint64_t node, const MemoryParams& params);
    /// rtGraphExecSetBuffer: `ptr` (at least the named size) replaces the buffer named `name` for the next launches.
    void set_buffer(const std::string& name, void* ptr, size_t bytes);
    rtGraphMemoryInfo memory_info();
    void* arena() const { return arena_; }

private:
    /// Changes the program: `change(program, changed)` edits it and lists the commands it changed. In place when no
    /// launch holds the program (the lowering is refreshed command by command), else on a copy, lowered anew;
    /// launches already queued keep the old one. Caller holds mutex_; `change` must not fail half-way.
    template <class Change>
    void modify(Change&& change);
    /// Whether a queued launch may still read program_ or lowered_.
    bool held_by_launches() const;
    /// The command made from node handle `node`; INVALID_VALUE if none.
    uint32_t command_of_handle(uint64_t node, const char* api) const;
    /// Builds the command `index` would become with new operands (graph addresses), and its relocations; refuses
    /// operands the memory plan cannot accept (check_uses) — only for allocations it did not use already.
    void restage(const Command& staged, uint32_t index, std::vector<Relocation>& relocations);
    void replay(Stream& stream, uint64_t op);
    /// Queues on `stream` the wait for the previous launch when it was on another stream. Caller holds mutex_.
    void order_after_previous(Stream& stream);
    /// After a launch on `queue`: what order_after_previous needs of it. Caller holds mutex_.
    void mark_launch_end(backend::Queue& queue);

    CoreDevice* const device_;
    const uint64_t trace_id_ = trace::next_id();  // the launches' "graph" in traces
    std::mutex mutex_;  // serialises launches, updates and bindings of this exec (never held while waiting)
    std::shared_ptr<Program> program_;
    std::shared_ptr<backend::GraphExecutable> lowered_;  // null: replayed by the core
    bool lower_ = true;  // whether to ask the backend (RUNTIME_GRAPH_LOWERING=0: never)
    long program_refs_ = 1;  // program_.use_count() when no launch holds it (the lowering may hold one too)
    void* arena_ = nullptr;
    uint64_t kernel_nodes_ = 0;  // kernel commands of the program (updates keep every command's type)
    std::weak_ptr<Stream> last_stream_;  // the stream of the previous launch
    // Ordering across streams. While every launch so far went to one stream, a launch records nothing (recording
    // costs a queued operation per launch): last_end_ is its stream's position after it. From the first launch on
    // a second stream on, order_event_ is recorded right after every launch, on its stream, so that a launch on
    // another stream waits for exactly the previous launch (neither what was queued after it nor its failures).
    std::unique_ptr<backend::Event> order_event_;
    bool several_streams_ = false;
    uint64_t last_end_ = 0;
    std::vector<std::pair<uint64_t, uint32_t>> by_handle_;  // node handle -> command, sorted
};

}  // namespace rt::graph
