// Executable graphs on cuda: a graph::Program lowered to a native CUDA graph (cuGraph* through the driver shim),
// launched with one cuGraphLaunch; its host nodes run through the core's trampoline and its faults name the node.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cuda/cuda_driver.hpp"

namespace rt {
class AsyncErrorSlot;
namespace graph {
struct Program;
}
}  // namespace rt

namespace rt::cuda {

class CudaDevice;

/// Where a failed rt_assert happened (the fault record's block and thread indices).
struct FaultSite {
    unsigned block[3];
    unsigned thread[3];
};

/// The kernel nodes of a lowered graph: what names the node a fault found after its launch came from (CUDA reports
/// a fault, or rt_assert's record, without saying which kernel). Immutable: a change of the graph makes a new one.
struct GraphKernels {
    struct Kernel {
        std::string label;  ///< Program::labels: "node 3 (kernel 'scale')"
        std::string name;   ///< the kernel's
        backend::LaunchShape shape;
    };
    std::vector<Kernel> kernels;

    /// The subject of a fault message for the graph launched as operation `op`: "kernel 'scale' (node 3 of the graph
    /// launched as operation #12 on the stream, <seen>)" when one kernel node can have failed — the only one, or the
    /// only one whose shape holds `site` —, else the graph's launch with the kernel nodes that can have. `seen`:
    /// "the last launch on it before the failure was seen".
    std::string describe(uint64_t op, const FaultSite* site, const char* seen) const;
};

/// What the host nodes of one native graph read when they run: per host node the function (or the pageable
/// host-to-host copy) it runs and its label, and per launch in flight the stream's error slot and operation number
/// (host nodes keep one userData for every launch; the n-th run of a node belongs to the n-th launch, since launches
/// of one executable graph run one after the other). The device keeps it while launches are in flight: the driver
/// may run a host node after the executable graph that queued it is gone. Thread-safe.
class GraphHostNodes : public std::enable_shared_from_this<GraphHostNodes> {
public:
    struct Node {
        GraphHostNodes* owner = nullptr;
        uint32_t command = 0;
        bool copy = false;  ///< a host-to-host copy of pageable memory, run in stream order as the stream path does
        rtHostFn_t fn = nullptr;
        void* user_data = nullptr;
        void* dst = nullptr;
        const void* src = nullptr;
        size_t bytes = 0;
        std::string label;
        std::atomic<uint64_t> runs{0};  ///< how many times it ran: the number of the launch it runs for next
    };

    explicit GraphHostNodes(CudaDevice& device) : device_(device) {}
    /// The node for `command` (added in command order; addresses stay valid: they are the nodes' userData).
    Node& add(uint32_t command);
    Node* find(uint32_t command);
    std::deque<Node>& nodes() { return nodes_; }
    /// User functions among the nodes (each counts as a host function queued on the stream while it is in flight).
    uint32_t user_calls() const;
    /// Whether a launch of these nodes is in flight (its host nodes have not all run).
    bool in_flight();

    /// Before cuGraphLaunch: the launch's context, handed to its host nodes in order.
    void begin_launch(AsyncErrorSlot* slot, uint64_t op, std::atomic<int>* pending_host_calls);
    /// cuGraphLaunch failed: the launch begun last never runs.
    void cancel_launch() noexcept;
    /// The driver's callback for a host node (userData: its Node).
    static void CUDA_CB trampoline(void* node);

private:
    struct Launch {
        AsyncErrorSlot* slot;
        uint64_t op;
        std::atomic<int>* pending;
        uint32_t left;  // host nodes of this launch that have not run
    };
    void run(Node& node) noexcept;

    CudaDevice& device_;
    std::deque<Node> nodes_;
    std::mutex mutex_;             // launches_, first_
    std::deque<Launch> launches_;  // in flight, oldest first
    uint64_t first_ = 0;           // the launch number of launches_.front()
};

/// A program lowered to a native CUDA graph: one node per command (kernel, memcpy, memset, host and empty nodes, the
/// program's edges as dependencies), instantiated once. Built when every operand is known (a named buffer unbound
/// at instantiation is bound before the first launch) and rebuilt when a change cannot be made in place; other
/// changes go into the instantiated graph (cuGraphExec*SetParams), which leaves launches already queued as they were.
class CudaGraph final : public backend::GraphExecutable {
public:
    CudaGraph(CudaDevice& device, std::shared_ptr<const graph::Program> program);
    ~CudaGraph() override;
    /// Takes command `index`'s new operands into the instantiated graph; a change of the node's form (a copy or fill
    /// of 0 bytes, a host-to-host copy that became pageable) rebuilds the graph at the next launch. May be called while
    /// launches are queued: they keep what they were launched with (the driver's and GraphHostNodes' copies).
    void refresh_impl(size_t index) override;
    /// Queues one launch on `stream` (the device's context is current), its failures reported to report.slot.
    void launch(CUstream stream, const backend::LaunchReport& report, std::atomic<int>* pending_host_calls);
    /// The kernel nodes, for naming a fault seen after a launch (null when the graph has no kernel node).
    std::shared_ptr<const GraphKernels> kernels() const { return kernels_; }

private:
    /// How a command became a node: its kind of node, so that a change that needs another kind rebuilds the graph.
    enum class Form : uint8_t { empty, kernel, memcpy, memset, host_call, host_copy };
    Form form_of(uint32_t command) const;
    /// Builds and instantiates the native graph from the program (the old one, if any, released first).
    void build();
    /// Adds the node of `command` after `deps`; returns it.
    CUgraphNode add_node(uint32_t command, const std::vector<CUgraphNode>& deps);
    /// Takes command `index`'s operands into the instantiated graph, whose node has the same form. Throws.
    void update_node(uint32_t index);
    void release_native() noexcept;
    /// kernels_ from the program's kernel commands.
    void index_kernels();

    CudaDevice& device_;
    const Driver& d_;
    std::shared_ptr<const graph::Program> program_;
    CUgraph graph_ = nullptr;
    CUgraphExec exec_ = nullptr;
    std::vector<CUgraphNode> nodes_;  // per command
    std::vector<Form> forms_;         // per command
    std::shared_ptr<GraphHostNodes> host_;  // null: no host node
    std::shared_ptr<const GraphKernels> kernels_;
    bool stale_ = true;           // the native graph must be built (again) before the next launch
    bool kernels_stale_ = false;  // a kernel command changed: kernels_ is made again at the next launch
};

}  // namespace rt::cuda
