// C API: stream priorities, synchronization with a timeout, and device reset.
#include <cinttypes>

#include "capi/capi_common.hpp"
#include "core/mem_pool.hpp"
#include "core/memory.hpp"
#include "graph/capture.hpp"

using namespace rt;

namespace {

int64_t timeout_ns(int timeout_ms) { return timeout_ms < 0 ? -1 : int64_t{timeout_ms} * 1'000'000; }

}  // namespace

extern "C" {

RT_API rtError_t rtDeviceGetStreamPriorityRange(int* least_priority, int* greatest_priority) {
    return capi_call("rtDeviceGetStreamPriorityRange", [&] {
        const CoreDevice& d = runtime().current_device();
        if (least_priority) *least_priority = 0;
        if (greatest_priority) *greatest_priority = d.info().greatest_stream_priority;
    });
}

RT_API rtError_t rtStreamCreateWithPriority(rtStream_t* stream, unsigned int flags, int priority) {
    return capi_call("rtStreamCreateWithPriority",
                     [&] { *stream = create_stream(stream, flags, priority, "rtStreamCreateWithPriority"); });
}

RT_API rtError_t rtStreamGetPriority(rtStream_t stream, int* priority) {
    return capi_call("rtStreamGetPriority", [&] {
        require_out(priority, "priority");
        *priority = runtime().stream(stream)->priority();
    });
}

RT_API rtError_t rtStreamSynchronizeWithTimeout(rtStream_t stream, int timeout_ms) {
    return capi_call("rtStreamSynchronizeWithTimeout", [&] {
        auto s = runtime().stream(stream);
        if (!s->synchronize_for(timeout_ns(timeout_ms)))
            fail(RT_ERROR_TIMEOUT, "%s: the work queued so far (%" PRIu64 " operations queued in all) did not complete "
                 "within %d ms; it stays queued", s->errors().origin().c_str(), s->operations(), timeout_ms);
    });
}

RT_API rtError_t rtEventSynchronizeWithTimeout(rtEvent_t event, int timeout_ms) {
    return capi_call("rtEventSynchronizeWithTimeout", [&] {
        refuse_wait_in_queue_context("rtEventSynchronizeWithTimeout");
        auto e = runtime().event(event);
        graph::check_event_usable(*e, "rtEventSynchronizeWithTimeout");
        if (!e->recorded()) return;
        if (timeout_ms < 0) {
            e->impl().synchronize_impl();
        } else if (!poll_until([&] { return e->impl().query_impl(); }, timeout_ns(timeout_ms))) {
            fail(RT_ERROR_TIMEOUT, "event %p on %s: its latest record did not complete within %d ms", static_cast<void*>(event),
                 e->device().label().c_str(), timeout_ms);
        }
        std::string message;
        if (rtError_t code = e->impl().failure_impl(&message); code != RT_SUCCESS)
            throw Error(code, "the event was recorded behind a failure that had not been reported: " + message);
    });
}

RT_API rtError_t rtDeviceReset(void) {
    return capi_call("rtDeviceReset", [&] {
        refuse_wait_in_queue_context("rtDeviceReset");
        graph::check_unsafe("rtDeviceReset");
        Runtime& r = runtime();
        CoreDevice& d = r.current_device();
        // Queued work completes first, every device's: peer copies and frees may use this device's memory.
        r.wait_all_idle();
        r.timeline().run_due();
        // Handles go first, so nothing reaches what is released below through them.
        auto streams = r.streams.erase_if([&](const Stream& s) { return &s.device() == &d; });
        auto events = r.events.erase_if([&](const Event& e) { return &e.device() == &d; });
        r.functions.erase_if([&](const CoreFunction& f) { return &f.device() == &d; });
        auto modules = r.modules.erase_if([&](const CoreModule& m) { return &m.device() == &d; });
        for (auto& m : modules) m->unload();
        for (auto& s : streams) {
            std::string dropped;
            s->errors().take(&dropped);
            d.remove_stream(s.get());
        }
        for (const Allocation& a : r.registry.take_device_memory(&d)) {
            if (a.mem_pool)  // a created pool's: back to it (the pool itself stays, as the memory strategies do)
                a.mem_pool->release(reinterpret_cast<void*>(a.base), a.size, nullptr);
            else if (a.managed && !d.info().host_addressable)
                d.impl().free_impl(reinterpret_cast<void*>(a.base), a.size);  // idle: nothing uses it any more
            else
                d.memory().release(reinterpret_cast<void*>(a.base), a.size, a.pooled, nullptr);
        }
        std::string dropped;
        d.default_stream()->errors().take(&dropped);  // the default stream stays, as a fresh one
        r.timeline().run_due();
    });
}

}  // extern "C"
