// The core timeline: deferred actions keyed by stream points, run by one runtime thread that queues wake.
#include "core/timeline.hpp"

#include <algorithm>
#include <optional>

#include "core/error.hpp"
#include "core/runtime.hpp"

namespace rt {

namespace {
thread_local int t_queue_context = 0;
thread_local int t_driver_thread = 0;
}

bool in_queue_context() { return t_queue_context > 0; }
QueueContext::QueueContext() { ++t_queue_context; }
QueueContext::~QueueContext() { --t_queue_context; }

bool in_driver_thread() { return t_driver_thread > 0; }
DriverThread::DriverThread() { ++t_driver_thread; }
DriverThread::~DriverThread() { --t_driver_thread; }

void refuse_wait_in_queue_context(const char* api) {
    if (t_queue_context > 0)
        fail(RT_ERROR_NOT_PERMITTED, "%s: called from inside a host function or a deferred release, where it would "
             "wait for queued work (possibly the very work that is running); a host function may queue work, record "
             "events, query, allocate and free, but not wait", api);
}

bool StreamPoint::reached() const {
    std::shared_ptr<Stream> s = stream.lock();
    if (!s) return true;
    try {
        return s->queue().reached_impl(position);
    } catch (const Error& e) {
        if (e.code() == RT_ERROR_NOT_PERMITTED) return false;  // not askable here (a driver thread): not known reached
        return true;  // a lost device completes nothing more: what waited for it may go
    } catch (...) {
        return true;
    }
}

void wait_for(const std::vector<StreamPoint>& points) {
    for (const StreamPoint& sp : points)
        if (std::shared_ptr<Stream> s = sp.stream.lock(); s && !sp.reached()) s->wait_idle();
}

bool all_reached(const std::vector<StreamPoint>& points) {
    for (const StreamPoint& p : points)
        if (!p.reached()) return false;
    return true;
}

namespace {
/// The stream's current position if it has unfinished work. A stream whose device was lost (its queue throws)
/// completes nothing more and is not waited for.
std::optional<uint64_t> unfinished_position(Stream& s) noexcept {
    try {
        backend::Queue& q = s.queue();
        if (q.query_impl()) return std::nullopt;
        uint64_t pos = q.position_impl();
        if (q.reached_impl(pos)) return std::nullopt;
        return pos;
    } catch (...) {
        return std::nullopt;
    }
}
}  // namespace

std::vector<StreamPoint> unfinished_points() {
    std::vector<StreamPoint> out;
    Runtime& r = runtime();
    for (int i = 0; i < r.device_count(); ++i)
        r.device(i).for_each_stream([&](const std::shared_ptr<Stream>& s) {
            if (std::optional<uint64_t> pos = unfinished_position(*s)) out.push_back({s, *pos});
        });
    return out;
}

std::vector<StreamPoint> unfinished_point(Stream& stream) {
    std::optional<uint64_t> pos = unfinished_position(stream);
    if (!pos) return {};
    std::vector<StreamPoint> out;
    stream.device().for_each_stream([&](const std::shared_ptr<Stream>& s) {
        if (s.get() == &stream) out.push_back({s, *pos});
    });
    return out;
}

Timeline::Timeline() = default;

void Timeline::stop() {
    stop_.store(true);
    wake_seq_.fetch_add(1);
    wake_seq_.notify_all();
    std::thread t;
    {
        std::lock_guard lock(mutex_);
        t = std::move(thread_);
    }
    if (t.joinable()) t.join();
}

Timeline::~Timeline() {
    stop();
    std::vector<Action> rest;
    for (Pending& p : pending_) rest.push_back(std::move(p.action));
    pending_.clear();
    run_all(rest);
}

void Timeline::run_all(std::vector<Action>& actions) {
    QueueContext context;
    for (Action& a : actions) {
        try {
            a();
        } catch (...) {
            // An action releases resources; one that fails has nobody to report to. Keep the others going.
        }
        a = nullptr;  // its captures die here, still in queue context
    }
}

void Timeline::defer(std::vector<StreamPoint> after, Action action) {
    // A driver thread asks no stream anything (nor runs actions that would call the driver): the thread looks.
    const bool driver_thread = in_driver_thread();
    // Stopped (teardown: all work has completed): nothing is left to wait for.
    if (!driver_thread && (stop_.load() || all_reached(after))) {
        std::vector<Action> now;
        now.push_back(std::move(action));
        run_all(now);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        pending_.push_back({after, std::move(action)});
        pending_count_.store(pending_.size());
        if (!thread_.joinable() && !stop_.load()) thread_ = std::thread([this] { thread_main(); });
    }
    if (driver_thread) wake();  // the thread arms what is still ahead
    else arm(after);
}

void Timeline::defer_after(std::function<std::vector<StreamPoint>()> points, Action action) {
    if (!in_driver_thread()) {
        defer(points(), std::move(action));
        return;
    }
    defer({}, [this, points = std::move(points), action = std::move(action)]() mutable {
        defer(points(), std::move(action));
    });
}

void Timeline::arm(const std::vector<StreamPoint>& points) {
    for (const StreamPoint& p : points)
        if (std::shared_ptr<Stream> s = p.stream.lock()) s->queue().notify_at_impl(p.position);
}

std::vector<Timeline::Action> Timeline::take_due(std::vector<StreamPoint>* ahead) {
    std::vector<Action> due;
    for (size_t i = 0; i < pending_.size();) {
        bool reached = true;
        for (const StreamPoint& p : pending_[i].after) {
            if (p.reached()) continue;
            reached = false;
            if (!ahead) break;
            // One point per stream is enough to arm: the earliest.
            auto same = std::find_if(ahead->begin(), ahead->end(), [&](const StreamPoint& q) {
                return !q.stream.owner_before(p.stream) && !p.stream.owner_before(q.stream);
            });
            if (same == ahead->end()) ahead->push_back(p);
            else same->position = std::min(same->position, p.position);
        }
        if (!reached) {
            ++i;
            continue;
        }
        due.push_back(std::move(pending_[i].action));
        pending_[i] = std::move(pending_.back());
        pending_.pop_back();
    }
    // In flight before no longer pending: run_due's fast path reads them the other way round (seq_cst).
    in_flight_.fetch_add(static_cast<uint32_t>(due.size()));
    pending_count_.store(pending_.size());
    return due;
}

void Timeline::run_taken(std::vector<Action>& actions) {
    run_all(actions);
    if (actions.empty()) return;
    in_flight_.fetch_sub(static_cast<uint32_t>(actions.size()));
    if (in_flight_waiters_.load() > 0) in_flight_.notify_all();  // seq_cst with run_due's waiter count
}

void Timeline::run_due() {
    if (pending_count_.load() == 0 && in_flight_.load() == 0) return;
    if (in_driver_thread()) return;  // due actions may call the driver: the timeline's thread runs them
    std::vector<Action> due;
    {
        std::lock_guard lock(mutex_);
        due = take_due(nullptr);
    }
    run_taken(due);
    if (in_queue_context()) return;  // an action (or a host function) must not wait, not even for the others
    in_flight_waiters_.fetch_add(1);
    for (uint32_t v; (v = in_flight_.load()) != 0;) in_flight_.wait(v);
    in_flight_waiters_.fetch_sub(1);
}

void Timeline::wake() {
    wake_seq_.fetch_add(1);
    wake_seq_.notify_one();
}

bool Timeline::idle() {
    std::lock_guard lock(mutex_);
    return pending_.empty() && in_flight_.load() == 0;
}

void Timeline::drain() {
    refuse_wait_in_queue_context("rtFinalize");
    for (;;) {
        std::vector<StreamPoint> points;
        {
            std::lock_guard lock(mutex_);
            if (pending_.empty() && in_flight_.load() == 0) return;
            for (const Pending& p : pending_)
                for (const StreamPoint& sp : p.after) points.push_back(sp);
        }
        wait_for(points);
        run_due();  // also waits for what the thread is running
    }
}

void Timeline::thread_main() {
    for (;;) {
        uint32_t seen = wake_seq_.load();
        if (stop_.load()) return;
        std::vector<Action> due;
        std::vector<StreamPoint> ahead;
        {
            std::lock_guard lock(mutex_);
            due = take_due(&ahead);
        }
        run_taken(due);
        // A queue notifies once per arming: ask again, for the earliest point still ahead on each stream.
        arm(ahead);
        wake_seq_.wait(seen);
    }
}

}  // namespace rt
