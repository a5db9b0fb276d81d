/* profiler.h — seeing what the runtime does: a timeline trace of every stream (Chrome trace-event JSON) and the
 * usage counters of the calling process (what runtime-smi shows for every process). Logging is configured by the
 * RUNTIME_LOG environment variable alone (docs/observability.md). */
#ifndef RUNTIME_PROFILER_H
#define RUNTIME_PROFILER_H

#include "runtime/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- trace */

#define RT_PROFILER_DEFAULT 0x0u       /* operations, event flows, host API calls and memory counters */
#define RT_PROFILER_NO_API_CALLS 0x1u  /* leave out the host API call spans (the per-thread tracks) */
#define RT_PROFILER_NO_MEMORY 0x2u     /* leave out the memory counter tracks */

/** Starts writing a trace of every operation of every device to `path` (created or truncated), in Chrome's
 *  trace-event JSON (Perfetto and chrome://tracing open it). The file is written as the program runs and is
 *  readable at every moment (a program killed mid-run leaves the events up to the last flush, ~100 ms); the
 *  runtime's exit handler completes it when the program ends without rtProfilerStop. RUNTIME_TRACE=path in the
 *  environment starts it at rtInit with RT_PROFILER_DEFAULT.
 *  RT_ERROR_INVALID_VALUE: path is NULL or empty, or flags has unknown bits; RT_ERROR_ILLEGAL_STATE: a trace is
 *  already being written (the message names its path); RT_ERROR_UNKNOWN: the file cannot be created (errno's
 *  words in the message). */
RT_API rtError_t rtProfilerStart(const char* path, unsigned int flags);
/** Waits for nothing: the operations that completed by now are written, the file is closed and complete.
 *  Operations still queued are left out. RT_ERROR_ILLEGAL_STATE when no trace is being written. */
RT_API rtError_t rtProfilerStop(void);

/* ---------------------------------------------------------------- usage (runtime-smi) */

typedef struct rtDeviceUsage {
    int device;                  /* index in this process (rtSetDevice's) */
    char name[64];               /* rtDeviceProp.name */
    char backend[16];            /* "cpu", "cuda" */
    size_t memory_total;         /* rtMemGetInfo's total */
    rtMemStats memory;           /* allocated, reserved, pool state: rtMemGetStats of that device */
    uint32_t streams;            /* live streams, the default stream included */
    uint64_t operations;         /* operations queued on the device's streams since rtInit */
    uint64_t kernels_launched;   /* kernel launches among them (graph kernel nodes count once per replay) */
    uint64_t reserved[8];
} rtDeviceUsage;

/** The usage of `device` by the calling process: the figures runtime-smi shows for it. Also published, unless
 *  RUNTIME_SMI=0, in a small status file per process under /dev/shm/runtime-smi/ that the runtime keeps current
 *  (at most ~100 ms old) and removes at exit. RT_ERROR_INVALID_DEVICE, RT_ERROR_INVALID_VALUE (usage NULL). */
RT_API rtError_t rtDeviceGetUsage(int device, rtDeviceUsage* usage);

#ifdef __cplusplus
}
#endif

#endif /* RUNTIME_PROFILER_H */
