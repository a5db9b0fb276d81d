/* hccl.h — the HCCL face: communicators and collectives with the signatures of Huawei HCCL's public API, running on
 * the runtime's collectives (runtime/comm.h). Link libhccl (and libascendcl).
 *
 * Devices and ranks. HCCL's device i is the runtime's device i (AscendCL's, acl/acl_rt.h): the cpu device by default,
 * GPUs with RUNTIME_BACKEND=cuda. HcclCommInitAll makes every rank of a communicator in one call (one process, one
 * thread per device is the usual pattern after it); HcclGetRootInfo + HcclCommInitRootInfo make one rank per call, on
 * the calling thread's current device (aclrtSetDevice), each rank from its own thread or process: under mpirun the
 * root info made by one process is handed to the others (MPI_Bcast, a file) and the ranks may live in any processes
 * of the job, several per process too (runtime/comm.h, docs/comm.md).
 *
 * Streams. Every collective is queued on `stream` (an aclrtStream of the rank's device; NULL: that device's default
 * stream) and returns at once; it runs after the work queued before it on that stream. A call that is refused queues
 * nothing. A failure found while the collective runs (a peer that never arrives, counts that differ between ranks)
 * fails the stream: its next synchronize returns the error, and HcclGetCommAsyncError reports it from then on.
 *
 * Matching. The n-th collective called on each rank is one operation: every rank calls the same collective with the
 * same count, data type, operator and root. HcclSend to rank b and HcclRecv from rank a pair in order.
 *
 * Element types. Broadcast, all-gather, all-to-all, send and receive move any type of hccl_types.h (as its bytes).
 * Reductions (all-reduce, reduce, reduce-scatter) take INT8, UINT8, INT32, UINT32, INT64, UINT64, FP16, BFP16, FP32
 * and FP64; INT16, UINT16, INT128 and the 8-bit floats are HCCL_E_NOT_SUPPORT there. Results are deterministic: each
 * element reduced in rank order (runtime/comm.h).
 *
 * Errors. NULL pointers: HCCL_E_PTR; a data type, operator, rank, root or count out of range, or a device that does
 * not exist: HCCL_E_PARA; what the library cannot do: HCCL_E_NOT_SUPPORT; a peer that did not arrive in time
 * (RUNTIME_COMM_TIMEOUT seconds, default 30): HCCL_E_TIMEOUT. Each refusal leaves a message naming the argument and
 * what was expected (aclGetRecentErrMsg). */
#ifndef HCCL_H_
#define HCCL_H_

#include "acl/acl_base.h"
#include "hccl/hccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- communicators */

/** Makes the identity of a new communicator on the root rank (the calling thread's current device); hand the bytes
 *  to every rank's HcclCommInitRootInfo. */
ACL_FUNC_VISIBILITY HcclResult HcclGetRootInfo(HcclRootInfo* rootInfo);
/** Joins the communicator `rootInfo` of `nRanks` ranks as `rank`, on the calling thread's current device. Blocks until
 *  every rank has joined (each from its own thread), or fails with HCCL_E_TIMEOUT naming the ranks that did not. */
ACL_FUNC_VISIBILITY HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank,
                                                    HcclComm* comm);
/** Makes `ndev` ranks at once, rank i on device devices[i], into comms[0 .. ndev-1]. The devices must differ
 *  (HCCL's rule; HCCL_E_PARA names the repeated one). */
ACL_FUNC_VISIBILITY HcclResult HcclCommInitAll(uint32_t ndev, int32_t* devices, HcclComm* comms);
ACL_FUNC_VISIBILITY HcclResult HcclGetRankSize(HcclComm comm, uint32_t* rankSize);
ACL_FUNC_VISIBILITY HcclResult HcclGetRankId(HcclComm comm, uint32_t* rank);
/** *asyncError: HCCL_SUCCESS while the communicator works, else the error that stopped it (the message says why). */
ACL_FUNC_VISIBILITY HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult* asyncError);
/** Releases this rank's handle; collectives already queued still run. */
ACL_FUNC_VISIBILITY HcclResult HcclCommDestroy(HcclComm comm);
/** The constant name of a result code ("HCCL_E_PARA"); "HCCL_E_UNKNOWN" for a value that is not one. */
ACL_FUNC_VISIBILITY const char* HcclGetErrorString(HcclResult code);

/* ---------------------------------------------------------------- collectives (queued on `stream`) */

/** recvBuf[i] = the reduction over the ranks of sendBuf[i], on every rank (count elements). */
ACL_FUNC_VISIBILITY HcclResult HcclAllReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType,
                                             HcclReduceOp op, HcclComm comm, aclrtStream stream);
/** buf = root's buf on every rank (the root's is read, the others' written). */
ACL_FUNC_VISIBILITY HcclResult HcclBroadcast(void* buf, uint64_t count, HcclDataType dataType, uint32_t root,
                                             HcclComm comm, aclrtStream stream);
/** root's recvBuf = the reduction of every rank's sendBuf (recvBuf is not used on the other ranks). */
ACL_FUNC_VISIBILITY HcclResult HcclReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType,
                                          HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream);
/** recvBuf[r * sendCount ..] = rank r's sendBuf, on every rank (recvBuf holds rank size * sendCount elements). */
ACL_FUNC_VISIBILITY HcclResult HcclAllGather(void* sendBuf, void* recvBuf, uint64_t sendCount, HcclDataType dataType,
                                             HcclComm comm, aclrtStream stream);
/** recvBuf on rank r = the reduction of every rank's sendBuf[r * recvCount ..] (recvCount elements). */
ACL_FUNC_VISIBILITY HcclResult HcclReduceScatter(void* sendBuf, void* recvBuf, uint64_t recvCount,
                                                 HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                                 aclrtStream stream);
/** recvBuf[k * recvCount ..] on rank r = rank k's sendBuf[r * sendCount ..]. The bytes sent to each rank
 *  (sendCount elements of sendType) must equal the bytes received from each (recvCount of recvType). */
ACL_FUNC_VISIBILITY HcclResult HcclAlltoAll(const void* sendBuf, uint64_t sendCount, HcclDataType sendType,
                                            const void* recvBuf, uint64_t recvCount, HcclDataType recvType,
                                            HcclComm comm, aclrtStream stream);
/** Sends count elements to rank destRank, which calls HcclRecv with this rank as srcRank. */
ACL_FUNC_VISIBILITY HcclResult HcclSend(void* sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
                                        HcclComm comm, aclrtStream stream);
ACL_FUNC_VISIBILITY HcclResult HcclRecv(void* recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
                                        HcclComm comm, aclrtStream stream);
/** Completes on every rank's stream once every rank's stream has reached it. */
ACL_FUNC_VISIBILITY HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_H_ */
