// runtime._core's memory pool objects (rtMemPool_t, runtime.h "memory pool objects"): thin bindings for
// python/runtime/mempool.py. Conventions of core_module.cpp: handles and pointers are ints, every call releases the
// GIL, a failure raises the class registered for its rtError_t with the library's message.
#include <nanobind/nanobind.h>

#include <runtime/runtime.h>

#include <cstdint>
#include <cstring>

#include "bindings_common.hpp"

using rt_bindings::CheckFn;
using rt_bindings::g_check;
using rt_bindings::nogil;

namespace nb = nanobind;

namespace {

rtMemPool_t pool_of(uintptr_t h) { return reinterpret_cast<rtMemPool_t>(h); }
uintptr_t as_int(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

void bind_mempool(nb::module_& m, void (*check)(rtError_t, const char*)) {
    g_check = check;
    m.attr("MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES") = static_cast<int>(RT_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES);
    m.attr("MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC") = static_cast<int>(RT_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC);
    m.attr("MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES") =
        static_cast<int>(RT_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES);
    m.attr("MEMPOOL_ATTR_RELEASE_THRESHOLD") = static_cast<int>(RT_MEMPOOL_ATTR_RELEASE_THRESHOLD);
    m.attr("MEMPOOL_ATTR_RESERVED_MEM_CURRENT") = static_cast<int>(RT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
    m.attr("MEMPOOL_ATTR_RESERVED_MEM_HIGH") = static_cast<int>(RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH);
    m.attr("MEMPOOL_ATTR_USED_MEM_CURRENT") = static_cast<int>(RT_MEMPOOL_ATTR_USED_MEM_CURRENT);
    m.attr("MEMPOOL_ATTR_USED_MEM_HIGH") = static_cast<int>(RT_MEMPOOL_ATTR_USED_MEM_HIGH);

    m.def("mem_pool_create", [](int device, size_t max_size) {
        rtMemPoolProps props;
        std::memset(&props, 0, sizeof props);
        props.alloc_type = RT_MEM_ALLOCATION_TYPE_PINNED;
        props.handle_types = RT_MEM_HANDLE_TYPE_NONE;
        props.location.type = RT_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = device;
        props.max_size = max_size;
        rtMemPool_t pool = nullptr;
        nogil("rtMemPoolCreate", [&] { return rtMemPoolCreate(&pool, &props); });
        return as_int(pool);
    }, nb::arg("device"), nb::arg("max_size"));
    m.def("mem_pool_destroy", [](uintptr_t pool) {
        nogil("rtMemPoolDestroy", [&] { return rtMemPoolDestroy(pool_of(pool)); });
    });
    // The reuse attributes are ints, the others uint64_t (runtime.h): one binding for each type.
    m.def("mem_pool_get_int", [](uintptr_t pool, int attr) {
        int v = 0;
        nogil("rtMemPoolGetAttribute", [&] { return rtMemPoolGetAttribute(pool_of(pool), static_cast<rtMemPoolAttr>(attr), &v); });
        return v;
    });
    m.def("mem_pool_set_int", [](uintptr_t pool, int attr, int v) {
        nogil("rtMemPoolSetAttribute", [&] { return rtMemPoolSetAttribute(pool_of(pool), static_cast<rtMemPoolAttr>(attr), &v); });
    });
    m.def("mem_pool_get_u64", [](uintptr_t pool, int attr) {
        uint64_t v = 0;
        nogil("rtMemPoolGetAttribute", [&] { return rtMemPoolGetAttribute(pool_of(pool), static_cast<rtMemPoolAttr>(attr), &v); });
        return v;
    });
    m.def("mem_pool_set_u64", [](uintptr_t pool, int attr, uint64_t v) {
        nogil("rtMemPoolSetAttribute", [&] { return rtMemPoolSetAttribute(pool_of(pool), static_cast<rtMemPoolAttr>(attr), &v); });
    });
    m.def("mem_pool_trim_to", [](uintptr_t pool, size_t keep) {
        nogil("rtMemPoolTrimTo", [&] { return rtMemPoolTrimTo(pool_of(pool), keep); });
    });
    m.def("malloc_from_pool_async", [](size_t n, uintptr_t pool, uintptr_t stream) {
        void* p = nullptr;
        nogil("rtMallocFromPoolAsync", [&] {
            return rtMallocFromPoolAsync(&p, n, pool_of(pool), reinterpret_cast<rtStream_t>(stream));
        });
        return as_int(p);
    });
    m.def("device_set_mem_pool", [](int device, uintptr_t pool) {
        nogil("rtDeviceSetMemPool", [&] { return rtDeviceSetMemPool(device, pool_of(pool)); });
    });
    m.def("device_get_mem_pool", [](int device) {
        rtMemPool_t pool = nullptr;
        nogil("rtDeviceGetMemPool", [&] { return rtDeviceGetMemPool(&pool, device); });
        return as_int(pool);
    });
    m.def("device_get_default_mem_pool", [](int device) {
        rtMemPool_t pool = nullptr;
        nogil("rtDeviceGetDefaultMemPool", [&] { return rtDeviceGetDefaultMemPool(&pool, device); });
        return as_int(pool);
    });
}
