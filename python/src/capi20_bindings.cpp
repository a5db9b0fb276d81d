// runtime._core's CUDA-level calls (issue 20, runtime.h's "CUDA-level API" block): pointer and device attributes,
// peer access and copies, managed memory, pitched copies, stream priorities, waits with a timeout, device reset,
// function attributes and occupancy — thin bindings for python/runtime/lowlevel.py and core.py.
//
// Conventions of core_module.cpp (whose helpers bind_capi20 receives): pointers and handles are ints, every call
// releases the GIL, a failure raises the class registered for its rtError_t with the library's message.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <runtime/runtime.h>

#include <cstdint>
#include <string>

#include "bindings_common.hpp"

using rt_bindings::CheckFn;
using rt_bindings::g_check;
using rt_bindings::nogil;

namespace nb = nanobind;

namespace {

void (*g_drain)() = nullptr;  // core_module.cpp's drain_parked: releases of completed work (after a wait)

template <class T> T* as(uintptr_t h) { return reinterpret_cast<T*>(h); }
void* ptr(uintptr_t p) { return reinterpret_cast<void*>(p); }
uintptr_t as_int(const void* p) { return reinterpret_cast<uintptr_t>(p); }

const char* memory_type_name(rtMemoryType t) {
    switch (t) {
        case RT_MEMORY_TYPE_HOST: return "host";
        case RT_MEMORY_TYPE_DEVICE: return "device";
        case RT_MEMORY_TYPE_MANAGED: return "managed";
        case RT_MEMORY_TYPE_REGISTERED: return "registered";
        default: return "unregistered";
    }
}

}  // namespace

void bind_capi20(nb::module_& m, void (*check)(rtError_t, const char*), void (*drain)()) {
    g_check = check;
    g_drain = drain;

    nb::dict attrs;
    static const std::pair<const char*, rtDeviceAttr> names[] = {
        {"max_threads_per_block", RT_DEV_ATTR_MAX_THREADS_PER_BLOCK},
        {"max_block_dim_x", RT_DEV_ATTR_MAX_BLOCK_DIM_X},
        {"max_block_dim_y", RT_DEV_ATTR_MAX_BLOCK_DIM_Y},
        {"max_block_dim_z", RT_DEV_ATTR_MAX_BLOCK_DIM_Z},
        {"max_grid_dim_x", RT_DEV_ATTR_MAX_GRID_DIM_X},
        {"max_grid_dim_y", RT_DEV_ATTR_MAX_GRID_DIM_Y},
        {"max_grid_dim_z", RT_DEV_ATTR_MAX_GRID_DIM_Z},
        {"max_shared_memory_per_block", RT_DEV_ATTR_MAX_SHARED_MEMORY_PER_BLOCK},
        {"total_constant_memory", RT_DEV_ATTR_TOTAL_CONSTANT_MEMORY},
        {"warp_size", RT_DEV_ATTR_WARP_SIZE},
        {"clock_rate", RT_DEV_ATTR_CLOCK_RATE},
        {"multiprocessor_count", RT_DEV_ATTR_MULTIPROCESSOR_COUNT},
        {"integrated", RT_DEV_ATTR_INTEGRATED},
        {"can_map_host_memory", RT_DEV_ATTR_CAN_MAP_HOST_MEMORY},
        {"concurrent_kernels", RT_DEV_ATTR_CONCURRENT_KERNELS},
        {"memory_clock_rate", RT_DEV_ATTR_MEMORY_CLOCK_RATE},
        {"global_memory_bus_width", RT_DEV_ATTR_GLOBAL_MEMORY_BUS_WIDTH},
        {"l2_cache_size", RT_DEV_ATTR_L2_CACHE_SIZE},
        {"unified_addressing", RT_DEV_ATTR_UNIFIED_ADDRESSING},
        {"compute_capability_major", RT_DEV_ATTR_COMPUTE_CAPABILITY_MAJOR},
        {"compute_capability_minor", RT_DEV_ATTR_COMPUTE_CAPABILITY_MINOR},
        {"stream_priorities_supported", RT_DEV_ATTR_STREAM_PRIORITIES_SUPPORTED},
        {"max_shared_memory_per_multiprocessor", RT_DEV_ATTR_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR},
        {"managed_memory", RT_DEV_ATTR_MANAGED_MEMORY},
        {"concurrent_managed_access", RT_DEV_ATTR_CONCURRENT_MANAGED_ACCESS},
        {"max_shared_memory_per_block_optin", RT_DEV_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
        {"memory_pools_supported", RT_DEV_ATTR_MEMORY_POOLS_SUPPORTED},
    };
    for (const auto& [name, value] : names) attrs[name] = static_cast<int>(value);
    m.attr("DEVICE_ATTRIBUTES") = attrs;  // {"warp_size": 10, ...}: rtDeviceAttr by name
    m.attr("CPU_DEVICE_ID") = RT_CPU_DEVICE_ID;
    m.attr("MEM_ATTACH_GLOBAL") = RT_MEM_ATTACH_GLOBAL;
    m.attr("MEM_ATTACH_HOST") = RT_MEM_ATTACH_HOST;

    m.def("pointer_get_attributes", [](uintptr_t p) {
        rtPointerAttributes a{};
        nogil("rtPointerGetAttributes", [&] { return rtPointerGetAttributes(&a, ptr(p)); });
        nb::dict d;
        d["type"] = memory_type_name(a.type);
        d["device"] = a.device;
        d["device_pointer"] = as_int(a.device_pointer);
        d["host_pointer"] = as_int(a.host_pointer);
        d["base"] = as_int(a.base);
        d["size"] = a.size;
        return d;
    });
    m.def("device_get_attribute", [](int attr, int device) {
        int v = 0;
        nogil("rtDeviceGetAttribute", [&] { return rtDeviceGetAttribute(&v, static_cast<rtDeviceAttr>(attr), device); });
        return v;
    });
    m.def("device_can_access_peer", [](int device, int peer) {
        int can = 0;
        nogil("rtDeviceCanAccessPeer", [&] { return rtDeviceCanAccessPeer(&can, device, peer); });
        return can != 0;
    });
    m.def("device_enable_peer_access", [](int peer) {
        nogil("rtDeviceEnablePeerAccess", [&] { return rtDeviceEnablePeerAccess(peer, 0); });
    });
    m.def("memcpy_peer", [](uintptr_t dst, int dst_device, uintptr_t src, int src_device, size_t n) {
        nogil("rtMemcpyPeer", [&] { return rtMemcpyPeer(ptr(dst), dst_device, ptr(src), src_device, n); });
    });
    m.def("memcpy_peer_async", [](uintptr_t dst, int dst_device, uintptr_t src, int src_device, size_t n, uintptr_t s) {
        nogil("rtMemcpyPeerAsync",
              [&] { return rtMemcpyPeerAsync(ptr(dst), dst_device, ptr(src), src_device, n, as<rtStream_st>(s)); });
    });
    m.def("malloc_managed", [](size_t n, unsigned flags) {
        void* p = nullptr;
        nogil("rtMallocManaged", [&] { return rtMallocManaged(&p, n, flags); });
        return as_int(p);
    });
    m.def("mem_prefetch_async", [](uintptr_t p, size_t n, int device, uintptr_t s) {
        nogil("rtMemPrefetchAsync", [&] { return rtMemPrefetchAsync(ptr(p), n, device, as<rtStream_st>(s)); });
    });
    m.def("malloc_pitch", [](size_t width, size_t height) {
        void* p = nullptr;
        size_t pitch = 0;
        nogil("rtMallocPitch", [&] { return rtMallocPitch(&p, &pitch, width, height); });
        return nb::make_tuple(as_int(p), pitch);
    });
    m.def("memcpy_2d", [](uintptr_t dst, size_t dpitch, uintptr_t src, size_t spitch, size_t width, size_t height,
                          int kind) {
        nogil("rtMemcpy2D", [&] {
            return rtMemcpy2D(ptr(dst), dpitch, ptr(src), spitch, width, height, static_cast<rtMemcpyKind>(kind));
        });
    });
    m.def("memset_2d", [](uintptr_t p, size_t pitch, int value, size_t width, size_t height) {
        nogil("rtMemset2D", [&] { return rtMemset2D(ptr(p), pitch, value, width, height); });
    });
    m.def("stream_create_with_priority", [](unsigned flags, int priority) {
        rtStream_t s = nullptr;
        nogil("rtStreamCreateWithPriority", [&] { return rtStreamCreateWithPriority(&s, flags, priority); });
        return as_int(s);
    });
    m.def("stream_get_priority", [](uintptr_t s) {
        int p = 0;
        nogil("rtStreamGetPriority", [&] { return rtStreamGetPriority(as<rtStream_st>(s), &p); });
        return p;
    });
    m.def("device_get_stream_priority_range", [] {
        int least = 0, greatest = 0;
        nogil("rtDeviceGetStreamPriorityRange", [&] { return rtDeviceGetStreamPriorityRange(&least, &greatest); });
        return nb::make_tuple(least, greatest);
    });
    m.def("stream_synchronize_timeout", [](uintptr_t s, int timeout_ms) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtStreamSynchronizeWithTimeout(as<rtStream_st>(s), timeout_ms); }
        g_drain();
        g_check(e, "rtStreamSynchronizeWithTimeout");
    });
    m.def("event_synchronize_timeout", [](uintptr_t ev, int timeout_ms) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtEventSynchronizeWithTimeout(as<rtEvent_st>(ev), timeout_ms); }
        g_drain();
        g_check(e, "rtEventSynchronizeWithTimeout");
    });
    m.def("device_reset", [] {
        nogil("rtDeviceReset", [] { return rtDeviceReset(); });
        g_drain();
    });
    m.def("func_get_attributes", [](uintptr_t f) {
        rtFuncAttributes a{};
        nogil("rtFuncGetAttributes", [&] { return rtFuncGetAttributes(&a, as<rtFunction_st>(f)); });
        nb::dict d;
        d["shared_size_bytes"] = a.shared_size_bytes;
        d["const_size_bytes"] = a.const_size_bytes;
        d["local_size_bytes"] = a.local_size_bytes;
        d["max_threads_per_block"] = a.max_threads_per_block;
        d["num_regs"] = a.num_regs;
        d["max_dynamic_shared_size_bytes"] = a.max_dynamic_shared_size_bytes;
        d["num_params"] = a.num_params;
        d["uses_barriers"] = a.uses_barriers != 0;
        return d;
    });
    m.def("occupancy_max_active_blocks", [](uintptr_t f, int block_size, size_t shared_bytes) {
        int n = 0;
        nogil("rtOccupancyMaxActiveBlocksPerMultiprocessor", [&] {
            return rtOccupancyMaxActiveBlocksPerMultiprocessor(&n, as<rtFunction_st>(f), block_size, shared_bytes);
        });
        return n;
    });
    m.def("occupancy_max_potential_block_size", [](uintptr_t f, size_t shared_bytes, int limit) {
        int grid = 0, block = 0;
        nogil("rtOccupancyMaxPotentialBlockSize", [&] {
            return rtOccupancyMaxPotentialBlockSize(&grid, &block, as<rtFunction_st>(f), shared_bytes, limit);
        });
        return nb::make_tuple(grid, block);
    });
}
