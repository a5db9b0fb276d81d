// The timeline trace (rtProfilerStart, RUNTIME_TRACE): operations described where they are queued, stamped where they
// run, formatted as Chrome trace-event JSON by a background writer (docs/observability.md, "Trace").
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <exception>
#include <functional>
#include <string>
#include <utility>

#include "backends/backend.hpp"

namespace rt {
class Stream;
class Event;
}

namespace rt::trace {

/// What a span is: its `cat` in the file (track, counter: metadata and counter records, not spans; ran, cancel:
/// internal to trace.cpp — the stamps of a record described earlier, and a description whose queueing threw).
enum class Cat : uint8_t { kernel, copy, fill, host, event, graph, graph_node, memory, collective, dvpp, api, track,
                           counter, ran, cancel };
enum class Status : uint8_t { ok, failed, skipped };
/// An event record starts a flow, a wait on another stream ends it (ids: Op::flow).
enum class Flow : uint8_t { none, start, end };

/// One record as the writer formats it: plain data, written in place into the recording thread's buffer (a slot of a
/// fixed chunk). Fields a category does not use stay zero.
struct Op {
    Cat cat = Cat::kernel;
    Status status = Status::ok;
    Flow flow_kind = Flow::none;
    uint32_t track = 0;       ///< the stream's tid (api spans: set by submit to the host thread's)
    uint64_t op = 0;          ///< the stream's operation number (Stream::next_op)
    int64_t enqueue_ns = 0;   ///< now() when it was queued (the trace clock's ticks, as start_ns and end_ns)
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    uint64_t bytes = 0;       ///< copy, fill, memory; counter: allocated bytes
    uint64_t id = 0;          ///< event: the event's id; graph: the executable graph's; graph_node: the node's index;
                              ///< track: its sort index
    uint64_t flow = 0;        ///< flow_kind != none: the record's flow id
    uint64_t reserved = 0;    ///< counter: reserved bytes; kernel: shared bytes; graph: node count
    uint32_t grid[3] = {};
    uint32_t block[3] = {};
    const char* kind = nullptr;  ///< static text: copy direction ("HtoD"), node type ("kernel")
    const char* name = "";       ///< a string literal or an intern()ed string: alive as long as the process
};

/// `text` kept for the rest of the process (names in records outlive the kernels and graphs they name); the same
/// text gives the same pointer. A launch loop of one kernel costs a compare (a per-thread cache of the last name).
/// Out of memory: "".
const char* intern(const char* text) noexcept;

namespace detail {
extern std::atomic<bool> g_on;
extern std::atomic<unsigned> g_flags;
}  // namespace detail

/// The one branch an operation pays when no trace is written: a relaxed load of a global flag.
inline bool on() noexcept { return detail::g_on.load(std::memory_order_relaxed); }
/// The profiler flags of the trace being written (RT_PROFILER_*); meaningful while on().
inline unsigned flags() noexcept { return detail::g_flags.load(std::memory_order_relaxed); }

namespace detail {
extern std::atomic<bool> g_tsc;
}
/// The trace's clock, in ticks the writer converts to time: the CPU's time-stamp counter where the kernel keeps its
/// own clock on it (clocksource tsc: invariant and synchronised across cores; a read costs half a clock_gettime),
/// else CLOCK_MONOTONIC nanoseconds. Chosen at the first trace of the process, never changed after.
inline int64_t now() noexcept {
#if defined(__x86_64__)
    if (detail::g_tsc.load(std::memory_order_relaxed)) return static_cast<int64_t>(__builtin_ia32_rdtsc());
#endif
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

/// Ids that name objects in traces (a stream's tid, an event's, a graph's): process-wide, from 1, never reused.
/// Called when the object is created (trace on or off): one relaxed increment.
uint32_t next_track() noexcept;
uint64_t next_id() noexcept;

/// The work of `key` ran from `start_ns` to `end_ns` (any thread): three stamps appended to the calling thread's
/// buffer, joined by the writer to the operation's description. A trace stopped meanwhile drops it. Never throws,
/// never blocks, takes no lock (but once per chunk of records).
void finish(const Key& key, int64_t start_ns, int64_t end_ns, Status status) noexcept;
/// Withdraws the description of `key` (handed to a backend, never to be stamped: a backend that drops the
/// operation's timing): it is not written. Never throws, never blocks.
void withdraw(const Key& key) noexcept;

/// The trace clock's nanoseconds per tick: 1 for CLOCK_MONOTONIC; for the TSC, measured against CLOCK_MONOTONIC since
/// the process's first trace started (two clock reads a call). For backends that convert device durations to ticks.
double ns_per_tick() noexcept;

/// Where a resolver puts the stamps of what completed: the writer's join, directly (finish() would drop them during
/// the last flush of a stopped trace, when on() is already false).
class Sink {
public:
    virtual void finish(const Key& key, int64_t start_ns, int64_t end_ns, Status status) noexcept = 0;

protected:
    ~Sink() = default;
};

/// A backend's "stamp what completed since the last call", for operations whose times it learns only later (cuda:
/// timing events read after the GPU passed them). The writer calls every registered resolver from its own thread at
/// each flush (~100 ms), before it reads the threads' buffers, and never two at once. `final` false: stamp what
/// completed, return how many operations are still outstanding. When a trace stops, the writer calls them so (every
/// millisecond) until none has anything outstanding or kStopWait passed, then once with `final` true: stamp the rest
/// as they can be (status skipped: never seen to complete) and return 0. A resolver must not block and must not call
/// add_resolver or remove_resolver.
using Resolver = std::function<size_t(Sink& sink, bool final)>;
/// How long a stop waits for resolvers' outstanding operations to complete (a GPU still running them).
constexpr int kStopWaitMs = 2000;
/// Registers `resolver` (for every later trace too) and returns its id (never 0). Throws std::bad_alloc.
uint64_t add_resolver(Resolver resolver);
/// Unregisters resolver `id` (0: none) after calling it a last time, `final` true, for what its owner still holds
/// (call it once that work has completed): those stamps reach the writer's next flush, also when a stop is under way.
/// Once it returns, the resolver is not running and never runs again (it waits for a call in progress: one flush's
/// pass, which never blocks). Never throws.
void remove_resolver(uint64_t id) noexcept;

/// Records a span or counter not queued on a stream (api calls, memory counters, graph nodes). Drops it when off.
void submit(const Op& op) noexcept;

/// A new record of `cat` for operation `op` of `stream`, enqueued now: a slot of this thread's buffer that the caller
/// fills and hands to Pending (trace::enqueue's describe) before it records anything else; null when off or out of
/// memory (that operation is then missing from the trace). Names the stream's track in this trace on its first
/// operation.
Op* stream_op(Stream& stream, Cat cat, uint64_t op) noexcept;

/// A span of `cat` on `stream`'s track for work the calling thread did there itself, from `start_ns` to now
/// (rtMallocAsync's `malloc async`, cat memory): not a queued operation, so `op` is the stream's latest and
/// queued_us 0. Call it only when on().
void host_span(Stream& stream, Cat cat, const char* name, uint64_t bytes, int64_t start_ns) noexcept;

/// The records of each kind of operation, for stream_op's callers (null when out of memory).
Op* copy_op(Stream& stream, uint64_t op, size_t bytes, backend::CopyKind kind) noexcept;
Op* fill_op(Stream& stream, uint64_t op, size_t bytes) noexcept;
Op* kernel_op(Stream& stream, uint64_t op, const std::string& kernel, const backend::LaunchShape& shape) noexcept;
Op* host_op(Stream& stream, uint64_t op) noexcept;
/// An event record starts a flow (its id kept in the event), a wait ends the flow of the event's latest record.
Op* event_op(Stream& stream, uint64_t op, Event& event, bool record) noexcept;
Op* graph_op(Stream& stream, uint64_t op, uint64_t graph, size_t nodes) noexcept;
/// A collective's part on `stream`: `name` static text ("all_reduce"), `bytes` this rank's buffer (count x the type's
/// size), its rank of `ranks`, `sequence` the collective's number on its communicator (the same on every rank:
/// the parts of one collective share it), `type` static text (the data type, "float32").
Op* collective_op(Stream& stream, uint64_t op, const char* name, uint64_t bytes, int rank, int ranks, uint64_t sequence,
                  const char* type) noexcept;
/// A node of graph launch `op` that the core queues as an operation of its own (no lowering): `type` static text
/// ("kernel", "memcpy", "memset", "host"), `name` the kernel's name or the node's label.
Op* graph_node_op(Stream& stream, uint64_t op, size_t node, const char* type, const char* name) noexcept;

/// Publishes `op` (stream_op's slot, or null) for the *_impl call made while it lives, which is handed key() (empty
/// when `op` is null: that operation is missing from the trace); if the call throws, nothing was queued and the
/// description is withdrawn.
class Pending {
public:
    explicit Pending(Op* op) noexcept;
    ~Pending();
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
    const Key& key() const noexcept { return key_; }

private:
    Key key_;
    int exceptions_;
};

/// The core's enqueue hook, the one test an operation pays for the trace: `queue_it(Key{})` when no trace is
/// written; else `queue_it(key)` with the key of the record that `describe()` returns (an Op* from stream_op). The
/// key travels with the operation (backend::Queue's `traced`), so a backend tests nothing more: the cpu queue
/// stores it in the task, whose dispatch code sends a traced task to the stamping path.
template <class Describe, class Enqueue>
inline void enqueue(Describe&& describe, Enqueue&& queue_it) {
    if (on()) [[unlikely]] {
        Pending pending(describe());
        queue_it(pending.key());
    } else {
        queue_it(Key{});
    }
}

/// A memory counter sample for device `device` (label "cpu:0"). Unless RT_PROFILER_NO_MEMORY.
void memory_counter(const std::string& device, uint64_t allocated, uint64_t reserved) noexcept;

/// An api span: the host thread spent [start_ns, now] in the C entry point `api` (a string literal).
void api_span(const char* api, int64_t start_ns) noexcept;

/// rtProfilerStart / rtProfilerStop (throw rt::Error with the documented codes).
void start(const char* path, unsigned flags);
void stop();
/// RUNTIME_TRACE=path: starts a trace at rtInit unless one is being written; a failure is a warning on stderr (the
/// program runs on untraced).
void start_from_environment() noexcept;

}  // namespace rt::trace
