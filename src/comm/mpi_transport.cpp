// The MPI transport (see mpi_transport.hpp): bootstrap, split, and the progress thread that runs every collective,
// send and receive of the cross-process communicators as nonblocking point-to-point messages.
#include "comm/mpi_transport.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "comm/mpi_api.hpp"
#include "comm/reduce.hpp"
#include "core/error.hpp"
#include "observe/log.hpp"

namespace rt::comm::mpi {

using Clock = std::chrono::steady_clock;

std::string rank_list(const std::vector<int>& ranks) {
    std::string s;
    for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
    return s;
}

std::string timeout_text(double timeout, std::vector<int> missing) {
    std::sort(missing.begin(), missing.end());
    missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
    return format("timed out after %g s waiting for rank%s %s (RUNTIME_COMM_TIMEOUT)", timeout,
                  missing.size() > 1 ? "s" : "", rank_list(missing).c_str());
}

Header header_of(const Op& op) {
    const Call& c = op.call;
    return Header{kHeaderMagic, static_cast<uint8_t>(c.kind == Kind::recv ? Kind::send : c.kind),
                  static_cast<uint8_t>(c.type), static_cast<uint8_t>(c.op), static_cast<uint8_t>(op.failed_before),
                  c.root, op.rank, c.count, op.number};
}

std::string header_mismatch(const Op& op, const Header& h) { return header_mismatch(header_of(op), h); }

std::string header_mismatch(const Header& mine, const Header& h) {
    const int me = mine.rank, q = h.rank;
    const Kind hk = static_cast<Kind>(h.kind), mk = static_cast<Kind>(mine.kind);
    const auto count = static_cast<unsigned long long>(mine.count), hcount = static_cast<unsigned long long>(h.count);
    const char* type = type_name(static_cast<rtDataType>(mine.type));
    const char* htype = type_name(static_cast<rtDataType>(h.type));
    std::string why;
    if (mk == Kind::send) {  // a send or a receive (both headers say send)
        if (h.count != mine.count || h.type != mine.type)
            why = format("rank %d sends %llu elements of %s but rank %d receives %llu elements of %s (a send and its "
                         "receive must agree)", q, hcount, htype, me, count, type);
    } else if (hk != mk) {
        why = format("rank %d called %s but rank %d called %s (every rank must call the same collectives in the "
                     "same order)", me, api_name(mk), q, api_name(hk));
    } else if (h.count != mine.count) {
        why = format("rank %d passed count %llu but rank %d passed count %llu (every rank must pass the same)", me,
                     count, q, hcount);
    } else if (h.type != mine.type) {
        why = format("rank %d passed datatype %s but rank %d passed %s (every rank must pass the same)", me, type, q,
                     htype);
    } else if ((mk == Kind::all_reduce || mk == Kind::reduce || mk == Kind::reduce_scatter) && h.op != mine.op) {
        why = format("rank %d passed op %s but rank %d passed %s (every rank must pass the same)", me,
                     op_name(static_cast<rtReduceOp>(mine.op)), q, op_name(static_cast<rtReduceOp>(h.op)));
    } else if ((mk == Kind::broadcast || mk == Kind::reduce) && h.root != mine.root) {
        why = format("rank %d passed root %d but rank %d passed root %d (every rank must pass the same)", me,
                     mine.root, q, h.root);
    }
    if (why.empty() && h.number != mine.number)
        why = format("rank %d is at operation #%llu of this kind but rank %d at #%llu", me,
                     static_cast<unsigned long long>(mine.number), q, static_cast<unsigned long long>(h.number));
    return why;
}

namespace {

// The four tags of a communicator, from its tag base.
constexpr int kTagControl = 0;  // bootstrap and split exchanges (the blocking calls' thread)
constexpr int kTagCollective = 1;
constexpr int kTagP2P = 2;
constexpr int kTagNotice = 3;  // "this rank's communicator failed: why"
constexpr int kTagPairs = 4;   // hierarchical groups: kTagPairs + from's local index * kMaxLocalRanks + to's
constexpr int kTagsPerComm = kTagPairs + kMaxLocalRanks * kMaxLocalRanks;

/// Per-peer payloads up to this travel inside the header's message (one message per peer and collective); larger
/// ones after a header exchange, in messages straight from and into the caller's buffers.
constexpr size_t kFused = 32 * 1024;
/// Elements of one slice of one round of a large all-reduce / reduce (bounds the staging memory; rounds pipeline the
/// all-gather of round k-1 with the reduce-scatter of round k).
constexpr size_t kSliceBytes = 1 << 20;
/// MPI counts are ints: longer messages go in pieces.
constexpr size_t kMaxMessage = size_t{1} << 30;


Clock::time_point deadline_after(double seconds) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

/// A 64-bit mix (splitmix64's finaliser): tag blocks and split tokens from tokens.
uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/// The first of a communicator's kTagsPerComm tags (upper half of MPI_TAG_UB, drawn by the token).
int tag_base_of(uint64_t token) {
    Api& a = api();
    const int lo = a.tag_ub / 2;
    const uint64_t blocks = std::max<uint64_t>(1, static_cast<uint64_t>((a.tag_ub - lo) / kTagsPerComm));
    return lo + static_cast<int>(mix(token) % blocks) * kTagsPerComm;
}

/// Memory MPI may still touch after an operation was given up (a send to a stopped peer): kept until exit.
std::mutex g_graveyard_mutex;
std::vector<std::vector<char>> g_graveyard;
void bury(std::vector<char>&& v) {
    if (v.empty()) return;
    std::lock_guard lock(g_graveyard_mutex);
    g_graveyard.push_back(std::move(v));
}

/// Gives up an outstanding request: a receive is cancelled; both are freed (MPI completes them on its own).
void give_up(Api& a, Request& req, bool receive) {
    if (req == a.request_null) return;
    if (receive) a.Cancel(&req);
    a.Request_free(&req);
    req = a.request_null;
}

// ---------------------------------------------------------------- blocking exchanges (rtCommInitRank, rtCommSplit)

/// Sends `data` to world rank `to`, polling until MPI has taken it or the deadline passes (the buffer is then kept).
bool blocking_send(Api& a, std::vector<char> data, int to, int tag, Clock::time_point deadline) {
    Request req = a.request_null;
    if (int rc = a.Isend(data.data(), static_cast<int>(data.size()), a.byte, to, tag, a.world, &req); rc != kSuccess)
        fail(RT_ERROR_LAUNCH_FAILED, "%s", describe("MPI_Isend", rc).c_str());
    for (;;) {
        int flag = 0;
        a.Test(&req, &flag, nullptr);
        if (flag) return true;
        if (Clock::now() > deadline) {
            give_up(a, req, false);
            bury(std::move(data));
            return false;
        }
        std::this_thread::yield();
    }
}

/// Receives the next message from world rank `from` (kAnySource: anyone) on `tag`; false at the deadline.
bool blocking_recv(Api& a, int from, int tag, Clock::time_point deadline, std::vector<char>* out, int* source) {
    for (;;) {
        int flag = 0;
        Message msg = nullptr;
        Status st{};
        a.Improbe(from, tag, a.world, &flag, &msg, &st);
        if (flag) {
            int n = 0;
            a.Get_count(&st, a.byte, &n);
            out->resize(static_cast<size_t>(n));
            a.Mrecv(out->data(), n, a.byte, &msg, &st);
            if (source) *source = st.source;
            return true;
        }
        if (Clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

/// One rank's entry of the bootstrap exchange.
struct Wire {
    int32_t magic;
    int32_t rank, nranks, world, device, pid;
    char host[64];
    int32_t flags;  // bit 0: this rank allows the shared segment (RUNTIME_COMM_SHM is not 0)
};
constexpr int32_t kWireShm = 1;

/// The creator's offer of a shared segment, after the table in its reply (fd -1: none; MPI messages).
struct ShmOffer {
    int32_t pid, fd;
    uint64_t bytes;
};
constexpr int32_t kWireMagic = 0x72746231;

std::string host_name() {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
}

// ---------------------------------------------------------------- the progress thread

class Exchange;

constexpr const char* kFinalized = "MPI was finalized (MPI_Finalize): collectives across processes end with it";

class Engine {
public:
    static Engine& get() {
        static Engine* e = new Engine;  // never destroyed: stop_progress() ends its thread before MPI_Finalize
        return *e;
    }
    /// Runs `task` on the progress thread; false (dropped) once the thread has stopped.
    bool post(std::function<void()> task) {
        {
            std::lock_guard lock(mutex_);
            if (stopped_) return false;
            if (!thread_.joinable()) thread_ = std::thread([this] { main(); });
            inbox_.push_back(std::move(task));
        }
        cv_.notify_one();
        return true;
    }
    /// Read without the lock (every submit asks; the progress thread takes the lock in its loop).
    bool stopped() const { return stopped_.load(std::memory_order_acquire); }
    void stop() {
        {
            std::lock_guard lock(mutex_);
            stopped_.store(true, std::memory_order_release);
        }
        cv_.notify_one();
        if (thread_.joinable()) thread_.join();
    }
    /// Progress thread only: a group with queued operations, polled until its lanes are empty.
    void activate(std::shared_ptr<Group> g) { active_.insert(std::move(g)); }

private:
    void main();
    bool poll_group(Group& g, bool* progressed);
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> inbox_;
    std::atomic<bool> stopped_{false};  // written under mutex_
    std::thread thread_;
    std::set<std::shared_ptr<Group>> active_;
};

}  // namespace

void stop_progress() { Engine::get().stop(); }

// ---------------------------------------------------------------- one operation in flight

namespace {

class Exchange final : public Job {
public:
    Exchange(std::shared_ptr<Group> g, Op op) : g_(std::move(g)), op_(std::move(op)), a_(api()) {}
    ~Exchange() override = default;
    bool is_send() const { return op_.call.kind == Kind::send; }
    bool started() const { return started_; }
    /// Counts what poll() has seen complete (messages, stages).
    uint64_t events() const override { return events_; }
    bool poll() override;

private:
    struct Msg {
        int peer;
        const void* buf;
        size_t bytes;
    };
    struct Stage {
        std::vector<Msg> sends, recvs;
        std::function<void()> after;
    };
    struct Pending {
        Request req;
        int peer;
        bool receive;
    };

    int n() const { return g_->size(); }    // participants (processes)
    int me() const { return g_->rank(); }
    size_t es() const { return element_size(op_.call.type); }
    size_t bytes() const { return op_.call.count * es(); }
    bool collective() const { return op_.call.kind != Kind::send && op_.call.kind != Kind::recv; }
    /// A send's or receive's peer process.
    int peer() const { return g_->participant_of(op_.call.root); }
    int tag() const {
        if (collective()) return g_->tag(kTagCollective);
        return is_send() ? g_->p2p_tag(op_.rank, op_.call.root) : g_->p2p_tag(op_.call.root, op_.rank);
    }

    void start();
    bool fused() const;
    const void* fused_payload(int q) const;
    /// After the headers: checks them; plans the data stages (or finishes). False when finished.
    bool check_headers();
    void plan_data();
    void post(const Stage& s);
    void finish(rtError_t code, const std::string& why, bool fatal);
    std::vector<int> missing() const;

    std::shared_ptr<Group> g_;
    Op op_;
    Api& a_;
    bool started_ = false, finished_ = false;
    uint64_t events_ = 0;
    Clock::time_point deadline_;
    Header mine_{};
    std::map<int, std::vector<char>> hs_;  // stage 0: header (+ payload) sent to each peer
    std::map<int, std::vector<char>> hr_;  // stage 0: what each peer sent (sized by the probe)
    std::vector<int> probing_;             // stage 0: peers whose header has not come yet
    std::vector<Stage> stages_;
    size_t stage_ = 0;
    bool posted_ = false;
    std::vector<Pending> pending_;
    std::vector<char> tmp_, red_, sink_;
    std::unique_ptr<Plan> plan_;  // a collective of a hierarchical group
};

bool Exchange::fused() const {
    // Hierarchical collectives: headers first, then the plan's blocks (their sizes differ per pair of processes).
    if (g_->hierarchical() && collective()) return op_.call.kind == Kind::barrier;
    switch (op_.call.kind) {
        case Kind::all_reduce:
        case Kind::all_gather:
        case Kind::reduce_scatter:
        case Kind::all_to_all:
        case Kind::send:
        case Kind::recv: return bytes() <= kFused;
        case Kind::barrier: return true;
        default: return false;
    }
}

const void* Exchange::fused_payload(int q) const {
    const char* send = static_cast<const char*>(op_.call.send);
    switch (op_.call.kind) {
        case Kind::reduce_scatter:
        case Kind::all_to_all: return send + static_cast<size_t>(q) * bytes();
        default: return send;
    }
}

void Exchange::start() {
    started_ = true;
    deadline_ = deadline_after(g_->timeout());
    const Call& c = op_.call;
    mine_ = header_of(op_);
    // Headers: collectives exchange them between all ranks (every rank sees every rank's operands and state); a send
    // carries one to its receiver.
    std::vector<int> to, from;
    if (collective()) {
        for (int q = 0; q < n(); ++q)
            if (q != me()) to.push_back(q), from.push_back(q);
    } else if (is_send()) {
        to.push_back(peer());
    } else {
        from.push_back(peer());
    }
    const bool with_payload = fused() && c.kind != Kind::barrier;
    Stage s;
    for (int q : to) {
        std::vector<char>& m = hs_[q];
        const size_t payload = with_payload && !op_.failed_before && c.kind != Kind::recv ? bytes() : 0;
        m.resize(sizeof(Header) + payload);
        std::memcpy(m.data(), &mine_, sizeof(Header));
        if (payload) std::memcpy(m.data() + sizeof(Header), fused_payload(q), payload);
        s.sends.push_back({q, m.data(), m.size()});
    }
    probing_ = from;
    stages_.push_back(std::move(s));
}

void Exchange::post(const Stage& s) {
    for (const Msg& m : s.sends)
        for (size_t off = 0; off < m.bytes || (off == 0 && m.bytes == 0); off += kMaxMessage) {
            Request req = a_.request_null;
            const size_t len = std::min(kMaxMessage, m.bytes - off);
            a_.Isend(static_cast<const char*>(m.buf) + off, static_cast<int>(len), a_.byte, g_->member(m.peer).world,
                     tag(), a_.world, &req);
            pending_.push_back({req, m.peer, false});
            if (m.bytes == 0) break;
        }
    for (const Msg& m : s.recvs)
        for (size_t off = 0; off < m.bytes || (off == 0 && m.bytes == 0); off += kMaxMessage) {
            Request req = a_.request_null;
            const size_t len = std::min(kMaxMessage, m.bytes - off);
            a_.Irecv(const_cast<char*>(static_cast<const char*>(m.buf)) + off, static_cast<int>(len), a_.byte,
                     g_->member(m.peer).world, tag(), a_.world, &req);
            pending_.push_back({req, m.peer, true});
            if (m.bytes == 0) break;
        }
}

std::vector<int> Exchange::missing() const {
    if (!collective()) return {op_.call.root};
    std::vector<int> m = probing_;
    for (const Pending& p : pending_)
        if (p.req != a_.request_null) m.push_back(p.peer);
    return g_->ranks_of(m);
}

void Exchange::finish(rtError_t code, const std::string& why, bool fatal) {
    if (finished_) return;
    finished_ = true;
    bool outstanding = false;
    for (Pending& p : pending_)
        if (p.req != a_.request_null) {
            give_up(a_, p.req, p.receive);
            outstanding = true;
        }
    if (outstanding) {  // MPI may still read or write these
        for (auto& [q, v] : hs_) bury(std::move(v));
        bury(std::move(tmp_));
        bury(std::move(red_));
        bury(std::move(sink_));
        if (plan_) bury(std::move(plan_->packed)), bury(std::move(plan_->staged));
    }
    auto done = std::move(op_.done);
    done(code, why, fatal);
}

bool Exchange::poll() {
    if (finished_) return true;
    std::string gwhy;
    if (rtError_t code = g_->failure(&gwhy); code != RT_SUCCESS) {  // before start(): no message after a failure
        finish(code, "the communicator failed: " + gwhy, true);
        return true;
    }
    if (!started_) start();
    for (;;) {
        if (!posted_) {
            post(stages_[stage_]);
            posted_ = true;
        }
        bool progress_left = false;
        // Stage 0's headers: probed, so a message of another size (operands that differ) is received whole.
        if (stage_ == 0) {
            for (size_t i = 0; i < probing_.size();) {
                const int q = probing_[i];
                int flag = 0;
                Message msg = nullptr;
                Status st{};
                a_.Improbe(g_->member(q).world, tag(), a_.world, &flag, &msg, &st);
                if (!flag) {
                    ++i;
                    continue;
                }
                int count = 0;
                a_.Get_count(&st, a_.byte, &count);
                std::vector<char>& buf = hr_[q];
                buf.resize(static_cast<size_t>(count));
                a_.Mrecv(buf.data(), count, a_.byte, &msg, &st);
                ++events_;
                probing_.erase(probing_.begin() + static_cast<ptrdiff_t>(i));
            }
            if (!probing_.empty()) progress_left = true;
        }
        for (Pending& p : pending_) {
            if (p.req == a_.request_null) continue;
            int flag = 0;
            Status st{};
            a_.Test(&p.req, &flag, &st);
            if (!flag) {
                progress_left = true;
                continue;
            }
            ++events_;
            if (st.error != kSuccess && p.receive) {
                finish(RT_ERROR_LAUNCH_FAILED, describe("MPI_Irecv", st.error) + " (from rank " + std::to_string(p.peer) + ")", true);
                return true;
            }
        }
        if (progress_left) {
            if (Clock::now() > deadline_) {
                finish(RT_ERROR_TIMEOUT, timeout_text(g_->timeout(), missing()), true);
                return true;
            }
            return false;
        }
        // The stage is complete.
        ++events_;
        pending_.clear();
        posted_ = false;
        if (stage_ == 0) {
            if (!check_headers()) return true;
        } else if (stages_[stage_].after) {
            stages_[stage_].after();
        }
        if (++stage_ >= stages_.size()) {
            finish(RT_SUCCESS, {}, false);
            return true;
        }
    }
}

bool Exchange::check_headers() {
    const Call& c = op_.call;
    std::vector<int> failed;  // global ranks
    if (op_.failed_before) failed.push_back(op_.rank);
    for (auto& [q, buf] : hr_) {
        Header h{};
        if (buf.size() < sizeof(Header) || (std::memcpy(&h, buf.data(), sizeof h), h.magic != kHeaderMagic)) {
            finish(RT_ERROR_LAUNCH_FAILED, format("rank %d sent a message that is not the runtime's (%zu bytes on tag %d)",
                                                  q, buf.size(), tag()), true);
            return false;
        }
        const std::string why = header_mismatch(op_, h);
        if (!why.empty()) {
            finish(RT_ERROR_INVALID_VALUE, why, true);
            return false;
        }
        if (h.flags & 1) failed.push_back(h.rank);
        else if (fused() && buf.size() != sizeof(Header) + (c.kind == Kind::barrier ? 0 : bytes())) {
            finish(RT_ERROR_LAUNCH_FAILED, format("rank %d sent %zu bytes, expected %zu", q, buf.size(),
                                                  sizeof(Header) + bytes()), true);
            return false;
        }
    }
    if (!failed.empty()) {
        std::sort(failed.begin(), failed.end());
        const bool peer_failed = !(failed.size() == 1 && failed[0] == op_.rank && op_.failed_before);
        // A receive whose own stream failed still takes the sender's data (else the next message would meet it).
        if (c.kind == Kind::recv && op_.failed_before && !hr_.empty() && !(failed.size() > 1) && !fused()) {
            sink_.resize(bytes());
            Stage s;
            s.recvs.push_back({peer(), sink_.data(), bytes()});
            stages_.push_back(std::move(s));
            return true;
        }
        if (!peer_failed) {
            finish(RT_SUCCESS, {}, false);
        } else {
            std::vector<int> others;
            for (int r : failed)
                if (r != op_.rank) others.push_back(r);
            finish(RT_ERROR_LAUNCH_FAILED,
                   format("the stream of rank%s %s held an unreported failure when it reached this operation; nothing "
                          "was moved", others.size() > 1 ? "s" : "", rank_list(others).c_str()), false);
        }
        return false;
    }
    plan_data();
    return true;
}

void Exchange::plan_data() {
    const Call& c = op_.call;
    const size_t B = bytes();
    const int N = n(), r = me();
    const char* send = static_cast<const char*>(c.send);
    char* recv = static_cast<char*>(c.recv);
    auto payload = [this](int q) { return hr_[q].data() + sizeof(Header); };
    if (g_->hierarchical() && collective() && c.kind != Kind::barrier) {
        // The plan's blocks between the processes, then every local rank's result in rank order.
        plan_ = make_plan(*g_, op_);
        Stage s;
        for (int q = 0; q < N; ++q) {
            if (q == r) continue;
            if (plan_->to_bytes[static_cast<size_t>(q)]) s.sends.push_back({q, plan_->to[static_cast<size_t>(q)], plan_->to_bytes[static_cast<size_t>(q)]});
            if (plan_->from_bytes[static_cast<size_t>(q)]) s.recvs.push_back({q, plan_->from[static_cast<size_t>(q)], plan_->from_bytes[static_cast<size_t>(q)]});
        }
        s.after = [this] { plan_->finish(); };
        stages_.push_back(std::move(s));
        return;
    }
    if (fused()) {
        // Every peer's data came with its header.
        Stage s;
        switch (c.kind) {
            case Kind::all_reduce:
            case Kind::reduce_scatter:
                s.after = [this, N, r, send, recv, B, payload] {
                    std::vector<const void*> src(static_cast<size_t>(N));
                    for (int q = 0; q < N; ++q)
                        src[static_cast<size_t>(q)] =
                            q == r ? (op_.call.kind == Kind::all_reduce ? send : send + static_cast<size_t>(r) * B) : payload(q);
                    void* dst = recv;
                    reduce_range(op_.call.type, op_.call.op, src.data(), N, &dst, 1, 0, op_.call.count, N);
                };
                break;
            case Kind::all_gather:
            case Kind::all_to_all:
                s.after = [this, N, r, send, recv, B, payload] {
                    for (int q = 0; q < N; ++q)
                        if (q != r && B) std::memcpy(recv + static_cast<size_t>(q) * B, payload(q), B);
                    const char* own = op_.call.kind == Kind::all_gather ? send : send + static_cast<size_t>(r) * B;
                    char* to = recv + static_cast<size_t>(r) * B;
                    if (own != to && B) std::memmove(to, own, B);
                };
                break;
            case Kind::recv:
                s.after = [recv, B, payload, this] {
                    if (B) std::memcpy(recv, payload(peer()), B);
                };
                break;
            default: break;
        }
        if (s.after) stages_.push_back(std::move(s));
        return;
    }
    switch (c.kind) {
        case Kind::all_reduce:
        case Kind::reduce: {
            // Reduce-scatter then gather, in rounds: process q reduces slice q of each round from every rank's data in
            // rank order (the in-process order, so the result is the same bit for bit).
            const bool all = c.kind == Kind::all_reduce;
            const int root = c.root;
            const size_t cs = std::max<size_t>(1, kSliceBytes / es());
            const size_t round = cs * static_cast<size_t>(N);
            const size_t R = (c.count + round - 1) / round;
            tmp_.resize(static_cast<size_t>(N) * cs * es());
            if (!all && r != root) red_.resize(cs * es());
            auto slice = [this, N, round](size_t k, int q, size_t* len) {
                const size_t base = k * round, count = std::min(round, op_.call.count - base);
                const size_t b = base + count * static_cast<size_t>(q) / static_cast<size_t>(N);
                const size_t e = base + count * static_cast<size_t>(q + 1) / static_cast<size_t>(N);
                *len = e - b;
                return b;
            };
            const size_t E = es();
            for (size_t k = 0; k <= R; ++k) {
                Stage s;
                size_t len = 0;
                if (k < R) {
                    const size_t mb = slice(k, r, &len);
                    (void)mb;
                    for (int q = 0; q < N; ++q) {
                        if (q == r) continue;
                        size_t ql = 0;
                        const size_t qb = slice(k, q, &ql);
                        if (ql) s.sends.push_back({q, send + qb * E, ql * E});
                        if (len) s.recvs.push_back({q, tmp_.data() + static_cast<size_t>(q) * cs * E, len * E});
                    }
                }
                if (k > 0) {
                    size_t ml = 0;
                    const size_t mb = slice(k - 1, r, &ml);
                    for (int q = 0; q < N; ++q) {
                        if (q == r) continue;
                        size_t ql = 0;
                        const size_t qb = slice(k - 1, q, &ql);
                        if (all) {
                            if (ml) s.sends.push_back({q, recv + mb * E, ml * E});
                            if (ql) s.recvs.push_back({q, recv + qb * E, ql * E});
                        } else if (r == root) {
                            if (ql) s.recvs.push_back({q, recv + qb * E, ql * E});
                        } else if (q == root && ml) {
                            s.sends.push_back({q, red_.data(), ml * E});
                        }
                    }
                }
                if (k < R)
                    s.after = [this, k, N, r, send, recv, E, cs, all, root, slice] {
                        size_t len = 0;
                        const size_t b = slice(k, r, &len);
                        if (!len) return;
                        std::vector<const void*> src(static_cast<size_t>(N));
                        for (int q = 0; q < N; ++q)
                            src[static_cast<size_t>(q)] = q == r ? static_cast<const void*>(send + b * E)
                                                                 : tmp_.data() + static_cast<size_t>(q) * cs * E;
                        void* dst = all || r == root ? static_cast<void*>(recv + b * E) : red_.data();
                        reduce_range(op_.call.type, op_.call.op, src.data(), N, &dst, 1, 0, len, N);
                    };
                stages_.push_back(std::move(s));
            }
            break;
        }
        case Kind::broadcast: {
            Stage s;
            if (r == c.root) {
                for (int q = 0; q < N; ++q)
                    if (q != r && B) s.sends.push_back({q, send, B});
                if (recv != send && B) std::memcpy(recv, send, B);
            } else if (B) {
                s.recvs.push_back({c.root, recv, B});
            }
            stages_.push_back(std::move(s));
            break;
        }
        case Kind::all_gather: {
            Stage s;
            for (int q = 0; q < N; ++q)
                if (q != r) {
                    s.sends.push_back({q, send, B});
                    s.recvs.push_back({q, recv + static_cast<size_t>(q) * B, B});
                }
            char* own = recv + static_cast<size_t>(r) * B;
            if (own != send) std::memmove(own, send, B);
            stages_.push_back(std::move(s));
            break;
        }
        case Kind::reduce_scatter: {
            Stage s;
            tmp_.resize(static_cast<size_t>(N) * B);
            for (int q = 0; q < N; ++q)
                if (q != r) {
                    s.sends.push_back({q, send + static_cast<size_t>(q) * B, B});
                    s.recvs.push_back({q, tmp_.data() + static_cast<size_t>(q) * B, B});
                }
            s.after = [this, N, r, send, recv, B] {
                std::vector<const void*> src(static_cast<size_t>(N));
                for (int q = 0; q < N; ++q)
                    src[static_cast<size_t>(q)] = q == r ? static_cast<const void*>(send + static_cast<size_t>(r) * B)
                                                         : tmp_.data() + static_cast<size_t>(q) * B;
                void* dst = recv;
                reduce_range(op_.call.type, op_.call.op, src.data(), N, &dst, 1, 0, op_.call.count, N);
            };
            stages_.push_back(std::move(s));
            break;
        }
        case Kind::all_to_all: {
            Stage s;
            const char* from = send;
            if (send == recv) {  // in place: the blocks sent are read before any block is received over them
                tmp_.assign(send, send + static_cast<size_t>(N) * B);
                from = tmp_.data();
            }
            for (int q = 0; q < N; ++q)
                if (q != r) {
                    s.sends.push_back({q, from + static_cast<size_t>(q) * B, B});
                    s.recvs.push_back({q, recv + static_cast<size_t>(q) * B, B});
                }
            if (from + static_cast<size_t>(r) * B != recv + static_cast<size_t>(r) * B)
                std::memcpy(recv + static_cast<size_t>(r) * B, from + static_cast<size_t>(r) * B, B);
            stages_.push_back(std::move(s));
            break;
        }
        case Kind::send: {
            Stage s;
            s.sends.push_back({peer(), send, B});
            stages_.push_back(std::move(s));
            break;
        }
        case Kind::recv: {
            Stage s;
            s.recvs.push_back({peer(), recv, B});
            stages_.push_back(std::move(s));
            break;
        }
        case Kind::barrier: break;
    }
}

}  // namespace

// ---------------------------------------------------------------- groups

struct Group::Lanes {
    std::mutex mutex;  // taken by the progress thread while it polls them, and by submit's first attempt
    std::deque<std::unique_ptr<Job>> collectives;              // one at a time, in order
    std::map<int64_t, std::deque<std::unique_ptr<Job>>> receives;  // per (sender, receiver): one at a time, in order
    std::vector<std::unique_ptr<Job>> sends;                   // all at once (MPI keeps their order)
    bool empty() const {
        if (!collectives.empty() || !sends.empty()) return false;
        for (auto& [q, d] : receives)
            if (!d.empty()) return false;
        return true;
    }
};

Group::Group(uint64_t token, int me, std::vector<Member> members, std::vector<int> devices, double timeout)
    : token_(token), rank_(me), members_(std::move(members)), devices_(std::move(devices)), timeout_(timeout),
      lanes_(std::make_unique<Lanes>()) {
    where_.assign(devices_.size(), {0, 0});
    for (size_t p = 0; p < members_.size(); ++p) {
        hierarchical_ = hierarchical_ || members_[p].ranks.size() > 1;
        for (size_t i = 0; i < members_[p].ranks.size(); ++i)
            where_[static_cast<size_t>(members_[p].ranks[i])] = {static_cast<int>(p), static_cast<int>(i)};
    }
    tag_base_ = tag_base_of(token);
    // More ranks on this host than cores: a rank that spins takes the core a peer it waits
    // for needs, so waits yield the core between polls (Open MPI's yield_when_idle does the same when oversubscribed).
    int local = 0;
    for (const Member& m : members_)
        if (m.host == members_[static_cast<size_t>(rank_)].host) local += static_cast<int>(m.ranks.size());
    // The host's cores, not this process' affinity: mpirun binds each of 2 processes to a core of its own, which does
    // not make them compete.
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    oversubscribed_ = cpus > 0 && local > cpus;
    // The backends' host threads spin less from now on, in this process (the hint stays for the process' life).
    if (oversubscribed_) backend::set_host_oversubscribed(true);
}

Group::~Group() = default;

std::vector<int> Group::ranks_of(const std::vector<int>& ps) const {
    std::vector<int> out;
    for (int p : ps) {
        const auto& r = members_[static_cast<size_t>(p)].ranks;
        out.insert(out.end(), r.begin(), r.end());
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

int Group::p2p_tag(int from, int to) const {
    if (!hierarchical_) return tag(kTagP2P);
    return tag(kTagPairs + local_index(from) * kMaxLocalRanks + local_index(to));
}

bool Group::poll_inline(Job& x, Kind kind, std::chrono::microseconds inline_for) {
    // A peer's failure reaches a collective through the segment's record (its poll reads it): the MPI notices are
    // for messages.
    if (!segment_ || kind == Kind::send || kind == Kind::recv) poll_notices();
    // It goes on while messages keep completing (a large operation streams), and stops after a stall. The clock costs
    // as much as a poll: read every 8th round, the bound counted from the first reading after the latest progress (an
    // operation that finishes within 8 polls never reads it).
    Clock::time_point until{};
    for (uint64_t seen = x.events(), round = 0;; ++round) {
        if (x.poll()) return true;
        if (oversubscribed_) std::this_thread::yield();
        if (x.events() != seen) {
            seen = x.events();
            until = {};
        } else if (round % 8 == 7) {
            const auto now = Clock::now();
            if (until == Clock::time_point{}) until = now + inline_for;
            else if (now >= until) return false;
        }
    }
}

bool Group::submit(Op op, std::chrono::microseconds inline_for, std::unique_ptr<Job>* started) {
    const bool predecessors_finished = started != nullptr;
    const Kind kind = op.call.kind;
    if (Engine::get().stopped()) {  // MPI was finalized: the operation fails at once, without MPI
        fail(RT_ERROR_NOT_SUPPORTED, kFinalized);
        op.done(RT_ERROR_NOT_SUPPORTED, std::string("the communicator failed: ") + kFinalized, false);
        return true;
    }
    // Receives are ordered per (sender, receiver): one tag per pair when hierarchical, so pairs never meet.
    const int64_t peer = static_cast<int64_t>(op.call.root) * nranks() + op.rank;
    // Collectives go through the shared segment when there is one (every rank then does: the choice was made at
    // init for the whole communicator); sends and receives stay MPI messages.
    std::unique_ptr<Job> x;
    if (segment_ && kind != Kind::send && kind != Kind::recv)
        x = shm::make_job(*this, std::move(op), started ? std::move(*started) : nullptr);
    else
        x = std::make_unique<Exchange>(shared_from_this(), std::move(op));
    // Nothing ahead of it: the submitting thread (the thread whose stream reached the step, or the caller of a
    // collective started at its call) polls it for a bounded moment (see the header). Predecessors known to have
    // finished: no lane lock for that (finished jobs the progress thread has not dropped yet are no predecessors),
    // and a job that finishes here is kept for the next such call (no allocation per operation).
    if (predecessors_finished && poll_inline(*x, kind, inline_for)) {
        if (segment_) *started = std::move(x);
        return true;
    }
    Lanes& l = lanes();
    {
        std::lock_guard lock(l.mutex);
        if (!predecessors_finished) {
            const bool first = kind == Kind::send ? true
                               : kind == Kind::recv ? l.receives[peer].empty()
                                                    : l.collectives.empty();
            if (first && poll_inline(*x, kind, inline_for)) return true;
        }
        if (kind == Kind::send) l.sends.push_back(std::move(x));
        else if (kind == Kind::recv) l.receives[peer].push_back(std::move(x));
        else l.collectives.push_back(std::move(x));
    }
    if (!Engine::get().post([self = shared_from_this()] { Engine::get().activate(self); }))
        fail_all(RT_ERROR_NOT_SUPPORTED, kFinalized);  // the progress thread stopped meanwhile: nothing would poll it
    return false;
}

void Group::fail_all(rtError_t code, const std::string& why) {
    fail(code, why);
    // Every job now finishes at its first poll, without a message (the failure is checked first).
    Lanes& l = lanes();
    std::lock_guard lock(l.mutex);
    for (auto& x : l.collectives) x->poll();
    for (auto& [q, d] : l.receives)
        for (auto& x : d) x->poll();
    for (auto& x : l.sends) x->poll();
    l.collectives.clear();
    l.receives.clear();
    l.sends.clear();
}

void Group::poll_notices() {
    Api& a = api();
    for (;;) {
        int flag = 0;
        Message msg = nullptr;
        Status st{};
        a.Improbe(kAnySource, tag(kTagNotice), a.world, &flag, &msg, &st);
        if (!flag) break;
        int count = 0;
        a.Get_count(&st, a.byte, &count);
        std::vector<char> m(static_cast<size_t>(count));
        a.Mrecv(m.data(), count, a.byte, &msg, &st);
        int32_t head[2] = {RT_ERROR_LAUNCH_FAILED, -1};
        if (m.size() >= sizeof head) std::memcpy(head, m.data(), sizeof head);
        const std::string text = m.size() > sizeof head ? std::string(m.data() + sizeof head, m.size() - sizeof head) : "";
        fail_from_peer(static_cast<rtError_t>(head[0]), format("rank %d: %s", head[1], text.c_str()));
    }
}

bool Group::take_recorded_failure() {
    int rank = -1;
    rtError_t code = RT_SUCCESS;
    std::string why;
    if (!segment_ || !segment_->failure(&rank, &code, &why) || rank == leader()) return false;
    fail_from_peer(code, format("rank %d: %s", rank, why.c_str()));
    return true;
}

rtError_t Group::failure(std::string* why) const {
    if (!failed_.load(std::memory_order_acquire)) return RT_SUCCESS;  // the polls' common case: no lock
    std::lock_guard lock(mutex_);
    if (why) *why = why_;
    return code_;
}

void Group::fail_from_peer(rtError_t code, const std::string& why) {
    std::lock_guard lock(mutex_);
    if (code_ != RT_SUCCESS) return;
    code_ = code;
    why_ = why;
    failed_.store(true, std::memory_order_release);
}

void Group::fail(rtError_t code, const std::string& why) {
    {
        std::lock_guard lock(mutex_);
        if (code_ != RT_SUCCESS) return;
        code_ = code;
        why_ = why;
        failed_.store(true, std::memory_order_release);
    }
    // The shared segment's failure record first: peers waiting on it see it at their next poll, without MPI.
    if (segment_) segment_->set_failure(leader(), code, why);
    // Tell the peers (their own operations on this communicator then fail at once rather than at their timeout).
    auto self = shared_from_this();
    Engine::get().post([self, code, why] {
        Api& a = api();
        for (int q = 0; q < self->size(); ++q) {
            if (q == self->rank()) continue;
            std::vector<char> m(sizeof(int32_t) * 2 + why.size());
            const int32_t head[2] = {static_cast<int32_t>(code), self->leader()};
            std::memcpy(m.data(), head, sizeof head);
            std::memcpy(m.data() + sizeof head, why.data(), why.size());
            Request req = a.request_null;
            a.Isend(m.data(), static_cast<int>(m.size()), a.byte, self->member(q).world, self->tag(kTagNotice), a.world, &req);
            a.Request_free(&req);  // a small message: MPI buffers it; the vector is kept for MPI until exit
            bury(std::move(m));
        }
        Engine::get().activate(self);
    });
}

// ---------------------------------------------------------------- the progress thread's loop

namespace {

void Engine::main() {
    auto idle_since = Clock::now(), progress_at = Clock::now();
    for (;;) {
        std::deque<std::function<void()>> tasks;
        {
            std::unique_lock lock(mutex_);
            if (active_.empty() && inbox_.empty() && !stopped_) {
                // Back-to-back operations (a loop of small collectives) find the thread awake: a wake-up through the
                // condition variable costs tens of microseconds.
                if (Clock::now() - idle_since < std::chrono::microseconds(300)) {
                    lock.unlock();
                    std::this_thread::yield();
                    continue;
                }
                cv_.wait(lock, [&] { return stopped_ || !inbox_.empty(); });
            }
            if (stopped_) {  // MPI_Finalize follows: what is queued runs, and what is in flight fails now (not hangs)
                tasks.swap(inbox_);
                lock.unlock();
                for (auto& t : tasks) t();
                for (auto& g : active_) g->fail_all(RT_ERROR_NOT_SUPPORTED, kFinalized);
                active_.clear();
                return;
            }
            tasks.swap(inbox_);
        }
        for (auto& t : tasks) t();
        bool progressed = !tasks.empty();
        for (auto it = active_.begin(); it != active_.end();) {
            if (poll_group(**it, &progressed)) it = active_.erase(it);
            else ++it;
        }
        const auto now = Clock::now();
        if (progressed) progress_at = now;
        if (!active_.empty()) {
            // Operations wait for peers: yield the core to them (more processes than cores is common), and after a
            // stall of a few milliseconds (a peer descheduled or stopped) sleep between polls rather than spin.
            if (now - progress_at < std::chrono::milliseconds(2)) std::this_thread::yield();
            else std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        idle_since = Clock::now();
    }
}

/// Polls a group's notices and the fronts of its lanes; true once its lanes are empty. Sets *progressed when an
/// operation moved or finished.
bool Engine::poll_group(Group& g, bool* progressed) {
    g.poll_notices();
    Group::Lanes& l = g.lanes();
    std::lock_guard lock(l.mutex);
    auto step = [progressed](Job& j) {
        const uint64_t before = j.events();
        const bool finished = j.poll();
        if (finished || j.events() != before) *progressed = true;
        return finished;
    };
    while (!l.collectives.empty() && step(*l.collectives.front())) l.collectives.pop_front();
    for (auto& [q, d] : l.receives)
        while (!d.empty() && step(*d.front())) d.pop_front();
    l.sends.erase(std::remove_if(l.sends.begin(), l.sends.end(), [&](auto& x) { return step(*x); }), l.sends.end());
    return l.empty();
}


template <class T>
std::vector<char> bytes_of(const T& v) {
    std::vector<char> b(sizeof v);
    std::memcpy(b.data(), &v, sizeof v);
    return b;
}

}  // namespace

namespace {

/// Whether every rank of `table` runs on this host (same host name) and allows the shared segment, in more than one
/// process.
bool all_local(const std::vector<Wire>& table) {
    std::set<int> worlds;
    for (const Wire& x : table) {
        worlds.insert(x.world);
        if (!(x.flags & kWireShm) || strnlen(x.host, sizeof x.host) != strnlen(table[0].host, sizeof x.host) ||
            std::strncmp(x.host, table[0].host, sizeof x.host) != 0)
            return false;
    }
    return worlds.size() > 1;
}

/// The processes of a table of ranks, ordered by their first rank (so with one rank per process, participant ==
/// rank), and the index of the process `self_world`.
std::vector<Member> members_of(const std::vector<Wire>& table, int self_world, int* me) {
    std::vector<Member> members;
    std::map<int, size_t> at;  // world -> index in members
    for (size_t r = 0; r < table.size(); ++r) {
        const Wire& x = table[r];
        auto [it, fresh] = at.emplace(x.world, members.size());
        if (fresh) members.push_back({x.world, x.pid, std::string(x.host, strnlen(x.host, sizeof x.host)), {}});
        members[it->second].ranks.push_back(static_cast<int>(r));
    }
    *me = static_cast<int>(at.count(self_world) ? at[self_world] : 0);
    return members;
}

/// The second round of a bootstrap that offered a segment, between processes: every other process tells the creator
/// whether it mapped it, and the creator tells every process whether all did (then all use it; otherwise none does
/// and each unmaps it). Returns whether the segment is used; throws TIMEOUT when a process does not answer in time.
/// `call`: the API call whose bootstrap it is (rtCommInitRank, rtCommSplit), for the messages.
bool settle_segment(Api& a, bool creator_side, int creator, const std::vector<Member>& members, int self_world, int tag,
                    bool mapped, Clock::time_point deadline, double timeout, const char* call = "rtCommInitRank") {
    auto word = [](int32_t v) { return bytes_of(v); };
    if (!creator_side) {
        if (!blocking_send(a, word(mapped ? 1 : 0), creator, tag, deadline))
            fail(RT_ERROR_TIMEOUT, "%s timed out after %g s: the process that made the shared segment (world rank %d) "
                 "did not take this process' answer about it (RUNTIME_COMM_TIMEOUT)", call, timeout, creator);
        std::vector<char> m;
        if (!blocking_recv(a, creator, tag, deadline, &m, nullptr))
            fail(RT_ERROR_TIMEOUT, "%s timed out after %g s waiting for the process that made the shared segment (world "
                 "rank %d) to settle it (RUNTIME_COMM_TIMEOUT)", call, timeout, creator);
        int32_t v = 0;
        if (m.size() == sizeof v) std::memcpy(&v, m.data(), sizeof v);
        return v == 1;
    }
    bool all = mapped;
    std::vector<int> missing;
    for (const Member& x : members) {
        if (x.world == self_world) continue;
        std::vector<char> m;
        if (!blocking_recv(a, x.world, tag, deadline, &m, nullptr)) {
            missing.insert(missing.end(), x.ranks.begin(), x.ranks.end());
            continue;
        }
        int32_t v = 0;
        if (m.size() == sizeof v) std::memcpy(&v, m.data(), sizeof v);
        all = all && v == 1;
    }
    if (!missing.empty()) fail(RT_ERROR_TIMEOUT, "%s (the shared segment) %s", call, timeout_text(timeout, missing).c_str());
    for (const Member& x : members)
        if (x.world != self_world) blocking_send(a, word(all ? 1 : 0), x.world, tag, deadline_after(timeout));
    return all;
}

/// A group made by rtCommSplit from a group with a shared segment (so every member is on this host and allowed one):
/// its first process makes a segment of its own and offers it to the others as the bootstrap does; every process maps
/// it, or they all stay on MPI messages.
void share_segment(Api& a, Group& g, Clock::time_point deadline, double timeout) {
    const int tag = g.tag(kTagControl);
    const int processes = g.size();
    const Member& first = g.member(0);
    const bool maker = g.rank() == 0;
    std::unique_ptr<shm::Segment> segment;
    if (maker) {
        std::string ignored;  // none: MPI messages, as when the bootstrap gets none
        segment = shm::Segment::create(g.token(), processes, &ignored);
        const ShmOffer offer = segment ? ShmOffer{static_cast<int32_t>(::getpid()), segment->fd(), segment->bytes()}
                                       : ShmOffer{0, -1, 0};
        for (int q = 1; q < processes; ++q)
            if (!blocking_send(a, bytes_of(offer), g.member(q).world, tag, deadline))
                fail(RT_ERROR_TIMEOUT, "rtCommSplit (the shared segment) %s", timeout_text(timeout, g.member(q).ranks).c_str());
        if (!segment) return;
    } else {
        std::vector<char> m;
        if (!blocking_recv(a, first.world, tag, deadline, &m, nullptr))
            fail(RT_ERROR_TIMEOUT, "rtCommSplit (the shared segment) %s", timeout_text(timeout, first.ranks).c_str());
        ShmOffer offer{0, -1, 0};
        if (m.size() == sizeof offer) std::memcpy(&offer, m.data(), sizeof offer);
        if (offer.fd < 0) return;
        std::string ignored;  // not mapped: the maker hears so, and every process stays on MPI messages
        segment = shm::Segment::open(offer.pid, offer.fd, offer.bytes, g.token(), processes, &ignored);
    }
    std::vector<Member> members;
    for (int q = 0; q < processes; ++q) members.push_back(g.member(q));
    if (!settle_segment(a, maker, first.world, members, a.world_rank, tag, segment != nullptr, deadline, timeout,
                        "rtCommSplit"))
        return;
    if (maker) segment->close_fd();
    g.set_segment(std::move(segment));
}

/// This process' side of one MPI id's bootstrap. Its ranks join from their own threads; the first to arrive runs the
/// exchange for the whole process (in the creator's process: gathers every rank's entry), the others wait for its
/// outcome. Kept for the process' life: a later join of a finished id is refused at once.
struct LocalJoin {
    std::mutex mutex;
    std::condition_variable cv;
    std::set<int> ranks;  // this process' ranks that joined
    bool running = false, finished = false;
    rtError_t code = RT_SUCCESS;
    std::string why;
    std::shared_ptr<Group> group;
};
std::mutex g_joins_mutex;
std::map<uint64_t, std::shared_ptr<LocalJoin>> g_joins;  // by token

/// The exchange of rtCommInitRank for this process (run by its first rank to join): the table of every rank and the
/// shared segment's settlement. Returns the process' group.
std::shared_ptr<Group> bootstrap(Api& a, uint64_t token, int creator, int nranks, const Wire& w,
                                 Clock::time_point deadline, double timeout) {
    const int tag = tag_base_of(token) + kTagControl;
    std::vector<Wire> table(static_cast<size_t>(nranks));
    std::unique_ptr<shm::Segment> segment;
    bool offered = false;
    if (a.world_rank == creator) {
        // The maker of the id gathers every rank's entry (this process' other ranks send theirs too), checks that
        // they agree, and sends the table back to every other process.
        std::vector<bool> have(static_cast<size_t>(nranks), false);
        have[static_cast<size_t>(w.rank)] = true;
        table[static_cast<size_t>(w.rank)] = w;
        std::set<int> joined;  // worlds of the other processes that sent an entry
        rtError_t code = RT_SUCCESS;
        std::string why;
        for (int count = 1; count < nranks;) {
            std::vector<char> m;
            int source = -1;
            if (!blocking_recv(a, kAnySource, tag, deadline, &m, &source)) {
                std::vector<int> missing;
                for (int r = 0; r < nranks; ++r)
                    if (!have[static_cast<size_t>(r)]) missing.push_back(r);
                code = RT_ERROR_TIMEOUT;
                why = "rtCommInitRank " + timeout_text(timeout, missing);
                break;
            }
            Wire x{};
            if (m.size() != sizeof x) continue;
            std::memcpy(&x, m.data(), sizeof x);
            if (x.magic != kWireMagic) continue;
            if (x.world != a.world_rank) joined.insert(x.world);
            if (x.nranks != nranks) {
                code = RT_ERROR_INVALID_VALUE;
                why = format("rtCommInitRank: rank %d (world rank %d) passed nranks %d, but rank %d (world rank %d) "
                             "passed %d", x.rank, x.world, x.nranks, w.rank, a.world_rank, nranks);
                break;
            }
            if (x.rank < 0 || x.rank >= nranks) continue;  // checked by its sender: not the runtime's message
            if (have[static_cast<size_t>(x.rank)]) {
                code = RT_ERROR_INVALID_VALUE;
                why = format("rtCommInitRank: rank %d joined this unique id twice (world ranks %d and %d); each rank "
                             "joins once", x.rank, table[static_cast<size_t>(x.rank)].world, x.world);
                break;
            }
            have[static_cast<size_t>(x.rank)] = true;
            table[static_cast<size_t>(x.rank)] = x;
            ++count;
        }
        if (code == RT_SUCCESS) {
            std::map<int, int> per_process;
            for (const Wire& x : table)
                if (++per_process[x.world] > kMaxLocalRanks) {
                    code = RT_ERROR_NOT_SUPPORTED;
                    why = format("rtCommInitRank: world rank %d holds more than %d ranks of this communicator (the most "
                                 "per process across processes)", x.world, kMaxLocalRanks);
                    break;
                }
        }
        // Every rank on this host, in several processes: offer a shared segment, one slot per process (when the
        // system gives one; else MPI messages).
        ShmOffer offer{0, -1, 0};
        if (code == RT_SUCCESS && all_local(table)) {
            int me = 0;
            const size_t processes = members_of(table, a.world_rank, &me).size();
            std::string ignored;
            segment = shm::Segment::create(token, static_cast<int>(processes), &ignored);
            if (segment) offer = ShmOffer{static_cast<int32_t>(::getpid()), segment->fd(), segment->bytes()};
        }
        std::vector<char> reply(sizeof(int32_t));
        const int32_t status = code;
        std::memcpy(reply.data(), &status, sizeof status);
        if (code == RT_SUCCESS) {
            reply.resize(sizeof(int32_t) + table.size() * sizeof(Wire) + sizeof offer);
            std::memcpy(reply.data() + sizeof(int32_t), table.data(), table.size() * sizeof(Wire));
            std::memcpy(reply.data() + sizeof(int32_t) + table.size() * sizeof(Wire), &offer, sizeof offer);
        } else {
            reply.insert(reply.end(), why.begin(), why.end());
        }
        for (int world : joined) blocking_send(a, reply, world, tag, deadline_after(timeout));
        if (code != RT_SUCCESS) fail(code, "%s", why.c_str());
        offered = offer.fd >= 0;
    } else {
        std::vector<char> m;
        if (!blocking_recv(a, creator, tag, deadline, &m, nullptr))
            fail(RT_ERROR_TIMEOUT, "rtCommInitRank timed out after %g s waiting for the other ranks (the process that "
                 "made the unique id, world rank %d, gathers them and had not answered; RUNTIME_COMM_TIMEOUT)", timeout,
                 creator);
        int32_t status = RT_ERROR_LAUNCH_FAILED;
        if (m.size() >= sizeof status) std::memcpy(&status, m.data(), sizeof status);
        if (status != RT_SUCCESS)
            fail(static_cast<rtError_t>(status), "%s",
                 m.size() > sizeof status ? std::string(m.data() + sizeof status, m.size() - sizeof status).c_str()
                                          : "rtCommInitRank failed at the process that made the id");
        const size_t expected = sizeof(int32_t) + table.size() * sizeof(Wire) + sizeof(ShmOffer);
        if (m.size() != expected)
            fail(RT_ERROR_INVALID_VALUE, "rtCommInitRank: the table of ranks from world rank %d has %zu bytes, expected "
                 "%zu (nranks differ?)", creator, m.size(), expected);
        std::memcpy(table.data(), m.data() + sizeof(int32_t), table.size() * sizeof(Wire));
        ShmOffer offer{};
        std::memcpy(&offer, m.data() + sizeof(int32_t) + table.size() * sizeof(Wire), sizeof offer);
        if (offer.fd >= 0) {
            offered = true;
            int me = 0;
            const size_t processes = members_of(table, a.world_rank, &me).size();
            std::string ignored;  // not mapped: the creator hears so, and every process stays on MPI messages
            segment = shm::Segment::open(offer.pid, offer.fd, offer.bytes, token, static_cast<int>(processes), &ignored);
        }
    }
    int me = 0;
    std::vector<Member> members = members_of(table, a.world_rank, &me);
    const char* why_not =
        members.size() < 2 ? "one process" : "not every rank is on this host, or one set RUNTIME_COMM_SHM=0";
    if (offered) {
        const bool use = settle_segment(a, a.world_rank == creator, creator, members, a.world_rank, tag,
                                        segment != nullptr, deadline, timeout);
        if (!use) {
            segment.reset();
            why_not = "a process could not map the segment";
        } else if (a.world_rank == creator) {
            segment->close_fd();  // every process maps it: the mappings keep it alive
        }
    }
    RT_LOG(comm, info, "communicator %016llx: %d ranks in %zu processes, this one holds %zu; collectives %s%s",
           static_cast<unsigned long long>(token), nranks, members.size(), members[static_cast<size_t>(me)].ranks.size(),
           segment ? "through a shared segment" : "as MPI messages: ", segment ? "" : why_not);
    std::vector<int> devices;
    for (const Wire& x : table) devices.push_back(x.device);
    auto g = std::make_shared<Group>(token, me, std::move(members), std::move(devices), timeout);
    g->set_segment(std::move(segment));
    return g;
}

}  // namespace

std::shared_ptr<Group> join(uint64_t token, int creator, int nranks, int rank, int device, double timeout) {
    Api& a = api();
    if (creator < 0 || creator >= a.world_size)
        fail(RT_ERROR_INVALID_VALUE, "unique_id was made by world rank %d, but MPI_COMM_WORLD has %d processes (an id "
             "of another mpirun job?)", creator, a.world_size);
    const bool shm_allowed = shm::enabled_from_env();
    std::shared_ptr<LocalJoin> lj;
    {
        std::lock_guard lock(g_joins_mutex);
        auto& slot = g_joins[token];
        if (!slot) slot = std::make_shared<LocalJoin>();
        lj = slot;
    }
    bool runner = false;
    {
        std::lock_guard lock(lj->mutex);
        if (lj->finished && lj->code == RT_SUCCESS)
            fail(RT_ERROR_INVALID_VALUE, "rtCommInitRank: rank %d: every rank of this unique id has joined already "
                 "(this process holds ranks of its communicator; each rank joins once)", rank);
        if (lj->finished) fail(lj->code, "%s", lj->why.c_str());
        if (!lj->ranks.insert(rank).second)
            fail(RT_ERROR_INVALID_VALUE, "rtCommInitRank: rank %d already joined this unique id in this process (each "
                 "rank joins once)", rank);
        runner = !lj->running;
        lj->running = true;
    }
    const auto deadline = deadline_after(timeout);
    Wire w{kWireMagic, rank, nranks, a.world_rank, device, static_cast<int32_t>(::getpid()), {}, shm_allowed ? kWireShm : 0};
    const std::string host = host_name();
    std::strncpy(w.host, host.c_str(), sizeof w.host - 1);
    // Every rank's entry goes to the creator (its own process' included), except the creator-process runner's own,
    // which it holds.
    if (!(runner && a.world_rank == creator)) {
        if (!blocking_send(a, bytes_of(w), creator, tag_base_of(token) + kTagControl, deadline)) {
            const std::string why = format("rtCommInitRank timed out after %g s: the process that made the unique id "
                                           "(world rank %d) did not take rank %d's entry (RUNTIME_COMM_TIMEOUT)", timeout,
                                           creator, rank);
            if (!runner) fail(RT_ERROR_TIMEOUT, "%s", why.c_str());
            std::lock_guard lock(lj->mutex);
            lj->finished = true, lj->code = RT_ERROR_TIMEOUT, lj->why = why;
            lj->cv.notify_all();
            fail(RT_ERROR_TIMEOUT, "%s", why.c_str());
        }
    }
    std::shared_ptr<Group> g;
    if (runner) {
        try {
            g = bootstrap(a, token, creator, nranks, w, deadline, timeout);
        } catch (const Error& e) {
            std::lock_guard lock(lj->mutex);
            lj->finished = true, lj->code = e.code(), lj->why = e.what();
            lj->cv.notify_all();
            throw;
        } catch (...) {
            std::lock_guard lock(lj->mutex);
            lj->finished = true, lj->code = RT_ERROR_OUT_OF_MEMORY, lj->why = "rtCommInitRank ran out of host memory";
            lj->cv.notify_all();
            throw;
        }
        std::lock_guard lock(lj->mutex);
        lj->finished = true;
        lj->group = g;
        lj->cv.notify_all();
    } else {
        // The runner ends by its own deadline (each of its waits is bounded by it); the margin covers its last sends.
        std::unique_lock lock(lj->mutex);
        if (!lj->cv.wait_until(lock, deadline_after(2 * timeout), [&] { return lj->finished; }))
            fail(RT_ERROR_TIMEOUT, "rtCommInitRank timed out after %g s waiting for this process' bootstrap "
                 "(RUNTIME_COMM_TIMEOUT)", 2 * timeout);
        if (lj->code != RT_SUCCESS) fail(lj->code, "%s", lj->why.c_str());
        g = lj->group;
    }
    // The table must place this rank in this process (a rank that another process also claimed was refused above).
    if (g->nranks() != nranks || g->participant_of(rank) != g->rank())
        fail(RT_ERROR_INVALID_VALUE, "rtCommInitRank: rank %d passed nranks %d but the communicator has %d ranks, rank "
             "%d in world rank %d", rank, nranks, g->nranks(), rank, g->member(g->participant_of(rank)).world);
    return g;
}

Group::SplitResult Group::split(uint64_t number, const std::vector<SplitPart>& local) {
    Api& a = api();
    const int tag = tag_base_ + kTagControl;
    const auto deadline = deadline_after(timeout_);
    // The message: a head, then one part per rank of the sending process.
    struct Head {
        int32_t magic, parts;
        uint64_t number;
    };
    std::vector<char> mine(sizeof(Head) + local.size() * sizeof(SplitPart));
    const Head head{kWireMagic, static_cast<int32_t>(local.size()), number};
    std::memcpy(mine.data(), &head, sizeof head);
    std::memcpy(mine.data() + sizeof head, local.data(), local.size() * sizeof(SplitPart));
    for (int q = 0; q < size(); ++q)
        if (q != rank_ && !blocking_send(a, mine, member(q).world, tag, deadline))
            rt::fail(RT_ERROR_TIMEOUT, "rtCommSplit %s", timeout_text(timeout_, member(q).ranks).c_str());
    std::vector<SplitPart> all(static_cast<size_t>(nranks()), SplitPart{-1, RT_COMM_SPLIT_NOCOLOR, 0});
    for (const SplitPart& p : local) all[static_cast<size_t>(p.rank)] = p;
    for (int q = 0; q < size(); ++q) {
        if (q == rank_) continue;
        std::vector<char> m;
        if (!blocking_recv(a, member(q).world, tag, deadline, &m, nullptr)) {
            std::vector<int> missing;
            for (int p = q; p < size(); ++p)
                if (p != rank_) missing.push_back(p);
            rt::fail(RT_ERROR_TIMEOUT, "rtCommSplit %s", timeout_text(timeout_, ranks_of(missing)).c_str());
        }
        Head h{};
        if (m.size() >= sizeof h) std::memcpy(&h, m.data(), sizeof h);
        if (h.magic != kWireMagic || h.number != number)
            rt::fail(RT_ERROR_INVALID_VALUE, "rtCommSplit: rank %d is at split #%llu but rank %d sent split #%llu",
                     leader(), static_cast<unsigned long long>(number), member(q).ranks.front(),
                     static_cast<unsigned long long>(h.number));
        if (h.parts < 0 || m.size() != sizeof h + static_cast<size_t>(h.parts) * sizeof(SplitPart))
            rt::fail(RT_ERROR_INVALID_VALUE, "rtCommSplit: a malformed message from rank %d", member(q).ranks.front());
        for (int32_t i = 0; i < h.parts; ++i) {
            SplitPart p{};
            std::memcpy(&p, m.data() + sizeof h + static_cast<size_t>(i) * sizeof p, sizeof p);
            if (p.rank < 0 || p.rank >= nranks() || participant_of(p.rank) != q)
                rt::fail(RT_ERROR_INVALID_VALUE, "rtCommSplit: rank %d sent a part for rank %d, not one of its own",
                         member(q).ranks.front(), p.rank);
            all[static_cast<size_t>(p.rank)] = p;
        }
    }
    SplitResult out;
    std::set<int> colors;  // this process' colors, ascending: every process handles the colors it shares in one order
    for (const SplitPart& p : local)
        if (p.color != RT_COMM_SPLIT_NOCOLOR) colors.insert(p.color);
    for (const int color : colors) {
        std::vector<int> list;  // the color's old ranks, ascending, then ordered by key (stable: ties keep rank order)
        for (int r = 0; r < nranks(); ++r)
            if (all[static_cast<size_t>(r)].color == color) list.push_back(r);
        std::stable_sort(list.begin(), list.end(),
                         [&](int x, int y) { return all[static_cast<size_t>(x)].key < all[static_cast<size_t>(y)].key; });
        SplitResult::Color& c = out.colors[color];
        // The processes of the new communicator, in the order of their first new rank (as the bootstrap orders them).
        std::vector<Member> members;
        std::map<int, size_t> at;  // old participant -> index in members
        for (size_t i = 0; i < list.size(); ++i) {
            const int old = list[i];
            c.devices.push_back(device(old));
            const int p = participant_of(old);
            auto [it, fresh] = at.emplace(p, members.size());
            if (fresh) {
                Member m = member(p);
                m.ranks.clear();
                members.push_back(std::move(m));
            }
            members[it->second].ranks.push_back(static_cast<int>(i));
            if (p == rank_) out.placed[old] = {color, static_cast<int>(i)};
        }
        if (members.size() == 1) continue;  // all of them here: an in-process clique
        const uint64_t token = mix(token_ ^ mix(number) ^ mix(static_cast<uint64_t>(static_cast<uint32_t>(color)) << 1));
        c.group = std::make_shared<Group>(token, static_cast<int>(at[rank_]), std::move(members), c.devices, timeout_);
        // Colors in ascending order on every process: a process in several of them settles them in the same order.
        if (segment_) share_segment(a, *c.group, deadline, timeout_);
        RT_LOG(comm, info, "communicator %016llx (split from %016llx): %zu ranks in %d processes, this one holds %zu; "
               "collectives %s", static_cast<unsigned long long>(token), static_cast<unsigned long long>(token_),
               c.devices.size(), c.group->size(), c.group->member(c.group->rank()).ranks.size(),
               c.group->segment() ? "through a shared segment" : "as MPI messages");
    }
    return out;
}

}  // namespace rt::comm::mpi
