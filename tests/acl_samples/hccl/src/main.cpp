// HCCL sample, in the shape of HCCL's multi-device samples: the root rank makes the root info, then one thread per
// device sets its device, creates a context and a stream, joins the communicator (HcclCommInitRootInfo) and runs
// collectives on its stream: all-reduce, broadcast, all-gather, reduce-scatter, a send/receive ring and a barrier.
// Each result is checked against what the ranks' inputs imply. Prints PASS when every rank's results hold.
#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "hccl/hccl.h"

namespace {

const uint64_t kCount = 1024;  // float elements per rank buffer

#define ACL_CHECK(call)                                                                                     \
    do {                                                                                                    \
        aclError r_ = (call);                                                                               \
        if (r_ != ACL_SUCCESS) {                                                                            \
            std::printf("[ERROR] rank %u: %s returned %d: %s\n", rank, #call, (int)r_, aclGetRecentErrMsg()); \
            return false;                                                                                   \
        }                                                                                                   \
    } while (0)

#define HCCL_CHECK(call)                                                                                     \
    do {                                                                                                     \
        HcclResult r_ = (call);                                                                              \
        if (r_ != HCCL_SUCCESS) {                                                                            \
            std::printf("[ERROR] rank %u: %s returned %s: %s\n", rank, #call, HcclGetErrorString(r_),        \
                        aclGetRecentErrMsg());                                                               \
            return false;                                                                                    \
        }                                                                                                    \
    } while (0)

#define EXPECT_EQ_AT(got, want, what, i)                                                                  \
    do {                                                                                                  \
        if ((got) != (want)) {                                                                            \
            std::printf("[ERROR] rank %u: %s[%zu] = %f, expected %f\n", rank, what, (size_t)(i), (double)(got), \
                        (double)(want));                                                                  \
            return false;                                                                                 \
        }                                                                                                 \
    } while (0)

struct RankArgs {
    uint32_t rank = 0;
    uint32_t nRanks = 0;
    const HcclRootInfo *rootInfo = nullptr;
    bool ok = false;
};

float Input(uint32_t rank, size_t i) { return static_cast<float>(rank * 1000 + i % 97); }

bool CopyOut(uint32_t rank, std::vector<float> &host, void *dev) {
    ACL_CHECK(aclrtMemcpy(host.data(), host.size() * sizeof(float), dev, host.size() * sizeof(float),
                          ACL_MEMCPY_DEVICE_TO_HOST));
    return true;
}

bool RunRank(RankArgs &args) {
    const uint32_t rank = args.rank;
    const uint32_t n = args.nRanks;
    const size_t bytes = kCount * sizeof(float);
    ACL_CHECK(aclrtSetDevice(static_cast<int32_t>(rank)));
    aclrtContext context = nullptr;
    ACL_CHECK(aclrtCreateContext(&context, static_cast<int32_t>(rank)));
    aclrtStream stream = nullptr;
    ACL_CHECK(aclrtCreateStream(&stream));

    HcclComm comm = nullptr;
    HCCL_CHECK(HcclCommInitRootInfo(n, args.rootInfo, rank, &comm));
    uint32_t size = 0, id = 0;
    HCCL_CHECK(HcclGetRankSize(comm, &size));
    HCCL_CHECK(HcclGetRankId(comm, &id));
    if (size != n || id != rank) {
        std::printf("[ERROR] rank %u: rank size %u id %u\n", rank, size, id);
        return false;
    }

    std::vector<float> host(kCount);
    for (size_t i = 0; i < kCount; ++i) host[i] = Input(rank, i);
    void *send = nullptr, *recv = nullptr, *gathered = nullptr;
    ACL_CHECK(aclrtMalloc(&send, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_CHECK(aclrtMalloc(&recv, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_CHECK(aclrtMalloc(&gathered, bytes * n, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_CHECK(aclrtMemcpy(send, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));

    // all-reduce (sum)
    HCCL_CHECK(HcclAllReduce(send, recv, kCount, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    ACL_CHECK(aclrtSynchronizeStream(stream));
    if (!CopyOut(rank, host, recv)) return false;
    for (size_t i = 0; i < kCount; ++i) {
        float want = 0.0f;
        for (uint32_t r = 0; r < n; ++r) want += Input(r, i);
        EXPECT_EQ_AT(host[i], want, "allreduce", i);
    }

    // all-gather: rank r's block at r * kCount
    HCCL_CHECK(HcclAllGather(send, gathered, kCount, HCCL_DATA_TYPE_FP32, comm, stream));
    // broadcast from the last rank, in place in `recv`, queued behind the all-gather on the same stream
    ACL_CHECK(aclrtMemcpyAsync(recv, bytes, send, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, stream));
    HCCL_CHECK(HcclBroadcast(recv, kCount, HCCL_DATA_TYPE_FP32, n - 1, comm, stream));
    ACL_CHECK(aclrtSynchronizeStream(stream));
    std::vector<float> all(kCount * n);
    if (!CopyOut(rank, all, gathered)) return false;
    for (uint32_t r = 0; r < n; ++r) {
        for (size_t i = 0; i < kCount; ++i) EXPECT_EQ_AT(all[r * kCount + i], Input(r, i), "allgather", r * kCount + i);
    }
    if (!CopyOut(rank, host, recv)) return false;
    for (size_t i = 0; i < kCount; ++i) EXPECT_EQ_AT(host[i], Input(n - 1, i), "broadcast", i);

    // reduce-scatter (max) of the first kCount gathered elements: every rank passes the same data, so the max over
    // the ranks of each element is the element itself, and rank r receives block r of it
    const uint64_t block = kCount / n;
    HCCL_CHECK(HcclReduceScatter(gathered, recv, block, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, comm, stream));
    ACL_CHECK(aclrtSynchronizeStream(stream));
    std::vector<float> part(block);
    if (!CopyOut(rank, part, recv)) return false;
    for (size_t i = 0; i < block; ++i) {
        size_t at = rank * block + i;
        EXPECT_EQ_AT(part[i], Input(static_cast<uint32_t>(at / kCount), at % kCount), "reducescatter", i);
    }

    // a ring: send to the next rank, receive from the previous one (even ranks send first, odd ranks receive first)
    uint32_t next = (rank + 1) % n, prev = (rank + n - 1) % n;
    if (rank % 2 == 0) {
        HCCL_CHECK(HcclSend(send, kCount, HCCL_DATA_TYPE_FP32, next, comm, stream));
        HCCL_CHECK(HcclRecv(recv, kCount, HCCL_DATA_TYPE_FP32, prev, comm, stream));
    } else {
        HCCL_CHECK(HcclRecv(recv, kCount, HCCL_DATA_TYPE_FP32, prev, comm, stream));
        HCCL_CHECK(HcclSend(send, kCount, HCCL_DATA_TYPE_FP32, next, comm, stream));
    }
    HCCL_CHECK(HcclBarrier(comm, stream));
    ACL_CHECK(aclrtSynchronizeStream(stream));
    if (!CopyOut(rank, host, recv)) return false;
    for (size_t i = 0; i < kCount; ++i) EXPECT_EQ_AT(host[i], Input(prev, i), "ring", i);

    HcclResult asyncError = HCCL_E_RESERVED;
    HCCL_CHECK(HcclGetCommAsyncError(comm, &asyncError));
    if (asyncError != HCCL_SUCCESS) {
        std::printf("[ERROR] rank %u: async error %s\n", rank, HcclGetErrorString(asyncError));
        return false;
    }
    HCCL_CHECK(HcclCommDestroy(comm));
    ACL_CHECK(aclrtFree(send));
    ACL_CHECK(aclrtFree(recv));
    ACL_CHECK(aclrtFree(gathered));
    ACL_CHECK(aclrtDestroyStream(stream));
    ACL_CHECK(aclrtDestroyContext(context));
    ACL_CHECK(aclrtResetDevice(static_cast<int32_t>(rank)));
    return true;
}

void *RankThread(void *arg) {
    RankArgs *args = static_cast<RankArgs *>(arg);
    args->ok = RunRank(*args);
    return nullptr;
}

}  // namespace

int main() {
    const uint32_t rank = 0;  // for the CHECK macros in main
    if (aclInit(nullptr) != ACL_SUCCESS) {
        std::printf("[ERROR] aclInit: %s\n", aclGetRecentErrMsg());
        return 1;
    }
    uint32_t devices = 0;
    if (aclrtGetDeviceCount(&devices) != ACL_SUCCESS || devices < 2) {
        std::printf("[ERROR] this sample needs 2 devices, found %u\n", devices);
        return 1;
    }
    const uint32_t n = 2;
    HcclRootInfo rootInfo;
    auto rootOk = [&]() -> bool {
        ACL_CHECK(aclrtSetDevice(0));
        HCCL_CHECK(HcclGetRootInfo(&rootInfo));
        return true;
    }();
    if (!rootOk) return 1;

    std::vector<RankArgs> args(n);
    std::vector<pthread_t> threads(n);
    for (uint32_t r = 0; r < n; ++r) {
        args[r].rank = r;
        args[r].nRanks = n;
        args[r].rootInfo = &rootInfo;
        if (pthread_create(&threads[r], nullptr, RankThread, &args[r]) != 0) {
            std::printf("[ERROR] pthread_create failed\n");
            return 1;
        }
    }
    bool ok = true;
    for (uint32_t r = 0; r < n; ++r) {
        pthread_join(threads[r], nullptr);
        ok = ok && args[r].ok;
    }
    ok = aclrtResetDevice(0) == ACL_SUCCESS && ok;
    ok = aclFinalize() == ACL_SUCCESS && ok;
    std::printf(ok ? "PASS\n" : "FAIL\n");
    return ok ? 0 : 1;
}
