// Executable graphs lowered to native CUDA graphs: one node per command, instantiated once, launched with cuGraphLaunch.
#include "backends/cuda/cuda_graph.hpp"

#include <cstring>

#include "backends/cuda/cuda_backend.hpp"
#include "core/error.hpp"
#include "core/module.hpp"
#include "core/timeline.hpp"
#include "graph/program.hpp"

namespace rt::cuda {

namespace {

CUdeviceptr D(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

/// A kernel command as CUDA's kernel node parameters: the same parameter array launch_impl passes (the extent first
/// for a bounded kernel). The driver reads the values during the call that takes `params`.
struct KernelNode {
    explicit KernelNode(const graph::Command& c)
        : function(static_cast<const CudaFunction&>(*c.function->impl())),
          pointers(pointers_of(c)),
          launch(function, c.shape, pointers.data()) {
        params.func = function.handle();
        params.gridDimX = c.shape.grid[0];
        params.gridDimY = c.shape.grid[1];
        params.gridDimZ = c.shape.grid[2];
        params.blockDimX = c.shape.block[0];
        params.blockDimY = c.shape.block[1];
        params.blockDimZ = c.shape.block[2];
        params.sharedMemBytes = static_cast<unsigned>(c.shape.shared_bytes);
        params.kernelParams = launch.get();
    }
    static std::vector<void*> pointers_of(const graph::Command& c) {
        std::vector<void*> p(c.arg_offsets.size());
        c.argument_pointers(p.data());
        return p;
    }
    const CudaFunction& function;
    std::vector<void*> pointers;
    LaunchParams launch;
    CUDA_KERNEL_NODE_PARAMS params{};
};

/// A copy as a memcpy node: unified addresses on both sides, as cuMemcpyAsync takes them on the stream path (the driver
/// tells device, pinned and pageable memory apart).
CUDA_MEMCPY3D copy_params(const graph::Command& c) {
    CUDA_MEMCPY3D m{};
    m.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    m.srcDevice = D(c.src);
    m.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    m.dstDevice = D(c.dst);
    m.WidthInBytes = c.bytes;
    m.Height = 1;
    m.Depth = 1;
    return m;
}

CUDA_MEMSET_NODE_PARAMS fill_params(const graph::Command& c) {
    CUDA_MEMSET_NODE_PARAMS m{};
    m.dst = D(c.dst);
    m.value = c.value;
    m.elementSize = 1;
    m.width = c.bytes;
    m.height = 1;
    return m;
}

/// Whether a failed rt_assert at `site` can be of a launch of `shape`: the block and thread lie in its grid and
/// blocks, and the item in its exact global size (items past it return before the kernel's body).
bool holds(const backend::LaunchShape& shape, const FaultSite& site) {
    for (int d = 0; d < 3; ++d)
        if (site.block[d] >= shape.grid[d] || site.thread[d] >= shape.block[d] ||
            1ull * site.block[d] * shape.block[d] + site.thread[d] >= shape.global[d])
            return false;
    return true;
}

}  // namespace

// ------------------------------------------------------------------------------------------------ kernels

std::string GraphKernels::describe(uint64_t op, const FaultSite* site, const char* seen) const {
    std::vector<const Kernel*> candidates;
    for (const Kernel& k : kernels)
        if (!site || holds(k.shape, *site)) candidates.push_back(&k);
    const bool placed = !candidates.empty();
    if (!placed)  // no shape holds it (a record left by another stream's kernel): every kernel node may be meant
        for (const Kernel& k : kernels) candidates.push_back(&k);
    if (candidates.size() == 1)
        return format("kernel '%s' (%s, %s)", candidates[0]->name.c_str(),
                      backend::describe_operation(op, candidates[0]->label.c_str()).c_str(), seen);
    constexpr size_t kListed = 4;
    std::string list;
    for (size_t i = 0; i < candidates.size() && i < kListed; ++i) list += (i ? ", " : "") + candidates[i]->label;
    if (candidates.size() > kListed) list += format(" and %zu more", candidates.size() - kListed);
    return format("a kernel of the graph launched as operation #%llu on the stream (%s; %s: %s)",
                  static_cast<unsigned long long>(op), seen,
                  site && placed ? "the kernel nodes whose launch holds that block and thread" : "its kernel nodes",
                  list.c_str());
}

// ------------------------------------------------------------------------------------------------ host nodes

GraphHostNodes::Node& GraphHostNodes::add(uint32_t command) {
    Node& n = nodes_.emplace_back();
    n.owner = this;
    n.command = command;
    return n;
}

GraphHostNodes::Node* GraphHostNodes::find(uint32_t command) {
    for (Node& n : nodes_)
        if (n.command == command) return &n;
    return nullptr;
}

uint32_t GraphHostNodes::user_calls() const {
    uint32_t n = 0;
    for (const Node& node : nodes_) n += node.copy ? 0 : 1;
    return n;
}

bool GraphHostNodes::in_flight() {
    std::lock_guard lock(mutex_);
    return !launches_.empty();
}

void GraphHostNodes::begin_launch(AsyncErrorSlot* slot, uint64_t op, std::atomic<int>* pending_host_calls) {
    std::lock_guard lock(mutex_);
    const bool first = launches_.empty();
    launches_.push_back(Launch{slot, op, pending_host_calls, static_cast<uint32_t>(nodes_.size())});
    if (first) {
        try {
            device_.track_graph_host_nodes(shared_from_this());
        } catch (...) {
            launches_.pop_back();
            throw;
        }
    }
}

void GraphHostNodes::cancel_launch() noexcept {
    std::shared_ptr<GraphHostNodes> last;  // released after the lock (the executable graph holds another reference)
    std::lock_guard lock(mutex_);
    launches_.pop_back();
    if (launches_.empty()) last = device_.untrack_graph_host_nodes(this);
}

void CUDA_CB GraphHostNodes::trampoline(void* node) {
    DriverThread driver_thread;  // CUDA calls from the function are refused, releases it asks for deferred
    auto* n = static_cast<Node*>(node);
    n->owner->run(*n);
}

void GraphHostNodes::run(Node& n) noexcept {
    const uint64_t number = n.runs.fetch_add(1, std::memory_order_relaxed);
    Launch launch{};
    {
        std::lock_guard lock(mutex_);
        if (number < first_ || number - first_ >= launches_.size()) return;  // never: each launch runs each node once
        launch = launches_[number - first_];
    }
    if (n.copy) {
        std::memmove(n.dst, n.src, n.bytes);  // host to host, in stream order (as CudaQueue::copy_impl does)
    } else {
        backend::run_host_call(backend::HostCall{n.fn, n.user_data, launch.slot, launch.op, n.label.c_str()});
        if (launch.pending) launch.pending->fetch_sub(1);
    }
    std::shared_ptr<GraphHostNodes> last;  // the device's reference, released after the lock: it may be the last one
    std::lock_guard lock(mutex_);
    --launches_[number - first_].left;
    while (!launches_.empty() && launches_.front().left == 0) {
        launches_.pop_front();
        ++first_;
    }
    if (launches_.empty()) last = device_.untrack_graph_host_nodes(this);
}

// ------------------------------------------------------------------------------------------------ the graph

CudaGraph::CudaGraph(CudaDevice& device, std::shared_ptr<const graph::Program> program)
    : device_(device), d_(device.driver()), program_(std::move(program)) {
    // With a named buffer still unbound (a loaded graph) operands are not known yet: built at the first launch.
    if (!program_->unbound_name()) build();
}

CudaGraph::~CudaGraph() { release_native(); }

void CudaGraph::release_native() noexcept {
    CUgraphExec exec = std::exchange(exec_, nullptr);
    CUgraph graph = std::exchange(graph_, nullptr);
    if (!exec && !graph) return;
    // A launch in flight keeps what it runs: the driver frees an executable graph destroyed during a launch once it
    // has completed. The driver's callback thread (a host function dropping the last reference) may not call it.
    auto destroy = [&d = d_, &dev = device_, exec, graph] {
        dev.enter_quietly();
        if (exec) d.cuGraphExecDestroy(exec);
        if (graph) d.cuGraphDestroy(graph);
    };
    if (in_driver_thread()) {
        backend::defer_after_queued_work(destroy);  // false (out of memory): leaked rather than called here
        return;
    }
    destroy();
}

CudaGraph::Form CudaGraph::form_of(uint32_t command) const {
    const graph::Command& c = program_->commands[command];
    switch (c.type) {
        case RT_GRAPH_NODE_TYPE_KERNEL: return Form::kernel;
        case RT_GRAPH_NODE_TYPE_MEMCPY:
            if (c.elided) return Form::empty;
            // Pageable host-to-host copies run on the callback thread, as on the stream path (a copy engine cannot
            // reach pageable memory asynchronously); between pinned blocks a memcpy node does it.
            if (c.kind == backend::CopyKind::host_to_host &&
                !(is_pinned_host(c.dst, c.bytes) && is_pinned_host(c.src, c.bytes)))
                return Form::host_copy;
            return Form::memcpy;
        case RT_GRAPH_NODE_TYPE_MEMSET: return c.elided ? Form::empty : Form::memset;
        case RT_GRAPH_NODE_TYPE_HOST: return Form::host_call;
        default:  // allocations live in the arena; the core waits for and records events around the launch
            return Form::empty;
    }
}

namespace {
/// A host node's data from its command.
void load_host_node(GraphHostNodes::Node& n, const graph::Command& c, const std::string& label) {
    n.copy = c.type == RT_GRAPH_NODE_TYPE_MEMCPY;
    n.fn = c.fn;
    n.user_data = c.user_data;
    n.dst = c.dst;
    n.src = c.src;
    n.bytes = c.bytes;
    n.label = label;
}
}  // namespace

void CudaGraph::build() {
    const graph::Program& p = *program_;
    if (const graph::ProgramName* n = p.unbound_name())
        fail(RT_ERROR_INVALID_VALUE, "named buffer '%s' is not bound (bind it with rtGraphExecSetBuffer before a launch)",
             n->name.c_str());
    device_.enter();
    release_native();
    host_.reset();  // the device keeps it while launches of it are in flight
    const size_t n = p.commands.size();
    try {
        CU_DEVICE_CHECK(device_, cuGraphCreate(&graph_, 0));
        nodes_.assign(n, nullptr);
        forms_.assign(n, Form::empty);
        std::vector<std::vector<CUgraphNode>> deps(n);  // filled from each command's successors, in topological order
        for (uint32_t i = 0; i < n; ++i) {
            forms_[i] = form_of(i);
            nodes_[i] = add_node(i, deps[i]);
            const graph::Command& c = p.commands[i];
            for (uint32_t s = 0; s < c.successor_count; ++s)
                deps[p.successors[c.first_successor + s]].push_back(nodes_[i]);
        }
        CU_DEVICE_CHECK(device_, cuGraphInstantiateWithFlags(&exec_, graph_, 0));
    } catch (...) {
        release_native();
        throw;
    }
    index_kernels();
    stale_ = false;
}

CUgraphNode CudaGraph::add_node(uint32_t i, const std::vector<CUgraphNode>& deps) {
    const graph::Command& c = program_->commands[i];
    const CUgraphNode* dep = deps.empty() ? nullptr : deps.data();
    CUgraphNode node = nullptr;
    try {
        switch (forms_[i]) {
            case Form::kernel: {
                KernelNode k(c);
                CU_DEVICE_CHECK(device_, cuGraphAddKernelNode(&node, graph_, dep, deps.size(), &k.params));
                break;
            }
            case Form::memcpy: {
                const CUDA_MEMCPY3D m = copy_params(c);
                CU_DEVICE_CHECK(device_, cuGraphAddMemcpyNode(&node, graph_, dep, deps.size(), &m, device_.context()));
                break;
            }
            case Form::memset: {
                const CUDA_MEMSET_NODE_PARAMS m = fill_params(c);
                CU_DEVICE_CHECK(device_, cuGraphAddMemsetNode(&node, graph_, dep, deps.size(), &m, device_.context()));
                break;
            }
            case Form::host_call:
            case Form::host_copy: {
                if (!host_) host_ = std::make_shared<GraphHostNodes>(device_);
                GraphHostNodes::Node& h = host_->add(i);
                load_host_node(h, c, program_->labels[i]);
                const CUDA_HOST_NODE_PARAMS hp{GraphHostNodes::trampoline, &h};
                CU_DEVICE_CHECK(device_, cuGraphAddHostNode(&node, graph_, dep, deps.size(), &hp));
                break;
            }
            case Form::empty:
                CU_DEVICE_CHECK(device_, cuGraphAddEmptyNode(&node, graph_, dep, deps.size()));
                break;
        }
    } catch (const Error& e) {
        throw Error(e.code(), format("%s cannot become a node of a CUDA graph: %s", program_->labels[i].c_str(), e.what()));
    }
    return node;
}

void CudaGraph::index_kernels() {
    const graph::Program& p = *program_;
    auto k = std::make_shared<GraphKernels>();
    for (size_t i = 0; i < p.commands.size(); ++i) {
        const graph::Command& c = p.commands[i];
        if (c.type == RT_GRAPH_NODE_TYPE_KERNEL) k->kernels.push_back({p.labels[i], c.function->impl()->name(), c.shape});
    }
    kernels_ = k->kernels.empty() ? nullptr : std::move(k);
    kernels_stale_ = false;
}

void CudaGraph::refresh_impl(size_t index) {
    if (stale_) return;  // rebuilt from the program before the next launch
    const uint32_t i = static_cast<uint32_t>(index);
    if (program_->unbound_name() || form_of(i) != forms_[i]) {
        stale_ = true;
        return;
    }
    if (forms_[i] == Form::kernel) kernels_stale_ = true;
    try {
        update_node(i);
    } catch (const Error& e) {
        // The instantiated graph no longer matches the program: the next launch rebuilds it, and reports what it
        // refuses then. A change that can never run (a foreign kernel given an exact global size) is refused now too.
        stale_ = true;
        if (e.code() == RT_ERROR_NOT_SUPPORTED) throw;
    }
}

void CudaGraph::update_node(uint32_t i) {
    const graph::Command& c = program_->commands[i];
    switch (forms_[i]) {
        case Form::kernel: {
            KernelNode k(c);  // checks the shape before the driver is called
            device_.enter();
            CU_DEVICE_CHECK(device_, cuGraphExecKernelNodeSetParams(exec_, nodes_[i], &k.params));
            break;
        }
        case Form::memcpy: {
            const CUDA_MEMCPY3D m = copy_params(c);
            device_.enter();
            CU_DEVICE_CHECK(device_, cuGraphExecMemcpyNodeSetParams(exec_, nodes_[i], &m, device_.context()));
            break;
        }
        case Form::memset: {
            const CUDA_MEMSET_NODE_PARAMS m = fill_params(c);
            device_.enter();
            CU_DEVICE_CHECK(device_, cuGraphExecMemsetNodeSetParams(exec_, nodes_[i], &m, device_.context()));
            break;
        }
        case Form::host_call:
        case Form::host_copy: {
            if (host_->in_flight()) {
                // Launches in flight read the nodes they were launched with: the next ones get a copy.
                auto fresh = std::make_shared<GraphHostNodes>(device_);
                for (const GraphHostNodes::Node& old : host_->nodes()) {
                    GraphHostNodes::Node& n = fresh->add(old.command);
                    load_host_node(n, program_->commands[old.command], program_->labels[old.command]);
                }
                device_.enter();
                for (GraphHostNodes::Node& n : fresh->nodes()) {
                    const CUDA_HOST_NODE_PARAMS hp{GraphHostNodes::trampoline, &n};
                    CU_DEVICE_CHECK(device_, cuGraphExecHostNodeSetParams(exec_, nodes_[n.command], &hp));
                }
                host_ = std::move(fresh);
            } else {
                load_host_node(*host_->find(i), c, program_->labels[i]);
            }
            break;
        }
        case Form::empty:
            break;
    }
}

void CudaGraph::launch(CUstream stream, const backend::LaunchReport& report, std::atomic<int>* pending_host_calls) {
    if (stale_) build();
    if (kernels_stale_) index_kernels();
    uint32_t calls = 0;
    if (host_) {
        calls = host_->user_calls();
        host_->begin_launch(report.slot, report.op_index, pending_host_calls);
        pending_host_calls->fetch_add(static_cast<int>(calls));
    }
    CUresult r = d_.cuGraphLaunch(exec_, stream);
    if (r != CUDA_SUCCESS) {
        if (host_) {
            pending_host_calls->fetch_sub(static_cast<int>(calls));
            host_->cancel_launch();
        }
        device_.check(r, "cuGraphLaunch");
    }
}

}  // namespace rt::cuda
