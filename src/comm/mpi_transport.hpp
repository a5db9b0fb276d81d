// The transport across processes over Open MPI: bootstrap of rtCommInitRank, rtCommSplit's exchange, and the
// collectives as point-to-point messages with a fixed-order reduction, run by one progress thread per process.
//
// A Group is the MPI side of one cross-process clique (one rank per process). Its operations arrive from the
// clique's rendezvous (comm.cpp) once the local rank's stream has reached them; the progress thread runs them as
// nonblocking MPI calls, polled against the communicator's deadline, and calls `done` from that thread. Messages use
// MPI_COMM_WORLD with four tags reserved per communicator (derived from the unique id's token), so no MPI collective
// over all world ranks is ever needed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"

namespace rt::comm::mpi {

/// One rank of a group: where it runs.
struct Member {
    int world = -1;   ///< its rank in MPI_COMM_WORLD
    int device = -1;  ///< its device index in its process
    int pid = 0;
    std::string host;
};

/// One rank's part of a matched operation, handed to the transport when its stream has reached it.
struct Op {
    Call call;
    uint64_t number = 0;       ///< the collective's number (sends and receives: per peer and direction)
    bool failed_before = false;  ///< the rank's stream held an unreported failure: nothing of this rank moves
    /// Called once from the progress thread: RT_SUCCESS, or the failure (`why` without the operation's name) and
    /// whether the communicator is dead after it (`fatal`: the message streams of the ranks can no longer agree).
    std::function<void(rtError_t code, const std::string& why, bool fatal)> done;
};

class Group : public std::enable_shared_from_this<Group> {
public:
    Group(uint64_t token, int rank, std::vector<Member> members, double timeout);
    int size() const { return static_cast<int>(members_.size()); }
    int rank() const { return rank_; }
    const Member& member(int r) const { return members_[static_cast<size_t>(r)]; }
    uint64_t token() const { return token_; }
    int tag(int which) const { return tag_base_ + which; }
    double timeout() const { return timeout_; }

    /// Queues `op` on the progress thread (collectives run in submission order; sends at once; receives from one
    /// peer in order). Thread-safe.
    void submit(Op op);
    /// The communicator failed here (abort, timeout, mismatch): operations in flight fail now with `why`, later
    /// ones at once, and every peer is told (it fails its own with "rank r: why"). The first failure is kept.
    void fail(rtError_t code, const std::string& why);
    /// The failure (RT_SUCCESS: none).
    rtError_t failure(std::string* why) const;

    /// rtCommSplit over MPI: blocks until every rank of this group has given its color and key (or the timeout).
    /// Returns the new group (null for RT_COMM_SPLIT_NOCOLOR) and this rank's rank in it.
    std::shared_ptr<Group> split(uint64_t number, int color, int key, int* new_rank);

    struct Lanes;  // the progress thread's queues of this group's operations
    Lanes& lanes() { return *lanes_; }
    /// Marks the group failed by a peer's notice.
    void fail_from_peer(rtError_t code, const std::string& why);
    /// Receives the peers' failure notices that have arrived (fail_from_peer). Any thread.
    void poll_notices();

private:
    const uint64_t token_;
    const int rank_;
    const std::vector<Member> members_;
    const double timeout_;
    int tag_base_ = 0;
    std::unique_ptr<Lanes> lanes_;
    mutable std::mutex mutex_;
    rtError_t code_ = RT_SUCCESS;
    std::string why_;

public:
    ~Group();
};

/// rtCommInitRank with an id of the MPI transport: exchanges (world rank, host, device, pid) with the other ranks
/// through the id's creator (world rank `creator`), blocking until all `nranks` have joined or the timeout passes
/// (naming the missing ranks). Refuses a second rank of the same id in this process (one rank per process).
std::shared_ptr<Group> join(uint64_t token, int creator, int nranks, int rank, int device, double timeout);

}  // namespace rt::comm::mpi
