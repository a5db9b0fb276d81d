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
class MemPoolObject;
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

    // ---- memory pool objects (core/mem_pool.hpp). This allocator is the device's default pool; created pools
    // allocate on their own and report here, so that the statistics above count every allocation of the device.
    std::shared_ptr<MemPoolObject> default_pool();
    /// The pool rtMallocAsync uses; null: the default pool. One relaxed load while no pool was ever made current.
    std::shared_ptr<MemPoolObject> current_pool() {
        if (!has_current_pool_.load(std::memory_order_acquire)) return nullptr;
        return current_pool_locked();
    }
    /// null or the default pool: the default pool.
    void set_current_pool(std::shared_ptr<MemPoolObject> pool);
    std::shared_ptr<MemPoolObject> create_pool(size_t max_size);
    /// id 0: the default pool; null if no live (not destroyed) pool has that id.
    std::shared_ptr<MemPoolObject> find_pool(uint64_t id);
    /// rtMemPoolDestroy: the handle goes now, the pool once its last allocation is freed (reap_pool).
    void destroy_pool(MemPoolObject& pool);
    void reap_pool(MemPoolObject& pool);
    /// Whether synchronizes must apply release thresholds (a pool was made, or the default pool has one).
    void update_sync_work();
    /// At the end of a synchronize (stream, event or device): every pool applies its release threshold.
    void after_synchronize() {
        if (sync_work_.load(std::memory_order_relaxed)) apply_release_thresholds();
    }
    /// A created pool's figures (its mutex held): an allocation, a free, a change of its reservation.
    void count_pool_allocation(size_t bytes, bool committed_new);
    void count_pool_free(size_t bytes);
    void count_pool_reserved(size_t before, size_t after);
    /// The default pool's figures: live bytes and reservation of this allocator (rtMalloc's included), high marks.
    void default_pool_figures(size_t* used, size_t* used_high, size_t* reserved, size_t* reserved_high);
    void reset_default_pool_high(bool reserved);
    /// Cached memory of the default pool goes back to the system until at most `keep` reserved bytes stay.
    void trim_default_pool(size_t keep);

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

    // ---- memory pool objects
    std::shared_ptr<MemPoolObject> current_pool_locked();
    void apply_release_thresholds();
    std::mutex pools_mutex_;  // the list, the current pool, the default pool object
    std::vector<std::shared_ptr<MemPoolObject>> pools_;  // created, and destroyed ones that still have allocations
    std::shared_ptr<MemPoolObject> default_pool_;
    std::shared_ptr<MemPoolObject> current_pool_;  // null: the default pool
    std::atomic<bool> has_current_pool_{false};
    std::atomic<bool> sync_work_{false};
    uint64_t next_pool_id_ = 1;
    size_t created_used_ = 0, created_reserved_ = 0;  // created pools' figures (in stats_ too)
    size_t default_used_high_ = 0, default_reserved_high_ = 0;
};

}  // namespace rt
