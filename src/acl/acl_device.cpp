// acl_device.cpp — devices and contexts: aclrtSetDevice's reference counts and default contexts, explicit contexts,
// the calling thread's current context (and with it the runtime's current device), device-wide calls.
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <unordered_map>

#include "acl/acl.h"
#include "acl_internal.hpp"

namespace acl {

std::atomic<uint64_t> g_context_generation{1};
thread_local Context* t_context = nullptr;
thread_local uint64_t t_context_id = 0;
thread_local uint64_t t_context_generation = 0;

namespace {

struct DeviceState {
    int references = 0;                 // aclrtSetDevice calls not yet matched by aclrtResetDevice
    std::set<uint64_t> explicit_contexts;  // live contexts of aclrtCreateContext on the device
    uint64_t default_context = 0;       // id, 0: none
    bool resetting = false;             // the runtime's reset of the device is under way (outside the lock)
};

std::mutex g_mutex;  // guards g_devices, g_contexts and g_next_id
std::condition_variable g_reset_done;  // a device's runtime reset finished (its entry is gone)
std::map<int, DeviceState> g_devices;
std::unordered_map<uint64_t, std::unique_ptr<Context>> g_contexts;
// Context ids (the handles): never reused, so that a destroyed context's handle cannot name a new one. Start high so
// that a small integer passed by mistake is not a context.
uint64_t g_next_id = 0x10000;

inline aclrtContext handle_of(const Context* c) { return reinterpret_cast<aclrtContext>(static_cast<uintptr_t>(c->id)); }

void make_current(Context* c) {
    t_context = c;
    t_context_id = c->id;
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

/// A new context of `device` (g_mutex held); nullptr when out of memory.
Context* make_context_locked(int device, bool is_default) {
    auto c = std::unique_ptr<Context>(new (std::nothrow) Context);
    if (!c) return nullptr;
    c->id = g_next_id++;
    c->device = device;
    c->is_default = is_default;
    Context* raw = c.get();
    try {
        g_contexts.emplace(raw->id, std::move(c));
    } catch (...) {
        return nullptr;
    }
    return raw;
}

/// Destroys a context (g_mutex held); threads that had it current find out through the generation.
void destroy_context_locked(uint64_t id) {
    g_contexts.erase(id);
    g_context_generation.fetch_add(1, std::memory_order_acq_rel);
    if (t_context_id == id) {
        t_context = nullptr;
        t_context_id = 0;
    }
}

/// The state of `device` once no runtime reset of it is under way (waits for one, releasing g_mutex meanwhile), made
/// if missing.
DeviceState& settled_device(std::unique_lock<std::mutex>& lock, int device) {
    g_reset_done.wait(lock, [&] {
        auto it = g_devices.find(device);
        return it == g_devices.end() || !it->second.resetting;
    });
    return g_devices[device];
}

/// Releases the runtime's resources of `device` (its queued work completes, then its streams, events and memory go),
/// outside g_mutex, then forgets the device's entry, which was marked resetting under the lock. The calling thread
/// keeps its current device.
aclError reset_runtime_device(int device, const char* api) {
    aclError code = ACL_SUCCESS;
    int previous = 0;
    const bool restore = rtGetDevice(&previous) == RT_SUCCESS && previous != device;
    if (rtError_t e = rtSetDevice(device); e != RT_SUCCESS) {
        code = fail_rt(e, api);
    } else {
        rtError_t r = rtDeviceReset();
        if (restore) rtSetDevice(previous);
        if (r != RT_SUCCESS) code = fail_rt(r, api);
    }
    {
        std::lock_guard lock(g_mutex);
        g_devices.erase(device);
    }
    g_reset_done.notify_all();
    return code;
}

/// The live context behind a handle (g_mutex held) in *out; the failure, recorded, otherwise.
aclError live_context_locked(aclrtContext context, const char* api, Context** out) {
    if (context == nullptr) return fail(ACL_ERROR_INVALID_PARAM, api, "context is NULL");
    auto it = g_contexts.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(context)));
    if (it == g_contexts.end()) {
        return fail(ACL_ERROR_RT_INVALID_HANDLE, api, "%p is not a live context (destroyed, reset with its device, "
                    "or never created)", context);
    }
    *out = it->second.get();
    return ACL_SUCCESS;
}

}  // namespace

Context* revalidate_current_context() noexcept {
    std::lock_guard lock(g_mutex);
    auto it = g_contexts.find(t_context_id);
    if (t_context != nullptr && it != g_contexts.end()) {
        t_context = it->second.get();
        t_context_generation = g_context_generation.load(std::memory_order_acquire);
        return t_context;
    }
    t_context = nullptr;
    t_context_id = 0;
    return nullptr;
}

aclError no_context(const char* api) noexcept {
    return fail(ACL_ERROR_RT_CONTEXT_NULL, api, "the calling thread has no current context: call aclrtSetDevice or "
                "aclrtSetCurrentContext first");
}

aclError require_context(const char* api) noexcept {
    return current_context() != nullptr ? ACL_SUCCESS : no_context(api);
}

void reset_contexts() noexcept {
    {
        std::lock_guard lock(g_mutex);
        g_contexts.clear();
        g_devices.clear();
        g_context_generation.fetch_add(1, std::memory_order_acq_rel);
        t_context = nullptr;
        t_context_id = 0;
    }
    g_reset_done.notify_all();
}

}  // namespace acl

using acl::Context;

extern "C" {

aclError aclrtSetDevice(int32_t deviceId) {
    ACL_REQUIRE_INIT("aclrtSetDevice");
    if (aclError e = acl::check_device(deviceId, "aclrtSetDevice"); e != ACL_SUCCESS) return e;
    if (rtError_t e = rtSetDevice(deviceId); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtSetDevice");
    std::unique_lock lock(acl::g_mutex);
    acl::DeviceState& d = acl::settled_device(lock, deviceId);
    Context* c = nullptr;
    if (d.default_context != 0) {
        c = acl::g_contexts.at(d.default_context).get();
    } else {
        c = acl::make_context_locked(deviceId, true);
        if (c == nullptr) return acl::fail(ACL_ERROR_BAD_ALLOC, "aclrtSetDevice", "out of host memory for a context");
        d.default_context = c->id;
    }
    ++d.references;
    acl::make_current(c);
    return ACL_SUCCESS;
}

static aclError reset_device(int32_t deviceId, bool force, const char* api) {
    ACL_REQUIRE_INIT(api);
    if (aclError e = acl::check_device(deviceId, api); e != ACL_SUCCESS) return e;
    {
        std::lock_guard lock(acl::g_mutex);
        auto it = acl::g_devices.find(deviceId);
        const bool in_use = it != acl::g_devices.end() && !it->second.resetting &&
                            (it->second.references > 0 || (force && !it->second.explicit_contexts.empty()));
        if (!in_use) {
            return acl::fail(ACL_ERROR_INVALID_PARAM, api, "device %d is not in use (aclrtSetDevice was not called "
                             "for it, or it was reset already)", deviceId);
        }
        acl::DeviceState& d = it->second;
        if (d.references > 0) d.references = force ? 0 : d.references - 1;
        if (d.references == 0 && d.default_context != 0) {
            acl::destroy_context_locked(d.default_context);
            d.default_context = 0;
        }
        if (force) {  // the device's explicit contexts go with it
            for (uint64_t id : d.explicit_contexts) acl::destroy_context_locked(id);
            d.explicit_contexts.clear();
        }
        if (d.references > 0 || !d.explicit_contexts.empty()) return ACL_SUCCESS;
        d.resetting = true;  // aclrtSetDevice and aclrtCreateContext of the device wait until the reset is done
    }
    // The runtime's reset waits for queued work: outside the lock, so other devices' context calls go on.
    return acl::reset_runtime_device(deviceId, api);
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
    std::unique_lock lock(acl::g_mutex);
    acl::DeviceState& d = acl::settled_device(lock, deviceId);
    Context* c = acl::make_context_locked(deviceId, false);
    if (c == nullptr) return acl::fail(ACL_ERROR_BAD_ALLOC, "aclrtCreateContext", "out of host memory for a context");
    try {
        d.explicit_contexts.insert(c->id);
    } catch (...) {
        acl::g_contexts.erase(c->id);
        return acl::fail(ACL_ERROR_BAD_ALLOC, "aclrtCreateContext", "out of host memory for a context");
    }
    acl::make_current(c);
    *context = acl::handle_of(c);
    return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext context) {
    ACL_REQUIRE_INIT("aclrtDestroyContext");
    int device = 0;
    {
        std::lock_guard lock(acl::g_mutex);
        Context* c = nullptr;
        if (aclError e = acl::live_context_locked(context, "aclrtDestroyContext", &c); e != ACL_SUCCESS) return e;
        if (c->is_default) {
            return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyContext", "%p is the default context of device "
                             "%d: aclrtResetDevice releases it", context, c->device);
        }
        device = c->device;
        const uint64_t id = c->id;
        acl::destroy_context_locked(id);
        acl::DeviceState& d = acl::g_devices[device];
        d.explicit_contexts.erase(id);
        if (d.references > 0 || !d.explicit_contexts.empty()) return ACL_SUCCESS;
        d.resetting = true;
    }
    return acl::reset_runtime_device(device, "aclrtDestroyContext");
}

aclError aclrtSetCurrentContext(aclrtContext context) {
    ACL_REQUIRE_INIT("aclrtSetCurrentContext");
    std::lock_guard lock(acl::g_mutex);
    Context* c = nullptr;
    if (aclError e = acl::live_context_locked(context, "aclrtSetCurrentContext", &c); e != ACL_SUCCESS) return e;
    if (rtError_t e = rtSetDevice(c->device); e != RT_SUCCESS) return acl::fail_rt(e, "aclrtSetCurrentContext");
    acl::make_current(c);
    return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext* context) {
    ACL_REQUIRE_INIT("aclrtGetCurrentContext");
    ACL_REQUIRE_NOT_NULL("aclrtGetCurrentContext", context);
    Context* c = acl::current_context();
    if (c == nullptr) return acl::no_context("aclrtGetCurrentContext");
    *context = acl::handle_of(c);
    return ACL_SUCCESS;
}

}  // extern "C"
