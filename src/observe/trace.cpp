// The trace recorder: per-thread buffers filled without contention, one writer thread per trace that formats them as
// Chrome trace-event JSON every ~100 ms and at stop, and the exit handler that completes the file.
#include "observe/trace.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/event.hpp"
#include "core/spin_lock.hpp"
#include "core/stream.hpp"
#include "observe/log.hpp"
#include "runtime/profiler.h"

namespace rt::trace {

namespace detail {
std::atomic<bool> g_on{false};
std::atomic<unsigned> g_flags{0};
std::atomic<bool> g_tsc{false};
}  // namespace detail

namespace {

constexpr unsigned kKnownFlags = RT_PROFILER_NO_API_CALLS | RT_PROFILER_NO_MEMORY;
constexpr uint32_t kHostTrackBase = 1000000;  // a host thread's tid: this + its OS thread id
constexpr auto kFlushPeriod = std::chrono::milliseconds(100);
constexpr size_t kRememberedRecords = 1 << 16;  // records a later wait may still name (flows)
constexpr int kFlowRetries = 3;                 // flushes a wait waits for its record to show up
// Flushes an operation's stamps wait for its description (written before the operation was queued, so at most one
// flush later: the writer may read the stamping thread's buffer before the describing thread's); then they are an
// operation described in an earlier trace, dropped.
constexpr int kStampRetries = 3;

std::atomic<uint32_t> g_tracks{0};
std::atomic<uint64_t> g_ids{0};
// now() and CLOCK_MONOTONIC when the process's first trace started (ns_per_tick's baseline); set before g_on.
std::atomic<int64_t> g_calibration_ticks{0};
std::atomic<int64_t> g_calibration_ns{0};

// Backends' resolvers (trace.hpp), called by the writers under g_resolvers_mutex. Never destroyed: a queue may
// unregister during the process's exit.
std::mutex& g_resolvers_mutex = *new std::mutex;
std::vector<std::pair<uint64_t, Resolver>>& g_resolvers = *new std::vector<std::pair<uint64_t, Resolver>>;
uint64_t g_resolver_ids = 0;  // g_resolvers_mutex
/// The last stamps of resolvers removed (remove_resolver), for the writer's next flush (g_resolvers_mutex).
struct LateStamps final : Sink {
    struct Stamp {
        Key key;
        int64_t start_ns, end_ns;
        Status status;
    };
    std::vector<Stamp> stamps;
    void finish(const Key& key, int64_t start_ns, int64_t end_ns, Status status) noexcept override {
        if (!key) return;
        try {
            stamps.push_back({key, start_ns, end_ns, status});
        } catch (...) {  // out of memory: the span is lost
        }
    }
};
LateStamps& g_late = *new LateStamps;

/// One pass over the resolvers; returns what they report outstanding.
size_t run_resolvers(Sink& sink, bool final) {
    std::lock_guard lock(g_resolvers_mutex);
    size_t outstanding = 0;
    for (auto& [id, resolve] : g_resolvers) outstanding += resolve(sink, final);
    for (const LateStamps::Stamp& st : g_late.stamps) sink.finish(st.key, st.start_ns, st.end_ns, st.status);
    g_late.stamps.clear();
    return outstanding;
}

int64_t monotonic_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

/// Whether the kernel keeps its clock on the TSC (then it trusts it to be invariant and synchronised).
bool kernel_clock_is_tsc() {
#if defined(__x86_64__)
    FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f) return false;
    char name[32] = {};
    const bool tsc = std::fgets(name, sizeof name, f) && std::strncmp(name, "tsc", 3) == 0 &&
                     (name[3] == '\n' || name[3] == '\0');
    std::fclose(f);
    return tsc;
#else
    return false;
#endif
}

int os_tid() { return static_cast<int>(::syscall(SYS_gettid)); }

/// Records in fixed chunks: a buffer grows without copying, and the writer hands drained chunks back for reuse
/// (kFreeChunks kept), so a thread that records steadily touches no fresh memory.
struct Chunk {
    static constexpr size_t kCapacity = 512;
    std::atomic<size_t> count{0};  // records published: stored (release) by the owning thread, read by the writer
    Op ops[kCapacity];
};
constexpr size_t kFreeChunks = 256;
// Never destroyed: a thread may give its chunks back during the process's exit.
std::mutex& g_chunks_mutex = *new std::mutex;
std::vector<Chunk*>& g_free_chunks = *new std::vector<Chunk*>;

Chunk* take_chunk() noexcept {
    Chunk* c = nullptr;
    {
        std::lock_guard lock(g_chunks_mutex);
        if (!g_free_chunks.empty()) {
            c = g_free_chunks.back();
            g_free_chunks.pop_back();
        }
    }
    if (!c) c = new (std::nothrow) Chunk;
    if (c) c->count.store(0, std::memory_order_relaxed);  // published to the writer by the buffer's mutex
    return c;
}

void give_back(Chunk* c) noexcept {
    {
        std::lock_guard lock(g_chunks_mutex);
        if (g_free_chunks.size() < kFreeChunks) {
            try {
                g_free_chunks.push_back(c);
                return;
            } catch (...) {
            }
        }
    }
    delete c;
}

/// What one thread recorded for one trace. Only the thread writes records: it fills `current` slot by slot and
/// publishes each with a release store of the chunk's count (no lock, no atomic read-modify-write); a full chunk is
/// handed to `full` under `mutex`, once per kCapacity records. The writer takes `full` whole and reads `current` up
/// to its published count without taking it.
struct ThreadBuffer {
    std::mutex mutex;          // full, and which chunk is current
    std::vector<Chunk*> full;  // filled, in order; the writer's once taken
    Chunk* current = nullptr;  // being filled (after `full`)
    size_t used = 0;           // the owning thread's: slots of `current` written
    uint64_t session = 0;
    int tid = 0;
    std::atomic<bool> alive{true};  // false once the thread exited: the writer forgets it after the last drain
    // The writer's: how far it read the chunk that was current at its last flush.
    const Chunk* reading = nullptr;
    size_t read = 0;

    /// The next free slot (owning thread), or null when no chunk can be had.
    Op* reserve() noexcept {
        if (!current || used == Chunk::kCapacity) [[unlikely]] {
            Chunk* fresh = take_chunk();
            if (!fresh) return nullptr;
            std::lock_guard lock(mutex);
            try {
                if (current) full.push_back(current);
            } catch (...) {
                give_back(fresh);
                return nullptr;
            }
            current = fresh;
            used = 0;
        }
        return &current->ops[used];
    }
    /// Makes the slot reserve() returned visible to the writer (owning thread).
    void publish() noexcept { current->count.store(++used, std::memory_order_release); }

    ~ThreadBuffer() {
        for (Chunk* c : full) give_back(c);
        if (current) give_back(current);
    }
};

/// An operation's stamps waiting for its description (or the flush that gives up on it).
struct Stamps {
    Key key;  // enqueue_ns unused
    int64_t start_ns;
    int64_t end_ns;
    Status status;
    int age;
};

/// What joins an operation's stamps to its description: its track, node (Key::node) and operation number.
struct JoinKey {
    uint32_t track;
    uint32_t node;
    uint64_t op;
    bool operator==(const JoinKey&) const = default;
};
struct JoinHash {
    size_t operator()(const JoinKey& k) const noexcept {
        return std::hash<uint64_t>{}(k.op * 0x9e3779b97f4a7c15ull ^ (uint64_t(k.node) << 32 | k.track));
    }
};
/// A description's join key (a graph node of a core replay carries its index in Op::id).
JoinKey join_key(const Op& op) {
    return {op.track, op.cat == Cat::graph_node ? static_cast<uint32_t>(op.id + 1) : 0u, op.op};
}

/// One trace being written: its file, its threads' buffers, its writer thread.
class Session : public std::enable_shared_from_this<Session> {
public:
    Session(uint64_t id, std::string path, int fd, unsigned flags)
        : id_(id), path_(std::move(path)), fd_(fd), flags_(flags), pid_(static_cast<int>(::getpid())),
          t0_(now()) {}

    uint64_t id() const { return id_; }
    int pid() const { return pid_; }
    const std::string& path() const { return path_; }
    int64_t t0() const { return t0_; }

    void begin() {
        out_.push_back('[');  // the array opens; emit_now writes it with the first event
        emit_now(format("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":"
                        "\"runtime %d\"}}", pid_, pid_));
        // The thread holds the session: stop() drops the global reference before the writer is done with it.
        thread_ = std::thread([self = shared_from_this()] { self->run(); });
    }

    void add(std::shared_ptr<ThreadBuffer> buffer) {
        std::lock_guard lock(buffers_mutex_);
        buffers_.push_back(std::move(buffer));
    }

    /// Asks the writer to write what was recorded, complete the file and exit; the caller joins it (never under a
    /// lock the writer takes).
    std::thread request_stop() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        cv_.notify_all();
        return std::move(thread_);
    }

private:
    void run() {
        std::unique_lock lock(mutex_);
        while (!stopping_) {
            cv_.wait_for(lock, kFlushPeriod, [this] { return stopping_; });
            lock.unlock();
            flush(false);
            lock.lock();
        }
        lock.unlock();
        flush(true);
        out_ = "\n]\n";
        write_out();
        ::close(fd_);
        fd_ = -1;
    }

    /// Drains every thread's buffer, joins the stamps of operations to their descriptions, formats and writes what
    /// is complete. `last`: flows whose record never showed, descriptions never stamped (operations still queued) and
    /// stamps never described are dropped.
    void flush(bool last) {
        std::vector<std::shared_ptr<ThreadBuffer>> buffers;
        {
            std::lock_guard lock(buffers_mutex_);
            buffers = buffers_;
        }
        out_.clear();
        measure_rate();
        // Resolvers stamp first: the descriptions of what they stamp were published before the operations were
        // queued, so this drain reads them. At a stop, what the GPU still runs gets kStopWaitMs to complete.
        if (last) {
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kStopWaitMs);
            while (run_resolvers(sink_, false) > 0 && std::chrono::steady_clock::now() < until)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        run_resolvers(sink_, last);
        std::vector<const ThreadBuffer*> drained;  // dead before their drain: forgotten after it
        for (const auto& b : buffers) {
            const bool dead = !b->alive.load(std::memory_order_acquire);  // then everything it wrote is published
            const Chunk* current;
            {
                std::lock_guard lock(b->mutex);
                taken_.swap(b->full);  // a member, not a local: a child forked meanwhile still reaches them
                current = b->current;
            }
            for (Chunk* c : taken_) {
                read_chunk(*c, c == b->reading ? b->read : 0);
                if (c == b->reading) b->reading = nullptr;
            }
            for (Chunk*& c : taken_) give_back(std::exchange(c, nullptr));
            taken_.clear();
            if (current) {
                const size_t from = current == b->reading ? b->read : 0;
                b->reading = current;
                b->read = read_chunk(*current, from);
            }
            if (dead) drained.push_back(b.get());
        }
        if (!drained.empty()) {
            std::lock_guard lock(buffers_mutex_);
            std::erase_if(buffers_, [&](const auto& b) {
                return std::find(drained.begin(), drained.end(), b.get()) != drained.end();
            });
        }
        // Stamps to their descriptions; what completes, records first (a wait of this batch may depend on a record
        // completed in it).
        std::erase_if(stamps_, [&](Stamps& st) {
            auto it = described_.find(JoinKey{st.key.track, st.key.node, st.key.op});
            if (it == described_.end()) return last || ++st.age > kStampRetries;
            Op& op = it->second;
            op.start_ns = st.start_ns;
            op.end_ns = st.end_ns;
            op.status = st.status;
            if (op.flow_kind == Flow::start) remember_record(op);
            completed_.push_back(op);
            described_.erase(it);
            return true;
        });
        for (const Op& op : completed_) format_op(op);
        completed_.clear();
        if (last) described_.clear();
        resolve_flows(last);
        write_out();
    }

    /// Takes the records [from, published) of `c`: complete ones are formatted, descriptions and stamps kept for
    /// the join. Returns how far it read.
    size_t read_chunk(const Chunk& c, size_t from) {
        const size_t n = c.count.load(std::memory_order_acquire);
        for (size_t i = from; i < n; ++i) {
            const Op& op = c.ops[i];
            switch (op.cat) {
                case Cat::ran:
                    stamps_.push_back({Key{op.track, static_cast<uint32_t>(op.id), op.op, 0}, op.start_ns, op.end_ns,
                                       op.status, 0});
                    break;
                case Cat::cancel:
                    described_.erase(JoinKey{op.track, static_cast<uint32_t>(op.id), op.op});
                    break;
                case Cat::api:
                case Cat::track:
                case Cat::counter:
                    format_op(op);
                    break;
                default:
                    if (op.start_ns || op.end_ns) format_op(op);  // complete when written (submit, host_span)
                    else described_.insert_or_assign(join_key(op), op);
                    break;
            }
        }
        return n;
    }

    void emit(const std::string& event) {
        out_ += first_ ? "\n" : "\n,";
        out_ += event;
        first_ = false;
    }
    void emit_now(const std::string& event) {  // begin(): before the writer runs
        emit(event);
        write_out();
    }

    /// Writes out_ in one system call (a program killed meanwhile leaves whole events: no stdio buffer splits
    /// them), retrying what a short write left; then clears it. A failing disk loses the rest of the trace only.
    void write_out() {
        size_t done = 0;
        while (done < out_.size() && fd_ >= 0) {
            const ssize_t n = ::write(fd_, out_.data() + done, out_.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            done += static_cast<size_t>(n);
        }
        out_.clear();
    }

    /// Ticks of now() to microseconds: from the trace's start (us) or a difference (us_between). The rate is measured
    /// at each flush against CLOCK_MONOTONIC since the start (1 for a clock that counts nanoseconds already).
    double us(int64_t ticks) const { return static_cast<double>(ticks - t0_) * ns_per_tick_ / 1000.0; }
    double us_between(int64_t from, int64_t to) const { return static_cast<double>(to - from) * ns_per_tick_ / 1000.0; }
    void measure_rate() { ns_per_tick_ = ns_per_tick(); }

    static void escape(std::string& out, const char* text) {
        for (const char* p = text; *p; ++p) {
            const unsigned char c = static_cast<unsigned char>(*p);
            if (c == '"' || c == '\\') {
                out += '\\';
                out += static_cast<char>(c);
            } else if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
        }
    }

    void name_track(uint32_t tid, const char* name, uint64_t sort_index) {
        std::string e = format("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":\"",
                               pid_, tid);
        escape(e, name);
        e += "\"}}";
        emit(e);
        emit(format("{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%u,\"args\":{\"sort_index\":%llu}}",
                    pid_, tid, static_cast<unsigned long long>(sort_index)));
    }

    static const char* cat_name(Cat c) {
        switch (c) {
            case Cat::kernel: return "kernel";
            case Cat::copy: return "copy";
            case Cat::fill: return "fill";
            case Cat::host: return "host";
            case Cat::event: return "event";
            case Cat::graph: return "graph";
            case Cat::graph_node: return "graph_node";
            case Cat::memory: return "memory";
            case Cat::collective: return "collective";
            case Cat::dvpp: return "dvpp";
            case Cat::api: return "api";
            case Cat::track: return "track";
            case Cat::counter: return "counter";
            case Cat::ran:
            case Cat::cancel: break;  // joined or dropped before formatting
        }
        return "unknown";
    }
    static const char* status_name(Status s) {
        switch (s) {
            case Status::ok: return "ok";
            case Status::failed: return "failed";
            case Status::skipped: return "skipped";
        }
        return "ok";
    }

    void format_op(const Op& op) {
        if (op.cat == Cat::track) {
            name_track(op.track, op.name, op.id);
            return;
        }
        if (op.cat == Cat::counter) {
            std::string e = "{\"ph\":\"C\",\"name\":\"memory ";
            escape(e, op.name);
            e += format("\",\"pid\":%d,\"ts\":%.3f,\"args\":{\"allocated\":%llu,\"reserved\":%llu}}", pid_,
                        us(op.start_ns), static_cast<unsigned long long>(op.bytes),
                        static_cast<unsigned long long>(op.reserved));
            emit(e);
            return;
        }
        const int64_t end = std::max(op.end_ns, op.start_ns);
        std::string e = format("{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"", cat_name(op.cat));
        escape(e, op.name);
        e += format("\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{", pid_, op.track, us(op.start_ns),
                    us_between(op.start_ns, end));
        if (op.cat == Cat::api) {
            if (named_hosts_.insert(op.track).second) {
                const std::string name = format("host thread %u", op.track - kHostTrackBase);
                name_track(op.track, name.c_str(), 1000000000ull + (op.track - kHostTrackBase));
            }
            e += "}}";
            emit(e);
            return;
        }
        const double queued = us_between(0, std::max<int64_t>(0, op.start_ns - op.enqueue_ns));
        e += format("\"op\":%llu,\"queued_us\":%.3f,\"status\":\"%s\"", static_cast<unsigned long long>(op.op), queued,
                    status_name(op.status));
        switch (op.cat) {
            case Cat::kernel:
                e += format(",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shared\":%llu", op.grid[0], op.grid[1],
                            op.grid[2], op.block[0], op.block[1], op.block[2],
                            static_cast<unsigned long long>(op.reserved));
                break;
            case Cat::copy:
                e += format(",\"bytes\":%llu,\"direction\":\"%s\"", static_cast<unsigned long long>(op.bytes),
                            op.kind ? op.kind : "");
                break;
            case Cat::fill:
            case Cat::memory:
                e += format(",\"bytes\":%llu", static_cast<unsigned long long>(op.bytes));
                break;
            case Cat::dvpp:  // trace_dvpp.hpp: src in grid[0..1], dst in block[0..1], image in id, format in kind
                e += format(",\"bytes\":%llu,\"src\":[%u,%u],\"dst\":[%u,%u],\"image\":%llu",
                            static_cast<unsigned long long>(op.bytes), op.grid[0], op.grid[1], op.block[0],
                            op.block[1], static_cast<unsigned long long>(op.id));
                if (op.kind) e += format(",\"format\":\"%s\"", op.kind);
                break;
            case Cat::collective:  // collective_op: rank and ranks in grid[0..1], sequence in id, type in kind
                e += format(",\"bytes\":%llu,\"rank\":%u,\"ranks\":%u,\"sequence\":%llu,\"type\":\"%s\"",
                            static_cast<unsigned long long>(op.bytes), op.grid[0], op.grid[1],
                            static_cast<unsigned long long>(op.id), op.kind ? op.kind : "");
                break;
            case Cat::event:
                e += format(",\"event\":%llu", static_cast<unsigned long long>(op.id));
                break;
            case Cat::graph:
                e += format(",\"graph\":%llu,\"nodes\":%llu", static_cast<unsigned long long>(op.id),
                            static_cast<unsigned long long>(op.reserved));
                break;
            case Cat::graph_node:
                e += format(",\"node\":%llu,\"type\":\"%s\"", static_cast<unsigned long long>(op.id),
                            op.kind ? op.kind : "");
                break;
            default:
                break;
        }
        e += "}}";
        emit(e);
        if (op.flow_kind == Flow::end && op.flow) waits_.push_back({op.flow, op.track, mid(op), 0});
    }

    static int64_t mid(const Op& op) { return op.start_ns + (std::max(op.end_ns, op.start_ns) - op.start_ns) / 2; }

    void remember_record(const Op& op) {
        if (!op.flow) return;
        if (records_.emplace(op.flow, std::pair<uint32_t, int64_t>{op.track, mid(op)}).second) {
            record_order_.push_back(op.flow);
            if (record_order_.size() > kRememberedRecords) {
                records_.erase(record_order_.front());
                record_order_.pop_front();
            }
        }
    }

    /// Each wait whose record is known gets its arrow; the others wait a few flushes (their record may sit in a
    /// buffer drained before it was written).
    void resolve_flows(bool last) {
        std::erase_if(waits_, [&](FlowEnd& w) {
            auto it = records_.find(w.flow);
            if (it == records_.end()) return last || ++w.age > kFlowRetries;
            if (started_flows_.insert(w.flow).second)
                emit(format("{\"ph\":\"s\",\"cat\":\"event\",\"name\":\"event\",\"id\":%llu,\"pid\":%d,\"tid\":%u,"
                            "\"ts\":%.3f}",
                            static_cast<unsigned long long>(w.flow), pid_, it->second.first, us(it->second.second)));
            emit(format("{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"event\",\"name\":\"event\",\"id\":%llu,\"pid\":%d,"
                        "\"tid\":%u,\"ts\":%.3f}",
                        static_cast<unsigned long long>(w.flow), pid_, w.track, us(w.ts_ns)));
            return true;
        });
    }

    struct FlowEnd {
        uint64_t flow;
        uint32_t track;
        int64_t ts_ns;
        int age;
    };

    const uint64_t id_;
    const std::string path_;
    int fd_;
    const unsigned flags_;
    const int pid_;
    const int64_t t0_;   // now() at the start
    double ns_per_tick_ = 1.0;

    /// Resolvers' stamps, straight into the join (the writer's thread).
    struct WriterSink final : Sink {
        explicit WriterSink(Session& s) : session(s) {}
        void finish(const Key& key, int64_t start_ns, int64_t end_ns, Status status) noexcept override {
            if (!key) return;
            try {
                session.stamps_.push_back({key, start_ns, end_ns, status, 0});
            } catch (...) {  // out of memory: the span is lost
            }
        }
        Session& session;
    } sink_{*this};
    std::thread thread_;

    std::mutex mutex_;  // stopping_
    std::condition_variable cv_;
    bool stopping_ = false;

    std::mutex buffers_mutex_;
    std::vector<std::shared_ptr<ThreadBuffer>> buffers_;

    // The writer thread's own (begin() writes before it starts).
    bool first_ = true;
    std::string out_;
    std::unordered_map<JoinKey, Op, JoinHash> described_;  // queued, not stamped yet
    std::vector<Stamps> stamps_;  // stamps whose description was not read yet
    std::vector<Chunk*> taken_;   // full chunks of the buffer being drained
    std::vector<Op> completed_;   // joined in the flush running
    std::unordered_set<uint32_t> named_hosts_;
    std::unordered_map<uint64_t, std::pair<uint32_t, int64_t>> records_;  // flow id -> record's track, mid time
    std::deque<uint64_t> record_order_;
    std::unordered_set<uint64_t> started_flows_;
    std::vector<FlowEnd> waits_;
};

// g_mutex guards g_session and g_stopping; g_session_id mirrors the session's id for the recording threads (0: none).
// g_stopping counts the stopped sessions whose writer is still finishing its file (joined outside the lock): a start
// waits for them (g_stopped), or its file — perhaps the same path, truncated — would take the old writer's last lines.
std::mutex g_mutex;
std::shared_ptr<Session> g_session;
int g_stopping = 0;
std::condition_variable g_stopped;
std::atomic<uint64_t> g_session_id{0};
uint64_t g_sessions = 0;
bool g_exit_handler = false;

// Every thread's buffer in the trace it last recorded into, owned here (and, while that trace is written, by its
// session): a forked child, whose other threads are gone with their thread-locals, still reaches the buffers of the
// parent's threads (LeakSanitizer would report them). Never destroyed: threads leave it during the process's exit.
// g_threads_mutex is held across fork (pthread_atfork), so a child finds it free.
std::mutex& g_threads_mutex = *new std::mutex;
std::vector<std::shared_ptr<ThreadBuffer>>& g_thread_buffers = *new std::vector<std::shared_ptr<ThreadBuffer>>;

// The calling thread's buffer (a plain pointer: read on every record).
constinit thread_local ThreadBuffer* t_buffer = nullptr;

/// A thread that recorded exits: its buffer is dead (its session drains it once more) and leaves g_thread_buffers.
void thread_exits(void* buffer) {
    auto* b = static_cast<ThreadBuffer*>(buffer);
    b->alive.store(false, std::memory_order_release);
    t_buffer = nullptr;
    std::lock_guard lock(g_threads_mutex);
    std::erase_if(g_thread_buffers, [&](const auto& p) { return p.get() == b; });
}

// Learns of a thread's exit through a pthread key rather than a thread_local with a destructor: glibc allocates the
// record of such a destructor in the thread's own storage, which a forked child would report as leaked.
// Made at load; failing only when the process has used up its keys, then no thread records (g_thread_key_made).
pthread_key_t g_thread_key{};
const bool g_thread_key_made = ::pthread_key_create(&g_thread_key, thread_exits) == 0;

/// Makes `fresh` the calling thread's buffer (the previous one is dead: its session drains it once more).
void replace_buffer(std::shared_ptr<ThreadBuffer> fresh) {
    std::lock_guard lock(g_threads_mutex);
    ThreadBuffer* old = t_buffer;
    auto it = std::find_if(g_thread_buffers.begin(), g_thread_buffers.end(),
                           [&](const auto& p) { return old && p.get() == old; });
    if (it == g_thread_buffers.end()) it = g_thread_buffers.insert(g_thread_buffers.end(), nullptr);  // may throw
    if (!g_thread_key_made || ::pthread_setspecific(g_thread_key, fresh.get()) != 0) {
        if (!*it) g_thread_buffers.erase(it);
        throw std::bad_alloc();
    }
    if (old) old->alive.store(false, std::memory_order_release);
    t_buffer = fresh.get();
    *it = std::move(fresh);
}

/// The calling thread's buffer in the current trace (registered on its first record), or null when none is written.
ThreadBuffer* local_buffer() noexcept {
    const uint64_t id = g_session_id.load(std::memory_order_acquire);
    if (id == 0) return nullptr;
    ThreadBuffer* b = t_buffer;
    if (b && b->session == id) [[likely]] return b;
    try {
        std::shared_ptr<Session> session;
        {
            std::lock_guard lock(g_mutex);
            session = g_session;
        }
        if (!session || session->id() != id) return nullptr;
        auto fresh = std::make_shared<ThreadBuffer>();
        fresh->session = session->id();
        fresh->tid = os_tid();
        session->add(fresh);
        replace_buffer(std::move(fresh));
        return t_buffer;
    } catch (...) {
        return nullptr;
    }
}

/// A forked child has the parent's trace but not its writer thread: it records nothing (its stop and exit handler
/// let the parent's session go without joining a thread it does not have).
void forget_in_child() {
    detail::g_on.store(false, std::memory_order_relaxed);
    g_session_id.store(0, std::memory_order_relaxed);
}

void lock_threads() { g_threads_mutex.lock(); }
void unlock_threads() { g_threads_mutex.unlock(); }
void unlock_threads_in_child() {
    g_threads_mutex.unlock();
    forget_in_child();
}

void stop_at_exit() {
    try {
        stop();
    } catch (...) {  // no trace being written: nothing to complete
    }
}

}  // namespace

const char* intern(const char* text) noexcept {
    if (!text || !*text) return "";
    // Launch loops name the same few kernels again and again: the last four names of this thread.
    thread_local const char* recent[4] = {};
    thread_local unsigned next = 0;
    for (const char* r : recent)
        if (r && std::strcmp(r, text) == 0) return r;
    static std::mutex mutex;
    static std::unordered_set<std::string>* names = new std::unordered_set<std::string>;  // never destroyed: records
                                                                                         // may be formatted at exit
    try {
        std::lock_guard lock(mutex);
        const char* kept = names->emplace(text).first->c_str();  // nodes are stable: the pointer stays valid
        recent[next++ % 4] = kept;
        return kept;
    } catch (...) {
        return "";
    }
}

uint32_t next_track() noexcept { return g_tracks.fetch_add(1, std::memory_order_relaxed) + 1; }
uint64_t next_id() noexcept { return g_ids.fetch_add(1, std::memory_order_relaxed) + 1; }

void submit(const Op& op) noexcept {
    if (!on()) return;
    ThreadBuffer* b = local_buffer();
    if (!b) return;
    Op* slot = b->reserve();
    if (!slot) return;  // out of memory: the record is lost, the program goes on
    *slot = op;
    if (op.cat == Cat::api) slot->track = kHostTrackBase + static_cast<uint32_t>(b->tid);
    b->publish();
}

void finish(const Key& key, int64_t start_ns, int64_t end_ns, Status status) noexcept {
    if (!key) return;
    ThreadBuffer* b = local_buffer();
    if (!b) return;
    Op* slot = b->reserve();
    if (!slot) return;
    // The join needs these alone: the rest of the slot is left as it was.
    slot->cat = Cat::ran;
    slot->track = key.track;
    slot->id = key.node;
    slot->op = key.op;
    slot->start_ns = start_ns;
    slot->end_ns = end_ns;
    slot->status = status;
    b->publish();
}

Op* stream_op(Stream& stream, Cat cat, uint64_t op) noexcept {
    ThreadBuffer* b = local_buffer();
    if (!b) return nullptr;
    const uint64_t session = b->session;
    if (stream.trace_named_.load(std::memory_order_relaxed) != session &&
        stream.trace_named_.exchange(session, std::memory_order_relaxed) != session) {
        // The stream's first operation in this trace: its track's name and place.
        Op track;
        track.cat = Cat::track;
        track.track = stream.trace_track();
        const uint32_t number = stream.is_default() ? 0 : stream.trace_track();
        const CoreDevice& device = stream.device();
        char name[96];
        std::snprintf(name, sizeof name, "%s stream %u", device.label().c_str(), number);
        track.name = intern(name);
        track.id = static_cast<uint64_t>(device.index()) * 100000 + number;
        submit(track);
    }
    Op* record = b->reserve();
    if (!record) return nullptr;
    *record = Op{};
    record->cat = cat;
    record->track = stream.trace_track();
    record->op = op;
    record->enqueue_ns = now();
    return record;
}

void host_span(Stream& stream, Cat cat, const char* name, uint64_t bytes, int64_t start_ns) noexcept {
    Op* t = stream_op(stream, cat, stream.operations());
    if (!t) return;
    t->name = name;
    t->bytes = bytes;
    t->enqueue_ns = start_ns;
    t->start_ns = start_ns;
    t->end_ns = std::max(now(), start_ns + 1);  // complete when written: the writer formats it as it reads it
    t_buffer->publish();
}

Op* copy_op(Stream& stream, uint64_t op, size_t bytes, backend::CopyKind kind) noexcept {
    Op* t = stream_op(stream, Cat::copy, op);
    if (!t) return nullptr;
    static constexpr const char* kDirections[] = {"HtoH", "HtoD", "DtoH", "DtoD"};
    static constexpr const char* kNames[] = {"memcpy HtoH", "memcpy HtoD", "memcpy DtoH", "memcpy DtoD"};
    const auto k = static_cast<size_t>(kind) & 3;
    t->kind = kDirections[k];
    t->name = kNames[k];
    t->bytes = bytes;
    return t;
}

Op* collective_op(Stream& stream, uint64_t op, const char* name, uint64_t bytes, int rank, int ranks, uint64_t sequence,
                  const char* type) noexcept {
    Op* t = stream_op(stream, Cat::collective, op);
    if (!t) return nullptr;
    t->name = name;
    t->bytes = bytes;
    t->grid[0] = static_cast<uint32_t>(rank);
    t->grid[1] = static_cast<uint32_t>(ranks);
    t->id = sequence;
    t->kind = type;
    return t;
}

Op* fill_op(Stream& stream, uint64_t op, size_t bytes) noexcept {
    Op* t = stream_op(stream, Cat::fill, op);
    if (!t) return nullptr;
    t->name = "memset";
    t->bytes = bytes;
    return t;
}

Op* kernel_op(Stream& stream, uint64_t op, const std::string& kernel, const backend::LaunchShape& shape) noexcept {
    Op* t = stream_op(stream, Cat::kernel, op);
    if (!t) return nullptr;
    t->name = intern(kernel.c_str());
    for (int d = 0; d < 3; ++d) {
        t->grid[d] = shape.grid[d];
        t->block[d] = shape.block[d];
    }
    t->reserved = shape.shared_bytes;
    return t;
}

Op* host_op(Stream& stream, uint64_t op) noexcept {
    Op* t = stream_op(stream, Cat::host, op);
    if (t) t->name = "host function";
    return t;
}

Op* event_op(Stream& stream, uint64_t op, Event& event, bool record) noexcept {
    Op* t = stream_op(stream, Cat::event, op);
    if (!t) return nullptr;
    t->name = record ? "event record" : "event wait";
    t->id = event.trace_id();
    if (record) {
        t->flow = next_id();
        t->flow_kind = Flow::start;
        event.trace_flow.store(t->flow, std::memory_order_relaxed);
    } else {
        t->flow = event.trace_flow.load(std::memory_order_relaxed);
        t->flow_kind = t->flow ? Flow::end : Flow::none;
    }
    return t;
}

Op* graph_op(Stream& stream, uint64_t op, uint64_t graph, size_t nodes) noexcept {
    Op* t = stream_op(stream, Cat::graph, op);
    if (!t) return nullptr;
    t->name = "graph launch";
    t->id = graph;
    t->reserved = nodes;
    return t;
}

Op* graph_node_op(Stream& stream, uint64_t op, size_t node, const char* type, const char* name) noexcept {
    Op* t = stream_op(stream, Cat::graph_node, op);
    if (!t) return nullptr;
    t->name = intern(name);
    t->kind = type;
    t->id = node;
    return t;
}

Pending::Pending(Op* op) noexcept : exceptions_(std::uncaught_exceptions()) {
    if (!op) return;
    ThreadBuffer* b = t_buffer;
    // stream_op's slot, unless this thread recorded something since (a misuse: the record is lost).
    if (!b || !b->current || op != &b->current->ops[b->used]) return;
    const JoinKey k = join_key(*op);
    key_ = Key{k.track, k.node, k.op, op->enqueue_ns};
    b->publish();
}

void withdraw(const Key& key) noexcept {
    if (!key) return;
    ThreadBuffer* b = local_buffer();
    if (!b) return;
    Op* slot = b->reserve();
    if (!slot) return;
    slot->cat = Cat::cancel;
    slot->track = key.track;
    slot->id = key.node;
    slot->op = key.op;
    b->publish();
}

double ns_per_tick() noexcept {
    if (!detail::g_tsc.load(std::memory_order_relaxed)) return 1.0;
    const int64_t t0 = g_calibration_ticks.load(std::memory_order_acquire);
    const int64_t ns0 = g_calibration_ns.load(std::memory_order_relaxed);
    const int64_t ticks = now(), ns = monotonic_ns();
    if (!t0 || ticks <= t0 || ns <= ns0) return 1.0;
    return static_cast<double>(ns - ns0) / static_cast<double>(ticks - t0);
}

uint64_t add_resolver(Resolver resolver) {
    std::lock_guard lock(g_resolvers_mutex);
    const uint64_t id = ++g_resolver_ids;
    g_resolvers.emplace_back(id, std::move(resolver));
    return id;
}

void remove_resolver(uint64_t id) noexcept {
    if (id == 0) return;
    Resolver gone;  // destroyed after the lock (it may own what its owner frees)
    std::lock_guard lock(g_resolvers_mutex);
    auto it = std::find_if(g_resolvers.begin(), g_resolvers.end(), [&](const auto& r) { return r.first == id; });
    if (it == g_resolvers.end()) return;
    gone = std::move(it->second);
    g_resolvers.erase(it);
    gone(g_late, true);
}

Pending::~Pending() {
    if (std::uncaught_exceptions() > exceptions_) withdraw(key_);  // nothing was queued: the description is withdrawn
}

void memory_counter(const std::string& device, uint64_t allocated, uint64_t reserved) noexcept {
    if (flags() & RT_PROFILER_NO_MEMORY) return;
    Op op;
    op.cat = Cat::counter;
    op.start_ns = now();
    op.bytes = allocated;
    op.reserved = reserved;
    op.name = intern(device.c_str());
    submit(op);
}

void api_span(const char* api, int64_t start_ns) noexcept {
    if (flags() & RT_PROFILER_NO_API_CALLS) return;
    Op op;
    op.cat = Cat::api;
    op.start_ns = start_ns;
    op.end_ns = now();
    op.name = api;  // a string literal of the library
    submit(op);
}

void start(const char* path, unsigned flags) {
    if (!path || !*path)
        fail(RT_ERROR_INVALID_VALUE, "path is %s (expected the file to write the trace to)", path ? "empty" : "NULL");
    if (flags & ~kKnownFlags)
        fail(RT_ERROR_INVALID_VALUE, "flags 0x%x has unknown bits 0x%x (expected RT_PROFILER_DEFAULT or a combination "
             "of RT_PROFILER_NO_API_CALLS and RT_PROFILER_NO_MEMORY)", flags, flags & ~kKnownFlags);
    std::unique_lock lock(g_mutex);
    g_stopped.wait(lock, [] { return g_stopping == 0; });  // a stop's writer completing its file: moments, no peer
    if (g_session)
        fail(RT_ERROR_ILLEGAL_STATE, "a trace is already being written to '%s' (rtProfilerStop it first)",
             g_session->path().c_str());
    const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        const int err = errno;
        fail(RT_ERROR_UNKNOWN, "cannot create the trace file '%s': %s", path, std::strerror(err));
    }
    if (!g_exit_handler) {  // the first trace of the process
        detail::g_tsc.store(kernel_clock_is_tsc(), std::memory_order_relaxed);
        g_calibration_ns.store(monotonic_ns(), std::memory_order_relaxed);
        g_calibration_ticks.store(now(), std::memory_order_release);
        // Completes a trace the program did not stop. Registered once, after this file's globals were built, so it
        // runs before they are destroyed.
        if (std::atexit(stop_at_exit) != 0 ||
            ::pthread_atfork(lock_threads, unlock_threads, unlock_threads_in_child) != 0) {
            ::close(fd);
            fail(RT_ERROR_UNKNOWN, "cannot register the exit handler that completes the trace file");
        }
        g_exit_handler = true;
    }
    std::shared_ptr<Session> session;
    try {
        session = std::make_shared<Session>(++g_sessions, path, fd, flags);
        session->begin();
    } catch (...) {
        if (!session) ::close(fd);
        throw;
    }
    g_session = session;
    detail::g_flags.store(flags, std::memory_order_relaxed);
    g_session_id.store(session->id(), std::memory_order_release);
    detail::g_on.store(true, std::memory_order_release);
}

void stop() {
    std::thread writer;
    {
        std::lock_guard lock(g_mutex);
        if (!g_session) fail(RT_ERROR_ILLEGAL_STATE, "no trace is being written (rtProfilerStart starts one)");
        if (g_session->pid() != ::getpid()) {  // a forked child: the parent's writer is no thread of this process
            // Never joined, never destroyed; held where LeakSanitizer sees it (a store to a variable nothing reads
            // may be optimised away).
            static auto* orphans = new std::vector<std::shared_ptr<Session>>();
            orphans->push_back(std::move(g_session));
            return;
        }
        detail::g_on.store(false, std::memory_order_release);
        g_session_id.store(0, std::memory_order_release);
        writer = g_session->request_stop();
        g_session.reset();
        ++g_stopping;
    }
    struct Stopped {  // the writer is done (or its join threw): starts may open their file
        ~Stopped() {
            {
                std::lock_guard lock(g_mutex);
                --g_stopping;
            }
            g_stopped.notify_all();
        }
    } stopped;
    if (writer.joinable()) writer.join();
}

void start_from_environment() noexcept {
    // Once per process: a later rtInit (after rtFinalize, or a stopped trace) must not truncate the file.
    static std::atomic<bool> consulted{false};
    if (consulted.exchange(true)) return;
    const char* path = std::getenv("RUNTIME_TRACE");
    if (!path || !*path) return;
    try {
        {
            std::lock_guard lock(g_mutex);
            if (g_session) return;  // rtProfilerStart (or an earlier rtInit) started one
        }
        start(path, RT_PROFILER_DEFAULT);
    } catch (const std::exception& e) {
        RT_LOG(core, warn, "RUNTIME_TRACE=%s: %s; the program runs without a trace", path, e.what());
    }
}

}  // namespace rt::trace
