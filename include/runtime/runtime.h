/* runtime.h — the C API of the runtime: the stable ABI, modelled on the CUDA runtime API. */
#ifndef RUNTIME_RUNTIME_H
#define RUNTIME_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  define RT_API __declspec(dllimport)
#elif defined(RUNTIME_BUILDING_LIBRARY)
#  define RT_API __attribute__((visibility("default")))
#else
#  define RT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header, at compile time; rtGetVersion reports the library's, at run time. */
#define RUNTIME_VERSION_MAJOR 0
#define RUNTIME_VERSION_MINOR 1
#define RUNTIME_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch (0.1.0 is 100, 1.2.3 is 10203): the encoding of rtGetVersion. */
#define RUNTIME_VERSION (RUNTIME_VERSION_MAJOR * 10000 + RUNTIME_VERSION_MINOR * 100 + RUNTIME_VERSION_PATCH)

/* ---------------------------------------------------------------- errors */

typedef enum rtError {
    RT_SUCCESS = 0,
    RT_ERROR_INVALID_VALUE = 1,    /* an argument is wrong: null, out of range, contradictory */
    RT_ERROR_INVALID_DEVICE = 2,   /* no device with that index */
    RT_ERROR_INVALID_HANDLE = 3,   /* a stream/event/module handle that is not alive */
    RT_ERROR_OUT_OF_MEMORY = 4,    /* the device (or host) cannot hold the allocation */
    RT_ERROR_NOT_READY = 5,        /* queried work has not completed yet (not a failure) */
    RT_ERROR_COMPILE_FAILED = 6,   /* a kernel source did not compile */
    RT_ERROR_LAUNCH_FAILED = 7,    /* queued work failed; reported by the next synchronize/query */
    RT_ERROR_NOT_SUPPORTED = 8,    /* the device or build cannot do this */
    RT_ERROR_NOT_FOUND = 9,        /* a named symbol (kernel) does not exist */
    RT_ERROR_NOT_PERMITTED = 10,   /* the call would wait from inside queue context (a host function, a release) */
    RT_ERROR_STREAM_CAPTURE_UNSUPPORTED = 11,  /* not allowed while a stream capture is under way (graph.h) */
    RT_ERROR_STREAM_CAPTURE_INVALIDATED = 12,  /* the capture was invalidated by an earlier error */
    RT_ERROR_STREAM_CAPTURE_UNJOINED = 13,     /* a stream forked into the capture was not joined back */
    RT_ERROR_STREAM_CAPTURE_IMPLICIT = 14,     /* the default stream was used while a stream was capturing */
    RT_ERROR_STREAM_CAPTURE_WRONG_THREAD = 15, /* the capture was begun on another thread */
    RT_ERROR_STREAM_CAPTURE_ISOLATION = 16,    /* a dependency would cross from one capture into another */
    RT_ERROR_CAPTURED_EVENT = 17,              /* the event was last recorded in a capture: it has no work to wait for */
    RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 18,   /* rtGraphExecUpdate refused the graph (see its result) */
    RT_ERROR_ILLEGAL_STATE = 19,               /* the object is not in a state that allows the call */
    RT_ERROR_INVALID_IMAGE = 20,               /* encoded image data is corrupt, truncated or not of that format (dvpp.h) */
    RT_ERROR_TIMEOUT = 21,                     /* a wait ran out of time: a collective's peer (comm.h), a synchronize
                                                  with a timeout; the message names what was waited for */
    RT_ERROR_NOT_INITIALIZED = 22,             /* the driver under a backend is not (or no longer) initialised */
    RT_ERROR_DEVICE_LOST = 23,                 /* the device stopped working (uncorrectable ECC error, a lost
                                                  context): its work and memory are gone; rtDeviceReset or restart */
    RT_ERROR_UNKNOWN = 999
} rtError_t;

/** Constant name of the code, e.g. "RT_ERROR_INVALID_VALUE"; "RT_ERROR_UNRECOGNIZED" if unknown. */
RT_API const char* rtGetErrorName(rtError_t error);
/** Constant one-line description of the code. */
RT_API const char* rtGetErrorString(rtError_t error);
/** Detail of the last failed call on this thread ("" if none): what was wrong, what was expected.
 *  Valid until the next failing call on this thread. Successful calls do not clear it. */
RT_API const char* rtGetLastErrorMessage(void);

/* ---------------------------------------------------------------- element types */

/** Element types of the operations that interpret memory (collectives, DVPP's normalisation). The values are
 *  NCCL's ncclDataType_t values for the same types, so a cuda backend hands them to NCCL unchanged. */
typedef enum rtDataType {
    RT_INT8 = 0,
    RT_UINT8 = 1,
    RT_INT32 = 2,
    RT_UINT32 = 3,
    RT_INT64 = 4,
    RT_UINT64 = 5,
    RT_FLOAT16 = 6,  /* IEEE binary16 (the kernel dialect's rt_half) */
    RT_FLOAT32 = 7,
    RT_FLOAT64 = 8,
    RT_BFLOAT16 = 9  /* the upper half of a binary32 (rt_bfloat16) */
} rtDataType;
/** Bytes of one element of `type`; 0 for a value that is not an rtDataType. */
RT_API size_t rtDataTypeSize(rtDataType type);

/** The version of the loaded library, encoded as RUNTIME_VERSION is (major * 10000 + minor * 100 + patch):
 *  compare it with the RUNTIME_VERSION a program was compiled with. Needs no initialisation.
 *  NULL: RT_ERROR_INVALID_VALUE. */
RT_API rtError_t rtGetVersion(int* version);

/* ---------------------------------------------------------------- init and devices */

/** Initialise the runtime. Optional: every call initialises with defaults on first use.
 *  `options` is NULL or "key=value;key=value". The core's key: backend (a backend's name, e.g. cpu or cuda:
 *  whose devices come first). Each backend parses and checks its own keys, spelled <backend>.<key>:
 *    cpu.devices (count), cpu.memory (bytes of each device, with optional K/M/G/T suffix), cpu.executors
 *    (executor threads; default one per CPU of the process' affinity mask), cpu.stream_min_bytes (bytes: a tuning threshold of the cpu backend's launches, see
 *    README; default the last-level cache size);
 *    cuda.enable (0/1, off/on: 0 enumerates no cuda device, and cuda:0's error says it was disabled).
 *  Older spellings stay accepted: cpu_devices, cpu_memory, executors, cpu_stream_min_bytes. Environment
 *  variables give the defaults: RUNTIME_CPU_DEVICES, RUNTIME_CPU_MEMORY, RUNTIME_EXECUTORS,
 *  RUNTIME_CPU_STREAM_MIN_BYTES, RUNTIME_CUDA (cuda.enable), RUNTIME_BACKEND. An unknown key (the message
 *  lists the known ones), an item without '=', or a bad value (the message names the key and what it
 *  expects): RT_ERROR_INVALID_VALUE.
 *  Device order: the cpu devices (cpu:0, cpu:1, ...), then the cuda devices (cuda:0, ...) in the driver's
 *  order, so device 0 — every thread's initial device — is cpu:0. With backend=cuda (and at least one
 *  GPU) the cuda devices come first and device 0 is cuda:0; without a GPU the order stays as it is.
 *  The cuda backend opens the driver at run time (libcuda.so.1, or $RUNTIME_CUDA_DRIVER_LIB): without a
 *  driver or a GPU it has no devices and everything else works.
 *  default_stream=legacy|per-thread (environment: RUNTIME_DEFAULT_STREAM) says what the NULL stream is:
 *  legacy (the default) — each device's legacy default stream, as CUDA's (see RT_STREAM_NON_BLOCKING);
 *  per-thread — each thread's own stream of the device (CUDA's --default-stream per-thread), ordered with no
 *  other stream, kept until rtFinalize; rtMemcpy/rtMemset then order after the calling thread's work only.
 *  Options given while already initialised with different values: RT_ERROR_INVALID_VALUE. */
RT_API rtError_t rtInit(const char* options);
/** Wait for all work, release every resource; handles become invalid. rtInit may follow.
 *  Not to be called concurrently with other runtime calls. */
RT_API rtError_t rtFinalize(void);

RT_API rtError_t rtGetDeviceCount(int* count);
/** The index of the device named `name`: "cpu:0", "cuda:1", or a backend alone ("cuda" means "cuda:0").
 *  A device that does not exist: RT_ERROR_INVALID_DEVICE, the message listing the devices present and,
 *  for a backend without devices, why (e.g. "the CUDA driver library 'libcuda.so.1' cannot be loaded"). */
RT_API rtError_t rtGetDeviceByName(int* device, const char* name);
/** Select the current device of the calling thread (default 0). */
RT_API rtError_t rtSetDevice(int device);
RT_API rtError_t rtGetDevice(int* device);

typedef struct rtDeviceProp {
    char name[256];               /* e.g. "cpu:0 (Intel(R) Xeon(R) ...)" */
    char backend[16];             /* "cpu" or "cuda" */
    size_t total_memory;          /* bytes */
    int compute_units;            /* cores (cpu) or multiprocessors (cuda) */
    int device_index;             /* the index rtSetDevice takes */
    int backend_ordinal;          /* index among devices of the same backend: cpu:N */
    int max_threads_per_block;
    int max_grid_size[3];
    int max_block_size[3];
    int compute_capability_major; /* 0 on cpu */
    int compute_capability_minor;
    int unified_addressing;       /* 1 if device memory is host-addressable (cpu) */
    size_t local_memory_per_group; /* bytes of local memory one work-group may use: its RT_LOCAL arrays plus the
                                      launch's shared_bytes (CUDA: shared memory per block) */
    /* Fields added after the first version take the place of reserved ones, so sizeof(rtDeviceProp) and every
     * earlier offset stay as they were; the library zeroes the whole struct first (reserved stays 0). */
    size_t max_local_memory_per_group; /* the most local memory a work-group can be given (CUDA's opt-in maximum,
                                          sharedMemPerBlockOptin); >= local_memory_per_group */
    unsigned char uuid[16];       /* stable across runs and processes: cuDeviceGetUuid on cuda; on cpu derived from
                                     the host's machine id and the device's ordinal */
    int subgroup_size;            /* work-items that run in lockstep (CUDA's warp size; 1 on cpu) */
    int clock_rate_khz;           /* peak clock of the compute units */
    int memory_bus_width;         /* bits */
    int l2_cache_bytes;           /* the last-level cache shared by the compute units */
    int concurrent_kernels;       /* 1 if kernels of different streams may run at once */
    int managed_memory;           /* 1 if rtMallocManaged is supported */
    int reserved[18];
} rtDeviceProp;

RT_API rtError_t rtGetDeviceProperties(rtDeviceProp* prop, int device);
/** Wait for all work on all streams of the current device; reports every stream that failed (the code of the
 *  first, the message naming each: "2 stream(s) failed: [stream ...] ...; [stream ...] ...") and clears them. */
RT_API rtError_t rtDeviceSynchronize(void);
/** Free and total memory of the current device, in bytes. */
RT_API rtError_t rtMemGetInfo(size_t* free_bytes, size_t* total_bytes);

/* ---------------------------------------------------------------- streams */

typedef struct rtStream_st* rtStream_t; /* NULL = the current device's default stream */
typedef struct rtEvent_st* rtEvent_t;

#define RT_STREAM_DEFAULT 0x0u
/* The legacy default stream (CUDA's; rtInit's default_stream=legacy, the default): work on the NULL stream waits for
 * the work queued before it on every blocking stream of the device (created without RT_STREAM_NON_BLOCKING), and
 * work queued on a blocking stream waits for the NULL stream's work queued before it. Streams created with
 * RT_STREAM_NON_BLOCKING take no part. The synchronous calls (rtMemcpy, rtMemset) run on the NULL stream, so they
 * return the data that the blocking streams' earlier work wrote. A failure that such a wait meets fails the waiting
 * stream too ("dependency failed", see below). While a blocking stream captures, the NULL stream refuses work
 * (RT_ERROR_STREAM_CAPTURE_IMPLICIT). */
#define RT_STREAM_NON_BLOCKING 0x1u

/* Failure semantics (every backend). A stream whose operation fails (a kernel trap, rt_assert, a host function that
 * throws or calls rtHostFuncSetError) keeps the failure until a synchronize or query reports it. Until then it skips
 * the work queued behind the failure (skipped work counts as completed; the report says how many operations were
 * skipped); an event recorded behind the failure carries it (rtEventSynchronize/rtEventQuery return it, every time,
 * until recorded again); a stream that waits for such an event fails with "dependency failed", naming the original
 * operation and stream, and skips its own work behind the wait. After the report the stream runs work again. On cuda
 * a faulting kernel loses the whole context instead (docs/cuda.md); host-function failures behave as above there,
 * except that kernels and copies already handed to the GPU behind a failure still run.
 *
 * Queue context. Host functions and deferred releases (rtStreamDeferRelease) run on runtime threads, never inside a
 * user's synchronize call. They may queue work, record events, query, allocate and free; calls that would wait for
 * queued work (rtStreamSynchronize, rtEventSynchronize, rtDeviceSynchronize, rtMemcpy, rtMemset, rtHostUnregister,
 * rtFinalize) return RT_ERROR_NOT_PERMITTED at once — the work waited for may be the very host function. An
 * allocation there that would need to wait for in-flight frees fails with RT_ERROR_OUT_OF_MEMORY instead. */

/** Create an in-order asynchronous queue on the current device. */
RT_API rtError_t rtStreamCreate(rtStream_t* stream);
RT_API rtError_t rtStreamCreateWithFlags(rtStream_t* stream, unsigned int flags);
/** Release the stream; returns at once (as cudaStreamDestroy does): the work already queued still runs, and the
 *  stream's resources go when it has. The handle is invalid from the call on. The default stream cannot be
 *  destroyed. */
RT_API rtError_t rtStreamDestroy(rtStream_t stream);
/** Block until all work queued so far has completed. Returns the stream's first asynchronous
 *  failure since the last synchronize/query (and clears it), naming the failed operation. */
RT_API rtError_t rtStreamSynchronize(rtStream_t stream);
/** RT_SUCCESS if all queued work completed, RT_ERROR_NOT_READY if not, or a pending async error. */
RT_API rtError_t rtStreamQuery(rtStream_t stream);
/** Work queued on `stream` after this call waits for the event's most recent record.
 *  Never blocks the host. An event never recorded is already complete. */
RT_API rtError_t rtStreamWaitEvent(rtStream_t stream, rtEvent_t event);

/** Work queued on `stream` after this call waits for the work queued so far on `native_stream`, a stream of the
 *  backend's own API on the stream's device: on cuda a CUstream (CU_STREAM_LEGACY = 1 and CU_STREAM_PER_THREAD = 2
 *  included) of another library — for DLPack and the CUDA Array Interface, whose consumers synchronise on the
 *  producer's stream. Never blocks the host. RT_ERROR_NOT_SUPPORTED on a backend without native streams (cpu);
 *  NULL is refused (RT_ERROR_INVALID_VALUE: pass the stream itself, e.g. CU_STREAM_LEGACY). */
RT_API rtError_t rtStreamWaitNativeStream(rtStream_t stream, void* native_stream);

typedef void (*rtHostFn_t)(void* user_data);
/** Queue a host function; it runs after the preceding work and before the following work, on a runtime thread
 *  (queue context: see above; waiting calls return RT_ERROR_NOT_PERMITTED). Skipped while the stream holds an
 *  unreported failure. */
RT_API rtError_t rtLaunchHostFunc(rtStream_t stream, rtHostFn_t fn, void* user_data);
/** Called from inside a host function: marks it failed. The stream's next synchronize/query returns `error` with
 *  `message`; until then the work behind it is skipped. Outside a host function: RT_ERROR_INVALID_VALUE. */
RT_API rtError_t rtHostFuncSetError(rtError_t error, const char* message);
/** Calls release(user_data) once every operation queued on `stream` so far has completed (failed or
 *  skipped operations count as completed), exactly once: on a runtime thread, or in a thread that calls
 *  rtStreamSynchronize/rtDeviceSynchronize/rtMemGetStats (which run what is due before returning and wait for
 *  releases already running), or before returning, in the caller, when nothing is pending. For keeping objects
 *  used by queued work alive: the caller gives up its reference through `release`. `release` runs in queue
 *  context: it must not wait (calls that would return RT_ERROR_NOT_PERMITTED), nor block on a lock that a thread
 *  may hold while it synchronizes. Releases still pending at rtFinalize run after all work has completed. */
RT_API rtError_t rtStreamDeferRelease(rtStream_t stream, rtHostFn_t release, void* user_data);

/* ---------------------------------------------------------------- events */

#define RT_EVENT_DEFAULT 0x0u
#define RT_EVENT_BLOCKING_SYNC 0x1u  /* synchronize parks instead of spinning first */
#define RT_EVENT_DISABLE_TIMING 0x2u /* no timestamps: rtEventElapsedTime refuses it */
#define RT_EVENT_INTERPROCESS 0x4u   /* shareable with other processes (rtIpcGetEventHandle); needs DISABLE_TIMING */

RT_API rtError_t rtEventCreate(rtEvent_t* event);
RT_API rtError_t rtEventCreateWithFlags(rtEvent_t* event, unsigned int flags);
RT_API rtError_t rtEventDestroy(rtEvent_t event);
/** Capture the work queued on `stream` so far; the event completes when that work has. */
RT_API rtError_t rtEventRecord(rtEvent_t event, rtStream_t stream);
/** Block until the event's latest record has completed; returns the failure that record carries, if any. */
RT_API rtError_t rtEventSynchronize(rtEvent_t event);
/** RT_SUCCESS if complete (or never recorded), RT_ERROR_NOT_READY otherwise, or the failure the record carries. */
RT_API rtError_t rtEventQuery(rtEvent_t event);
/** Milliseconds between two completed, timed records. */
RT_API rtError_t rtEventElapsedTime(float* ms, rtEvent_t start, rtEvent_t end);

/* ---------------------------------------------------------------- memory */

typedef enum rtMemcpyKind {
    RT_MEMCPY_HOST_TO_HOST = 0,
    RT_MEMCPY_HOST_TO_DEVICE = 1,
    RT_MEMCPY_DEVICE_TO_HOST = 2,
    RT_MEMCPY_DEVICE_TO_DEVICE = 3,
    RT_MEMCPY_DEFAULT = 4 /* inferred from the operands */
} rtMemcpyKind;

/** Device memory on the current device, 256-byte aligned. size 0 gives NULL and succeeds. */
RT_API rtError_t rtMalloc(void** ptr, size_t size);
/** Frees device memory; returns at once, never waits. Memory still used by queued work (on any stream of any
 *  device) is returned to the system — or, pooled, made reusable — once every stream has run what was queued
 *  before the call. NULL is a no-op. */
RT_API rtError_t rtFree(void* ptr);
/** Page-locked host memory, registered with the runtime. */
RT_API rtError_t rtMallocHost(void** ptr, size_t size);
/** Frees pinned host memory; returns at once, the memory goes once the work queued before the call has run. */
RT_API rtError_t rtFreeHost(void* ptr);
/** Synchronous copy on the NULL stream: ordered after the work queued before it on the NULL stream and (legacy
 *  default stream) on every blocking stream of the current device; returns when the bytes have arrived. */
RT_API rtError_t rtMemcpy(void* dst, const void* src, size_t count, rtMemcpyKind kind);
RT_API rtError_t rtMemcpyAsync(void* dst, const void* src, size_t count, rtMemcpyKind kind,
                               rtStream_t stream);
/** Set `count` bytes of device memory to (unsigned char)value. */
RT_API rtError_t rtMemset(void* ptr, int value, size_t count);
RT_API rtError_t rtMemsetAsync(void* ptr, int value, size_t count, rtStream_t stream);

/* ---------------------------------------------------------------- memory strategies and statistics */

/** Stream-ordered allocation: the memory may be used by work queued on `stream` after this call, and
 *  by other streams once ordered after it. Served from the pool when one is enabled. */
RT_API rtError_t rtMallocAsync(void** ptr, size_t size, rtStream_t stream);
/** Stream-ordered free: the memory is reused by later work on `stream` at once, and by other streams
 *  only after `stream` has run everything queued before this call. Never blocks. */
RT_API rtError_t rtFreeAsync(void* ptr, rtStream_t stream);

#define RT_POOL_DEFAULT 0x0u
#define RT_POOL_GROW 0x1u /* past pool_size, allocate outside the pool instead of failing */

/** Serve the current device's allocations from a pool: `pool_size` bytes of address space are reserved
 *  (not committed: resident memory grows only with use) and committed in `block_size` units; best fit
 *  with splitting and coalescing. pool_size 0 disables the pool. Refused while pool allocations live. */
RT_API rtError_t rtEnablePoolAllocator(size_t pool_size, size_t block_size, unsigned int flags);
/** With reuse on, freed memory stays committed and is reused by later allocations (a caching allocator);
 *  off, it is returned to the system at once. Turning it on without a pool enables a default pool
 *  (the device's capacity, 2 MiB blocks). */
RT_API rtError_t rtEnableMemoryReuse(int enable);
/** With zero copy on, pinned and registered host memory is mapped for the device: it may be passed to
 *  kernels and copies as device memory (rtHostGetDevicePointer), and copies the runtime proves redundant
 *  (source and destination the same bytes) are elided. */
RT_API rtError_t rtEnableZeroCopy(int enable);
/** Return the pool's unused committed memory (and cached blocks) to the system. */
RT_API rtError_t rtMemEmptyCache(void);

#define RT_HOST_REGISTER_DEFAULT 0x0u
/** Register (page-lock) existing host memory with the runtime: copies from/to it are checked like pinned
 *  memory, and with zero copy on the device may use it in place. */
RT_API rtError_t rtHostRegister(void* ptr, size_t size, unsigned int flags);
/** Unregisters; waits for the queued work first (the memory is the caller's again when it returns), so it is
 *  RT_ERROR_NOT_PERMITTED in queue context. */
RT_API rtError_t rtHostUnregister(void* ptr);
/** The device address of pinned or registered host memory (zero copy must be on, else NOT_SUPPORTED). */
RT_API rtError_t rtHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned int flags);

typedef struct rtMemStats {
    size_t allocated_bytes;       /* bytes of live allocations, as requested */
    size_t reserved_bytes;        /* bytes held from the system: pool blocks committed + direct allocations */
    size_t peak_allocated_bytes;  /* since the start or rtMemResetPeakStats */
    size_t peak_reserved_bytes;
    size_t num_allocs;            /* successful allocations */
    size_t num_frees;
    size_t num_cache_hits;        /* allocations served from memory already held (pool) */
    size_t num_cache_misses;      /* allocations that needed memory from the system */
    size_t num_ooms;              /* allocations refused for lack of memory */
    size_t largest_free_block;    /* largest contiguous free range of the pool (0 without a pool) */
    size_t pool_size;             /* address space reserved by the pool (0 without a pool) */
    size_t num_elided_copies;     /* copies skipped because source and destination were the same bytes */
    size_t elided_copy_bytes;
    size_t num_live_allocations;
    size_t reserved[16];
} rtMemStats;

/** Memory statistics of the current device (exact: every allocation and free is counted). */
RT_API rtError_t rtMemGetStats(rtMemStats* stats);
/** Peaks restart from the current values. */
RT_API rtError_t rtMemResetPeakStats(void);

/* ---------------------------------------------------------------- memory pool objects (issue 20) */

/* A pool of device memory that rtMallocAsync / rtMallocFromPoolAsync allocate from (cudaMemPool_t). Each device has a
 * default pool — the device's allocator, which rtEnablePoolAllocator, rtEnableMemoryReuse and rtMemEmptyCache
 * configure — and a current pool (the default one until rtDeviceSetMemPool) that rtMallocAsync uses. A pool made by
 * rtMemPoolCreate is independent of every other: its own address space, reservation, statistics and release
 * threshold. rtFreeAsync / rtFree return memory to the pool it came from. */
typedef struct rtMemPool_st* rtMemPool_t;

typedef enum rtMemAllocationType { RT_MEM_ALLOCATION_TYPE_INVALID = 0, RT_MEM_ALLOCATION_TYPE_PINNED = 1 } rtMemAllocationType;
typedef enum rtMemLocationType { RT_MEM_LOCATION_TYPE_INVALID = 0, RT_MEM_LOCATION_TYPE_DEVICE = 1 } rtMemLocationType;
typedef enum rtMemAllocationHandleType { RT_MEM_HANDLE_TYPE_NONE = 0 } rtMemAllocationHandleType;

typedef struct rtMemLocation {
    rtMemLocationType type; /* RT_MEM_LOCATION_TYPE_DEVICE */
    int id;                 /* the device index */
} rtMemLocation;

/* cudaMemPoolProps' fields, in its order. Zero-initialise it, then set what you need: the reserved tail must stay
 * zero (later fields take its place, and zero will mean "as before"). */
typedef struct rtMemPoolProps {
    rtMemAllocationType alloc_type;        /* RT_MEM_ALLOCATION_TYPE_PINNED */
    rtMemAllocationHandleType handle_types; /* RT_MEM_HANDLE_TYPE_NONE */
    rtMemLocation location;                /* the device */
    void* win32_security_attributes;       /* NULL */
    size_t max_size;                       /* address space the pool may use, in bytes; 0: the device's memory */
    unsigned short usage;                  /* 0 */
    unsigned char reserved[54];
} rtMemPoolProps;

/* cudaMemPoolAttr's numbers. Types: the reuse attributes are int (0 or 1), the others uint64_t. */
typedef enum rtMemPoolAttr {
    RT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
    RT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
    RT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
    RT_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,   /* bytes the pool keeps reserved at a synchronize; more goes back */
    RT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5, /* bytes held from the system (read only) */
    RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,   /* their high-water mark; set 0 to restart it */
    RT_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,    /* bytes of live allocations, as requested (read only) */
    RT_MEMPOOL_ATTR_USED_MEM_HIGH = 8        /* their high-water mark; set 0 to restart it */
} rtMemPoolAttr;

/** A new pool on props->location.id. RT_ERROR_INVALID_VALUE names a field that is not as documented above. */
RT_API rtError_t rtMemPoolCreate(rtMemPool_t* pool, const rtMemPoolProps* props);
/** Destroys a created pool (a default pool cannot be). Its handle is invalid at once; memory still allocated from it
 *  stays valid, and the pool's memory goes back to the system once the last of it is freed (as CUDA does). A device
 *  whose current pool it was uses its default pool again. */
RT_API rtError_t rtMemPoolDestroy(rtMemPool_t pool);
/** `value` points to an int or a uint64_t as rtMemPoolAttr says. */
RT_API rtError_t rtMemPoolSetAttribute(rtMemPool_t pool, rtMemPoolAttr attr, void* value);
RT_API rtError_t rtMemPoolGetAttribute(rtMemPool_t pool, rtMemPoolAttr attr, void* value);
/** Returns unused reserved memory to the system until at most `min_bytes_to_keep` reserved bytes stay, or only memory
 *  in use (or freed on a stream that has not run the free yet) is left. */
RT_API rtError_t rtMemPoolTrimTo(rtMemPool_t pool, size_t min_bytes_to_keep);
/** rtMallocAsync from `pool`, which must belong to the stream's device. */
RT_API rtError_t rtMallocFromPoolAsync(void** ptr, size_t size, rtMemPool_t pool, rtStream_t stream);
/** The pool rtMallocAsync uses on `device` from now on (a pool of that device). */
RT_API rtError_t rtDeviceSetMemPool(int device, rtMemPool_t pool);
RT_API rtError_t rtDeviceGetMemPool(rtMemPool_t* pool, int device);
RT_API rtError_t rtDeviceGetDefaultMemPool(rtMemPool_t* pool, int device);

/* ---------------------------------------------------------------- modules and kernels */

typedef struct rtModule_st* rtModule_t;
typedef struct rtFunction_st* rtFunction_t;

typedef struct rtDim3 {
    unsigned int x, y, z;
} rtDim3;

/** Compile kernel-dialect source (include/runtime/kernel.h is prepended) for the current device.
 *  `options`: NULL or space-separated -O0..-O3, -g, -fwrapv (signed overflow wraps; ignored on cuda),
 *  -mprefer-vector-width=128|256|512 (the vector width the cpu compiler prefers where the machine has it; x86's
 *  compilers prefer 256 by default; ignored on cuda), -DNAME[=V], -UNAME, -I<dir>. Compiled modules are cached
 *  in memory and on disk (RUNTIME_CACHE_DIR, default ~/.cache/runtime). A compile error returns
 *  RT_ERROR_COMPILE_FAILED with the compiler's diagnostics (lines of `source`) in rtGetLastErrorMessage().
 *  The in-memory cache keeps the `module_cache_limit` (rtInit option; environment: RUNTIME_MODULE_CACHE_LIMIT)
 *  most recently loaded sources per device (default 256; 0: none): an evicted module stays loaded while a handle
 *  or a queued launch uses it, and a later load of its source comes from the disk cache. */
RT_API rtError_t rtModuleLoadSource(rtModule_t* module, const char* source, const char* options);
/** Load a precompiled module (runtime-compile's output: a shared object on cpu). */
RT_API rtError_t rtModuleLoadFile(rtModule_t* module, const char* path);
/** Look up a kernel (an RT_KERNEL function) by name: RT_ERROR_NOT_FOUND lists the module's kernels. */
RT_API rtError_t rtModuleGetFunction(rtFunction_t* function, rtModule_t module, const char* name);
/** Release the module; its functions become invalid (RT_ERROR_INVALID_HANDLE, as is a second unload).
 *  Launches already queued still complete: the code is unloaded once they have run and nothing else (another
 *  handle of the same source, the in-memory cache) holds it. Never waits. */
RT_API rtError_t rtModuleUnload(rtModule_t module);
/** The module-scope variable `name` of the module (declared `RT_GLOBAL type name = ...;` in its source): `*ptr`
 *  receives its device address, `*bytes` (when `bytes` is not NULL) its size. The address is device memory of the
 *  module's device for rtMemcpy/rtMemcpyAsync (and rtMemset) while the module is loaded, and the module's kernels
 *  read and write the same variable; it is not freed (rtFree refuses it). Loads of the same source and options share
 *  one module while it is cached — per device on cuda, across all cpu devices on cpu (they share code) — and so
 *  share its globals. Unknown name: RT_ERROR_INVALID_VALUE
 *  naming it and listing the module's globals; an unloaded module: RT_ERROR_INVALID_HANDLE. After rtModuleUnload
 *  the address is no longer device memory to the runtime (copies refuse it). */
RT_API rtError_t rtModuleGetGlobal(void** ptr, size_t* bytes, rtModule_t module, const char* name);
/** Number of parameters of the kernel, and (if `sizes` is not NULL) the size in bytes of each,
 *  written to sizes[0 .. *count-1]; `*count` must be the capacity of `sizes` on entry when it is given. */
RT_API rtError_t rtFunctionGetParamInfo(rtFunction_t function, int* count, size_t* sizes);

/** Launch grid x block work-items of `function` on `stream` (asynchronous). `args` follows CUDA:
 *  an array of pointers to each argument's value, as many as the kernel has parameters; the values
 *  are copied at the call. Zero or oversized dimensions: RT_ERROR_INVALID_VALUE. A kernel that fails
 *  rt_assert or traps is reported by the next synchronize of `stream` as RT_ERROR_LAUNCH_FAILED. */
RT_API rtError_t rtLaunchKernel(rtFunction_t function, rtDim3 grid, rtDim3 block, void** args,
                                size_t shared_bytes, rtStream_t stream);
/** What rtLaunchKernelEx launches, beyond rtLaunchKernel's grid, block, shared bytes and stream.
 *
 *  The struct can grow: `size` says how much of it the caller knows. Set it to sizeof(rtLaunchConfig) as
 *  compiled — RT_LAUNCH_CONFIG_INIT does, with every other field 0 — and set the fields by name. The library
 *  reads only the bytes `size` covers; fields added in later versions, past the caller's size, count as 0 (a
 *  field is only ever added with 0 meaning "as before"). A `size` smaller than the first version's struct, or
 *  larger than this library's with a non-zero byte past the fields it knows (the caller set a field this
 *  library does not have), is refused with RT_ERROR_INVALID_VALUE, as is a `size` above 4096 (not set). */
typedef struct rtLaunchConfig {
    size_t size;              /* sizeof(rtLaunchConfig) as the caller compiled it */
    rtDim3 grid;              /* work-groups per dimension */
    rtDim3 block;             /* work-items per work-group */
    size_t shared_bytes;      /* dynamic work-group local memory */
    rtStream_t stream;        /* NULL: the current device's default stream */
    int num_args;             /* parameters given in args; -1: not stated (rtLaunchKernel's convention) */
    const size_t* arg_sizes;  /* NULL, or num_args sizes in bytes, each checked against the parameter's */
    /* 0, or the exact work-item count of that dimension (OpenCL's global size, for a global size that
     * is not a multiple of the block): it must satisfy (grid-1)*block < global <= grid*block. Exact on
     * every backend: the work-items past it never run, on cpu and cuda alike, so kernels need no bounds
     * test of their own. 0 runs all grid*block items of that dimension. */
    unsigned long long global[3];
} rtLaunchConfig;

/** A launch configuration with `size` set and every other field 0 (stream NULL, num_args 0, global 0):
 *  `rtLaunchConfig c = RT_LAUNCH_CONFIG_INIT; c.grid = ...;` (in C a constant initialiser, in C++ a call of
 *  rtLaunchConfigDefault). Header-only: no library call. */
static inline rtLaunchConfig rtLaunchConfigDefault(void) {
#ifdef __cplusplus
    rtLaunchConfig c = {};
#else
    rtLaunchConfig c = { .size = sizeof(rtLaunchConfig) };
#endif
    c.size = sizeof(rtLaunchConfig);
    return c;
}
#ifdef __cplusplus
#  define RT_LAUNCH_CONFIG_INIT (rtLaunchConfigDefault())
#else
#  define RT_LAUNCH_CONFIG_INIT { .size = sizeof(rtLaunchConfig) }
#endif

/** rtLaunchKernel with the arity checked (num_args >= 0: a wrong count or, with arg_sizes, a wrongly
 *  sized argument is refused with RT_ERROR_INVALID_VALUE instead of read past) and an optional exact
 *  global size. `config` (its first config->size bytes) is read during the call only. */
RT_API rtError_t rtLaunchKernelEx(rtFunction_t function, const rtLaunchConfig* config, void** args);

/* ---------------------------------------------------------------- the CUDA-level API (issue 20)
 * Pointer and device attributes, pitched and peer copies, managed memory, stream priorities, waits with a timeout,
 * device reset, function attributes and occupancy. Semantics follow the CUDA runtime function of the same name. */

/* ---- pointer attributes */

typedef enum rtMemoryType {
    RT_MEMORY_TYPE_UNREGISTERED = 0, /* host memory the runtime does not know (or NULL) */
    RT_MEMORY_TYPE_HOST = 1,         /* pinned host memory: rtMallocHost */
    RT_MEMORY_TYPE_DEVICE = 2,       /* rtMalloc, rtMallocAsync, rtMallocPitch, a module's global */
    RT_MEMORY_TYPE_MANAGED = 3,      /* rtMallocManaged */
    RT_MEMORY_TYPE_REGISTERED = 4    /* the user's host memory registered with rtHostRegister */
} rtMemoryType;

typedef struct rtPointerAttributes {
    rtMemoryType type;
    int device;           /* the device the memory belongs to; -1 for unregistered memory */
    void* device_pointer; /* the address device work uses for `ptr`: `ptr` itself for device and managed memory; for
                             pinned or registered memory its mapped address while zero copy is on, else NULL */
    void* host_pointer;   /* the address the host uses: `ptr` for host, registered and managed memory, and for
                             device memory of a device whose memory the host can address (cpu); NULL otherwise */
    void* base;           /* the start of the allocation `ptr` lies in (NULL when unregistered) */
    size_t size;          /* its size in bytes (0 when unregistered) */
    int reserved[8];
} rtPointerAttributes;

/** What the runtime knows about `ptr` (any address, NULL included: unknown addresses are RT_MEMORY_TYPE_UNREGISTERED
 *  and succeed, as in CUDA 11+). A pointer inside an allocation reports that allocation's base and size. */
RT_API rtError_t rtPointerGetAttributes(rtPointerAttributes* attributes, const void* ptr);

/* ---- device attributes */

/** Attributes for rtDeviceGetAttribute. The enum grows at the end; a value this library does not know is refused
 *  with RT_ERROR_INVALID_VALUE (so a program can probe an older library). */
typedef enum rtDeviceAttr {
    RT_DEV_ATTR_MAX_THREADS_PER_BLOCK = 1,
    RT_DEV_ATTR_MAX_BLOCK_DIM_X = 2,
    RT_DEV_ATTR_MAX_BLOCK_DIM_Y = 3,
    RT_DEV_ATTR_MAX_BLOCK_DIM_Z = 4,
    RT_DEV_ATTR_MAX_GRID_DIM_X = 5,
    RT_DEV_ATTR_MAX_GRID_DIM_Y = 6,
    RT_DEV_ATTR_MAX_GRID_DIM_Z = 7,
    RT_DEV_ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 8,  /* bytes of local memory per work-group (RT_LOCAL + shared_bytes) */
    RT_DEV_ATTR_TOTAL_CONSTANT_MEMORY = 9,        /* KiB (bytes do not fit an int on every device) */
    RT_DEV_ATTR_WARP_SIZE = 10,                   /* subgroup size */
    RT_DEV_ATTR_CLOCK_RATE = 13,                  /* kHz */
    RT_DEV_ATTR_MULTIPROCESSOR_COUNT = 16,        /* compute units */
    RT_DEV_ATTR_INTEGRATED = 18,                  /* 1 if the device shares the host's memory */
    RT_DEV_ATTR_CAN_MAP_HOST_MEMORY = 19,
    RT_DEV_ATTR_CONCURRENT_KERNELS = 31,
    RT_DEV_ATTR_MEMORY_CLOCK_RATE = 36,           /* kHz (0 where unknown) */
    RT_DEV_ATTR_GLOBAL_MEMORY_BUS_WIDTH = 37,     /* bits (0 where unknown) */
    RT_DEV_ATTR_L2_CACHE_SIZE = 38,               /* bytes */
    RT_DEV_ATTR_UNIFIED_ADDRESSING = 41,
    RT_DEV_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,    /* 0 on cpu */
    RT_DEV_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
    RT_DEV_ATTR_STREAM_PRIORITIES_SUPPORTED = 78,
    RT_DEV_ATTR_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    RT_DEV_ATTR_MANAGED_MEMORY = 83,
    RT_DEV_ATTR_CONCURRENT_MANAGED_ACCESS = 89,   /* host and device may touch managed memory at once */
    RT_DEV_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    RT_DEV_ATTR_MEMORY_POOLS_SUPPORTED = 115      /* rtMallocAsync / rtFreeAsync */
} rtDeviceAttr;

/** One attribute of `device` (the values are CUDA's cudaDeviceAttr numbers for the same attribute). */
RT_API rtError_t rtDeviceGetAttribute(int* value, rtDeviceAttr attr, int device);

/* ---- pitched (2-D) and 3-D memory */

/** A 2-D allocation of `height` rows of `width` bytes, each row starting `*pitch` bytes after the previous one
 *  (rows aligned for the device's copies and kernels). width 0 or height 0 give NULL, pitch 0, and succeed. */
RT_API rtError_t rtMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height);

/** Copies `height` rows of `width` bytes: row i from src + i*spitch to dst + i*dpitch. A pitch smaller than width is
 *  refused (RT_ERROR_INVALID_VALUE naming it), as is a row range that leaves an operand's allocation; kinds as
 *  rtMemcpy's. Synchronous as rtMemcpy. */
RT_API rtError_t rtMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                            rtMemcpyKind kind);
RT_API rtError_t rtMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                                 rtMemcpyKind kind, rtStream_t stream);
/** Sets `height` rows of `width` bytes, `pitch` apart, to (unsigned char)value. */
RT_API rtError_t rtMemset2D(void* ptr, size_t pitch, int value, size_t width, size_t height);
RT_API rtError_t rtMemset2DAsync(void* ptr, size_t pitch, int value, size_t width, size_t height, rtStream_t stream);

/** A pitched pointer: `ysize` rows of `pitch` bytes make one slice of a 3-D array (`xsize` the usable bytes of a
 *  row). */
typedef struct rtPitchedPtr {
    void* ptr;
    size_t pitch;
    size_t xsize;
    size_t ysize;
} rtPitchedPtr;
/** Extent of a 3-D copy: width in bytes, height in rows, depth in slices. */
typedef struct rtExtent {
    size_t width;
    size_t height;
    size_t depth;
} rtExtent;
/** A position in a pitched array: x in bytes, y in rows, z in slices. */
typedef struct rtPos {
    size_t x;
    size_t y;
    size_t z;
} rtPos;
static inline rtPitchedPtr make_rtPitchedPtr(void* ptr, size_t pitch, size_t xsize, size_t ysize) {
    rtPitchedPtr p;
    p.ptr = ptr;
    p.pitch = pitch;
    p.xsize = xsize;
    p.ysize = ysize;
    return p;
}
static inline rtExtent make_rtExtent(size_t width, size_t height, size_t depth) {
    rtExtent e;
    e.width = width;
    e.height = height;
    e.depth = depth;
    return e;
}
static inline rtPos make_rtPos(size_t x, size_t y, size_t z) {
    rtPos p;
    p.x = x;
    p.y = y;
    p.z = z;
    return p;
}

/** What rtMemcpy3D copies: `extent` from src at src_pos to dst at dst_pos (positions and extent.width in bytes). */
typedef struct rtMemcpy3DParms {
    rtPitchedPtr src;
    rtPos src_pos;
    rtPitchedPtr dst;
    rtPos dst_pos;
    rtExtent extent;
    rtMemcpyKind kind;
} rtMemcpy3DParms;

/** Copies extent.depth slices of extent.height rows of extent.width bytes. Refused (RT_ERROR_INVALID_VALUE, naming
 *  the field): NULL parameters or pointers, a row (pos.x + width) longer than a pitch, a pitched pointer whose ysize
 *  is smaller than pos.y + height while depth > 1, and ranges outside an operand's allocation. Synchronous. */
RT_API rtError_t rtMemcpy3D(const rtMemcpy3DParms* parms);
RT_API rtError_t rtMemcpy3DAsync(const rtMemcpy3DParms* parms, rtStream_t stream);

/* ---- peer access */

/** *can_access = 1 if `device` can address memory of `peer_device` (cpu devices share the host's memory: always 1
 *  between cpu devices; cuda: cuDeviceCanAccessPeer; devices of different backends: 0). The same device: 0, as CUDA. */
RT_API rtError_t rtDeviceCanAccessPeer(int* can_access, int device, int peer_device);
/** Lets the current device's kernels use memory of `peer_device`. flags must be 0. The same device, or a peer it
 *  cannot access: RT_ERROR_INVALID_DEVICE; enabled twice: RT_ERROR_ILLEGAL_STATE (CUDA's "already enabled"). */
RT_API rtError_t rtDeviceEnablePeerAccess(int peer_device, unsigned int flags);
/** Copies `count` bytes from device memory of `src_device` to device memory of `dst_device` (no peer access needed).
 *  Each pointer must be memory of the device named (RT_ERROR_INVALID_VALUE otherwise). Synchronous as rtMemcpy. */
RT_API rtError_t rtMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t count);
/** Asynchronous on `stream` (of either device, or NULL: the current device's default stream). */
RT_API rtError_t rtMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t count,
                                   rtStream_t stream);

/* ---- managed memory */

#define RT_MEM_ATTACH_GLOBAL 0x1u /* accessible from any stream (the default) */
#define RT_MEM_ATTACH_HOST 0x2u   /* accepted: the host may use it; device work as with GLOBAL */
/** The id rtMemPrefetchAsync takes for the host. */
#define RT_CPU_DEVICE_ID (-1)

/** Memory the host and the current device both use through the same address. cpu: device memory, which the host
 *  addresses anyway. A device that cannot provide it: RT_ERROR_NOT_SUPPORTED. Freed with rtFree. */
RT_API rtError_t rtMallocManaged(void** ptr, size_t size, unsigned int flags);
/** Hints that [ptr, ptr+count) of managed memory will be used by `device` (RT_CPU_DEVICE_ID: the host), in stream
 *  order on `stream`: work queued after it finds the memory there. cpu: nothing moves, and the call is still an
 *  operation of the stream, ordered as any other. Memory that is not managed, or a range past its allocation:
 *  RT_ERROR_INVALID_VALUE. */
RT_API rtError_t rtMemPrefetchAsync(const void* ptr, size_t count, int device, rtStream_t stream);

/* ---- stream priorities */

/** The range rtStreamCreateWithPriority accepts: numerically lower is higher priority, as in CUDA. *least is the
 *  default priority (0). Either pointer may be NULL. On cpu: least 0, greatest -2. */
RT_API rtError_t rtDeviceGetStreamPriorityRange(int* least_priority, int* greatest_priority);
/** rtStreamCreateWithFlags with a priority: a priority outside the range is clamped into it (as CUDA does). When
 *  several streams have work ready, the device runs that of the higher-priority stream first (cpu: the executors
 *  take a ready stream of higher priority before one of lower; running work is not interrupted). */
RT_API rtError_t rtStreamCreateWithPriority(rtStream_t* stream, unsigned int flags, int priority);
/** The priority the stream was created with (the default stream: 0). */
RT_API rtError_t rtStreamGetPriority(rtStream_t stream, int* priority);

/* ---- waits with a timeout */

/** rtStreamSynchronize that gives up after `timeout_ms` milliseconds: RT_ERROR_TIMEOUT, the message naming the
 *  stream and how long it waited; the work stays queued and a later wait may succeed. A negative timeout waits
 *  without limit; 0 tests once. */
RT_API rtError_t rtStreamSynchronizeWithTimeout(rtStream_t stream, int timeout_ms);
/** rtEventSynchronize that gives up after `timeout_ms` milliseconds (RT_ERROR_TIMEOUT naming the event). */
RT_API rtError_t rtEventSynchronizeWithTimeout(rtEvent_t event, int timeout_ms);

/* ---- device reset */

/** Destroys every resource of the current device that this process made: streams (the default stream stays but its
 *  failures are cleared), events recorded or created on it, modules loaded for it, and its device, managed and
 *  pitched allocations. Queued work first completes (the call waits for it; RT_ERROR_NOT_PERMITTED in queue context).
 *  Afterwards the handles are invalid (RT_ERROR_INVALID_HANDLE) and the pointers unknown (RT_ERROR_INVALID_VALUE);
 *  pinned host memory, registered host memory and the memory strategies (pool, reuse, zero copy) are kept. Other
 *  devices are untouched. Not to be called while other threads use the device. */
RT_API rtError_t rtDeviceReset(void);

/* ---- function attributes and occupancy */

typedef struct rtFuncAttributes {
    size_t shared_size_bytes;  /* the kernel's static local memory (RT_LOCAL / __shared__) */
    size_t const_size_bytes;   /* 0 where the module cannot tell */
    size_t local_size_bytes;   /* private (per work-item) memory; 0 where the module cannot tell */
    int max_threads_per_block; /* the most work-items per group the kernel can be launched with on its device */
    int num_regs;              /* 0 on cpu */
    int ptx_version;           /* 0 on cpu */
    int binary_version;        /* 0 on cpu */
    int max_dynamic_shared_size_bytes; /* the most shared_bytes a launch may give it */
    int num_params;            /* -1 when the module cannot tell */
    int uses_barriers;         /* 1 if its items meet at barriers (launched over whole work-groups only) */
    int reserved[8];
} rtFuncAttributes;

/** Attributes of a kernel on the device its module was loaded for. */
RT_API rtError_t rtFuncGetAttributes(rtFuncAttributes* attributes, rtFunction_t function);
/** How many work-groups of `block_size` items, each with `dynamic_shared_bytes` of shared memory, can be resident
 *  on one compute unit at once (cpu: one group per core at a time, so 1 when the shape fits; 0 when it does not
 *  fit: too many items, too much local memory). block_size 0: RT_ERROR_INVALID_VALUE. */
RT_API rtError_t rtOccupancyMaxActiveBlocksPerMultiprocessor(int* num_blocks, rtFunction_t function, int block_size,
                                                             size_t dynamic_shared_bytes);
/** The block size that maximises occupancy (*block_size) and the grid that fills the device with it (*min_grid_size:
 *  groups per compute unit times compute units). block_size_limit 0: the device's limit. */
RT_API rtError_t rtOccupancyMaxPotentialBlockSize(int* min_grid_size, int* block_size, rtFunction_t function,
                                                  size_t dynamic_shared_bytes, int block_size_limit);

/* ---------------------------------------------------------------- inter-process handles (IPC)
 * CUDA's cudaIpc* calls (docs/memory.md "Sharing memory and events between processes"). A handle is 64 opaque bytes
 * that another process of the same machine and user opens while the exporting process lives; opening it in the
 * process that exported it is refused (RT_ERROR_INVALID_VALUE), as in CUDA. */

typedef struct rtIpcMemHandle_st { char reserved[64]; } rtIpcMemHandle_t;
typedef struct rtIpcEventHandle_st { char reserved[64]; } rtIpcEventHandle_t;

#define RT_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1u /* accepted (as CUDA's); peers are accessible anyway */

/** A handle to the device allocation `devPtr` lies in: a pointer inside an allocation exports the whole allocation
 *  (opened, it gives the allocation's base). Memory a device cannot share is refused, the message saying why.
 *  Freeing the allocation ends the handle: opening it afterwards is refused (where it can be detected). */
RT_API rtError_t rtIpcGetMemHandle(rtIpcMemHandle_t* handle, void* devPtr);
/** Maps memory exported by another process into this one, as device memory of the current device (copies, kernels
 *  and rtPointerGetAttributes see it so); `flags` 0 or RT_IPC_MEM_LAZY_ENABLE_PEER_ACCESS. rtFree refuses it. */
RT_API rtError_t rtIpcOpenMemHandle(void** devPtr, rtIpcMemHandle_t handle, unsigned int flags);
/** Unmaps memory opened with rtIpcOpenMemHandle (once the work queued so far on every stream has run). */
RT_API rtError_t rtIpcCloseMemHandle(void* devPtr);
/** A handle to an event created with RT_EVENT_INTERPROCESS | RT_EVENT_DISABLE_TIMING. */
RT_API rtError_t rtIpcGetEventHandle(rtIpcEventHandle_t* handle, rtEvent_t event);
/** An event of this process sharing the exported event's state: a record in either process is what rtEventQuery,
 *  rtEventSynchronize and rtStreamWaitEvent in both see. Destroy it with rtEventDestroy. */
RT_API rtError_t rtIpcOpenEventHandle(rtEvent_t* event, rtIpcEventHandle_t handle);

#ifdef __cplusplus
} /* extern "C" */
#endif

#include "runtime/graph.h"

#endif /* RUNTIME_RUNTIME_H */
