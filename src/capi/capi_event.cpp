// C API: events.
#include "capi/capi_common.hpp"
#include "core/ipc.hpp"
#include "graph/capture.hpp"

using namespace rt;

namespace {
/// An event recorded behind a failure carries it, every time it is asked, until it is recorded again.
void throw_if_failed(const Event& e) {
    std::string message;
    if (rtError_t code = e.impl().failure_impl(&message); code != RT_SUCCESS)
        throw Error(code, "the event was recorded behind a failure that had not been reported: " + message);
}
}  // namespace

extern "C" {

RT_API rtError_t rtEventCreateWithFlags(rtEvent_t* event, unsigned int flags) {
    return capi_call("rtEventCreateWithFlags", [&] {
        require_out(event, "event");
        if (flags & ~(RT_EVENT_BLOCKING_SYNC | RT_EVENT_DISABLE_TIMING | RT_EVENT_INTERPROCESS))
            fail(RT_ERROR_INVALID_VALUE,
                 "flags 0x%x has unknown bits (expected RT_EVENT_DEFAULT, RT_EVENT_BLOCKING_SYNC, RT_EVENT_DISABLE_TIMING, "
                 "RT_EVENT_INTERPROCESS)", flags);
        Runtime& r = runtime();
        CoreDevice& d = r.current_device();
        std::unique_ptr<backend::Event> impl;
        if (flags & RT_EVENT_INTERPROCESS) impl = ipc::create_event(d, flags);  // capi_ipc.cpp
        else impl = d.impl().create_event_impl((flags & RT_EVENT_DISABLE_TIMING) == 0, (flags & RT_EVENT_BLOCKING_SYNC) != 0);
        auto e = std::make_shared<Event>(d, std::move(impl), flags);
        if (flags & RT_EVENT_INTERPROCESS) e->mark_recorded();  // its shared state says whether a record is pending
        *event = reinterpret_cast<rtEvent_t>(r.events.insert(std::move(e)));
    });
}

RT_API rtError_t rtEventCreate(rtEvent_t* event) { return rtEventCreateWithFlags(event, RT_EVENT_DEFAULT); }

RT_API rtError_t rtEventDestroy(rtEvent_t event) {
    return capi_call("rtEventDestroy", [&] {
        Runtime& r = runtime();
        std::shared_ptr<Event> e = r.events.erase(reinterpret_cast<uint64_t>(event));
        if (!e) fail(RT_ERROR_INVALID_HANDLE, "event %p is not a live event", static_cast<void*>(event));
        // On a driver's callback thread the backend event cannot be destroyed: the timeline's thread drops it.
        if (in_driver_thread()) r.timeline().defer({}, [e = std::move(e)] {});
    });
}

RT_API rtError_t rtEventRecord(rtEvent_t event, rtStream_t stream) {
    return capi_call("rtEventRecord", [&] {
        Runtime& r = runtime();
        auto e = r.event(event);
        auto s = r.stream(stream);
        require_same_backend(s->device(), e->device(), "rtEventRecord");
        if (e->interprocess()) return ipc::record(static_cast<ipc::SharedEvent&>(e->impl()), *s, "rtEventRecord");
        if (s->capture() && graph::capture_record(*s, e)) return;
        const uint64_t op = s->next_op();
        trace::enqueue([&] { return trace::event_op(*s, op, *e, true); }, [&](const trace::Key& traced) { s->queue().record_impl(e->impl(), traced); });
        e->mark_recorded();
    });
}

RT_API rtError_t rtEventSynchronize(rtEvent_t event) {
    return capi_call("rtEventSynchronize", [&] {
        refuse_wait_in_queue_context("rtEventSynchronize");
        auto e = runtime().event(event);
        graph::check_event_usable(*e, "rtEventSynchronize");
        if (!e->recorded()) return;
        e->impl().synchronize_impl();
        e->device().memory().after_synchronize();  // memory pools' release thresholds
        throw_if_failed(*e);
    });
}

RT_API rtError_t rtEventQuery(rtEvent_t event) {
    return capi_call("rtEventQuery", [&] {
        auto e = runtime().event(event);
        graph::check_event_usable(*e, "rtEventQuery");
        if (!e->recorded()) return RT_SUCCESS;
        if (!e->impl().query_impl()) return RT_ERROR_NOT_READY;
        throw_if_failed(*e);
        return RT_SUCCESS;
    });
}

RT_API rtError_t rtEventElapsedTime(float* ms, rtEvent_t start, rtEvent_t end) {
    return capi_call("rtEventElapsedTime", [&] {
        require_out(ms, "ms");
        Runtime& r = runtime();
        auto a = r.event(start);
        auto b = r.event(end);
        for (const auto& [e, role] : {std::pair{a.get(), "start"}, std::pair{b.get(), "end"}}) {
            graph::check_event_usable(*e, "rtEventElapsedTime");
            if (!e->timing())
                fail(RT_ERROR_INVALID_HANDLE, "the %s event was created with RT_EVENT_DISABLE_TIMING", role);
            if (!e->recorded()) fail(RT_ERROR_INVALID_HANDLE, "the %s event was never recorded", role);
        }
        for (const auto& [e, role] : {std::pair{a.get(), "start"}, std::pair{b.get(), "end"}})
            if (!e->impl().query_impl())
                fail(RT_ERROR_NOT_READY, "the %s event has not completed yet (synchronize it first)", role);
        if (a->device().info().backend != b->device().info().backend)
            fail(RT_ERROR_INVALID_VALUE, "the start event belongs to %s and the end event to %s (expected one backend)",
                 a->device().label().c_str(), b->device().label().c_str());
        *ms = a->impl().elapsed_ms_impl(b->impl());
    });
}

}  // extern "C"
