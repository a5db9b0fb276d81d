// The C boundary: runs a call, turns every exception into an rtError_t plus this thread's last message.
#pragma once

#include <new>

#include "core/error.hpp"
#include "core/runtime.hpp"

namespace rt {

/// Runs `body` (returning void or rtError_t); never lets an exception out. `api` prefixes messages that lack it.
template <class F>
rtError_t capi_call(const char* api, F&& body) noexcept {
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

/// Refuses a NULL output pointer.
template <class T>
void require_out(T* p, const char* what) {
    if (!p) fail(RT_ERROR_INVALID_VALUE, "%s is NULL (expected a pointer to write the result to)", what);
}

}  // namespace rt
