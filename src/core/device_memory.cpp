// Per-device memory management: routes allocations to the pool or the backend, recovers from out-of-memory
// by draining pending frees and trimming the cache, and keeps exact statistics.
#include "core/device_memory.hpp"

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/mem_pool.hpp"
#include "core/runtime.hpp"

namespace rt {

namespace {
constexpr size_t kDefaultBlock = size_t{2} << 20;
}

// Deferred frees are timeline actions; the runtime drained the timeline before any device goes.
DeviceMemory::~DeviceMemory() = default;

void DeviceMemory::update_peaks() {
    const size_t own_reserved = direct_bytes_ + (pool_ ? pool_->committed_bytes() : 0);
    stats_.reserved_bytes = own_reserved + created_reserved_;
    default_used_high_ = std::max(default_used_high_, stats_.allocated_bytes - created_used_);
    default_reserved_high_ = std::max(default_reserved_high_, own_reserved);
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    if (trace::on()) [[unlikely]]  // every change of the figures passes here
        trace::memory_counter(device_.label(), stats_.allocated_bytes, stats_.reserved_bytes);
}

void DeviceMemory::ensure_pool() {
    if (!pool_) pool_ = std::make_unique<MemoryPool>(device_.impl(), device_.info().total_memory, kDefaultBlock);
    pool_->set_reuse(reuse_);
}

void* DeviceMemory::try_allocate(size_t bytes, Stream* stream, bool* pooled, bool* committed_new) {
    void* p = nullptr;
    *pooled = false;
    if (pool_) {
        p = pool_->allocate(bytes, stream, committed_new);
        // Out of room: give cached blocks back (the device's capacity may be what is short), and try again.
        if (!p && pool_->trim()) p = pool_->allocate(bytes, stream, committed_new);
        *pooled = p != nullptr;
    }
    if (!p && (!pool_ || grow_)) {
        p = device_.impl().allocate_impl(bytes);
        if (!p && pool_ && pool_->trim()) p = device_.impl().allocate_impl(bytes);
        if (p) {
            *committed_new = true;
            direct_bytes_ += bytes;
        }
    }
    return p;
}

bool DeviceMemory::wait_for_frees() {
    {
        std::lock_guard lock(mutex_);
        if (!frees_in_flight()) return true;  // nothing of this device's to wait for
    }
    if (in_queue_context()) return false;  // the work those frees wait for may be the caller itself
    // The frees wait on the timeline for points of every stream (rtFree) or of one (rtFreeAsync): wait for every
    // stream's current point, then run what became due (and what the timeline's thread is running).
    wait_for(unfinished_points());
    runtime().timeline().run_due();
    return true;
}

void* DeviceMemory::allocate(size_t bytes, Stream* stream, bool* pooled, const char* api) {
    bool committed_new = false;
    std::unique_lock lock(mutex_);
    void* p = try_allocate(bytes, stream, pooled, &committed_new);
    // Out of memory while frees are in flight: wait for them without holding the lock, then try again (other
    // threads may take what came back meanwhile: again while frees are in flight, a bounded number of times).
    for (int attempt = 0; !p && attempt < 16 && frees_in_flight(); ++attempt) {
        lock.unlock();
        bool waited = wait_for_frees();
        lock.lock();
        if (!waited) break;
        p = try_allocate(bytes, stream, pooled, &committed_new);
    }
    if (!p) {
        ++stats_.num_ooms;
        size_t free_bytes = 0, total = 0;
        device_.impl().mem_info_impl(&free_bytes, &total);
        size_t reserved = stats_.reserved_bytes;
        std::string pool_text = pool_ ? format("; largest free block in the pool %zu bytes of a %zu-byte pool%s",
                                               pool_->largest_free_range(), pool_->size(),
                                               grow_ ? "" : " (the pool does not grow: RT_POOL_GROW)")
                                      : std::string();
        bool busy = frees_in_flight() && in_queue_context();
        lock.unlock();
        fail(RT_ERROR_OUT_OF_MEMORY, "%s: out of memory on %s: requested %zu bytes; %zu bytes free of %zu; "
             "%zu bytes reserved by the runtime%s%s", api, device_.label().c_str(), bytes, free_bytes, total, reserved,
             pool_text.c_str(), busy ? " (frees still waiting for queued work were not waited for: called from a "
             "host function)" : "");
    }
    ++stats_.num_allocs;
    ++stats_.num_live_allocations;
    if (committed_new) ++stats_.num_cache_misses;
    else ++stats_.num_cache_hits;
    stats_.allocated_bytes += bytes;
    update_peaks();
    return p;
}

void DeviceMemory::release(void* p, size_t bytes, bool pooled, Stream* stream) {
    // On a driver's callback thread no stream can be asked where it is: the timeline's thread releases it (after
    // every stream's work, as rtFree; the statistics count it until then).
    if (in_driver_thread()) {
        runtime().timeline().defer({}, [this, p, bytes, pooled] { release(p, bytes, pooled, nullptr); });
        return;
    }
    // rtFreeAsync: later work on `stream` is ordered after the free, other streams wait for it to pass this
    // point. rtFree: every stream must pass what it has queued so far (peer copies may use any memory).
    std::vector<StreamPoint> after = stream ? unfinished_point(*stream) : unfinished_points();
    bool deferred = false;
    uint64_t pending = 0;
    {
        std::lock_guard lock(mutex_);
        if (pooled) {
            pending = pool_->release(p, bytes, stream, after.empty());
        } else if (after.empty()) {
            device_.impl().free_impl(p, bytes);
            direct_bytes_ -= bytes;
        } else {
            deferred_bytes_ += bytes;
            deferred = true;
        }
        ++stats_.num_frees;
        --stats_.num_live_allocations;
        stats_.allocated_bytes -= bytes;
        update_peaks();
    }
    if (pending)  // the pool that has pending frees cannot be replaced (enable_pool): promote finds it
        runtime().timeline().defer(std::move(after), [this, pending] {
            std::lock_guard lock(mutex_);
            pool_->promote(pending);
            update_peaks();
        });
    if (deferred)
        runtime().timeline().defer(std::move(after), [this, p, bytes] {
            std::lock_guard lock(mutex_);
            device_.impl().free_impl(p, bytes);
            direct_bytes_ -= bytes;
            deferred_bytes_ -= bytes;
            update_peaks();
        });
}

void DeviceMemory::enable_pool(size_t pool_size, size_t block_size, unsigned flags) {
    if (flags & ~RT_POOL_GROW)
        fail(RT_ERROR_INVALID_VALUE, "flags 0x%x has unknown bits (expected RT_POOL_DEFAULT or RT_POOL_GROW)", flags);
    if (pool_size && (block_size == 0 || (block_size & (block_size - 1)) || block_size < 4096))
        fail(RT_ERROR_INVALID_VALUE, "block_size %zu is not a power of two of at least 4096 bytes", block_size);
    if (pool_size && block_size > pool_size)
        fail(RT_ERROR_INVALID_VALUE, "block_size %zu is larger than pool_size %zu", block_size, pool_size);
    wait_for_frees();  // a pool about to be replaced may have frees in flight
    std::lock_guard lock(mutex_);
    if (pool_) {
        if (pool_->has_pending())
            fail(RT_ERROR_INVALID_VALUE, "the current pool still has frees waiting for queued work (called from a "
                 "host function, or work was queued meanwhile): synchronize first");
        if (pool_->live_ranges())
            fail(RT_ERROR_INVALID_VALUE, "the current pool still holds %zu live allocation(s): free them first",
                 pool_->live_ranges());
    }
    pool_.reset();
    grow_ = (flags & RT_POOL_GROW) != 0;
    if (pool_size) {
        pool_ = std::make_unique<MemoryPool>(device_.impl(), pool_size, block_size);
        pool_->set_reuse(reuse_);
    }
    update_peaks();
}

void DeviceMemory::set_reuse(bool on) {
    std::lock_guard lock(mutex_);
    reuse_ = on;
    if (on) ensure_pool();
    else if (pool_) {
        pool_->set_reuse(false);
        pool_->trim();
    }
    update_peaks();
}

void DeviceMemory::empty_cache() {
    wait_for_frees();  // in queue context it does not wait: what is still in flight stays
    std::lock_guard lock(mutex_);
    if (pool_) pool_->trim();
    update_peaks();
}

void DeviceMemory::count_elided_copy(size_t bytes) {
    std::lock_guard lock(mutex_);
    ++stats_.num_elided_copies;
    stats_.elided_copy_bytes += bytes;
}

rtMemStats DeviceMemory::stats() {
    runtime().timeline().run_due();  // frees whose work completed count as done, whichever thread gets there first
    std::lock_guard lock(mutex_);
    update_peaks();
    rtMemStats s = stats_;
    s.largest_free_block = pool_ ? pool_->largest_free_range() : 0;
    s.pool_size = pool_ ? pool_->size() : 0;
    return s;
}

void DeviceMemory::reset_peaks() {
    std::lock_guard lock(mutex_);
    update_peaks();
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

// ---------------------------------------------------------------- memory pool objects

std::shared_ptr<MemPoolObject> DeviceMemory::default_pool() {
    std::lock_guard lock(pools_mutex_);
    if (!default_pool_) default_pool_ = std::make_shared<MemPoolObject>(device_);
    return default_pool_;
}

std::shared_ptr<MemPoolObject> DeviceMemory::current_pool_locked() {
    std::lock_guard lock(pools_mutex_);
    return current_pool_;
}

void DeviceMemory::set_current_pool(std::shared_ptr<MemPoolObject> pool) {
    std::lock_guard lock(pools_mutex_);
    if (pool && pool->is_default()) pool.reset();
    current_pool_ = std::move(pool);
    has_current_pool_.store(current_pool_ != nullptr, std::memory_order_release);
}

std::shared_ptr<MemPoolObject> DeviceMemory::create_pool(size_t max_size) {
    std::unique_lock lock(pools_mutex_);
    const uint64_t id = next_pool_id_++;
    lock.unlock();  // reserving address space may take a while; the id is ours
    auto pool = std::make_shared<MemPoolObject>(device_, max_size, id);
    lock.lock();
    pools_.push_back(pool);
    sync_work_.store(true, std::memory_order_relaxed);
    return pool;
}

std::shared_ptr<MemPoolObject> DeviceMemory::find_pool(uint64_t id) {
    if (id == 0) return default_pool();
    std::lock_guard lock(pools_mutex_);
    for (auto& p : pools_)
        if (p->id() == id) return p->destroyed() ? nullptr : p;  // a destroyed pool's handle is dead at once
    return nullptr;
}

void DeviceMemory::destroy_pool(MemPoolObject& pool) {
    std::shared_ptr<MemPoolObject> gone;  // released outside the lock: it gives its memory back
    {
        std::lock_guard lock(pools_mutex_);
        if (current_pool_.get() == &pool) {
            current_pool_.reset();
            has_current_pool_.store(false, std::memory_order_release);
        }
        if (pool.mark_destroyed())
            for (auto it = pools_.begin(); it != pools_.end(); ++it)
                if (it->get() == &pool) {
                    gone = std::move(*it);
                    pools_.erase(it);
                    break;
                }
    }
    if (gone) gone->release_reservation();
    update_sync_work();
}

void DeviceMemory::reap_pool(MemPoolObject& pool) {
    std::shared_ptr<MemPoolObject> gone;
    {
        std::lock_guard lock(pools_mutex_);
        for (auto it = pools_.begin(); it != pools_.end(); ++it)
            if (it->get() == &pool) {
                if (pool.finished()) {
                    gone = std::move(*it);
                    pools_.erase(it);
                }
                break;
            }
    }
    if (gone) {
        gone->release_reservation();
        update_sync_work();
    }
}

void DeviceMemory::update_sync_work() {
    std::shared_ptr<MemPoolObject> def;
    bool created = false;
    {
        std::lock_guard lock(pools_mutex_);
        created = !pools_.empty();
        def = default_pool_;
    }
    uint64_t threshold = UINT64_MAX;
    if (def) def->get_attribute(RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold, "update_sync_work");
    sync_work_.store(created || threshold != UINT64_MAX, std::memory_order_relaxed);
}

void DeviceMemory::apply_release_thresholds() {
    runtime().timeline().run_due();  // frees of the work just waited for are reusable, hence releasable
    std::lock_guard lock(pools_mutex_);  // then each pool's lock: the documented order
    for (auto& p : pools_) p->apply_release_threshold();
    if (default_pool_) default_pool_->apply_release_threshold();
}

void DeviceMemory::count_pool_allocation(size_t bytes, bool committed_new) {
    std::lock_guard lock(mutex_);
    ++stats_.num_allocs;
    ++stats_.num_live_allocations;
    if (committed_new) ++stats_.num_cache_misses;
    else ++stats_.num_cache_hits;
    stats_.allocated_bytes += bytes;
    created_used_ += bytes;
    update_peaks();
}

void DeviceMemory::count_pool_free(size_t bytes) {
    std::lock_guard lock(mutex_);
    ++stats_.num_frees;
    --stats_.num_live_allocations;
    stats_.allocated_bytes -= bytes;
    created_used_ -= bytes;
    update_peaks();
}

void DeviceMemory::count_pool_reserved(size_t before, size_t after) {
    if (before == after) return;
    std::lock_guard lock(mutex_);
    created_reserved_ = created_reserved_ - before + after;
    update_peaks();
}

void DeviceMemory::default_pool_figures(size_t* used, size_t* used_high, size_t* reserved, size_t* reserved_high) {
    runtime().timeline().run_due();  // frees whose work completed count as done
    std::lock_guard lock(mutex_);
    update_peaks();
    *used = stats_.allocated_bytes - created_used_;
    *reserved = stats_.reserved_bytes - created_reserved_;
    *used_high = default_used_high_;
    *reserved_high = default_reserved_high_;
}

void DeviceMemory::reset_default_pool_high(bool reserved) {
    std::lock_guard lock(mutex_);
    if (reserved) default_reserved_high_ = stats_.reserved_bytes - created_reserved_;
    else default_used_high_ = stats_.allocated_bytes - created_used_;
}

void DeviceMemory::trim_default_pool(size_t keep) {
    std::lock_guard lock(mutex_);
    if (pool_) pool_->trim(keep > direct_bytes_ ? keep - direct_bytes_ : 0);
    update_peaks();
}

}  // namespace rt
