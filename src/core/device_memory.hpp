// Per-device memory management above the backends: direct or pooled allocation, reuse, zero copy, statistics.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "core/timeline.hpp"

#include "core/memory_pool.hpp"
#include "core/spin_lock.hpp"
#include "runtime/runtime.h"

namespace rt {

class CoreDevice;
class Stream;

/// Thread-safe. Owns the device's pool (if enabled) and the exact statistics of its allocations.
class DeviceMemory {
public:
    explicit DeviceMemory(CoreDevice& device) : device_(device) {}
    ~DeviceMemory();

    /// Device memory for `bytes` (> 0). `stream`: stream-ordered (rtMallocAsync) or null. `*pooled` tells
    /// which allocator served it (pass it back to release). Throws OUT_OF_MEMORY with the figures.
    void* allocate(size_t bytes, Stream* stream, bool* pooled, const char* api);
    /// Frees memory from allocate(); never waits. `stream` (rtFreeAsync): reusable by it at once, by others once
    /// it has passed this point. Null (rtFree): reusable — or, direct memory, returned to the system by the
    /// timeline — once every stream has run what was queued before.
    void release(void* p, size_t bytes, bool pooled, Stream* stream);

    void enable_pool(size_t pool_size, size_t block_size, unsigned flags);
    void set_reuse(bool on);
    void set_zero_copy(bool on) { zero_copy_.store(on, std::memory_order_relaxed); }
    bool zero_copy() const { return zero_copy_.load(std::memory_order_relaxed); }
    void empty_cache();
    void count_elided_copy(size_t bytes);
    rtMemStats stats();
    void reset_peaks();

private:
    void update_peaks();  // mutex_ held
    void ensure_pool();   // mutex_ held
    /// One attempt: the pool (reusing what is due, then trimming), then the device (mutex_ held).
    void* try_allocate(size_t bytes, Stream* stream, bool* pooled, bool* committed_new);
    /// Whether frees are still waiting for queued work (the pool's pending frees, direct frees on the timeline).
    bool frees_in_flight() const { return deferred_bytes_ != 0 || (pool_ && pool_->has_pending()); }
    /// Waits — outside mutex_, never in queue context — until the frees in flight now are done. False if it
    /// may not wait.
    bool wait_for_frees();

    CoreDevice& device_;
    ParkingLock mutex_;  // every malloc/free takes it: two atomic operations when uncontended
    std::unique_ptr<MemoryPool> pool_;
    bool grow_ = false;
    bool reuse_ = false;
    std::atomic<bool> zero_copy_{false};
    size_t direct_bytes_ = 0;    // held by direct (non-pool) allocations, deferred frees included
    size_t deferred_bytes_ = 0;  // freed direct memory the timeline has not returned yet
    rtMemStats stats_{};
};

}  // namespace rt
