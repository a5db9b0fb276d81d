// Locks for short critical sections: a yielding test-and-test-and-set spin lock (registry, stream lists,
// cpu queues) and a futex-parking lock for sections that may block (device memory).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace rt {

/// Half the cost of a pthread mutex round trip (a plain store unlocks); yields rather than burn a core.
class SpinLock {
public:
    void lock() noexcept {
        for (int spins = 0;; ++spins) {
            if (!locked_.exchange(true, std::memory_order_acquire)) return;
            while (locked_.load(std::memory_order_relaxed)) {
                if (++spins > 64) std::this_thread::yield();  // the holder may be descheduled
#if defined(__x86_64__) || defined(__i386__)
                else __builtin_ia32_pause();
#endif
            }
        }
    }
    bool try_lock() noexcept { return !locked_.exchange(true, std::memory_order_acquire); }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> locked_{false};
};

/// A mutex for sections that are usually a few dozen instructions but may block (a system call, a wait
/// for a stream): one compare-exchange to lock and one exchange to unlock when uncontended (a third of a
/// pthread mutex round trip); a waiter spins briefly, then sleeps on a futex instead of burning a core.
class ParkingLock {
public:
    void lock() noexcept {
        uint32_t expected = 0;
        if (state_.compare_exchange_strong(expected, 1, std::memory_order_acquire)) return;
        for (int spins = 0; spins < 64; ++spins) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            expected = 0;
            if (state_.load(std::memory_order_relaxed) == 0 &&
                state_.compare_exchange_weak(expected, 1, std::memory_order_acquire))
                return;
        }
        // 2: locked, and someone may sleep: the unlock must wake (Drepper, "Futexes Are Tricky", mutex 3).
        while (state_.exchange(2, std::memory_order_acquire) != 0) state_.wait(2, std::memory_order_relaxed);
    }
    bool try_lock() noexcept {
        uint32_t expected = 0;
        return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire);
    }
    void unlock() noexcept {
        if (state_.exchange(0, std::memory_order_release) == 2) state_.notify_one();
    }

private:
    std::atomic<uint32_t> state_{0};  // 0 free, 1 locked, 2 locked with possible sleepers
};

}  // namespace rt
