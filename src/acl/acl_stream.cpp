// acl_stream.cpp — streams and events. An aclrtStream / aclrtEvent is the runtime's rtStream_t / rtEvent_t itself, so
// the hot calls (aclrtRecordEvent, aclrtStreamWaitEvent) are a check of the init flag, of the context for the NULL
// stream, and the rt* call.
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "acl/acl.h"
#include "acl_internal.hpp"

namespace acl {

aclError check_stream(aclrtStream stream, const char* api) noexcept {
    int priority = 0;
    if (rtError_t e = rtStreamGetPriority(static_cast<rtStream_t>(stream), &priority); e != RT_SUCCESS)
        return fail_rt(e, api);
    return ACL_SUCCESS;
}

aclError check_timeout(int32_t timeout, const char* api) noexcept {
    if (timeout == -1 || timeout > 0) [[likely]] return ACL_SUCCESS;
    return fail(ACL_ERROR_INVALID_PARAM, api, "timeout %d ms is invalid: -1 (wait without limit) or a positive number "
                "of milliseconds", timeout);
}

}  // namespace acl

namespace {

inline rtStream_t rt_stream(aclrtStream s) { return static_cast<rtStream_t>(s); }
inline rtEvent_t rt_event(aclrtEvent e) { return static_cast<rtEvent_t>(e); }

constexpr uint32_t kKnownStreamFlags = ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC | ACL_STREAM_PERSISTENT |
                                       ACL_STREAM_HUGE | ACL_STREAM_CPU_SCHEDULE | ACL_STREAM_DEVICE_USE_ONLY;
constexpr uint32_t kUnsupportedStreamFlags = ACL_STREAM_PERSISTENT | ACL_STREAM_CPU_SCHEDULE |
                                             ACL_STREAM_DEVICE_USE_ONLY;
constexpr uint32_t kKnownEventFlags = ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | ACL_EVENT_TIME_LINE |
                                      ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_EXTERNAL | ACL_EVENT_IPC;
constexpr uint32_t kUnsupportedEventFlags = ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_EXTERNAL | ACL_EVENT_IPC;

// The flags each live event was created with: an event made without ACL_EVENT_SYNC cannot be waited for by a stream
// or reset, and one made by aclrtCreateEventExWithFlag cannot be reset (AscendCL's rules).
constexpr uint32_t kMadeByEx = 0x80000000u;
constexpr uint32_t kKnown = 0x40000000u;  // set in every entry: 0 from event_flags means "not made here"
std::shared_mutex g_events_mutex;
std::unordered_map<rtEvent_t, uint32_t> g_event_flags;

/// The flags `event` was made with, or 0 for a handle this library did not make (the runtime then judges it).
uint32_t event_flags(aclrtEvent event) {
    std::shared_lock lock(g_events_mutex);
    auto it = g_event_flags.find(static_cast<rtEvent_t>(event));
    return it == g_event_flags.end() ? 0 : it->second;
}

aclError create_event(aclrtEvent* event, uint32_t flag, const char* api) {
    ACL_REQUIRE_INIT(api);
    ACL_REQUIRE_NOT_NULL(api, event);
    ACL_REQUIRE_CONTEXT(api);
    if (flag & ~kKnownEventFlags)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "flag 0x%x has bits that are no ACL_EVENT_* flag (0x%x)", flag,
                         flag & ~kKnownEventFlags);
    if (flag & kUnsupportedEventFlags)
        return acl::fail(ACL_ERROR_FEATURE_UNSUPPORTED, api, "flag 0x%x: ACL_EVENT_DEVICE_USE_ONLY, ACL_EVENT_EXTERNAL "
                         "and ACL_EVENT_IPC events are not supported here", flag);
    unsigned rt_flags = (flag & ACL_EVENT_TIME_LINE) ? RT_EVENT_DEFAULT : RT_EVENT_DISABLE_TIMING;
    rtEvent_t e = nullptr;
    if (rtError_t r = rtEventCreateWithFlags(&e, rt_flags); r != RT_SUCCESS) return acl::fail_rt(r, api);
    try {
        std::unique_lock lock(g_events_mutex);
        g_event_flags[e] = flag | kKnown | (std::strcmp(api, "aclrtCreateEventExWithFlag") == 0 ? kMadeByEx : 0);
    } catch (...) {
        rtEventDestroy(e);
        return acl::fail(ACL_ERROR_BAD_ALLOC, api, "out of host memory for an event");
    }
    *event = e;
    return ACL_SUCCESS;
}

}  // namespace

namespace acl {

void reset_events() noexcept {
    std::unique_lock lock(g_events_mutex);
    g_event_flags.clear();
}

}  // namespace acl

extern "C" {

// ---------------------------------------------------------------- streams

aclError aclrtCreateStream(aclrtStream* stream) {
    ACL_REQUIRE_INIT("aclrtCreateStream");
    ACL_REQUIRE_NOT_NULL("aclrtCreateStream", stream);
    ACL_REQUIRE_CONTEXT("aclrtCreateStream");
    rtStream_t s = nullptr;
    if (rtError_t e = rtStreamCreate(&s); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtCreateStream");
    *stream = s;
    return ACL_SUCCESS;
}

aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority, uint32_t flag) {
    const char* api = "aclrtCreateStreamWithConfig";
    ACL_REQUIRE_INIT(api);
    ACL_REQUIRE_NOT_NULL(api, stream);
    ACL_REQUIRE_CONTEXT(api);
    if (priority > 7)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "priority %u is outside 0 (highest) .. 7 (lowest)", priority);
    if (flag & ~kKnownStreamFlags)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "flag 0x%x has bits that are no ACL_STREAM_* flag (0x%x)", flag,
                         flag & ~kKnownStreamFlags);
    if (flag & kUnsupportedStreamFlags)
        return acl::fail(ACL_ERROR_FEATURE_UNSUPPORTED, api, "flag 0x%x: ACL_STREAM_PERSISTENT, ACL_STREAM_CPU_SCHEDULE "
                         "and ACL_STREAM_DEVICE_USE_ONLY streams are not supported here", flag);
    int least = 0, greatest = 0;
    if (rtError_t e = rtDeviceGetStreamPriorityRange(&least, &greatest); e != RT_SUCCESS) return acl::fail_rt(e, api);
    // AscendCL's 0..7 (0 highest) spread over the device's range (greatest is numerically lowest).
    const int rt_priority = greatest + (least - greatest) * static_cast<int>(priority) / 7;
    rtStream_t s = nullptr;
    if (rtError_t e = rtStreamCreateWithPriority(&s, RT_STREAM_DEFAULT, rt_priority); e != RT_SUCCESS)
        return acl::fail_rt(e, api);
    *stream = s;
    return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream) {
    ACL_REQUIRE_INIT("aclrtDestroyStream");
    if (stream == nullptr)
        return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream", "stream is NULL (the default stream cannot be "
                         "destroyed)");
    if (rtError_t e = rtStreamDestroy(rt_stream(stream)); e != RT_SUCCESS)
        return acl::fail_rt(e, "aclrtDestroyStream");
    acl::forget_stream(stream);
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
    ACL_REQUIRE_INIT("aclrtSynchronizeStream");
    if (stream == nullptr) ACL_REQUIRE_CONTEXT("aclrtSynchronizeStream");
    if (rtError_t e = rtStreamSynchronize(rt_stream(stream)); e != RT_SUCCESS) [[unlikely]]
        return acl::fail_rt(e, "aclrtSynchronizeStream");
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
    const char* api = "aclrtSynchronizeStreamWithTimeout";
    ACL_REQUIRE_INIT(api);
    if (aclError e = acl::check_timeout(timeout, api); e != ACL_SUCCESS) return e;
    if (stream == nullptr) ACL_REQUIRE_CONTEXT(api);
    rtError_t e = rtStreamSynchronizeWithTimeout(rt_stream(stream), timeout);
    if (e == RT_ERROR_TIMEOUT) return acl::fail_rt(e, api, ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    if (e != RT_SUCCESS) return acl::fail_rt(e, api);
    return ACL_SUCCESS;
}

aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status) {
    ACL_REQUIRE_INIT("aclrtStreamQuery");
    ACL_REQUIRE_NOT_NULL("aclrtStreamQuery", status);
    if (stream == nullptr) ACL_REQUIRE_CONTEXT("aclrtStreamQuery");
    rtError_t e = rtStreamQuery(rt_stream(stream));
    if (e == RT_SUCCESS) *status = ACL_STREAM_STATUS_COMPLETE;
    else if (e == RT_ERROR_NOT_READY) *status = ACL_STREAM_STATUS_NOT_READY;
    else return acl::fail_rt(e, "aclrtStreamQuery");
    return ACL_SUCCESS;
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
    ACL_REQUIRE_INIT("aclrtStreamWaitEvent");
    if (event == nullptr) [[unlikely]]
        return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamWaitEvent", "event is NULL");
    if (stream == nullptr) ACL_REQUIRE_CONTEXT("aclrtStreamWaitEvent");
    if (const uint32_t flags = event_flags(event); flags != 0 && (flags & ACL_EVENT_SYNC) == 0) [[unlikely]]
        return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamWaitEvent", "event %p was created with flag 0x%x, "
                         "without ACL_EVENT_SYNC: only ACL_EVENT_SYNC events can be waited for by a stream", event,
                         flags & ~(kMadeByEx | kKnown));
    if (rtError_t e = rtStreamWaitEvent(rt_stream(stream), rt_event(event)); e != RT_SUCCESS) [[unlikely]]
        return acl::fail_rt(e, "aclrtStreamWaitEvent");
    return ACL_SUCCESS;
}

// ---------------------------------------------------------------- events

aclError aclrtCreateEvent(aclrtEvent* event) {
    return create_event(event, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE, "aclrtCreateEvent");
}

aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
    return create_event(event, flag, "aclrtCreateEventWithFlag");
}

aclError aclrtCreateEventExWithFlag(aclrtEvent* event, uint32_t flag) {
    return create_event(event, flag, "aclrtCreateEventExWithFlag");
}

aclError aclrtDestroyEvent(aclrtEvent event) {
    ACL_REQUIRE_INIT("aclrtDestroyEvent");
    ACL_REQUIRE_NOT_NULL("aclrtDestroyEvent", event);
    if (rtError_t e = rtEventDestroy(rt_event(event)); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtDestroyEvent");
    std::unique_lock lock(g_events_mutex);
    g_event_flags.erase(rt_event(event));
    return ACL_SUCCESS;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
    ACL_REQUIRE_INIT("aclrtRecordEvent");
    if (event == nullptr) [[unlikely]]
        return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtRecordEvent", "event is NULL");
    if (stream == nullptr) ACL_REQUIRE_CONTEXT("aclrtRecordEvent");
    if (rtError_t e = rtEventRecord(rt_event(event), rt_stream(stream)); e != RT_SUCCESS) [[unlikely]]
        return acl::fail_rt(e, "aclrtRecordEvent");
    return ACL_SUCCESS;
}

aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
    ACL_REQUIRE_INIT("aclrtResetEvent");
    ACL_REQUIRE_NOT_NULL("aclrtResetEvent", event);
    if (stream == nullptr) ACL_REQUIRE_CONTEXT("aclrtResetEvent");
    if (const uint32_t flags = event_flags(event); flags != 0) {
        if (flags & kMadeByEx)
            return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtResetEvent", "event %p was created by "
                             "aclrtCreateEventExWithFlag: such events are not reset", event);
        if ((flags & ACL_EVENT_SYNC) == 0)
            return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtResetEvent", "event %p was created with flag 0x%x, "
                             "without ACL_EVENT_SYNC: only ACL_EVENT_SYNC events are reset", event, flags & ~kKnown);
    }
    // Nothing to clear (acl_rt.h): the handles are checked by calls that change nothing (an event's query reports the
    // failure its record carries every time; the stream's pending failure stays).
    if (rtError_t e = rtEventQuery(rt_event(event)); e == RT_ERROR_INVALID_HANDLE || e == RT_ERROR_INVALID_VALUE)
        return acl::fail_rt(e, "aclrtResetEvent");
    if (stream != nullptr) return acl::check_stream(stream, "aclrtResetEvent");
    return ACL_SUCCESS;
}

aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus* status) {
    ACL_REQUIRE_INIT("aclrtQueryEvent");
    ACL_REQUIRE_NOT_NULL("aclrtQueryEvent", event);
    ACL_REQUIRE_NOT_NULL("aclrtQueryEvent", status);
    rtError_t e = rtEventQuery(rt_event(event));
    if (e == RT_SUCCESS) *status = ACL_EVENT_STATUS_COMPLETE;
    else if (e == RT_ERROR_NOT_READY) *status = ACL_EVENT_STATUS_NOT_READY;
    else return acl::fail_rt(e, "aclrtQueryEvent");
    return ACL_SUCCESS;
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
    ACL_REQUIRE_INIT("aclrtQueryEventStatus");
    ACL_REQUIRE_NOT_NULL("aclrtQueryEventStatus", event);
    ACL_REQUIRE_NOT_NULL("aclrtQueryEventStatus", status);
    rtError_t e = rtEventQuery(rt_event(event));
    if (e == RT_SUCCESS) *status = ACL_EVENT_RECORDED_STATUS_COMPLETE;
    else if (e == RT_ERROR_NOT_READY) *status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    else return acl::fail_rt(e, "aclrtQueryEventStatus");
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
    ACL_REQUIRE_INIT("aclrtSynchronizeEvent");
    ACL_REQUIRE_NOT_NULL("aclrtSynchronizeEvent", event);
    if (rtError_t e = rtEventSynchronize(rt_event(event)); e != RT_SUCCESS)
        return acl::fail_rt(e, "aclrtSynchronizeEvent");
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout) {
    const char* api = "aclrtSynchronizeEventWithTimeout";
    ACL_REQUIRE_INIT(api);
    ACL_REQUIRE_NOT_NULL(api, event);
    if (aclError e = acl::check_timeout(timeout, api); e != ACL_SUCCESS) return e;
    rtError_t e = rtEventSynchronizeWithTimeout(rt_event(event), timeout);
    if (e == RT_ERROR_TIMEOUT) return acl::fail_rt(e, api, ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    if (e != RT_SUCCESS) return acl::fail_rt(e, api);
    return ACL_SUCCESS;
}

aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
    const char* api = "aclrtEventElapsedTime";
    ACL_REQUIRE_INIT(api);
    ACL_REQUIRE_NOT_NULL(api, ms);
    ACL_REQUIRE_NOT_NULL(api, startEvent);
    ACL_REQUIRE_NOT_NULL(api, endEvent);
    rtError_t e = rtEventElapsedTime(ms, rt_event(startEvent), rt_event(endEvent));
    if (e == RT_ERROR_NOT_READY) return acl::fail_rt(e, api, ACL_ERROR_RT_EVENT_NOT_COMPLETE);
    if (e == RT_ERROR_INVALID_VALUE) return acl::fail_rt(e, api, ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
    if (e == RT_ERROR_INVALID_HANDLE) {
        // Both handles live: the refusal is about timestamps (an event made without ACL_EVENT_TIME_LINE).
        auto live = [](aclrtEvent ev) {
            rtError_t q = rtEventQuery(rt_event(ev));
            return q != RT_ERROR_INVALID_HANDLE && q != RT_ERROR_INVALID_VALUE;
        };
        const bool timing = live(startEvent) && live(endEvent);
        return acl::fail_rt(e, api, timing ? ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID : ACL_ERROR_RT_INVALID_HANDLE);
    }
    if (e != RT_SUCCESS) return acl::fail_rt(e, api);
    return ACL_SUCCESS;
}

}  // extern "C"
