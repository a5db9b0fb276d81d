// C API: executable graphs — instantiate, upload, launch, update, node parameters, memory figures, destroy.
#include <cstring>

#include "capi/capi_common.hpp"
#include "graph/exec.hpp"
#include "graph/graph.hpp"
#include "graph/handles.hpp"
#include "graph/node_params.hpp"

using namespace rt;

namespace {

std::shared_ptr<graph::GraphExec> exec_of(rtGraphExec_t handle) {
    if (!handle) fail(RT_ERROR_INVALID_HANDLE, "exec is NULL (expected a handle from rtGraphInstantiate)");
    auto x = runtime().graph_execs.find(reinterpret_cast<uint64_t>(handle));
    if (!x)
        fail(RT_ERROR_INVALID_HANDLE, "executable graph %p is not a live executable graph (never instantiated, "
             "destroyed, or not such a handle)", static_cast<void*>(handle));
    return x;
}

std::shared_ptr<graph::Graph> graph_of(rtGraph_t handle) { return graph::find_graph(handle); }

/// The node behind `handle`, which must be of `type`, with its graph locked while `use(graph, node)` runs.
template <class Use>
void with_node(rtGraphNode_t handle, rtGraphNodeType type, Use&& use) {
    std::shared_ptr<graph::Node> n = graph::find_node(handle);
    if (n->type != type)
        fail(RT_ERROR_INVALID_VALUE, "%s is a %s node, not a %s node", graph::node_label(*n).c_str(),
             graph::node_type_name(n->type), graph::node_type_name(type));
    std::lock_guard lock(n->graph->mutex());
    use(*n->graph, *n);
}

}  // namespace

extern "C" {

RT_API rtError_t rtGraphInstantiate(rtGraphExec_t* exec, rtGraph_t graph, unsigned long long flags) {
    return capi_call("rtGraphInstantiate", [&] {
        require_out(exec, "exec");
        *exec = nullptr;
        if (flags & ~RT_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
            fail(RT_ERROR_INVALID_VALUE, "flags 0x%llx has unknown bits (expected 0 or "
                 "RT_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)", flags);
        std::shared_ptr<graph::Graph> g = graph_of(graph);
        std::shared_ptr<graph::Program> program;
        {
            std::lock_guard lock(g->mutex());
            program = graph::instantiate(*g);
        }
        auto x = std::make_shared<graph::GraphExec>(std::move(program), "rtGraphInstantiate");
        *exec = reinterpret_cast<rtGraphExec_t>(runtime().graph_execs.insert(std::move(x)));
    });
}

RT_API rtError_t rtGraphUpload(rtGraphExec_t exec, rtStream_t stream) {
    return capi_call("rtGraphUpload", [&] {
        auto x = exec_of(exec);
        x->upload(*runtime().stream(stream));
    });
}

RT_API rtError_t rtGraphLaunch(rtGraphExec_t exec, rtStream_t stream) {
    return capi_call("rtGraphLaunch", [&] {
        Runtime& r = runtime();
        auto x = r.graph_execs.borrow(reinterpret_cast<uint64_t>(exec));
        if (!x) exec_of(exec);  // says why
        x->launch(r.stream(stream));
    });
}

RT_API rtError_t rtGraphExecUpdate(rtGraphExec_t exec, rtGraph_t graph, rtGraphExecUpdateResult* result) {
    if (result) *result = RT_GRAPH_EXEC_UPDATE_ERROR;
    return capi_call("rtGraphExecUpdate", [&] {
        auto x = exec_of(exec);
        auto g = graph_of(graph);
        std::string why;
        rtGraphExecUpdateResult outcome;
        {
            std::lock_guard lock(g->mutex());
            outcome = x->update(*g, &why);
        }
        if (result) *result = outcome;
        if (outcome != RT_GRAPH_EXEC_UPDATE_SUCCESS)
            fail(RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "the executable graph was not changed: %s", why.c_str());
    });
}

RT_API rtError_t rtGraphExecKernelNodeSetParams(rtGraphExec_t exec, rtGraphNode_t node,
                                                const rtKernelNodeParams* params) {
    return capi_call("rtGraphExecKernelNodeSetParams", [&] {
        auto x = exec_of(exec);
        if (!params) fail(RT_ERROR_INVALID_VALUE, "params is NULL (expected an rtKernelNodeParams)");
        graph::KernelParams kp;
        with_node(node, RT_GRAPH_NODE_TYPE_KERNEL,
                  [&](const graph::Graph& g, const graph::Node&) { kp = graph::make_kernel_params(g, *params); });
        x->set_kernel_params(reinterpret_cast<uint64_t>(node), kp);
    });
}

RT_API rtError_t rtGraphExecMemcpyNodeSetParams(rtGraphExec_t exec, rtGraphNode_t node,
                                                const rtMemcpyNodeParams* params) {
    return capi_call("rtGraphExecMemcpyNodeSetParams", [&] {
        auto x = exec_of(exec);
        if (!params) fail(RT_ERROR_INVALID_VALUE, "params is NULL (expected an rtMemcpyNodeParams)");
        const int kind = kind_value(params->kind);
        graph::MemoryParams mp;
        with_node(node, RT_GRAPH_NODE_TYPE_MEMCPY, [&](const graph::Graph& g, const graph::Node&) {
            mp = graph::make_copy_params(g, params->dst, params->src, params->count, kind,
                                         "rtGraphExecMemcpyNodeSetParams");
        });
        x->set_memory_params(reinterpret_cast<uint64_t>(node), mp);
    });
}

RT_API rtError_t rtGraphExecDestroy(rtGraphExec_t exec) {
    return capi_call("rtGraphExecDestroy", [&] {
        Runtime& r = runtime();
        std::shared_ptr<graph::GraphExec> x = r.graph_execs.erase(reinterpret_cast<uint64_t>(exec));
        if (!x) exec_of(exec);  // says why
        // Queued launches hold what they use (the program, the lowering); the arena's free waits for queued work.
        // On a driver's callback thread backend objects cannot be released: the timeline's thread drops it.
        if (in_driver_thread()) r.timeline().defer({}, [x = std::move(x)] {});
    });
}

RT_API rtError_t rtGraphExecGetMemoryInfo(rtGraphExec_t exec, rtGraphMemoryInfo* info) {
    return capi_call("rtGraphExecGetMemoryInfo", [&] {
        require_out(info, "info");
        *info = exec_of(exec)->memory_info();
    });
}

}  // extern "C"
