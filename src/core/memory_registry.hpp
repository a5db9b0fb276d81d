// The allocation registry: every device and pinned-host allocation, so copies and frees are checked, never trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <mutex>
#include <vector>

#include "core/spin_lock.hpp"

namespace rt {

class CoreDevice;
class MemPoolObject;

enum class MemoryKind : uint8_t {
    device,           ///< rtMalloc / rtMallocAsync
    pinned_host,      ///< rtMallocHost
    registered_host,  ///< rtHostRegister: the user's memory, only known to the runtime
};

struct Allocation {
    uintptr_t base = 0;
    size_t size = 0;
    MemoryKind kind = MemoryKind::device;
    CoreDevice* device = nullptr;
    bool pooled = false;  ///< served by the device's pool (device memory only)
    /// Pinned host memory: the device whose allocate_host_impl made it, which frees it (null: `device`). rtMallocHost
    /// takes it from a device with portable host memory whichever device is current (DeviceInfo).
    CoreDevice* host_owner = nullptr;
    /// A module's RT_GLOBAL (rtModuleGetGlobal; kind device): memory of the module, never freed through the registry
    /// (rtFree refuses it, teardown leaves it, statistics do not count it); `refs` module handles registered it.
    bool module_global = false;
    uint32_t refs = 0;
    /// An executable graph's arena (kind device): the memory of its allocation nodes, which kernels, copies and fills
    /// use like any device memory, but only the executable graph frees (rtFree/rtFreeAsync refuse it).
    bool graph_arena = false;
    /// Managed memory (rtMallocManaged; kind device): rtPointerGetAttributes reports it, rtMemPrefetchAsync takes it.
    bool managed = false;
    /// Served by a created memory pool (rtMemPoolCreate; pooled too): free_device returns it there. The pool stays
    /// until its last allocation is freed, even once destroyed.
    MemPoolObject* mem_pool = nullptr;
    /// Memory of another process mapped by rtIpcOpenMemHandle (kind device; `ipc_pid` exported it): copies and kernels
    /// use it, rtIpcCloseMemHandle unmaps it (rtFree refuses it), statistics do not count it.
    bool ipc_opened = false;
    int ipc_pid = 0;
};

/// Where a pointer lies: inside a live allocation (with the bytes left from it), or nowhere known.
struct PointerInfo {
    std::optional<Allocation> allocation;
    size_t available = 0;  ///< bytes from the pointer to the end of its allocation
};

/// Thread-safe (one mutex).
class MemoryRegistry {
public:
    void insert(const Allocation& allocation);
    /// Registers a module global (allocation.module_global), or counts one more handle of one registered already.
    void retain_module_global(const Allocation& allocation);
    /// One handle less of the module global at `base`; the last removes it.
    void release_module_global(uintptr_t base);
    /// Removes the allocation starting exactly at `base` (never a module global; an executable graph's arena only
    /// when `graph_arena`, and then only that); returns it, or nullopt if none.
    std::optional<Allocation> erase(uintptr_t base, MemoryKind kind, bool graph_arena = false);
    /// Removes the memory rtIpcOpenMemHandle mapped at `base`; nullopt if none.
    std::optional<Allocation> erase_ipc_opened(uintptr_t base);
    PointerInfo lookup(const void* ptr) const;
    /// A live allocation intersecting [ptr, ptr + bytes), if any.
    std::optional<Allocation> find_overlap(const void* ptr, size_t bytes) const;
    /// True if `ptr` is the start of an allocation freed recently (for error messages).
    bool recently_freed(const void* ptr) const;
    /// Removes and returns the device memory of `device` that rtFree could free (module globals and graph arenas
    /// stay: their owners free them): rtDeviceReset.
    std::vector<Allocation> take_device_memory(const CoreDevice* device);
    /// Removes and returns every live allocation (teardown).
    std::vector<Allocation> take_all();
    /// Live allocations of `device` (all devices if null), module globals not counted, for statistics and teardown.
    size_t count(const CoreDevice* device) const;

private:
    // Every critical section is a few map operations: a spin lock (rwlocks cost more than they save).
    mutable SpinLock mutex_;
    std::map<uintptr_t, Allocation> live_;
    // Map nodes of erased entries, reused by inserts: no heap allocation per malloc/free pair.
    std::vector<std::map<uintptr_t, Allocation>::node_type> spare_nodes_;
    // The last frees, only to say "already freed" rather than "unknown" in error messages (searched
    // only then). A live allocation at the same address takes precedence.
    static constexpr size_t kFreedRing = 1024;
    uintptr_t freed_[kFreedRing] = {};
    size_t freed_next_ = 0;
};

}  // namespace rt
