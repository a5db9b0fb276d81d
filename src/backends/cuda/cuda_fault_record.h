/* cuda_fault_record.h — the record a failed rt_assert leaves on cuda: pinned, mapped host memory the kernel writes
 * through a pointer the runtime sets in every module it builds. Its layout is the prelude's (include/runtime/kernel.h,
 * struct rt_cuda_fault_), which checks the same size and offsets; the fake driver (tests/fake_cuda) writes it too. */
#ifndef RUNTIME_CUDA_FAULT_RECORD_H
#define RUNTIME_CUDA_FAULT_RECORD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** One per cuda device. `claimed`: 0 free; the first failing thread sets it to 1 (a system-scope compare-and-swap)
 *  and alone writes the fields, then sets `ready` to 1 after a system-scope fence. The host takes a ready record
 *  (ready 1 -> 2), reads it, then frees it (ready 0, then claimed 0). */
typedef struct RtCudaFaultRecord {
    unsigned claimed;
    unsigned ready;
    int line;
    unsigned block[3];
    unsigned thread[3];
    char expr[240];
    char file[236];
} RtCudaFaultRecord;

/** The `__device__` pointer every program the cuda target builds defines (bounded_source), set at module load. */
#define RT_CUDA_FAULT_RECORD_SYMBOL "rt_cuda_fault_record_"

#ifdef __cplusplus
}
static_assert(sizeof(RtCudaFaultRecord) == 512 && offsetof(RtCudaFaultRecord, ready) == 4 &&
                  offsetof(RtCudaFaultRecord, line) == 8 && offsetof(RtCudaFaultRecord, block) == 12 &&
                  offsetof(RtCudaFaultRecord, thread) == 24 && offsetof(RtCudaFaultRecord, expr) == 36 &&
                  offsetof(RtCudaFaultRecord, file) == 276,
              "the layout of struct rt_cuda_fault_ in include/runtime/kernel.h");
#endif

#endif
