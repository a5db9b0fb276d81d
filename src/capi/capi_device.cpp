// C API: initialisation, device enumeration and selection, device-wide synchronisation and memory info.
#include <cstring>

#include "capi/capi_common.hpp"
#include "graph/capture.hpp"

using namespace rt;

namespace {
void copy_string(char* dst, size_t cap, const std::string& src) {
    size_t n = std::min(cap - 1, src.size());
    std::memcpy(dst, src.data(), n);
    dst[n] = '\0';
}
}  // namespace

// The version the library was built as (CMake's project version) is the header's: one number, two places.
#if defined(RUNTIME_LIBRARY_VERSION_MAJOR)
static_assert(RUNTIME_LIBRARY_VERSION_MAJOR == RUNTIME_VERSION_MAJOR &&
                  RUNTIME_LIBRARY_VERSION_MINOR == RUNTIME_VERSION_MINOR &&
                  RUNTIME_LIBRARY_VERSION_PATCH == RUNTIME_VERSION_PATCH,
              "project(VERSION) in CMakeLists.txt and RUNTIME_VERSION_* in runtime.h differ");
#endif

extern "C" {

RT_API rtError_t rtGetVersion(int* version) {
    return capi_call("rtGetVersion", [&] {
        require_out(version, "version");
        *version = RUNTIME_VERSION;  // as this library was compiled: the loaded one's, whatever the caller's header
    });
}

RT_API rtError_t rtInit(const char* options) {
    return capi_call("rtInit", [&] { init(options); });
}

RT_API rtError_t rtFinalize(void) {
    return capi_call("rtFinalize", [&] { finalize(); });
}

RT_API rtError_t rtGetDeviceCount(int* count) {
    return capi_call("rtGetDeviceCount", [&] {
        require_out(count, "count");
        *count = runtime().device_count();
    });
}

RT_API rtError_t rtGetDeviceByName(int* device, const char* name) {
    return capi_call("rtGetDeviceByName", [&] {
        require_out(device, "device");
        if (!name) fail(RT_ERROR_INVALID_VALUE, "name is NULL (expected a device name such as \"cpu:0\" or \"cuda:0\")");
        *device = runtime().find_device(name);
    });
}

RT_API rtError_t rtSetDevice(int device) {
    return capi_call("rtSetDevice", [&] {
        runtime().device(device);  // validates
        current_device_index() = device;
    });
}

RT_API rtError_t rtGetDevice(int* device) {
    return capi_call("rtGetDevice", [&] {
        require_out(device, "device");
        *device = runtime().current_device().index();
    });
}

RT_API rtError_t rtGetDeviceProperties(rtDeviceProp* prop, int device) {
    return capi_call("rtGetDeviceProperties", [&] {
        require_out(prop, "prop");
        const CoreDevice& d = runtime().device(device);
        const backend::DeviceInfo& info = d.info();
        rtDeviceProp p{};
        copy_string(p.name, sizeof p.name, info.name);
        copy_string(p.backend, sizeof p.backend, info.backend);
        p.total_memory = info.total_memory;
        p.compute_units = info.compute_units;
        p.device_index = d.index();
        p.backend_ordinal = info.backend_ordinal;
        p.max_threads_per_block = info.max_threads_per_block;
        for (int i = 0; i < 3; ++i) {
            p.max_grid_size[i] = info.max_grid_size[i];
            p.max_block_size[i] = info.max_block_size[i];
        }
        p.compute_capability_major = info.compute_capability_major;
        p.compute_capability_minor = info.compute_capability_minor;
        p.unified_addressing = info.host_addressable ? 1 : 0;
        p.local_memory_per_group = info.max_shared_bytes;
        p.max_local_memory_per_group = info.max_shared_bytes_optin ? info.max_shared_bytes_optin : info.max_shared_bytes;
        static_assert(sizeof p.uuid == sizeof info.uuid);
        std::memcpy(p.uuid, info.uuid, sizeof p.uuid);
        p.subgroup_size = info.subgroup_size;
        p.clock_rate_khz = info.clock_rate_khz;
        p.memory_bus_width = info.memory_bus_width;
        p.l2_cache_bytes = info.l2_cache_bytes;
        p.concurrent_kernels = info.concurrent_kernels;
        p.managed_memory = info.managed_memory;
        *prop = p;
    });
}

RT_API rtError_t rtDeviceSynchronize(void) {
    return capi_call("rtDeviceSynchronize", [&] {
        refuse_wait_in_queue_context("rtDeviceSynchronize");
        Runtime& r = runtime();
        graph::check_device_synchronize(r.current_device());
        auto streams = r.current_device().streams();
        for (auto& s : streams) s->wait_idle();
        r.timeline().run_due();
        r.current_device().memory().after_synchronize();  // memory pools' release thresholds
        // Every failed stream is reported (and cleared): the code of the first, the messages of all.
        rtError_t first = RT_SUCCESS;
        std::string all;
        size_t failed = 0;
        for (auto& s : streams) {
            std::string message;
            rtError_t code = s->errors().take(&message);
            if (code == RT_SUCCESS) continue;
            if (first == RT_SUCCESS) first = code;
            std::string origin;
            all += format("%s[%s] %s", failed ? "; " : "", s->errors().origin().c_str(), message.c_str());
            ++failed;
        }
        if (failed) throw Error(first, format("%zu stream(s) failed: %s", failed, all.c_str()));
    });
}

RT_API rtError_t rtMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    return capi_call("rtMemGetInfo", [&] {
        require_out(free_bytes, "free_bytes");
        require_out(total_bytes, "total_bytes");
        runtime().current_device().impl().mem_info_impl(free_bytes, total_bytes);
    });
}

}  // extern "C"
