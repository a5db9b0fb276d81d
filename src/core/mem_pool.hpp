// Memory pool objects (rtMemPool_t): a device's default pool, and the independent pools rtMemPoolCreate makes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/memory_pool.hpp"
#include "runtime/runtime.h"

namespace rt {

class CoreDevice;
class Stream;

/// Thread-safe. A created pool owns a MemoryPool of its own: its address space, reservation, statistics and release
/// threshold. A default pool is the device's allocator (DeviceMemory, which the enable_* switches configure) seen as
/// a pool: it only adds the attributes. Lock order: DeviceMemory's pool list, then a pool, then DeviceMemory's
/// statistics.
class MemPoolObject : public std::enable_shared_from_this<MemPoolObject> {
public:
    /// The default pool of `device`.
    explicit MemPoolObject(CoreDevice& device);
    /// A created pool of up to `max_size` bytes (0: the device's memory), numbered `id` (> 0) on its device.
    MemPoolObject(CoreDevice& device, size_t max_size, uint64_t id);
    ~MemPoolObject();
    MemPoolObject(const MemPoolObject&) = delete;
    MemPoolObject& operator=(const MemPoolObject&) = delete;

    CoreDevice& device() const { return device_; }
    bool is_default() const { return id_ == 0; }
    uint64_t id() const { return id_; }
    /// The C handle: tag, runtime generation, device index and id; never reused within a runtime.
    rtMemPool_t handle() const;

    /// Stream-ordered allocation (stream null: ordered after nothing), registered with this pool as its owner.
    /// Throws OUT_OF_MEMORY with the pool's figures, INVALID_HANDLE once destroyed.
    void* allocate(size_t bytes, Stream* stream, const char* api);
    /// Called by free_device for memory this (created) pool served: reusable by `stream` at once, by every stream
    /// once `stream` has passed this point (null: once every stream has run what it has queued).
    void release(void* p, size_t bytes, Stream* stream);

    void set_attribute(int attr, const void* value, const char* api);
    void get_attribute(int attr, void* value, const char* api);
    /// Returns unused reserved memory to the system until at most `keep` bytes of it stay.
    void trim_to(size_t keep);
    /// At a synchronize: reserved memory beyond the release threshold goes back to the system.
    void apply_release_threshold();
    /// rtMemPoolDestroy: new allocations are refused; true if nothing is left (live or pending) and it may go now.
    bool mark_destroyed();
    /// Destroyed, with no live allocation and no free waiting for queued work.
    bool finished();
    bool destroyed();
    /// A finished pool about to go: its whole reservation goes back to the system, and out of the device's figures.
    void release_reservation();

private:
    /// Created pools: the reservation's figures changed from `reserved_before`: report to the device (mutex_ held).
    void account_reserved(size_t reserved_before);
    bool wait_for_frees();

    CoreDevice& device_;
    const uint64_t id_;
    std::mutex mutex_;
    std::unique_ptr<MemoryPool> range_;  // created pools only
    size_t used_ = 0, used_high_ = 0, reserved_high_ = 0, live_ = 0;
    uint64_t release_threshold_;
    int reuse_follow_ = 1, reuse_opportunistic_ = 1, reuse_internal_ = 1;
    bool destroyed_ = false;
};

/// The pool behind a C handle; throws INVALID_HANDLE naming `api` and the handle.
std::shared_ptr<MemPoolObject> find_mem_pool(rtMemPool_t handle, const char* api);

}  // namespace rt
