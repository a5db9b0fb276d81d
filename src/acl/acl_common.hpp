// acl_common.hpp — what libascendcl, libhccl and libacl_dvpp share: rtError_t -> aclError, the thread's recent error
// messages (aclGetRecentErrMsg) and last error (aclrtGetLastError), and the aclInit state. Defined in libascendcl
// (acl_common.cpp) and exported from it; the other two libraries link it and never keep a copy of their own.
#pragma once

#include <atomic>
#include <cstdarg>

#include "../core/enum_bytes.hpp"
#include "acl/acl_base.h"
#include "runtime/runtime.h"

namespace acl {

/// The code AscendCL gives for a runtime failure, when the caller has no more specific one: RT_ERROR_INVALID_VALUE ->
/// ACL_ERROR_RT_PARAM_INVALID, RT_ERROR_OUT_OF_MEMORY -> ACL_ERROR_RT_MEMORY_ALLOCATION, the capture errors -> their
/// ACL_ERROR_RT_* twins, ... (the table is in acl_common.cpp); an unknown code -> ACL_ERROR_INTERNAL_ERROR.
ACL_FUNC_VISIBILITY aclError from_rt(rtError_t error) noexcept;

/// Records a failure of `api` on this thread — its code for aclrtGetLastError, "api: message" for aclGetRecentErrMsg —
/// and returns `code`. For the error paths only (it formats and allocates).
[[gnu::cold, gnu::format(printf, 3, 4)]] ACL_FUNC_VISIBILITY aclError fail(aclError code, const char* api,
                                                                          const char* format, ...) noexcept;
/// fail() with its arguments as a va_list (for the other faces' own refusal helpers, e.g. libhccl's).
[[gnu::cold]] ACL_FUNC_VISIBILITY aclError vfail(aclError code, const char* api, const char* format,
                                                 va_list args) noexcept;
/// A failed rt* call of `api`: `code` (0: from_rt(error)) with the runtime's own message (rtGetLastErrorMessage).
[[gnu::cold]] ACL_FUNC_VISIBILITY aclError fail_rt(rtError_t error, const char* api, aclError code = 0) noexcept;

/// True between a successful aclInit and aclFinalize. Read with one relaxed load on every hot path.
ACL_FUNC_VISIBILITY extern std::atomic<bool> g_initialised;
inline bool initialised() noexcept { return g_initialised.load(std::memory_order_relaxed); }
/// ACL_ERROR_UNINITIALIZE for `api`, with a message saying aclInit must come first.
[[gnu::cold]] ACL_FUNC_VISIBILITY aclError not_initialised(const char* api) noexcept;

/// ACL_SUCCESS when the calling thread has a current context (aclrtSetDevice or aclrtSetCurrentContext); else
/// ACL_ERROR_RT_CONTEXT_NULL for `api`, with a message saying so.
ACL_FUNC_VISIBILITY aclError require_context(const char* api) noexcept;

/// Registers `fn` to run at every aclFinalize, once the runtime has been finalised (libacl_dvpp forgets its memory
/// registry there). Registering the same function twice runs it once.
ACL_FUNC_VISIBILITY void on_finalize(void (*fn)()) noexcept;

using rt::enum_value;  // an enum argument read by its bytes (src/core/enum_bytes.hpp)

}  // namespace acl

/// First statement of every call that AscendCL allows only between aclInit and aclFinalize.
#define ACL_REQUIRE_INIT(api)                                                                                          \
    do {                                                                                                               \
        if (!::acl::initialised()) [[unlikely]]                                                                        \
            return ::acl::not_initialised(api);                                                                        \
    } while (0)

/// A NULL pointer argument `p` of `api`: ACL_ERROR_INVALID_PARAM naming it.
#define ACL_REQUIRE_NOT_NULL(api, p)                                                                                   \
    do {                                                                                                               \
        if ((p) == nullptr) [[unlikely]]                                                                               \
            return ::acl::fail(ACL_ERROR_INVALID_PARAM, api, "%s is NULL", #p);                                        \
    } while (0)
