// Per-device memory management above the backends: direct or pooled allocation, reuse, zero copy, statistics.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

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
    /// Frees memory from allocate(). `stream` (rtFreeAsync): reusable by it at once, by others once it has
    /// passed this point. Null (rtFree): reusable once every stream has run what was queued before.
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
    std::vector<StreamPosition> unfinished_positions(Stream* except);
    /// `stream`'s current position, if it has unfinished work.
    static std::vector<StreamPosition> position_of(Stream* stream);
    /// Returns deferred direct frees whose streams have passed them to the system (mutex_ held).
    void reap_deferred();
    /// Waits for every deferred direct free, then reaps (mutex_ held).
    void wait_deferred();

    /// Direct memory freed with rtFreeAsync while its stream still had work queued.
    struct DeferredFree {
        void* ptr;
        size_t bytes;
        std::vector<StreamPosition> wait_for;
    };
    std::vector<DeferredFree> deferred_;

    CoreDevice& device_;
    ParkingLock mutex_;  // every malloc/free takes it: two atomic operations when uncontended
    std::unique_ptr<MemoryPool> pool_;
    bool grow_ = false;
    bool reuse_ = false;
    std::atomic<bool> zero_copy_{false};
    size_t direct_bytes_ = 0;  // held by direct (non-pool) allocations
    rtMemStats stats_{};
};

}  // namespace rt
