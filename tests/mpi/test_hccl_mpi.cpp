// HCCL across processes, written as a CANN application writes it: one process per device, rank 0's HcclGetRootInfo
// handed to the others over MPI, HcclCommInitRootInfo on each, then the collectives on an AscendCL stream. Run under
// mpirun -np 2 / -np 4 (each process uses its device 0). Exact checks (small integers: every summation order gives
// the same result), then the refusals a cross-process communicator adds. Prints each failed check; exits non-zero.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "acl/acl.h"
#include "hccl/hccl.h"
#include "mpi_check.hpp"

namespace {

using mpi_check::g_failures;
using mpi_check::g_rank;
int g_size = 1;

#define ACL_OK(call) CHECK((call) == ACL_SUCCESS, "%s: %s", #call, aclGetRecentErrMsg() ? aclGetRecentErrMsg() : "")
#define HCCL_OK(call) CHECK((call) == HCCL_SUCCESS, "%s: %s", #call, aclGetRecentErrMsg() ? aclGetRecentErrMsg() : "")

/// A device buffer of n int32 / float elements filled from `host`, and a way back.
template <class T>
struct DevBuf {
    void* p = nullptr;
    size_t n = 0;
    explicit DevBuf(size_t count) : n(count) {
        ACL_OK(aclrtMalloc(&p, bytes(), ACL_MEM_MALLOC_HUGE_FIRST));
    }
    ~DevBuf() { aclrtFree(p); }
    size_t bytes() const { return n ? n * sizeof(T) : sizeof(T); }
    void put(const std::vector<T>& host) {
        ACL_OK(aclrtMemcpy(p, bytes(), host.data(), host.size() * sizeof(T), ACL_MEMCPY_HOST_TO_DEVICE));
    }
    std::vector<T> get() const {
        std::vector<T> host(n);
        ACL_OK(aclrtMemcpy(host.data(), host.size() * sizeof(T), p, n * sizeof(T), ACL_MEMCPY_DEVICE_TO_HOST));
        return host;
    }
};

void collectives(HcclComm comm, aclrtStream stream) {
    uint32_t size = 0, rank = 0;
    HCCL_OK(HcclGetRankSize(comm, &size));
    HCCL_OK(HcclGetRankId(comm, &rank));
    CHECK(size == static_cast<uint32_t>(g_size) && rank == static_cast<uint32_t>(g_rank), "size %u rank %u", size,
          rank);
    const int n = g_size;

    for (size_t count : {size_t{1}, size_t{37}, size_t{300001}}) {
        // All-reduce, sum of int32 and max of float32.
        std::vector<int32_t> in(count);
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>((i % 1000) * (g_rank + 1));
        DevBuf<int32_t> a(count), b(count);
        a.put(in);
        HCCL_OK(HcclAllReduce(a.p, b.p, count, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, stream));
        std::vector<float> fin(count);
        for (size_t i = 0; i < count; ++i) fin[i] = static_cast<float>((i + 3 * g_rank) % 11);
        DevBuf<float> f(count);
        f.put(fin);
        HCCL_OK(HcclAllReduce(f.p, f.p, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, comm, stream));  // in place
        ACL_OK(aclrtSynchronizeStream(stream));
        const int tri = n * (n + 1) / 2;
        size_t bad = 0;
        for (size_t i = 0; auto v : b.get()) bad += v != static_cast<int32_t>((i++ % 1000) * tri);
        CHECK(bad == 0, "all-reduce sum of %zu int32: %zu wrong", count, bad);
        bad = 0;
        for (size_t i = 0; auto v : f.get()) {
            float want = 0;
            for (int r = 0; r < n; ++r) want = std::max(want, static_cast<float>((i + 3 * r) % 11));
            bad += v != want;
            ++i;
        }
        CHECK(bad == 0, "all-reduce max of %zu float: %zu wrong", count, bad);

        // Broadcast from the last rank; all-gather; reduce-scatter.
        DevBuf<int32_t> c(count);
        c.put(std::vector<int32_t>(count, 100 + g_rank));
        HCCL_OK(HcclBroadcast(c.p, count, HCCL_DATA_TYPE_INT32, static_cast<uint32_t>(n - 1), comm, stream));
        DevBuf<int32_t> gathered(count * n), scattered(count);
        HCCL_OK(HcclAllGather(a.p, gathered.p, count, HCCL_DATA_TYPE_INT32, comm, stream));
        HCCL_OK(HcclReduceScatter(gathered.p, scattered.p, count, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, stream));
        ACL_OK(aclrtSynchronizeStream(stream));
        bad = 0;
        for (auto v : c.get()) bad += v != 100 + n - 1;
        CHECK(bad == 0, "broadcast of %zu: %zu wrong", count, bad);
        const std::vector<int32_t> g = gathered.get();
        bad = 0;
        for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count; ++i) bad += g[r * count + i] != static_cast<int32_t>((i % 1000) * (r + 1));
        CHECK(bad == 0, "all-gather of %zu: %zu wrong", count, bad);
        // Every rank's gathered buffer is the same, so slice r of the sum is n times slice r of it.
        bad = 0;
        for (size_t i = 0; auto v : scattered.get())
            bad += v != n * static_cast<int32_t>((i++ % 1000) * (g_rank + 1));
        CHECK(bad == 0, "reduce-scatter of %zu: %zu wrong", count, bad);
    }

    // A ring of sends: rank r sends its rank to r + 1 and receives r - 1's (even ranks send first).
    DevBuf<int32_t> out(4), in(4);
    out.put(std::vector<int32_t>(4, g_rank));
    const uint32_t next = static_cast<uint32_t>((g_rank + 1) % n), prev = static_cast<uint32_t>((g_rank + n - 1) % n);
    if (g_rank % 2 == 0) {
        HCCL_OK(HcclSend(out.p, 4, HCCL_DATA_TYPE_INT32, next, comm, stream));
        HCCL_OK(HcclRecv(in.p, 4, HCCL_DATA_TYPE_INT32, prev, comm, stream));
    } else {
        HCCL_OK(HcclRecv(in.p, 4, HCCL_DATA_TYPE_INT32, prev, comm, stream));
        HCCL_OK(HcclSend(out.p, 4, HCCL_DATA_TYPE_INT32, next, comm, stream));
    }
    HCCL_OK(HcclBarrier(comm, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    for (auto v : in.get()) CHECK(v == static_cast<int32_t>(prev), "received %d from rank %u", v, prev);

    // Refused before anything is queued: a peer and a root out of range.
    CHECK(HcclSend(out.p, 4, HCCL_DATA_TYPE_INT32, static_cast<uint32_t>(n), comm, stream) == HCCL_E_PARA,
          "a send to rank %d (of %d) was not refused", n, n);
    CHECK(HcclBroadcast(out.p, 4, HCCL_DATA_TYPE_INT32, static_cast<uint32_t>(n), comm, stream) == HCCL_E_PARA,
          "a broadcast from root %d (of %d) was not refused", n, n);
    HcclResult async = HCCL_E_INTERNAL;
    HCCL_OK(HcclGetCommAsyncError(comm, &async));
    CHECK(async == HCCL_SUCCESS, "async error %d on a healthy communicator", static_cast<int>(async));
}

}  // namespace

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    CHECK(provided == MPI_THREAD_MULTIPLE, "MPI gave thread level %d", provided);

    ACL_OK(aclInit(nullptr));
    ACL_OK(aclrtSetDevice(0));
    aclrtStream stream = nullptr;
    ACL_OK(aclrtCreateStream(&stream));

    HcclRootInfo root;
    std::memset(&root, 0, sizeof root);
    if (g_rank == 0) HCCL_OK(HcclGetRootInfo(&root));
    MPI_Bcast(&root, sizeof root, MPI_BYTE, 0, MPI_COMM_WORLD);
    HcclComm comm = nullptr;
    HCCL_OK(HcclCommInitRootInfo(static_cast<uint32_t>(g_size), &root, static_cast<uint32_t>(g_rank), &comm));
    if (comm) {
        collectives(comm, stream);
        HCCL_OK(HcclCommDestroy(comm));
    }

    ACL_OK(aclrtDestroyStream(stream));
    ACL_OK(aclrtResetDevice(0));
    ACL_OK(aclFinalize());

    int failures = 0, mine = g_failures.load();
    MPI_Allreduce(&mine, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) std::printf(failures ? "FAILED (%d checks)\n" : "PASS\n", failures);
    MPI_Finalize();
    return failures ? 1 : 0;
}
