// The C boundary: runs a call, turns every exception into an rtError_t plus this thread's last message.
#pragma once

#include <cstring>
#include <type_traits>
#include <new>

#include "core/enum_bytes.hpp"
#include "core/error.hpp"
#include "core/runtime.hpp"

namespace rt {

/// capi_call without the trace's api span.
template <class F>
rtError_t capi_call_untraced(const char* api, F&& body) noexcept {
    try {
        if constexpr (std::is_void_v<decltype(body())>) {
            body();
            return RT_SUCCESS;
        } else {
            return body();
        }
    } catch (const Error& e) {
        try {
            std::string m = e.what();
            if (m.rfind(api, 0) != 0) m = std::string(api) + ": " + m;
            set_last_error_message(std::move(m));
        } catch (...) {
        }
        return e.code();
    } catch (const std::bad_alloc&) {
        try { set_last_error_message(std::string(api) + ": out of host memory"); } catch (...) {}
        return RT_ERROR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        try { set_last_error_message(std::string(api) + ": internal error: " + e.what()); } catch (...) {}
        return RT_ERROR_UNKNOWN;
    } catch (...) {
        try { set_last_error_message(std::string(api) + ": internal error"); } catch (...) {}
        return RT_ERROR_UNKNOWN;
    }
}

/// Runs `body` (returning void or rtError_t); never lets an exception out. `api` prefixes messages that lack it.
/// While a trace is written, the call is a span on its host thread's track (one branch when not).
template <class F>
rtError_t capi_call(const char* api, F&& body) noexcept {
    if (trace::on()) [[unlikely]] {
        const int64_t start = trace::now();
        const rtError_t result = capi_call_untraced(api, std::forward<F>(body));
        trace::api_span(api, start);
        return result;
    }
    return capi_call_untraced(api, std::forward<F>(body));
}

/// Events are backend objects: a stream can record or wait for an event of its own backend only (a cpu event
/// cannot be captured by a CUstream, nor a CUevent by a cpu queue). INVALID_VALUE names both devices.
inline void require_same_backend(const CoreDevice& stream_device, const CoreDevice& event_device, const char* what) {
    if (stream_device.info().backend != event_device.info().backend)
        fail(RT_ERROR_INVALID_VALUE, "%s: the event belongs to %s but the stream to %s (events order streams of the "
             "same backend only; synchronize the event on the host instead)", what, event_device.label().c_str(),
             stream_device.label().c_str());
}

inline int kind_value(const rtMemcpyKind& kind) { return enum_value(kind); }

/// rtModuleLoadSource for `device` rather than the calling thread's current one (capi_module.cpp): the library's own
/// kernels (DVPP) are built for the device of the stream they run on. Throws as rtModuleLoadSource fails.
rtModule_t load_source_module(CoreDevice& device, const char* source, const char* options);

/// Creates a stream on the current device (rtStreamCreateWithFlags, rtStreamCreateWithPriority: `priority` clamped
/// into the device's range) and returns its handle.
rtStream_t create_stream(rtStream_t* out, unsigned flags, int priority, const char* api);

/// Refuses a NULL output pointer.
template <class T>
void require_out(T* p, const char* what) {
    if (!p) fail(RT_ERROR_INVALID_VALUE, "%s is NULL (expected a pointer to write the result to)", what);
}

}  // namespace rt
