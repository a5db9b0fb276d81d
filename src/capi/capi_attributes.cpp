// C API: pointer attributes, device attributes, function attributes and occupancy.
#include <algorithm>
#include <climits>

#include "capi/capi_common.hpp"
#include "core/memory.hpp"
#include "core/module.hpp"

using namespace rt;

namespace {

int clamp_int(size_t v) { return static_cast<int>(std::min<size_t>(v, INT_MAX)); }

/// The device's value of `attr`; false when this library does not know the attribute.
bool device_attribute(const backend::DeviceInfo& info, int attr, int* out) {
    const size_t optin = info.max_shared_bytes_optin ? info.max_shared_bytes_optin : info.max_shared_bytes;
    switch (attr) {
        case RT_DEV_ATTR_MAX_THREADS_PER_BLOCK: *out = info.max_threads_per_block; return true;
        case RT_DEV_ATTR_MAX_BLOCK_DIM_X: *out = info.max_block_size[0]; return true;
        case RT_DEV_ATTR_MAX_BLOCK_DIM_Y: *out = info.max_block_size[1]; return true;
        case RT_DEV_ATTR_MAX_BLOCK_DIM_Z: *out = info.max_block_size[2]; return true;
        case RT_DEV_ATTR_MAX_GRID_DIM_X: *out = info.max_grid_size[0]; return true;
        case RT_DEV_ATTR_MAX_GRID_DIM_Y: *out = info.max_grid_size[1]; return true;
        case RT_DEV_ATTR_MAX_GRID_DIM_Z: *out = info.max_grid_size[2]; return true;
        case RT_DEV_ATTR_MAX_SHARED_MEMORY_PER_BLOCK: *out = clamp_int(info.max_shared_bytes); return true;
        case RT_DEV_ATTR_TOTAL_CONSTANT_MEMORY: *out = info.total_constant_kib; return true;
        case RT_DEV_ATTR_WARP_SIZE: *out = info.subgroup_size; return true;
        case RT_DEV_ATTR_CLOCK_RATE: *out = info.clock_rate_khz; return true;
        case RT_DEV_ATTR_MULTIPROCESSOR_COUNT: *out = info.compute_units; return true;
        case RT_DEV_ATTR_INTEGRATED: *out = info.host_addressable; return true;
        case RT_DEV_ATTR_CAN_MAP_HOST_MEMORY: *out = info.host_addressable; return true;
        case RT_DEV_ATTR_CONCURRENT_KERNELS: *out = info.concurrent_kernels; return true;
        case RT_DEV_ATTR_MEMORY_CLOCK_RATE: *out = info.memory_clock_rate_khz; return true;
        case RT_DEV_ATTR_GLOBAL_MEMORY_BUS_WIDTH: *out = info.memory_bus_width; return true;
        case RT_DEV_ATTR_L2_CACHE_SIZE: *out = info.l2_cache_bytes; return true;
        case RT_DEV_ATTR_UNIFIED_ADDRESSING: *out = 1; return true;  // every backend: one address space with the host
        case RT_DEV_ATTR_COMPUTE_CAPABILITY_MAJOR: *out = info.compute_capability_major; return true;
        case RT_DEV_ATTR_COMPUTE_CAPABILITY_MINOR: *out = info.compute_capability_minor; return true;
        case RT_DEV_ATTR_STREAM_PRIORITIES_SUPPORTED: *out = info.greatest_stream_priority < 0; return true;
        case RT_DEV_ATTR_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
            *out = clamp_int(info.shared_bytes_per_unit ? info.shared_bytes_per_unit : info.max_shared_bytes);
            return true;
        case RT_DEV_ATTR_MANAGED_MEMORY: *out = info.managed_memory; return true;
        case RT_DEV_ATTR_CONCURRENT_MANAGED_ACCESS: *out = info.concurrent_managed_access; return true;
        case RT_DEV_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *out = clamp_int(optin); return true;
        case RT_DEV_ATTR_MEMORY_POOLS_SUPPORTED: *out = 1; return true;
        default: return false;
    }
}

std::shared_ptr<CoreFunction> live_function(rtFunction_t function) {
    auto f = runtime().functions.find(reinterpret_cast<uint64_t>(function));
    if (!f)
        fail(RT_ERROR_INVALID_HANDLE, "function %p is not a kernel of a loaded module (never looked up, or unloaded)",
             static_cast<void*>(function));
    return f;
}

/// Groups of `block` items with `dynamic` shared bytes resident on one compute unit at once: the items and the local
/// memory a unit holds, divided by a group's (cpu: one group runs on a core at a time). 0 when one group does not fit.
int active_groups(const CoreFunction& f, int block, size_t dynamic) {
    const backend::DeviceInfo& info = f.device().info();
    const size_t own = f.impl()->static_local_bytes();
    if (block > info.max_threads_per_block || own + dynamic > info.max_shared_bytes) return 0;
    if (info.host_addressable) return 1;  // a core runs one work-group at a time
    // A GPU: bounded by the unit's shared memory and by its threads (2048 per SM on current parts; the driver's
    // occupancy calculator also counts registers, which the runtime does not see).
    const size_t unit_shared = info.shared_bytes_per_unit ? info.shared_bytes_per_unit : info.max_shared_bytes;
    const int by_threads = std::max(1, 2048 / block);
    const size_t per_group = own + dynamic;
    const int by_shared = per_group ? clamp_int(unit_shared / per_group) : by_threads;
    return std::min(by_threads, by_shared);
}

}  // namespace

extern "C" {

RT_API rtError_t rtPointerGetAttributes(rtPointerAttributes* attributes, const void* ptr) {
    return capi_call("rtPointerGetAttributes", [&] {
        require_out(attributes, "attributes");
        rtPointerAttributes a{};
        a.type = RT_MEMORY_TYPE_UNREGISTERED;
        a.device = -1;
        PointerInfo info = ptr ? runtime().registry.lookup(ptr) : PointerInfo{};
        if (info.allocation) {
            const Allocation& al = *info.allocation;
            void* p = const_cast<void*>(ptr);
            a.device = al.device->index();
            a.base = reinterpret_cast<void*>(al.base);
            a.size = al.size;
            switch (al.kind) {
                case MemoryKind::device:
                    a.type = al.managed ? RT_MEMORY_TYPE_MANAGED : RT_MEMORY_TYPE_DEVICE;
                    a.device_pointer = p;
                    a.host_pointer = al.managed || al.device->info().host_addressable ? p : nullptr;
                    break;
                case MemoryKind::pinned_host:
                case MemoryKind::registered_host:
                    a.type = al.kind == MemoryKind::pinned_host ? RT_MEMORY_TYPE_HOST : RT_MEMORY_TYPE_REGISTERED;
                    a.host_pointer = p;
                    a.device_pointer = al.device->memory().zero_copy() && al.device->info().host_addressable ? p : nullptr;
                    break;
            }
        }
        *attributes = a;
    });
}

RT_API rtError_t rtDeviceGetAttribute(int* value, rtDeviceAttr attr, int device) {
    return capi_call("rtDeviceGetAttribute", [&] {
        require_out(value, "value");
        const CoreDevice& d = runtime().device(device);
        int a;
        static_assert(sizeof a == sizeof attr);
        std::memcpy(&a, &attr, sizeof a);  // any integer may arrive through the C ABI
        if (!device_attribute(d.info(), a, value))
            fail(RT_ERROR_INVALID_VALUE, "attr %d is not an rtDeviceAttr this library knows (expected an RT_DEV_ATTR_* "
                 "value, e.g. RT_DEV_ATTR_MULTIPROCESSOR_COUNT = 16)", a);
    });
}

RT_API rtError_t rtFuncGetAttributes(rtFuncAttributes* attributes, rtFunction_t function) {
    return capi_call("rtFuncGetAttributes", [&] {
        require_out(attributes, "attributes");
        auto f = live_function(function);
        const backend::DeviceInfo& info = f->device().info();
        const backend::Function& k = *f->impl();
        rtFuncAttributes a{};
        a.shared_size_bytes = k.static_local_bytes();
        a.max_threads_per_block = info.max_threads_per_block;
        a.max_dynamic_shared_size_bytes =
            clamp_int(info.max_shared_bytes > a.shared_size_bytes ? info.max_shared_bytes - a.shared_size_bytes : 0);
        a.num_params = k.num_args();
        a.uses_barriers = k.uses_barriers();
        *attributes = a;
    });
}

RT_API rtError_t rtOccupancyMaxActiveBlocksPerMultiprocessor(int* num_blocks, rtFunction_t function, int block_size,
                                                             size_t dynamic_shared_bytes) {
    return capi_call("rtOccupancyMaxActiveBlocksPerMultiprocessor", [&] {
        require_out(num_blocks, "num_blocks");
        auto f = live_function(function);
        if (block_size <= 0) fail(RT_ERROR_INVALID_VALUE, "block_size %d is not positive", block_size);
        *num_blocks = active_groups(*f, block_size, dynamic_shared_bytes);
    });
}

RT_API rtError_t rtOccupancyMaxPotentialBlockSize(int* min_grid_size, int* block_size, rtFunction_t function,
                                                  size_t dynamic_shared_bytes, int block_size_limit) {
    return capi_call("rtOccupancyMaxPotentialBlockSize", [&] {
        require_out(min_grid_size, "min_grid_size");
        require_out(block_size, "block_size");
        auto f = live_function(function);
        if (block_size_limit < 0) fail(RT_ERROR_INVALID_VALUE, "block_size_limit %d is negative", block_size_limit);
        const backend::DeviceInfo& info = f->device().info();
        const int limit = block_size_limit ? std::min(block_size_limit, info.max_threads_per_block) : info.max_threads_per_block;
        // The largest block (in whole subgroups) with the most resident items per unit; ties go to the larger block.
        const int step = std::max(1, info.subgroup_size);
        int best_block = 0, best_items = 0, best_groups = 0;
        for (int b = limit / step * step; b >= step; b -= step) {
            const int groups = active_groups(*f, b, dynamic_shared_bytes);
            if (groups * b > best_items) {
                best_items = groups * b;
                best_block = b;
                best_groups = groups;
            }
        }
        if (best_block == 0)
            fail(RT_ERROR_INVALID_VALUE, "no block size up to %d fits %zu bytes of dynamic shared memory on %s (at most "
                 "%zu bytes of local memory per group)", limit, dynamic_shared_bytes, f->device().label().c_str(),
                 info.max_shared_bytes);
        *block_size = best_block;
        *min_grid_size = best_groups * info.compute_units;
    });
}

}  // extern "C"
