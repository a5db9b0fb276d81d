// A small test-and-test-and-set lock for critical sections of a few dozen instructions (registry,
// stream lists): half the cost of a pthread mutex round trip, and it yields rather than burn a core.
#pragma once

#include <atomic>
#include <thread>

namespace rt {

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

}  // namespace rt
