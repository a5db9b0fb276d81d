// The cpu stream: task ring, in-order draining, event dependencies without blocking executors, host-side help.
#include "backends/cpu/cpu_queue.hpp"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "backends/cpu/cpu_copy.hpp"
#include "backends/cpu/cpu_graph.hpp"

namespace rt::cpu {

namespace {
/// An executor runs at most this many tasks of one queue before letting other queues go first.
constexpr size_t kExecutorBudget = 256;
}  // namespace

// ---------------------------------------------------------------- events

CpuEvent::CpuEvent(bool timing, bool blocking_sync) : state_(std::make_shared<EventState>()) {
    state_->timing = timing;
    state_->blocking_sync = blocking_sync;
}

std::shared_ptr<RecordState> EventState::latest() {
    std::lock_guard lock(mutex);
    return record;
}

bool CpuEvent::query_impl() {
    std::shared_ptr<RecordState> r = state_->latest();
    return !r || !r->queue || r->queue->completed() >= r->seq;
}

void CpuEvent::synchronize_impl() {
    std::shared_ptr<RecordState> r = state_->latest();
    if (r && r->queue) r->queue->wait_until(r->seq, state_->blocking_sync);
}

rtError_t CpuEvent::failure_impl(std::string* message) {
    std::shared_ptr<RecordState> r = state_->latest();
    if (!r || r->code == RT_SUCCESS) return RT_SUCCESS;  // read after completion: the record task wrote it before
    *message = r->message;
    return r->code;
}

float CpuEvent::elapsed_ms_impl(backend::Event& end) {
    auto& other = static_cast<CpuEvent&>(end);
    // Both completed (checked by the core): a queued record's time was written before its completion.
    auto completed_at = [](EventState& e) {
        std::lock_guard lock(e.mutex);
        return e.record ? e.record->time_ns : e.time_ns;
    };
    int64_t a = completed_at(*state_), b = completed_at(*other.state_);
    return static_cast<float>(static_cast<double>(b - a) / 1e6);
}

// ---------------------------------------------------------------- queue: submission

CpuQueue::CpuQueue(Executor& executor, unsigned long long stream_min_bytes, int priority)
    : executor_(executor), stream_min_bytes_(stream_min_bytes), ring_(64), priority_(priority) {}

CpuQueue::~CpuQueue() = default;

template <class Fill>
uint64_t CpuQueue::emplace(Fill&& fill, const trace::Key& traced, const std::shared_ptr<backend::Function>* launched) {
    bool schedule = false;
    uint64_t seq;
    {
        std::unique_lock lock(mutex_);
        // Held by a thread carrying out an operation at its call (hold_idle_impl): what is queued now comes after that
        // operation, whose own part (if it needs one) goes first at release_impl — a few microseconds at most.
        while (state_ == State::held) {
            lock.unlock();
            std::this_thread::yield();
            lock.lock();
        }
        seq = append(std::forward<Fill>(fill), traced, launched);
        if (state_ == State::idle) {
            set_scheduled();
            schedule = true;
        }
    }
    if (schedule) executor_.schedule(shared_from_this());
    return seq;
}

template <class Fill>
uint64_t CpuQueue::append(Fill&& fill, const trace::Key& traced, const std::shared_ptr<backend::Function>* launched) {
    if (tail_ - head_ == ring_.size()) {  // full: double, keeping order (amortised; no per-task allocation)
        std::vector<Task> bigger(ring_.size() * 2);
        for (uint64_t i = head_; i != tail_; ++i) bigger[i & (bigger.size() - 1)] = std::move(ring_[i & (ring_.size() - 1)]);
        ring_.swap(bigger);
    }
    Task& task = ring_[tail_ & (ring_.size() - 1)];  // moved-from by run(): owns nothing
    fill(task);
    // Written whether or not a trace is written, without a test (the core's was the one): a traced task carries
    // its mark in `dispatch`.
    task.trace = traced;
    task.dispatch = static_cast<uint8_t>(static_cast<uint8_t>(task.type) |
                                         static_cast<uint8_t>((traced.track != 0) * Task::kTraced));
    if (launched && launched->get() != last_function_.get()) {
        task.ref = std::move(last_function_);
        last_function_ = *launched;
    }
    const uint64_t seq = task.seq = submitted_.load(std::memory_order_relaxed) + 1;
    ++tail_;
    submitted_.store(seq, std::memory_order_release);
    return seq;
}

uint64_t CpuQueue::push(Task&& task, const trace::Key& traced) {
    return emplace([&](Task& slot) { slot = std::move(task); }, traced);
}

void CpuQueue::copy_impl(void* dst, const void* src, size_t bytes, backend::CopyKind, const trace::Key& traced) {
    Task t;
    t.type = Task::Type::copy;
    t.memory = {dst, src, bytes};
    push(std::move(t), traced);
}

void CpuQueue::fill_impl(void* dst, uint8_t value, size_t bytes, const trace::Key& traced) {
    Task t;
    t.type = Task::Type::fill;
    t.memory = {dst, nullptr, bytes};
    t.value = value;
    push(std::move(t), traced);
}

void CpuQueue::host_call_impl(const backend::HostCall& call, const trace::Key& traced) {
    Task t;
    t.type = Task::Type::host_call;
    t.call = call;
    push(std::move(t), traced);
}

void CpuQueue::launch_impl(const std::shared_ptr<backend::Function>& function, const backend::LaunchShape& shape,
                           void* const* args, const backend::LaunchReport& report, const trace::Key& traced) {
    // Written in place: a task record is a few cache lines, and this is the path a launch loop takes.
    emplace(
        [&](Task& t) {
            t.type = Task::Type::launch;
            t.launch = {static_cast<const CpuFunction*>(function.get()), shape, report};
            t.args.pack(function->arg_sizes(), args);
        },
        traced, &function);
}

void CpuQueue::launch_graph_impl(const std::shared_ptr<backend::GraphExecutable>& graph,
                                 const backend::LaunchReport& report, const trace::Key& traced) {
    auto* g = static_cast<CpuGraph*>(graph.get());  // only this backend's executables reach its queues
    emplace([&](Task& t) {
        t.type = Task::Type::graph;
        t.graph = {g, report, g->has_host_nodes()};
        t.ref = graph;
    }, traced);
}

void CpuQueue::release_kernels_impl() {
    std::shared_ptr<backend::Function> idle;  // destroyed after the lock: it may be the last reference to the code
    {
        std::lock_guard lock(mutex_);
        if (!last_function_) return;
        if (completed_.load(std::memory_order_acquire) == submitted_.load(std::memory_order_relaxed))
            idle = std::move(last_function_);  // nothing queued uses it
    }
    if (idle) return;
    // Launches of it may be queued: it rides in a task behind them (unless a launch replaced it meanwhile).
    emplace([&](Task& t) {
        t.type = Task::Type::release;
        t.ref = std::move(last_function_);
    }, trace::Key{});
}

void CpuQueue::joint_impl(const std::shared_ptr<backend::JointStep>& step, int participant, const trace::Key& traced) {
    emplace([&](Task& t) {
        t.type = Task::Type::joint;
        t.participant = participant;
        t.ref = step;
    }, traced);
}

bool CpuQueue::hold_idle_impl() {
    std::lock_guard lock(mutex_);
    if (state_ != State::idle || head_ != tail_) return false;
    state_ = State::held;  // pushes wait (emplace); executors and host threads see nothing to run
    return true;
}

void CpuQueue::release_impl(const std::shared_ptr<backend::JointStep>& pending) {
    bool arrival = false;
    {
        std::lock_guard lock(mutex_);
        if (pending)  // into the empty ring: it does not grow
            append([&](Task& t) {
                t.type = Task::Type::joint;
                t.participant = 0;
                t.ref = pending;
            }, trace::Key{}, nullptr);
        if (head_ == tail_) {
            state_ = State::idle;
        } else {
            state_ = State::running;  // as a host thread running it
            executor_only_ = false;
            arrival = true;
        }
    }
    // The holder's own part arrives here, sparing an executor's wake-up: budget 1, so what others queued meanwhile (they
    // waited for the hold to end, so nothing) would go to the executors, never run on the caller's thread.
    if (arrival) run(UINT64_MAX, 1, true);
}

void CpuQueue::record_impl(backend::Event& event, const trace::Key& traced) {
    const std::shared_ptr<EventState>& ev = static_cast<CpuEvent&>(event).state();
    std::lock_guard elock(ev->mutex);  // order: event, then queue
    {
        std::lock_guard lock(mutex_);
        // Traced: a task, so that its span lies in stream order (`&`: one test).
        if ((completed_.load(std::memory_order_acquire) == submitted_.load(std::memory_order_relaxed)) &
            !traced) {
            // Nothing pending: the event is complete at once (LLVM offload's olCreateEvent does the same), and
            // carries the failure the stream has not reported yet, if any.
            ev->record.reset();
            ev->time_ns = now_ns();
            if (slot_ && slot_->failed()) {
                auto r = std::make_shared<RecordState>();
                r->code = slot_->peek(&r->message);
                r->time_ns = ev->time_ns;
                ev->record = std::move(r);
            }
            return;
        }
    }
    auto r = std::make_shared<RecordState>();
    r->queue = shared_from_this();
    Task t;
    t.type = Task::Type::record;
    t.ref = r;  // the task owns its record: the event may be recorded again, or destroyed, before it runs
    ev->record = r;
    r->seq = push(std::move(t), traced);  // read by waits and synchronize under ev->mutex, which is still held
}

void CpuQueue::wait_impl(backend::Event& event, const trace::Key& traced) {
    std::shared_ptr<RecordState> r = static_cast<CpuEvent&>(event).state()->latest();
    bool needed = true;
    if (!r) {
        needed = false;  // complete on a healthy queue
    } else if (!r->queue || r->queue->completed() >= r->seq) {
        // Complete already: a failure it carries fails this stream now, in stream order.
        needed = r->code != RT_SUCCESS && slot_;
    } else if (r->queue.get() == this) {
        needed = false;  // implied by stream order (and this stream's own failure skips what follows)
    }
    if (!needed) {
        if (!traced) return;
        r = std::make_shared<RecordState>();  // traced: a task that waits for nothing, so its span lies in stream order
    }
    Task t;
    t.type = Task::Type::wait;
    t.dep_seq = r->queue ? r->seq : 0;
    t.ref = std::move(r);
    push(std::move(t), traced);
}

void CpuQueue::notify_at_impl(uint64_t position) {
    uint64_t armed = notify_at_.load();
    while (position < armed && !notify_at_.compare_exchange_weak(armed, position)) {
    }
    if (completed_.load() >= position) fire_notify();  // seq_cst with complete(): one of us fires
}

void CpuQueue::fire_notify() {
    if (notify_at_.exchange(UINT64_MAX) != UINT64_MAX) backend::notify_timeline();
}

bool CpuQueue::query_impl() { return completed_.load(std::memory_order_acquire) >= submitted_.load(std::memory_order_acquire); }

uint64_t CpuQueue::position_impl() { return submitted_.load(std::memory_order_acquire); }

void CpuQueue::synchronize_impl() {
    wait_until(submitted_.load(std::memory_order_acquire));
}

// ---------------------------------------------------------------- queue: execution

void CpuQueue::set_scheduled() {
    state_ = State::scheduled;
    joint_front_.store(head_ != tail_ && ring_[head_ & (ring_.size() - 1)].type == Task::Type::joint,
                       std::memory_order_relaxed);
}

void CpuQueue::run_scheduled() {
    {
        std::lock_guard lock(mutex_);
        if (state_ != State::scheduled) return;  // a host thread took it meanwhile (stale ready entry)
        state_ = State::running;
        executor_only_ = false;
    }
    run(UINT64_MAX, kExecutorBudget, false);
}

void CpuQueue::help_arrival() {
    bool arrival;
    {
        std::lock_guard lock(mutex_);
        if (state_ != State::scheduled) return;  // someone took it meanwhile: the ready entry was stale
        arrival = !executor_only_ && head_ != tail_ && ring_[head_ & (ring_.size() - 1)].type == Task::Type::joint;
        if (arrival) state_ = State::running;
    }
    if (!arrival) {  // not an arrival after all (the hint is read without the lock): back to the executors
        executor_.schedule(shared_from_this());
        return;
    }
    // Budget 1: the joint part arrives, and completes if its step is done; what follows goes to an executor.
    run(UINT64_MAX, 1, true);
}

void CpuQueue::run(uint64_t limit, size_t budget, bool host) {
    // Tasks are taken in batches: one lock round trip per batch instead of per task, so a producer
    // enqueueing thousands of small launches does not fight the consumer for the lock on every one.
    constexpr size_t kBatch = 16;
    Task batch[kBatch];
    size_t count = 0, taken = 0;
    for (;;) {
        std::shared_ptr<backend::JointStep> arriving;  // the front joint task, reached now: arrive outside the lock
        int participant = 0;
        {
            std::unique_lock lock(mutex_);
            bool hand_off = false;
            while (count < kBatch && head_ != tail_) {
                Task& front = ring_[head_ & (ring_.size() - 1)];
                if (front.seq > limit || taken >= budget) break;
                if (front.type == Task::Type::joint && joint_phase_ != JointPhase::resumed) {
                    if (count) break;  // run what precedes it first
                    if (joint_phase_ == JointPhase::arrived) {
                        state_ = State::blocked;  // resume_joint reschedules us
                        return;
                    }
                    joint_phase_ = JointPhase::arrived;
                    if (front.trace) joint_arrived_ = trace::now();
                    arriving = std::static_pointer_cast<backend::JointStep>(front.ref);
                    participant = front.participant;
                    break;
                }
                if (front.type == Task::Type::joint) joint_phase_ = JointPhase::none;  // resumed: completes now
                if (host && (front.type == Task::Type::host_call ||
                             (front.type == Task::Type::graph && front.graph.host_nodes))) {
                    hand_off = count == 0;  // run what precedes it first
                    break;
                }
                if (front.type == Task::Type::wait && front.dep() && front.dep()->completed() < front.dep_seq) {
                    if (count) break;  // run what precedes it first; the dependency may finish meanwhile
                    if (front.dep()->add_waiter(shared_from_this(), front.dep_seq)) {
                        state_ = State::blocked;  // the dependency's completion reschedules us
                        return;
                    }
                }
                batch[count++] = std::move(front);
                ++head_;
                ++taken;
            }
            if (arriving) {
                lock.unlock();
                arrive(arriving, participant);
                continue;  // resumed at once, or parks at the next look
            }
            if (count == 0) {
                if (head_ == tail_) {
                    state_ = State::idle;
                    return;
                }
                // More to do past this thread's limit/budget, or a host function a host thread may not run:
                // an executor continues.
                set_scheduled();
                executor_only_ = hand_off;
                lock.unlock();
                executor_.schedule(shared_from_this());
                return;
            }
        }
        for (size_t i = 0; i < count; ++i) {
            execute(batch[i]);
            complete(batch[i].seq);
        }
        count = 0;
    }
}

void CpuQueue::execute_traced(Task& t) {
    const trace::Key key = t.trace;
    t.dispatch = static_cast<uint8_t>(t.type);  // run as itself
    const bool failed_before = slot_ && slot_->failed();
    // A joint part's span is its step's: from the queue's arrival (the reduction ran in between) to its completion.
    const int64_t start = t.type == Task::Type::joint ? joint_arrived_ : trace::now();
    execute(t, &key);
    const int64_t end = trace::now();
    trace::Status status = trace::Status::ok;
    if (failed_before && t.type != Task::Type::record && t.type != Task::Type::wait && t.type != Task::Type::joint)
        status = trace::Status::skipped;
    else if (!failed_before && slot_ && slot_->failed()) status = trace::Status::failed;
    trace::finish(key, start, end, status);
}

bool CpuQueue::skip_after_failure(Task& t) {
    if (!slot_ || !slot_->failed()) return false;  // one acquire load per task
    slot_->count_skipped();
    t.ref.reset();
    return true;
}

void CpuQueue::execute(Task& t, const trace::Key* traced) {
    // Work queued behind a failure that has not been reported yet is skipped (records and waits still run: they
    // carry the failure on; a release is bookkeeping, not an operation of the stream, never counted as skipped).
    using Type = Task::Type;
    switch (t.dispatch) {
        case static_cast<uint8_t>(Type::copy):
            if (skip_after_failure(t)) return;
            run_copy(executor_, t.memory.dst, t.memory.src, t.memory.bytes);
            break;
        case static_cast<uint8_t>(Type::fill):
            if (skip_after_failure(t)) return;
            run_fill(executor_, t.memory.dst, t.value, t.memory.bytes);
            break;
        case static_cast<uint8_t>(Type::host_call):
            if (skip_after_failure(t)) return;
            backend::run_host_call(t.call);
            break;
        case static_cast<uint8_t>(Type::record): {
            // Published by this task's completion (readers look only once it has completed).
            RecordState& r = *t.dep_record();
            if (slot_ && slot_->failed()) r.code = slot_->peek(&r.message);
            r.time_ns = now_ns();
            break;
        }
        case static_cast<uint8_t>(Type::wait): {
            // Its dependency completed before it was taken. A failed producer fails its consumer.
            const RecordState& r = *t.dep_record();
            if (r.code != RT_SUCCESS && slot_ && !slot_->failed())
                slot_->set(r.code, "dependency failed: this stream waited for an event recorded behind a failure "
                           "on " + r.message);
            break;
        }
        case static_cast<uint8_t>(Type::release):
        case static_cast<uint8_t>(Type::joint):  // its work ran between its arrival and its resume (a failure
                                                  // behind it does not skip it: the step saw the slot at arrival)
            break;
        case static_cast<uint8_t>(Type::graph):
            if (skip_after_failure(t)) return;
            t.graph.graph->replay(executor_, t.graph.report, stream_min_bytes_, traced);
            break;
        case static_cast<uint8_t>(Type::launch): {
            if (skip_after_failure(t)) return;
            const CpuFunction& function = *t.launch.function;
            const std::vector<size_t>& sizes = function.arg_sizes();
            void* inline_pointers[32];
            std::unique_ptr<void*[]> heap_pointers;
            void** pointers = inline_pointers;
            if (sizes.size() > 32) pointers = (heap_pointers = std::make_unique<void*[]>(sizes.size())).get();
            t.args.pointers(sizes, pointers);
            run_kernel(executor_, function, t.launch.shape, pointers, t.launch.report, stream_min_bytes_);
            break;
        }
        default:  // type | kTraced
            execute_traced(t);
            return;
    }
    t.ref.reset();
}

void CpuQueue::complete(uint64_t seq) {
    completed_.store(seq);
    if (seq >= notify_at_.load()) fire_notify();
    if (waiter_count_.load() > 0) {
        std::vector<std::shared_ptr<CpuQueue>> ready;
        {
            std::lock_guard lock(waiters_mutex_);
            auto it = std::partition(waiters_.begin(), waiters_.end(), [&](const auto& w) { return w.second > seq; });
            for (auto j = it; j != waiters_.end(); ++j) ready.push_back(std::move(j->first));
            waiters_.erase(it, waiters_.end());
            waiter_count_.fetch_sub(static_cast<int>(ready.size()));
        }
        for (auto& q : ready) q->unblock();
    }
    if (host_waiters_.load() > 0) {
        signal_.fetch_add(1);
        signal_.notify_all();
    }
}

bool CpuQueue::add_waiter(const std::shared_ptr<CpuQueue>& waiter, uint64_t seq) {
    std::lock_guard lock(waiters_mutex_);
    waiter_count_.fetch_add(1);
    if (completed_.load() >= seq) {  // seq_cst pairs with complete(): one of us sees the other
        waiter_count_.fetch_sub(1);
        return false;
    }
    waiters_.emplace_back(waiter, seq);
    return true;
}

namespace {
/// The cpu executors as a joint step's workers.
class ExecutorWorkers final : public backend::Workers {
public:
    explicit ExecutorWorkers(Executor& executor) : executor_(executor) {}
    void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) override {
        auto body = [&fn](size_t begin, size_t end) {
            fn(begin, end);
            streaming_fence();  // the piece's streaming stores (copy) are done before it counts as done
        };
        executor_.parallel_for(n, grain, body);
    }
    void copy(void* dst, const void* src, size_t bytes, bool large) override { copy_bytes(dst, src, bytes, large); }

private:
    Executor& executor_;
};
}  // namespace

void CpuQueue::arrive(const std::shared_ptr<backend::JointStep>& step, int participant) {
    ExecutorWorkers workers(executor_);
    step->arrive_impl(participant, workers, [self = shared_from_this()] { self->resume_joint(); });
}

void CpuQueue::resume_joint() {
    {
        std::lock_guard lock(mutex_);
        joint_phase_ = JointPhase::resumed;  // a queue still running past arrive_impl sees it at its next look
        if (state_ != State::blocked) return;
        set_scheduled();  // with the phase, under one lock: no one sees it blocked on a resumed step
    }
    rescheduled();
}

void CpuQueue::unblock() {
    {
        std::lock_guard lock(mutex_);
        if (state_ != State::blocked) return;
        set_scheduled();
    }
    rescheduled();
}

void CpuQueue::rescheduled() {
    // An attending host thread claims it next (its target lies at or past the blocked task).
    if (attended_.load() == 0) executor_.schedule(shared_from_this());
    if (host_waiters_.load() > 0) {  // a parked host may now run it itself
        signal_.fetch_add(1);
        signal_.notify_all();
    }
}

void CpuQueue::wait_until(uint64_t target, bool park_at_once) {
    for (;;) {
        if (completed_.load(std::memory_order_acquire) >= target) return;
        bool own = false, at_joint = false;
        std::shared_ptr<CpuQueue> dep;
        uint64_t dep_seq = 0;
        {
            std::lock_guard lock(mutex_);
            if ((state_ == State::idle || (state_ == State::scheduled && !executor_only_)) && head_ != tail_) {
                state_ = State::running;  // the caller runs the work: no hand-off for small operations
                own = true;
            } else if (state_ == State::blocked && ring_[head_ & (ring_.size() - 1)].type == Task::Type::wait) {
                const Task& front = ring_[head_ & (ring_.size() - 1)];
                dep = front.dep_record()->queue;  // null: a wait on a complete record, about to run
                dep_seq = front.dep_seq;
            } else if (state_ == State::blocked && joint_phase_ == JointPhase::arrived) {
                at_joint = true;
            }
        }
        if (own) {
            run(target, SIZE_MAX, true);
            continue;
        }
        if (dep) {
            attended_.fetch_add(1);
            dep->wait_until(dep_seq, park_at_once);  // help the queue we are waiting for
            attended_.fetch_sub(1);
            continue;
        }
        // Parked at a joint step until its peers arrive: run a peer queue's arrival that no executor has taken yet
        // (an in-process collective driven by one thread then needs no hand-off between threads).
        if (at_joint) {
            if (std::shared_ptr<CpuQueue> peer = executor_.take_ready_joint()) {
                peer->help_arrival();
                continue;
            }
        }
        // An executor is running it: help its launch's pieces if it has room (or any launch's: the cores are as
        // busy either way), else spin briefly, then park until a completion signals.
        auto reached = [&] { return completed_.load(std::memory_order_acquire) >= target; };
        if (executor_.help_job(reached)) continue;
        uint32_t seen = signal_.load();
        if (!park_at_once) {
            int64_t until = now_ns() + spin_nanoseconds();
            while (completed_.load(std::memory_order_acquire) < target && now_ns() < until)
                for (int i = 0; i < 16; ++i) cpu_relax();
            if (completed_.load(std::memory_order_acquire) >= target) return;
            seen = signal_.load();
        }
        host_waiters_.fetch_add(1);
        if (completed_.load() < target) {
            bool state_changed;
            {
                std::lock_guard lock(mutex_);
                // Running, left to an executor for a host function, or parked at a joint step until its peers
                // arrive: its completions (or resume_joint) will signal.
                state_changed = state_ != State::running && state_ != State::held &&
                                !(state_ == State::scheduled && executor_only_) &&
                                !(state_ == State::blocked && joint_phase_ == JointPhase::arrived);
            }
            if (!state_changed) signal_.wait(seen);
        }
        host_waiters_.fetch_sub(1);
    }
}

}  // namespace rt::cpu
