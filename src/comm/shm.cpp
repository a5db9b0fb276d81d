// The same-host shared-memory path of the MPI transport (see shm.hpp): the segment, and the collectives through it as
// pollable jobs of the progress thread.
//
// Protocol. Each rank owns a control block of monotonic counters (written by it alone, read by the others with
// acquire loads; stores are releases) and an input slot of kDepth chunk buffers; one output ring of kDepth buffers is
// shared. A collective numbered N first publishes the rank's header (operands and state) in header slot N % 2 and then
// `header = N`; every rank compares every header before any data is read, so calls that differ fail on every rank with
// the MPI path's words. Data moves in chunks numbered over the segment's life (all ranks agree on the numbers because
// their headers agree). For chunk g (buffer g % kDepth) a rank
//   1. posts: copies its contribution into its input buffer, then `posted = g + 1`          (needs middle[q] > g - D)
//   2. middle: reads the peers' input buffers — all-reduce/reduce: reduces its slice of the chunk, **in rank order
//      0..n-1**, into the output buffer (the in-process kernel, so the result is bitwise the in-process one); others
//      copy straight into the caller's buffer — then `middle = g + 1`   (needs posted[q] > g; ring: done[q] > g - D)
//   3. done: all-reduce (and the root of a reduce) copies the other slices of the output buffer into its result,
//      then `done = g + 1`                                                                   (needs middle[q] > g)
// so up to kDepth chunks are in flight (a rank posts chunk g+1 while its peers still reduce chunk g). Posting may start
// before the headers are checked (it only touches the rank's own slot); the other steps wait for them.
//
// Small operations (a rank contributes at most kSmall bytes, one rank per process) take one round instead: the rank
// copies its contribution (what peers read of it) and its header into its small slot N % kSmallSlots, then publishes
// the slot (the header's last word, `number = N`, a release store; up to 32 bytes of input share the header's cache
// line, so a peer's first look at the slot brings all of a small one); once every slot is there (and the headers
// match), every rank computes its result straight from the slots — a reduction over all ranks in rank order, the same
// kernel as the chunked path's, so the result is bitwise the same. A rank that only writes (a broadcast's root, a
// reduce's other ranks) finishes once its slot is published, without waiting for the peers' headers. A rank writes
// the slot of N (or, on the chunked path, header slot N % 2) only once every peer has published a header numbered at
// least N - kSmallSlots + 1 (chunked: N - 1): each peer publishes N' after it finished N' - 1, so it no longer reads
// what the slot held. Waiting for every header of N - 1 — what a rank that did not only write has done — implies it;
// a rank that ran ahead waits, and then checks the headers of the operations it finished unchecked
// (Segment::checked): calls that differ still fail on every rank, such a rank at a later operation. Operations of a
// communicator run one at a time on every rank.
//
// Large broadcasts, all-gathers and out-of-place all-to-alls take a single copy when every rank can read the others'
// memory (Linux cross-memory attach, process_vm_readv: what Open MPI's shared-memory transport does): each rank puts
// its buffers' addresses beside its header, reads what it needs straight from the peers' buffers into its own, then
// says `read = N` and finishes once every peer has said so (its own buffer is no longer read). Whether a rank can
// read the others is a flag of its header (bit 1), found by reading each peer's probe word (its pid and the word's
// address are published with the rank's first operation, so the second one can use the path); every rank sees
// every flag, so all of them take the same path. RUNTIME_COMM_CMA=0 on a rank keeps its flag clear.
//
// Waiting: a job never blocks. poll() does every step that is ready and returns; the progress machinery (the
// submitting executor for a bounded moment, then the progress thread, which yields and then sleeps briefly between
// rounds) polls again. Every poll checks the communicator's own failure, the failure record in the segment (a peer's
// abort or timeout; MPI notices also still arrive) and the RUNTIME_COMM_TIMEOUT deadline, which names the ranks whose
// counters the rank is waiting for.
#include "comm/shm.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <bitset>
#include <cerrno>
#include <cstddef>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "comm/mpi_transport.hpp"
#include "comm/reduce.hpp"
#include "core/error.hpp"
#include "observe/log.hpp"

namespace rt::comm::shm {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kMagic = 0x72742d73686d3035ull;  // "rt-shm05"
/// Chunk buffers per input slot and in the output ring: how many chunks may be in flight.
constexpr uint64_t kDepth = 4;
/// Bytes of one chunk buffer: large enough that the per-chunk handshakes cost little next to the copies, small enough
/// that the buffers in flight stay in the caches (ranks x kDepth x kChunk, plus the ring).
constexpr uint64_t kChunk = 128 * 1024;
/// The most ranks that get a segment (more: MPI messages). Keeps chunks of all-to-all/reduce-scatter (one sub-chunk per
/// rank) at least a cache line per rank.
constexpr int kMaxRanks = 256;
/// The most bytes a rank contributes to an operation that takes the one-round path (each rank has kSmallSlots of it).
/// Below it a round trip between processes costs more than every rank reducing the whole buffer.
constexpr uint64_t kSmall = 16 * 1024;
/// Small slots per rank: a rank that only writes (a broadcast's root) runs up to kSmallSlots - 1 operations ahead of
/// its peers.
constexpr uint64_t kSmallSlots = 4;
/// From this many bytes per rank's buffer (and past the one-round path), broadcast, all-gather and all-to-all read the
/// peers' buffers directly when every rank can: one copy instead of two.
constexpr uint64_t kDirect = 16 * 1024;
/// What a rank's probe word holds: a peer that reads it back can read this process' memory.
constexpr uint64_t kProbe = 0x72742d636d613031ull;  // "rt-cma01"
/// A small slot: the header, whose last word (`number`) publishes it and the input (a release store; 0: nothing yet),
/// then the input from byte kSmallData: up to 32 bytes of input share the header's cache line. Slots are
/// kSmallSlot bytes apart.
constexpr uint64_t kSmallData = sizeof(mpi::Header);
static_assert(offsetof(mpi::Header, number) + sizeof(uint64_t) == sizeof(mpi::Header) && kSmallData % 8 == 0);
/// Header flag bit 1: the rank can read every peer's memory.
constexpr uint8_t kFlagReadable = 2;
constexpr uint64_t kLine = 64;

struct Failure {
    std::atomic<uint32_t> state;  // 0: none; 1: being written; 2: written (rank, code, why valid)
    int32_t rank;
    int32_t code;
    char why[500];
};

struct alignas(kLine) Head {
    uint64_t magic, token;
    uint32_t nranks, depth;
    uint64_t chunk, bytes;
    alignas(kLine) Failure failure;
};

/// One rank's control block. Counters on their own line (written by their rank only; read by all); the headers on the
/// next one.
struct alignas(kLine) Control {
    std::atomic<uint64_t> header;  // the number of the last collective whose header is published
    std::atomic<uint64_t> posted;  // chunks whose input this rank has written
    std::atomic<uint64_t> middle;  // chunks whose middle step this rank has finished
    std::atomic<uint64_t> done;    // chunks this rank has finished (it no longer reads the output ring for them)
    std::atomic<uint64_t> read;    // single copy: the last collective whose peers' buffers this rank has read
    alignas(kLine) mpi::Header headers[2];
    // Single copy: the rank's buffers of collective N in slot N % 2 (published by the header), its pid and the
    // address of its probe word in its own address space (published with its first header).
    uint64_t send[2], recv[2];
    std::atomic<uint64_t> pid, probe_at;  // read by peers before they have seen this rank's first header
    uint64_t probe;                       // kProbe
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "counters in shared memory must be lock-free (address-free) atomics");

constexpr uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }
constexpr uint64_t kSmallSlot = round_up(kSmallData + kSmall, 2 * kLine);  // slots start a 128-byte line pair

/// Per-rank source pointers of a reduction, without a heap allocation for the usual rank counts.
class Sources {
public:
    explicit Sources(int n) : p_(n <= 16 ? inline_ : (heap_.resize(static_cast<size_t>(n)), heap_.data())) {}
    const void*& operator[](size_t q) { return p_[q]; }
    const void** data() { return p_; }

private:
    const void* inline_[16];
    std::vector<const void*> heap_;
    const void** p_;
};

/// Hints that the lines of [p, p + bytes) (the first 1 KiB) go to the shared cache: a peer's read of a line this core
/// just wrote is then served from there rather than snooped out of this core (CLDEMOTE; a no-op where unsupported).
/// Past 1 KiB it did not pay: demoting 4 KiB of an 8 KiB broadcast's slot made it 1.37-1.45 -> 1.67-1.78 µs (2
/// processes), all-reduces alike either way.
[[gnu::target("cldemote")]] void demote(const void* p, uint64_t bytes) {
#if defined(__x86_64__)
    const char* c = static_cast<const char*>(p);
    for (uint64_t off = 0; off < std::min<uint64_t>(bytes, 1024); off += kLine) __builtin_ia32_cldemote(c + off);
#else
    (void)p, (void)bytes;
#endif
}

/// A small slot's `number` word, read and written as an atomic.
std::atomic_ref<uint64_t> slot_number(mpi::Header& h) { return std::atomic_ref<uint64_t>(h.number); }

struct Layout {
    uint64_t control, small, data, bytes;
    explicit Layout(int n) {
        control = round_up(sizeof(Head), kLine);
        small = round_up(control + static_cast<uint64_t>(n) * sizeof(Control), 4096);
        data = small + static_cast<uint64_t>(n) * kSmallSlots * kSmallSlot;
        bytes = data + (static_cast<uint64_t>(n) + 1) * kDepth * kChunk;
    }
};

}  // namespace

bool enabled_from_env() {
    const char* v = std::getenv("RUNTIME_COMM_SHM");
    if (!v || !*v || std::strcmp(v, "1") == 0) return true;
    if (std::strcmp(v, "0") == 0) return false;
    fail(RT_ERROR_INVALID_VALUE, "RUNTIME_COMM_SHM=\"%.40s\": expected 0 (collectives across processes as MPI messages "
         "only) or 1 (a shared segment when every rank is on one host; the default)", v);
}

std::unique_ptr<Segment> Segment::create(uint64_t token, int nranks, std::string* why) {
    if (nranks < 2 || nranks > kMaxRanks) {
        *why = format("%d ranks: a shared segment serves 2 .. %d", nranks, kMaxRanks);
        return nullptr;
    }
    const Layout l(nranks);
    char name[64];
    std::snprintf(name, sizeof name, "rt-comm-%016llx", static_cast<unsigned long long>(token));
    const int fd = ::memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
        *why = format("memfd_create: %s", std::strerror(errno));
        return nullptr;
    }
    if (::ftruncate(fd, static_cast<off_t>(l.bytes)) != 0) {
        *why = format("ftruncate(%llu): %s", static_cast<unsigned long long>(l.bytes), std::strerror(errno));
        ::close(fd);
        return nullptr;
    }
    void* p = ::mmap(nullptr, l.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        *why = format("mmap(%llu): %s", static_cast<unsigned long long>(l.bytes), std::strerror(errno));
        ::close(fd);
        return nullptr;
    }
    // The file is zeroed: every counter starts at 0, the failure record empty. Construct the atomics in place.
    char* base = static_cast<char*>(p);
    Head* h = new (base) Head{};
    for (int r = 0; r < nranks; ++r) new (base + l.control + static_cast<uint64_t>(r) * sizeof(Control)) Control{};
    h->token = token;
    h->nranks = static_cast<uint32_t>(nranks);
    h->depth = kDepth;
    h->chunk = kChunk;
    h->bytes = l.bytes;
    std::atomic_thread_fence(std::memory_order_release);
    h->magic = kMagic;  // the others read it after the creator's MPI reply (which orders it)
    return std::unique_ptr<Segment>(new Segment(base, l.bytes, fd));
}

std::unique_ptr<Segment> Segment::open(int pid, int fd, uint64_t bytes, uint64_t token, int nranks, std::string* why) {
    if (nranks < 2 || nranks > kMaxRanks || bytes != Layout(nranks).bytes || pid <= 0 || fd < 0) {
        *why = "the offer does not describe a segment of this communicator";
        return nullptr;
    }
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    const int f = ::open(path, O_RDWR | O_CLOEXEC);
    if (f < 0) {
        *why = format("open(%s): %s", path, std::strerror(errno));
        return nullptr;
    }
    struct stat st{};
    if (::fstat(f, &st) != 0 || static_cast<uint64_t>(st.st_size) != bytes) {
        *why = format("%s is not the segment (%lld bytes, expected %llu)", path, static_cast<long long>(st.st_size),
                      static_cast<unsigned long long>(bytes));
        ::close(f);
        return nullptr;
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    ::close(f);  // the mapping keeps the memory
    if (p == MAP_FAILED) {
        *why = format("mmap(%s): %s", path, std::strerror(errno));
        return nullptr;
    }
    const Head* h = static_cast<const Head*>(p);
    if (h->magic != kMagic || h->token != token || h->nranks != static_cast<uint32_t>(nranks) || h->depth != kDepth ||
        h->chunk != kChunk || h->bytes != bytes) {
        *why = format("%s is not this communicator's segment", path);
        ::munmap(p, bytes);
        return nullptr;
    }
    return std::unique_ptr<Segment>(new Segment(static_cast<char*>(p), bytes, -1));
}

Segment::~Segment() {
    close_fd();
    ::munmap(base_, bytes_);
}

void Segment::close_fd() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

void Segment::set_failure(int rank, rtError_t code, const std::string& why) {
    Failure& f = reinterpret_cast<Head*>(base_)->failure;
    uint32_t expected = 0;
    if (!f.state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;  // the first is kept
    f.rank = rank;
    f.code = static_cast<int32_t>(code);
    const size_t n = std::min(why.size(), sizeof f.why - 1);
    std::memcpy(f.why, why.data(), n);
    f.why[n] = '\0';
    f.state.store(2, std::memory_order_release);
}

bool Segment::failure(int* rank, rtError_t* code, std::string* why) const {
    const Failure& f = reinterpret_cast<const Head*>(base_)->failure;
    if (f.state.load(std::memory_order_acquire) != 2) return false;
    *rank = f.rank;
    *code = static_cast<rtError_t>(f.code);
    *why = std::string(f.why, strnlen(f.why, sizeof f.why));
    return true;
}

// ---------------------------------------------------------------- a collective through the segment

namespace {
/// The bytes a rank's input carries (reduce-scatter and all-to-all: every rank's block).
uint64_t contribution_bytes(const Call& c, int n) {
    const uint64_t b = static_cast<uint64_t>(c.count) * element_size(c.type);
    return c.kind == Kind::reduce_scatter || c.kind == Kind::all_to_all ? b * static_cast<uint64_t>(n) : b;
}
}  // namespace

bool one_round(const mpi::Group& g, const Call& call) {
    // An all-gather of 16 KiB per rank is read straight from the peers' buffers (the single copy, where the system
    // allows it) rather than copied in and out of the slots: 3.8 -> 3.0 µs at 2 processes (broadcasts were not faster).
    const uint64_t limit = call.kind == Kind::all_gather ? kSmall - 1 : kSmall;
    return g.segment() && !g.hierarchical() && call.kind != Kind::barrier && call.kind != Kind::send &&
           call.kind != Kind::recv && contribution_bytes(call, g.size()) <= limit;
}

namespace {

class Job final : public mpi::Job {
public:
    Job(std::shared_ptr<mpi::Group> g, mpi::Op op) : seg_(*g->segment()), n_(g->size()), me_(g->rank()) {
        const Layout l(n_);
        control_ = seg_.base() + l.control;
        small_area_ = seg_.base() + l.small;
        data_ = seg_.base() + l.data;
        g_ = std::move(g);
        reset(std::move(op));
    }
    /// Readies this job (new, or finished) for `op`, an operation of its group.
    void reset(mpi::Op op) {
        op_ = std::move(op);
        es_ = element_size(op_.call.type);
        small_ = direct_ = read_ = false;
        per_chunk_ = 1;
        chunks_ = base_ = sub_ = 0;
        plan_.reset();
        posted_ = middled_ = done_ = 0;
        started_ = checked_ = finished_ = false;
        events_ = idle_polls_ = 0;
        deadline_ = {};
        waiting_.reset();
        const Kind k = op_.call.kind;
        if (one_round(*g_, op_.call)) {  // no chunks
            small_ = true;
            return;
        }
        if (g_->hierarchical()) {
            // The plan's blocks, chunk by chunk: sub-chunk q of a process' input buffer carries its block for q.
            // chunks_: known once the plan is made (after the headers).
            sub_ = kChunk / static_cast<uint64_t>(n_) / kLine * kLine;
            return;
        }
        per_chunk_ = k == Kind::barrier ? 1
                     : k == Kind::reduce_scatter || k == Kind::all_to_all
                         ? std::max<size_t>(1, kChunk / (static_cast<size_t>(n_) * es_))
                         : kChunk / es_;
        chunks_ = k == Kind::barrier ? 0 : (op_.call.count + per_chunk_ - 1) / per_chunk_;
    }
    bool poll() override;
    uint64_t events() const override { return events_; }

private:
    Control& ctl(int r) const { return *reinterpret_cast<Control*>(control_ + static_cast<size_t>(r) * sizeof(Control)); }
    char* input(int r, uint64_t g) const {
        return data_ + (static_cast<uint64_t>(r) * kDepth + g % kDepth) * kChunk;
    }
    char* output(uint64_t g) const { return data_ + (static_cast<uint64_t>(n_) * kDepth + g % kDepth) * kChunk; }
    /// Rank r's small slot for this operation, and the input in it.
    mpi::Header& small_head(int r) const { return small_head(r, op_.number); }
    mpi::Header& small_head(int r, uint64_t number) const {
        const uint64_t slot = static_cast<uint64_t>(r) * kSmallSlots + number % kSmallSlots;
        return *reinterpret_cast<mpi::Header*>(small_area_ + slot * kSmallSlot);
    }
    char* small_slot(int r) const { return reinterpret_cast<char*>(&small_head(r)) + kSmallData; }
    uint64_t contribution_bytes() const { return shm::contribution_bytes(op_.call, n_); }
    /// Elements [*begin, *begin + len) of the operation in local chunk k.
    size_t range(uint64_t k, size_t* len) const {
        const size_t b = static_cast<size_t>(k) * per_chunk_;
        *len = std::min(per_chunk_, op_.call.count - b);
        return b;
    }
    /// Rank q's slice of a chunk of `len` elements, in whole cache lines where the type allows.
    size_t slice(int q, size_t len, size_t* slen) const {
        const size_t unit = std::max<size_t>(1, kLine / es_), units = (len + unit - 1) / unit;
        const size_t b = std::min(len, unit * (units * static_cast<size_t>(q) / static_cast<size_t>(n_)));
        const size_t e = std::min(len, unit * (units * static_cast<size_t>(q + 1) / static_cast<size_t>(n_)));
        *slen = e - b;
        return b;
    }
    bool reduces() const { return !plan_ && (op_.call.kind == Kind::all_reduce || op_.call.kind == Kind::reduce); }
    /// Whether this operation may take the single-copy path (if every rank can read the others).
    bool direct_kind() const {
        const Call& c = op_.call;
        if (small_ || g_->hierarchical() || c.count * es_ < kDirect) return false;
        // With more ranks than cores, a broadcast's root and an all-gather's ranks would wait for their readers one by
        // one, each needing a core: the segment's chunks, which let a writer run kDepth chunks ahead, do better there
        // (4 processes on 2 cores: broadcast 32 KiB 0.45-0.49 -> 0.67-0.87x MPI, 128 KiB-8 MiB mostly 0.7-1.0 ->
        // 0.9-1.7x; all-gather 128 KiB 0.75-1.17 -> 1.41-1.53x). An all-to-all, where every rank reads as much as it
        // is read, keeps the single copy (it did better with it).
        if (g_->oversubscribed() && c.kind != Kind::all_to_all) return false;
        // An in-place all-to-all overwrites blocks the peers still read: it goes through the segment.
        return c.kind == Kind::broadcast || c.kind == Kind::all_gather || (c.kind == Kind::all_to_all && c.send != c.recv);
    }
    /// Whether this process can read every peer's memory (probed once, when every peer's probe word is published).
    bool readable();
    /// The single copy: reads what this rank needs from the peers' buffers; false (the job finished) on a failure.
    bool read_direct();
    /// Whether this rank writes an input buffer for each chunk (broadcast: the root alone).
    bool contributes() const { return plan_ || op_.call.kind != Kind::broadcast || me_ == op_.call.root; }
    /// Whether this rank reads the output ring in step 3.
    bool gathers() const {
        return !plan_ && (op_.call.kind == Kind::all_reduce || (op_.call.kind == Kind::reduce && me_ == op_.call.root));
    }
    /// True when every rank's `counter` > `above` (as a signed comparison: `above` may be negative); else adds the
    /// ranks behind to waiting_.
    bool all_past(std::atomic<uint64_t> Control::*counter, int64_t above) {
        if (above < 0) return true;
        bool ok = true;
        for (int q = 0; q < n_; ++q)
            if ((ctl(q).*counter).load(std::memory_order_acquire) <= static_cast<uint64_t>(above)) {
                if (q != me_) waiting_.set(static_cast<size_t>(q));  // this rank's own lag is always behind a peer's
                ok = false;
            }
        return ok;
    }
    bool check_headers();
    /// Rank q's published header of collective `number`, which took the one-round path here if `small` (a one-round
    /// rank's is in its small slot, a chunked rank's in its control block).
    mpi::Header header(int q, uint64_t number, bool small) const;
    /// Why rank q's header `h` of an operation differs from this rank's `mine` (empty: they match).
    static std::string mismatch(int q, const mpi::Header& mine, const mpi::Header& h) {
        return h.magic != mpi::kHeaderMagic ? format("rank %d's header in the shared segment is not the runtime's", q)
                                            : mpi::header_mismatch(mine, h);
    }
    /// Whether this rank only writes in this one-round operation (a broadcast's root, a reduce's other ranks): it
    /// finishes once its slot is published; a later collective checks the peers' headers (Segment::checked).
    bool writes_only() const {
        const Call& c = op_.call;
        return small_ && ((c.kind == Kind::broadcast && me_ == c.root) || (c.kind == Kind::reduce && me_ != c.root));
    }
    /// Before this rank writes anything for its operation: waits until every peer has published a header that frees
    /// the slots it will write, and checks the headers of the collectives it finished unchecked up to there. False
    /// while a peer's is missing (waiting_ names it) or once this job finished (a mismatch).
    bool may_write();
    /// Checks the peers' headers of the collectives this rank finished unchecked, up to `upto` (every peer published
    /// them); false once this job finished (a mismatch).
    bool check_through(uint64_t upto);
    /// A poll that moved nothing: false, or true once the deadline has passed (the job then finished timed out).
    bool idle();
    /// The blocks this rank receives in a broadcast, all-gather or all-to-all: each peer's (the operation's B bytes at
    /// byte offset `at` of rank q's input) through fetch(q, at, to), this rank's own copied from `send` unless it is in
    /// place already. False as soon as a fetch fails.
    template <class Fetch>
    bool gather_blocks(Fetch&& fetch);
    void post_small();
    /// Whether this rank reads peer q's small slot in this operation.
    bool reads_slot(int q) const {
        const Call& c = op_.call;
        return q != me_ && (c.kind != Kind::reduce || me_ == c.root) && (c.kind != Kind::broadcast || q == c.root);
    }
    /// While waiting for peer q's slot: when the input it will read lies in the two lines past the header's (up to
    /// 128 bytes), asks for them now. The peer writes them before its header, so they are usually final by the
    /// time its header is seen missing; their misses then overlap the header's (128 B all-reduce: ~3% faster).
    /// Larger inputs are left alone: asking again and again for lines the peer is writing slows it down.
    void prefetch_early(int q) const {
        const Call& c = op_.call;
        const uint64_t end = kSmallData + contribution_bytes();
        if (end <= kLine || end > 3 * kLine || c.kind == Kind::reduce_scatter || c.kind == Kind::all_to_all ||
            !reads_slot(q))
            return;
        const char* slot = reinterpret_cast<const char*>(&small_head(q));
        for (uint64_t off = kLine; off < end; off += kLine) __builtin_prefetch(slot + off);
    }
    void finish_small();
    void post(uint64_t k);
    void middle(uint64_t k);
    void gather(uint64_t k);
    void finish(rtError_t code, const std::string& why, bool fatal);

    std::shared_ptr<mpi::Group> g_;
    Segment& seg_;
    mpi::Op op_;
    const int n_, me_;
    size_t es_ = 1;
    char* control_ = nullptr;
    char* small_area_ = nullptr;
    char* data_ = nullptr;
    bool small_ = false;  // the one-round path
    bool direct_ = false;  // the single-copy path (decided when every header is there)
    bool read_ = false;    // single copy: this rank has read what it needs
    size_t per_chunk_ = 1;
    uint64_t chunks_ = 0, base_ = 0;
    uint64_t sub_ = 0;                    // hierarchical: bytes per process in a chunk
    std::unique_ptr<mpi::Plan> plan_;     // hierarchical: made when the headers agree
    uint64_t posted_ = 0, middled_ = 0, done_ = 0;  // local chunks through each step
    bool started_ = false, checked_ = false, finished_ = false;
    uint64_t events_ = 0;
    uint64_t idle_polls_ = 0;  // polls that found nothing to do (the deadline is read every 16th)
    Clock::time_point deadline_{};  // set at the first look at the clock
    std::bitset<kMaxRanks> waiting_;  // the ranks the last attempt waited for (no allocation per operation)
};

void Job::finish(rtError_t code, const std::string& why, bool fatal) {
    if (finished_) return;
    finished_ = true;
    // A fatal failure fails the group before this operation counts as finished: a collective started at its call
    // checks both, and must not write its slot while a stalled peer may still read it (done's own failure of the
    // communicator, with the same words, then finds it failed).
    if (fatal && code != RT_SUCCESS)
        g_->fail(code, format("collective #%llu: %s", static_cast<unsigned long long>(op_.number), why.c_str()));
    g_->set_finished_collective(op_.number);  // before done: what done resumes may start the next one at its call
    auto done = std::move(op_.done);
    done(code, why, fatal);
}

bool cma_enabled_from_env() {
    const char* v = std::getenv("RUNTIME_COMM_CMA");
    return !(v && std::strcmp(v, "0") == 0);
}

bool Job::readable() {
    if (seg_.readable) return seg_.readable > 0;
    static const bool enabled = cma_enabled_from_env();
    if (!enabled) {
        seg_.readable = -1;
        RT_LOG(comm, info, "communicator %016llx: large broadcasts, all-gathers and all-to-alls copy through the shared "
               "segment (RUNTIME_COMM_CMA=0)", static_cast<unsigned long long>(g_->token()));
        return false;
    }
    for (int q = 0; q < n_; ++q) {
        if (q == me_) continue;
        const Control& c = ctl(q);
        if (!c.pid.load(std::memory_order_acquire)) return false;  // not published yet: ask again at the next operation
    }
    seg_.readable = 1;
    for (int q = 0; q < n_ && seg_.readable > 0; ++q) {
        if (q == me_) continue;
        const Control& c = ctl(q);
        uint64_t word = 0;
        iovec local{&word, sizeof word}, remote{reinterpret_cast<void*>(c.probe_at.load(std::memory_order_relaxed)), sizeof word};
        const ssize_t got =
            ::process_vm_readv(static_cast<pid_t>(c.pid.load(std::memory_order_relaxed)), &local, 1, &remote, 1, 0);
        if (got != static_cast<ssize_t>(sizeof word) || word != kProbe) {
            // Not permitted here (Yama's ptrace scope, a seccomp profile, another user): the segment it is.
            seg_.readable = -1;
            RT_LOG(comm, info, "communicator %016llx: large broadcasts, all-gathers and all-to-alls copy through the "
                   "shared segment: reading rank %d's memory (process %llu) failed (%s)",
                   static_cast<unsigned long long>(g_->token()), q,
                   static_cast<unsigned long long>(c.pid.load(std::memory_order_relaxed)),
                   got < 0 ? std::strerror(errno) : "the probe word differs");
        }
    }
    if (seg_.readable > 0)
        RT_LOG(comm, info, "communicator %016llx: large broadcasts, all-gathers and all-to-alls read the peers' buffers "
               "directly (process_vm_readv)", static_cast<unsigned long long>(g_->token()));
    return seg_.readable > 0;
}

bool Job::read_direct() {
    const size_t B = op_.call.count * es_;
    // Reads `bytes` at `at` in rank q's address space into `to` (process_vm_readv moves at most what one call allows:
    // loop until done).
    auto read = [&](int q, char* to, uint64_t at, size_t bytes) -> bool {
        const pid_t pid = static_cast<pid_t>(ctl(q).pid.load(std::memory_order_relaxed));
        while (bytes) {
            iovec local{to, bytes}, remote{reinterpret_cast<void*>(at), bytes};
            const ssize_t got = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
            if (got <= 0) {
                finish(RT_ERROR_LAUNCH_FAILED,
                       format("reading rank %d's buffer (process %d) with process_vm_readv failed: %s", q,
                              static_cast<int>(pid), std::strerror(errno)),
                       true);
                return false;
            }
            to += got;
            at += static_cast<uint64_t>(got);
            bytes -= static_cast<size_t>(got);
        }
        return true;
    };
    const int slot = static_cast<int>(op_.number % 2);
    return gather_blocks([&](int q, size_t at, char* to) { return read(q, to, ctl(q).send[slot] + at, B); });
}

template <class Fetch>
bool Job::gather_blocks(Fetch&& fetch) {
    const Call& c = op_.call;
    const size_t B = c.count * es_;
    const char* send = static_cast<const char*>(c.send);
    char* recv = static_cast<char*>(c.recv);
    auto take = [&](int q, size_t at, char* to) {
        if (q != me_) return fetch(q, at, to);
        if (to != send + at) std::memcpy(to, send + at, B);
        return true;
    };
    switch (c.kind) {
        case Kind::broadcast:
            return take(c.root, 0, recv);
        case Kind::all_gather:
            for (int q = 0; q < n_; ++q)
                if (!take(q, 0, recv + static_cast<size_t>(q) * B)) return false;
            return true;
        case Kind::all_to_all:  // in place too (the one-round path): the peers' blocks come from elsewhere
            for (int q = 0; q < n_; ++q)
                if (!take(q, static_cast<size_t>(me_) * B, recv + static_cast<size_t>(q) * B)) return false;
            return true;
        default:
            return true;
    }
}

mpi::Header Job::header(int q, uint64_t number, bool small) const {
    // Where this path publishes headers first; a peer whose call differs may have taken the other path (a count on
    // the other side of the one-round limit, a barrier): its header is then in the other place (a one-round rank
    // also advances the control block's `header`, which a chunked rank waits for).
    mpi::Header h;
    std::memcpy(&h, small ? &small_head(q, number) : &ctl(q).headers[number % 2], sizeof h);
    if (h.number != number) std::memcpy(&h, small ? &ctl(q).headers[number % 2] : &small_head(q, number), sizeof h);
    return h;
}

bool Job::may_write() {
    const uint64_t number = op_.number, back = small_ ? kSmallSlots - 1 : 1;
    if (number <= back || seg_.checked >= number - back) return true;  // the usual case: nothing ran ahead
    const uint64_t need = number - back;
    bool all = true;
    for (int q = 0; q < n_; ++q)
        if (q != me_ && ctl(q).header.load(std::memory_order_acquire) < need) {
            waiting_.set(static_cast<size_t>(q));
            all = false;
        }
    return all && check_through(need);
}

bool Job::check_through(uint64_t upto) {
    // Each of them took the one-round path here and only wrote: this rank's header of it is still in its slot (its
    // next write is kSmallSlots operations later), as the peers' are (they write theirs again only after this rank's
    // header of that later operation).
    for (uint64_t number = seg_.checked + 1; number <= upto; ++number) {
        const mpi::Header mine = small_head(me_, number);
        for (int q = 0; q < n_; ++q) {
            if (q == me_) continue;
            if (const std::string why = mismatch(q, mine, header(q, number, true)); !why.empty()) {
                finish(RT_ERROR_INVALID_VALUE,
                       format("the calls of collective #%llu (which returned on this rank before its peers had called "
                              "it) differ: %s", static_cast<unsigned long long>(number), why.c_str()), true);
                return false;
            }
        }
    }
    seg_.checked = std::max(seg_.checked, upto);
    return true;
}

bool Job::check_headers() {
    const uint64_t number = op_.number;
    if (!check_through(number - 1)) return false;  // what this rank ran ahead of (every peer is at `number` now)
    std::vector<int> failed;  // global ranks
    if (op_.failed_before) failed.push_back(op_.rank);
    const mpi::Header own = mpi::header_of(op_);
    for (int q = 0; q < n_; ++q) {
        if (q == me_) continue;
        const mpi::Header h = header(q, number, small_);
        if (const std::string why = mismatch(q, own, h); !why.empty()) {
            finish(RT_ERROR_INVALID_VALUE, why, true);
            return false;
        }
        if (h.flags & 1) failed.push_back(h.rank);
        if (!(h.flags & kFlagReadable)) direct_ = false;
    }
    seg_.checked = number;
    if (failed.empty()) {
        if (g_->hierarchical() && op_.call.kind != Kind::barrier) {
            plan_ = mpi::make_plan(*g_, op_);
            chunks_ = (plan_->max_block + sub_ - 1) / sub_;
        }
        return true;
    }
    // A rank's stream had failed: nothing moves, and every rank (all see the same headers) skips the operation's chunks
    // alike — its counters jump past them, so the next operation's chunk numbers agree.
    seg_.chunks = base_ + chunks_;
    Control& mine = ctl(me_);
    mine.posted.store(seg_.chunks, std::memory_order_release);
    mine.middle.store(seg_.chunks, std::memory_order_release);
    mine.done.store(seg_.chunks, std::memory_order_release);
    std::sort(failed.begin(), failed.end());
    std::vector<int> others;
    for (int r : failed)
        if (r != op_.rank) others.push_back(r);
    if (others.empty()) finish(RT_SUCCESS, {}, false);
    else
        finish(RT_ERROR_LAUNCH_FAILED,
               format("the stream of rank%s %s held an unreported failure when it reached this operation; nothing was "
                      "moved", others.size() > 1 ? "s" : "", mpi::rank_list(others).c_str()), false);
    return false;
}

void Job::post_small() {
    const Call& c = op_.call;
    if (!contributes() || op_.failed_before || c.count == 0) return;
    if (c.kind != Kind::reduce_scatter && c.kind != Kind::all_to_all) {
        std::memcpy(small_slot(me_), c.send, contribution_bytes());
        return;
    }
    // Every block but this rank's own, which only this rank reads (straight from `send`).
    const size_t B = c.count * es_, mine = static_cast<size_t>(me_) * B;
    const char* send = static_cast<const char*>(c.send);
    std::memcpy(small_slot(me_), send, mine);
    std::memcpy(small_slot(me_) + mine + B, send + mine + B, (static_cast<size_t>(n_) - 1) * B - mine);
}

void Job::finish_small() {
    const Call& c = op_.call;
    const size_t B = c.count * es_;
    const char* send = static_cast<const char*>(c.send);
    char* recv = static_cast<char*>(c.recv);
    if (c.count == 0) return finish(RT_SUCCESS, {}, false);
    // What this rank reads of each peer's slot lies in lines the peer's core just wrote: ask for all of them before
    // reading any, so that their misses overlap (the first few KiB; the hardware prefetcher streams the rest).
    const bool blocks = c.kind == Kind::reduce_scatter || c.kind == Kind::all_to_all;
    const size_t at = blocks ? static_cast<size_t>(me_) * B : 0, ahead = std::min<size_t>(B, 4096);
    for (int q = 0; q < n_; ++q)
        if (reads_slot(q))
            for (size_t off = 0; off < ahead; off += kLine) __builtin_prefetch(small_slot(q) + at + off);
    Sources src(n_);
    // Rank q's input at byte offset `at` (this rank's own straight from `send`).
    auto from = [&](int q, size_t at) -> const void* { return (q == me_ ? send : small_slot(q)) + at; };
    switch (c.kind) {
        case Kind::all_reduce:
        case Kind::reduce:
            if (c.kind == Kind::reduce && me_ != c.root) break;
            for (int q = 0; q < n_; ++q) src[static_cast<size_t>(q)] = from(q, 0);
            reduce_range(c.type, c.op, src.data(), n_, reinterpret_cast<void* const*>(&recv), 1, 0, c.count, n_);
            break;
        case Kind::reduce_scatter:
            for (int q = 0; q < n_; ++q) src[static_cast<size_t>(q)] = from(q, static_cast<size_t>(me_) * B);
            reduce_range(c.type, c.op, src.data(), n_, reinterpret_cast<void* const*>(&recv), 1, 0, c.count, n_);
            break;
        default:  // broadcast, all-gather, all-to-all: straight from the peers' slots
            gather_blocks([&](int q, size_t at, char* to) {
                std::memcpy(to, small_slot(q) + at, B);
                return true;
            });
            break;
    }
    finish(RT_SUCCESS, {}, false);
}

void Job::post(uint64_t k) {
    const Call& c = op_.call;
    if (plan_) {
        const uint64_t g = base_ + k;
        for (int q = 0; q < n_; ++q) {
            const size_t bytes = plan_->to_bytes[static_cast<size_t>(q)];
            if (q == me_ || bytes <= k * sub_) continue;
            std::memcpy(input(me_, g) + static_cast<uint64_t>(q) * sub_, plan_->to[static_cast<size_t>(q)] + k * sub_,
                        std::min<uint64_t>(sub_, bytes - k * sub_));
        }
        return;
    }
    size_t len = 0;
    const size_t b = range(k, &len);
    char* in = input(me_, base_ + k);
    const char* send = static_cast<const char*>(c.send);
    switch (c.kind) {
        case Kind::all_reduce:
        case Kind::reduce: {  // every slice but this rank's own, which only this rank reads (straight from `send`)
            size_t slen = 0;
            const size_t s = slice(me_, len, &slen);
            std::memcpy(in, send + b * es_, s * es_);
            std::memcpy(in + (s + slen) * es_, send + (b + s + slen) * es_, (len - s - slen) * es_);
            break;
        }
        case Kind::all_gather:
            std::memcpy(in, send + b * es_, len * es_);
            break;
        case Kind::broadcast:
            if (me_ == c.root) std::memcpy(in, send + b * es_, len * es_);
            break;
        case Kind::reduce_scatter:
        case Kind::all_to_all: {  // sub-chunk q: what rank q takes (this rank's own block is read from `send` itself)
            const size_t B = c.count * es_;
            for (int q = 0; q < n_; ++q)
                if (q != me_)
                    std::memcpy(in + static_cast<size_t>(q) * per_chunk_ * es_, send + static_cast<size_t>(q) * B + b * es_,
                                len * es_);
            break;
        }
        default: break;
    }
}

void Job::middle(uint64_t k) {
    const Call& c = op_.call;
    if (plan_) {
        const uint64_t g = base_ + k;
        for (int q = 0; q < n_; ++q) {
            const size_t bytes = plan_->from_bytes[static_cast<size_t>(q)];
            if (q == me_ || bytes <= k * sub_) continue;
            std::memcpy(plan_->from[static_cast<size_t>(q)] + k * sub_, input(q, g) + static_cast<uint64_t>(me_) * sub_,
                        std::min<uint64_t>(sub_, bytes - k * sub_));
        }
        return;
    }
    size_t len = 0;
    const size_t b = range(k, &len);
    const uint64_t g = base_ + k;
    const char* send = static_cast<const char*>(c.send);
    char* recv = static_cast<char*>(c.recv);
    Sources src(n_);
    switch (c.kind) {
        case Kind::all_reduce:
        case Kind::reduce: {
            // This rank's slice of the chunk, from every rank's contribution in rank order (its own straight from
            // `send`): into the output ring for the others, and into its own result where it has one.
            size_t slen = 0;
            const size_t s = slice(me_, len, &slen);
            if (!slen) break;
            for (int q = 0; q < n_; ++q)
                src[static_cast<size_t>(q)] = q == me_ ? static_cast<const void*>(send + b * es_) : input(q, g);
            // All-reduce: both; reduce: the root its result only (nobody reads its slice from the ring), the others
            // the ring only (their `recv` is not used).
            void* dst[2];
            int ndst = 0;
            if (c.kind == Kind::all_reduce || me_ != c.root) dst[ndst++] = output(g);
            if (c.kind == Kind::all_reduce || me_ == c.root) dst[ndst++] = recv + b * es_;
            reduce_range(c.type, c.op, src.data(), n_, dst, ndst, s, s + slen, n_);
            break;
        }
        case Kind::broadcast:
            if (me_ != c.root) std::memcpy(recv + b * es_, input(c.root, g), len * es_);
            else if (recv != send) std::memcpy(recv + b * es_, send + b * es_, len * es_);
            break;
        case Kind::all_gather: {
            const size_t B = c.count * es_;
            for (int q = 0; q < n_; ++q) {
                char* to = recv + static_cast<size_t>(q) * B + b * es_;
                const char* from = q == me_ ? send + b * es_ : input(q, g);
                if (to != from) std::memcpy(to, from, len * es_);
            }
            break;
        }
        case Kind::reduce_scatter: {
            const size_t B = c.count * es_;
            for (int q = 0; q < n_; ++q)
                src[static_cast<size_t>(q)] = q == me_ ? static_cast<const void*>(send + static_cast<size_t>(me_) * B + b * es_)
                                                       : input(q, g) + static_cast<size_t>(me_) * per_chunk_ * es_;
            void* dst = recv + b * es_;
            reduce_range(c.type, c.op, src.data(), n_, &dst, 1, 0, len, n_);
            break;
        }
        case Kind::all_to_all: {
            const size_t B = c.count * es_;
            for (int q = 0; q < n_; ++q) {
                char* to = recv + static_cast<size_t>(q) * B + b * es_;
                const char* from = q == me_ ? send + static_cast<size_t>(me_) * B + b * es_
                                            : input(q, g) + static_cast<size_t>(me_) * per_chunk_ * es_;
                if (to != from) std::memcpy(to, from, len * es_);
            }
            break;
        }
        default: break;
    }
}

void Job::gather(uint64_t k) {
    // The other ranks' slices of the reduced chunk (this rank's own went straight to `recv` in step 2).
    size_t len = 0;
    const size_t b = range(k, &len);
    const char* out = output(base_ + k);
    char* recv = static_cast<char*>(op_.call.recv) + b * es_;
    size_t slen = 0;
    const size_t s = slice(me_, len, &slen);
    if (s) std::memcpy(recv, out, s * es_);
    if (s + slen < len) std::memcpy(recv + (s + slen) * es_, out + (s + slen) * es_, (len - s - slen) * es_);
}

bool Job::poll() {
    if (finished_) return true;
    Control& mine = ctl(me_);
    // Failures first: a failed communicator publishes nothing more (a stalled peer may still read this rank's slots).
    std::string why;
    if (rtError_t code = g_->failure(&why); code != RT_SUCCESS) {
        finish(code, "the communicator failed: " + why, true);
        return true;
    }
    if (g_->take_recorded_failure()) {  // a peer failed
        const rtError_t code = g_->failure(&why);
        finish(code, "the communicator failed: " + why, true);
        return true;
    }
    if (!started_) {
        waiting_.reset();
        if (!may_write()) return finished_ || idle();
        started_ = true;
        if (small_) post_small();  // published by the header's release
        if (!seg_.published) {  // what the peers need to probe this process (the header's release publishes it)
            mine.probe = kProbe;
            mine.probe_at.store(reinterpret_cast<uint64_t>(&mine.probe), std::memory_order_relaxed);
            mine.pid.store(static_cast<uint64_t>(::getpid()), std::memory_order_release);  // after the two above
            seg_.published = true;
        }
        mpi::Header h = mpi::header_of(op_);
        if (direct_kind() && readable()) {
            direct_ = true;  // cleared by check_headers unless every rank can read the others
            h.flags |= kFlagReadable;
            mine.send[op_.number % 2] = reinterpret_cast<uint64_t>(op_.call.send);
            mine.recv[op_.number % 2] = reinterpret_cast<uint64_t>(op_.call.recv);
        }
        if (small_) {
            mpi::Header& slot = small_head(me_);
            std::memcpy(&slot, &h, offsetof(mpi::Header, number));
            slot_number(slot).store(op_.number, std::memory_order_release);
            // Input past the header's line: its lines go to the shared cache, where the peers' reads find them
            // sooner than in this core (128 B: ~0.56 -> ~0.51 µs, 512 B: ~0.72 -> ~0.60 µs per all-reduce). Not a
            // slot of one line, which the peers poll: it would only slow this rank's own next write of it.
            if (kSmallData + contribution_bytes() > kLine) demote(&slot, kSmallData + contribution_bytes());
        } else {
            std::memcpy(&mine.headers[op_.number % 2], &h, sizeof h);
        }
        mine.header.store(op_.number, std::memory_order_release);  // the latest published, whichever the place
        base_ = seg_.chunks;  // the previous collective has finished: its chunks are counted
        if (writes_only()) {  // done: a later collective waits for the peers (as MPI_Bcast's root, which does not)
            const Call& c = op_.call;
            if (c.kind == Kind::broadcast && c.send != c.recv && !op_.failed_before)
                std::memcpy(c.recv, c.send, contribution_bytes());
            finish(RT_SUCCESS, {}, false);
            return true;
        }
    }
    const int64_t D = static_cast<int64_t>(kDepth);
    for (;;) {
        waiting_.reset();
        bool moved = false;
        if (!checked_) {
            bool all = true;
            for (int q = 0; q < n_; ++q)
                if ((small_ ? slot_number(small_head(q)).load(std::memory_order_acquire)
                            : ctl(q).header.load(std::memory_order_acquire)) < op_.number) {
                    waiting_.set(static_cast<size_t>(q));
                    all = false;
                    if (small_) prefetch_early(q);
                }
            if (all) {
                checked_ = moved = true;
                if (!check_headers()) return true;
                if (small_) {
                    finish_small();
                    return true;
                }
                if (direct_) chunks_ = 0;  // nothing moves through the segment
            }
        }
        if (direct_ && checked_) {
            // Single copy: read, say so, and finish once every peer has read this rank's buffer.
            if (!read_) {
                if (!read_direct()) return true;
                read_ = true;
                mine.read.store(op_.number, std::memory_order_release);
                moved = true;
            }
            if (all_past(&Control::read, static_cast<int64_t>(op_.number) - 1)) {
                finish(RT_SUCCESS, {}, false);
                return true;
            }
            if (!moved) break;
            ++events_;
            continue;
        }
        // 1. Post (also before the headers are checked: it only writes this rank's own slot). Not when this rank's
        //    stream had failed: nothing of it moves. Not while the single copy may be taken (it moves nothing here).
        if (posted_ < chunks_ && !op_.failed_before && !direct_ &&
            all_past(&Control::middle, static_cast<int64_t>(base_ + posted_) - D)) {
            if (contributes()) post(posted_);
            ++posted_;
            mine.posted.store(base_ + posted_, std::memory_order_release);
            moved = true;
        }
        if (checked_) {
            // 2. Middle: the sources of the chunk are posted (and, reducing, its output buffer is free).
            if (middled_ < posted_) {
                const uint64_t g = base_ + middled_;
                bool ready;
                if (op_.call.kind == Kind::broadcast) {
                    ready = ctl(op_.call.root).posted.load(std::memory_order_acquire) > g;
                    if (!ready) waiting_.set(static_cast<size_t>(op_.call.root));
                } else {
                    ready = all_past(&Control::posted, static_cast<int64_t>(g));
                }
                if (ready && reduces()) ready = all_past(&Control::done, static_cast<int64_t>(g) - D);
                if (ready) {
                    middle(middled_);
                    ++middled_;
                    mine.middle.store(base_ + middled_, std::memory_order_release);
                    moved = true;
                }
            }
            // 3. Done: a rank that gathers from the ring waits for every slice of the chunk.
            if (done_ < middled_) {
                const uint64_t g = base_ + done_;
                if (!gathers() || all_past(&Control::middle, static_cast<int64_t>(g))) {
                    if (gathers()) gather(done_);
                    ++done_;
                    mine.done.store(base_ + done_, std::memory_order_release);
                    moved = true;
                }
            }
            if (done_ == chunks_) {
                seg_.chunks = base_ + chunks_;
                if (plan_) plan_->finish();
                finish(RT_SUCCESS, {}, false);
                return true;
            }
        }
        if (!moved) break;
        ++events_;
    }
    return idle();
}

bool Job::idle() {
    // The clock costs as much as a poll: read every 16th idle poll, the deadline counted from the first reading.
    if (++idle_polls_ % 16 != 0) return false;
    const auto now = Clock::now();
    if (deadline_ == Clock::time_point{})
        deadline_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(g_->timeout()));
    if (now > deadline_) {
        std::vector<int> waiting;
        for (int q = 0; q < n_; ++q)  // none cannot happen (something is always awaited): then every peer
            if (q != me_ && (waiting_.test(static_cast<size_t>(q)) || waiting_.none())) waiting.push_back(q);
        finish(RT_ERROR_TIMEOUT, mpi::timeout_text(g_->timeout(), g_->ranks_of(waiting)), true);
        return true;
    }
    return false;
}

}  // namespace

std::unique_ptr<mpi::Job> make_job(mpi::Group& g, mpi::Op op, std::unique_ptr<mpi::Job> spare) {
    if (spare) {
        static_cast<Job&>(*spare).reset(std::move(op));
        return spare;
    }
    return std::make_unique<Job>(g.shared_from_this(), std::move(op));
}

}  // namespace rt::comm::shm
