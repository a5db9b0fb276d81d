// The transport across processes over Open MPI: bootstrap of rtCommInitRank, rtCommSplit's exchange, and the
// collectives as point-to-point messages with a fixed-order reduction, run by one progress thread per process.
//
// A Group is the MPI side of one cross-process clique: its participants are processes, each holding one or more of
// the communicator's ranks. Its operations arrive from the clique's rendezvous (comm.cpp) once every local rank's
// stream has reached them (one operation per process: the process leader's part, on behalf of all of them); the
// progress thread runs them as
// nonblocking MPI calls, polled against the communicator's deadline, and calls `done` from that thread. Messages use
// MPI_COMM_WORLD with four tags reserved per communicator (derived from the unique id's token), so no MPI collective
// over all world ranks is ever needed. When every rank is on one host, the collectives go through a shared segment
// instead (shm.hpp), polled by the same machinery; sends and receives stay MPI messages.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "comm/shm.hpp"

namespace rt::comm::mpi {

/// One process of a group (a participant of the exchanges): where it runs and which ranks it holds.
struct Member {
    int world = -1;  ///< its rank in MPI_COMM_WORLD
    int pid = 0;
    std::string host;
    std::vector<int> ranks;  ///< the communicator's ranks in that process, ascending (its first: the leader)
};

/// The most ranks of one cross-process communicator in one process (sends and receives between processes use a tag
/// per pair of local ranks: 16 x 16 of them per communicator).
inline constexpr int kMaxLocalRanks = 16;

/// A process' part of a matched operation, handed to the transport when its local ranks' streams have reached it.
struct Op {
    Call call;                 ///< the leader's call (the local ranks' calls agree but for their buffers)
    uint64_t number = 0;       ///< the collective's number (sends and receives: per peer and direction)
    int rank = 0;              ///< the global rank the headers name: the sender/receiver of a message; for a
                               ///< collective the leader, or the first local rank whose stream had failed
    bool failed_before = false;  ///< a local rank's stream held an unreported failure: nothing of this process moves
    /// A collective of a hierarchical group: every local rank's call, in rank order (Member::ranks); else empty.
    std::vector<Call> locals;
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
    int32_t rank;  // Op::rank: a global rank
    uint64_t count;
    uint64_t number;
};
static_assert(sizeof(Header) == 32);
inline constexpr uint32_t kHeaderMagic = 0x72746d31;  // "rtm1"
/// This process' header of `op`.
Header header_of(const Op& op);
/// Why a peer's header `h` does not match this process' operation `op` (empty: it matches); names both ranks.
std::string header_mismatch(const Op& op, const Header& h);
/// The same for this process' header `mine` of an operation.
std::string header_mismatch(const Header& mine, const Header& h);
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
    /// `members`: the processes, ordered by their leaders' ranks; `me`: this process' index; `devices`: every rank's
    /// device index in its process.
    Group(uint64_t token, int me, std::vector<Member> members, std::vector<int> devices, double timeout);
    /// Participants of the exchanges: processes (one rank each unless hierarchical(): then participant != rank).
    int size() const { return static_cast<int>(members_.size()); }
    /// This process' participant index.
    int rank() const { return rank_; }
    const Member& member(int p) const { return members_[static_cast<size_t>(p)]; }
    /// The communicator's ranks (all processes).
    int nranks() const { return static_cast<int>(devices_.size()); }
    int device(int r) const { return devices_[static_cast<size_t>(r)]; }
    /// The participant holding rank `r`, and r's index among that process' ranks.
    int participant_of(int r) const { return where_[static_cast<size_t>(r)].first; }
    int local_index(int r) const { return where_[static_cast<size_t>(r)].second; }
    /// Some process holds several ranks: collectives go through the hierarchical plan (hierarchy.cpp).
    bool hierarchical() const { return hierarchical_; }
    /// This process' first rank: the rank its notices and failure records name.
    int leader() const { return members_[static_cast<size_t>(rank_)].ranks.front(); }
    /// Every rank held by the participants `ps` (ascending): whom a wait for those processes waits for.
    std::vector<int> ranks_of(const std::vector<int>& ps) const;
    uint64_t token() const { return token_; }
    int tag(int which) const { return tag_base_ + which; }
    /// The tag of the messages from rank `from` to rank `to` (one per pair of local indices when hierarchical, so two
    /// pairs of ranks between the same two processes never match each other's messages).
    int p2p_tag(int from, int to) const;
    double timeout() const { return timeout_; }

    /// Queues `op` on the progress thread (collectives run in submission order; sends at once; receives from one
    /// peer in order). Thread-safe. When nothing of its lane is ahead of it, the calling thread polls it first, for
    /// `inline_for` after the last progress it saw (a bounded spin, like the queues' own before they park: when the
    /// peers are there already — the common case — it completes without the two hand-offs through the progress
    /// thread): true when it finished there (op.done was called on this thread). `started` (a collective started at
    /// its call, whose predecessors on the group have all finished): polled without the lanes' lock, and the job is
    /// *started's finished one when there is one (no allocation), and left there when it finishes here.
    bool submit(Op op, std::chrono::microseconds inline_for = std::chrono::microseconds(40),
                std::unique_ptr<Job>* started = nullptr);
    /// The number of the latest collective through the shared segment that has finished (successfully or not);
    /// they finish in order. Any thread.
    uint64_t finished_collective() const { return finished_collective_.load(std::memory_order_acquire); }
    void set_finished_collective(uint64_t number) { finished_collective_.store(number, std::memory_order_release); }
    /// The communicator failed here (abort, timeout, mismatch): operations in flight fail now with `why`, later
    /// ones at once, and every peer is told (it fails its own with "rank r: why"). The first failure is kept.
    void fail(rtError_t code, const std::string& why);
    /// The failure (RT_SUCCESS: none).
    rtError_t failure(std::string* why) const;
    /// fail(), then finishes every operation queued on the group (each with the failure): the progress thread stopped.
    void fail_all(rtError_t code, const std::string& why);

    /// One rank's part of an rtCommSplit.
    struct SplitPart {
        int32_t rank, color, key;
    };
    /// What a split gives this process' ranks: per color that one of them chose, the new communicator's devices (per
    /// new rank) and its group (null when every member is in this process: an in-process clique), and for each local
    /// rank with a color, that color and its new rank (ordered by key, then by old rank).
    struct SplitResult {
        struct Color {
            std::shared_ptr<Group> group;
            std::vector<int> devices;
        };
        std::map<int, Color> colors;
        std::map<int, std::pair<int, int>> placed;  // local rank -> (color, new rank)
    };
    /// rtCommSplit over MPI: sends this process' parts (every local rank's) to the other processes and receives
    /// theirs; blocks until every process has (or the timeout). Called once per split per process.
    SplitResult split(uint64_t number, const std::vector<SplitPart>& local);

    /// More ranks on this host than it has cores (the same answer on every rank of the host).
    bool oversubscribed() const { return oversubscribed_; }
    /// The shared segment when every rank is on this host (join made and mapped it), else null: MPI messages.
    shm::Segment* segment() const { return segment_.get(); }
    void set_segment(std::unique_ptr<shm::Segment> s) { segment_ = std::move(s); }

    struct Lanes;  // the progress thread's queues of this group's operations
    Lanes& lanes() { return *lanes_; }
    /// Marks the group failed by a peer's notice.
    void fail_from_peer(rtError_t code, const std::string& why);
    /// Receives the peers' failure notices that have arrived (fail_from_peer). Any thread.
    void poll_notices();
    /// Takes in a failure a peer recorded in the shared segment (its MPI notice may come later): true when there is
    /// one (the group has failed from it). Memory reads only: any thread, even after MPI_Finalize.
    bool take_recorded_failure();

private:
    /// submit()'s bounded poll of `x` on the calling thread: true when it finished.
    bool poll_inline(Job& x, Kind kind, std::chrono::microseconds inline_for);

    const uint64_t token_;
    const int rank_;
    const std::vector<Member> members_;
    const std::vector<int> devices_;
    std::vector<std::pair<int, int>> where_;  // per rank: (participant, local index)
    bool hierarchical_ = false;
    const double timeout_;
    int tag_base_ = 0;
    std::unique_ptr<Lanes> lanes_;
    std::unique_ptr<shm::Segment> segment_;
    bool oversubscribed_ = false;  // more ranks on this host than cores: waits yield between polls
    mutable std::mutex mutex_;
    rtError_t code_ = RT_SUCCESS;
    std::string why_;
    std::atomic<bool> failed_{false};  // code_ != RT_SUCCESS, read without the lock by every poll
    std::atomic<uint64_t> finished_collective_{0};

public:
    ~Group();
};

/// rtCommInitRank with an id of the MPI transport: exchanges (world rank, host, device, pid) with the other ranks
/// through the id's creator (world rank `creator`), blocking until all `nranks` have joined or the timeout passes
/// (naming the missing ranks). Several ranks of one process join from their own threads: each sends its entry, the
/// first to arrive runs the exchange for the process, and all of them get the same group (or the same error).
/// When every rank is on one host and none set RUNTIME_COMM_SHM=0, the creator makes the shared segment (one slot per
/// process) and every process maps it (a second round: all use it, or — when any could not map it — none does).
std::shared_ptr<Group> join(uint64_t token, int creator, int nranks, int rank, int device, double timeout);

/// A collective of a hierarchical group in the form the transports move: blocks of bytes between processes (`to[q]`
/// what this process sends participant q, `from[q]` where q's block lands; 0 bytes: none), then `finish`, which
/// reduces or places every global rank's contribution into the local ranks' buffers, **in rank order 0..n-1** (so the
/// result is the in-process one bit for bit). Block sizes follow from the call and the group alone, so every process
/// computes the same ones. Made once the headers agree (hierarchy.cpp).
struct Plan {
    std::vector<const char*> to;
    std::vector<size_t> to_bytes;
    std::vector<char*> from;
    std::vector<size_t> from_bytes;
    size_t max_block = 0;  ///< the largest block of any process to any other (the same on every process)
    std::function<void()> finish;
    std::vector<char> packed, staged;  // this process' packed contributions; the peers' blocks
};
std::unique_ptr<Plan> make_plan(const Group& g, const Op& op);

}  // namespace rt::comm::mpi
