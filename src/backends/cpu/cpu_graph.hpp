// The cpu device's executable graphs: a program lowered to a compact command array, replayed with dependency
// counters on the executor pool (chains inline on one thread, ready branches shared with idle executors).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cpu/cpu_executor.hpp"
#include "backends/cpu/cpu_kernel.hpp"
#include "core/error.hpp"
#include "core/spin_lock.hpp"
#include "observe/trace.hpp"

namespace rt::graph {
struct Program;
}

namespace rt::cpu {

/// A graph::Program lowered for the cpu device (Device::compile_graph_impl). Everything a replay needs is resolved
/// here, once: each kernel node's CpuFunction, shape, packed argument values and their pointers; each copy's and
/// fill's operands; each host node's function; the successor lists and predecessor counts. A replay checks nothing
/// but the stream's pending failure. Launches of one executable run one at a time (the core serialises them), so
/// the dependency counters live here, and each is restored as its node becomes ready: no reset per launch.
class CpuGraph final : public backend::GraphExecutable, private SharedWork {
public:
    /// Lowers `program` (validated when it was instantiated). Throws rt::Error for a command the cpu device cannot
    /// run (a kernel of another backend) or a program that breaks its own invariants.
    explicit CpuGraph(std::shared_ptr<const graph::Program> program);
    ~CpuGraph();

    void refresh_impl(size_t index) override;

    /// Whether some node calls a host function: the launch then runs on executors only (host functions never run
    /// on a host thread inside a synchronize).
    bool has_host_nodes() const { return host_nodes_; }

    /// Runs every node once, each after its predecessors, on the calling thread plus idle executors of
    /// `executor`; returns when every node has completed. A failing node reports to report.slot, naming its
    /// label; the nodes not started by then are skipped. Never throws.
    /// `traced`: the launch's trace key; every node that runs is then a span of its track (cat graph_node).
    void replay(Executor& executor, const backend::LaunchReport& report, unsigned long long stream_min_bytes,
                const trace::Key* traced = nullptr) noexcept;

private:
    enum class Kind : uint8_t { nop, kernel, copy, fill, host };
    /// One command, as compact as replay wants it (the operands of its kind only).
    struct Node {
        Kind kind = Kind::nop;
        uint8_t value = 0;               // fill
        uint32_t first_successor = 0;    // successors_[first_successor .. + successor_count)
        uint32_t successor_count = 0;
        uint32_t predecessor_count = 0;  // > 1: pending_[i] counts the arrivals still missing
        const char* label = nullptr;     // Program::labels[i], for failure messages
        union {
            struct {
                const CpuFunction* function;  // kept alive by the program's command
                void* const* args;            // args_[i].pointers
                backend::LaunchShape shape;
            } kernel;
            struct {
                void* dst;
                const void* src;
                size_t bytes;
            } memory;
            struct {
                rtHostFn_t fn;
                void* user_data;
            } host;
        };
        Node() : kernel{} {}
    };
    /// A kernel node's argument values, copied as a stream launch copies them, and the pointers handed to its entry.
    struct KernelArgs {
        PackedArgs values;
        std::vector<void*> pointers;
    };

    void lower(size_t index);                 // nodes_[index] (and args_[index]) from the program's command
    /// Runs ready nodes `batch[0 .. count)`, each with what becomes ready after it, then counts them finished.
    void run_batch(const uint32_t* batch, size_t count) noexcept;
    /// Runs `first` and the chain of nodes that become ready after it on this thread (sharing the others); returns
    /// how many ran. An arrival at `next_join` is left to the caller's next node (`carried`), which arrives there too.
    uint32_t chain(uint32_t first, uint32_t next_join, uint32_t& carried) noexcept;
    void execute(const Node& node) noexcept;
    void run_node(const Node& node) noexcept;
    void execute_traced(const Node& node) noexcept;
    bool arrive(uint32_t node) noexcept;  // a predecessor of `node` completed: true if it is now ready
    /// Shares ready nodes with the executors (waking an idle one, or all for several nodes).
    void push(const uint32_t* nodes, size_t count) noexcept;
    size_t take(uint32_t* out) noexcept;
    void finished(uint32_t nodes) noexcept;  // `nodes` more have run (or were skipped)
    void wait_for_work() noexcept;           // the launching thread, while helpers run the last chains
    void wake_launcher() noexcept;

    // SharedWork: idle executors take ready nodes while there are some.
    bool has_work() const override { return ready_count_.load(std::memory_order_relaxed) != 0; }
    void help() noexcept override;

    std::shared_ptr<const graph::Program> program_;  // the commands' functions, labels and host operands
    std::vector<Node> nodes_;
    std::vector<KernelArgs> args_;  // per node; used by kernel nodes (never resized: pointers into it stay valid)
    std::vector<uint32_t> successors_;
    std::vector<uint32_t> roots_;
    std::unique_ptr<std::atomic<uint32_t>[]> pending_;  // per node with several predecessors
    bool host_nodes_ = false;
    bool forks_ = false;  // some node (or the start) has several successors: the launch may use helpers

    // ---- the running launch (one at a time)
    std::atomic<bool> running_{false};  // guards the counters against a launch the core failed to serialise
    Executor* executor_ = nullptr;
    AsyncErrorSlot* slot_ = nullptr;
    uint64_t op_index_ = 0;
    const trace::Key* traced_ = nullptr;  // the running launch's trace key (null: not traced)
    unsigned long long stream_min_bytes_ = 0;
    size_t threads_ = 1;
    // Ready nodes beyond the one each thread continues with (a stack: at most one entry per node).
    alignas(64) SpinLock ready_lock_;
    std::unique_ptr<uint32_t[]> ready_;
    std::atomic<size_t> ready_count_{0};
    // Nodes not yet run; the launching thread returns when it reaches 0. Parked launcher: woken through signal_.
    alignas(64) std::atomic<uint32_t> unfinished_{0};
    std::atomic<bool> parked_{false};
    std::atomic<uint32_t> signal_{0};
};

}  // namespace rt::cpu
