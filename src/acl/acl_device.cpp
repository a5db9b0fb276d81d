// acl_device.cpp — devices and contexts: aclrtSetDevice's reference counts and default contexts, explicit contexts,
// the calling thread's current context (and with it the runtime's current device), device-wide calls.
#include <map>
#include <new>
#include <mutex>
#include <unordered_set>

#include "acl/acl.h"
#include "acl_internal.hpp"

namespace acl {

std::atomic<uint64_t> g_context_generation{1};
thread_local Context* t_context = nullptr;
thread_local uint64_t t_context_generation = 0;

namespace {

struct DeviceState {
    int references = 0;         // aclrtSetDevice calls not yet matched by aclrtResetDevice
    int explicit_contexts = 0;  // live contexts of aclrtCreateContext on the device
    Context* default_context = nullptr;
};

std::mutex g_mutex;  // guards g_devices and g_contexts
std::map<int, DeviceState> g_devices;
std::unordered_set<Context*> g_contexts;

void make_current(Context* c) {
    t_context = c;
    t_context_generation = g_context_generation.load(std::memory_order_acquire);
}

/// A device index AscendCL may name: 0 .. count-1.
aclError check_device(int32_t device, const char* api) {
    int count = 0;
    if (rtError_t e = rtGetDeviceCount(&count); e != RT_SUCCESS) return fail_rt(e, api);
    if (device < 0 || device >= count) {
        return fail(ACL_ERROR_RT_INVALID_DEVICEID, api, "device %d does not exist (%d device(s): 0..%d)", device,
                    count, count - 1);
    }
    return ACL_SUCCESS;
}

/// Destroys a context (called with g_mutex held); threads that had it current find out through the generation.
void destroy_context_locked(Context* c) {
    g_contexts.erase(c);
    c->magic = 0;
    delete c;
    g_context_generation.fetch_add(1, std::memory_order_acq_rel);
    if (t_context == c) t_context = nullptr;
}

/// Releases the runtime's resources of `device`: its queued work completes, then its streams, events and memory go.
/// The calling thread keeps its current device.
aclError reset_runtime_device(int device, const char* api) {
    int previous = 0;
    bool restore = rtGetDevice(&previous) == RT_SUCCESS && previous != device;
    if (rtError_t e = rtSetDevice(device); e != RT_SUCCESS) return fail_rt(e, api);
    rtError_t e = rtDeviceReset();
    if (restore) rtSetDevice(previous);
    if (e != RT_SUCCESS) return fail_rt(e, api);
    return ACL_SUCCESS;
}

/// Validates `context` as a live context (g_mutex held).
aclError check_context_locked(aclrtContext context, const char* api) {
    if (context == nullptr) return fail(ACL_ERROR_INVALID_PARAM, api, "context is NULL");
    if (g_contexts.count(static_cast<Context*>(context)) == 0) {
        return fail(ACL_ERROR_RT_INVALID_HANDLE, api, "%p is not a live context (destroyed, reset with its device, "
                    "or never created)", context);
    }
    return ACL_SUCCESS;
}

}  // namespace

Context* revalidate_current_context() noexcept {
    std::lock_guard lock(g_mutex);
    Context* c = t_context;
    if (c != nullptr && g_contexts.count(c) != 0) {
        t_context_generation = g_context_generation.load(std::memory_order_acquire);
        return c;
    }
    t_context = nullptr;
    return nullptr;
}

aclError no_context(const char* api) noexcept {
    return fail(ACL_ERROR_RT_CONTEXT_NULL, api, "the calling thread has no current context: call aclrtSetDevice or "
                "aclrtSetCurrentContext first");
}

void reset_contexts() noexcept {
    std::lock_guard lock(g_mutex);
    for (Context* c : g_contexts) {
        c->magic = 0;
        delete c;
    }
    g_contexts.clear();
    g_devices.clear();
    g_context_generation.fetch_add(1, std::memory_order_acq_rel);
    t_context = nullptr;
}

}  // namespace acl

using acl::Context;

extern "C" {

aclError aclrtSetDevice(int32_t deviceId) {
    ACL_REQUIRE_INIT("aclrtSetDevice");
    if (aclError e = acl::check_device(deviceId, "aclrtSetDevice"); e != ACL_SUCCESS) return e;
    if (rtError_t e = rtSetDevice(deviceId); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtSetDevice");
    std::lock_guard lock(acl::g_mutex);
    acl::DeviceState& d = acl::g_devices[deviceId];
    if (d.default_context == nullptr) {
        auto* c = new (std::nothrow) Context;
        if (c == nullptr) return acl::fail(ACL_ERROR_BAD_ALLOC, "aclrtSetDevice", "out of host memory for a context");
        c->device = deviceId;
        c->is_default = true;
        acl::g_contexts.insert(c);
        d.default_context = c;
    }
    ++d.references;
    acl::make_current(d.default_context);
    return ACL_SUCCESS;
}

static aclError reset_device(int32_t deviceId, bool force, const char* api) {
    ACL_REQUIRE_INIT(api);
    if (aclError e = acl::check_device(deviceId, api); e != ACL_SUCCESS) return e;
    bool release = false;
    {
        std::lock_guard lock(acl::g_mutex);
        auto it = acl::g_devices.find(deviceId);
        const bool in_use = it != acl::g_devices.end() &&
                            (it->second.references > 0 || (force && it->second.explicit_contexts > 0));
        if (!in_use) {
            return acl::fail(ACL_ERROR_INVALID_PARAM, api, "device %d is not in use (aclrtSetDevice was not called "
                             "for it, or it was reset already)", deviceId);
        }
        acl::DeviceState& d = it->second;
        if (d.references > 0) d.references = force ? 0 : d.references - 1;
        if (d.references == 0 && d.default_context != nullptr) {
            acl::destroy_context_locked(d.default_context);
            d.default_context = nullptr;
        }
        release = d.references == 0 && (force || d.explicit_contexts == 0);
        if (release) acl::g_devices.erase(it);
    }
    // The runtime's reset waits for queued work: outside the lock, so other threads' context calls go on.
    return release ? acl::reset_runtime_device(deviceId, api) : ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId) { return reset_device(deviceId, false, "aclrtResetDevice"); }

aclError aclrtResetDeviceForce(int32_t deviceId) { return reset_device(deviceId, true, "aclrtResetDeviceForce"); }

aclError aclrtGetDevice(int32_t* deviceId) {
    ACL_REQUIRE_INIT("aclrtGetDevice");
    ACL_REQUIRE_NOT_NULL("aclrtGetDevice", deviceId);
    Context* c = acl::current_context();
    if (c == nullptr) return acl::no_context("aclrtGetDevice");
    *deviceId = c->device;
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceCount(uint32_t* count) {
    ACL_REQUIRE_INIT("aclrtGetDeviceCount");
    ACL_REQUIRE_NOT_NULL("aclrtGetDeviceCount", count);
    int n = 0;
    if (rtError_t e = rtGetDeviceCount(&n); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtGetDeviceCount");
    *count = static_cast<uint32_t>(n);
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void) {
    ACL_REQUIRE_INIT("aclrtSynchronizeDevice");
    ACL_REQUIRE_CONTEXT("aclrtSynchronizeDevice");
    if (rtError_t e = rtDeviceSynchronize(); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtSynchronizeDevice");
    return ACL_SUCCESS;
}

aclError aclrtDeviceCanAccessPeer(int32_t* canAccessPeer, int32_t deviceId, int32_t peerDeviceId) {
    ACL_REQUIRE_INIT("aclrtDeviceCanAccessPeer");
    ACL_REQUIRE_NOT_NULL("aclrtDeviceCanAccessPeer", canAccessPeer);
    if (aclError e = acl::check_device(deviceId, "aclrtDeviceCanAccessPeer"); e != ACL_SUCCESS) return e;
    if (aclError e = acl::check_device(peerDeviceId, "aclrtDeviceCanAccessPeer"); e != ACL_SUCCESS) return e;
    int can = 0;
    if (rtError_t e = rtDeviceCanAccessPeer(&can, deviceId, peerDeviceId); e != RT_SUCCESS)
        return acl::fail_rt(e, "aclrtDeviceCanAccessPeer");
    *canAccessPeer = can;
    return ACL_SUCCESS;
}

aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags) {
    ACL_REQUIRE_INIT("aclrtDeviceEnablePeerAccess");
    ACL_REQUIRE_CONTEXT("aclrtDeviceEnablePeerAccess");
    if (flags != 0)
        return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtDeviceEnablePeerAccess", "flags must be 0, not %u", flags);
    if (aclError e = acl::check_device(peerDeviceId, "aclrtDeviceEnablePeerAccess"); e != ACL_SUCCESS) return e;
    if (rtError_t e = rtDeviceEnablePeerAccess(peerDeviceId, 0); e != RT_SUCCESS)
        return acl::fail_rt(e, "aclrtDeviceEnablePeerAccess");
    return ACL_SUCCESS;
}

aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId) {
    ACL_REQUIRE_INIT("aclrtDeviceDisablePeerAccess");
    return acl::fail(ACL_ERROR_FEATURE_UNSUPPORTED, "aclrtDeviceDisablePeerAccess", "peer access to device %d cannot "
                     "be disabled here: once enabled it stays enabled until the device is reset", peerDeviceId);
}

aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId) {
    ACL_REQUIRE_INIT("aclrtCreateContext");
    ACL_REQUIRE_NOT_NULL("aclrtCreateContext", context);
    if (aclError e = acl::check_device(deviceId, "aclrtCreateContext"); e != ACL_SUCCESS) return e;
    if (rtError_t e = rtSetDevice(deviceId); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtCreateContext");
    auto* c = new (std::nothrow) Context;
    if (c == nullptr) return acl::fail(ACL_ERROR_BAD_ALLOC, "aclrtCreateContext", "out of host memory for a context");
    c->device = deviceId;
    std::lock_guard lock(acl::g_mutex);
    acl::g_contexts.insert(c);
    ++acl::g_devices[deviceId].explicit_contexts;
    acl::make_current(c);
    *context = c;
    return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext context) {
    ACL_REQUIRE_INIT("aclrtDestroyContext");
    int device = 0;
    bool release = false;
    {
        std::lock_guard lock(acl::g_mutex);
        if (aclError e = acl::check_context_locked(context, "aclrtDestroyContext"); e != ACL_SUCCESS) return e;
        auto* c = static_cast<Context*>(context);
        if (c->is_default) {
            return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyContext", "%p is the default context of device "
                             "%d: aclrtResetDevice releases it", context, c->device);
        }
        device = c->device;
        acl::destroy_context_locked(c);
        auto it = acl::g_devices.find(device);
        if (it != acl::g_devices.end()) {
            --it->second.explicit_contexts;
            release = it->second.references == 0 && it->second.explicit_contexts == 0;
            if (release) acl::g_devices.erase(it);
        }
    }
    return release ? acl::reset_runtime_device(device, "aclrtDestroyContext") : ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
    ACL_REQUIRE_INIT("aclrtSetCurrentContext");
    std::lock_guard lock(acl::g_mutex);
    if (aclError e = acl::check_context_locked(context, "aclrtSetCurrentContext"); e != ACL_SUCCESS) return e;
    auto* c = static_cast<Context*>(context);
    if (rtError_t e = rtSetDevice(c->device); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtSetCurrentContext");
    acl::make_current(c);
    return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext* context) {
    ACL_REQUIRE_INIT("aclrtGetCurrentContext");
    ACL_REQUIRE_NOT_NULL("aclrtGetCurrentContext", context);
    Context* c = acl::current_context();
    if (c == nullptr) return acl::no_context("aclrtGetCurrentContext");
    *context = c;
    return ACL_SUCCESS;
}

}  // extern "C"
