// bench_comm_mpi.cpp — runtime-bench-comm's MPI mode (run under mpirun): all_reduce float32 sum across the job's
// processes, one rank per process on cpu:0, ours (rtAllReduce + synchronize) against Open MPI's MPI_Allreduce on the
// same buffers and processes, in nccl-tests' columns. libmpi is dlopen'ed here too: the binary runs without MPI.
#include <dlfcn.h>
#include <runtime/comm.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
    m.world = sym("ompi_mpi_comm_world");
    m.byte = sym("ompi_mpi_byte");
    m.flt = sym("ompi_mpi_float");
    m.dbl = sym("ompi_mpi_double");
    m.sum = sym("ompi_mpi_op_sum");
    m.max = sym("ompi_mpi_op_max");
    return m.Init_thread && m.Allreduce && m.world && m.flt && m.sum && m.max && m.dbl && m.Bcast && m.Barrier;
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

/// The MPI mode's main: rows from 8 B to `max_bytes`.
int bench_comm_mpi(size_t max_bytes, bool quick) {
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
    if (rank == 0) {
        std::printf("# all_reduce float32 sum across %d processes (mpirun), one rank each on cpu:0; time per operation "
                    "(ours: including the stream's synchronize), the slowest rank's mean, median of %d alternating rounds; ratio = MPI time / ours\n", size, quick ? 1 : 7);
        std::printf("%12s %11s | %11s %9s %9s %6s | %11s %9s %9s %6s | %6s\n", "size(B)", "count", "ours(us)", "algbw",
                    "busbw", "#wrong", "mpi(us)", "algbw", "busbw", "#wrong", "ratio");
    }
    const double busf = 2.0 * (size - 1) / size;
    for (size_t bytes = 8; bytes <= max_bytes; bytes *= (quick ? 16 : 4)) {
        const size_t count = bytes / sizeof(float);
        void *send = nullptr, *recv = nullptr;
        check(rtMalloc(&send, bytes), "rtMalloc");
        check(rtMalloc(&recv, bytes), "rtMalloc");
        std::vector<float> h(count);
        for (size_t i = 0; i < count; ++i) h[i] = static_cast<float>((rank + i) % 7);
        check(rtMemcpy(send, h.data(), bytes, RT_MEMCPY_HOST_TO_DEVICE), "rtMemcpy");
        const int iters = static_cast<int>(std::clamp<size_t>((size_t{64} << 20) / bytes, 3, quick ? 200 : 2000));
        const int rounds = quick ? 1 : 7;
        auto wrong = [&] {
            std::vector<float> out(count);
            check(rtMemcpy(out.data(), recv, bytes, RT_MEMCPY_DEVICE_TO_HOST), "rtMemcpy");
            long bad = 0;
            for (size_t i = 0; i < count; ++i) {
                float want = 0;
                for (int r = 0; r < size; ++r) want += static_cast<float>((r + i) % 7);
                bad += out[i] != want;
            }
            check(rtMemset(recv, 0, bytes), "rtMemset");
            return bad;
        };
        auto slowest = [&](double t) {
            double all = 0;
            m.Allreduce(&t, &all, 1, m.dbl, m.max, m.world);
            return all;
        };
        // Ours and MPI's alternate over `rounds` rounds of `iters` operations each (warmed up first); each side's
        // figure is its median round: one preempted round on a shared host moves neither side.
        for (int i = 0; i < 3; ++i) check(rtAllReduce(send, recv, count, RT_FLOAT32, RT_REDUCE_SUM, comm, s), "rtAllReduce");
        check(rtStreamSynchronize(s), "rtStreamSynchronize");
        for (int i = 0; i < 3; ++i) m.Allreduce(send, recv, static_cast<int>(count), m.flt, m.sum, m.world);
        std::vector<double> ours_rounds, mpi_rounds;
        for (int r = 0; r < rounds; ++r) {
            m.Barrier(m.world);
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < iters; ++i) {
                rtAllReduce(send, recv, count, RT_FLOAT32, RT_REDUCE_SUM, comm, s);
                rtStreamSynchronize(s);
            }
            ours_rounds.push_back(slowest(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters));
            m.Barrier(m.world);
            t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < iters; ++i) m.Allreduce(send, recv, static_cast<int>(count), m.flt, m.sum, m.world);
            mpi_rounds.push_back(slowest(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters));
        }
        const double ours = median(ours_rounds), mpi = median(mpi_rounds);
        // The last round's results: ours ran first in it, MPI wrote recv after; check ours once more, then MPI's.
        check(rtMemset(recv, 0, bytes), "rtMemset");
        check(rtAllReduce(send, recv, count, RT_FLOAT32, RT_REDUCE_SUM, comm, s), "rtAllReduce");
        check(rtStreamSynchronize(s), "rtStreamSynchronize");
        const long ours_wrong = wrong();
        m.Allreduce(send, recv, static_cast<int>(count), m.flt, m.sum, m.world);
        const long mpi_wrong = wrong();
        if (rank == 0)
            std::printf("%12zu %11zu | %11.2f %9.3f %9.3f %6ld | %11.2f %9.3f %9.3f %6ld | %6.2f\n", bytes, count,
                        ours * 1e6, bytes / ours / 1e9, bytes / ours / 1e9 * busf, ours_wrong, mpi * 1e6,
                        bytes / mpi / 1e9, bytes / mpi / 1e9 * busf, mpi_wrong, mpi / ours);
        std::fflush(stdout);
        rtFree(send);
        rtFree(recv);
    }
    rtStreamDestroy(s);
    rtCommDestroy(comm);
    m.Finalize();
    return 0;
}
