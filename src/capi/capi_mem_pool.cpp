// C API: memory pool objects (rtMemPool_t) — creation, attributes, trimming, allocation from a pool, device pools.
#include <cstring>

#include "capi/capi_common.hpp"
#include "core/mem_pool.hpp"
#include "core/memory.hpp"

using namespace rt;

namespace {

/// The device `index`, named as `what` in the message when there is none.
CoreDevice& device_arg(int index, const char* api, const char* what) {
    Runtime& r = runtime();
    if (index < 0 || index >= r.device_count())
        fail(RT_ERROR_INVALID_DEVICE, "%s: %s %d is not a device (expected 0 .. %d)", api, what, index,
             r.device_count() - 1);
    return r.device(index);
}

void check_props(const rtMemPoolProps* props, const char* api) {
    if (!props) fail(RT_ERROR_INVALID_VALUE, "%s: props is NULL (expected a pointer to an rtMemPoolProps)", api);
    if (enum_value(props->alloc_type) != RT_MEM_ALLOCATION_TYPE_PINNED)
        fail(RT_ERROR_INVALID_VALUE, "%s: props->alloc_type is %d (expected RT_MEM_ALLOCATION_TYPE_PINNED)", api,
             enum_value(props->alloc_type));
    if (enum_value(props->handle_types) != RT_MEM_HANDLE_TYPE_NONE)
        fail(RT_ERROR_INVALID_VALUE, "%s: props->handle_types is %d (expected RT_MEM_HANDLE_TYPE_NONE: pools cannot be "
             "exported)", api, enum_value(props->handle_types));
    if (enum_value(props->location.type) != RT_MEM_LOCATION_TYPE_DEVICE)
        fail(RT_ERROR_INVALID_VALUE, "%s: props->location.type is %d (expected RT_MEM_LOCATION_TYPE_DEVICE)", api,
             enum_value(props->location.type));
    if (props->win32_security_attributes)
        fail(RT_ERROR_INVALID_VALUE, "%s: props->win32_security_attributes is not NULL (expected NULL)", api);
    if (props->usage != 0) fail(RT_ERROR_INVALID_VALUE, "%s: props->usage is %u (expected 0)", api, props->usage);
    for (size_t i = 0; i < sizeof props->reserved; ++i)
        if (props->reserved[i])
            fail(RT_ERROR_INVALID_VALUE, "%s: props->reserved[%zu] is %u (expected 0: the reserved bytes are for later "
                 "fields; zero-initialise the struct)", api, i, props->reserved[i]);
}

}  // namespace

extern "C" {

RT_API rtError_t rtMemPoolCreate(rtMemPool_t* pool, const rtMemPoolProps* props) {
    return capi_call("rtMemPoolCreate", [&] {
        require_out(pool, "pool");
        check_props(props, "rtMemPoolCreate");
        CoreDevice& d = device_arg(props->location.id, "rtMemPoolCreate", "props->location.id");
        *pool = d.memory().create_pool(props->max_size)->handle();
    });
}

RT_API rtError_t rtMemPoolDestroy(rtMemPool_t pool) {
    return capi_call("rtMemPoolDestroy", [&] {
        auto p = find_mem_pool(pool, "rtMemPoolDestroy");
        if (p->is_default())
            fail(RT_ERROR_INVALID_VALUE, "rtMemPoolDestroy: pool %p is the default pool of device %d (%s), which cannot "
                 "be destroyed (expected a pool from rtMemPoolCreate)", static_cast<void*>(pool), p->device().index(),
                 p->device().label().c_str());
        p->device().memory().destroy_pool(*p);
    });
}

RT_API rtError_t rtMemPoolSetAttribute(rtMemPool_t pool, rtMemPoolAttr attr, void* value) {
    return capi_call("rtMemPoolSetAttribute", [&] {
        find_mem_pool(pool, "rtMemPoolSetAttribute")->set_attribute(enum_value(attr), value,
                                                                    "rtMemPoolSetAttribute");
    });
}

RT_API rtError_t rtMemPoolGetAttribute(rtMemPool_t pool, rtMemPoolAttr attr, void* value) {
    return capi_call("rtMemPoolGetAttribute", [&] {
        find_mem_pool(pool, "rtMemPoolGetAttribute")->get_attribute(enum_value(attr), value,
                                                                    "rtMemPoolGetAttribute");
    });
}

RT_API rtError_t rtMemPoolTrimTo(rtMemPool_t pool, size_t min_bytes_to_keep) {
    return capi_call("rtMemPoolTrimTo", [&] { find_mem_pool(pool, "rtMemPoolTrimTo")->trim_to(min_bytes_to_keep); });
}

RT_API rtError_t rtMallocFromPoolAsync(void** ptr, size_t size, rtMemPool_t pool, rtStream_t stream) {
    return capi_call("rtMallocFromPoolAsync", [&] {
        require_out(ptr, "ptr");
        auto p = find_mem_pool(pool, "rtMallocFromPoolAsync");
        auto s = runtime().stream(stream);
        if (&s->device() != &p->device())
            fail(RT_ERROR_INVALID_VALUE, "rtMallocFromPoolAsync: pool %p belongs to device %d (%s) but the stream to "
                 "device %d (%s) (expected a pool of the stream's device)", static_cast<void*>(pool),
                 p->device().index(), p->device().label().c_str(), s->device().index(), s->device().label().c_str());
        *ptr = allocate_from_pool(*p, size, *s, "rtMallocFromPoolAsync");
    });
}

RT_API rtError_t rtDeviceSetMemPool(int device, rtMemPool_t pool) {
    return capi_call("rtDeviceSetMemPool", [&] {
        CoreDevice& d = device_arg(device, "rtDeviceSetMemPool", "device");
        auto p = find_mem_pool(pool, "rtDeviceSetMemPool");
        if (&p->device() != &d)
            fail(RT_ERROR_INVALID_VALUE, "rtDeviceSetMemPool: pool %p belongs to device %d (%s), not to device %d (%s) "
                 "(expected a pool of that device)", static_cast<void*>(pool), p->device().index(),
                 p->device().label().c_str(), device, d.label().c_str());
        d.memory().set_current_pool(std::move(p));
    });
}

RT_API rtError_t rtDeviceGetMemPool(rtMemPool_t* pool, int device) {
    return capi_call("rtDeviceGetMemPool", [&] {
        require_out(pool, "pool");
        CoreDevice& d = device_arg(device, "rtDeviceGetMemPool", "device");
        auto p = d.memory().current_pool();
        *pool = p ? p->handle() : d.memory().default_pool()->handle();
    });
}

RT_API rtError_t rtDeviceGetDefaultMemPool(rtMemPool_t* pool, int device) {
    return capi_call("rtDeviceGetDefaultMemPool", [&] {
        require_out(pool, "pool");
        *pool = device_arg(device, "rtDeviceGetDefaultMemPool", "device").memory().default_pool()->handle();
    });
}

}  // extern "C"
