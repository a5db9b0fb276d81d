// The cpu executor pool: workers drain ready queues and help parallel_for jobs; spin briefly, then park.
#include "backends/cpu/cpu_executor.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "backends/cpu/cpu_kernel.hpp"
#include "backends/cpu/cpu_queue.hpp"

namespace rt::cpu {

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

int usable_cpus() {
    static const int n = [] {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
        return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    }();
    return n;
}

int64_t spin_nanoseconds() {
    if (usable_cpus() == 1) return 0;
    return backend::host_oversubscribed() ? 0 : kSpinNanoseconds;
}

Executor::Executor(int threads) {
    threads_.reserve(static_cast<size_t>(threads));
    for (int i = 0; i < threads; ++i)
        threads_.emplace_back([this] {
            prepare_kernel_thread();  // before any work: the first kernel it helps with is covered too
            worker();
        });
}

Executor::~Executor() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
        ready_.clear();
    }
    epoch_.fetch_add(1);
    epoch_.notify_all();
    for (auto& t : threads_) t.join();
}

void Executor::wake(bool all) {
    epoch_.fetch_add(1);
    if (spinners_.load() > 0 && !all) return;
    if (sleepers_.load() > 0) {
        if (all) epoch_.notify_all();
        else epoch_.notify_one();
    }
}

void Executor::schedule(std::shared_ptr<CpuQueue> queue) {
    request_trap_handler_check();  // a stream starts after a pause: someone may have taken the fault signals
    {
        std::lock_guard lock(mutex_);
        if (stop_) return;
        // ready_ is ordered by priority (numerically lower first), FIFO within one: the common case — every queue
        // of the default priority — is one comparison and a push_back.
        const int priority = queue->priority();
        if (ready_.empty() || ready_.back()->priority() <= priority) {
            ready_.push_back(std::move(queue));
        } else {
            auto at = std::upper_bound(ready_.begin(), ready_.end(), priority,
                                       [](int p, const std::shared_ptr<CpuQueue>& q) { return p < q->priority(); });
            ready_.insert(at, std::move(queue));
        }
    }
    wake(false);
}

std::shared_ptr<CpuQueue> Executor::take_ready_joint() {
    std::lock_guard lock(mutex_);
    for (auto it = ready_.begin(); it != ready_.end(); ++it)
        if ((*it)->joint_front()) {
            std::shared_ptr<CpuQueue> q = std::move(*it);
            ready_.erase(it);
            return q;
        }
    return nullptr;
}

void Executor::Job::run_pieces() {
    auto never = [] { return false; };
    run_pieces_until(never);
}

void Executor::parallel_for(size_t n, size_t grain, FunctionRef<void(size_t, size_t)> fn) {
    if (n == 0) return;
    grain = std::max<size_t>(grain, 1);
    Job job{n, grain, (n + grain - 1) / grain, fn};
    job.max_helpers = static_cast<int>(threads_.size()) - 1;
    if (job.pieces == 1 || job.max_helpers <= 0) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        jobs_.push_back(&job);
    }
    wake(true);
    job.run_pieces();
    {
        std::lock_guard lock(mutex_);
        jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
    }
    // No helper can join now; wait for those inside (each finishes at most one piece).
    while (job.done.load(std::memory_order_acquire) < job.pieces || job.helpers.load(std::memory_order_acquire) > 0)
        cpu_relax();
}

void Executor::Job::run_pieces_until(FunctionRef<bool()> enough) {
    while (!enough()) {
        size_t p = next.fetch_add(1, std::memory_order_relaxed);
        if (p >= pieces) return;
        size_t begin = p * grain;
        fn(begin, std::min(n, begin + grain));
        done.fetch_add(1, std::memory_order_release);
    }
}

bool Executor::help_job(FunctionRef<bool()> enough) {
    Job* job = nullptr;
    {
        std::lock_guard lock(mutex_);
        for (Job* j : jobs_)
            if (j->joinable()) {
                job = j;
                job->helpers.fetch_add(1, std::memory_order_relaxed);
                break;
            }
    }
    if (!job) return false;
    job->run_pieces_until(enough);
    job->helpers.fetch_sub(1, std::memory_order_release);
    return true;
}

void Executor::share(SharedWork& work) {
    work.max_helpers_ = static_cast<int>(threads_.size()) - 1;
    std::lock_guard lock(mutex_);
    shared_.push_back(&work);
}

void Executor::retire(SharedWork& work) {
    {
        std::lock_guard lock(mutex_);
        shared_.erase(std::find(shared_.begin(), shared_.end(), &work));
    }
    // No helper can join now; those inside find nothing ready and leave.
    while (work.helpers_.load(std::memory_order_acquire) > 0) cpu_relax();
}

bool Executor::joinable(const SharedWork& w) {
    return w.helpers_.load(std::memory_order_relaxed) < w.max_helpers_ && w.has_work();
}

void Executor::worker() {
    for (;;) {
        Job* job = nullptr;
        SharedWork* shared = nullptr;
        std::shared_ptr<CpuQueue> queue;
        bool more = false;
        {
            std::lock_guard lock(mutex_);
            if (stop_) return;
            for (Job* j : jobs_)
                if (j->joinable()) {
                    job = j;
                    job->helpers.fetch_add(1, std::memory_order_relaxed);
                    break;
                }
            if (!job)
                for (SharedWork* w : shared_)
                    if (joinable(*w)) {
                        shared = w;
                        shared->helpers_.fetch_add(1, std::memory_order_relaxed);
                        break;
                    }
            if (!job && !shared && !ready_.empty()) {
                queue = std::move(ready_.front());
                ready_.pop_front();
                more = !ready_.empty();
            }
        }
        if (more) wake(false);  // another queue is ready: let a sleeping executor take it
        if (job) {
            job->run_pieces();
            job->helpers.fetch_sub(1, std::memory_order_release);
        } else if (shared) {
            shared->help();
            shared->helpers_.fetch_sub(1, std::memory_order_release);
        } else if (queue) {
            queue->run_scheduled();
        } else {
            idle_wait();
        }
    }
}

void Executor::idle_wait() {
    uint32_t seen = epoch_.load();
    {
        std::lock_guard lock(mutex_);
        if (stop_ || !ready_.empty()) return;
        for (Job* j : jobs_)
            if (j->joinable()) return;
        for (SharedWork* w : shared_)
            if (joinable(*w)) return;
    }
    // At most one executor spins: with the host thread spinning in synchronize, that already fills 2 cores.
    int expected = 0;
    if (spinners_.compare_exchange_strong(expected, 1)) {
        int64_t until = now_ns() + spin_nanoseconds();
        bool changed = false;
        while (!(changed = epoch_.load() != seen) && now_ns() < until)
            for (int i = 0; i < 32; ++i) cpu_relax();
        spinners_.store(0);
        if (changed) return;
    }
    sleepers_.fetch_add(1);
    if (epoch_.load() == seen) epoch_.wait(seen);
    sleepers_.fetch_sub(1);
}

}  // namespace rt::cpu
