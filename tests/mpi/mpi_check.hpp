// mpi_check.hpp — the checks of the programs run under mpirun (tests/mpi): CHECK counts a failure in g_failures and
// prints it with the calling thread's rank (g_rank, which each program sets); the program sums g_failures over the
// job at the end and exits non-zero when any rank failed.
#pragma once

#include <atomic>
#include <cstdio>

namespace mpi_check {
/// The communicator rank of the calling thread (one thread per rank), for messages.
inline thread_local int g_rank = 0;
inline std::atomic<int> g_failures{0};
}  // namespace mpi_check

#define CHECK(cond, ...)                                                                                           \
    do {                                                                                                           \
        if (!(cond)) {                                                                                             \
            ++::mpi_check::g_failures;                                                                             \
            std::fprintf(stderr, "[rank %d] %s:%d: CHECK(%s) failed: ", ::mpi_check::g_rank, __FILE__, __LINE__,   \
                         #cond);                                                                                   \
            std::fprintf(stderr, __VA_ARGS__);                                                                     \
            std::fprintf(stderr, "\n");                                                                            \
        }                                                                                                          \
    } while (0)
