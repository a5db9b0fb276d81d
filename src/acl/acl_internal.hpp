// acl_internal.hpp — libascendcl's own shared state between its files: the calling thread's current context (with the
// lock-free check the hot paths use), model run instances, stream subscriptions, the shared argument checks and the
// steps of aclFinalize. Not used by libhccl or libacl_dvpp (they see acl_common.hpp only).
#pragma once

#include <atomic>
#include <cstdint>

#include "acl/acl_rt.h"
#include "acl_common.hpp"

namespace acl {

/// Captures begun by aclmdlRICaptureBegin and not yet ended: counted up before the runtime's capture begins and down
/// once it has ended, so a stream can be capturing (or have joined a capture) only while this is non-zero.
/// aclrtLaunchCallback asks the runtime about its stream only then: the question costs a handle look-up per launch.
extern std::atomic<int> g_open_captures;

/// A context: a device and, through it, the device's default stream (the runtime's NULL stream of that device). Its
/// aclrtContext handle is its id, never reused in the process: a destroyed context's handle stays refused.
struct Context {
    uint64_t id = 0;
    int device = 0;
    bool is_default = false;  // the device's default context (made by aclrtSetDevice, released by aclrtResetDevice)
};

/// Bumped whenever a context is destroyed (and at aclFinalize): a thread's cached current context is trusted only while
/// the generation it was cached at is current; otherwise it is looked up again by id (under the lock) once.
extern std::atomic<uint64_t> g_context_generation;
extern thread_local Context* t_context;
extern thread_local uint64_t t_context_id;
extern thread_local uint64_t t_context_generation;

/// The slow half of current_context(): re-validates the cached context after a generation change.
Context* revalidate_current_context() noexcept;

/// The calling thread's current context, or nullptr. One TLS read and one relaxed load while nothing was destroyed.
inline Context* current_context() noexcept {
    Context* c = t_context;
    if (c != nullptr && t_context_generation == g_context_generation.load(std::memory_order_acquire)) [[likely]]
        return c;
    return c == nullptr ? nullptr : revalidate_current_context();
}

/// ACL_ERROR_RT_CONTEXT_NULL for `api`: the thread has no current context (aclrtSetDevice or aclrtSetCurrentContext
/// first).
[[gnu::cold]] aclError no_context(const char* api) noexcept;

/// A live stream handle (NULL: the default stream). Clears nothing: the stream's pending failure stays for the next
/// synchronize or query. ACL_ERROR_RT_INVALID_HANDLE (or the runtime's refusal) for `api` otherwise.
aclError check_stream(aclrtStream stream, const char* api) noexcept;

/// A timeout argument of AscendCL's waits: -1 waits without limit, a positive value is milliseconds; anything else is
/// ACL_ERROR_INVALID_PARAM for `api`.
aclError check_timeout(int32_t timeout, const char* api) noexcept;

/// First statement after ACL_REQUIRE_INIT of calls that act on the current context's device.
#define ACL_REQUIRE_CONTEXT(api)                                                                                       \
    do {                                                                                                               \
        if (::acl::current_context() == nullptr) [[unlikely]]                                                          \
            return ::acl::no_context(api);                                                                             \
    } while (0)

/// A model run instance (aclmdlRI): the graph captured from a stream and its executable graph. Callbacks captured
/// into it are kept by the capture's graph (rtStreamDeferRelease), not by this object.
struct Model {
    aclrtStream origin = nullptr;       // the stream the capture began on (aclmdlRICaptureEnd must name it)
    unsigned long long capture_id = 0;  // the runtime's id of the capture (rtStreamGetCaptureInfo)
    rtGraph_t graph = nullptr;          // kept for aclmdlRIDebugPrint
    rtGraphExec_t exec = nullptr;       // nullptr while the capture goes on
};

/// Ends any subscription of `stream` (aclrtDestroyStream; acl_callback.cpp).
void forget_stream(aclrtStream stream) noexcept;

// ---- aclFinalize's steps, in this order

/// Wakes every blocked callback and makes report queues refuse new work (before the runtime drains).
void close_report_queues() noexcept;
/// Undoes close_report_queues (rtFinalize refused to run).
void reopen_report_queues() noexcept;
/// Drop every subscription and queue (callback records return to the pool); every model; every context and device
/// reference; every event's recorded flags.
void reset_callbacks() noexcept;
void reset_models() noexcept;
void reset_contexts() noexcept;
void reset_events() noexcept;
/// Prepares the callback record pool (aclInit).
void init_callbacks() noexcept;

}  // namespace acl
