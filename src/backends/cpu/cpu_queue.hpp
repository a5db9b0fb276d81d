// A cpu stream: an in-order ring of task records drained by executors or by the waiting host thread itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cpu/cpu_executor.hpp"
#include "backends/cpu/cpu_kernel.hpp"
#include "core/error.hpp"
#include "core/spin_lock.hpp"
#include "observe/trace.hpp"

namespace rt::cpu {

class CpuQueue;
class CpuGraph;

/// One record of an event: the queue position it waits for, and the failure it carries (written by the record
/// task before it completes, so readers that saw the position complete see it). Shared by the event and by
/// the waits queued on other streams, which keep their record even if the event is recorded again.
struct RecordState {
    std::shared_ptr<CpuQueue> queue;  ///< null: complete when recorded
    uint64_t seq = 0;
    rtError_t code = RT_SUCCESS;
    std::string message;  ///< the failed stream and operation
    int64_t time_ns = 0;  ///< completion time (written by the record task, or at once when complete)
};

/// The shared state of a cpu event: its latest record.
struct EventState {
    std::mutex mutex;
    std::shared_ptr<RecordState> record;  ///< null: never recorded, or recorded complete on a healthy queue
    int64_t time_ns = 0;                  ///< completion time of a record that was complete at once (record null)
    bool timing = true;
    bool blocking_sync = false;
    std::shared_ptr<RecordState> latest();
};

class CpuEvent final : public backend::Event {
public:
    CpuEvent(bool timing, bool blocking_sync);
    bool query_impl() override;
    void synchronize_impl() override;
    float elapsed_ms_impl(backend::Event& end) override;
    rtError_t failure_impl(std::string* message) override;
    const std::shared_ptr<EventState>& state() const { return state_; }

private:
    std::shared_ptr<EventState> state_;
};

/// One operation in a queue: a small record moved through the ring (no heap allocation per task). The
/// payload is a union by type; `ref` keeps alive what the task points to.
struct Task {
    // release: only drops `ref`; graph: one launch of an executable graph (cpu_graph.hpp); joint: a part of a
    // backend::JointStep (`ref`), which parks the queue from its arrival until the step resumes it
    enum class Type : uint8_t { copy, fill, host_call, record, wait, launch, release, graph, joint };
    struct Memory {
        void* dst;
        const void* src;
        size_t bytes;
    };
    struct Launch {
        const CpuFunction* function;  // kept alive by the queue (see CpuQueue::last_function_)
        backend::LaunchShape shape;
        backend::LaunchReport report;
    };
    struct GraphLaunch {
        CpuGraph* graph;  // kept alive by `ref`
        backend::LaunchReport report;
        bool host_nodes;  // graph->has_host_nodes(): host threads leave it to the executors
    };
    /// Set in `dispatch` for a task the trace describes: the executor's switch on `dispatch` sends it to the
    /// stamping path (its bounds check is the only test, so an untraced task pays nothing for the trace).
    static constexpr uint8_t kTraced = 0x80;

    Type type = Type::copy;
    uint8_t dispatch = 0;  // type, | kTraced when traced (written by emplace)
    uint8_t value = 0;     // fill
    trace::Key trace;      // traced: the operation's trace key (trace.hpp), taken where it was queued
    uint64_t seq = 0;
    std::shared_ptr<void> ref;  // record and wait: the RecordState written or waited for; launch: the function
                                // launched before it on this queue, when it changed (see last_function_);
                                // release: the function last_function_ let go of (release_kernels_impl); graph:
                                // the executable graph; joint: the step
    union {
        Memory memory;              // copy, fill
        backend::HostCall call;     // host_call
        uint64_t dep_seq;           // wait: run nothing until the other queue has completed this task
        Launch launch;              // launch
        GraphLaunch graph;          // graph
        int participant;            // joint
    };
    PackedArgs args;  // launch

    Task() : memory{} {}
    RecordState* dep_record() const { return static_cast<RecordState*>(ref.get()); }
    CpuQueue* dep() const { return dep_record()->queue.get(); }
};

class CpuQueue final : public backend::Queue, public std::enable_shared_from_this<CpuQueue> {
public:
    /// stream_min_bytes: see rt_cpu_launch.stream_min_bytes (cpu_kernel_abi.h).
    /// `priority`: the stream's (numerically lower: taken first by the executors when several queues are ready).
    CpuQueue(Executor& executor, unsigned long long stream_min_bytes, int priority = 0);
    int priority() const { return priority_; }
    ~CpuQueue() override;

    void copy_impl(void* dst, const void* src, size_t bytes, backend::CopyKind kind, const trace::Key& traced) override;
    void fill_impl(void* dst, uint8_t value, size_t bytes, const trace::Key& traced) override;
    void host_call_impl(const backend::HostCall& call, const trace::Key& traced) override;
    void launch_impl(const std::shared_ptr<backend::Function>& function, const backend::LaunchShape& shape,
                     void* const* args, const backend::LaunchReport& report, const trace::Key& traced) override;
    /// `graph` is a CpuGraph (the cpu device's compile_graph_impl): one task that replays it.
    void launch_graph_impl(const std::shared_ptr<backend::GraphExecutable>& graph,
                           const backend::LaunchReport& report, const trace::Key& traced) override;
    void record_impl(backend::Event& event, const trace::Key& traced) override;
    void wait_impl(backend::Event& event, const trace::Key& traced) override;
    void synchronize_impl() override;
    bool query_impl() override;
    uint64_t position_impl() override;
    uint64_t queued_impl() override { return submitted_.load(std::memory_order_acquire); }
    bool reached_impl(uint64_t position) override { return completed() >= position; }
    void notify_at_impl(uint64_t position) override;
    void bind_error_slot_impl(AsyncErrorSlot* slot) override { slot_ = slot; }
    /// Drops last_function_: at once when the queue is idle, else in a release task after the launches queued.
    void release_kernels_impl() override;
    void joint_impl(const std::shared_ptr<backend::JointStep>& step, int participant, const trace::Key& traced) override;
    bool hold_idle_impl() override;
    void release_impl(const std::shared_ptr<backend::JointStep>& pending) override;

    /// Sequence number of the last completed task (tasks complete in order).
    uint64_t completed() const { return completed_.load(std::memory_order_acquire); }
    /// Blocks until task `target` has completed; runs the queue's (and its dependencies') tasks on the
    /// calling thread when no executor has started them. `park_at_once`: skip the spin phase.
    void wait_until(uint64_t target, bool park_at_once = false);
    /// Called by an executor that took this queue from the ready list.
    void run_scheduled();
    /// A hint, read without the lock: the queue was scheduled with a joint step's part at its front.
    bool joint_front() const { return joint_front_.load(std::memory_order_relaxed); }
    /// Run by a host thread that took this queue from the ready list (Executor::take_ready_joint) while its own queue
    /// waits at a joint step: this queue's front part arrives (and completes if that arrival finished the step), and
    /// the rest goes back to the executors. One thread then drives every rank of an in-process collective.
    void help_arrival();

private:
    // held: by hold_idle_impl's caller (empty; pushes wait until release_impl).
    enum class State : uint8_t { idle, scheduled, running, blocked, held };

    /// Appends a task written by fill(Task&) into its ring slot (under the lock), and makes the queue
    /// runnable; returns its sequence number. `launched`: the function of a launch task, whose lifetime
    /// the queue takes over.
    template <class Fill>
    uint64_t emplace(Fill&& fill, const trace::Key& traced, const std::shared_ptr<backend::Function>* launched = nullptr);
    uint64_t push(Task&& task, const trace::Key& traced);
    /// emplace's part under the lock: writes the task at the tail (growing the ring when full); returns its number.
    template <class Fill>
    uint64_t append(Fill&& fill, const trace::Key& traced, const std::shared_ptr<backend::Function>* launched);
    /// Runs tasks in order while owning the queue (state_ == running) up to `limit`, at most `budget` tasks.
    /// `host`: the caller is a host thread helping inside a synchronize: it stops before a host function (or a graph
    /// with host nodes) and hands the queue to an executor (host functions run on runtime threads only).
    void run(uint64_t limit, size_t budget, bool host);
    /// Runs `task` (by `dispatch`: a traced task goes through execute_traced, which stamps it and runs it).
    /// `traced`: the key of the traced task being run, for a graph launch's node spans (null: not traced).
    void execute(Task& task, const trace::Key* traced = nullptr);
    void execute_traced(Task& task);
    /// A task queued behind a failure not reported yet: counted as skipped, its references dropped.
    bool skip_after_failure(Task& task);
    void complete(uint64_t seq);
    /// Registers `waiter` to be rescheduled when task `seq` of this queue completes; false if it already has.
    bool add_waiter(const std::shared_ptr<CpuQueue>& waiter, uint64_t seq);
    /// A dependency of the front task completed: make the queue runnable again.
    void unblock();
    /// The joint step at the front resumed the queue (any thread).
    void resume_joint();
    /// After a blocked -> scheduled transition: hands the queue to an executor (or an attending host thread).
    void rescheduled();
    /// Calls the front joint task's arrive_impl (joint_phase_ already `arrived`), on the thread running the queue.
    void arrive(const std::shared_ptr<backend::JointStep>& step, int participant);

    Executor& executor_;
    const unsigned long long stream_min_bytes_;
    // Guards the ring and state_; submitted_ is written under it, read without it. A spin lock: held for
    // a push or a batch take, and a pthread mutex would put the producer to sleep in the kernel whenever
    // it meets the executor there.
    SpinLock mutex_;
    std::vector<Task> ring_;
    uint64_t head_ = 0, tail_ = 0;
    std::atomic<uint64_t> submitted_{0};
    // The function of the latest launch, kept alive by the queue: launches of the same function (the
    // common case: a loop) then touch no reference count, which would otherwise bounce a cache line
    // between the submitting thread and the executor on every launch. When the function changes, the
    // previous one rides in the new task's `ref` and dies after it: every earlier launch of it is done.
    std::shared_ptr<backend::Function> last_function_;
    State state_ = State::idle;
    // The front joint task's progress: none (not reached yet), arrived (arrive_impl called; blocked until resumed),
    // resumed (it completes like any task). Only the front task can be a started joint.
    enum class JointPhase : uint8_t { none, arrived, resumed };
    JointPhase joint_phase_ = JointPhase::none;
    int64_t joint_arrived_ = 0;  // traced: when the front joint task arrived (its span's start: the step's work)
    bool executor_only_ = false;  // a host function (or graph with some) is next: host threads leave it to executors
    std::atomic<bool> joint_front_{false};  // set with state_ = scheduled (under the lock): the front is a joint part
    /// state_ = scheduled, with the joint_front_ hint (the lock held).
    void set_scheduled();
    AsyncErrorSlot* slot_ = nullptr;  // the core stream's: while it holds a failure, work is skipped
    // notify_at_impl's earliest armed position (UINT64_MAX: none); complete() fires notify_timeline once.
    std::atomic<uint64_t> notify_at_{UINT64_MAX};
    void fire_notify();

    alignas(64) std::atomic<uint64_t> completed_{0};
    std::atomic<uint32_t> signal_{0};        // bumped on completion when host threads are parked on it
    std::atomic<int> host_waiters_{0};
    // Host threads in wait_until that are helping this queue's dependency: when it completes, they run
    // this queue themselves, so unblock() leaves it off the executors' ready list (one hand-off less).
    std::atomic<int> attended_{0};

    std::mutex waiters_mutex_;
    std::atomic<int> waiter_count_{0};
    std::vector<std::pair<std::shared_ptr<CpuQueue>, uint64_t>> waiters_;
    const int priority_;
};

}  // namespace rt::cpu
