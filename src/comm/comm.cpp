// Communicators, cliques and their rendezvous, the timeout watchdog, rtCommInitRank/rtCommSplit gatherings, groups.
#include "comm/comm.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <thread>

#include "comm/local.hpp"
#include "comm/mpi_api.hpp"
#include "comm/mpi_transport.hpp"
#include "comm/reduce.hpp"
#include "comm/shm.hpp"
#include "core/handle_table.hpp"
#include "core/runtime.hpp"
#include "core/stream.hpp"
#include "graph/capture.hpp"
#include "observe/trace.hpp"

namespace rt::comm {

using Clock = std::chrono::steady_clock;

const char* api_name(Kind kind) {
    switch (kind) {
        case Kind::all_reduce: return "rtAllReduce";
        case Kind::broadcast: return "rtBroadcast";
        case Kind::reduce: return "rtReduce";
        case Kind::all_gather: return "rtAllGather";
        case Kind::reduce_scatter: return "rtReduceScatter";
        case Kind::all_to_all: return "rtAlltoAll";
        case Kind::send: return "rtSend";
        case Kind::recv: return "rtRecv";
        case Kind::barrier: return "rtCommBarrier";
    }
    return "(collective)";
}

double timeout_from_env() {
    const char* v = std::getenv("RUNTIME_COMM_TIMEOUT");
    if (!v || !*v) return 30.0;
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    if (*end || !(t > 0) || !std::isfinite(t))
        fail(RT_ERROR_INVALID_VALUE, "RUNTIME_COMM_TIMEOUT='%s' is not a positive number of seconds (default 30)", v);
    return t;
}

namespace {

Clock::time_point deadline_after(double seconds) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string rank_list(const std::vector<int>& ranks) {
    std::string s;
    for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
    return s;
}

/// Fails the collectives whose deadline passed. One thread per process, started by the first collective that waits
/// for a peer; it never runs a queue's work, so no executor is ever occupied by a wait. A rendezvous is watched from
/// its first arrival until it closes (unwatch), so only open ones are held. The thread wakes at least once a second
/// while rendezvous come and go, so a new deadline (seconds away) needs no wake-up: a collective's arrival costs no
/// system call (it did: a futex wake per collective).
class Watchdog {
public:
    using Due = std::multimap<Clock::time_point, std::weak_ptr<Rendezvous>>;
    ~Watchdog() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
    }
    /// Watches `r` until `deadline` (its mutex held by the caller: lock order rendezvous, then watchdog).
    void watch(Rendezvous& r, Clock::time_point deadline);
    /// Stops watching `r` (its mutex held by the caller), if it is watched.
    void unwatch(Rendezvous& r);

private:
    void main();
    std::mutex mutex_;
    std::condition_variable cv_;
    Due due_;
    Clock::time_point wake_at_ = Clock::time_point::max();  // when the thread wakes next (max: when told)
    bool stop_ = false;
    std::thread thread_;
};

Watchdog& watchdog() {
    static Watchdog w;
    return w;
}

std::atomic<uint64_t> g_cliques{0};

}  // namespace

// ---------------------------------------------------------------- clique and rendezvous

/// Which pairing a rendezvous is: collectives (-1, -1, n); the n-th send from a to b (a, b, n).
using Key = std::tuple<int, int, uint64_t>;

class Clique : public std::enable_shared_from_this<Clique> {
public:
    /// `remote`: the ranks are in other processes too, reached through that MPI group (this process holds the ranks
    /// of its member).
    Clique(std::vector<int> devices, double timeout, uint64_t generation, std::shared_ptr<mpi::Group> remote = nullptr)
        : devices_(std::move(devices)), timeout_(timeout), generation_(generation), number_(++g_cliques),
          remote_(std::move(remote)) {}
    mpi::Group* remote() const { return remote_.get(); }
    int size() const { return static_cast<int>(devices_.size()); }
    int device(int rank) const { return devices_[static_cast<size_t>(rank)]; }
    double timeout() const { return timeout_; }
    uint64_t generation() const { return generation_; }
    uint64_t number() const { return number_; }

    /// The rendezvous `key` of `ranks` (participant i is rank ranks[i]), created by the first rank that joins it.
    /// `across`: once the ranks here have arrived, the operation goes to the MPI transport (other processes take part).
    std::shared_ptr<Rendezvous> open(const Key& key, const std::vector<int>& ranks, uint64_t number, bool across);
    /// A closed rendezvous leaves the table.
    void forget(const Key& key, const Rendezvous* r) {
        std::lock_guard lock(mutex_);
        auto it = open_.find(key);
        if (it != open_.end() && it->second.get() == r) open_.erase(it);
    }
    /// Records the clique's failure (the first is kept) and fails every open rendezvous with it — `first` (optional)
    /// with its own words `first_why`. Recorded before any rank is resumed: what a resumed rank reaches next fails.
    void fail(rtError_t code, const std::string& why, Rendezvous* first = nullptr, const std::string& first_why = {});
    rtError_t failure(std::string* why) const {
        std::lock_guard lock(mutex_);
        if (why) *why = why_;
        return code_;
    }

    struct SplitGathering;
    std::shared_ptr<SplitGathering> split(uint64_t number);
    void forget_split(uint64_t number) {
        std::lock_guard lock(mutex_);
        splits_.erase(number);
    }

private:
    const std::vector<int> devices_;
    const double timeout_;
    const uint64_t generation_;
    const uint64_t number_;
    const std::shared_ptr<mpi::Group> remote_;
    mutable std::mutex mutex_;  // never held while a rendezvous' lock is taken
    std::map<Key, std::shared_ptr<Rendezvous>> open_;
    std::map<uint64_t, std::shared_ptr<SplitGathering>> splits_;
    rtError_t code_ = RT_SUCCESS;
    std::string why_;
};

class Rendezvous final : public backend::JointStep, public std::enable_shared_from_this<Rendezvous> {
public:
    Rendezvous(std::shared_ptr<Clique> clique, Key key, std::vector<int> ranks, uint64_t number, bool across)
        : clique_(std::move(clique)), key_(key), ranks_(std::move(ranks)), number_(number), across_(across),
          parts_(ranks_.size()) {}

    /// Registers participant `p`'s operands (at submission, before its part is queued).
    void set_part(int p, const Call& call, Stream& stream, uint64_t stream_op, const char* graph_node) {
        std::lock_guard lock(mutex_);
        Part& part = parts_[static_cast<size_t>(p)];
        part.call = call;
        part.slot = &stream.errors();
        part.stream_op = stream_op;
        if (graph_node) part.graph_node = graph_node;
    }

    void arrive_impl(int participant, backend::Workers& workers, std::function<void()> resume) noexcept override;
    /// The collective's number on its communicator (per peer and direction for sends and receives).
    uint64_t number() const { return number_; }
    /// The watchdog's deadline passed: fails the ranks that arrived, naming those that did not.
    void expire();
    /// Fails the ranks that arrived now and the others when they arrive (timeout, abort). No effect once closed.
    void fail_open(rtError_t code, const std::string& why);
    /// Its deadline's entry while the watchdog watches it: the watchdog's, read and written under its mutex.
    std::optional<Watchdog::Due::iterator>& watch_entry() { return watch_; }

private:
    struct Part {
        Call call;
        AsyncErrorSlot* slot = nullptr;  // the stream's: valid while its part is queued
        uint64_t stream_op = 0;
        std::string graph_node;  // the replayed graph node's label; empty: a call
        bool arrived = false;
        bool failed_before = false;  // its stream held an unreported failure when it arrived
        std::function<void()> resume;
    };
    int rank_of(size_t p) const { return ranks_[p]; }
    /// "rtAllReduce (collective #3 of communicator #1, rank 0 of 2; operation #5 on the stream)".
    std::string describe(size_t p) const;
    /// Closes with `code`/`why` (mutex_ held by `lock`, released): fails and resumes the parts that arrived.
    void close_failed(std::unique_lock<std::mutex>& lock, rtError_t code, std::string why);
    /// Every part arrived and the rendezvous is closed: checks, moves the data, resumes everyone.
    void complete(backend::Workers& workers);
    /// complete() of an operation across processes: this process' parts (its ranks of a collective, or one end of a
    /// message) go to the MPI transport as one operation, which resumes them.
    void complete_remote(mpi::Group& group);
    /// Why the parts do not match (empty: they do).
    std::string mismatch() const;
    static void fail_part(Part& p, rtError_t code, const std::string& message) noexcept {
        try {
            p.slot->set(code, message);
        } catch (...) {
            p.slot->set(code, {});
        }
    }

    const std::shared_ptr<Clique> clique_;
    const Key key_;
    const std::vector<int> ranks_;
    const uint64_t number_;
    const bool across_;
    std::mutex mutex_;
    std::vector<Part> parts_;
    size_t arrived_ = 0;
    bool closed_ = false;  // all arrived (complete runs or ran), or failed
    rtError_t code_ = RT_SUCCESS;
    std::string why_;
    std::optional<Watchdog::Due::iterator> watch_;  // its deadline's entry while watched (the watchdog's mutex)
};

std::shared_ptr<Rendezvous> Clique::open(const Key& key, const std::vector<int>& ranks, uint64_t number, bool across) {
    std::lock_guard lock(mutex_);
    auto& slot = open_[key];
    if (!slot) slot = std::make_shared<Rendezvous>(shared_from_this(), key, ranks, number, across);
    return slot;
}

void Clique::fail(rtError_t code, const std::string& why, Rendezvous* first, const std::string& first_why) {
    std::vector<std::shared_ptr<Rendezvous>> open;
    {
        std::lock_guard lock(mutex_);
        if (code_ == RT_SUCCESS) {
            code_ = code;
            why_ = why;
        }
        for (auto& [key, r] : open_) open.push_back(r);
    }
    if (remote_) remote_->fail(code, why);  // fails what is in flight there and tells the other processes
    if (first) first->fail_open(code, first_why);
    for (auto& r : open) r->fail_open(code, "the communicator failed: " + why);  // `first` is closed: untouched
}

namespace {
/// "rtAllReduce (collective #3 of communicator #1, rank 0 of 2; operation #5 on the stream)".
std::string describe_collective(Kind kind, uint64_t number, const Clique& clique, int rank, uint64_t stream_op,
                                const char* graph_node) {
    return format("%s (collective #%llu of communicator #%llu, rank %d of %d; %s)", api_name(kind),
                  static_cast<unsigned long long>(number), static_cast<unsigned long long>(clique.number()), rank,
                  clique.size(), backend::describe_operation(stream_op, graph_node).c_str());
}
}  // namespace

std::string Rendezvous::describe(size_t p) const {
    const Part& part = parts_[p];
    const char* node = part.graph_node.empty() ? nullptr : part.graph_node.c_str();
    if (std::get<0>(key_) < 0) return describe_collective(part.call.kind, number_, *clique_, rank_of(p), part.stream_op, node);
    return format("%s %s rank %d (message #%llu from rank %d to rank %d of communicator #%llu; %s)",
                  api_name(part.call.kind), part.call.kind == Kind::send ? "to" : "from", part.call.root,
                  static_cast<unsigned long long>(number_), std::get<0>(key_), std::get<1>(key_),
                  static_cast<unsigned long long>(clique_->number()),
                  backend::describe_operation(part.stream_op, node).c_str());
}

void Rendezvous::close_failed(std::unique_lock<std::mutex>& lock, rtError_t code, std::string why) {
    closed_ = true;
    watchdog().unwatch(*this);
    code_ = code;
    why_ = std::move(why);
    std::vector<size_t> arrived;
    for (size_t p = 0; p < parts_.size(); ++p)
        if (parts_[p].arrived) arrived.push_back(p);
    lock.unlock();
    // Closed: nothing else touches the parts that arrived (late arrivals only touch their own).
    for (size_t p : arrived) {
        fail_part(parts_[p], code_, describe(p) + ": " + why_);
        std::function<void()> resume = std::move(parts_[p].resume);
        resume();
    }
    clique_->forget(key_, this);
}

void Rendezvous::arrive_impl(int participant, backend::Workers& workers, std::function<void()> resume) noexcept {
    const size_t p = static_cast<size_t>(participant);
    std::unique_lock lock(mutex_);
    Part& part = parts_[p];
    part.failed_before = part.slot->failed();
    if (!closed_) {
        std::string why;
        if (rtError_t code = clique_->failure(&why); code != RT_SUCCESS)
            close_failed(lock, code, "the communicator failed earlier: " + why);  // releases the lock
    }
    if (!lock.owns_lock()) lock.lock();
    if (closed_) {  // failed before this part arrived
        const rtError_t code = code_;
        const std::string why = why_;
        lock.unlock();
        fail_part(part, code, describe(p) + ": " + why);
        resume();
        return;
    }
    part.arrived = true;
    part.resume = std::move(resume);
    const bool first = arrived_++ == 0;
    if (arrived_ < parts_.size()) {
        if (first) watchdog().watch(*this, deadline_after(clique_->timeout()));
        lock.unlock();
        return;
    }
    closed_ = true;
    if (!first) watchdog().unwatch(*this);
    lock.unlock();
    complete(workers);
}

void Rendezvous::expire() {
    std::vector<int> missing;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        for (size_t p = 0; p < parts_.size(); ++p)
            if (!parts_[p].arrived) missing.push_back(rank_of(p));
    }
    const std::string why = format("timed out after %g s waiting for rank%s %s (RUNTIME_COMM_TIMEOUT)",
                                   clique_->timeout(), missing.size() > 1 ? "s" : "", rank_list(missing).c_str());
    // Later operations would wait for the same ranks: the communicator is failed from now on.
    const bool collective = std::get<0>(key_) < 0;
    clique_->fail(RT_ERROR_TIMEOUT,
                  collective ? format("collective #%llu %s", static_cast<unsigned long long>(number_), why.c_str())
                             : format("message #%llu from rank %d to rank %d %s", static_cast<unsigned long long>(number_),
                                      std::get<0>(key_), std::get<1>(key_), why.c_str()),
                  this, why);
}

void Rendezvous::fail_open(rtError_t code, const std::string& why) {
    std::unique_lock lock(mutex_);
    if (closed_) return;
    close_failed(lock, code, why);
}

std::string Rendezvous::mismatch() const {
    const Part& a = parts_[0];
    for (size_t p = 1; p < parts_.size(); ++p) {
        const Part& b = parts_[p];
        const int ra = rank_of(0), rb = rank_of(p);
        if (std::get<0>(key_) >= 0) {  // a send and its receive
            if (a.call.count != b.call.count || a.call.type != b.call.type)
                return format("rank %d sends %zu elements of %s but rank %d receives %zu elements of %s (a send and "
                              "its receive must agree)", ra, a.call.count, type_name(a.call.type), rb, b.call.count,
                              type_name(b.call.type));
            continue;
        }
        if (a.call.kind != b.call.kind)
            return format("rank %d called %s but rank %d called %s (every rank must call the same collectives in the "
                          "same order)", ra, api_name(a.call.kind), rb, api_name(b.call.kind));
        if (a.call.count != b.call.count)
            return format("rank %d passed count %zu but rank %d passed count %zu (every rank must pass the same)", ra,
                          a.call.count, rb, b.call.count);
        if (a.call.type != b.call.type)
            return format("rank %d passed datatype %s but rank %d passed %s (every rank must pass the same)", ra,
                          type_name(a.call.type), rb, type_name(b.call.type));
        const Kind k = a.call.kind;
        if ((k == Kind::all_reduce || k == Kind::reduce || k == Kind::reduce_scatter) && a.call.op != b.call.op)
            return format("rank %d passed op %s but rank %d passed %s (every rank must pass the same)", ra,
                          op_name(a.call.op), rb, op_name(b.call.op));
        if ((k == Kind::broadcast || k == Kind::reduce) && a.call.root != b.call.root)
            return format("rank %d passed root %d but rank %d passed root %d (every rank must pass the same)", ra,
                          a.call.root, rb, b.call.root);
    }
    return {};
}

void Rendezvous::complete(backend::Workers& workers) {
    if (across_) return complete_remote(*clique_->remote());
    // Closed with every part arrived: this thread alone touches the parts until it resumes them.
    std::string why;
    try {
        why = mismatch();
        if (!why.empty()) {
            for (size_t p = 0; p < parts_.size(); ++p) fail_part(parts_[p], RT_ERROR_INVALID_VALUE, describe(p) + ": " + why);
        } else {
            std::vector<int> failed;
            for (size_t p = 0; p < parts_.size(); ++p)
                if (parts_[p].failed_before) failed.push_back(rank_of(p));
            if (!failed.empty()) {
                why = format("the stream of rank%s %s held an unreported failure when it reached this operation; "
                             "nothing was moved", failed.size() > 1 ? "s" : "", rank_list(failed).c_str());
                for (size_t p = 0; p < parts_.size(); ++p) {
                    if (parts_[p].failed_before) parts_[p].slot->count_skipped();
                    else fail_part(parts_[p], RT_ERROR_LAUNCH_FAILED, describe(p) + ": " + why);
                }
            } else {
                const Part& first = parts_[0];
                Matched m{first.call.kind, first.call.type, first.call.op, first.call.count, first.call.root, {}, {}};
                for (const Part& part : parts_) {
                    m.send.push_back(part.call.send);
                    m.recv.push_back(part.call.recv);
                }
                run_local(m, workers);
            }
        }
    } catch (...) {  // out of host memory while describing or staging
        for (auto& part : parts_) fail_part(part, RT_ERROR_OUT_OF_MEMORY, "a collective ran out of host memory");
    }
    for (auto& part : parts_) {
        std::function<void()> resume = std::move(part.resume);
        resume();
    }
    clique_->forget(key_, this);
}

void Rendezvous::complete_remote(mpi::Group& group) {
    // Every local part arrived and the rendezvous is closed: this thread alone touches the parts until the transport
    // resumes them. Local ranks that differ fail the communicator everywhere (its peers would wait for a call that never
    // comes): every local part fails now, the other processes at their next poll.
    std::string why;
    try {
        why = mismatch();
    } catch (...) {
        why = "a collective ran out of host memory";
    }
    auto resume_all = [this] {
        for (auto& part : parts_) {
            std::function<void()> resume = std::move(part.resume);
            resume();
        }
        clique_->forget(key_, this);
    };
    if (!why.empty()) {
        for (size_t p = 0; p < parts_.size(); ++p) fail_part(parts_[p], RT_ERROR_INVALID_VALUE, describe(p) + ": " + why);
        clique_->fail(RT_ERROR_INVALID_VALUE, format("collective #%llu: %s", static_cast<unsigned long long>(number_),
                                                     why.c_str()));
        return resume_all();
    }
    mpi::Op op;
    std::vector<int> failed;  // local ranks whose streams had failed
    try {
        op.call = parts_[0].call;
        op.number = number_;
        op.rank = rank_of(0);
        for (size_t p = 0; p < parts_.size(); ++p)
            if (parts_[p].failed_before) failed.push_back(rank_of(p));
        if (!failed.empty()) {
            op.failed_before = true;
            op.rank = failed.front();
        }
        if (group.hierarchical() && std::get<0>(key_) < 0)
            for (const Part& part : parts_) op.locals.push_back(part.call);
    } catch (...) {
        for (auto& part : parts_) fail_part(part, RT_ERROR_OUT_OF_MEMORY, "a collective ran out of host memory");
        return resume_all();
    }
    op.done = [self = shared_from_this(), failed](rtError_t code, const std::string& why, bool fatal) {
        for (size_t p = 0; p < self->parts_.size(); ++p) {
            Part& part = self->parts_[p];
            if (part.failed_before) part.slot->count_skipped();
            else if (code != RT_SUCCESS) fail_part(part, code, self->describe(p) + ": " + why);
            else if (!failed.empty())  // a local rank's stream had failed: nothing moved for any rank
                fail_part(part, RT_ERROR_LAUNCH_FAILED,
                          self->describe(p) + ": " +
                              format("the stream of rank%s %s held an unreported failure when it reached this "
                                     "operation; nothing was moved", failed.size() > 1 ? "s" : "",
                                     rank_list(failed).c_str()));
        }
        if (fatal) {  // the processes' message streams no longer agree: the communicator is failed from now on
            const Key& k = self->key_;
            self->clique_->fail(code, std::get<0>(k) < 0
                                          ? format("collective #%llu: %s", static_cast<unsigned long long>(self->number_), why.c_str())
                                          : format("message #%llu from rank %d to rank %d: %s",
                                                   static_cast<unsigned long long>(self->number_), std::get<0>(k),
                                                   std::get<1>(k), why.c_str()));
        }
        for (auto& part : self->parts_) {
            std::function<void()> resume = std::move(part.resume);
            resume();
        }
        self->clique_->forget(self->key_, self.get());
    };
    try {
        group.submit(std::move(op));
    } catch (...) {
        for (auto& part : parts_) fail_part(part, RT_ERROR_OUT_OF_MEMORY, "a collective ran out of host memory");
        resume_all();
    }
}

void Watchdog::watch(Rendezvous& r, Clock::time_point deadline) {
    bool wake;
    {
        std::lock_guard lock(mutex_);
        if (!thread_.joinable()) thread_ = std::thread([this] { main(); });
        r.watch_entry() = due_.emplace(deadline, r.weak_from_this());
        wake = deadline < wake_at_;
    }
    if (wake) cv_.notify_all();
}

void Watchdog::unwatch(Rendezvous& r) {
    std::lock_guard lock(mutex_);
    if (!r.watch_entry()) return;
    due_.erase(*r.watch_entry());
    r.watch_entry().reset();
}

void Watchdog::main() {
    // Consecutive wake-ups that found nothing watched; after a few the thread sleeps until told.
    constexpr int kIdleRounds = 5;
    int idle = 0;
    std::unique_lock lock(mutex_);
    while (!stop_) {
        const auto now = Clock::now();
        if (!due_.empty() && due_.begin()->first <= now) {
            std::shared_ptr<Rendezvous> live = due_.begin()->second.lock();
            if (live) live->watch_entry().reset();
            due_.erase(due_.begin());
            lock.unlock();
            if (live) live->expire();
            live.reset();
            lock.lock();
            continue;
        }
        idle = due_.empty() ? idle + 1 : 0;
        if (idle > kIdleRounds) {
            wake_at_ = Clock::time_point::max();  // watch() wakes it
            cv_.wait(lock);
            idle = 0;
            continue;
        }
        wake_at_ = now + std::chrono::seconds(1);
        if (!due_.empty()) wake_at_ = std::min(wake_at_, due_.begin()->first);
        cv_.wait_until(lock, wake_at_);
    }
}

// ---------------------------------------------------------------- host-side gatherings (rtCommInitRank, rtCommSplit)

namespace {
/// Parties that each join once and wait until all have (or one's deadline passes: then all fail, naming who is
/// missing). A blocking host wait: only API calls that NCCL also makes blocking use it.
struct Gathering {
    explicit Gathering(int parties) : joined(static_cast<size_t>(parties), false) {}
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<bool> joined;
    int count = 0;
    bool complete = false;
    rtError_t code = RT_SUCCESS;
    std::string why;

    /// Waits (mutex held by `lock`) until complete or failed; the deadline fails it for everyone.
    void wait(std::unique_lock<std::mutex>& lock, Clock::time_point deadline, double timeout, const char* what) {
        while (!complete && code == RT_SUCCESS) {
            if (cv.wait_until(lock, deadline) == std::cv_status::timeout && !complete && code == RT_SUCCESS) {
                std::vector<int> missing;
                for (size_t i = 0; i < joined.size(); ++i)
                    if (!joined[i]) missing.push_back(static_cast<int>(i));
                code = RT_ERROR_TIMEOUT;
                why = format("%s timed out after %g s waiting for rank%s %s (RUNTIME_COMM_TIMEOUT)", what, timeout,
                             missing.size() > 1 ? "s" : "", rank_list(missing).c_str());
                cv.notify_all();
            }
        }
        if (code != RT_SUCCESS) fail(code, "%s", why.c_str());
    }
};

struct InitGathering : Gathering {
    explicit InitGathering(int n) : Gathering(n), devices(static_cast<size_t>(n), -1) {}
    std::vector<int> devices;
    std::shared_ptr<Clique> clique;
};

std::mutex g_inits_mutex;
std::map<uint64_t, std::shared_ptr<InitGathering>> g_inits;  // by the id's nonce; removed when complete or failed

constexpr char kIdMagic[8] = {'r', 't', 'c', 'o', 'm', 'm', '1', '\0'};
struct IdLayout {
    char magic[8];
    uint32_t transport;
    uint32_t pid;
    uint64_t nonce;
    int32_t creator_world;  // transport mpi: the world rank of the process that made the id
    int32_t reserved;
};
static_assert(sizeof(IdLayout) <= sizeof(rtCommUniqueId::internal));

CommTable& handles() {
    static CommTable table;
    return table;
}
}  // namespace

struct Clique::SplitGathering : Gathering {
    explicit SplitGathering(int n) : Gathering(n), colors(static_cast<size_t>(n)), keys(static_cast<size_t>(n)),
                                     cliques(static_cast<size_t>(n)), ranks(static_cast<size_t>(n), -1) {}
    std::vector<int> colors, keys;
    std::vector<std::shared_ptr<Clique>> cliques;  // per old rank: its new clique (null: no color)
    std::vector<int> ranks;                        // per old rank: its rank in it
};

std::shared_ptr<Clique::SplitGathering> Clique::split(uint64_t number) {
    std::lock_guard lock(mutex_);
    auto& g = splits_[number];
    if (!g) g = std::make_shared<SplitGathering>(size());
    return g;
}

struct Communicator::SplitWait {
    std::shared_ptr<Clique> clique;
    std::shared_ptr<Clique::SplitGathering> gathering;
    uint64_t number = 0;
    int rank = 0;
    Clock::time_point deadline;
    // A library's split (the parent has a native communicator): made by rtCommSplit outside a group, else inside
    // rtGroupEnd's library group (make_native_split); no gathering of ours.
    std::shared_ptr<Communicator> parent;
    int color = 0, key = 0;
    std::unique_ptr<backend::NativeComm> native;
};

namespace {
void make_native_split(Communicator::SplitWait& w) { w.native = w.parent->native()->split_impl(w.color, w.key); }

/// The wait of rank `rank`'s split through this runtime's own gathering `g` (in-process or MPI).
std::shared_ptr<Communicator::SplitWait> ours_split(const std::shared_ptr<Clique>& clique, int rank,
                                                    std::shared_ptr<Clique::SplitGathering> g, uint64_t number) {
    auto w = std::make_shared<Communicator::SplitWait>();
    w->clique = clique;
    w->gathering = std::move(g);
    w->number = number;
    w->rank = rank;
    w->deadline = deadline_after(clique->timeout());
    return w;
}
}  // namespace

// ---------------------------------------------------------------- communicators

Communicator::Communicator(std::shared_ptr<Clique> clique, int rank)
    : clique_(std::move(clique)), rank_(rank), sent_(static_cast<size_t>(clique_->size())),
      received_(static_cast<size_t>(clique_->size())) {}

Communicator::~Communicator() = default;

int Communicator::size() const { return clique_->size(); }
int Communicator::device_index() const { return clique_->device(rank_); }
CoreDevice& Communicator::device() const { return runtime().device(device_index()); }

std::shared_ptr<Rendezvous> Communicator::join(const Call& call, Stream& stream, uint64_t stream_op, int* participant,
                                               const char* graph_node) {
    Key key;
    std::vector<int> ranks;
    uint64_t number;
    bool across = false;
    if (mpi::Group* g = clique_->remote()) {
        // Across processes: a collective meets this process' ranks here and then the other processes through the
        // transport; a message to or from a rank of another process has its local end alone here; a message between
        // two ranks of this process is an in-process rendezvous (below).
        const bool p2p = call.kind == Kind::send || call.kind == Kind::recv;
        if (!p2p) {
            number = ++collectives_;
            key = {-1, -1, number};
            ranks = g->member(g->rank()).ranks;
            *participant = g->local_index(rank_);
            across = true;
        } else if (g->participant_of(call.root) != g->rank()) {
            if (call.kind == Kind::send) {
                number = ++sent_[static_cast<size_t>(call.root)];
                key = {rank_, call.root, number};
            } else {
                number = ++received_[static_cast<size_t>(call.root)];
                key = {call.root, rank_, number};
            }
            ranks = {rank_};
            *participant = 0;
            across = true;
        }
    }
    if (across) {
    } else if (call.kind == Kind::send) {
        number = ++sent_[static_cast<size_t>(call.root)];
        key = {rank_, call.root, number};
        ranks = {rank_, call.root};
        *participant = 0;
    } else if (call.kind == Kind::recv) {
        number = ++received_[static_cast<size_t>(call.root)];
        key = {call.root, rank_, number};
        ranks = {call.root, rank_};
        *participant = 1;
    } else {
        number = ++collectives_;
        key = {-1, -1, number};
        for (int r = 0; r < size(); ++r) ranks.push_back(r);
        *participant = rank_;
    }
    std::shared_ptr<Rendezvous> r = clique_->open(key, ranks, number, across);
    r->set_part(*participant, call, stream, stream_op, graph_node);
    return r;
}

namespace {
/// How long the caller of a collective started at its call polls it for its peers before leaving it to the progress
/// thread (and its stream to a part that waits for it): the caller, not an executor, is spinning, so less than an
/// executor's bound.
constexpr std::chrono::microseconds kStartSpin{10};
}  // namespace

/// A collective started at its call (Communicator::start_now): reports the transport's done to its stream, and is the
/// stream's part when it did not finish at the call (that part completes once done has come).
class Started final : public backend::JointStep {
public:
    explicit Started(std::shared_ptr<Clique> clique) : clique_(std::move(clique)) {}
    /// Readies it for collective `number` (`kind`, of `rank`), operation `stream_op` of the stream whose slot is `slot`.
    /// Only while nobody else holds it; `self` (itself) is held until done (the transport's job refers to it).
    void reset(Kind kind, uint64_t number, int rank, AsyncErrorSlot* slot, uint64_t stream_op,
               std::shared_ptr<Started> self) {
        // The previous use's done (its last reads of these fields) happens before: it released kDone.
        (void)state_.load(std::memory_order_acquire);
        kind_ = kind;
        number_ = number;
        rank_ = rank;
        slot_ = slot;
        stream_op_ = stream_op;
        self_ = std::move(self);
        state_.store(kPending, std::memory_order_relaxed);
    }
    void arrive_impl(int, backend::Workers&, std::function<void()> resume) noexcept override {
        resume_ = std::move(resume);
        int expected = kPending;
        if (!state_.compare_exchange_strong(expected, kWaiting, std::memory_order_acq_rel)) {  // done already
            std::function<void()> r = std::move(resume_);
            r();
        }
    }
    /// The transport's done (once; here or on the progress thread): the failure goes to the stream's slot (which
    /// outlives it: the stream's part waits for it), then the part resumes if it has arrived.
    void done(rtError_t code, const std::string& why, bool fatal) {
        if (code != RT_SUCCESS) {
            try {
                slot_->set(code, describe_collective(kind_, number_, *clique_, rank_, stream_op_, nullptr) + ": " + why);
            } catch (...) {
                slot_->set(code, {});
            }
            if (fatal)  // the processes' operations no longer agree: the communicator is failed from now on
                clique_->fail(code, format("collective #%llu: %s", static_cast<unsigned long long>(number_), why.c_str()));
        }
        std::shared_ptr<Started> self = std::move(self_);  // dropped last: this may be the last reference
        if (state_.exchange(kDone, std::memory_order_acq_rel) == kWaiting) {
            std::function<void()> r = std::move(resume_);
            r();  // nothing of this object is touched after it: the part may complete and drop it
        }
    }

private:
    static constexpr int kPending = 0, kWaiting = 1, kDone = 2;  // kWaiting: the part arrived (resume_ is set)
    const std::shared_ptr<Clique> clique_;
    std::atomic<int> state_{kPending};
    Kind kind_ = Kind::barrier;
    uint64_t number_ = 0, stream_op_ = 0;
    int rank_ = 0;
    AsyncErrorSlot* slot_ = nullptr;
    std::function<void()> resume_;
    std::shared_ptr<Started> self_;  // from reset until done
};

bool Communicator::start_now(const Call& call, Stream& stream, uint64_t stream_op) {
    mpi::Group* g = clique_->remote();
    if (!g || !shm::one_round(*g, call) || trace::on()) return false;
    // In order: every collective numbered before it has finished, and the communicator is healthy (otherwise the
    // queued path reports what happened, in stream order).
    if (g->finished_collective() != collectives_ || g->failure(nullptr) != RT_SUCCESS) return false;
    AsyncErrorSlot& slot = stream.errors();
    if (slot.failed()) return false;  // the queued path skips it and tells the peers
    backend::Queue& queue = stream.queue();
    if (!queue.hold_idle_impl()) return false;
    // Released on every way out; `pending`: the stream's part when the collective did not finish here.
    struct Release {
        backend::Queue& queue;
        std::shared_ptr<backend::JointStep> pending;
        ~Release() { queue.release_impl(pending); }
    } release{queue, nullptr};
    const uint64_t number = ++collectives_;
    try {
        // The previous one is used again once nothing else holds it (its part and its job are done with it).
        if (!started_ || started_.use_count() > 1) started_ = std::make_shared<Started>(clique_);
        started_->reset(call.kind, number, rank_, &slot, stream_op, started_);
        mpi::Op op;
        op.call = call;
        op.number = number;
        op.rank = rank_;
        op.done = [started = started_.get()](rtError_t code, const std::string& why, bool fatal) {
            started->done(code, why, fatal);  // alive: it holds itself until done
        };
        if (g->submit(std::move(op), kStartSpin, &started_job_)) return true;  // finished here: nothing is queued
        release.pending = started_;
    } catch (...) {  // out of host memory: the peers would wait for this collective, so the communicator fails
        slot.set(RT_ERROR_OUT_OF_MEMORY, "a collective ran out of host memory");
        clique_->fail(RT_ERROR_OUT_OF_MEMORY, format("collective #%llu ran out of host memory",
                                                     static_cast<unsigned long long>(number)));
    }
    return true;
}

std::shared_ptr<Communicator::SplitWait> Communicator::split(int color, int key) {
    if (native_) {
        auto w = std::make_shared<SplitWait>();
        w->clique = clique_;
        w->rank = rank_;
        w->parent = shared_from_this();
        w->color = color;
        w->key = key;
        if (!in_group()) make_native_split(*w);  // blocks until every rank has called it, as the library's does
        return w;
    }
    const uint64_t number = ++splits_;
    if (mpi::Group* remote = clique_->remote()) {
        // This process' ranks gather here; the last of them exchanges their colors and keys with the other processes
        // (blocking, as NCCL's split does) and hands every local rank its new clique. The others wait for it in
        // finish_split (an rtCommSplit inside a group: at rtGroupEnd).
        const std::vector<int>& locals = remote->member(remote->rank()).ranks;
        auto g = clique_->split(number);
        std::unique_lock lock(g->mutex);
        if (g->count == 0)  // the other processes' ranks are theirs to gather: a timeout names the local ones missing
            for (int r = 0; r < size(); ++r)
                if (std::find(locals.begin(), locals.end(), r) == locals.end()) g->joined[static_cast<size_t>(r)] = true;
        g->joined[static_cast<size_t>(rank_)] = true;
        g->colors[static_cast<size_t>(rank_)] = color;
        g->keys[static_cast<size_t>(rank_)] = key;
        if (++g->count == static_cast<int>(locals.size())) {
            std::vector<mpi::Group::SplitPart> parts;
            for (int r : locals) parts.push_back({r, g->colors[static_cast<size_t>(r)], g->keys[static_cast<size_t>(r)]});
            lock.unlock();
            mpi::Group::SplitResult result;
            rtError_t code = RT_SUCCESS;
            std::string why;
            try {
                result = remote->split(number, parts);
            } catch (const Error& e) {
                code = e.code();
                why = e.what();
            }
            lock.lock();
            if (code != RT_SUCCESS) {
                g->code = code;
                g->why = why;
            } else {
                std::map<int, std::shared_ptr<Clique>> made;  // per color: the clique this process' ranks share
                for (auto& [c, info] : result.colors)
                    made[c] = std::make_shared<Clique>(info.devices, clique_->timeout(), clique_->generation(), info.group);
                for (auto& [r, placed] : result.placed) {
                    g->cliques[static_cast<size_t>(r)] = made[placed.first];
                    g->ranks[static_cast<size_t>(r)] = placed.second;
                }
                g->complete = true;
            }
            g->cv.notify_all();
            lock.unlock();
            clique_->forget_split(number);  // every local rank has joined: no one looks it up again
        }
        return ours_split(clique_, rank_, std::move(g), number);
    }
    auto g = clique_->split(number);
    {
        std::lock_guard lock(g->mutex);
        g->joined[static_cast<size_t>(rank_)] = true;
        g->colors[static_cast<size_t>(rank_)] = color;
        g->keys[static_cast<size_t>(rank_)] = key;
        if (++g->count == size()) {
            // The last rank forms the new cliques: by color, ordered by (key, old rank).
            std::map<int, std::vector<int>> members;
            for (int r = 0; r < size(); ++r)
                if (g->colors[static_cast<size_t>(r)] != RT_COMM_SPLIT_NOCOLOR) members[g->colors[static_cast<size_t>(r)]].push_back(r);
            for (auto& [c, list] : members) {
                std::stable_sort(list.begin(), list.end(), [&](int a, int b) {
                    return g->keys[static_cast<size_t>(a)] < g->keys[static_cast<size_t>(b)];
                });
                std::vector<int> devices;
                for (int r : list) devices.push_back(clique_->device(r));
                auto nc = std::make_shared<Clique>(devices, clique_->timeout(), clique_->generation());
                for (size_t i = 0; i < list.size(); ++i) {
                    g->cliques[static_cast<size_t>(list[i])] = nc;
                    g->ranks[static_cast<size_t>(list[i])] = static_cast<int>(i);
                }
            }
            g->complete = true;
            g->cv.notify_all();
            clique_->forget_split(number);  // every rank has joined: no one looks it up again
        }
    }
    return ours_split(clique_, rank_, std::move(g), number);
}

std::shared_ptr<Communicator> finish_split(const std::shared_ptr<Communicator::SplitWait>& w) {
    if (w->parent) {
        int rank = -1, count = 0;
        if (!w->native || !w->native->shape_impl(&rank, &count)) return nullptr;  // no color
        std::vector<int> devices(static_cast<size_t>(count), -1);  // the other ranks' devices are theirs
        devices[static_cast<size_t>(rank)] = w->parent->device_index();
        auto c = std::make_shared<Communicator>(
            std::make_shared<Clique>(std::move(devices), w->clique->timeout(), runtime().generation()), rank);
        c->set_native(std::move(w->native));
        return c;
    }
    auto& g = *w->gathering;
    std::unique_lock lock(g.mutex);
    try {
        g.wait(lock, w->deadline, w->clique->timeout(), "rtCommSplit");
    } catch (...) {
        lock.unlock();
        w->clique->forget_split(w->number);
        throw;
    }
    auto clique = g.cliques[static_cast<size_t>(w->rank)];
    const int rank = g.ranks[static_cast<size_t>(w->rank)];
    lock.unlock();
    if (!clique) return nullptr;
    return std::make_shared<Communicator>(std::move(clique), rank);
}

Communicator& live(rtComm_t comm, Communicator* c) {
    if (!comm) fail(RT_ERROR_INVALID_HANDLE, "comm is NULL (expected a communicator from rtCommInitAll, "
                                             "rtCommInitRank or rtCommSplit)");
    if (!c) fail(RT_ERROR_INVALID_HANDLE, "comm %p is not a live communicator (destroyed, aborted, or never created)",
                 static_cast<void*>(comm));
    if (c->clique().generation() != runtime().generation())
        fail(RT_ERROR_INVALID_HANDLE, "comm %p belongs to a runtime that was finalized (rtFinalize)",
             static_cast<void*>(comm));
    return *c;
}

std::shared_ptr<Communicator> lookup(rtComm_t comm) {
    auto c = comm ? handles().find(reinterpret_cast<uint64_t>(comm)) : nullptr;
    live(comm, c.get());
    return c;
}

CommTable::Borrow borrow(rtComm_t comm) { return handles().borrow(reinterpret_cast<uint64_t>(comm)); }

rtComm_t publish(std::shared_ptr<Communicator> comm) {
    Communicator& c = *comm;
    auto handle = reinterpret_cast<rtComm_t>(handles().insert(std::move(comm)));
    c.set_label(format("rank %d of communicator #%llu (%d ranks, on %s)", c.rank(),
                       static_cast<unsigned long long>(c.clique().number()), c.size(), c.device().label().c_str()));
    return handle;
}

std::shared_ptr<Communicator> unpublish(rtComm_t comm) { return handles().erase(reinterpret_cast<uint64_t>(comm)); }

namespace {
/// The collectives library of `device` (null: the in-process collectives, for devices the host addresses); throws
/// NOT_SUPPORTED naming the device and what is missing.
backend::NativeCollectives* library_of(int device) {
    CoreDevice& d = runtime().device(device);
    try {
        if (backend::NativeCollectives* lib = d.impl().collectives_impl()) return lib;
    } catch (const Error& e) {
        fail(e.code(), "%s: %s", d.label().c_str(), e.what());
    }
    if (!d.info().host_addressable)
        fail(RT_ERROR_NOT_SUPPORTED, "%s: this backend has no collectives library; in-process collectives run on "
             "devices whose memory the host can address (cpu devices)", d.label().c_str());
    return nullptr;
}

/// rtCommInitAll over a library: one clique for the sizes and names, each rank with its library communicator.
std::vector<std::shared_ptr<Communicator>> create_all_native(backend::NativeCollectives& lib,
                                                             const std::vector<int>& devices) {
    std::vector<backend::Device*> impls;
    for (int d : devices) {
        if (library_of(d) != &lib)
            fail(RT_ERROR_NOT_SUPPORTED, "devices[] mixes %s and %s: the ranks of one communicator use one collectives "
                 "library (%s)", runtime().device(devices[0]).label().c_str(), runtime().device(d).label().c_str(),
                 lib.name());
        impls.push_back(&runtime().device(d).impl());
    }
    std::vector<std::unique_ptr<backend::NativeComm>> natives = lib.init_all_impl(impls);
    auto clique = std::make_shared<Clique>(devices, timeout_from_env(), runtime().generation());
    std::vector<std::shared_ptr<Communicator>> out;
    for (size_t r = 0; r < devices.size(); ++r) {
        out.push_back(std::make_shared<Communicator>(clique, static_cast<int>(r)));
        out.back()->set_native(std::move(natives[r]));
    }
    return out;
}

/// The calls of one rank on a library: its calls in order, bracketed as a group when several (an exchange).
void queue_native(Communicator& c, Stream& s, std::span<const Call> calls) {
    backend::NativeCollectives* lib = c.device().impl().collectives_impl();
    if (calls.size() > 1) lib->group_start_impl();
    try {
        for (const Call& call : calls) c.native()->collective_impl(call, s.queue());
    } catch (...) {
        if (calls.size() > 1) lib->group_end_impl();
        throw;
    }
    if (calls.size() > 1) lib->group_end_impl();
}
}  // namespace

std::vector<std::shared_ptr<Communicator>> create_all(const std::vector<int>& devices) {
    if (!devices.empty())
        if (backend::NativeCollectives* lib = library_of(devices[0])) return create_all_native(*lib, devices);
    for (int d : devices)
        if (library_of(d))
            fail(RT_ERROR_NOT_SUPPORTED, "devices[] mixes %s and %s: the ranks of one communicator use one collectives "
                 "library", runtime().device(devices[0]).label().c_str(), runtime().device(d).label().c_str());
    auto clique = std::make_shared<Clique>(devices, timeout_from_env(), runtime().generation());
    std::vector<std::shared_ptr<Communicator>> out;
    for (int r = 0; r < static_cast<int>(devices.size()); ++r) out.push_back(std::make_shared<Communicator>(clique, r));
    return out;
}

void make_unique_id(rtCommUniqueId* id) {
    if (backend::NativeCollectives* lib = library_of(current_device_index())) {
        lib->unique_id_impl(id->internal, sizeof id->internal);
        return;
    }
    static std::atomic<uint64_t> counter{0};
    static const uint64_t salt = std::random_device{}();
    std::memset(id, 0, sizeof *id);
    IdLayout layout{};
    std::memcpy(layout.magic, kIdMagic, sizeof kIdMagic);
    layout.transport = static_cast<uint32_t>(Transport::in_process);
    layout.pid = static_cast<uint32_t>(::getpid());
    layout.nonce = (salt << 32) ^ ++counter;
    layout.creator_world = -1;
    if (mpi::launched_by_mpirun()) {  // the id is broadcast to the other processes of the job (NCCL's pattern)
        layout.transport = static_cast<uint32_t>(Transport::mpi);
        layout.creator_world = mpi::api().world_rank;
        layout.nonce ^= static_cast<uint64_t>(layout.pid) << 8;
    }
    std::memcpy(id->internal, &layout, sizeof layout);
}

std::shared_ptr<Communicator> join_rank(const rtCommUniqueId& id, int nranks, int rank, int device) {
    IdLayout layout;
    std::memcpy(&layout, id.internal, sizeof layout);
    if (backend::NativeCollectives* lib = library_of(device)) {
        if (std::memcmp(layout.magic, kIdMagic, sizeof kIdMagic) == 0)
            fail(RT_ERROR_INVALID_VALUE, "unique_id was made by rtCommGetUniqueId with a device current whose "
                 "collectives are in-process, but %s uses %s: make the id with a device of that kind current",
                 runtime().device(device).label().c_str(), lib->name());
        if (nranks < 1) fail(RT_ERROR_INVALID_VALUE, "nranks %d must be at least 1", nranks);
        if (rank < 0 || rank >= nranks) fail(RT_ERROR_INVALID_VALUE, "rank %d is out of range (0 .. %d)", rank, nranks - 1);
        auto native = lib->init_rank_impl(nranks, id.internal, sizeof id.internal, rank, runtime().device(device).impl());
        std::vector<int> devices(static_cast<size_t>(nranks), -1);  // the other ranks' devices are theirs
        devices[static_cast<size_t>(rank)] = device;
        auto c = std::make_shared<Communicator>(
            std::make_shared<Clique>(std::move(devices), timeout_from_env(), runtime().generation()), rank);
        c->set_native(std::move(native));
        return c;
    }
    if (std::memcmp(layout.magic, kIdMagic, sizeof kIdMagic) != 0)
        fail(RT_ERROR_INVALID_VALUE, "unique_id is not an id made by rtCommGetUniqueId");
    if (layout.transport == static_cast<uint32_t>(Transport::mpi)) {
        if (nranks < 1) fail(RT_ERROR_INVALID_VALUE, "nranks %d must be at least 1", nranks);
        if (rank < 0 || rank >= nranks) fail(RT_ERROR_INVALID_VALUE, "rank %d is out of range (0 .. %d)", rank, nranks - 1);
        const double timeout = timeout_from_env();
        auto group = mpi::join(layout.nonce, layout.creator_world, nranks, rank, device, timeout);
        // This process' ranks share one clique over the group: the first to get here makes it, the last takes the
        // entry away.
        static std::mutex cliques_mutex;
        static std::map<const mpi::Group*, std::pair<std::shared_ptr<Clique>, size_t>> cliques;
        std::lock_guard lock(cliques_mutex);
        auto& [clique, left] = cliques[group.get()];
        if (!clique) {
            std::vector<int> devices;
            for (int r = 0; r < group->nranks(); ++r) devices.push_back(group->device(r));
            left = group->member(group->rank()).ranks.size();
            clique = std::make_shared<Clique>(std::move(devices), timeout, runtime().generation(), group);
        }
        auto c = std::make_shared<Communicator>(clique, rank);
        if (--left == 0) cliques.erase(group.get());
        return c;
    }
    if (layout.transport != static_cast<uint32_t>(Transport::in_process))
        fail(RT_ERROR_NOT_SUPPORTED, "unique_id names transport %u, which this build does not have (it has the "
             "in-process (1) and MPI (2) transports)", layout.transport);
    if (layout.pid != static_cast<uint32_t>(::getpid()))
        fail(RT_ERROR_NOT_SUPPORTED, "unique_id was made by process %u, not this one (%d), outside mpirun: ranks in "
             "other processes use the MPI transport, whose ids rtCommGetUniqueId makes in processes started by mpirun",
             layout.pid, static_cast<int>(::getpid()));
    if (nranks < 1) fail(RT_ERROR_INVALID_VALUE, "nranks %d must be at least 1", nranks);
    if (rank < 0 || rank >= nranks) fail(RT_ERROR_INVALID_VALUE, "rank %d is out of range (0 .. %d)", rank, nranks - 1);
    const double timeout = timeout_from_env();
    std::shared_ptr<InitGathering> g;
    {
        std::lock_guard lock(g_inits_mutex);
        auto& slot = g_inits[layout.nonce];
        if (!slot) slot = std::make_shared<InitGathering>(nranks);
        g = slot;
    }
    std::unique_lock lock(g->mutex);
    if (g->code != RT_SUCCESS) fail(g->code, "%s", g->why.c_str());
    if (static_cast<int>(g->joined.size()) != nranks) {
        // The ranks cannot agree: every one of them is refused now (those waiting too), rather than waiting for a
        // timeout.
        g->code = RT_ERROR_INVALID_VALUE;
        g->why = format("rtCommInitRank: rank %d passed nranks %d, but the ranks that joined this id before passed %zu",
                        rank, nranks, g->joined.size());
        g->cv.notify_all();
        fail(g->code, "%s", g->why.c_str());
    }
    if (g->joined[static_cast<size_t>(rank)])
        fail(RT_ERROR_INVALID_VALUE, "rank %d already joined this unique id (each rank joins once)", rank);
    g->joined[static_cast<size_t>(rank)] = true;
    g->devices[static_cast<size_t>(rank)] = device;
    if (++g->count == nranks) {
        g->clique = std::make_shared<Clique>(g->devices, timeout, runtime().generation());
        g->complete = true;
        g->cv.notify_all();
    }
    auto forget = [&] {
        std::lock_guard glock(g_inits_mutex);
        auto it = g_inits.find(layout.nonce);
        if (it != g_inits.end() && it->second == g) g_inits.erase(it);
    };
    try {
        g->wait(lock, deadline_after(timeout), timeout, "rtCommInitRank");
    } catch (...) {
        lock.unlock();
        forget();
        throw;
    }
    auto clique = g->clique;
    lock.unlock();
    forget();
    return std::make_shared<Communicator>(std::move(clique), rank);
}

void abort(Communicator& comm) {
    if (comm.native()) comm.native()->abort_impl();
    comm.clique().fail(RT_ERROR_ILLEGAL_STATE, format("the communicator was aborted by rank %d (rtCommAbort)",
                                                      comm.rank()));
}

rtError_t async_error(Communicator& comm, std::string* message) {
    if (comm.native())
        if (rtError_t e = comm.native()->async_error_impl(message); e != RT_SUCCESS) return e;
    if (rtError_t e = comm.clique().failure(message); e != RT_SUCCESS) return e;
    // Across processes: what a peer recorded in the shared segment (this rank may have nothing in flight to see it),
    // or what an operation in flight learnt.
    if (mpi::Group* g = comm.clique().remote()) {
        g->take_recorded_failure();
        return g->failure(message);
    }
    return RT_SUCCESS;
}

// ---------------------------------------------------------------- submission and groups

namespace {
/// Several parts of one rank queued as one step (the sends and receives of a group): it completes once every part
/// has.
class Fused final : public backend::JointStep {
public:
    std::vector<std::pair<std::shared_ptr<Rendezvous>, int>> parts;
    void arrive_impl(int, backend::Workers& workers, std::function<void()> resume) noexcept override {
        auto left = std::make_shared<std::atomic<size_t>>(parts.size());
        auto done = std::make_shared<std::function<void()>>(std::move(resume));
        for (auto& [r, p] : parts)
            r->arrive_impl(p, workers, [left, done] {
                if (left->fetch_sub(1) == 1) (*done)();
            });
    }
};

struct Pending {
    std::shared_ptr<Communicator> comm;
    std::shared_ptr<Stream> stream;
    Call call;
};
struct PendingSplit {
    std::shared_ptr<Communicator::SplitWait> wait;
    rtComm_t* out;
};
struct GroupState {
    int depth = 0;
    std::vector<Pending> calls;
    std::vector<PendingSplit> splits;
};
thread_local GroupState t_group;

bool point_to_point(Kind k) { return k == Kind::send || k == Kind::recv; }

/// A collective's span name in the trace.
const char* trace_name(Kind kind) {
    switch (kind) {
        case Kind::all_reduce: return "all_reduce";
        case Kind::broadcast: return "broadcast";
        case Kind::reduce: return "reduce";
        case Kind::all_gather: return "all_gather";
        case Kind::reduce_scatter: return "reduce_scatter";
        case Kind::all_to_all: return "all_to_all";
        case Kind::send: return "send";
        case Kind::recv: return "recv";
        case Kind::barrier: return "barrier";
    }
    return "collective";
}

/// This rank's buffer of `call` in bytes (what its span carries): the count the call names, in its type.
uint64_t call_bytes(const Call& call) { return static_cast<uint64_t>(call.count) * element_size(call.type); }

/// Queues the rank's `calls` (one, or a fused run of sends and receives) on `s` as operation `op`.
void queue_calls(Communicator& c, Stream& s, uint64_t op, std::span<const Call> calls, const char* graph_node) {
    if (c.native()) return queue_native(c, s, calls);
    const Call& first = calls.front();
    if (calls.size() == 1) {
        int participant = 0;
        auto r = c.join(first, s, op, &participant, graph_node);
        trace::enqueue([&] { return trace::collective_op(s, op, trace_name(first.kind), call_bytes(first), c.rank(),
                                                         c.size(), r->number(), type_name(first.type)); },
                       [&](const trace::Key& traced) { s.queue().joint_impl(r, participant, traced); });
        return;
    }
    // A fused exchange (sends and receives of one group) is one operation of the stream: one span, its bytes summed.
    auto fused = std::make_shared<Fused>();
    uint64_t bytes = 0;
    for (const Call& call : calls) {
        int participant = 0;
        auto r = c.join(call, s, op, &participant, graph_node);
        fused->parts.emplace_back(std::move(r), participant);
        bytes += call_bytes(call);
    }
    trace::enqueue([&] { return trace::collective_op(s, op, "send/recv", bytes, c.rank(), c.size(),
                                                     fused->parts.front().first->number(), type_name(first.type)); },
                   [&](const trace::Key& traced) { s.queue().joint_impl(fused, 0, traced); });
}

/// Queues one rank's `calls` on `s` as one operation (several: a fused run of sends and receives).
void enqueue(Communicator& comm, Stream& s, std::span<const Call> calls) {
    if (s.capture()) [[unlikely]] {
        auto captured = std::make_shared<Collective>(Collective{comm.shared_from_this(), {calls.begin(), calls.end()}});
        if (graph::capture_collective(s, captured, api_name(captured->calls.front().kind))) return;
    }
    const uint64_t op = s.next_op();
    if (calls.size() == 1 && !comm.native() && comm.start_now(calls.front(), s, op)) return;
    queue_calls(comm, s, op, calls, nullptr);
}
}  // namespace

void queue_collective(const Collective& c, Stream& stream, uint64_t stream_op, const std::string& graph_node) {
    queue_calls(*c.comm, stream, stream_op, c.calls, graph_node.c_str());
}

void submit(Communicator& comm, const Call& call, Stream& stream, rtStream_t handle) {
    if (t_group.depth > 0) {
        t_group.calls.push_back({comm.shared_from_this(), handle ? runtime().stream(handle) : comm.device().default_stream(),
                                 call});
        return;
    }
    enqueue(comm, stream, {&call, 1});
}

void keep_split(std::shared_ptr<Communicator::SplitWait> wait, rtComm_t* out) {
    t_group.splits.push_back({std::move(wait), out});
}

void group_start() { ++t_group.depth; }
bool in_group() { return t_group.depth > 0; }

void group_end() {
    if (t_group.depth == 0) fail(RT_ERROR_INVALID_VALUE, "rtGroupEnd without a matching rtGroupStart on this thread");
    if (--t_group.depth > 0) return;
    std::vector<Pending> calls = std::move(t_group.calls);
    std::vector<PendingSplit> splits = std::move(t_group.splits);
    t_group.calls.clear();
    t_group.splits.clear();
    // Calls on a library's communicators are made inside its group (ncclGroupStart/End): one thread may drive
    // several ranks, which NCCL only allows in a group.
    backend::NativeCollectives* lib = nullptr;
    for (const Pending& p : calls)
        if (p.comm->native() && !lib) lib = p.comm->device().impl().collectives_impl();
    for (const PendingSplit& s : splits)
        if (s.wait->parent && !lib) lib = s.wait->parent->device().impl().collectives_impl();
    if (lib) lib->group_start_impl();
    try {
        // Consecutive sends/receives of one communicator on one stream go as one step.
        for (size_t i = 0; i < calls.size();) {
            size_t j = i + 1;
            if (point_to_point(calls[i].call.kind))
                while (j < calls.size() && point_to_point(calls[j].call.kind) && calls[j].comm == calls[i].comm &&
                       calls[j].stream == calls[i].stream)
                    ++j;
            std::vector<Call> run;
            for (size_t k = i; k < j; ++k) run.push_back(calls[k].call);
            enqueue(*calls[i].comm, *calls[i].stream, run);
            i = j;
        }
        for (PendingSplit& s : splits)  // one thread may split several ranks: inside the library's group
            if (s.wait->parent) make_native_split(*s.wait);
    } catch (...) {
        if (lib) {
            try {
                lib->group_end_impl();
            } catch (...) {  // the first failure is the one to report
            }
        }
        throw;
    }
    if (lib) lib->group_end_impl();
    std::string first_failure;
    rtError_t code = RT_SUCCESS;
    for (auto& s : splits) {
        try {
            auto c = finish_split(s.wait);
            *s.out = c ? publish(std::move(c)) : nullptr;
        } catch (const Error& e) {
            *s.out = nullptr;
            if (code == RT_SUCCESS) {
                code = e.code();
                first_failure = e.what();
            }
        }
    }
    if (code != RT_SUCCESS) fail(code, "%s", first_failure.c_str());
}

}  // namespace rt::comm
