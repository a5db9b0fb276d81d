// An executable graph (rtGraphExec_t): a program, its arena, and the backend's lowering; launched as one stream
// operation, updated between launches without disturbing launches already queued.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "backends/backend.hpp"
#include "graph/graph.hpp"
#include "graph/program.hpp"

namespace rt {
class Stream;
}

namespace rt::graph {

class Graph;

class GraphExec {
public:
    /// Takes an instantiated (or loaded) program: allocates its arena on program->device, applies its relocations
    /// when every named buffer is bound, and lowers it (Device::compile_graph_impl).
    explicit GraphExec(std::shared_ptr<Program> program);
    ~GraphExec();  ///< the arena and the program go once the launches queued so far have completed (timeline)

    CoreDevice& device() const;
    /// The current program (launches take a reference; an update replaces it or changes it in place when no launch
    /// holds it). Caller holds mutex().
    const std::shared_ptr<Program>& program() const { return program_; }
    std::mutex& mutex() { return mutex_; }

    /// One operation of `stream` (a stream of device()): waits for the program's waited events and for the previous
    /// launch of this exec if it was on another stream, runs the program (lowered, or replayed command by command),
    /// then records the program's recorded events. Unbound named buffer: INVALID_VALUE naming it.
    void launch(Stream& stream);
    /// rtGraphUpload: allocations and lowering are done at construction, so this only checks `stream`.
    void upload(Stream& stream);

    /// rtGraphExecUpdate: `graph` must match the instantiated graph node for node; returns the result (SUCCESS or the
    /// first difference, whose node the thrown error names — GRAPH_EXEC_UPDATE_FAILURE).
    rtGraphExecUpdateResult update(const Graph& graph);
    /// rtGraphExecKernelNodeSetParams / rtGraphExecMemcpyNodeSetParams: `node` is a handle of the graph this exec was
    /// instantiated from (Program::node_handles); the params were validated by the caller.
    void set_kernel_params(uint64_t node, const KernelParams& params);
    void set_memory_params(uint64_t node, const MemoryParams& params);
    /// rtGraphExecSetBuffer.
    void set_buffer(const std::string& name, void* ptr, size_t bytes);
    rtGraphMemoryInfo memory_info() const;
    void* arena() const { return arena_; }

private:
    /// Makes program_ exclusively ours before it changes (copies it, and lowers the copy, if a launch holds it).
    Program& writable();

    std::mutex mutex_;  // serialises launches, updates and bindings of this exec (never held while waiting)
    std::shared_ptr<Program> program_;
    std::shared_ptr<backend::GraphExecutable> lowered_;  // null: replayed by the core
    void* arena_ = nullptr;
    std::weak_ptr<Stream> last_stream_;  // the stream of the previous launch
};

}  // namespace rt::graph
