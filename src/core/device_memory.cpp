// Per-device memory management: routes allocations to the pool or the backend, recovers from out-of-memory
// by draining pending frees and trimming the cache, and keeps exact statistics.
#include "core/device_memory.hpp"

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/runtime.hpp"

namespace rt {

namespace {
constexpr size_t kDefaultBlock = size_t{2} << 20;
}

DeviceMemory::~DeviceMemory() { wait_deferred(); }

void DeviceMemory::update_peaks() {
    stats_.reserved_bytes = direct_bytes_ + (pool_ ? pool_->committed_bytes() : 0);
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
}

void DeviceMemory::ensure_pool() {
    if (!pool_) pool_ = std::make_unique<MemoryPool>(device_.impl(), device_.info().total_memory, kDefaultBlock);
    pool_->set_reuse(reuse_);
}

std::vector<StreamPosition> DeviceMemory::unfinished_positions(Stream* except) {
    // Memory may be used by work queued on any stream of any device (peer copies): wait for all of it.
    std::vector<StreamPosition> out;
    Runtime& r = runtime();
    for (int i = 0; i < r.device_count(); ++i)
        r.device(i).for_each_stream([&](const std::shared_ptr<Stream>& s) {
            if (s.get() == except) return;
            uint64_t pos = s->queue().position_impl();
            if (!s->queue().reached_impl(pos)) out.push_back({s, pos});
        });
    return out;
}

void* DeviceMemory::allocate(size_t bytes, Stream* stream, bool* pooled, const char* api) {
    std::unique_lock lock(mutex_);
    void* p = nullptr;
    bool committed_new = false;
    *pooled = false;
    if (!deferred_.empty()) reap_deferred();
    if (pool_) {
        p = pool_->allocate(bytes, stream, &committed_new);
        // Out of room: wait for frees still in flight, then give cached blocks back (the device's
        // capacity may be what is short), and try again each time.
        if (!p && pool_->drain_pending()) p = pool_->allocate(bytes, stream, &committed_new);
        if (!p && pool_->trim()) p = pool_->allocate(bytes, stream, &committed_new);
        *pooled = p != nullptr;
    }
    if (!p && (!pool_ || grow_)) {
        p = device_.impl().allocate_impl(bytes);
        if (!p && !deferred_.empty()) {  // memory freed with rtFreeAsync may still be waiting for its stream
            wait_deferred();
            p = device_.impl().allocate_impl(bytes);
        }
        if (!p && pool_ && pool_->trim()) p = device_.impl().allocate_impl(bytes);
        if (p) {
            committed_new = true;
            direct_bytes_ += bytes;
        }
    }
    if (!p) {
        ++stats_.num_ooms;
        size_t free_bytes = 0, total = 0;
        device_.impl().mem_info_impl(&free_bytes, &total);
        size_t reserved = direct_bytes_ + (pool_ ? pool_->committed_bytes() : 0);
        std::string pool_text = pool_ ? format("; largest free block in the pool %zu bytes of a %zu-byte pool%s",
                                               pool_->largest_free_range(), pool_->size(),
                                               grow_ ? "" : " (the pool does not grow: RT_POOL_GROW)")
                                      : std::string();
        lock.unlock();
        fail(RT_ERROR_OUT_OF_MEMORY, "%s: out of memory on %s: requested %zu bytes; %zu bytes free of %zu; "
             "%zu bytes reserved by the runtime%s", api, device_.label().c_str(), bytes, free_bytes, total, reserved,
             pool_text.c_str());
    }
    ++stats_.num_allocs;
    ++stats_.num_live_allocations;
    if (committed_new) ++stats_.num_cache_misses;
    else ++stats_.num_cache_hits;
    stats_.allocated_bytes += bytes;
    update_peaks();
    return p;
}

std::vector<StreamPosition> DeviceMemory::position_of(Stream* stream) {
    std::vector<StreamPosition> out;
    uint64_t pos = stream->queue().position_impl();
    if (!stream->queue().reached_impl(pos))
        stream->device().for_each_stream([&](const std::shared_ptr<Stream>& s) {
            if (s.get() == stream) out.push_back({s, pos});
        });
    return out;
}

void DeviceMemory::reap_deferred() {
    for (size_t i = 0; i < deferred_.size();) {
        bool done = true;
        for (const StreamPosition& w : deferred_[i].wait_for) done = done && w.stream->queue().reached_impl(w.position);
        if (!done) {
            ++i;
            continue;
        }
        device_.impl().free_impl(deferred_[i].ptr, deferred_[i].bytes);
        direct_bytes_ -= deferred_[i].bytes;
        deferred_[i] = std::move(deferred_.back());
        deferred_.pop_back();
    }
}

void DeviceMemory::wait_deferred() {
    for (DeferredFree& d : deferred_)
        for (StreamPosition& w : d.wait_for) w.stream->wait_idle();
    reap_deferred();
}

void DeviceMemory::release(void* p, size_t bytes, bool pooled, Stream* stream) {
    std::vector<StreamPosition> wait_for;
    if (!pooled && !stream) {
        // rtFree of direct memory returns it to the system before returning (CUDA's cudaFree semantics):
        // only once no queued work can touch it.
        runtime().wait_all_idle();
    } else {
        // rtFreeAsync: later work on `stream` is ordered after the free, other streams wait for it to pass
        // this point. rtFree of pooled memory: every stream must pass what it has queued so far.
        wait_for = stream ? position_of(stream) : unfinished_positions(nullptr);
    }
    std::lock_guard lock(mutex_);
    if (pooled) {
        pool_->release(p, bytes, stream, std::move(wait_for));
    } else {
        deferred_.push_back({p, bytes, std::move(wait_for)});
        reap_deferred();  // frees at once when nothing is pending
    }
    ++stats_.num_frees;
    --stats_.num_live_allocations;
    stats_.allocated_bytes -= bytes;
    update_peaks();
}

void DeviceMemory::enable_pool(size_t pool_size, size_t block_size, unsigned flags) {
    if (flags & ~RT_POOL_GROW)
        fail(RT_ERROR_INVALID_VALUE, "flags 0x%x has unknown bits (expected RT_POOL_DEFAULT or RT_POOL_GROW)", flags);
    if (pool_size && (block_size == 0 || (block_size & (block_size - 1)) || block_size < 4096))
        fail(RT_ERROR_INVALID_VALUE, "block_size %zu is not a power of two of at least 4096 bytes", block_size);
    if (pool_size && block_size > pool_size)
        fail(RT_ERROR_INVALID_VALUE, "block_size %zu is larger than pool_size %zu", block_size, pool_size);
    std::lock_guard lock(mutex_);
    if (pool_) {
        pool_->drain_pending();
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
    std::lock_guard lock(mutex_);
    wait_deferred();
    if (pool_) {
        pool_->drain_pending();
        pool_->trim();
    }
    update_peaks();
}

void DeviceMemory::count_elided_copy(size_t bytes) {
    std::lock_guard lock(mutex_);
    ++stats_.num_elided_copies;
    stats_.elided_copy_bytes += bytes;
}

rtMemStats DeviceMemory::stats() {
    std::lock_guard lock(mutex_);
    reap_deferred();
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

}  // namespace rt
