/* cpu_kernel_abi.h — the binary interface between generated cpu kernel modules (.so) and the cpu backend. */
#ifndef RUNTIME_CPU_KERNEL_ABI_H
#define RUNTIME_CPU_KERNEL_ABI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a struct below changes; a module built for another ABI is refused at load.
 * 6: modules carry ISA records and may hold several variants (below).
 * 7: work-groups: rt_cpu_kernel_info.group_form/local_bytes, rt_cpu_launch's fiber hooks; modules export
 *    their module-scope variables (RT_GLOBAL): rt_cpu_module_globals. */
#define RT_CPU_ABI_VERSION 7

/* The largest block[0] of a cpu launch (the device's max_block_size[0]): rows of a staged twin fit its
 * stage (RT_STAGE_ITEMS). */
#define RT_CPU_MAX_BLOCK_X 1024

/* Work-groups: the most items of a cpu work-group (the device's max_threads_per_block; rt_private<T>
 * holds one T per item) and the local memory of one (RT_LOCAL arrays + dynamic shared_bytes; the device's
 * max_shared_bytes, rtDeviceProp.local_memory_per_group). */
#define RT_CPU_MAX_GROUP_ITEMS 1024
#define RT_CPU_MAX_LOCAL_BYTES (48 * 1024)

/* Staged rows (cpu_entry.h): a kernel with a staged twin stores its staged outputs for one row of items into
 * stages of RT_STAGE_BYTES each, which the entry then copies out. RT_ROW_STAGING says that the cpu target takes
 * staged twins (only its modules see these macros). */
#define RT_ROW_STAGING 1
#define RT_MAX_STAGED 4                   /* staged outputs of one kernel */
#define RT_STAGE_ITEMS RT_CPU_MAX_BLOCK_X /* items of a row that fit a stage: the cpu device's largest block[0] */
#define RT_STAGE_BYTES (RT_STAGE_ITEMS * 8)

/* The first failure of a launch (rt_assert, trap, or an rt_barrier() without a barrier hook). `failed` is claimed
 * with an atomic exchange (__atomic_exchange_n) by the first failing work-item: to 1, or to
 * RT_CPU_FAULT_UNSEEN_BARRIER by an rt_barrier() (at file:line) in a kernel the front end did not see as a flat
 * one. A failing rt_assert or rt_barrier() then calls `abandon`, which does not return when the runtime set it: it
 * ends the calling piece of the launch at once (the store after the assert never happens). */
#define RT_CPU_FAULT_UNSEEN_BARRIER 2
typedef struct rt_cpu_fault {
    int failed;
    int line;
    const char* expr;
    const char* file;
    void (*abandon)(void);
} rt_cpu_fault;

/* One call of a kernel entry: run work-groups [group_begin, group_end) (linear, x fastest) of a
 * grid[0]*grid[1]*grid[2] grid of block[0]*block[1]*block[2] items, skipping the items whose global id
 * reaches global[d] in some dimension ((grid-1)*block < global <= grid*block). */
typedef struct rt_cpu_launch {
    unsigned grid[3];
    unsigned block[3];
    unsigned long long global[3];
    unsigned long long group_begin;
    unsigned long long group_end;
    rt_cpu_fault* fault;
    void* shared_memory;   /* shared_bytes of scratch for the group being run (dynamic shared memory) */
    size_t shared_bytes;
    /* A kernel with a staged twin (cpu_entry.h) streams its staged outputs to memory when
     * the launch writes at least this many bytes through them: output larger than the cache. */
    unsigned long long stream_min_bytes;
    /* ---- work-groups (ABI 7): set by the runtime for kernels of the flat form (RT_CPU_GROUP_BARRIER).
     * run_fibers runs item(ctx, i) for every item i (linear, x fastest) of the group `group` (linear) as one
     * fiber each on the calling thread and returns once all ended, or does not return (the piece ends) when the
     * group fails: an item ended while others wait at a barrier, or an rt_assert failed. barrier(group_ctx), from
     * an item, waits until every item of the group reached it; null for kernels of the other forms. */
    void (*run_fibers)(const struct rt_cpu_launch* launch, unsigned long long group,
                      void (*item)(void* ctx, unsigned linear), void* ctx);
    void (*barrier)(void* group_ctx);
    void* group_ctx;
} rt_cpu_launch;

/* args: CUDA's convention, an array of pointers to the argument values. */
typedef void (*rt_cpu_entry)(const rt_cpu_launch* launch, void* const* args);

typedef struct rt_cpu_kernel_info {
    const char* name;
    rt_cpu_entry entry;
    int num_args;
    const size_t* arg_sizes; /* num_args sizes, in bytes, of the parameters */
    /* ---- work-groups (ABI 7) */
    int group_form;                 /* RT_CPU_GROUP_NONE, _ITEMS (rt_items blocks) or _BARRIER (rt_barrier) */
    unsigned long long local_bytes; /* bytes of the kernel's RT_LOCAL arrays (dynamic local memory not counted) */
} rt_cpu_kernel_info;

/* How a kernel's work-items cooperate (src/kernels/dialect.hpp, GroupForm). Both forms need whole work-groups. */
#define RT_CPU_GROUP_NONE 0
#define RT_CPU_GROUP_ITEMS 1   /* the entry calls the kernel once per group; rt_items blocks loop over its items */
#define RT_CPU_GROUP_BARRIER 2 /* every item runs as a fiber (rt_cpu_launch.run_fibers); rt_barrier switches */

/* A module-scope variable of the module (RT_GLOBAL): its name, address and size in bytes. */
typedef struct rt_cpu_global_info {
    const char* name;
    void* address;
    size_t bytes;
} rt_cpu_global_info;

/* Every module exports these symbols: the ABI version, and the kernel table of each variant (variant 0:
 * "rt_cpu_module_kernels"; variant i > 0: "rt_cpu_module_kernels_v<i>"). Its section ".rt_cpu_isa" records the
 * instruction-set features of each variant (cpu_isa.hpp), read from the file before it is loaded. */
typedef int (*rt_cpu_module_abi_fn)(void);                              /* "rt_cpu_module_abi": RT_CPU_ABI_VERSION */
typedef const rt_cpu_kernel_info* (*rt_cpu_module_kernels_fn)(int* count); /* "rt_cpu_module_kernels[_v<i>]" */
/* "rt_cpu_module_globals": the module's globals (one table for all variants; *count 0 and NULL when none). */
typedef const rt_cpu_global_info* (*rt_cpu_module_globals_fn)(int* count);

#ifdef __cplusplus
}
#endif

#endif /* RUNTIME_CPU_KERNEL_ABI_H */
