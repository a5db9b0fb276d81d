// Communicators and collectives: the ranks of a communicator, rendezvous as stream steps, groups, timeouts, aborts.
//
// Layers. A Communicator is one rank's handle; the ranks of one communicator share a Clique, which pairs their
// operations (the n-th collective of every rank, the n-th send a→b with the n-th receive on b from a) into a
// Rendezvous: a backend::JointStep queued on each rank's stream. When every rank's stream has reached it, the last
// arriver moves the data (local.cpp: each piece reduces its slice of elements straight from every rank's buffer,
// in rank order) and resumes every rank's queue. A clique across processes (transport mpi of the unique id) has
// rendezvous of this process' ranks (one or several): once they have all arrived, the process' operation goes to the
// MPI transport (mpi_transport.hpp), which exchanges with the other processes and then resumes them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backends/backend.hpp"
#include "core/error.hpp"
#include "core/handle_table.hpp"
#include "runtime/comm.h"

namespace rt {
class Stream;
class CoreDevice;
}  // namespace rt

namespace rt::comm {

enum class Kind : uint8_t { all_reduce, broadcast, reduce, all_gather, reduce_scatter, all_to_all, send, recv, barrier };
/// The C function of a kind ("rtAllReduce").
const char* api_name(Kind kind);

/// The unique id's transports (its field `transport`): which mechanism the rendezvous of rtCommInitRank uses. `mpi`:
/// ranks in processes of one mpirun job, one or several per process (mpi_transport.hpp). An id of a collectives library
/// (NCCL's 128 bytes) has no field of ours: it is made when the current device has a library (rtCommGetUniqueId on a
/// cuda device) and read as the library's by rtCommInitRank on such a device.
enum class Transport : uint32_t { in_process = 1, mpi = 2 };

/// RUNTIME_COMM_TIMEOUT in seconds (default 30); throws INVALID_VALUE for a value that is not a positive number.
double timeout_from_env();

/// One rank's operands of a collective, checked by the caller (capi_comm.cpp) before anything is queued.
struct Call {
    Kind kind = Kind::barrier;
    const void* send = nullptr;
    void* recv = nullptr;
    size_t count = 0;  ///< all_gather: sendcount; reduce_scatter: recvcount; others: count
    rtDataType type = RT_INT8;
    rtReduceOp op = RT_REDUCE_SUM;
    int root = 0;  ///< broadcast, reduce: the root; send, recv: the peer
    bool operator==(const Call&) const = default;
};

class Clique;
class Rendezvous;
class Started;
namespace mpi {
class Job;
}

class Communicator : public std::enable_shared_from_this<Communicator> {
public:
    Communicator(std::shared_ptr<Clique> clique, int rank);
    ~Communicator();
    int rank() const { return rank_; }
    int size() const;
    CoreDevice& device() const;
    int device_index() const;
    Clique& clique() const { return *clique_; }
    const std::shared_ptr<Clique>& clique_ptr() const { return clique_; }
    /// "communicator 0x43... (rank 1 of 2, cpu:1)" once the handle is known (set_label).
    const std::string& label() const { return label_; }
    void set_label(std::string label) { label_ = std::move(label); }
    /// The rank's communicator of its device's collectives library (NCCL on cuda), or null: in-process collectives
    /// (the clique's rendezvous). Set at creation.
    backend::NativeComm* native() const { return native_.get(); }
    void set_native(std::unique_ptr<backend::NativeComm> native) { native_ = std::move(native); }

    /// The rendezvous of this rank's next call of `call`'s kind (numbered per communicator; sends and receives per
    /// peer and direction), with this rank's part registered as operation `stream_op` of `stream`. Not thread-safe
    /// per communicator (NCCL's rule: one thread at a time drives a rank).
    /// `graph_node` (optional): the label of the graph node being replayed ("node 3 (collective rtAllReduce ...)"),
    /// named in failures.
    std::shared_ptr<Rendezvous> join(const Call& call, Stream& stream, uint64_t stream_op, int* participant,
                                     const char* graph_node = nullptr);
    /// Starts collective `call` (this rank's, numbered next) on the calling thread when that is stream order: a
    /// communicator across processes with this rank alone in its process and a shared segment, a call on the one-round
    /// path, nothing of the communicator's in flight, and `stream` idle and healthy (held meanwhile: its operands are
    /// ready). The call then finishes here when the peers are there already, or leaves its stream a part that waits
    /// for it. False (nothing done) when any of that does not hold: the caller queues it as usual. Not while tracing.
    bool start_now(const Call& call, Stream& stream, uint64_t stream_op);
    /// rtCommSplit's part for this rank: the split's gathering (waited for by the caller, or by rtGroupEnd).
    struct SplitWait;
    std::shared_ptr<SplitWait> split(int color, int key);

private:
    std::shared_ptr<Clique> clique_;
    int rank_;
    std::string label_;
    std::unique_ptr<backend::NativeComm> native_;
    std::shared_ptr<Started> started_;  // start_now's latest: used again once nothing else holds it
    std::unique_ptr<mpi::Job> started_job_;  // start_now's finished job, made ready again for the next one
    uint64_t collectives_ = 0;              // collectives joined so far (the next one's number - 1)
    uint64_t splits_ = 0;
    std::vector<uint64_t> sent_, received_;  // per peer: sends / receives joined so far
};

/// The C handle of a live communicator, or INVALID_HANDLE naming it.
std::shared_ptr<Communicator> lookup(rtComm_t comm);
/// lookup() without a reference count (the collectives' path): `borrow` gives the object while the Borrow lives
/// (null when the handle is not live), `live` refuses it as lookup() does, or returns it.
using CommTable = HandleTable<Communicator, 0x43>;
CommTable::Borrow borrow(rtComm_t comm);
Communicator& live(rtComm_t comm, Communicator* borrowed);
/// Publishes a new communicator; returns its handle.
rtComm_t publish(std::shared_ptr<Communicator> comm);
/// Unpublishes (rtCommDestroy / rtCommAbort); returns it (null if not live).
std::shared_ptr<Communicator> unpublish(rtComm_t comm);

/// rtCommInitAll's communicators: a clique of `devices.size()` ranks, rank i on devices[i].
std::vector<std::shared_ptr<Communicator>> create_all(const std::vector<int>& devices);
void make_unique_id(rtCommUniqueId* id);
/// rtCommInitRank: blocks until `nranks` ranks joined `id` (or times out naming the missing ranks).
std::shared_ptr<Communicator> join_rank(const rtCommUniqueId& id, int nranks, int rank, int device);
/// Waits for a split (SplitWait) and returns this rank's new communicator (null for RT_COMM_SPLIT_NOCOLOR).
std::shared_ptr<Communicator> finish_split(const std::shared_ptr<Communicator::SplitWait>& wait);

/// Queues `call` (checked already) on `stream`; between rtGroupStart and rtGroupEnd it is kept until the outermost
/// rtGroupEnd (the communicator and the stream with it: `stream` is `handle`'s, or the device's default stream for
/// a null handle).
void submit(Communicator& comm, const Call& call, Stream& stream, rtStream_t handle);
/// A rank's collective captured into a graph (node type COLLECTIVE): its call, or the sends and receives of a group
/// fused into one step (in call order). Checked when captured; the communicator is kept alive by the graph.
struct Collective {
    std::shared_ptr<Communicator> comm;
    std::vector<Call> calls;
    bool operator==(const Collective&) const = default;
};
/// One replay of a COLLECTIVE command: joins the rank's next rendezvous (numbers advance per launch, as for a call)
/// and queues it on `stream` as part of operation `stream_op` (the graph launch); `graph_node` is named in failures.
void queue_collective(const Collective& c, Stream& stream, uint64_t stream_op, const std::string& graph_node);

/// rtCommSplit inside a group: rtGroupEnd waits for `wait` and writes the new handle to *out.
void keep_split(std::shared_ptr<Communicator::SplitWait> wait, rtComm_t* out);

/// Fails the clique for every rank now (rtCommAbort): open rendezvous fail, later ones fail when reached.
void abort(Communicator& comm);
/// The clique's failure (RT_SUCCESS: none), described in *message.
rtError_t async_error(Communicator& comm, std::string* message);

/// rtGroupStart / rtGroupEnd on this thread.
void group_start();
/// Queues what the group kept (fusing consecutive sends/receives of one communicator on one stream) and waits for
/// the splits it kept. Throws INVALID_VALUE when no group is open.
void group_end();
bool in_group();

}  // namespace rt::comm
