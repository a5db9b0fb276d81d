// The cpu device's executable graphs: lowering (handles and registry already checked at instantiate) and replay
// with dependency counters: a thread finishing a node continues with a successor that became ready, and shares the
// others with idle executors, so chains run without hand-offs and independent branches in parallel.
#include "backends/cpu/cpu_graph.hpp"

#include <algorithm>

#include "backends/cpu/cpu_copy.hpp"
#include "backends/cpu/cpu_module.hpp"
#include "core/module.hpp"
#include "graph/program.hpp"

namespace rt::cpu {

namespace {
constexpr uint32_t kNone = UINT32_MAX;
/// Ready nodes are shared in groups of up to this many: one lock round trip per group, and helpers can start on the
/// first group of a wide fan-out while the rest is still being counted.
constexpr size_t kShareBatch = 64;
/// A thread takes at most this many shared nodes at once (fewer when few are ready: the others stay for helpers).
constexpr size_t kTakeBatch = 16;
}  // namespace

CpuGraph::CpuGraph(std::shared_ptr<const graph::Program> program) : program_(std::move(program)) {
    const graph::Program& p = *program_;
    const size_t n = p.commands.size();
    if (n >= kNone) fail(RT_ERROR_NOT_SUPPORTED, "a graph of %zu nodes is more than the cpu device runs", n);
    if (p.labels.size() != n)
        fail(RT_ERROR_UNKNOWN, "internal error: a graph program of %zu commands has %zu labels", n, p.labels.size());
    nodes_.resize(n);
    args_.resize(n);
    successors_.reserve(p.successors.size());
    pending_ = std::make_unique<std::atomic<uint32_t>[]>(n);
    ready_ = std::make_unique<uint32_t[]>(n);
    for (size_t i = 0; i < n; ++i) {
        const graph::Command& c = p.commands[i];
        Node& node = nodes_[i];
        if (static_cast<size_t>(c.first_successor) + c.successor_count > p.successors.size())
            fail(RT_ERROR_UNKNOWN, "internal error: %s has successors past the program's edge list", p.labels[i].c_str());
        node.first_successor = static_cast<uint32_t>(successors_.size());
        node.successor_count = c.successor_count;
        node.predecessor_count = c.predecessor_count;
        for (uint32_t j = 0; j < c.successor_count; ++j) {
            const uint32_t s = p.successors[c.first_successor + j];
            // Topological order is what makes every replay finish: a successor always comes later.
            if (s <= i || s >= n)
                fail(RT_ERROR_UNKNOWN, "internal error: %s has a successor out of topological order", p.labels[i].c_str());
            successors_.push_back(s);
        }
        if (c.successor_count > 1) forks_ = true;
        pending_[i].store(c.predecessor_count, std::memory_order_relaxed);
        lower(i);
        if (node.kind == Kind::host) host_nodes_ = true;
    }
    for (uint32_t r : p.roots) {
        if (r >= n || p.commands[r].predecessor_count != 0)
            fail(RT_ERROR_UNKNOWN, "internal error: root %u of a graph program is not a command without predecessors", r);
        roots_.push_back(r);
    }
    if (roots_.size() > 1) forks_ = true;
    if (n && roots_.empty()) fail(RT_ERROR_UNKNOWN, "internal error: a graph program of %zu commands has no root", n);
}

CpuGraph::~CpuGraph() = default;

void CpuGraph::lower(size_t index) {
    const graph::Command& c = program_->commands[index];
    Node& node = nodes_[index];
    node.label = program_->labels[index].c_str();
    switch (c.type) {
        case RT_GRAPH_NODE_TYPE_KERNEL: {
            // Kernels of a cpu device's graph were validated against this device: its functions are CpuFunctions.
            const auto* f = c.function ? dynamic_cast<const CpuFunction*>(c.function->impl().get()) : nullptr;
            if (!f) fail(RT_ERROR_INVALID_VALUE, "%s: its kernel is not one of the cpu device's", node.label);
            const std::vector<size_t>& sizes = f->arg_sizes();
            if (c.arg_offsets.size() != sizes.size())
                fail(RT_ERROR_INVALID_VALUE, "%s: kernel '%s' takes %zu argument(s), the node holds %zu", node.label,
                     f->name().c_str(), sizes.size(), c.arg_offsets.size());
            std::vector<void*> values(sizes.size());
            c.argument_pointers(values.data());
            KernelArgs& a = args_[index];
            a.values.pack(sizes, values.data());
            a.pointers.resize(sizes.size());
            a.values.pointers(sizes, a.pointers.data());
            node.kind = Kind::kernel;
            node.kernel.function = f;
            node.kernel.args = a.pointers.data();
            node.kernel.shape = c.shape;
            break;
        }
        case RT_GRAPH_NODE_TYPE_MEMCPY:
            node.kind = c.elided ? Kind::nop : Kind::copy;  // elided: 0 bytes (operands maybe null), or onto itself
            node.memory = {c.dst, c.src, c.bytes};
            break;
        case RT_GRAPH_NODE_TYPE_MEMSET:
            node.kind = c.elided ? Kind::nop : Kind::fill;
            node.value = c.value;
            node.memory = {c.dst, nullptr, c.bytes};
            break;
        case RT_GRAPH_NODE_TYPE_HOST:
            node.kind = Kind::host;
            node.host = {c.fn, c.user_data};
            break;
        default:
            // GRAPH (a child graph's node, left as the join after the child's inlined nodes), EMPTY, MEM_ALLOC, MEM_FREE
            // (the arena's memory), WAIT_EVENT, EVENT_RECORD (the core orders the whole launch after the waited events
            // and records the recorded ones after it): nothing to run.
            node.kind = Kind::nop;
            break;
    }
}

void CpuGraph::refresh_impl(size_t index) {
    if (index >= nodes_.size())
        fail(RT_ERROR_UNKNOWN, "internal error: refresh of command %zu of a %zu-command graph", index, nodes_.size());
    const Kind before = nodes_[index].kind;
    lower(index);
    if (nodes_[index].kind != before)
        fail(RT_ERROR_UNKNOWN, "internal error: %s changed its kind in an update", nodes_[index].label);
}

// ---------------------------------------------------------------- replay

void CpuGraph::replay(Executor& executor, const backend::LaunchReport& report,
                      unsigned long long stream_min_bytes, const trace::Key* traced) noexcept {
    if (nodes_.empty()) return;
    if (running_.exchange(true, std::memory_order_acquire)) {
        report.slot->set(RT_ERROR_ILLEGAL_STATE,
                         "internal error: an executable graph was launched while its previous launch was running");
        return;
    }
    executor_ = &executor;
    slot_ = report.slot;
    op_index_ = report.op_index;
    traced_ = traced;
    stream_min_bytes_ = stream_min_bytes;
    if (!forks_) {
        uint32_t carried = 0;
        chain(roots_[0], kNone, carried);  // a single chain: everything on this thread, no counters, no executor
        running_.store(false, std::memory_order_release);
        return;
    }
    threads_ = static_cast<size_t>(std::max(1, executor.thread_count()));
    unfinished_.store(static_cast<uint32_t>(nodes_.size()), std::memory_order_relaxed);
    executor.share(*this);
    if (roots_.size() > 1) push(roots_.data() + 1, roots_.size() - 1);
    run_batch(roots_.data(), 1);
    uint32_t batch[kTakeBatch];
    for (;;) {
        if (const size_t k = take(batch)) {
            run_batch(batch, k);
            continue;
        }
        if (unfinished_.load(std::memory_order_acquire) == 0) break;  // every node's effects are visible now
        wait_for_work();
    }
    executor.retire(*this);
    running_.store(false, std::memory_order_release);
}

void CpuGraph::help() noexcept {
    uint32_t batch[kTakeBatch];
    while (const size_t k = take(batch)) run_batch(batch, k);
}

void CpuGraph::run_batch(const uint32_t* batch, size_t count) noexcept {
    uint32_t ran = 0, carried = 0;
    for (size_t j = 0; j < count; ++j) {
        // The join the next node of the batch arrives at first, if it has a single successor: arrivals there are
        // folded into one decrement (the siblings of a fan-in), which cannot delay the join: it waits for them all.
        uint32_t next_join = kNone;
        if (j + 1 < count) {
            const Node& next = nodes_[batch[j + 1]];
            if (next.successor_count == 1) next_join = successors_[next.first_successor];
        }
        ran += chain(batch[j], next_join, carried);
    }
    finished(ran);
}

uint32_t CpuGraph::chain(uint32_t first, uint32_t next_join, uint32_t& carried) noexcept {
    uint32_t ran = 0;
    uint32_t i = first;
    for (;;) {
        const Node& node = nodes_[i];
        execute(node);
        ++ran;
        const uint32_t* s = successors_.data() + node.first_successor;
        const uint32_t count = node.successor_count;
        if (count == 1) {  // the chain: no buffer, no sharing
            const uint32_t next = s[0];
            const uint32_t preds = nodes_[next].predecessor_count;
            if (preds > 1) {
                if (next == next_join) {  // the batch's next node arrives here too: one decrement for both
                    ++carried;
                    return ran;
                }
                // `carried` arrivals of the batch's previous nodes are for this join (the first one this node
                // reaches: next_join of the previous node).
                const uint32_t arrivals = 1 + carried;
                carried = 0;
                if (pending_[next].fetch_sub(arrivals, std::memory_order_acq_rel) != arrivals) return ran;
                pending_[next].store(preds, std::memory_order_relaxed);  // see arrive()
            }
            i = next;
            continue;
        }
        // Several successors: continue with the first that became ready, share the others.
        uint32_t next = kNone;
        uint32_t share[kShareBatch];
        size_t shared = 0;
        for (uint32_t j = 0; j < count; ++j) {
            if (!arrive(s[j])) continue;
            if (next == kNone) {
                next = s[j];
                continue;
            }
            share[shared++] = s[j];
            if (shared == kShareBatch) {
                push(share, shared);
                shared = 0;
            }
        }
        if (shared) push(share, shared);
        if (next == kNone) return ran;
        i = next;
    }
}

void CpuGraph::execute(const Node& node) noexcept {
    if (traced_) [[unlikely]] {
        execute_traced(node);
        return;
    }
    run_node(node);
}

void CpuGraph::execute_traced(const Node& node) noexcept {
    if (node.kind == Kind::nop) return;  // no work: no span
    static constexpr const char* kTypes[] = {"empty", "kernel", "memcpy", "memset", "host"};
    trace::Op op;
    op.cat = trace::Cat::graph_node;
    op.track = traced_->track;
    op.op = traced_->op;
    op.enqueue_ns = traced_->enqueue_ns;
    op.id = static_cast<uint64_t>(&node - nodes_.data());
    op.kind = kTypes[static_cast<size_t>(node.kind)];
    op.name = trace::intern(node.kind == Kind::kernel ? node.kernel.function->name().c_str() : node.label);
    const bool failed_before = slot_->failed();
    op.start_ns = trace::now();
    run_node(node);
    op.end_ns = trace::now();
    op.status = failed_before ? trace::Status::skipped : slot_->failed() ? trace::Status::failed : trace::Status::ok;
    trace::submit(op);
}

void CpuGraph::run_node(const Node& node) noexcept {
    // A failed node skips every node not started yet (its successors among them). One acquire load per node.
    if (slot_->failed()) return;
    switch (node.kind) {
        case Kind::kernel:
            run_kernel(*executor_, *node.kernel.function, node.kernel.shape, node.kernel.args,
                       backend::LaunchReport{slot_, op_index_, node.label}, stream_min_bytes_);
            break;
        case Kind::copy:
            run_copy(*executor_, node.memory.dst, node.memory.src, node.memory.bytes);
            break;
        case Kind::fill:
            run_fill(*executor_, node.memory.dst, node.value, node.memory.bytes);
            break;
        case Kind::host:
            backend::run_host_call(backend::HostCall{node.host.fn, node.host.user_data, slot_, op_index_, node.label});
            break;
        case Kind::nop:
            break;
    }
}

bool CpuGraph::arrive(uint32_t i) noexcept {
    const uint32_t preds = nodes_[i].predecessor_count;
    if (preds <= 1) return true;
    // acq_rel: the last arrival sees every predecessor's effects (a release sequence of read-modify-writes).
    if (pending_[i].fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    // Restored for the next launch: nothing else touches it in this one (all its predecessors have arrived), and the
    // next launch starts after this one has completed.
    pending_[i].store(preds, std::memory_order_relaxed);
    return true;
}

void CpuGraph::push(const uint32_t* nodes, size_t count) noexcept {
    {
        std::lock_guard lock(ready_lock_);
        const size_t size = ready_count_.load(std::memory_order_relaxed);
        std::copy(nodes, nodes + count, ready_.get() + size);  // each node is ready once per launch: room for all
        ready_count_.store(size + count);  // seq_cst: pairs with the parked launcher's check (wait_for_work)
    }
    executor_->offered(count > 1);  // also brings back helpers that left while the pool was empty
    wake_launcher();
}

size_t CpuGraph::take(uint32_t* out) noexcept {
    if (ready_count_.load(std::memory_order_relaxed) == 0) return 0;
    std::lock_guard lock(ready_lock_);
    const size_t size = ready_count_.load(std::memory_order_relaxed);
    // A share of what is ready, so that the other participants find some too.
    const size_t k = std::min(size, std::clamp<size_t>(size / (2 * threads_), 1, kTakeBatch));
    std::copy(ready_.get() + (size - k), ready_.get() + size, out);
    ready_count_.store(size - k, std::memory_order_relaxed);
    return k;
}

void CpuGraph::finished(uint32_t nodes) noexcept {
    if (nodes && unfinished_.fetch_sub(nodes, std::memory_order_acq_rel) == nodes) wake_launcher();
}

void CpuGraph::wake_launcher() noexcept {
    if (parked_.load()) {  // seq_cst: pairs with wait_for_work's store
        signal_.fetch_add(1);
        signal_.notify_one();
    }
}

void CpuGraph::wait_for_work() noexcept {
    // Helpers run the last chains: spin briefly (a node's successors may become ready at once), then park.
    const int64_t until = now_ns() + spin_nanoseconds();
    while (ready_count_.load(std::memory_order_relaxed) == 0 && unfinished_.load(std::memory_order_relaxed) != 0) {
        if (now_ns() >= until) {
            parked_.store(true);
            const uint32_t seen = signal_.load();
            // Re-checked after announcing: a push or the last finish either sees parked_ or is seen here.
            if (ready_count_.load() == 0 && unfinished_.load() != 0) signal_.wait(seen);
            parked_.store(false);
            return;
        }
        for (int i = 0; i < 16; ++i) cpu_relax();
    }
}

}  // namespace rt::cpu
