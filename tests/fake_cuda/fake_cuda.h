/* fake_cuda.h — the test-only query and control API of the fake CUDA driver (tests/fake_cuda/fake_cuda.cpp).
 * TEST DOUBLE: nothing here exists in a real libcuda. Tests dlsym these names from the same library the
 * runtime loaded through RUNTIME_CUDA_DRIVER_LIB (dlopen of the same path returns the same instance). */
#ifndef RUNTIME_TESTS_FAKE_CUDA_H
#define RUNTIME_TESTS_FAKE_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/** One cuLaunchKernel as the fake received it. */
typedef struct FakeCudaLaunch {
    char kernel[128];           /* the function's name (truncated) */
    unsigned grid[3];
    unsigned block[3];
    unsigned shared_bytes;
    int num_params;             /* parameters the fake knows the function has (PTX modules); -1 when unknown */
    unsigned long long param_u64[8]; /* the first 8 bytes of each of the first 8 parameters (known sizes only) */
    int stream_serial;          /* creation number of the stream (1 = the first stream created) */
} FakeCudaLaunch;

/** cuLaunchKernel calls accepted since the library was loaded or the last reset. */
typedef int (*fake_cuda_launch_count_fn)(void);
/** Copies the last accepted launch; returns 0 when there was none. */
typedef int (*fake_cuda_last_launch_fn)(FakeCudaLaunch* out);
/** Forgets the launches recorded so far. */
typedef void (*fake_cuda_reset_launches_fn)(void);
/** The next cuLaunchKernel is accepted, then fails on its stream's worker with `code` (a CUresult, e.g.
 *  CUDA_ERROR_ILLEGAL_ADDRESS = 700): the context becomes unusable (sticky), as a faulting kernel leaves it. */
typedef void (*fake_cuda_inject_fault_fn)(int code);
/** Waits until every stream has run what was queued on it (an injected fault has then happened). */
typedef void (*fake_cuda_drain_fn)(void);
/** Whether launched kernels run their code: always 0 here (launches are recorded and complete in stream order).
 *  Tests that need a kernel to do something (rt_test::Gate's device-side spin) look for this name to know. */
typedef int (*fake_cuda_launches_execute_fn)(void);
/** Device allocations (cuMemAlloc) and pinned host allocations (cuMemHostAlloc) currently live, all devices. */
typedef int (*fake_cuda_live_allocations_fn)(void);
typedef int (*fake_cuda_live_host_allocations_fn)(void);
/** Modules loaded (cuModuleLoadData) and not unloaded, all contexts. */
typedef int (*fake_cuda_live_modules_fn)(void);
/** cuModuleUnload calls made while launches of the module were still queued (each also prints a line). */
typedef int (*fake_cuda_unsafe_unloads_fn)(void);
/** The next cuLaunchKernel "fails an rt_assert" when it runs: it writes (expr, file, line) into the fault record its
 *  module's RT_CUDA_FAULT_RECORD_SYMBOL points at (set by the runtime with cuMemcpyHtoD), as the prelude's CUDA
 *  rt_assert does (src/backends/cuda/cuda_fault_record.h), and completes; the context stays usable. A module whose
 *  pointer is unset gets the prelude's fallback instead: a trap (CUDA_ERROR_LAUNCH_FAILED, sticky). */
typedef void (*fake_cuda_assert_next_launch_fn)(const char* expr, const char* file, int line);
/** cuMemSetAccess calls since the library was loaded. */
typedef int (*fake_cuda_set_access_count_fn)(void);
/** The next cuMemMap fails with `code` (a CUresult), as a driver refusing virtual memory management would. */
typedef void (*fake_cuda_fail_next_map_fn)(int code);
/** cuLaunchHostFunc calls accepted since the library was loaded. */
typedef int (*fake_cuda_host_func_count_fn)(void);
/** Each kernel that runs from now on (launches and graphs' kernel nodes) "takes" `ns` of device time: the clock that
 *  events read (cuEventElapsedTime) moves on by that much as it completes, the host's does not. 0 (the default): event
 *  times are the host's steady clock plus what kernels took so far. One clock for every fake device. */
typedef void (*fake_cuda_set_kernel_time_ns_fn)(long long ns);
/** cuEventCreate calls accepted since the library was loaded. */
typedef int (*fake_cuda_event_create_count_fn)(void);
/** cuEventElapsedTime calls that returned a time, since the library was loaded. */
typedef int (*fake_cuda_elapsed_time_count_fn)(void);

/* ---- graphs (cuGraph*): a graph's nodes run in their order of addition (a topological order: dependencies must exist
 * before a node is added) as one operation of the stream a cuGraphLaunch queues it on. Kernel nodes count as launches
 * (fake_cuda_launch_count, fake_cuda_last_launch, injected faults and rt_assert records), taken at the cuGraphLaunch. */

/** Kinds of graph nodes, as fake_cuda_exec_nodes reports them. */
enum { FAKE_CUDA_NODE_KERNEL = 1, FAKE_CUDA_NODE_MEMCPY = 2, FAKE_CUDA_NODE_MEMSET = 3, FAKE_CUDA_NODE_HOST = 4,
       FAKE_CUDA_NODE_EMPTY = 5 };
/** One node of an executable graph as it runs now (cuGraphExec*SetParams included). */
typedef struct FakeCudaGraphNode {
    int kind;                         /* FAKE_CUDA_NODE_* */
    int num_deps;
    int deps[8];                      /* indices (order of addition) of its first 8 dependencies, ascending */
    char kernel[128];                 /* kernel: the function's name (truncated) */
    unsigned grid[3], block[3];       /* kernel */
    unsigned long long param_u64[8];  /* kernel: the first 8 bytes of each of the first 8 parameters (known sizes only) */
    unsigned long long bytes;         /* memcpy: bytes; memset: elements x element size */
    int dst_memory_type, src_memory_type;  /* memcpy: the CUmemorytype given for each side (1 host, 2 device, 4 unified) */
    unsigned value;                   /* memset */
} FakeCudaGraphNode;
/** The nodes of the executable graph the last cuGraphInstantiate made (as destroyed, if it was); copies the first
 *  `max` into `out` and returns their count, or -1 when no graph was instantiated. */
typedef int (*fake_cuda_exec_nodes_fn)(FakeCudaGraphNode* out, int max);
/** cuGraphLaunch and cuGraphInstantiate calls accepted since the library was loaded. */
typedef int (*fake_cuda_graph_launch_count_fn)(void);
typedef int (*fake_cuda_graph_instantiate_count_fn)(void);
/** CUgraph and CUgraphExec objects created and not destroyed, all contexts. */
typedef int (*fake_cuda_live_graphs_fn)(void);
typedef int (*fake_cuda_live_graph_execs_fn)(void);
/** fake_cuda_assert_next_launch for the next launch of kernel `kernel` (NULL: any kernel), whose record names block
 *  `block` and thread `thread` (NULL: 0, 0, 0). */
typedef void (*fake_cuda_assert_next_launch_at_fn)(const char* kernel, const char* expr, const char* file, int line,
                                                    const unsigned* block, const unsigned* thread);

#ifdef __cplusplus
}
#endif

#endif
