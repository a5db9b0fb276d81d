/* comm.h — collectives: communicators over devices, and all-reduce, broadcast, reduce, all-gather, reduce-scatter,
 * all-to-all, send/receive and barrier as operations of a stream. Include it after (or instead of) runtime.h.
 *
 * Semantics follow NCCL's function of the same shape (ncclCommInitAll, ncclAllReduce, ...); where they differ, the
 * comment says so. What this build has: ranks in one process (threads, or one thread driving several ranks) on
 * devices whose memory the host can address (cpu devices), and ranks on cuda devices through NCCL (libnccl.so.2,
 * opened at run time; without it, RT_ERROR_NOT_SUPPORTED naming it and its PyPI package). Ranks of cpu devices in
 * other processes (Open MPI) are not there yet: RT_ERROR_NOT_SUPPORTED saying so. On a capturing stream a collective
 * becomes a graph node, replayed at each launch of the graph (graph.h, docs/graphs.md).
 *
 * Streams. Every collective is queued on `stream` (NULL: the default stream of the communicator's device, not of the
 * calling thread's current device) and returns at once, never waiting for the peers (a small collective on an idle
 * stream across processes polls for them up to 10 µs, and finishes within the call when they are there already: then
 * nothing is queued); it runs after the work queued before it on that stream, later work waits for it, and events
 * recorded after it complete once it has. The stream
 * must belong to the communicator's device. Validation happens in the call (a refused call queues nothing, and
 * rtGetLastErrorMessage says what was wrong); a failure found while it runs (a peer that never arrives, counts that
 * differ between ranks, an abort) fails the operation on every rank's stream: their next synchronize returns the code
 * with a message naming the collective, its sequence number on the communicator and the rank(s) concerned. A stream
 * that holds an unreported failure when it reaches a collective still meets its peers, and the collective fails on
 * every rank saying which rank's stream had failed. Buffers must stay allocated until the operation has run.
 *
 * Matching. The n-th collective called on each rank of a communicator is one operation: every rank must call the same
 * collective with the same count, data type, operation and root, in the same order (NCCL's rule); otherwise the
 * operation fails on every rank naming what differs. rtSend/rtRecv pair in order per (sender, receiver): the n-th
 * rtSend from rank a to rank b meets the n-th rtRecv on b from a. A rank that reaches a send or receive whose peer
 * waits for something else first blocks nothing but its own stream, until the timeout; put both directions of an
 * exchange in one rtGroupStart/rtGroupEnd to run them together.
 *
 * Buffers. send and recv are device memory (rtMalloc) of the communicator's device with the bytes the collective
 * reads or writes available; in place when send == recv (rtAllGather: when send == recv + rank * sendcount;
 * rtReduceScatter: when recv == send + rank * recvcount — NCCL's rules); other overlaps of send and recv are refused.
 * Counts are elements of `datatype`; a count of 0 moves nothing but still meets the peers in stream order.
 *
 * Determinism. A reduction's result is the same bit for bit whatever the count, the chunking or the number of
 * threads: each element is reduced in rank order, ((x0 op x1) op x2) ..., accumulated in the data type itself, except
 * RT_FLOAT16 and RT_BFLOAT16, accumulated in float and rounded once (to nearest even) at the end. RT_REDUCE_AVG is
 * the sum divided by the number of ranks (integers: truncated toward zero, as C's division). Integer sums and
 * products wrap around modulo 2^bits. NCCL, Gloo and MPI do not promise this.
 *
 * Faults. A collective whose peers do not all arrive within RUNTIME_COMM_TIMEOUT seconds (read when the communicator
 * is created; default 30, fractions allowed) fails on the ranks that arrived with RT_ERROR_TIMEOUT naming the missing
 * ranks; ranks that arrive later fail at once. A communicator that failed so, or was aborted, stays failed: its
 * later collectives fail (rtCommGetAsyncError reports why); destroy it and create another. The runtime, its other
 * streams and other communicators are unaffected. Calls that differ across ranks (counts, types, ops, roots, kinds)
 * fail with RT_ERROR_INVALID_VALUE naming both; across processes on one host, a rank that only writes in a small
 * collective (a broadcast's root, a reduce's other ranks, up to 16 KiB) does not wait for its peers, as MPI's does
 * not: there such a difference fails the rank's next collective of the communicator, and rtCommGetAsyncError reports
 * it once a peer has seen it. */
#ifndef RUNTIME_COMM_H
#define RUNTIME_COMM_H

#include "runtime/runtime.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rtComm_st* rtComm_t; /* one rank's handle on a communicator */

/* Names a communicator being created by rtCommInitRank: made by one rank (rtCommGetUniqueId), handed to the others.
 * Opaque bytes. Made with a cpu device current, it names an in-process rendezvous (the creating process must be the
 * process of every rank); with a cuda device current, it is NCCL's id (ncclGetUniqueId), for ranks on cuda devices. */
typedef struct rtCommUniqueId {
    char internal[128];
} rtCommUniqueId;

/* Element types: rtDataType (runtime.h; NCCL's values). */

typedef enum rtReduceOp {
    RT_REDUCE_SUM = 0,
    RT_REDUCE_PROD = 1,
    RT_REDUCE_MAX = 2,
    RT_REDUCE_MIN = 3,
    RT_REDUCE_AVG = 4 /* the sum divided by the number of ranks */
} rtReduceOp;

/* rtCommSplit's color for a rank that joins no new communicator (it gets NULL). */
#define RT_COMM_SPLIT_NOCOLOR (-1)

/* ---------------------------------------------------------------- communicators */

/** Creates `ndev` communicators of one communicator, rank i on device devices[i] (NULL: devices 0 .. ndev-1), in
 *  comms[0 .. ndev-1]. Unlike NCCL, a device may appear more than once (ranks in one process share its memory). */
RT_API rtError_t rtCommInitAll(rtComm_t* comms, int ndev, const int* devices);
/** A fresh id for rtCommInitRank; call it on one rank and give the bytes to the others. */
RT_API rtError_t rtCommGetUniqueId(rtCommUniqueId* unique_id);
/** Joins communicator `unique_id` of `nranks` ranks as `rank`, on the calling thread's current device. Blocks until
 *  every rank has joined (each from its own thread), or fails with RT_ERROR_TIMEOUT after RUNTIME_COMM_TIMEOUT
 *  seconds naming the ranks that did not. Refused between rtGroupStart and rtGroupEnd (it would wait for ranks this
 *  thread has still to drive: use rtCommInitAll). */
RT_API rtError_t rtCommInitRank(rtComm_t* comm, int nranks, rtCommUniqueId unique_id, int rank);
/** Splits `comm`: every rank calls it; ranks passing the same color form a new communicator, ordered by key (ties by
 *  their rank in `comm`), on the same devices; RT_COMM_SPLIT_NOCOLOR gives *newcomm = NULL. Blocks until every rank
 *  has called it (with a timeout, as rtCommInitRank) — between rtGroupStart and rtGroupEnd it returns at once and
 *  rtGroupEnd waits, so that one thread can split every rank of rtCommInitAll communicators. */
RT_API rtError_t rtCommSplit(rtComm_t comm, int color, int key, rtComm_t* newcomm);
RT_API rtError_t rtCommCount(rtComm_t comm, int* count);
RT_API rtError_t rtCommUserRank(rtComm_t comm, int* rank);
/** The runtime device index of the rank's device. */
RT_API rtError_t rtCommDevice(rtComm_t comm, int* device);
/** Releases this rank's handle once its queued collectives have run (they still complete; the call does not wait). */
RT_API rtError_t rtCommDestroy(rtComm_t comm);
/** Fails the communicator for every rank at once: collectives waiting for peers fail now (their streams report
 *  RT_ERROR_ILLEGAL_STATE naming the abort), queued ones fail when they are reached, and the handle is released.
 *  Returns promptly whatever the peers do. */
RT_API rtError_t rtCommAbort(rtComm_t comm);
/** *async_error: RT_SUCCESS, or the code of the failure that stopped the communicator (a timeout, an abort, counts
 *  that differed); rtGetLastErrorMessage then describes it. */
RT_API rtError_t rtCommGetAsyncError(rtComm_t comm, rtError_t* async_error);

/** Calls between rtGroupStart and rtGroupEnd on this thread are checked when made and queued when the outermost
 *  rtGroupEnd returns, in call order; sends and receives called consecutively on one stream of one communicator run
 *  as one operation (so an exchange between two ranks cannot wait for itself). Groups nest. Ranks in one process do
 *  not need groups for collectives (no call waits for a peer), but NCCL does: portable code uses them. */
RT_API rtError_t rtGroupStart(void);
RT_API rtError_t rtGroupEnd(void);

/* ---------------------------------------------------------------- collectives (queued on `stream`) */

/** recv[i] = send_0[i] op send_1[i] op ... on every rank (count elements). */
RT_API rtError_t rtAllReduce(const void* sendbuff, void* recvbuff, size_t count, rtDataType datatype, rtReduceOp op,
                             rtComm_t comm, rtStream_t stream);
/** recv = root's send on every rank (root's send is read, the others' ignored and may be NULL). */
RT_API rtError_t rtBroadcast(const void* sendbuff, void* recvbuff, size_t count, rtDataType datatype, int root,
                             rtComm_t comm, rtStream_t stream);
/** root's recv = the reduction of every rank's send (recv is ignored, and may be NULL, on the other ranks). */
RT_API rtError_t rtReduce(const void* sendbuff, void* recvbuff, size_t count, rtDataType datatype, rtReduceOp op,
                          int root, rtComm_t comm, rtStream_t stream);
/** recv[r * sendcount .. (r+1) * sendcount) = rank r's send, on every rank (recv holds nranks * sendcount). */
RT_API rtError_t rtAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, rtDataType datatype,
                             rtComm_t comm, rtStream_t stream);
/** recv on rank r = the reduction of every rank's send[r * recvcount .. (r+1) * recvcount). */
RT_API rtError_t rtReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, rtDataType datatype,
                                 rtReduceOp op, rtComm_t comm, rtStream_t stream);
/** recv[k * count ..] on rank r = rank k's send[r * count ..] (both hold nranks * count). */
RT_API rtError_t rtAlltoAll(const void* sendbuff, void* recvbuff, size_t count, rtDataType datatype, rtComm_t comm,
                            rtStream_t stream);
/** Sends count elements to rank `peer` (which calls rtRecv with this rank as its peer). */
RT_API rtError_t rtSend(const void* sendbuff, size_t count, rtDataType datatype, int peer, rtComm_t comm,
                        rtStream_t stream);
RT_API rtError_t rtRecv(void* recvbuff, size_t count, rtDataType datatype, int peer, rtComm_t comm, rtStream_t stream);
/** Completes on every rank's stream once every rank's stream has reached it. */
RT_API rtError_t rtCommBarrier(rtComm_t comm, rtStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* RUNTIME_COMM_H */
