/* graph.h — the Graph Executor's C API: stream capture, explicit graphs, executable graphs (instantiate, launch,
 * update) with static memory planning, and executable graphs saved to a file. Included by runtime.h.
 *
 * Semantics follow the CUDA runtime function of the same name where one exists (cudaStreamBeginCapture,
 * cudaGraphAddKernelNode, cudaGraphInstantiate, cudaGraphExecUpdate, ...); where they differ, the comment says so.
 * A graph belongs to the device that was current when it was created (rtGraphCreate) or to the device of the stream
 * it was captured from; its executable graphs run on streams of that device. */
#ifndef RUNTIME_GRAPH_H
#define RUNTIME_GRAPH_H

#ifndef RUNTIME_RUNTIME_H
#  error "include runtime/runtime.h, which includes this header"
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rtGraph_st* rtGraph_t;         /* a graph of operations (nodes with dependencies) */
typedef struct rtGraphExec_st* rtGraphExec_t; /* an executable graph: a graph checked, planned and ready to replay */
typedef struct rtGraphNode_st* rtGraphNode_t; /* a node of one graph */

/* ---------------------------------------------------------------- stream capture */

/** Which calls a capture forbids while it runs ("potentially unsafe" calls: the synchronous rtMemcpy/rtMemset,
 *  rtMalloc, rtFree, rtDeviceSynchronize, synchronizing or querying a capturing stream or an event recorded in a
 *  capture), as CUDA's cudaStreamCaptureMode:
 *    GLOBAL: forbidden in the capturing thread, and in every other thread whose own mode (see
 *            rtThreadExchangeStreamCaptureMode) is GLOBAL while a GLOBAL capture runs;
 *    THREAD_LOCAL: forbidden in the capturing thread only;
 *    RELAXED: not forbidden (the call must still not touch a capturing stream).
 *  A forbidden call fails with RT_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture(s) it would have
 *  broken: rtStreamEndCapture then fails with RT_ERROR_STREAM_CAPTURE_INVALIDATED naming the call. Enforced on every
 *  backend, the cpu one included, so a program that would fail on a GPU fails on the cpu device too. */
typedef enum rtStreamCaptureMode {
    RT_STREAM_CAPTURE_MODE_GLOBAL = 0,
    RT_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    RT_STREAM_CAPTURE_MODE_RELAXED = 2
} rtStreamCaptureMode;

typedef enum rtStreamCaptureStatus {
    RT_STREAM_CAPTURE_STATUS_NONE = 0,        /* not capturing */
    RT_STREAM_CAPTURE_STATUS_ACTIVE = 1,      /* capturing */
    RT_STREAM_CAPTURE_STATUS_INVALIDATED = 2  /* capturing, but an error broke the capture: end it to learn why */
} rtStreamCaptureStatus;

/** Starts capturing `stream` (not the default stream: RT_ERROR_STREAM_CAPTURE_UNSUPPORTED; a stream already
 *  capturing: RT_ERROR_ILLEGAL_STATE). From now on every asynchronous call on the stream — rtMemcpyAsync,
 *  rtMemsetAsync, kernel launches, rtLaunchHostFunc, rtEventRecord, rtStreamWaitEvent, rtMallocAsync, rtFreeAsync —
 *  adds a node to the capture's graph instead of running, depending on the nodes
 *  added before it on that stream. Another stream joins the capture by waiting for an event recorded in it (fork),
 *  and must be joined back (the capturing stream waits for an event recorded on it after its last node) before
 *  rtStreamEndCapture. rtStreamDeferRelease on a capturing stream attaches the release to the graph: it runs once
 *  the graph and every executable graph made from it are destroyed and their launches have completed. */
RT_API rtError_t rtStreamBeginCapture(rtStream_t stream, rtStreamCaptureMode mode);
/** Ends the capture begun on `stream` (from the thread that began it when the mode is not RELAXED:
 *  RT_ERROR_STREAM_CAPTURE_WRONG_THREAD) and returns its graph in `*graph` (destroy it with rtGraphDestroy). A
 *  joined stream left unjoined: RT_ERROR_STREAM_CAPTURE_UNJOINED naming it; an invalidated capture:
 *  RT_ERROR_STREAM_CAPTURE_INVALIDATED naming what broke it. Either way the capture is over (*graph is NULL) and
 *  every stream it involved is usable again. */
RT_API rtError_t rtStreamEndCapture(rtStream_t stream, rtGraph_t* graph);
/** Whether `stream` is capturing (ACTIVE or INVALIDATED; NONE otherwise) and, if `id` is not NULL and it is, the
 *  capture's id (unique in the process, never 0). Allowed during a capture in every mode. */
RT_API rtError_t rtStreamGetCaptureInfo(rtStream_t stream, rtStreamCaptureStatus* status, unsigned long long* id);
/** Swaps the calling thread's capture mode (initially GLOBAL) with `*mode`: afterwards `*mode` holds the previous
 *  one. Typical use: set RELAXED around a call that must run during another thread's capture, then restore. */
RT_API rtError_t rtThreadExchangeStreamCaptureMode(rtStreamCaptureMode* mode);

/* ---------------------------------------------------------------- explicit graphs */

/** The kinds of node (CUDA's cudaGraphNodeType values). */
typedef enum rtGraphNodeType {
    RT_GRAPH_NODE_TYPE_KERNEL = 0,
    RT_GRAPH_NODE_TYPE_MEMCPY = 1,
    RT_GRAPH_NODE_TYPE_MEMSET = 2,
    RT_GRAPH_NODE_TYPE_HOST = 3,
    RT_GRAPH_NODE_TYPE_GRAPH = 4,        /* a child graph */
    RT_GRAPH_NODE_TYPE_EMPTY = 5,
    RT_GRAPH_NODE_TYPE_WAIT_EVENT = 6,
    RT_GRAPH_NODE_TYPE_EVENT_RECORD = 7,
    RT_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
    RT_GRAPH_NODE_TYPE_MEM_FREE = 11,
    /* The runtime's own (no CUDA counterpart): a collective of comm.h captured from a stream (a fused group of
     * sends and receives is one node). Made only by stream capture; replayed at each launch as the rank's next
     * collective (docs/graphs.md). */
    RT_GRAPH_NODE_TYPE_COLLECTIVE = 64
} rtGraphNodeType;

/** A kernel node: what rtLaunchKernelEx takes. The argument values are copied when the node is added (or its
 *  parameters set); `args` is read during the call only. The kernel's parameters must be known to the runtime
 *  (kernels of rtModuleLoadSource and runtime-compile modules: always). `global` as rtLaunchConfig's. */
typedef struct rtKernelNodeParams {
    rtFunction_t function;
    rtDim3 grid;
    rtDim3 block;
    size_t shared_bytes;
    void** args;                   /* pointers to each argument's value, as many as the kernel has parameters */
    unsigned long long global[3];  /* 0, or the exact work-item count of that dimension */
} rtKernelNodeParams;

/** A one-dimensional copy, as rtMemcpyAsync's operands (checked the same way when the node is added). */
typedef struct rtMemcpyNodeParams {
    void* dst;
    const void* src;
    size_t count;       /* bytes */
    rtMemcpyKind kind;
} rtMemcpyNodeParams;

/** A fill of `count` bytes of device memory with the byte `value`, as rtMemsetAsync's. */
typedef struct rtMemsetNodeParams {
    void* dst;
    int value;
    size_t count;
} rtMemsetNodeParams;

/** A host function, called as rtLaunchHostFunc calls it (on a runtime thread; rtHostFuncSetError fails the
 *  launch). */
typedef struct rtHostNodeParams {
    rtHostFn_t fn;
    void* user_data;
} rtHostNodeParams;

/** A memory-allocation node: `bytes` in, `ptr` out. The address is the graph's own: valid in the graph's nodes
 *  (kernels, copies, fills, the matching free node), refused by stream calls outside the graph (each executable
 *  graph has its own memory behind it). Executable graphs plan all their allocations into one arena, reusing memory
 *  between allocations whose lifetimes do not overlap (rtGraphExecGetMemoryInfo); an allocation no free node releases
 *  keeps its place (and contents) in the arena from launch to launch, until the executable graph is destroyed. */
typedef struct rtMemAllocNodeParams {
    size_t bytes;
    void* ptr;  /* out: the allocation's address */
} rtMemAllocNodeParams;

/** Creates an empty graph on the current device. `flags` must be 0. */
RT_API rtError_t rtGraphCreate(rtGraph_t* graph, unsigned int flags);
/** Every rtGraphAdd*Node adds a node to `graph` that runs after the `ndeps` nodes of `deps` (nodes of the same
 *  graph, no duplicates; deps may be NULL when ndeps is 0) and returns it in `*node`. Operands are checked as the
 *  stream call of the same kind checks them. */
RT_API rtError_t rtGraphAddKernelNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps,
                                      const rtKernelNodeParams* params);
RT_API rtError_t rtGraphAddMemcpyNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps,
                                      const rtMemcpyNodeParams* params);
RT_API rtError_t rtGraphAddMemsetNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps,
                                      const rtMemsetNodeParams* params);
RT_API rtError_t rtGraphAddHostNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps,
                                    const rtHostNodeParams* params);
/** A node that does nothing: a join point for dependencies. */
RT_API rtError_t rtGraphAddEmptyNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps);
/** A node that runs a copy of `child` (taken now: later changes to `child` do not reach it). */
RT_API rtError_t rtGraphAddChildGraphNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps,
                                          size_t ndeps, rtGraph_t child);
/** Records `event` (an event of the graph's backend) when the node runs. On the cpu device the record completes
 *  when the whole launch does (never earlier than the node). */
RT_API rtError_t rtGraphAddEventRecordNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps,
                                           size_t ndeps, rtEvent_t event);
/** Waits for `event`'s latest record when the node runs (the record current at the launch). On the cpu device the
 *  whole launch waits for it before it starts (never later than the node). */
RT_API rtError_t rtGraphAddEventWaitNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps,
                                         size_t ndeps, rtEvent_t event);
RT_API rtError_t rtGraphAddMemAllocNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps,
                                        rtMemAllocNodeParams* params);
/** Frees `ptr`, the address of an allocation node of the same graph (memory allocated elsewhere: refused). */
RT_API rtError_t rtGraphAddMemFreeNode(rtGraphNode_t* node, rtGraph_t graph, const rtGraphNode_t* deps, size_t ndeps,
                                       void* ptr);

/** The graph's nodes in the order they were added. `nodes` NULL: `*count` receives their number; otherwise
 *  `*count` is the capacity of `nodes` on entry, and receives the number written (RT_ERROR_INVALID_VALUE when it is
 *  smaller than the number of nodes, writing none). */
RT_API rtError_t rtGraphGetNodes(rtGraph_t graph, rtGraphNode_t* nodes, size_t* count);
RT_API rtError_t rtGraphNodeGetType(rtGraphNode_t node, rtGraphNodeType* type);
/** The dependencies of `node` (CUDA's cudaGraphNodeGetDependencies): as rtGraphGetNodes. */
RT_API rtError_t rtGraphNodeGetDependencies(rtGraphNode_t node, rtGraphNode_t* deps, size_t* count);
/** A copy of `original` with the same nodes, parameters and edges (its own node handles). */
RT_API rtError_t rtGraphClone(rtGraph_t* clone, rtGraph_t original);
/** Destroys the graph and its node handles; executable graphs made from it are not affected. */
RT_API rtError_t rtGraphDestroy(rtGraph_t graph);

#define RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE 1u /* every parameter of every node, not only its kind and name */
/** Writes the graph in Graphviz DOT (`dot -Tsvg path`): a node per node, labelled with its kind and main
 *  parameters, an edge per dependency. `flags`: 0 or RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE. */
RT_API rtError_t rtGraphDebugDotPrint(rtGraph_t graph, const char* path, unsigned int flags);

/** Names an external buffer of the graph — an input or output, `bytes` long at `ptr` — for rtGraphExecSave and
 *  rtGraphExecSetBuffer: operands inside [ptr, ptr + bytes) are taken relative to it. Names are unique in a graph
 *  (1..63 characters of [A-Za-z0-9_.-]); buffers do not overlap each other. */
RT_API rtError_t rtGraphBindName(rtGraph_t graph, const char* name, void* ptr, size_t bytes);

/* ---------------------------------------------------------------- executable graphs */

/** Checks the graph (no cycles, every operand valid), flattens child graphs, plans the memory of its allocation
 *  nodes into one arena (allocated now, on the graph's device) and prepares it to be launched. `flags`: 0 or
 *  RT_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH (accepted for CUDA's sake, and changes nothing here: an allocation
 *  no free node releases is never freed by a launch — its memory is the executable graph's, with the same place and
 *  contents at every launch, until rtGraphExecDestroy — so a next launch never finds it still allocated, which is
 *  what CUDA's flag is for). The executable graph does not depend on `graph` afterwards. */
#define RT_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH 1ull
RT_API rtError_t rtGraphInstantiate(rtGraphExec_t* exec, rtGraph_t graph, unsigned long long flags);
/** Makes the executable graph ready to launch on `stream` without launching it (stream-ordered; optional). */
RT_API rtError_t rtGraphUpload(rtGraphExec_t exec, rtStream_t stream);
/** Launches the executable graph on `stream` (a stream of the graph's device): one operation of the stream, which
 *  starts after the work queued before it and completes when every node has completed; independent nodes may run at
 *  the same time. Launches of one executable graph run one at a time, in the order they were made, whichever their
 *  streams. A failed node fails the launch: the stream's next synchronize reports it, naming the node, and the
 *  nodes that depend on it do not run (on cuda, as on a CUstream, kernels and copies already handed to the GPU behind
 *  a failed kernel still run; host nodes after it are skipped). On a capturing stream: RT_ERROR_STREAM_CAPTURE_UNSUPPORTED (add the graph
 *  with rtGraphAddChildGraphNode instead). */
RT_API rtError_t rtGraphLaunch(rtGraphExec_t exec, rtStream_t stream);

/** Why rtGraphExecUpdate refused an update (CUDA's cudaGraphExecUpdateResult values). */
typedef enum rtGraphExecUpdateResult {
    RT_GRAPH_EXEC_UPDATE_SUCCESS = 0,
    RT_GRAPH_EXEC_UPDATE_ERROR = 1,                     /* invalid input (see the last error message) */
    RT_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED = 2,    /* a node or an edge was added or removed */
    RT_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED = 3,
    RT_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED = 4,    /* a kernel node runs a kernel of another device */
    RT_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED = 5,  /* a parameter that cannot change did (see the message) */
    RT_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED = 6        /* e.g. an allocation node's size, an event node's event */
} rtGraphExecUpdateResult;

/** Takes the parameters of every node of `graph` — which must have the same nodes, added in the same order, with
 *  the same dependencies, as the graph `exec` was made from — for the next launches (launches already made are not
 *  affected). Refused: RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, `*result` says what differed and the last error message
 *  names the first node that differs; `exec` is unchanged. `result` may be NULL. */
RT_API rtError_t rtGraphExecUpdate(rtGraphExec_t exec, rtGraph_t graph, rtGraphExecUpdateResult* result);
/** Sets the parameters of one kernel node (`node`: a node of the graph `exec` was made from) for the next launches.
 *  The kernel may change to another kernel of the same device. */
RT_API rtError_t rtGraphExecKernelNodeSetParams(rtGraphExec_t exec, rtGraphNode_t node,
                                                const rtKernelNodeParams* params);
RT_API rtError_t rtGraphExecMemcpyNodeSetParams(rtGraphExec_t exec, rtGraphNode_t node,
                                                const rtMemcpyNodeParams* params);
/** Destroys the executable graph once its launches have completed (returns at once). */
RT_API rtError_t rtGraphExecDestroy(rtGraphExec_t exec);

/** The executable graph's planned memory: the arena's size against the sum of its allocation nodes' sizes. */
typedef struct rtGraphMemoryInfo {
    size_t arena_bytes;        /* the device memory the executable graph holds for its allocation nodes */
    size_t allocated_bytes;    /* the sum of the sizes of its allocation nodes */
    size_t allocations;        /* the number of allocation nodes */
} rtGraphMemoryInfo;
RT_API rtError_t rtGraphExecGetMemoryInfo(rtGraphExec_t exec, rtGraphMemoryInfo* info);

/* ---------------------------------------------------------------- saved executable graphs */

/** Writes the executable graph to `path`: its nodes, its kernels (source and options, and the built code for the
 *  current target, with a version and ISA header), its memory plan and its named buffers (rtGraphBindName).
 *  Operands inside named buffers are saved as (name, offset), operands in allocation nodes' memory as arena offsets;
 *  any other device pointer, and host functions, cannot be saved: RT_ERROR_NOT_SUPPORTED naming the node and the
 *  pointer. */
RT_API rtError_t rtGraphExecSave(rtGraphExec_t exec, const char* path);
/** Loads an executable graph saved by rtGraphExecSave, on the current device, in this process or another; kernels
 *  whose saved code does not fit this machine are rebuilt from their source. A file that is not such a graph, is
 *  truncated or corrupted, or was written by an incompatible version: RT_ERROR_INVALID_VALUE saying what is wrong.
 *  Its named buffers must be bound (rtGraphExecSetBuffer) before it is launched. */
RT_API rtError_t rtGraphExecLoad(rtGraphExec_t* exec, const char* path);
/** Binds the named buffer `name` of `exec` to `bytes` of memory at `ptr` for the next launches (at least the size
 *  it was named with; memory of the graph's device, or host memory where a copy takes host memory). A launch with a
 *  named buffer unbound: RT_ERROR_INVALID_VALUE naming it. */
RT_API rtError_t rtGraphExecSetBuffer(rtGraphExec_t exec, const char* name, void* ptr, size_t bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RUNTIME_GRAPH_H */
