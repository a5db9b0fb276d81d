// bench_comm.cpp — runtime-bench-comm: all_reduce float32 sum over 2 cpu devices in one process, 8 B .. 256 MiB, in
// nccl-tests' columns, against this run's memory-bandwidth bound (2 * n * S bytes must move for n ranks of S bytes);
// then all_gather, reduce_scatter, broadcast and all_to_all rows on the same ranks.
//
// Usage: runtime-bench-comm [--quick] [--min-bytes N] [--max-bytes N] [--only NAME]; under mpirun -np N: the MPI mode
// (bench_comm_mpi.cpp). --only NAME: one collective's table (all_reduce, broadcast, all_gather, reduce_scatter,
// all_to_all); --min-bytes / --max-bytes: the range of sizes.
// Each row: size, count, time per all_reduce including the synchronize of both ranks' streams (median of the timed
// repetitions), algbw = S / time, busbw = algbw * 2 (n - 1) / n (nccl-tests' all_reduce factor), #wrong (elements that
// differ from the exact sum, checked after the timed runs), the bound's time 2 * n * S / BW and time / bound.
// BW is the memory traffic (bytes read + bytes written) per second of the faster of a 1-thread and a 2-thread memcpy
// of 256 MiB (or --max-bytes), measured in the same run.
#include <runtime/comm.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.hpp"

using namespace rtbench;

namespace {

void check(rtError_t e, const char* what) {
    if (e != RT_SUCCESS) {
        std::fprintf(stderr, "runtime-bench-comm: %s: %s: %s\n", what, rtGetErrorName(e), rtGetLastErrorMessage());
        std::exit(1);
    }
}

}  // namespace

int bench_comm_mpi(size_t min_bytes, size_t max_bytes, const char* only, bool quick);  // bench_comm_mpi.cpp

int main(int argc, char** argv) {
    bool quick = false;
    size_t min_bytes = 8, max_bytes = size_t{256} << 20;
    const char* only = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick")) quick = true;
        else if (!std::strcmp(argv[i], "--max-bytes") && i + 1 < argc) max_bytes = std::strtoull(argv[++i], nullptr, 0);
        else if (!std::strcmp(argv[i], "--min-bytes") && i + 1 < argc) min_bytes = std::strtoull(argv[++i], nullptr, 0);
        else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            std::fprintf(stderr, "usage: runtime-bench-comm [--quick] [--min-bytes N] [--max-bytes N] [--only NAME]\n");
            return 2;
        }
    }
    if (quick) max_bytes = std::min(max_bytes, size_t{16} << 20);
    const char* const names[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all"};
    if (only && std::none_of(std::begin(names), std::end(names), [&](const char* c) { return !std::strcmp(c, only); })) {
        std::fprintf(stderr, "runtime-bench-comm: --only %s: no such collective (expected all_reduce, broadcast, "
                             "all_gather, reduce_scatter or all_to_all)\n", only);
        return 2;
    }
    // Under mpirun (more than one process): the MPI mode, ours against MPI_Allreduce across the processes.
    if (const char* np = std::getenv("OMPI_COMM_WORLD_SIZE"); np && std::atoi(np) > 1)
        return bench_comm_mpi(min_bytes, max_bytes, only, quick);
    ::setenv("RUNTIME_CPU_DEVICES", "2", 0);  // before the runtime starts; a value set by the caller wins
    const int n = 2;
    int devices = 0;
    check(rtGetDeviceCount(&devices), "rtGetDeviceCount");
    if (devices < n) {
        std::fprintf(stderr, "runtime-bench-comm: needs 2 cpu devices (RUNTIME_CPU_DEVICES=2), found %d\n", devices);
        return 1;
    }
    rtComm_t comms[n];
    const int devs[n] = {0, 1};
    check(rtCommInitAll(comms, n, devs), "rtCommInitAll");
    rtStream_t streams[n];
    void *send[n], *recv[n];
    for (int r = 0; r < n; ++r) {
        check(rtSetDevice(r), "rtSetDevice");
        check(rtStreamCreate(&streams[r]), "rtStreamCreate");
        check(rtMalloc(&send[r], max_bytes), "rtMalloc");
        check(rtMalloc(&recv[r], max_bytes), "rtMalloc");
        // Small integers: the sum is exact in float whatever the order, so #wrong counts real errors only.
        float* s = static_cast<float*>(send[r]);  // cpu device memory is host-addressable
        for (size_t i = 0; i < max_bytes / 4; ++i) s[i] = static_cast<float>((i + static_cast<size_t>(r) * 3) % 11);
        std::memset(recv[r], 0, max_bytes);
    }

    // This run's memory bandwidth: traffic (read + write) of the faster memcpy.
    std::vector<char> a(max_bytes), b(max_bytes);
    fill_pattern(a.data(), a.size(), 1);
    std::memset(b.data(), 0, b.size());
    double copy_s = 1e30;
    for (int i = 0; i < (quick ? 3 : 5); ++i) {
        copy_s = std::min(copy_s, memcpy_1t_seconds(b.data(), a.data(), max_bytes));
        copy_s = std::min(copy_s, memcpy_2t_seconds(b.data(), a.data(), max_bytes));
    }
    const double bw = 2.0 * static_cast<double>(max_bytes) / copy_s;  // bytes moved per second

    // The other collectives, in nccl-tests' terms: size is the larger buffer of a rank (all_gather: the received
    // n * sendcount elements; reduce_scatter: the sent n * recvcount; all_to_all: n * count each way; broadcast: count),
    // algbw = size / time, busbw = algbw * factor: (n - 1) / n for all_gather, reduce_scatter and all_to_all, 1 for
    // broadcast. #wrong: every element a rank received, compared with what the peers sent, after the output was
    // overwritten with a pattern that no correct result has (0xff bytes: a NaN) and one more run.
    auto value = [](int rank, size_t i) { return static_cast<float>((i + static_cast<size_t>(rank) * 3) % 11); };
    struct Row {
        const char* name;
        double factor;
        size_t per_rank;  // size = count * per_rank elements of 4 bytes (count: the call's count argument)
        size_t received;  // a rank receives count * received elements
        rtError_t (*call)(void* send, void* recv, size_t count, rtComm_t comm, rtStream_t stream);
        float (*want)(int rank, size_t i, size_t count, int n, float (*value)(int, size_t));
    };
    const Row rows[] = {
        {"all_reduce", 2.0 * (n - 1) / n, 1, 1,
         [](void* s, void* r, size_t c, rtComm_t comm, rtStream_t st) {
             return rtAllReduce(s, r, c, RT_FLOAT32, RT_REDUCE_SUM, comm, st);
         },
         [](int, size_t i, size_t, int n, float (*v)(int, size_t)) {
             float w = 0;
             for (int k = 0; k < n; ++k) w += v(k, i);
             return w;
         }},
        {"all_gather", 1.0 * (n - 1) / n, static_cast<size_t>(n), static_cast<size_t>(n),
         [](void* s, void* r, size_t c, rtComm_t comm, rtStream_t st) { return rtAllGather(s, r, c, RT_FLOAT32, comm, st); },
         [](int, size_t i, size_t c, int, float (*v)(int, size_t)) { return v(static_cast<int>(i / c), i % c); }},
        {"reduce_scatter", 1.0 * (n - 1) / n, static_cast<size_t>(n), 1,
         [](void* s, void* r, size_t c, rtComm_t comm, rtStream_t st) {
             return rtReduceScatter(s, r, c, RT_FLOAT32, RT_REDUCE_SUM, comm, st);
         },
         [](int rank, size_t i, size_t c, int n, float (*v)(int, size_t)) {
             float w = 0;
             for (int k = 0; k < n; ++k) w += v(k, static_cast<size_t>(rank) * c + i);
             return w;
         }},
        {"broadcast", 1.0, 1, 1,
         [](void* s, void* r, size_t c, rtComm_t comm, rtStream_t st) { return rtBroadcast(s, r, c, RT_FLOAT32, 0, comm, st); },
         [](int, size_t i, size_t, int, float (*v)(int, size_t)) { return v(0, i); }},
        {"all_to_all", 1.0 * (n - 1) / n, static_cast<size_t>(n), static_cast<size_t>(n),
         [](void* s, void* r, size_t c, rtComm_t comm, rtStream_t st) { return rtAlltoAll(s, r, c, RT_FLOAT32, comm, st); },
         [](int rank, size_t i, size_t c, int, float (*v)(int, size_t)) {
             return v(static_cast<int>(i / c), static_cast<size_t>(rank) * c + i % c);
         }},
    };
    bool blank = false;  // a blank line before every table but the first printed
    for (const Row& row : rows) {
        if (only && std::strcmp(row.name, only) != 0) continue;
        const bool first = &row == rows;  // all_reduce: measured against the memory-bandwidth bound
        if (first) {
            std::printf("# all_reduce float32 sum, %d ranks on cpu:0 and cpu:1 (one process); memcpy of %zu MiB: %.2f GB/s "
                        "copied, BW = %.2f GB/s of traffic\n", n, max_bytes >> 20, max_bytes / copy_s / 1e9, bw / 1e9);
            std::printf("# time includes the synchronize of both ranks' streams; bound = 2*n*S/BW\n");
            std::printf("%12s %12s %8s %12s %10s %10s %7s %12s %10s\n", "size(B)", "count", "type", "time(us)",
                        "algbw(GB/s)", "busbw(GB/s)", "#wrong", "bound(us)", "bound/time");
        } else {
            std::printf("%s# %s float32%s, %d ranks; busbw = algbw * %.2f\n", blank ? "\n" : "", row.name,
                        std::strcmp(row.name, "reduce_scatter") == 0 ? " sum" : "", n, row.factor);
            std::printf("%12s %12s %8s %12s %10s %10s %7s\n", "size(B)", "count", "type", "time(us)", "algbw(GB/s)",
                        "busbw(GB/s)", "#wrong");
        }
        blank = true;
        for (size_t bytes = 8; bytes <= max_bytes; bytes *= 2) {
            if (bytes < min_bytes) continue;
            const size_t count = bytes / 4 / row.per_rank;
            if (count == 0) continue;
            auto once = [&] {
                check(rtGroupStart(), "rtGroupStart");
                for (int r = 0; r < n; ++r) check(row.call(send[r], recv[r], count, comms[r], streams[r]), row.name);
                check(rtGroupEnd(), "rtGroupEnd");
                for (int r = 0; r < n; ++r) check(rtStreamSynchronize(streams[r]), "rtStreamSynchronize");
            };
            for (int i = 0; i < 3; ++i) once();
            // Repetitions for about 0.2 s (0.05 s with --quick), at least 5.
            const auto t0 = Clock::now();
            once();
            const double one = seconds_between(t0, Clock::now());
            const double budget = quick ? 0.05 : 0.2;
            const int reps = static_cast<int>(std::max(5.0, std::min(20000.0, budget / std::max(one, 1e-7))));
            std::vector<double> times;
            times.reserve(static_cast<size_t>(reps));
            for (int i = 0; i < reps; ++i) {
                const auto s = Clock::now();
                once();
                times.push_back(seconds_between(s, Clock::now()));
            }
            const double t = summarize(times).median;
            const size_t received = count * row.received;
            for (int r = 0; r < n; ++r) std::memset(recv[r], 0xff, received * 4);
            once();
            size_t wrong = 0;
            for (int r = 0; r < n; ++r) {
                const float* out = static_cast<const float*>(recv[r]);
                for (size_t i = 0; i < received; ++i)
                    if (!(out[i] == row.want(r, i, count, n, value))) ++wrong;
            }
            const size_t size = count * row.per_rank * 4;
            const double algbw = static_cast<double>(size) / t / 1e9;
            const double busbw = algbw * row.factor;
            if (first) {
                const double bound = 2.0 * n * static_cast<double>(size) / bw;
                std::printf("%12zu %12zu %8s %12.2f %10.2f %10.2f %7zu %12.2f %10.2f\n", size, count, "float", t * 1e6,
                            algbw, busbw, wrong, bound * 1e6, bound / t);
            } else {
                std::printf("%12zu %12zu %8s %12.2f %10.2f %10.2f %7zu\n", size, count, "float", t * 1e6, algbw, busbw,
                            wrong);
            }
            std::fflush(stdout);
        }
    }
    for (int r = 0; r < n; ++r) {
        rtFree(send[r]);
        rtFree(recv[r]);
        rtStreamDestroy(streams[r]);
        rtCommDestroy(comms[r]);
    }
    return 0;
}
