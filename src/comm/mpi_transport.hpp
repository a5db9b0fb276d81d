// The transport across processes over Open MPI: bootstrap of rtCommInitRank, rtCommSplit's exchange, and the
// collectives as point-to-point messages with a fixed-order reduction, run by one progress thread per process.
//
// A Group is the MPI side of one cross-process clique (one rank per process). Its operations arrive from the
// clique's rendezvous (comm.cpp) once the local rank's stream has reached them; the progress thread runs them as
// nonblocking MPI calls, polled against the communicator's deadline, and calls `done` from that thread. Messages use
// MPI_COMM_WORLD with four tags reserved per communicator (derived from the unique id's token), so no MPI collective
// over all world ranks is ever needed. When every rank is on one host, the collectives go through a shared segment
// instead (shm.hpp), polled by the same machinery; sends and receives stay MPI messages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "comm/shm.hpp"

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

/// What every rank of a collective tells every other before any data moves (an MPI message, or the rank's control
/// block of the shared segment): its operands, so that calls that differ are reported on every rank.
struct Header {
    uint32_t magic;
    uint8_t kind, type, op, flags;  // flags bit 0: the sender's stream had failed before (nothing of it moves)
    int32_t root;
    int32_t rank;
    uint64_t count;
    uint64_t number;
};
static_assert(sizeof(Header) == 32);
inline constexpr uint32_t kHeaderMagic = 0x72746d31;  // "rtm1"
/// This rank's header of `op`.
Header header_of(const Op& op, int rank);
/// Why rank `q`'s header `h` does not match this rank's (`me`) operation `op` (empty: it matches).
std::string header_mismatch(const Op& op, int me, int q, const Header& h);
/// "timed out after 2 s waiting for rank 1 (RUNTIME_COMM_TIMEOUT)" (the ranks sorted, each once).
std::string timeout_text(double timeout, std::vector<int> missing);
std::string rank_list(const std::vector<int>& ranks);

/// One operation in flight on the progress thread: an exchange of MPI messages, or a collective through the shared
/// segment. poll() never blocks; it calls the operation's `done` once and then returns true.
class Job {
public:
    virtual ~Job() = default;
    /// Makes what progress is possible now; true once finished (done was called).
    virtual bool poll() = 0;
    /// Counts the steps poll() has seen complete: a caller polling it can tell a stall from progress.
    virtual uint64_t events() const = 0;
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

    /// The shared segment when every rank is on this host (join made and mapped it), else null: MPI messages.
    shm::Segment* segment() const { return segment_.get(); }
    void set_segment(std::unique_ptr<shm::Segment> s) { segment_ = std::move(s); }

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
    std::unique_ptr<shm::Segment> segment_;
    bool oversubscribed_ = false;  // more ranks on this host than cores: waits yield between polls
    mutable std::mutex mutex_;
    rtError_t code_ = RT_SUCCESS;
    std::string why_;

public:
    ~Group();
};

/// rtCommInitRank with an id of the MPI transport: exchanges (world rank, host, device, pid) with the other ranks
/// through the id's creator (world rank `creator`), blocking until all `nranks` have joined or the timeout passes
/// (naming the missing ranks). Refuses a second rank of the same id in this process (one rank per process).
/// When every rank is on one host and none set RUNTIME_COMM_SHM=0, the creator makes the shared segment and every
/// rank maps it (a second round: all ranks use it, or — when any could not map it — none does).
std::shared_ptr<Group> join(uint64_t token, int creator, int nranks, int rank, int device, double timeout);

}  // namespace rt::comm::mpi
