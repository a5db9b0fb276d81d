// Stream capture (rtStreamBeginCapture .. rtStreamEndCapture): operations on capturing streams become nodes of a
// graph instead of running, and the capture rules of graph.h are enforced on every backend.
//
// A capturing stream's Stream::capture() is non-null; every enqueue path branches on it once and, when set, calls
// the capture_* function of its kind here, which adds the node (after the stream's frontier: the nodes its next
// operation depends on) and returns true — false when the capture ended meanwhile (the caller then runs the
// operation). The default stream's pointer is set while a blocking stream of its device captures: its capture_*
// call then fails with RT_ERROR_STREAM_CAPTURE_IMPLICIT, invalidating that capture. All capture state is guarded
// by one process-wide lock, taken only on these slow paths (captures are rare; their operations are not hot).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "backends/backend.hpp"
#include "core/event.hpp"
#include "core/stream.hpp"
#include "runtime/runtime.h"

namespace rt {
class CoreDevice;
class CoreFunction;
}  // namespace rt

namespace rt::comm {
struct Collective;
}  // namespace rt::comm

namespace rt::graph {

class Graph;

// ---- the C API's entry points (capi/capi_capture.cpp)

/// Begins capturing `stream` in `mode` (validated by the caller); returns the capture's id (unique in the process,
/// never 0). The default stream: STREAM_CAPTURE_UNSUPPORTED; a stream already capturing: ILLEGAL_STATE.
uint64_t begin_capture(const std::shared_ptr<Stream>& stream, rtStreamCaptureMode mode);
/// Ends the capture begun on `stream` and returns its graph. Refused, the capture going on: a stream that is not
/// capturing or only joined it (ILLEGAL_STATE), another thread than the beginning one unless RELAXED
/// (STREAM_CAPTURE_WRONG_THREAD). Failed, the capture over and every stream it involved free again: invalidated
/// (STREAM_CAPTURE_INVALIDATED naming what broke it), a joined stream not joined back (STREAM_CAPTURE_UNJOINED
/// naming it).
std::shared_ptr<Graph> end_capture(Stream& stream);
/// NONE, ACTIVE or INVALIDATED, and the capture's id in `*id` when not NONE. The default stream while a blocking
/// stream of its device captures: STREAM_CAPTURE_IMPLICIT (without invalidating, as CUDA).
rtStreamCaptureStatus capture_status(Stream& stream, uint64_t* id);
/// Swaps the calling thread's capture mode (initially GLOBAL); returns the previous one.
rtStreamCaptureMode exchange_thread_mode(rtStreamCaptureMode mode);

// ---- hooks of the enqueue paths: called when stream.capture() is non-null; true: captured (or refused by a
// throw, which invalidates the capture); false: the stream no longer captures, run the operation.

/// rtMemcpyAsync (and the synchronous rtMemcpy's copy on the default stream): a MEMCPY node.
bool capture_copy(Stream& stream, void* dst, const void* src, size_t bytes, int kind, const char* api);
/// rtMemsetAsync: a MEMSET node.
bool capture_fill(Stream& stream, void* dst, int value, size_t bytes, const char* api);
/// Kernel launches: a KERNEL node with the argument values copied (the kernel's parameters must be known).
bool capture_kernel(Stream& stream, const CoreFunction& function, const backend::LaunchShape& shape, void* const* args,
                    int num_args, const size_t* arg_sizes);
/// rtLaunchHostFunc: a HOST node.
bool capture_host_call(Stream& stream, rtHostFn_t fn, void* user_data);
/// A collective of comm.h (checked by the caller): a COLLECTIVE node, replayed at each launch as the rank's next
/// collective. Its buffers are the caller's (memory of an allocation node of the capture is refused before this).
bool capture_collective(Stream& stream, const std::shared_ptr<const comm::Collective>& collective, const char* api);
/// rtMallocAsync: a MEM_ALLOC node; `*ptr` receives its provisional address (valid in the graph's nodes).
bool capture_alloc(Stream& stream, size_t bytes, void** ptr, const char* api);
/// rtFreeAsync: a MEM_FREE node of an allocation node of the same capture.
bool capture_free(Stream& stream, void* ptr, const char* api);
/// rtEventRecord: an EVENT_RECORD node; the event remembers the capture and the node, for waits (fork and join).
bool capture_record(Stream& stream, const std::shared_ptr<Event>& event);
/// rtStreamWaitEvent when the stream captures or the event was recorded in a capture (event->captured()): join
/// (edges: the event's frontier joins the stream's), fork (a stream not capturing joins the event's capture), a
/// WAIT_EVENT node (an event recorded outside any capture), STREAM_CAPTURE_ISOLATION (the event of another capture)
/// or CAPTURED_EVENT (the event of a capture that has ended).
bool capture_wait(const std::shared_ptr<Stream>& stream, const std::shared_ptr<Event>& event);
/// rtStreamDeferRelease: the release goes to the capture's graph (Keepalive), run once the graph and everything
/// made from it are gone. False on the default stream (its releases are never captured).
bool capture_defer_release(Stream& stream, rtHostFn_t release, void* user_data);
/// A call that cannot be captured and must not touch a capturing stream — synchronize, query,
/// rtStreamWaitNativeStream, rtGraphLaunch: throws STREAM_CAPTURE_UNSUPPORTED (on the default stream:
/// STREAM_CAPTURE_IMPLICIT) naming `what`, invalidating the capture. Returns if the capture ended meanwhile.
void refuse_on_capturing(Stream& stream, const char* what, const char* instead = nullptr);
/// rtStreamDestroy of a stream taking part in a capture: ILLEGAL_STATE (end the capture first). Returns if none.
void refuse_destroy_capturing(Stream& stream);

// ---- the rules for calls that are not stream operations

namespace detail {
extern std::atomic<int> g_strict_captures;  // active captures whose mode is not RELAXED
[[noreturn]] void refuse_captured_event(const Event& event, const char* api);
void refuse_unsafe(const char* api);
}  // namespace detail

/// A "potentially unsafe" call of graph.h (rtMemcpy, rtMemset, rtMalloc, rtFree, rtDeviceSynchronize): throws
/// STREAM_CAPTURE_UNSUPPORTED, invalidating them, when a capture forbids it on this thread — one begun by this
/// thread in a mode other than RELAXED while this thread's mode is not RELAXED, or a GLOBAL one of another thread
/// while this thread's mode is GLOBAL (CUDA's rules). One relaxed load when no such capture runs.
inline void check_unsafe(const char* api) {
    if (detail::g_strict_captures.load(std::memory_order_relaxed) != 0) [[unlikely]]
        detail::refuse_unsafe(api);
}
/// rtDeviceSynchronize: check_unsafe, and refused (STREAM_CAPTURE_UNSUPPORTED, invalidating) in every mode while a
/// stream of `device` captures: it would wait for the capturing stream.
void check_device_synchronize(CoreDevice& device);
/// rtEventSynchronize / rtEventQuery / rtEventElapsedTime: an event last recorded in a capture has no work to wait
/// for: CAPTURED_EVENT (the capture goes on).
inline void check_event_usable(const Event& event, const char* api) {
    if (event.captured()) [[unlikely]] detail::refuse_captured_event(event, api);
}

/// Teardown (rtFinalize): ends every capture, dropping its graph. Called while the runtime is still published.
void end_all_captures();

}  // namespace rt::graph
