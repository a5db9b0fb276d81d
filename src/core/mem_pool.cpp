// Memory pool objects: created pools over a MemoryPool of their own, default pools over the device's allocator;
// attributes, release thresholds, trimming, and deferred destruction while allocations live.
#include "core/mem_pool.hpp"

#include <algorithm>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/runtime.hpp"
#include "core/timeline.hpp"

namespace rt {

namespace {

constexpr uint64_t kTag = 0x50;  // 'P'
constexpr unsigned kIdBits = 32, kDeviceBits = 16;  // handle: tag(8) | runtime generation(8) | device | id
constexpr size_t kBlock = size_t{2} << 20, kMinBlock = size_t{64} << 10;

/// 2 MiB blocks (the CUDA allocation granularity); a sixteenth of a smaller pool, at least 64 KiB.
size_t block_for(size_t pool_size) {
    size_t block = kBlock;
    while (block > kMinBlock && block * 16 > pool_size) block /= 2;
    return block;
}

const char* attr_name(int attr) {
    switch (attr) {
        case RT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: return "RT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES";
        case RT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: return "RT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC";
        case RT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            return "RT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES";
        case RT_MEMPOOL_ATTR_RELEASE_THRESHOLD: return "RT_MEMPOOL_ATTR_RELEASE_THRESHOLD";
        case RT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: return "RT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT";
        case RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH: return "RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH";
        case RT_MEMPOOL_ATTR_USED_MEM_CURRENT: return "RT_MEMPOOL_ATTR_USED_MEM_CURRENT";
        case RT_MEMPOOL_ATTR_USED_MEM_HIGH: return "RT_MEMPOOL_ATTR_USED_MEM_HIGH";
    }
    return nullptr;
}

[[noreturn]] void refuse_attr(int attr, const char* api) {
    fail(RT_ERROR_INVALID_VALUE, "%s: attr %d is not an rtMemPoolAttr (expected RT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_"
         "DEPENDENCIES (1) .. RT_MEMPOOL_ATTR_USED_MEM_HIGH (8))", api, attr);
}

}  // namespace

MemPoolObject::MemPoolObject(CoreDevice& device) : device_(device), id_(0), release_threshold_(UINT64_MAX) {}

MemPoolObject::MemPoolObject(CoreDevice& device, size_t max_size, uint64_t id)
    : device_(device), id_(id), release_threshold_(0) {
    if (id_ >> kIdBits) fail(RT_ERROR_OUT_OF_MEMORY, "too many memory pools were made on %s", device.label().c_str());
    const size_t size = max_size ? max_size : device.info().total_memory;
    range_ = std::make_unique<MemoryPool>(device.impl(), size, block_for(size));
}

// A created pool goes when its device's list lets go of it: destroyed with nothing left, or at teardown (its memory
// then goes with its reservation).
MemPoolObject::~MemPoolObject() = default;

rtMemPool_t MemPoolObject::handle() const {
    const uint64_t generation = runtime().generation() & 0xFF;
    const uint64_t index = static_cast<uint64_t>(device_.index()) & ((uint64_t{1} << kDeviceBits) - 1);
    return reinterpret_cast<rtMemPool_t>(static_cast<uintptr_t>(
        (kTag << 56) | (generation << 48) | (index << kIdBits) | id_));
}

std::shared_ptr<MemPoolObject> find_mem_pool(rtMemPool_t handle, const char* api) {
    const uint64_t h = reinterpret_cast<uintptr_t>(handle);
    Runtime& r = runtime();
    const int index = static_cast<int>((h >> kIdBits) & ((uint64_t{1} << kDeviceBits) - 1));
    std::shared_ptr<MemPoolObject> pool;
    if (h >> 56 == kTag && ((h >> 48) & 0xFF) == (r.generation() & 0xFF) && index < r.device_count())
        pool = r.device(index).memory().find_pool(h & ((uint64_t{1} << kIdBits) - 1));
    if (!pool)
        fail(RT_ERROR_INVALID_HANDLE, "%s: pool %p is not a live memory pool (expected one from rtMemPoolCreate, "
             "rtDeviceGetMemPool or rtDeviceGetDefaultMemPool that was not destroyed)", api, static_cast<void*>(handle));
    return pool;
}

bool MemPoolObject::wait_for_frees() {
    if (in_queue_context()) return false;  // the work those frees wait for may be the caller itself
    wait_for(unfinished_points());
    runtime().timeline().run_due();
    return true;
}

void MemPoolObject::account_reserved(size_t reserved_before) {
    const size_t now = range_->committed_bytes();
    reserved_high_ = std::max(reserved_high_, now);
    device_.memory().count_pool_reserved(reserved_before, now);
}

void* MemPoolObject::allocate(size_t bytes, Stream* stream, const char* api) {
    std::unique_lock lock(mutex_);
    if (destroyed_) fail(RT_ERROR_INVALID_HANDLE, "%s: the memory pool was destroyed", api);
    const size_t before = range_->committed_bytes();
    bool committed_new = false;
    auto attempt = [&] {
        void* p = range_->allocate(bytes, stream, &committed_new);
        // Out of room: give cached blocks back (the device's capacity may be what is short), and try again.
        if (!p && range_->trim()) p = range_->allocate(bytes, stream, &committed_new);
        return p;
    };
    void* p = attempt();
    // Out of memory while frees wait for queued work: wait for it without the lock, and try again.
    for (int tries = 0; !p && tries < 16 && range_->has_pending(); ++tries) {
        lock.unlock();
        const bool waited = wait_for_frees();
        lock.lock();
        if (!waited || destroyed_) break;
        p = attempt();
    }
    if (!p) {
        account_reserved(before);
        const size_t reserved = range_->committed_bytes(), largest = range_->largest_free_range(),
                     used = used_, size = range_->size();
        lock.unlock();
        fail(RT_ERROR_OUT_OF_MEMORY, "%s: out of memory in a memory pool of %s: requested %zu bytes; the pool has "
             "%zu bytes in use and %zu reserved of its %zu-byte maximum, largest free range %zu bytes", api,
             device_.label().c_str(), bytes, used, reserved, size, largest);
    }
    ++live_;
    used_ += bytes;
    used_high_ = std::max(used_high_, used_);
    account_reserved(before);
    device_.memory().count_pool_allocation(bytes, committed_new);
    return p;
}

void MemPoolObject::release(void* p, size_t bytes, Stream* stream) {
    // On a driver's callback thread no stream can be asked where it is: the timeline's thread releases it.
    if (in_driver_thread()) {
        runtime().timeline().defer({}, [self = shared_from_this(), p, bytes] { self->release(p, bytes, nullptr); });
        return;
    }
    std::vector<StreamPoint> after = stream ? unfinished_point(*stream) : unfinished_points();
    uint64_t pending = 0;
    bool done = false;
    {
        std::lock_guard lock(mutex_);
        pending = range_->release(p, bytes, stream, after.empty());
        --live_;
        used_ -= bytes;
        device_.memory().count_pool_free(bytes);
        done = destroyed_ && live_ == 0 && !range_->has_pending();
    }
    if (pending)
        runtime().timeline().defer(std::move(after), [weak = weak_from_this(), pending] {
            std::shared_ptr<MemPoolObject> self = weak.lock();
            if (!self) return;
            bool finished = false;
            {
                std::lock_guard lock(self->mutex_);
                self->range_->promote(pending);
                finished = self->destroyed_ && self->live_ == 0 && !self->range_->has_pending();
            }
            if (finished) self->device_.memory().reap_pool(*self);
        });
    if (done) device_.memory().reap_pool(*this);  // may delete this: nothing follows
}

void MemPoolObject::set_attribute(int attr, const void* value, const char* api) {
    if (!attr_name(attr)) refuse_attr(attr, api);
    if (!value)
        fail(RT_ERROR_INVALID_VALUE, "%s: value is NULL (expected a pointer to the %s of %s)", api,
             attr <= RT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES ? "int" : "uint64_t", attr_name(attr));
    switch (attr) {
        case RT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case RT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case RT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: {
            const int v = *static_cast<const int*>(value);
            if (v != 0 && v != 1)
                fail(RT_ERROR_INVALID_VALUE, "%s: %d is not a value of %s (expected an int, 0 or 1)", api, v,
                     attr_name(attr));
            std::lock_guard lock(mutex_);
            (attr == RT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES ? reuse_follow_
             : attr == RT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC ? reuse_opportunistic_
                                                                  : reuse_internal_) = v;
            return;
        }
        case RT_MEMPOOL_ATTR_RELEASE_THRESHOLD: {
            {
                std::lock_guard lock(mutex_);
                release_threshold_ = *static_cast<const uint64_t*>(value);
            }
            if (is_default()) device_.memory().update_sync_work();
            return;
        }
        case RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        case RT_MEMPOOL_ATTR_USED_MEM_HIGH: {
            const uint64_t v = *static_cast<const uint64_t*>(value);
            if (v != 0)
                fail(RT_ERROR_INVALID_VALUE, "%s: %s can only be set to 0 (restarting the mark from the current "
                     "value), got %llu", api, attr_name(attr), static_cast<unsigned long long>(v));
            const bool reserved = attr == RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH;
            if (is_default()) {
                device_.memory().reset_default_pool_high(reserved);
                return;
            }
            std::lock_guard lock(mutex_);
            if (reserved) reserved_high_ = range_->committed_bytes();
            else used_high_ = used_;
            return;
        }
        default:
            fail(RT_ERROR_INVALID_VALUE, "%s: %s is read only (expected an attribute that can be set: the reuse "
                 "attributes, RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, or 0 for a high-water mark)", api, attr_name(attr));
    }
}

void MemPoolObject::get_attribute(int attr, void* value, const char* api) {
    if (!attr_name(attr)) refuse_attr(attr, api);
    if (!value)
        fail(RT_ERROR_INVALID_VALUE, "%s: value is NULL (expected a pointer to an %s to write %s to)", api,
             attr <= RT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES ? "int" : "uint64_t", attr_name(attr));
    auto out = [&](uint64_t v) { *static_cast<uint64_t*>(value) = v; };
    if (attr >= RT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) {
        if (is_default()) {
            size_t used, used_high, reserved, reserved_high;
            device_.memory().default_pool_figures(&used, &used_high, &reserved, &reserved_high);
            out(attr == RT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ? reserved
                : attr == RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH  ? reserved_high
                : attr == RT_MEMPOOL_ATTR_USED_MEM_CURRENT   ? used
                                                             : used_high);
            return;
        }
        runtime().timeline().run_due();  // frees whose work completed count as done
        std::lock_guard lock(mutex_);
        out(attr == RT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ? range_->committed_bytes()
            : attr == RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH  ? reserved_high_
            : attr == RT_MEMPOOL_ATTR_USED_MEM_CURRENT   ? used_
                                                         : used_high_);
        return;
    }
    std::lock_guard lock(mutex_);
    switch (attr) {
        case RT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: *static_cast<int*>(value) = reuse_follow_; return;
        case RT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: *static_cast<int*>(value) = reuse_opportunistic_; return;
        case RT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *static_cast<int*>(value) = reuse_internal_; return;
        default: out(release_threshold_); return;
    }
}

void MemPoolObject::trim_to(size_t keep) {
    runtime().timeline().run_due();  // frees whose work completed are reusable, hence releasable
    if (is_default()) {
        device_.memory().trim_default_pool(keep);
        return;
    }
    std::lock_guard lock(mutex_);
    const size_t before = range_->committed_bytes();
    range_->trim(keep);
    account_reserved(before);
}

void MemPoolObject::apply_release_threshold() {
    uint64_t threshold;
    {
        std::lock_guard lock(mutex_);
        threshold = release_threshold_;
        if (!is_default()) {
            const size_t before = range_->committed_bytes();
            if (before > threshold) {
                range_->trim(static_cast<size_t>(threshold));
                account_reserved(before);
            }
            return;
        }
    }
    if (threshold != UINT64_MAX) device_.memory().trim_default_pool(static_cast<size_t>(threshold));
}

bool MemPoolObject::mark_destroyed() {
    std::lock_guard lock(mutex_);
    destroyed_ = true;
    return live_ == 0 && !range_->has_pending();
}

void MemPoolObject::release_reservation() {
    std::lock_guard lock(mutex_);
    const size_t before = range_->committed_bytes();
    range_->trim();
    account_reserved(before);
}

bool MemPoolObject::destroyed() {
    std::lock_guard lock(mutex_);
    return destroyed_;
}

bool MemPoolObject::finished() {
    std::lock_guard lock(mutex_);
    return destroyed_ && live_ == 0 && !range_->has_pending();
}

}  // namespace rt
