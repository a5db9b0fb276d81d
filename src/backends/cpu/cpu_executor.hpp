// The cpu device's executor pool: threads shared by all streams, a ready list of queues, and parallel_for.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace rt::cpu {

class CpuQueue;

/// A non-owning reference to a callable (the callable outlives the call that receives it).
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
public:
    template <class F>
    FunctionRef(F& f) : object_(&f), call_([](void* o, A... a) -> R { return (*static_cast<F*>(o))(a...); }) {}
    R operator()(A... a) const { return call_(object_, a...); }

private:
    void* object_;
    R (*call_)(void*, A...);
};

/// CPU pause hint for spin loops: lets the sibling hyper-thread run and saves power.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

/// Spin budget before a waiting thread parks: covers a cross-thread hand-off (~1 µs) many times over,
/// far shorter than a futex sleep/wake on a VM (tens of µs).
inline constexpr int64_t kSpinNanoseconds = 50'000;
/// The budget in effect: kSpinNanoseconds, or 2 µs while the host is oversubscribed (backend::host_oversubscribed:
/// with 4 processes of collectives on 2 cores, 50 µs spins made a small all-reduce take ~400 µs instead of ~30), or 0
/// when this process may run on one CPU only (mpirun binds each of 2 processes to a core): a spinning thread then holds
/// the core that the thread it waits for needs.
int64_t spin_nanoseconds();

/// The CPUs this process may run on (its affinity mask when it was first asked; hardware threads if unknown): the
/// default executor count and compute units.
int usable_cpus();

int64_t now_ns();

/// Work that idle executors help with whenever some of it is ready, without its owner waiting for them (a graph
/// launch's ready nodes, cpu_graph.hpp): the owner works on it too, publishes it with Executor::share, says when more
/// became ready with Executor::offered, and takes it back with Executor::retire before it goes.
class SharedWork {
public:
    /// Whether a helper would find something to take now. Called under the executor's lock: a load, no locks.
    virtual bool has_work() const = 0;
    /// Takes and runs work until none is ready, then returns (the helper leaves). Never throws.
    virtual void help() noexcept = 0;

protected:
    ~SharedWork() = default;

private:
    friend class Executor;
    std::atomic<int> helpers_{0};  // executors inside help(); changed under the executor's lock when joining
    int max_helpers_ = 0;
};

class Executor {
public:
    explicit Executor(int threads);
    ~Executor();  ///< stops and joins the threads; queues must be idle
    int thread_count() const { return static_cast<int>(threads_.size()); }

    /// Hands a runnable queue to the pool; some executor will call queue->run_scheduled(). Ready queues are taken in
    /// priority order (CpuQueue::priority, numerically lower first), in the order scheduled within one priority.
    /// Thread-safe.
    void schedule(std::shared_ptr<CpuQueue> queue);
    /// Takes the first ready queue whose front task is a joint step's part (CpuQueue::joint_front), for a host thread
    /// to run its arrival (CpuQueue::help_arrival); null when there is none. Thread-safe.
    std::shared_ptr<CpuQueue> take_ready_joint();

    /// Runs fn(begin, end) over [0, n) in pieces of about `grain`, on the calling thread plus up to
    /// thread_count() - 1 idle executors (one thread per core: a host thread that calls in takes the place
    /// of an executor rather than oversubscribing the cores); returns when every piece is done. Callable
    /// from executors and host threads alike.
    void parallel_for(size_t n, size_t grain, FunctionRef<void(size_t, size_t)> fn);

    /// Runs pieces of one parallel_for that has pieces left and room for a helper, in the place of an executor: a
    /// host thread waiting for a queue an executor runs (CpuQueue::wait_until) works instead of spinning beside the
    /// executors, and the launch does not wait for a parked executor to wake. Returns after a piece once `enough()`
    /// (the waiter's target reached: it does not stay on for another stream's long launch), or when no pieces are
    /// left; false when there was no job to help.
    bool help_job(FunctionRef<bool()> enough);

    /// Publishes `work`: from now on idle executors (at most thread_count() - 1 at a time: its owner is the other
    /// participant) call work.help() whenever work.has_work(). Thread-safe.
    void share(SharedWork& work);
    /// Work of a shared item became ready: wakes an idle executor (every idle one when `many`). Any thread.
    void offered(bool many) { wake(many); }
    /// Unpublishes `work` and returns once no executor is inside work.help() (they leave when nothing is ready).
    void retire(SharedWork& work);

private:
    struct Job {
        size_t n, grain, pieces;
        FunctionRef<void(size_t, size_t)> fn;
        std::atomic<size_t> next{0};
        std::atomic<size_t> done{0};
        std::atomic<int> helpers{0};  // executors inside run_pieces; changed under mutex_ when joining
        int max_helpers = 0;
        void run_pieces();
        void run_pieces_until(FunctionRef<bool()> enough);
        /// Pieces left and room for another helper (read under mutex_).
        bool joinable() const {
            return next.load(std::memory_order_relaxed) < pieces && helpers.load(std::memory_order_relaxed) < max_helpers;
        }
    };

    /// Room for another helper in `w`, and something ready (read under mutex_).
    static bool joinable(const SharedWork& w);
    void worker();
    void idle_wait();
    void wake(bool all);

    std::mutex mutex_;
    std::deque<std::shared_ptr<CpuQueue>> ready_;
    std::vector<Job*> jobs_;
    std::vector<SharedWork*> shared_;
    bool stop_ = false;
    // Parking protocol: producers bump epoch_ after publishing work and notify only if someone sleeps
    // and nobody spins; a sleeper re-checks epoch_ after announcing itself (all seq_cst).
    alignas(64) std::atomic<uint32_t> epoch_{0};   // own cache line: written by every producer
    alignas(64) std::atomic<int> spinners_{0};
    std::atomic<int> sleepers_{0};
    std::vector<std::thread> threads_;
};

}  // namespace rt::cpu
