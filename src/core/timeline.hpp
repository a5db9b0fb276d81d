// The core timeline: everything that must happen "once these streams have reached here" (deferred frees,
// stream teardown, keep-alive releases, host-function cleanup), run by one runtime thread, never waited for
// under a lock. Also the queue-context rules: what a host function or a release may not wait for.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace rt {

class Stream;

/// "Stream s has completed everything queued before `position`". Holds the stream weakly: a stream is
/// released only once it is idle (rtStreamDestroy goes through the timeline), so an expired one is reached.
struct StreamPoint {
    std::weak_ptr<Stream> stream;
    uint64_t position;
    bool reached() const;
};

/// The points of every stream of every device that still has unfinished work (memory may be used by any
/// queued work, peer copies included). Never blocks.
std::vector<StreamPoint> unfinished_points();
/// `stream`'s current point, if it has unfinished work.
std::vector<StreamPoint> unfinished_point(Stream& stream);
bool all_reached(const std::vector<StreamPoint>& points);
/// Blocks until every point is reached (waits for each unreached stream to go idle). Never under a lock; refused
/// (NOT_PERMITTED) in queue context.
void wait_for(const std::vector<StreamPoint>& points);

/// Thread-safe. Actions run on the timeline's thread (queue context: they must not wait), in no particular
/// order relative to each other, exactly once.
class Timeline {
public:
    using Action = std::function<void()>;

    Timeline();
    ~Timeline();  ///< runs every action still pending (the runtime waited for all work first)
    /// Joins the thread; later defers run at once, wake() stays harmless (queues may still call it).
    void stop();

    /// Runs `action` once every point in `after` is reached: at once, in the caller, if they all are — except on a
    /// driver thread (in_driver_thread), where nothing is asked of the streams: the timeline's thread looks.
    void defer(std::vector<StreamPoint> after, Action action);
    /// defer(points(), action) — with the points taken by the timeline's thread, later, when called on a driver
    /// thread, where streams cannot be asked where they are (later points: the action only ever waits longer).
    void defer_after(std::function<std::vector<StreamPoint>()> points, Action action);
    /// Runs the actions that are due now, in the caller; outside queue context it then waits for the ones the
    /// timeline's thread is running (they never wait themselves), so that what was due has run when it returns.
    /// Does nothing on a driver thread.
    void run_due();
    /// Blocks until every action deferred before the call has run. Never from queue context.
    void drain();
    /// Wakes the thread to look at the pending actions (called by queues reaching an armed position).
    void wake();
    /// Whether no action is pending or running.
    bool idle();

private:
    struct Pending {
        std::vector<StreamPoint> after;
        Action action;
    };
    void thread_main();
    /// Moves the due actions out of pending_ (mutex_ held); `ahead` (optional) gets the earliest unreached
    /// point of each stream that still blocks an action.
    std::vector<Action> take_due(std::vector<StreamPoint>* ahead);
    /// Asks each stream still blocking an action to wake the thread when it gets there.
    void arm(const std::vector<StreamPoint>& points);
    static void run_all(std::vector<Action>& actions);
    /// run_all for actions counted in in_flight_ by take_due.
    void run_taken(std::vector<Action>& actions);

    std::mutex mutex_;  // guards pending_ and thread_; never held while an action runs or a stream is waited for
    std::vector<Pending> pending_;
    std::atomic<size_t> pending_count_{0};  // pending_.size(), read without the lock by run_due()
    std::atomic<uint32_t> in_flight_{0};     // taken by take_due, not run yet (a futex word for run_due)
    std::atomic<int> in_flight_waiters_{0};
    // Bumped by wake() (from executors, without a lock: a futex word) and by the destructor.
    std::atomic<uint32_t> wake_seq_{0};
    std::atomic<bool> stop_{false};
    std::thread thread_;  // started with the first pending action
};

/// Queue context: the calling thread is running a host function or a timeline action. Such code must not
/// wait for queued work (it may be the very work being waited for).
bool in_queue_context();
/// RAII marker for queue context (nests).
class QueueContext {
public:
    QueueContext();
    ~QueueContext();
    QueueContext(const QueueContext&) = delete;
    QueueContext& operator=(const QueueContext&) = delete;
};
/// Throws RT_ERROR_NOT_PERMITTED naming `api` when called from queue context.
void refuse_wait_in_queue_context(const char* api);

/// Driver thread: the calling thread is a driver's own callback thread (CUDA runs host functions on one), where
/// that backend must not be called at all — not even to ask a stream where it is (the backend refuses with
/// NOT_PERMITTED). Queue context too. Releases requested there are taken over by the timeline's thread
/// (Timeline::defer_after), and the timeline runs no action on such a thread.
bool in_driver_thread();
/// RAII marker for a driver thread, set by the backend's trampoline around what it runs (nests).
class DriverThread {
public:
    DriverThread();
    ~DriverThread();
    DriverThread(const DriverThread&) = delete;
    DriverThread& operator=(const DriverThread&) = delete;

private:
    QueueContext queue_context_;
};

}  // namespace rt
