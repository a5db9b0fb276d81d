/* acl/acl_rt.h — AscendCL's runtime API (aclrt*: devices, contexts, streams, events, memory, callbacks, errors) and
 * its model run instances built by stream capture (aclmdlRI*), over this project's runtime (runtime/runtime.h).
 * Signatures and values follow the public AscendCL reference; each comment says what this implementation does,
 * where it differs from an NPU. */
#ifndef ACL_ACL_RT_H
#define ACL_ACL_RT_H

#include <stddef.h>
#include <stdint.h>

#include "acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this AscendCL face (aclrtGetVersion reports the library's). */
#define ACL_MAJOR_VERSION 1
#define ACL_MINOR_VERSION 0
#define ACL_PATCH_VERSION 0

/* aclrtCreateEventWithFlag flags. */
#define ACL_EVENT_SYNC 0x00000001U                    /* may be waited for by a stream and reset */
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 0x00000002U /* accepted: recorded in a capture, as any event */
#define ACL_EVENT_TIME_LINE 0x00000008U               /* takes timestamps (aclrtEventElapsedTime) */
#define ACL_EVENT_DEVICE_USE_ONLY 0x00000010U         /* ACL_ERROR_FEATURE_UNSUPPORTED */
#define ACL_EVENT_EXTERNAL 0x00000020U                /* ACL_ERROR_FEATURE_UNSUPPORTED */
#define ACL_EVENT_IPC 0x00000040U                     /* ACL_ERROR_FEATURE_UNSUPPORTED */

/* aclrtCreateStreamWithConfig flags. */
#define ACL_STREAM_FAST_LAUNCH 0x00000001U     /* accepted (every launch here is fast) */
#define ACL_STREAM_FAST_SYNC 0x00000002U       /* accepted */
#define ACL_STREAM_PERSISTENT 0x00000004U      /* ACL_ERROR_FEATURE_UNSUPPORTED */
#define ACL_STREAM_HUGE 0x00000008U            /* accepted (no task-count limit here) */
#define ACL_STREAM_CPU_SCHEDULE 0x00000010U    /* ACL_ERROR_FEATURE_UNSUPPORTED */
#define ACL_STREAM_DEVICE_USE_ONLY 0x00000020U /* ACL_ERROR_FEATURE_UNSUPPORTED */

typedef enum aclrtRunMode {
    ACL_DEVICE,
    ACL_HOST
} aclrtRunMode;

typedef enum aclrtTsId {
    ACL_TS_ID_AICORE = 0,
    ACL_TS_ID_AIVECTOR = 1,
    ACL_TS_ID_RESERVED = 2
} aclrtTsId;

typedef enum aclrtEventStatus {
    ACL_EVENT_STATUS_COMPLETE = 0,
    ACL_EVENT_STATUS_NOT_READY = 1,
    ACL_EVENT_STATUS_RESERVED = 2
} aclrtEventStatus;

typedef enum aclrtEventRecordedStatus {
    ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
    ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

typedef enum aclrtEventWaitStatus {
    ACL_EVENT_WAIT_STATUS_COMPLETE = 0,
    ACL_EVENT_WAIT_STATUS_NOT_READY = 1,
    ACL_EVENT_WAIT_STATUS_RESERVED = 0xFFFF
} aclrtEventWaitStatus;

typedef enum aclrtStreamStatus {
    ACL_STREAM_STATUS_COMPLETE = 0,
    ACL_STREAM_STATUS_NOT_READY = 1,
    ACL_STREAM_STATUS_RESERVED = 0xFFFF
} aclrtStreamStatus;

typedef enum aclrtCallbackBlockType {
    ACL_CALLBACK_NO_BLOCK, /* the stream goes on while the report thread runs the callback */
    ACL_CALLBACK_BLOCK     /* the stream's later work waits until the callback has returned */
} aclrtCallbackBlockType;

typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEFAULT,                /* inferred from the operands */
    ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE,  /* async: the source is copied during the call, and may be reused at once */
    ACL_MEMCPY_INNER_DEVICE_TO_DEVICE, /* copied as DEVICE_TO_DEVICE */
    ACL_MEMCPY_INTER_DEVICE_TO_DEVICE  /* copied as DEVICE_TO_DEVICE (between devices) */
} aclrtMemcpyKind;

/* Page-size and placement hints of aclrtMalloc: all accepted; the device picks its own pages. */
typedef enum aclrtMemMallocPolicy {
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEM_MALLOC_HUGE_ONLY,
    ACL_MEM_MALLOC_NORMAL_ONLY,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P,
    ACL_MEM_MALLOC_HUGE_ONLY_P2P,
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
    ACL_MEM_MALLOC_HUGE1G_ONLY,
    ACL_MEM_MALLOC_HUGE1G_ONLY_P2P,
    ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
    ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
    ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000 /* ACL_ERROR_FEATURE_UNSUPPORTED */
} aclrtMemMallocPolicy;

/* Which memory aclrtGetMemInfo reports. A device here has one memory: every value reports it. */
typedef enum aclrtMemAttr {
    ACL_DDR_MEM,
    ACL_HBM_MEM,
    ACL_DDR_MEM_HUGE,
    ACL_DDR_MEM_NORMAL,
    ACL_HBM_MEM_HUGE,
    ACL_HBM_MEM_NORMAL,
    ACL_DDR_MEM_P2P_HUGE,
    ACL_DDR_MEM_P2P_NORMAL,
    ACL_HBM_MEM_P2P_HUGE,
    ACL_HBM_MEM_P2P_NORMAL,
    ACL_HBM_MEM_HUGE1G,
    ACL_HBM_MEM_P2P_HUGE1G,
    ACL_MEM_NORMAL,
    ACL_MEM_HUGE,
    ACL_MEM_HUGE1G,
    ACL_MEM_P2P_NORMAL,
    ACL_MEM_P2P_HUGE,
    ACL_MEM_P2P_HUGE1G
} aclrtMemAttr;

typedef enum aclrtLastErrLevel {
    ACL_RT_THREAD_LEVEL = 0
} aclrtLastErrLevel;

typedef void (*aclrtCallback)(void* userData);
typedef void (*aclrtHostFunc)(void* args);

/* A model run instance: the work captured from a stream, replayable (an executable graph of the Graph Executor). */
typedef void* aclmdlRI;

typedef enum {
    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL = 0,
    ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED
} aclmdlRICaptureMode;

typedef enum {
    ACL_MODEL_RI_CAPTURE_STATUS_NONE = 0,
    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE,
    ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
} aclmdlRICaptureStatus;

/* Every call below returns ACL_ERROR_UNINITIALIZE before aclInit (and after aclFinalize), except
 * aclrtGetRunMode, aclrtGetLastError and aclrtPeekAtLastError. A NULL output pointer is ACL_ERROR_INVALID_PARAM.
 * Failures leave a message for aclGetRecentErrMsg and a code for aclrtGetLastError. */

/* ---------------------------------------------------------------- devices */

/** ACL_HOST: the application runs on the host, apart from the device (copies between them are real copies). */
ACL_FUNC_VISIBILITY aclError aclrtGetRunMode(aclrtRunMode* runMode);
/** Opens device `deviceId` for the process (each call counts one reference) and makes its default context — and
 *  with it the device's default stream — current in the calling thread. No such device: ACL_ERROR_RT_INVALID_DEVICEID. */
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);
/** Drops one reference of aclrtSetDevice. When the device has none left (and no context made by
 *  aclrtCreateContext remains on it), its queued work completes and its default context, streams, events and
 *  device memory are released. A device not set: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);
/** Releases the device now, whatever references remain (queued work still completes first). */
ACL_FUNC_VISIBILITY aclError aclrtResetDeviceForce(int32_t deviceId);
/** The device of the current context; none: ACL_ERROR_RT_CONTEXT_NULL. */
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t* deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t* count);
/** Waits for all work on every stream of the current context's device; returns the first stream failure. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice(void);
/** *canAccessPeer = 1 if kernels of `deviceId` can use memory of `peerDeviceId`. */
ACL_FUNC_VISIBILITY aclError aclrtDeviceCanAccessPeer(int32_t* canAccessPeer, int32_t deviceId, int32_t peerDeviceId);
/** Lets the current device use memory of `peerDeviceId`; `flags` must be 0. */
ACL_FUNC_VISIBILITY aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags);
/** ACL_ERROR_FEATURE_UNSUPPORTED: peer access, once enabled, stays enabled here. */
ACL_FUNC_VISIBILITY aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId);

/* ---------------------------------------------------------------- contexts */

/** A new context on `deviceId` (it holds a reference of the device), made current in the calling thread. Its
 *  default stream is the device's default stream. */
ACL_FUNC_VISIBILITY aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId);
/** Destroys a context made by aclrtCreateContext (a device's default context: ACL_ERROR_INVALID_PARAM; not a live
 *  context: ACL_ERROR_RT_INVALID_HANDLE). Threads that had it current have no current context afterwards. */
ACL_FUNC_VISIBILITY aclError aclrtDestroyContext(aclrtContext context);
/** Makes `context` current in the calling thread (its device becomes the thread's device). */
ACL_FUNC_VISIBILITY aclError aclrtSetCurrentContext(aclrtContext context);
/** The calling thread's current context; none: ACL_ERROR_RT_CONTEXT_NULL. */
ACL_FUNC_VISIBILITY aclError aclrtGetCurrentContext(aclrtContext* context);

/* ---------------------------------------------------------------- streams */

/** A stream on the current context's device (no current context: ACL_ERROR_RT_CONTEXT_NULL). */
ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream* stream);
/** As aclrtCreateStream, with `priority` 0 (highest) .. 7 (lowest; larger: ACL_ERROR_INVALID_PARAM) spread over the
 *  device's priority range, and ACL_STREAM_* `flag`s as their comments say. */
ACL_FUNC_VISIBILITY aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority, uint32_t flag);
/** Releases the stream; its queued work still runs. A subscription of it (aclrtSubscribeReport) ends with it. NULL
 *  (the default stream) cannot be destroyed: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);
/** `timeout` in ms, -1 without limit (0 or below -1: ACL_ERROR_INVALID_PARAM); running out:
 *  ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, the work staying queued. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);
ACL_FUNC_VISIBILITY aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status);
/** Work queued on `stream` afterwards waits for the event's latest record at the time of this call; an event not
 *  recorded yet is complete (the wait is then no wait: record before waiting). Never blocks the host. An event made
 *  without ACL_EVENT_SYNC: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);

/* ---------------------------------------------------------------- events */

/** An event that orders streams and takes timestamps. */
ACL_FUNC_VISIBILITY aclError aclrtCreateEvent(aclrtEvent* event);
/** `flag`: ACL_EVENT_* as their comments say; without ACL_EVENT_TIME_LINE the event takes no timestamps
 *  (aclrtEventElapsedTime on it: ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID). Unknown bits: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag);
ACL_FUNC_VISIBILITY aclError aclrtCreateEventExWithFlag(aclrtEvent* event, uint32_t flag);
ACL_FUNC_VISIBILITY aclError aclrtDestroyEvent(aclrtEvent event);
ACL_FUNC_VISIBILITY aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
/** Accepted for the NPU's sake, where a waited-for event must be reset before it is recorded again: events here
 *  keep their latest record and any record replaces it, so there is nothing to clear. Checks its handles without
 *  clearing the stream's pending failure. An event made without ACL_EVENT_SYNC, or by aclrtCreateEventExWithFlag:
 *  ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus* status);
/** COMPLETE once the work before the latest record has run (an event never recorded: COMPLETE). */
ACL_FUNC_VISIBILITY aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEvent(aclrtEvent event);
/** `timeout` as aclrtSynchronizeStreamWithTimeout's; running out: ACL_ERROR_RT_EVENT_SYNC_TIMEOUT. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout);
/** Milliseconds between the two events' records (both complete). */
ACL_FUNC_VISIBILITY aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent);

/* ---------------------------------------------------------------- memory */

/** Device memory of the current context's device. size 0: ACL_ERROR_INVALID_PARAM; a policy outside the enum:
 *  ACL_ERROR_INVALID_PARAM; out of memory: ACL_ERROR_RT_MEMORY_ALLOCATION. */
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy);
/** Page-locked host memory (the runtime's pinned memory). */
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void** hostPtr, size_t size);
/** Frees device memory (NULL: ACL_ERROR_INVALID_PARAM); memory still used by queued work goes once it has run. */
ACL_FUNC_VISIBILITY aclError aclrtFree(void* devPtr);
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void* hostPtr);
/** Sets `count` bytes to (uint8_t)value; `count` > `maxCount`: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count);
ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
                                              aclrtStream stream);
/** Copies `count` bytes; `count` > `destMax` or a kind outside aclrtMemcpyKind: ACL_ERROR_INVALID_PARAM; a kind
 *  that contradicts the operands: ACL_ERROR_RT_PARAM_INVALID. Returns when the bytes have arrived. */
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                                         aclrtMemcpyKind kind);
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                                              aclrtMemcpyKind kind, aclrtStream stream);
/** `height` rows of `width` bytes, `spitch` and `dpitch` apart (a pitch below `width`: ACL_ERROR_INVALID_PARAM). */
ACL_FUNC_VISIBILITY aclError aclrtMemcpy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                           size_t height, aclrtMemcpyKind kind);
ACL_FUNC_VISIBILITY aclError aclrtMemcpy2dAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                                size_t height, aclrtMemcpyKind kind, aclrtStream stream);
/** Free and total bytes of the current context's device (every aclrtMemAttr names that one memory). */
ACL_FUNC_VISIBILITY aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total);

/* ---------------------------------------------------------------- callbacks */

/** Binds `stream` to the thread `threadId` (its pthread_t): callbacks launched on the stream run in that thread,
 *  inside its aclrtProcessReport. A stream bound already: ACL_ERROR_RT_STREAM_SUBSCRIBE. */
ACL_FUNC_VISIBILITY aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream);
/** Queues `fn(userData)` on `stream`: when the stream gets there, the subscribed thread runs it (see
 *  aclrtCallbackBlockType). A stream nobody subscribed: ACL_ERROR_RT_STREAM_NO_CB_REG. On a capturing stream (the
 *  one a capture began on, or one that joined it) the callback belongs to the model and runs at every replay.
 *  ACL_CALLBACK_BLOCK holds one of the runtime's threads while the callback waits for and runs in its report thread:
 *  as many streams as the runtime has threads (RUNTIME_EXECUTORS) can be held at once, and further streams' work
 *  waits for one to be released. aclFinalize releases every held stream (callbacks not yet run are dropped). */
ACL_FUNC_VISIBILITY aclError aclrtLaunchCallback(aclrtCallback fn, void* userData, aclrtCallbackBlockType blockType,
                                                 aclrtStream stream);
/** Run from a subscribed thread: waits up to `timeout` ms (-1: without limit; 0 or below -1:
 *  ACL_ERROR_INVALID_PARAM) for callbacks of its streams and runs those that arrived. None:
 *  ACL_ERROR_RT_REPORT_TIMEOUT; a thread not subscribed: ACL_ERROR_RT_THREAD_SUBSCRIBE. */
ACL_FUNC_VISIBILITY aclError aclrtProcessReport(int32_t timeout);
/** Ends the binding of `stream` to `threadId` (not bound so: ACL_ERROR_RT_STREAM_SUBSCRIBE). Callbacks that
 *  already reached the thread still run in its next aclrtProcessReport. */
ACL_FUNC_VISIBILITY aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream);
/** Queues `fn(args)` on `stream`, run by a runtime thread in stream order; needs no subscription. */
ACL_FUNC_VISIBILITY aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void* args);

/* ---------------------------------------------------------------- errors */

/** The code of the latest failed call on this thread (ACL_SUCCESS if none), then clears it. `level` must be
 *  ACL_RT_THREAD_LEVEL. */
ACL_FUNC_VISIBILITY aclError aclrtGetLastError(aclrtLastErrLevel level);
/** As aclrtGetLastError, without clearing it. */
ACL_FUNC_VISIBILITY aclError aclrtPeekAtLastError(aclrtLastErrLevel level);

/* ---------------------------------------------------------------- model run instances (stream capture) */

/** Starts capturing `stream` (not the default stream: ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT; capturing already:
 *  ACL_ERROR_RT_STREAM_CAPTURED): its asynchronous calls are recorded into a model run instance instead of running.
 *  `mode` limits the unsafe calls (aclrtMemcpy, aclrtMemset, aclrtMemcpy2d, aclrtMalloc, aclrtFree,
 *  synchronizations) during the capture: GLOBAL in every thread in GLOBAL mode, THREAD_LOCAL in this thread,
 *  RELAXED nowhere; such a call fails with ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT and invalidates the capture. */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode);
/** Whether `stream` is capturing and, if so, the instance being captured into (*modelRI NULL otherwise; modelRI
 *  may be NULL). */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus* status,
                                                    aclmdlRI* modelRI);
/** Ends the capture begun on `stream` and returns its instance, ready to execute. A stream not capturing:
 *  ACL_ERROR_RT_STREAM_NOT_CAPTURED; another thread (mode not RELAXED): ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD;
 *  a joined stream left unjoined: ACL_ERROR_RT_STREAM_UNJOINED; an invalidated capture:
 *  ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED. On failure *modelRI is NULL and the capture is over. */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI* modelRI);
/** Swaps the calling thread's capture mode with *mode. */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode* mode);
/** Replays the instance on `stream` (one operation of the stream). */
ACL_FUNC_VISIBILITY aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream);
/** Replays the instance on the default stream and waits up to `timeout` ms for it (-1: without limit). */
ACL_FUNC_VISIBILITY aclError aclmdlRIExecute(aclmdlRI modelRI, int32_t timeout);
/** Releases the instance (replays already queued still run). Not a live instance: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclmdlRIDestroy(aclmdlRI modelRI);
/** Writes the instance's tasks (one line each: its kind) to stdout. */
ACL_FUNC_VISIBILITY aclError aclmdlRIDebugPrint(aclmdlRI modelRI);

#ifdef __cplusplus
}
#endif

#endif /* ACL_ACL_RT_H */
