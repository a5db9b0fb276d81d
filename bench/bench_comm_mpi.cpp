// bench_comm_mpi.cpp — runtime-bench-comm's MPI mode (run under mpirun): all_reduce float32 sum across the job's
// processes, one rank per process on cpu:0, ours (rtAllReduce + synchronize) against Open MPI's MPI_Allreduce on the
// same buffers and processes, in nccl-tests' columns; then broadcast, all_gather, reduce_scatter and all_to_all
// against MPI_Bcast, MPI_Allgather, MPI_Reduce_scatter_block and MPI_Alltoall. Sizes as nccl-tests': the largest
// buffer of a rank (all_gather: what it receives; reduce_scatter: what it sends). libmpi is dlopen'ed here too: the
// binary runs without MPI.
#include <dlfcn.h>
#include <runtime/comm.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace {

using Fn = int (*)(...);
struct Mpi {
    int (*Init_thread)(int*, char***, int, int*);
    int (*Finalize)();
    int (*Comm_rank)(void*, int*);
    int (*Comm_size)(void*, int*);
    int (*Bcast)(void*, int, void*, int, void*);
    int (*Barrier)(void*);
    int (*Allreduce)(const void*, void*, int, void*, void*, void*);
    int (*Allgather)(const void*, int, void*, void*, int, void*, void*);
    int (*Reduce_scatter_block)(const void*, void*, int, void*, void*, void*);
    int (*Alltoall)(const void*, int, void*, void*, int, void*, void*);
    void *world, *byte, *flt, *dbl, *sum, *max;
};

bool load(Mpi& m) {
    void* h = ::dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
    if (!h) return false;
    auto sym = [h](const char* s) { return ::dlsym(h, s); };
    m.Init_thread = reinterpret_cast<decltype(m.Init_thread)>(sym("MPI_Init_thread"));
    m.Finalize = reinterpret_cast<decltype(m.Finalize)>(sym("MPI_Finalize"));
    m.Comm_rank = reinterpret_cast<decltype(m.Comm_rank)>(sym("MPI_Comm_rank"));
    m.Comm_size = reinterpret_cast<decltype(m.Comm_size)>(sym("MPI_Comm_size"));
    m.Bcast = reinterpret_cast<decltype(m.Bcast)>(sym("MPI_Bcast"));
    m.Barrier = reinterpret_cast<decltype(m.Barrier)>(sym("MPI_Barrier"));
    m.Allreduce = reinterpret_cast<decltype(m.Allreduce)>(sym("MPI_Allreduce"));
    m.Allgather = reinterpret_cast<decltype(m.Allgather)>(sym("MPI_Allgather"));
    m.Reduce_scatter_block = reinterpret_cast<decltype(m.Reduce_scatter_block)>(sym("MPI_Reduce_scatter_block"));
    m.Alltoall = reinterpret_cast<decltype(m.Alltoall)>(sym("MPI_Alltoall"));
    m.world = sym("ompi_mpi_comm_world");
    m.byte = sym("ompi_mpi_byte");
    m.flt = sym("ompi_mpi_float");
    m.dbl = sym("ompi_mpi_double");
    m.sum = sym("ompi_mpi_op_sum");
    m.max = sym("ompi_mpi_op_max");
    return m.Init_thread && m.Allreduce && m.Allgather && m.Reduce_scatter_block && m.Alltoall && m.world && m.flt &&
           m.sum && m.max && m.dbl && m.Bcast && m.Barrier;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

void check(rtError_t e, const char* what) {
    if (e != RT_SUCCESS) {
        std::fprintf(stderr, "runtime-bench-comm: %s: %s: %s\n", what, rtGetErrorName(e), rtGetLastErrorMessage());
        std::exit(1);
    }
}

}  // namespace

constexpr int kRounds = 9;

/// The MPI mode's main: rows from `min_bytes` to `max_bytes` of every collective, or of the one named `only`.
int bench_comm_mpi(size_t min_bytes, size_t max_bytes, const char* only, bool quick) {
    Mpi m{};
    if (!load(m)) {
        std::fprintf(stderr, "runtime-bench-comm: under mpirun, but libmpi.so.40 (Open MPI) cannot be loaded\n");
        return 1;
    }
    int provided = 0, rank = 0, size = 1;
    m.Init_thread(nullptr, nullptr, 3 /* MPI_THREAD_MULTIPLE */, &provided);
    m.Comm_rank(m.world, &rank);
    m.Comm_size(m.world, &size);
    rtCommUniqueId id{};
    check(rtSetDevice(0), "rtSetDevice");
    if (rank == 0) check(rtCommGetUniqueId(&id), "rtCommGetUniqueId");
    m.Bcast(&id, sizeof id, m.byte, 0, m.world);
    rtComm_t comm = nullptr;
    check(rtCommInitRank(&comm, size, id, rank), "rtCommInitRank");
    rtStream_t s = nullptr;
    check(rtStreamCreate(&s), "rtStreamCreate");
    // One collective's table. Element j of a rank's input is (rank + j) % 7, so every result is exact.
    struct Collective {
        const char* name;
        const char* peer;
        double busf;  // nccl-tests' bus-bandwidth factor
        size_t send_div, recv_div;  // a rank's send and receive buffers: size / send_div, size / recv_div
        std::function<rtError_t(void*, void*, size_t)> ours;  // (send, recv, elements of the size)
        std::function<void(void*, void*, size_t)> mpi;
        std::function<float(size_t, size_t)> want;  // element j of this rank's result, for a size of `count` elements
        bool one_buffer = false;  // MPI's call has one buffer (MPI_Bcast): the root's receive buffer holds the data
        bool per_rank = false;    // the size is cut into one piece per rank (all_gather, reduce_scatter, all_to_all)
    };
    const size_t n = static_cast<size_t>(size), me = static_cast<size_t>(rank);
    const int ni = size;
    auto sum_of = [n](size_t j) {
        float w = 0;
        for (size_t r = 0; r < n; ++r) w += static_cast<float>((r + j) % 7);
        return w;
    };
    const Collective collectives[] = {
        {"all_reduce float32 sum", "MPI_Allreduce", 2.0 * (ni - 1) / ni, 1, 1,
         [&](void* a, void* b, size_t c) { return rtAllReduce(a, b, c, RT_FLOAT32, RT_REDUCE_SUM, comm, s); },
         [&](void* a, void* b, size_t c) { m.Allreduce(a, b, static_cast<int>(c), m.flt, m.sum, m.world); },
         [&](size_t j, size_t) { return sum_of(j); }},
        {"broadcast float32 from rank 0", "MPI_Bcast", 1.0, 1, 1,
         [&](void* a, void* b, size_t c) { return rtBroadcast(a, b, c, RT_FLOAT32, 0, comm, s); },
         [&](void*, void* b, size_t c) { m.Bcast(b, static_cast<int>(c), m.flt, 0, m.world); },
         [](size_t j, size_t) { return static_cast<float>(j % 7); }, true},
        {"all_gather float32", "MPI_Allgather", 1.0 * (ni - 1) / ni, n, 1,
         [&](void* a, void* b, size_t c) { return rtAllGather(a, b, c / n, RT_FLOAT32, comm, s); },
         [&](void* a, void* b, size_t c) {
             m.Allgather(a, static_cast<int>(c / n), m.flt, b, static_cast<int>(c / n), m.flt, m.world);
         },
         [&](size_t j, size_t c) { return static_cast<float>((j / (c / n) + j % (c / n)) % 7); }, false, true},
        {"reduce_scatter float32 sum", "MPI_Reduce_scatter_block", 1.0 * (ni - 1) / ni, 1, n,
         [&](void* a, void* b, size_t c) { return rtReduceScatter(a, b, c / n, RT_FLOAT32, RT_REDUCE_SUM, comm, s); },
         [&](void* a, void* b, size_t c) { m.Reduce_scatter_block(a, b, static_cast<int>(c / n), m.flt, m.sum, m.world); },
         [&](size_t j, size_t c) { return sum_of(me * (c / n) + j); }, false, true},
        {"all_to_all float32", "MPI_Alltoall", 1.0 * (ni - 1) / ni, 1, 1,
         [&](void* a, void* b, size_t c) { return rtAlltoAll(a, b, c / n, RT_FLOAT32, comm, s); },
         [&](void* a, void* b, size_t c) {
             m.Alltoall(a, static_cast<int>(c / n), m.flt, b, static_cast<int>(c / n), m.flt, m.world);
         },
         [&](size_t j, size_t c) { return static_cast<float>((j / (c / n) + me * (c / n) + j % (c / n)) % 7); }, false,
         true},
    };
    bool first = true;
    for (const Collective& col : collectives) {
        if (only && !std::string(col.name).starts_with(std::string(only) + ' ')) continue;
        if (rank == 0) {
            std::printf("%s# %s across %d processes (mpirun), one rank each on cpu:0, against %s; time per operation "
                        "(ours: including the stream's synchronize), the slowest rank's mean, median of %d alternating "
                        "rounds; ratio = MPI time / ours\n", first ? "" : "\n", col.name, size, col.peer,
                        quick ? 1 : kRounds);
            std::printf("%12s %11s | %11s %9s %9s %6s | %11s %9s %9s %6s | %6s\n", "size(B)", "count", "ours(us)", "algbw",
                        "busbw", "#wrong", "mpi(us)", "algbw", "busbw", "#wrong", "ratio");
        }
        first = false;
        for (size_t bytes = 8; bytes <= max_bytes; bytes *= (quick ? 16 : 4)) {
            const size_t count = bytes / sizeof(float);
            if (bytes < min_bytes) continue;
            if (col.per_rank && count % n) continue;  // the per-rank pieces must be whole
            const size_t send_count = count / col.send_div, recv_count = count / col.recv_div;
            void *send = nullptr, *recv = nullptr;
            check(rtMalloc(&send, send_count * sizeof(float)), "rtMalloc");
            check(rtMalloc(&recv, recv_count * sizeof(float)), "rtMalloc");
            std::vector<float> h(send_count);
            for (size_t j = 0; j < send_count; ++j) h[j] = static_cast<float>((me + j) % 7);
            check(rtMemcpy(send, h.data(), h.size() * sizeof(float), RT_MEMCPY_HOST_TO_DEVICE), "rtMemcpy");
            auto reset_recv = [&] {
                if (col.one_buffer && rank == 0) check(rtMemcpy(recv, send, bytes, RT_MEMCPY_DEVICE_TO_DEVICE), "rtMemcpy");
                else check(rtMemset(recv, 0, recv_count * sizeof(float)), "rtMemset");
            };
            auto wrong = [&] {
                std::vector<float> out(recv_count);
                check(rtMemcpy(out.data(), recv, recv_count * sizeof(float), RT_MEMCPY_DEVICE_TO_HOST), "rtMemcpy");
                long bad = 0;
                for (size_t j = 0; j < recv_count; ++j) bad += out[j] != col.want(j, count);
                reset_recv();
                return bad;
            };
            auto slowest = [&](double t) {
                double all = 0;
                m.Allreduce(&t, &all, 1, m.dbl, m.max, m.world);
                return all;
            };
            reset_recv();
            // A round moves 64 MiB per rank, and takes at least ~5 ms at the smallest sizes (20000 operations): rounds
            // of a millisecond or less moved the ratio by +-10% between runs (a timer tick, a migration).
            const int iters = static_cast<int>(std::clamp<size_t>((size_t{64} << 20) / bytes, 3, quick ? 200 : 20000));
            const int rounds = quick ? 1 : kRounds;
            // Ours and MPI's alternate over `rounds` rounds of `iters` operations each (warmed up first); each side's
            // figure is its median round: one preempted round on a shared host moves neither side.
            for (int i = 0; i < 3; ++i) check(col.ours(send, recv, count), col.name);
            check(rtStreamSynchronize(s), "rtStreamSynchronize");
            for (int i = 0; i < 3; ++i) col.mpi(send, recv, count);
            std::vector<double> ours_rounds, mpi_rounds;
            for (int r = 0; r < rounds; ++r) {
                m.Barrier(m.world);
                auto t0 = std::chrono::steady_clock::now();
                for (int i = 0; i < iters; ++i) {
                    col.ours(send, recv, count);
                    rtStreamSynchronize(s);
                }
                ours_rounds.push_back(
                    slowest(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters));
                m.Barrier(m.world);
                t0 = std::chrono::steady_clock::now();
                for (int i = 0; i < iters; ++i) col.mpi(send, recv, count);
                mpi_rounds.push_back(
                    slowest(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters));
            }
            const double ours = median(ours_rounds), mpi = median(mpi_rounds);
            // The results of one more call of each, from a cleared receive buffer.
            reset_recv();
            check(col.ours(send, recv, count), col.name);
            check(rtStreamSynchronize(s), "rtStreamSynchronize");
            const long ours_wrong = wrong();
            col.mpi(send, recv, count);
            const long mpi_wrong = wrong();
            if (rank == 0)
                std::printf("%12zu %11zu | %11.2f %9.3f %9.3f %6ld | %11.2f %9.3f %9.3f %6ld | %6.2f\n", bytes, count,
                            ours * 1e6, bytes / ours / 1e9, bytes / ours / 1e9 * col.busf, ours_wrong, mpi * 1e6,
                            bytes / mpi / 1e9, bytes / mpi / 1e9 * col.busf, mpi_wrong, mpi / ours);
            std::fflush(stdout);
            rtFree(send);
            rtFree(recv);
        }
    }
    rtStreamDestroy(s);
    rtCommDestroy(comm);
    m.Finalize();
    return 0;
}
