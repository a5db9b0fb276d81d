// acl_model.cpp — model run instances (aclmdlRI*) over the Graph Executor: a capture of a stream becomes a graph
// (rtStreamBeginCapture / rtStreamEndCapture), instantiated once into an executable graph that each execute replays
// (rtGraphLaunch).
#include <cstdio>
#include <mutex>
#include <new>
#include <unordered_set>
#include <vector>

#include "acl/acl.h"
#include "acl_internal.hpp"

namespace acl {

std::atomic<int> g_open_captures{0};

namespace {

std::mutex g_models_mutex;
std::unordered_set<Model*> g_models;  // live instances (captured or capturing)

/// `modelRI` as a live model (g_models_mutex held), or nullptr after recording the failure.
Model* live_model_locked(aclmdlRI modelRI, const char* api) {
    if (modelRI == nullptr) {
        fail(ACL_ERROR_INVALID_PARAM, api, "modelRI is NULL");
        return nullptr;
    }
    auto* m = static_cast<Model*>(modelRI);
    if (g_models.count(m) == 0 || m->exec == nullptr) {
        fail(ACL_ERROR_INVALID_PARAM, api, "%p is not a model run instance (destroyed, still being captured, or never "
             "made by aclmdlRICaptureEnd)", modelRI);
        return nullptr;
    }
    return m;
}

void destroy_model(Model* m) {
    if (m->exec != nullptr) rtGraphExecDestroy(m->exec);
    if (m->graph != nullptr) rtGraphDestroy(m->graph);
    delete m;
}

const char* node_type_name(rtGraphNodeType t) {
    switch (t) {
    case RT_GRAPH_NODE_TYPE_KERNEL: return "kernel";
    case RT_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
    case RT_GRAPH_NODE_TYPE_MEMSET: return "memset";
    case RT_GRAPH_NODE_TYPE_HOST: return "host function (callback)";
    case RT_GRAPH_NODE_TYPE_GRAPH: return "child graph";
    case RT_GRAPH_NODE_TYPE_EMPTY: return "empty";
    case RT_GRAPH_NODE_TYPE_WAIT_EVENT: return "event wait";
    case RT_GRAPH_NODE_TYPE_EVENT_RECORD: return "event record";
    case RT_GRAPH_NODE_TYPE_MEM_ALLOC: return "memory allocation";
    case RT_GRAPH_NODE_TYPE_MEM_FREE: return "memory free";
    case RT_GRAPH_NODE_TYPE_COLLECTIVE: return "collective";
    default: return "other";
    }
}

}  // namespace

void reset_models() noexcept {
    // After rtFinalize: the runtime's graphs are gone with it; only our objects remain.
    std::lock_guard lock(g_models_mutex);
    for (Model* m : g_models) delete m;
    g_models.clear();
}

}  // namespace acl

using acl::Model;

extern "C" {

aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode) {
    const char* api = "aclmdlRICaptureBegin";
    ACL_REQUIRE_INIT(api);
    if (stream == nullptr)
        return acl::fail(ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT, api, "the default stream cannot be captured: capture "
                         "a stream made by aclrtCreateStream");
    const int m = acl::enum_value(mode);
    if (m < ACL_MODEL_RI_CAPTURE_MODE_GLOBAL || m > ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "mode %d is not an aclmdlRICaptureMode (0 GLOBAL, "
                         "1 THREAD_LOCAL, 2 RELAXED)", m);
    auto* model = new (std::nothrow) Model;
    if (model == nullptr) return acl::fail(ACL_ERROR_BAD_ALLOC, api, "out of host memory for a model run instance");
    acl::g_open_captures.fetch_add(1);  // before the capture exists: no launch may see it capturing with the gate shut
    rtError_t e = rtStreamBeginCapture(static_cast<rtStream_t>(stream), static_cast<rtStreamCaptureMode>(m));
    if (e != RT_SUCCESS) {
        acl::g_open_captures.fetch_sub(1);
        delete model;
        return acl::fail_rt(e, api, e == RT_ERROR_ILLEGAL_STATE ? ACL_ERROR_RT_STREAM_CAPTURED : 0);
    }
    rtStreamCaptureStatus status = RT_STREAM_CAPTURE_STATUS_NONE;
    rtStreamGetCaptureInfo(static_cast<rtStream_t>(stream), &status, &model->capture_id);
    model->origin = stream;
    std::lock_guard lock(acl::g_models_mutex);
    acl::g_models.insert(model);
    return ACL_SUCCESS;
}

aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus* status, aclmdlRI* modelRI) {
    const char* api = "aclmdlRICaptureGetInfo";
    ACL_REQUIRE_INIT(api);
    ACL_REQUIRE_NOT_NULL(api, status);
    if (stream == nullptr) ACL_REQUIRE_CONTEXT(api);
    rtStreamCaptureStatus st = RT_STREAM_CAPTURE_STATUS_NONE;
    unsigned long long id = 0;
    if (rtError_t e = rtStreamGetCaptureInfo(static_cast<rtStream_t>(stream), &st, &id); e != RT_SUCCESS)
        return acl::fail_rt(e, api);
    *status = st == RT_STREAM_CAPTURE_STATUS_ACTIVE        ? ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE
              : st == RT_STREAM_CAPTURE_STATUS_INVALIDATED ? ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
                                                           : ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    if (modelRI != nullptr) {
        *modelRI = nullptr;
        if (st != RT_STREAM_CAPTURE_STATUS_NONE) {
            // The instance of the capture the stream takes part in (the stream it began on, or one joined to it).
            std::lock_guard lock(acl::g_models_mutex);
            for (Model* m : acl::g_models) {
                if (m->exec == nullptr && m->capture_id == id) {
                    *modelRI = m;
                    break;
                }
            }
        }
    }
    return ACL_SUCCESS;
}

aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI* modelRI) {
    const char* api = "aclmdlRICaptureEnd";
    ACL_REQUIRE_INIT(api);
    ACL_REQUIRE_NOT_NULL(api, modelRI);
    *modelRI = nullptr;
    rtStreamCaptureStatus st = RT_STREAM_CAPTURE_STATUS_NONE;
    unsigned long long id = 0;
    if (stream != nullptr) {
        if (rtError_t e = rtStreamGetCaptureInfo(static_cast<rtStream_t>(stream), &st, &id); e != RT_SUCCESS)
            return acl::fail_rt(e, api);
    }
    // The caller that takes the instance out of the table ends the capture; a concurrent end (RELAXED mode) finds none.
    Model* model = nullptr;
    if (st != RT_STREAM_CAPTURE_STATUS_NONE) {
        std::lock_guard lock(acl::g_models_mutex);
        for (Model* m : acl::g_models) {
            if (m->exec == nullptr && m->capture_id == id && m->origin == stream) {
                model = m;
                break;
            }
        }
        if (model != nullptr) acl::g_models.erase(model);
    }
    if (model == nullptr) {
        return acl::fail(ACL_ERROR_RT_STREAM_NOT_CAPTURED, api, "stream %p is not capturing, or its capture was not "
                         "begun on it by aclmdlRICaptureBegin (end a capture on the stream that began it)", stream);
    }
    rtGraph_t graph = nullptr;
    rtError_t e = rtStreamEndCapture(static_cast<rtStream_t>(stream), &graph);
    if (e == RT_ERROR_STREAM_CAPTURE_WRONG_THREAD) {  // the capture goes on
        std::lock_guard lock(acl::g_models_mutex);
        acl::g_models.insert(model);
        return acl::fail_rt(e, api);
    }
    acl::g_open_captures.fetch_sub(1);  // the capture has ended, whether or not it made a graph
    if (e == RT_SUCCESS) {
        model->graph = graph;
        e = rtGraphInstantiate(&model->exec, graph, 0);
    }
    if (e != RT_SUCCESS) {
        acl::destroy_model(model);  // captured callbacks go with the graph
        return acl::fail_rt(e, api);
    }
    std::lock_guard lock(acl::g_models_mutex);
    acl::g_models.insert(model);
    *modelRI = model;
    return ACL_SUCCESS;
}

aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode* mode) {
    const char* api = "aclmdlRICaptureThreadExchangeMode";
    ACL_REQUIRE_INIT(api);
    ACL_REQUIRE_NOT_NULL(api, mode);
    const int m = acl::enum_value(*mode);
    if (m < ACL_MODEL_RI_CAPTURE_MODE_GLOBAL || m > ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "*mode %d is not an aclmdlRICaptureMode (0 GLOBAL, "
                         "1 THREAD_LOCAL, 2 RELAXED)", m);
    auto rt_mode = static_cast<rtStreamCaptureMode>(m);
    if (rtError_t e = rtThreadExchangeStreamCaptureMode(&rt_mode); e != RT_SUCCESS) return acl::fail_rt(e, api);
    *mode = static_cast<aclmdlRICaptureMode>(rt_mode);
    return ACL_SUCCESS;
}

aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
    const char* api = "aclmdlRIExecuteAsync";
    ACL_REQUIRE_INIT(api);
    if (stream == nullptr) ACL_REQUIRE_CONTEXT(api);
    rtGraphExec_t exec;
    {
        std::lock_guard lock(acl::g_models_mutex);
        Model* m = acl::live_model_locked(modelRI, api);
        if (m == nullptr) return ACL_ERROR_INVALID_PARAM;
        exec = m->exec;
    }
    if (rtError_t e = rtGraphLaunch(exec, static_cast<rtStream_t>(stream)); e != RT_SUCCESS)
        return acl::fail_rt(e, api);
    return ACL_SUCCESS;
}

aclError aclmdlRIExecute(aclmdlRI modelRI, int32_t timeout) {
    const char* api = "aclmdlRIExecute";
    ACL_REQUIRE_INIT(api);
    ACL_REQUIRE_CONTEXT(api);
    if (aclError e = acl::check_timeout(timeout, api); e != ACL_SUCCESS) return e;
    rtGraphExec_t exec;
    {
        std::lock_guard lock(acl::g_models_mutex);
        Model* m = acl::live_model_locked(modelRI, api);
        if (m == nullptr) return ACL_ERROR_INVALID_PARAM;
        exec = m->exec;
    }
    // Waits for an event recorded behind the launch, not for the stream: the stream's pending failure (the launch's or
    // an earlier one) stays for the caller's next synchronize, and work queued later by other threads is not waited for.
    rtEvent_t done = nullptr;
    if (rtError_t e = rtEventCreateWithFlags(&done, RT_EVENT_DISABLE_TIMING); e != RT_SUCCESS)
        return acl::fail_rt(e, api);
    rtError_t e = rtGraphLaunch(exec, nullptr);
    if (e == RT_SUCCESS) e = rtEventRecord(done, nullptr);
    if (e != RT_SUCCESS) {
        rtEventDestroy(done);
        return acl::fail_rt(e, api);
    }
    e = rtEventSynchronizeWithTimeout(done, timeout);
    aclError code = ACL_SUCCESS;
    if (e == RT_ERROR_TIMEOUT) code = acl::fail_rt(e, api, ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    else if (e != RT_SUCCESS) code = acl::fail_rt(e, api, ACL_ERROR_RT_MODEL_EXECUTE);
    rtEventDestroy(done);
    return code;
}

aclError aclmdlRIDestroy(aclmdlRI modelRI) {
    const char* api = "aclmdlRIDestroy";
    ACL_REQUIRE_INIT(api);
    Model* m;
    {
        std::lock_guard lock(acl::g_models_mutex);
        m = acl::live_model_locked(modelRI, api);
        if (m == nullptr) return ACL_ERROR_INVALID_PARAM;
        acl::g_models.erase(m);
    }
    acl::destroy_model(m);  // queued replays still run: the runtime keeps what they use until they have
    return ACL_SUCCESS;
}

aclError aclmdlRIDebugPrint(aclmdlRI modelRI) {
    const char* api = "aclmdlRIDebugPrint";
    ACL_REQUIRE_INIT(api);
    std::lock_guard lock(acl::g_models_mutex);
    Model* m = acl::live_model_locked(modelRI, api);
    if (m == nullptr) return ACL_ERROR_INVALID_PARAM;
    size_t count = 0;
    if (rtError_t e = rtGraphGetNodes(m->graph, nullptr, &count); e != RT_SUCCESS) return acl::fail_rt(e, api);
    std::vector<rtGraphNode_t> nodes(count);
    if (count > 0) {
        if (rtError_t e = rtGraphGetNodes(m->graph, nodes.data(), &count); e != RT_SUCCESS)
            return acl::fail_rt(e, api);
    }
    std::printf("aclmdlRI %p: %zu task(s)\n", modelRI, count);
    for (size_t i = 0; i < count; ++i) {
        rtGraphNodeType type = RT_GRAPH_NODE_TYPE_EMPTY;
        rtGraphNodeGetType(nodes[i], &type);
        std::printf("  task %zu: %s\n", i, acl::node_type_name(type));
    }
    std::fflush(stdout);
    return ACL_SUCCESS;
}

}  // extern "C"
