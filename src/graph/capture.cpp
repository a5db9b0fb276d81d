// Stream capture: the captures under way, their streams' frontiers, the nodes their operations become, and the
// rules of graph.h (modes, the default stream, events of captures) — enforced above the backends, so on all of them.
#include "graph/capture.hpp"

#include <algorithm>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/device.hpp"
#include "core/module.hpp"
#include "core/runtime.hpp"
#include "graph/graph.hpp"
#include "graph/node_params.hpp"

namespace rt::graph {

namespace detail {
std::atomic<int> g_strict_captures{0};
}
using detail::g_strict_captures;

/// One capture under way. Guarded by the capture lock (all of it: lock()).
class Capture {
public:
    /// A stream taking part: the origin (members[0]) or one that joined through an event (fork), and its frontier:
    /// the nodes its next operation depends on.
    struct Member {
        std::shared_ptr<Stream> stream;
        std::vector<Node*> frontier;
    };

    uint64_t id = 0;
    rtStreamCaptureMode mode = RT_STREAM_CAPTURE_MODE_GLOBAL;
    std::thread::id thread;  // the thread that began it
    std::shared_ptr<Graph> graph;
    std::vector<Member> members;
    rtError_t broken = RT_SUCCESS;  // invalidated: what broke it
    std::string why;

    Stream& origin() const { return *members.front().stream; }
    Member* member(const Stream& s) {
        for (Member& m : members)
            if (m.stream.get() == &s) return &m;
        return nullptr;
    }
    bool has_blocking_member_on(const CoreDevice& d) const {
        for (const Member& m : members)
            if (m.stream->blocking() && &m.stream->device() == &d) return true;
        return false;
    }
    /// Keeps the first reason: end_capture reports what broke the capture first.
    void invalidate(std::string reason) {
        if (broken != RT_SUCCESS) return;
        broken = RT_ERROR_STREAM_CAPTURE_INVALIDATED;
        why = std::move(reason);
    }
};

namespace {

struct State {
    std::mutex mutex;
    std::vector<std::unique_ptr<Capture>> active;
};
/// Never destroyed: hooks may run during static destruction (a runtime torn down at exit).
State& state() {
    static State* s = new State;
    return *s;
}
std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(state().mutex); }

std::atomic<uint64_t> g_next_id{1};  // ids are unique in the process, across rtFinalize too
thread_local rtStreamCaptureMode t_mode = RT_STREAM_CAPTURE_MODE_GLOBAL;

const char* mode_name(rtStreamCaptureMode mode) {
    switch (mode) {
        case RT_STREAM_CAPTURE_MODE_GLOBAL: return "RT_STREAM_CAPTURE_MODE_GLOBAL";
        case RT_STREAM_CAPTURE_MODE_THREAD_LOCAL: return "RT_STREAM_CAPTURE_MODE_THREAD_LOCAL";
        case RT_STREAM_CAPTURE_MODE_RELAXED: return "RT_STREAM_CAPTURE_MODE_RELAXED";
    }
    return "?";
}

std::string name(Stream& s) { return s.errors().origin(); }

Capture* find_active(uint64_t id) {
    for (const auto& c : state().active)
        if (c->id == id) return c.get();
    return nullptr;
}

/// Points the default stream of `device` at a capture with a blocking stream of that device, or at none (lock held).
void relink_default_stream(CoreDevice& device) {
    Capture* linked = nullptr;
    for (const auto& c : state().active)
        if (c->has_blocking_member_on(device)) {
            linked = c.get();
            break;
        }
    device.legacy_stream()->set_capture(linked);
}

/// The default stream was used while blocking streams of its device capture (lock held): every such capture is
/// invalidated (CUDA's legacy stream would wait for them: an implicit dependency the graph cannot hold).
[[noreturn]] void refuse_implicit(Stream& default_stream, const char* what) {
    CoreDevice& d = default_stream.device();
    std::string captures;
    for (const auto& c : state().active) {
        if (!c->has_blocking_member_on(d)) continue;
        c->invalidate(format("%s used the default stream of %s, which waits for the blocking streams this capture "
                             "holds", what, d.label().c_str()));
        captures += format("%s%llu (%s)", captures.empty() ? "" : ", ", static_cast<unsigned long long>(c->id),
                           name(c->origin()).c_str());
    }
    fail(RT_ERROR_STREAM_CAPTURE_IMPLICIT,
         "%s: the default stream of %s waits for every blocking stream of the device, and blocking streams are being "
         "captured (capture %s, now invalidated); use a stream of your own during a capture, or create the captured "
         "streams with RT_STREAM_NON_BLOCKING", what, d.label().c_str(), captures.c_str());
}

/// The capture `stream` takes part in, checked for an operation `what` (lock held): null if none (any more);
/// throws IMPLICIT for the default stream and INVALIDATED for an invalidated capture.
Capture* capture_of(Stream& stream, const char* what) {
    Capture* c = stream.capture();
    if (!c) return nullptr;
    if (stream.is_default()) refuse_implicit(stream, what);
    if (c->broken != RT_SUCCESS)
        fail(RT_ERROR_STREAM_CAPTURE_INVALIDATED,
             "%s: %s is capturing (capture %llu), but the capture was invalidated: %s (end it with "
             "rtStreamEndCapture on %s)", what, name(stream).c_str(), static_cast<unsigned long long>(c->id),
             c->why.c_str(), name(c->origin()).c_str());
    return c;
}

/// Runs `add(capture, member)` for operation `what` on `stream` (lock held); false if the stream does not capture.
/// A failure invalidates the capture: the program issued an operation the graph does not hold.
template <class F>
bool record_operation(Stream& stream, const char* what, F&& add) {
    Capture* c = capture_of(stream, what);
    if (!c) return false;
    try {
        add(*c, *c->member(stream));
    } catch (const Error& e) {
        c->invalidate(format("%s on %s failed: %s", what, name(stream).c_str(), e.what()));
        throw;
    } catch (...) {
        c->invalidate(format("%s on %s failed (out of host memory)", what, name(stream).c_str()));
        throw;
    }
    return true;
}

/// Adds `node` after the member's frontier, which it then is (lock held).
Node* append(Capture& c, Capture::Member& m, std::unique_ptr<Node> node) {
    std::lock_guard graph_lock(c.graph->mutex());
    Node* added = c.graph->add(std::move(node), m.frontier);
    m.frontier.assign(1, added);
    return added;
}

std::unique_ptr<Node> make_node(rtGraphNodeType type) {
    auto n = std::make_unique<Node>();
    n->type = type;
    return n;
}

/// Takes `c` out of the active list and frees its streams (lock held); returns it.
std::unique_ptr<Capture> detach(Capture* c) {
    auto& active = state().active;
    auto it = std::find_if(active.begin(), active.end(), [&](const auto& p) { return p.get() == c; });
    std::unique_ptr<Capture> owned = std::move(*it);
    active.erase(it);
    for (const Capture::Member& m : owned->members) m.stream->set_capture(nullptr);
    for (const Capture::Member& m : owned->members)
        if (m.stream->blocking()) relink_default_stream(m.stream->device());
    if (owned->mode != RT_STREAM_CAPTURE_MODE_RELAXED) g_strict_captures.fetch_sub(1, std::memory_order_relaxed);
    return owned;
}

/// The member streams whose last nodes the origin's frontier does not reach: named, or empty if all are joined.
std::string unjoined_streams(const Capture& c) {
    std::unordered_set<const Node*> reached;
    std::vector<const Node*> todo(c.members.front().frontier.begin(), c.members.front().frontier.end());
    while (!todo.empty()) {
        const Node* n = todo.back();
        todo.pop_back();
        if (!reached.insert(n).second) continue;
        for (const Node* d : n->deps) todo.push_back(d);
    }
    std::string names;
    for (size_t i = 1; i < c.members.size(); ++i) {
        const Capture::Member& m = c.members[i];
        for (const Node* n : m.frontier)
            if (!reached.count(n)) {
                names += format("%s%s (its last node: %s)", names.empty() ? "" : "; ", name(*m.stream).c_str(),
                                node_label(*n).c_str());
                break;
            }
    }
    return names;
}

}  // namespace

// ---------------------------------------------------------------- the C API's entry points

uint64_t begin_capture(const std::shared_ptr<Stream>& stream, rtStreamCaptureMode mode) {
    if (stream->is_default())
        fail(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the default stream cannot be captured (capture a stream created "
             "with rtStreamCreate)");
    auto graph = std::make_shared<Graph>(stream->device());
    auto held = lock();
    if (Capture* c = stream->capture())
        fail(RT_ERROR_ILLEGAL_STATE, "%s is already capturing (capture %llu, %s): captures do not nest",
             name(*stream).c_str(), static_cast<unsigned long long>(c->id),
             &c->origin() == stream.get() ? "begun on it" : "which it joined through an event");
    auto c = std::make_unique<Capture>();
    c->id = g_next_id.fetch_add(1, std::memory_order_relaxed);
    c->mode = mode;
    c->thread = std::this_thread::get_id();
    c->graph = std::move(graph);
    c->members.push_back({stream, {}});
    Capture* raw = c.get();
    state().active.push_back(std::move(c));
    if (mode != RT_STREAM_CAPTURE_MODE_RELAXED) g_strict_captures.fetch_add(1, std::memory_order_relaxed);
    stream->set_capture(raw);
    if (stream->blocking()) relink_default_stream(stream->device());
    return raw->id;
}

std::shared_ptr<Graph> end_capture(Stream& stream) {
    std::unique_ptr<Capture> ended;  // released after the lock (its graph's destruction takes other locks)
    auto held = lock();
    Capture* c = stream.capture();
    if (!c || stream.is_default())
        fail(RT_ERROR_ILLEGAL_STATE, "%s is not capturing (no rtStreamBeginCapture on it, or the capture ended)",
             name(stream).c_str());
    if (&c->origin() != &stream)
        fail(RT_ERROR_ILLEGAL_STATE, "%s joined capture %llu through an event; the capture ends on the stream it was "
             "begun on (%s)", name(stream).c_str(), static_cast<unsigned long long>(c->id), name(c->origin()).c_str());
    if (c->mode != RT_STREAM_CAPTURE_MODE_RELAXED && c->thread != std::this_thread::get_id())
        fail(RT_ERROR_STREAM_CAPTURE_WRONG_THREAD, "capture %llu on %s was begun by another thread in %s: only that "
             "thread can end it (the capture goes on; begin it in RT_STREAM_CAPTURE_MODE_RELAXED to end it "
             "anywhere)", static_cast<unsigned long long>(c->id), name(stream).c_str(), mode_name(c->mode));
    ended = detach(c);
    if (ended->broken != RT_SUCCESS)
        fail(ended->broken, "capture %llu on %s was invalidated: %s", static_cast<unsigned long long>(ended->id),
             name(stream).c_str(), ended->why.c_str());
    if (std::string unjoined = unjoined_streams(*ended); !unjoined.empty())
        fail(RT_ERROR_STREAM_CAPTURE_UNJOINED, "capture %llu on %s: unjoined work on %s — a stream that joined the "
             "capture must be joined back (record an event on it after its last operation and make %s wait for it)",
             static_cast<unsigned long long>(ended->id), name(stream).c_str(), unjoined.c_str(),
             name(stream).c_str());
    return std::move(ended->graph);
}

rtStreamCaptureStatus capture_status(Stream& stream, uint64_t* id) {
    if (!stream.capture()) return RT_STREAM_CAPTURE_STATUS_NONE;
    auto held = lock();
    Capture* c = stream.capture();
    if (!c) return RT_STREAM_CAPTURE_STATUS_NONE;
    if (stream.is_default())
        fail(RT_ERROR_STREAM_CAPTURE_IMPLICIT, "the default stream of %s is unusable while blocking streams of the "
             "device are being captured (capture %llu on %s)", stream.device().label().c_str(),
             static_cast<unsigned long long>(c->id), name(c->origin()).c_str());
    if (id) *id = c->id;
    return c->broken != RT_SUCCESS ? RT_STREAM_CAPTURE_STATUS_INVALIDATED : RT_STREAM_CAPTURE_STATUS_ACTIVE;
}

rtStreamCaptureMode exchange_thread_mode(rtStreamCaptureMode mode) { return std::exchange(t_mode, mode); }

// ---------------------------------------------------------------- hooks of the enqueue paths

bool capture_copy(Stream& stream, void* dst, const void* src, size_t bytes, int kind, const char* api) {
    auto held = lock();
    return record_operation(stream, api, [&](Capture& c, Capture::Member& m) {
        MemoryParams p = make_copy_params(*c.graph, dst, src, bytes, kind, api);
        if (bytes == 0) return;  // as on a stream: nothing to do, no node
        auto n = make_node(RT_GRAPH_NODE_TYPE_MEMCPY);
        n->memory = p;
        append(c, m, std::move(n));
    });
}

bool capture_fill(Stream& stream, void* dst, int value, size_t bytes, const char* api) {
    auto held = lock();
    return record_operation(stream, api, [&](Capture& c, Capture::Member& m) {
        MemoryParams p = make_fill_params(*c.graph, dst, value, bytes, api);
        if (bytes == 0) return;
        auto n = make_node(RT_GRAPH_NODE_TYPE_MEMSET);
        n->memory = p;
        append(c, m, std::move(n));
    });
}

bool capture_kernel(Stream& stream, const CoreFunction& function, const backend::LaunchShape& shape,
                    void* const* args, int num_args, const size_t* arg_sizes) {
    auto held = lock();
    return record_operation(stream, "the kernel launch", [&](Capture& c, Capture::Member& m) {
        auto n = make_node(RT_GRAPH_NODE_TYPE_KERNEL);
        n->kernel = make_kernel_params(*c.graph, function, shape, args, num_args, arg_sizes);
        append(c, m, std::move(n));
    });
}

bool capture_host_call(Stream& stream, rtHostFn_t fn, void* user_data) {
    auto held = lock();
    return record_operation(stream, "rtLaunchHostFunc", [&](Capture& c, Capture::Member& m) {
        auto n = make_node(RT_GRAPH_NODE_TYPE_HOST);
        n->host = backend::HostCall{fn, user_data, nullptr, 0};
        append(c, m, std::move(n));
    });
}

bool capture_collective(Stream& stream, const std::shared_ptr<const comm::Collective>& collective, const char* api) {
    auto held = lock();
    return record_operation(stream, api, [&](Capture& c, Capture::Member& m) {
        auto n = make_node(RT_GRAPH_NODE_TYPE_COLLECTIVE);
        n->collective = collective;
        append(c, m, std::move(n));
    });
}

bool capture_alloc(Stream& stream, size_t bytes, void** ptr, const char* api) {
    auto held = lock();
    return record_operation(stream, api, [&](Capture& c, Capture::Member& m) {
        if (bytes == 0) {  // as on a stream: NULL, no node
            *ptr = nullptr;
            return;
        }
        std::unique_ptr<Node> n;
        {
            std::lock_guard graph_lock(c.graph->mutex());
            n = make_alloc_node(*c.graph, bytes, api);
        }
        *ptr = append(c, m, std::move(n))->address;
    });
}

bool capture_free(Stream& stream, void* ptr, const char* api) {
    auto held = lock();
    return record_operation(stream, api, [&](Capture& c, Capture::Member& m) {
        if (!ptr) return;  // as on a stream
        std::unique_ptr<Node> n;
        {
            std::lock_guard graph_lock(c.graph->mutex());
            n = make_free_node(*c.graph, ptr, m.frontier, api);
        }
        append(c, m, std::move(n));
    });
}

bool capture_record(Stream& stream, const std::shared_ptr<Event>& event) {
    auto held = lock();
    return record_operation(stream, "rtEventRecord", [&](Capture& c, Capture::Member& m) {
        auto n = make_node(RT_GRAPH_NODE_TYPE_EVENT_RECORD);
        n->event = event;
        Node* added = append(c, m, std::move(n));
        event->mark_captured(c.id, {added});
    });
}

bool capture_wait(const std::shared_ptr<Stream>& stream, const std::shared_ptr<Event>& event) {
    auto held = lock();
    const uint64_t event_capture = event->capture_id();
    Capture* theirs = event_capture ? find_active(event_capture) : nullptr;
    if (!stream->capture()) {
        if (!event_capture) return false;  // both ended meanwhile: a plain wait
        if (!theirs)
            fail(RT_ERROR_CAPTURED_EVENT, "the event was last recorded in capture %llu, which has ended: that record "
                 "is a node of the capture's graph, with no work to wait for (record the event outside a capture)",
                 static_cast<unsigned long long>(event_capture));
        // Fork: the stream joins the event's capture, its next operations depending on the event's record.
        if (stream->is_default())
            fail(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the default stream cannot join capture %llu (wait for the "
                 "event on a stream created with rtStreamCreate)", static_cast<unsigned long long>(theirs->id));
        if (&stream->device() != &theirs->graph->device())
            fail(RT_ERROR_INVALID_VALUE, "%s cannot join capture %llu: a capture holds the work of one device (%s)",
                 name(*stream).c_str(), static_cast<unsigned long long>(theirs->id),
                 theirs->graph->device().label().c_str());
        if (theirs->broken != RT_SUCCESS)
            fail(RT_ERROR_STREAM_CAPTURE_INVALIDATED, "the event was recorded in capture %llu, which was invalidated: "
                 "%s", static_cast<unsigned long long>(theirs->id), theirs->why.c_str());
        theirs->members.push_back({stream, event->capture_frontier()});
        stream->set_capture(theirs);
        if (stream->blocking()) relink_default_stream(stream->device());
        return true;
    }
    return record_operation(*stream, "rtStreamWaitEvent", [&](Capture& c, Capture::Member& m) {
        if (theirs == &c) {  // join: edges, no node
            for (Node* n : event->capture_frontier())
                if (std::find(m.frontier.begin(), m.frontier.end(), n) == m.frontier.end()) m.frontier.push_back(n);
            return;
        }
        if (theirs)
            fail(RT_ERROR_STREAM_CAPTURE_ISOLATION, "the event was recorded in capture %llu (on %s), and %s is "
                 "capturing another (%llu): a dependency cannot cross from one capture into another",
                 static_cast<unsigned long long>(theirs->id), name(theirs->origin()).c_str(), name(*stream).c_str(),
                 static_cast<unsigned long long>(c.id));
        if (event_capture)
            fail(RT_ERROR_CAPTURED_EVENT, "the event was last recorded in capture %llu, which has ended: it has no "
                 "work to wait for", static_cast<unsigned long long>(event_capture));
        auto n = make_node(RT_GRAPH_NODE_TYPE_WAIT_EVENT);  // an event of the world outside: waited at each launch
        n->event = event;
        append(c, m, std::move(n));
    });
}

bool capture_defer_release(Stream& stream, rtHostFn_t release, void* user_data) {
    if (stream.is_default()) return false;
    auto held = lock();
    Capture* c = stream.capture();
    if (!c) return false;
    // Even in an invalidated capture: the graph still goes (at rtStreamEndCapture), and the release with it.
    c->graph->keepalive()->add_release(release, user_data);
    return true;
}

void refuse_on_capturing(Stream& stream, const char* what, const char* instead) {
    auto held = lock();
    Capture* c = stream.capture();
    if (!c) return;
    if (stream.is_default()) refuse_implicit(stream, what);
    c->invalidate(format("%s on %s", what, name(stream).c_str()));
    fail(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s: %s is capturing (capture %llu, now invalidated)%s%s", what,
         name(stream).c_str(), static_cast<unsigned long long>(c->id), instead ? "; " : "", instead ? instead : "");
}

void refuse_destroy_capturing(Stream& stream) {
    auto held = lock();
    if (Capture* c = stream.capture())
        fail(RT_ERROR_ILLEGAL_STATE, "%s takes part in capture %llu (begun on %s): end the capture first",
             name(stream).c_str(), static_cast<unsigned long long>(c->id), name(c->origin()).c_str());
}

// ---------------------------------------------------------------- calls that are not stream operations

void detail::refuse_unsafe(const char* api) {
    auto held = lock();
    const std::thread::id me = std::this_thread::get_id();
    std::string forbidding;
    for (const auto& c : state().active) {
        if (c->mode == RT_STREAM_CAPTURE_MODE_RELAXED) continue;
        const bool own = c->thread == me && t_mode != RT_STREAM_CAPTURE_MODE_RELAXED;
        const bool global = c->thread != me && c->mode == RT_STREAM_CAPTURE_MODE_GLOBAL &&
                            t_mode == RT_STREAM_CAPTURE_MODE_GLOBAL;
        if (!own && !global) continue;
        c->invalidate(format("%s was called %s during it", api, own ? "by the capturing thread" : "by another thread"));
        forbidding += format("%s%llu on %s (%s, begun by %s)", forbidding.empty() ? "" : ", ",
                             static_cast<unsigned long long>(c->id), name(c->origin()).c_str(), mode_name(c->mode),
                             own ? "this thread" : "another thread");
    }
    if (forbidding.empty()) return;
    fail(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED,
         "%s is not allowed during stream capture %s, with this thread's capture mode %s: it is not an operation of "
         "a stream, so the graph could not replay it (capture now invalidated; use the asynchronous call on the "
         "capturing stream, or set RT_STREAM_CAPTURE_MODE_RELAXED with rtThreadExchangeStreamCaptureMode around it)",
         api, forbidding.c_str(), mode_name(t_mode));
}

void check_device_synchronize(CoreDevice& device) {
    check_unsafe("rtDeviceSynchronize");
    bool capturing = false;
    device.for_each_stream([&](const std::shared_ptr<Stream>& s) { capturing = capturing || s->capture(); });
    if (!capturing) return;
    auto held = lock();
    std::string captures;
    for (const auto& c : state().active) {
        bool here = false;
        for (const Capture::Member& m : c->members) here = here || &m.stream->device() == &device;
        if (!here) continue;
        c->invalidate(format("rtDeviceSynchronize on %s would have waited for its streams", device.label().c_str()));
        captures += format("%s%llu on %s", captures.empty() ? "" : ", ", static_cast<unsigned long long>(c->id),
                           name(c->origin()).c_str());
    }
    if (captures.empty()) return;
    fail(RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, "rtDeviceSynchronize would wait for streams of %s that are being "
         "captured (capture %s, now invalidated); synchronize the streams that do not capture instead",
         device.label().c_str(), captures.c_str());
}

void detail::refuse_captured_event(const Event& event, const char* api) {
    auto held = lock();
    const uint64_t id = event.capture_id();
    fail(RT_ERROR_CAPTURED_EVENT, "%s: the event was last recorded in stream capture %llu (%s): that record is a node "
         "of the capture's graph, with no work to wait for (record the event outside a capture)", api,
         static_cast<unsigned long long>(id), find_active(id) ? "still under way" : "ended");
}

void end_all_captures() {
    std::vector<std::unique_ptr<Capture>> ended;
    {
        auto held = lock();
        while (!state().active.empty()) ended.push_back(detach(state().active.back().get()));
    }
}

}  // namespace rt::graph
