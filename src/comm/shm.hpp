// The MPI transport's same-host data path: a shared segment (memfd) that every rank of a communicator maps when all of
// them run on one host, through which the collectives move without MPI messages.
//
// Made by the process that made the unique id during rtCommInitRank's bootstrap (mpi::join), opened by the others
// through /proc/<pid>/fd/<fd> and then closed by everyone: the memory lives exactly as long as some process maps it,
// so nothing is left behind when processes die (no name in /dev/shm). RUNTIME_COMM_SHM=0 on any rank keeps the
// communicator on MPI messages.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/runtime.h"

namespace rt::comm {
struct Call;
}
namespace rt::comm::mpi {
class Group;
struct Op;
class Job;
}  // namespace rt::comm::mpi

namespace rt::comm::shm {

/// RUNTIME_COMM_SHM: false for "0", true when unset, empty or "1"; throws INVALID_VALUE for anything else.
bool enabled_from_env();

/// One process's mapping of a communicator's segment. The layout (segment header, one control block per rank, the
/// ranks' input slots and the shared output ring) is private to shm.cpp.
class Segment {
public:
    /// A new zeroed segment for `nranks` ranks, stamped with `token`; null (with *why) when the system refuses.
    static std::unique_ptr<Segment> create(uint64_t token, int nranks, std::string* why);
    /// Maps the segment that process `pid` holds as descriptor `fd` (`bytes` long); null (with *why) unless it is there
    /// and carries `token` and `nranks` (a stale or foreign descriptor is refused, never used).
    static std::unique_ptr<Segment> open(int pid, int fd, uint64_t bytes, uint64_t token, int nranks, std::string* why);
    ~Segment();
    Segment(const Segment&) = delete;
    Segment& operator=(const Segment&) = delete;

    int fd() const { return fd_; }  ///< the maker's descriptor until close_fd(); -1 elsewhere
    uint64_t bytes() const { return bytes_; }
    /// The maker drops its descriptor once every rank has mapped the segment.
    void close_fd();

    /// Records this communicator's failure for the other ranks (the first recorded is kept). Async-signal-unsafe but
    /// lock-free: any thread.
    void set_failure(int rank, rtError_t code, const std::string& why);
    /// The failure a rank recorded (false: none yet).
    bool failure(int* rank, rtError_t* code, std::string* why) const;

    char* base() const { return base_; }
    /// Chunks moved through this segment so far (the running chunk index all ranks agree on). Only the lane that runs
    /// the communicator's collectives (one at a time) touches it.
    uint64_t chunks = 0;
    /// This process' part of the single-copy path (shm.cpp): whether it published its pid and probe word, and whether
    /// it can read every peer's memory (0: not known yet; 1: yes; -1: no). The collectives' lane only.
    bool published = false;
    int readable = 0;
    /// Every collective up to this number had its peers' headers checked here. One-round collectives in which this
    /// rank only writes (a broadcast's root, a reduce's other ranks) finish without waiting for them; a later
    /// collective waits for and checks them before it writes into a slot they may still read. The collectives' lane
    /// only.
    uint64_t checked = 0;

private:
    Segment(char* base, uint64_t bytes, int fd) : base_(base), bytes_(bytes), fd_(fd) {}
    char* base_;
    uint64_t bytes_;
    int fd_;
};

/// Whether `call` takes the one-round path on `g`: g has a segment and one rank per process, and each rank
/// contributes at most 16 KiB (an all-gather: less; a collective other than a barrier).
bool one_round(const mpi::Group& g, const Call& call);

/// A collective of `g` (whose segment is mapped) run through the segment: pollable like the MPI exchanges. `spare`
/// (optional): a finished job of g's (it holds g), made ready again instead of a new one.
std::unique_ptr<mpi::Job> make_job(mpi::Group& g, mpi::Op op, std::unique_ptr<mpi::Job> spare = nullptr);

}  // namespace rt::comm::shm
