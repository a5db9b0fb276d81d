// acl_common.cpp — the shared error machinery of the AscendCL face (acl_common.hpp): code mapping, the thread's recent
// messages and last error, aclGetRecentErrMsg, aclrtGetLastError / aclrtPeekAtLastError, the init flag.
#include "acl_common.hpp"

#include <cstdarg>
#include <cstdio>
#include <string>

#include "acl/acl.h"

namespace acl {

std::atomic<bool> g_initialised{false};

namespace {

// The messages of this thread's failed calls not yet fetched by aclGetRecentErrMsg, newest first; bounded so that a
// program that never fetches them does not grow without limit.
constexpr size_t kMaxPendingBytes = 16 * 1024;
thread_local std::string t_pending;
thread_local std::string t_fetched;  // what the last aclGetRecentErrMsg returned (valid until the next one)
thread_local aclError t_last_error = ACL_SUCCESS;

void record(aclError code, const std::string& line) {
    t_last_error = code;
    std::string next = line;
    if (!t_pending.empty()) {
        next += '\n';
        next += t_pending;
    }
    if (next.size() > kMaxPendingBytes) {
        // Keep the newest messages: cut at a line boundary below the bound.
        size_t cut = next.rfind('\n', kMaxPendingBytes);
        next.resize(cut == std::string::npos ? kMaxPendingBytes : cut);
    }
    t_pending = std::move(next);
}

}  // namespace

aclError from_rt(rtError_t error) noexcept {
    switch (error) {
    case RT_SUCCESS: return ACL_SUCCESS;
    case RT_ERROR_INVALID_VALUE: return ACL_ERROR_RT_PARAM_INVALID;
    case RT_ERROR_INVALID_DEVICE: return ACL_ERROR_RT_INVALID_DEVICEID;
    case RT_ERROR_INVALID_HANDLE: return ACL_ERROR_RT_INVALID_HANDLE;
    case RT_ERROR_OUT_OF_MEMORY: return ACL_ERROR_RT_MEMORY_ALLOCATION;
    case RT_ERROR_NOT_READY: return ACL_ERROR_RT_STREAM_NOT_COMPLETE;
    case RT_ERROR_COMPILE_FAILED: return ACL_ERROR_RT_KERNEL_LOOKUP;
    case RT_ERROR_LAUNCH_FAILED: return ACL_ERROR_RT_AICORE_EXCEPTION;
    case RT_ERROR_NOT_SUPPORTED: return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    case RT_ERROR_NOT_FOUND: return ACL_ERROR_RT_KERNEL_LOOKUP;
    case RT_ERROR_NOT_PERMITTED: return ACL_ERROR_RT_NO_PERMISSION;
    case RT_ERROR_STREAM_CAPTURE_UNSUPPORTED: return ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
    case RT_ERROR_STREAM_CAPTURE_INVALIDATED: return ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
    case RT_ERROR_STREAM_CAPTURE_UNJOINED: return ACL_ERROR_RT_STREAM_UNJOINED;
    case RT_ERROR_STREAM_CAPTURE_IMPLICIT: return ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT;
    case RT_ERROR_STREAM_CAPTURE_WRONG_THREAD: return ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD;
    case RT_ERROR_STREAM_CAPTURE_ISOLATION: return ACL_ERROR_STREAM_CAPTURE_CONFLICT;
    case RT_ERROR_CAPTURED_EVENT: return ACL_ERROR_RT_EVENT_CAPTURED;
    case RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE: return ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP;
    case RT_ERROR_ILLEGAL_STATE: return ACL_ERROR_RT_PARAM_INVALID;
    case RT_ERROR_INVALID_IMAGE: return ACL_ERROR_RT_PARAM_INVALID;
    case RT_ERROR_TIMEOUT: return ACL_ERROR_RT_WAIT_TIMEOUT;
    case RT_ERROR_NOT_INITIALIZED: return ACL_ERROR_DRV_FAILURE;
    case RT_ERROR_DEVICE_LOST: return ACL_ERROR_RT_DEVICE_MEM_ERROR;
    default: return ACL_ERROR_INTERNAL_ERROR;
    }
}

aclError vfail(aclError code, const char* api, const char* format, va_list args) noexcept {
    try {
        char body[1024];
        std::vsnprintf(body, sizeof body, format, args);
        record(code, std::string(api) + ": " + body);
    } catch (...) {
        t_last_error = code;  // out of memory for the message: the code still counts
    }
    return code;
}

aclError fail(aclError code, const char* api, const char* format, ...) noexcept {
    va_list args;
    va_start(args, format);
    vfail(code, api, format, args);
    va_end(args);
    return code;
}

aclError fail_rt(rtError_t error, const char* api, aclError code) noexcept {
    if (code == 0) code = from_rt(error);
    const char* detail = rtGetLastErrorMessage();
    return fail(code, api, "%s (runtime: %s)", (detail && *detail) ? detail : rtGetErrorString(error),
                rtGetErrorName(error));
}

aclError not_initialised(const char* api) noexcept {
    return fail(ACL_ERROR_UNINITIALIZE, api, "AscendCL is not initialised: call aclInit first");
}

}  // namespace acl

extern "C" {

const char* aclGetRecentErrMsg(void) {
    if (acl::t_pending.empty()) return nullptr;
    acl::t_fetched.swap(acl::t_pending);
    acl::t_pending.clear();
    return acl::t_fetched.c_str();
}

aclError aclrtGetLastError(aclrtLastErrLevel level) {
    if (acl::enum_value(level) != ACL_RT_THREAD_LEVEL)
        return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtGetLastError", "level %d is not ACL_RT_THREAD_LEVEL (0)",
                         acl::enum_value(level));
    aclError last = acl::t_last_error;
    acl::t_last_error = ACL_SUCCESS;
    return last;
}

aclError aclrtPeekAtLastError(aclrtLastErrLevel level) {
    if (acl::enum_value(level) != ACL_RT_THREAD_LEVEL)
        return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtPeekAtLastError", "level %d is not ACL_RT_THREAD_LEVEL (0)",
                         acl::enum_value(level));
    return acl::t_last_error;
}

}  // extern "C"
