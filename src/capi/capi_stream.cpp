// C API: streams and host functions.
#include <algorithm>

#include "capi/capi_common.hpp"
#include "core/ipc.hpp"
#include "graph/capture.hpp"
#include "observe/trace_dvpp.hpp"

using namespace rt;

namespace rt {
rtStream_t create_stream(rtStream_t* out, unsigned flags, int priority, const char* api) {
    require_out(out, "stream");
    if (flags & ~RT_STREAM_NON_BLOCKING)
        fail(RT_ERROR_INVALID_VALUE, "%s: flags 0x%x has unknown bits (expected RT_STREAM_DEFAULT or RT_STREAM_NON_BLOCKING)",
             api, flags);
    Runtime& r = runtime();
    CoreDevice& d = r.current_device();
    // CUDA clamps a priority outside the device's range into it rather than refusing it.
    priority = std::clamp(priority, d.info().greatest_stream_priority, 0);
    auto s = std::make_shared<Stream>(d, d.impl().create_queue_impl(flags, priority), false, flags, priority);
    d.add_stream(s);
    Stream& created = *s;
    auto handle = reinterpret_cast<rtStream_t>(r.streams.insert(std::move(s)));
    created.errors().set_origin(format("stream %p on %s", static_cast<void*>(handle), d.label().c_str()));
    return handle;
}
}  // namespace rt

extern "C" {

RT_API rtError_t rtStreamCreateWithFlags(rtStream_t* stream, unsigned int flags) {
    return capi_call("rtStreamCreateWithFlags", [&] { *stream = create_stream(stream, flags, 0, "rtStreamCreateWithFlags"); });
}

RT_API rtError_t rtStreamCreate(rtStream_t* stream) { return rtStreamCreateWithFlags(stream, RT_STREAM_DEFAULT); }

RT_API rtError_t rtStreamDestroy(rtStream_t stream) {
    return capi_call("rtStreamDestroy", [&] {
        if (!stream) fail(RT_ERROR_INVALID_VALUE, "the default stream (NULL) cannot be destroyed");
        Runtime& r = runtime();
        if (auto live = r.streams.find(reinterpret_cast<uint64_t>(stream)); live && live->capture())
            graph::refuse_destroy_capturing(*live);
        auto s = r.streams.erase(reinterpret_cast<uint64_t>(stream));
        if (!s) fail(RT_ERROR_INVALID_HANDLE, "stream %p is not a live stream", static_cast<void*>(stream));
        // Like cudaStreamDestroy, returns at once. The stream stays on its device's list until its queued work
        // has completed, so frees meanwhile still see that work; then the timeline unlists it.
        Stream* raw = s.get();
        r.timeline().defer_after([raw] { return unfinished_point(*raw); },
                                 [s = std::move(s)] { s->device().remove_stream(s.get()); });
    });
}

RT_API rtError_t rtStreamSynchronize(rtStream_t stream) {
    return capi_call("rtStreamSynchronize", [&] { runtime().stream(stream)->synchronize(); });
}

RT_API rtError_t rtStreamQuery(rtStream_t stream) {
    return capi_call("rtStreamQuery", [&] { return runtime().stream(stream)->query() ? RT_SUCCESS : RT_ERROR_NOT_READY; });
}

RT_API rtError_t rtStreamWaitEvent(rtStream_t stream, rtEvent_t event) {
    return capi_call("rtStreamWaitEvent", [&] {
        Runtime& r = runtime();
        auto s = r.stream(stream);
        auto e = r.event(event);
        require_same_backend(s->device(), e->device(), "rtStreamWaitEvent");
        if (e->interprocess()) return ipc::wait(static_cast<ipc::SharedEvent&>(e->impl()), *s, "rtStreamWaitEvent");
        if ((s->capture() || e->captured()) && graph::capture_wait(s, e)) return;
        if (!e->recorded()) return;  // never recorded: already complete
        const uint64_t op = s->next_op();
        trace::enqueue([&] { return trace::event_op(*s, op, *e, false); }, [&](const trace::Key& traced) { s->queue().wait_impl(e->impl(), traced); });
    });
}

RT_API rtError_t rtStreamWaitNativeStream(rtStream_t stream, void* native_stream) {
    return capi_call("rtStreamWaitNativeStream", [&] {
        if (!native_stream)
            fail(RT_ERROR_INVALID_VALUE, "native_stream is NULL (expected a stream of the backend's API, e.g. a "
                                         "CUstream; the legacy default stream is CU_STREAM_LEGACY = 1)");
        auto s = runtime().stream(stream);
        if (s->capture()) graph::refuse_on_capturing(*s, "rtStreamWaitNativeStream", "a graph cannot wait for a native stream");
        s->next_op();
        s->queue().wait_native_impl(native_stream);
    });
}

RT_API rtError_t rtLaunchHostFunc(rtStream_t stream, rtHostFn_t fn, void* user_data) {
    return capi_call("rtLaunchHostFunc", [&] {
        if (!fn) fail(RT_ERROR_INVALID_VALUE, "fn is NULL (expected a host function)");
        auto s = runtime().stream(stream);
        if (s->capture() && graph::capture_host_call(*s, fn, user_data)) return;
        const uint64_t op = s->next_op();
        trace::enqueue([&] {  // a DVPP call's host work is a span named for it (trace_dvpp.hpp)
                           trace::Op* d = trace::dvpp_op(*s, op);
                           return d ? d : trace::host_op(*s, op);
                       },
                       [&](const trace::Key& traced) {
                           s->queue().host_call_impl(backend::HostCall{fn, user_data, &s->errors(), op}, traced);
                       });
    });
}

RT_API rtError_t rtHostFuncSetError(rtError_t error, const char* message) {
    return capi_call("rtHostFuncSetError", [&] {
        if (error == RT_SUCCESS)
            fail(RT_ERROR_INVALID_VALUE, "error is RT_SUCCESS (expected the code the host function failed with)");
        if (!set_host_call_error(error, message))
            fail(RT_ERROR_INVALID_VALUE, "not called from a host function running on a stream");
    });
}

}  // extern "C"

extern "C" RT_API rtError_t rtStreamDeferRelease(rtStream_t stream, rtHostFn_t release, void* user_data) {
    return capi_call("rtStreamDeferRelease", [&] {
        if (!release) fail(RT_ERROR_INVALID_VALUE, "release is NULL (expected a function to call)");
        Runtime& r = runtime();
        std::shared_ptr<Stream> s = r.stream(stream);
        if (s->capture() && graph::capture_defer_release(*s, release, user_data)) return;
        r.timeline().defer_after([s] { return unfinished_point(*s); }, [release, user_data] { release(user_data); });
    });
}
