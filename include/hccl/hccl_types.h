/* hccl_types.h — the types of the HCCL face (hccl.h): result codes, element types, reduction operators, the
 * communicator handle and the root rank's identity, with the numeric values and sizes of Huawei HCCL's public API
 * reference, so that code written against HCCL compiles and behaves the same here. This face maps onto the runtime's
 * collectives (runtime/comm.h); docs/ascendcl.md says what is supported. */
#ifndef HCCL_TYPES_H_
#define HCCL_TYPES_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Every HCCL call returns one of these. The library also leaves a message naming what was wrong in the recent error
 *  message that aclGetRecentErrMsg returns (acl/acl_base.h). */
typedef enum {
    HCCL_SUCCESS = 0,
    HCCL_E_PARA = 1,              /* an argument is out of range or inconsistent */
    HCCL_E_PTR = 2,               /* a pointer argument is NULL */
    HCCL_E_MEMORY = 3,            /* out of memory */
    HCCL_E_INTERNAL = 4,          /* a failure inside the library */
    HCCL_E_NOT_SUPPORT = 5,       /* a feature this library does not provide */
    HCCL_E_NOT_FOUND = 6,
    HCCL_E_UNAVAIL = 7,
    HCCL_E_SYSCALL = 8,
    HCCL_E_TIMEOUT = 9,           /* a peer did not arrive in time */
    HCCL_E_OPEN_FILE_FAILURE = 10,
    HCCL_E_TCP_CONNECT = 11,
    HCCL_E_ROCE_CONNECT = 12,
    HCCL_E_TCP_TRANSFER = 13,
    HCCL_E_ROCE_TRANSFER = 14,
    HCCL_E_RUNTIME = 15,          /* the runtime under the library refused or failed */
    HCCL_E_DRV = 16,
    HCCL_E_PROFILING = 17,
    HCCL_E_CCE = 18,
    HCCL_E_NETWORK = 19,
    HCCL_E_AGAIN = 20,
    HCCL_E_REMOTE = 21,           /* the communicator failed (an abort, a peer's failure) */
    HCCL_E_SUSPENDING = 22,
    HCCL_E_RESERVED
} HcclResult;

/** Element types of the collectives. */
typedef enum {
    HCCL_DATA_TYPE_INT8 = 0,
    HCCL_DATA_TYPE_INT16 = 1,
    HCCL_DATA_TYPE_INT32 = 2,
    HCCL_DATA_TYPE_FP16 = 3,     /* IEEE binary16 */
    HCCL_DATA_TYPE_FP32 = 4,
    HCCL_DATA_TYPE_INT64 = 5,
    HCCL_DATA_TYPE_UINT64 = 6,
    HCCL_DATA_TYPE_UINT8 = 7,
    HCCL_DATA_TYPE_UINT16 = 8,
    HCCL_DATA_TYPE_UINT32 = 9,
    HCCL_DATA_TYPE_FP64 = 10,
    HCCL_DATA_TYPE_BFP16 = 11,   /* bfloat16 */
    HCCL_DATA_TYPE_INT128 = 12,
    HCCL_DATA_TYPE_HIF8 = 14,     /* the 8-bit float types: moved as bytes, never reduced here */
    HCCL_DATA_TYPE_FP8E4M3 = 15,
    HCCL_DATA_TYPE_FP8E5M2 = 16,
    HCCL_DATA_TYPE_FP8E8M0 = 17,
    HCCL_DATA_TYPE_RESERVED = 255
} HcclDataType;

/** Reduction operators. */
typedef enum {
    HCCL_REDUCE_SUM = 0,
    HCCL_REDUCE_PROD = 1,
    HCCL_REDUCE_MAX = 2,
    HCCL_REDUCE_MIN = 3,
    HCCL_REDUCE_RESERVED
} HcclReduceOp;

/** One rank's handle on a communicator. */
typedef void* HcclComm;

/** The bytes HcclGetRootInfo makes on the root rank and every rank hands to HcclCommInitRootInfo. Opaque. */
#define HCCL_ROOT_INFO_BYTES 4108
typedef struct HcclRootInfoDef {
    char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

#ifdef __cplusplus
}
#endif

#endif /* HCCL_TYPES_H_ */
