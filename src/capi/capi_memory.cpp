// C API: device and pinned host memory, copies and fills, memory strategies and statistics.
#include <cstring>

#include "capi/capi_common.hpp"
#include "core/memory.hpp"
#include "graph/capture.hpp"

using namespace rt;

extern "C" {

RT_API rtError_t rtMalloc(void** ptr, size_t size) {
    return capi_call("rtMalloc", [&] {
        require_out(ptr, "ptr");
        graph::check_unsafe("rtMalloc");
        *ptr = allocate_device(runtime().current_device(), size, nullptr, "rtMalloc");
    });
}

RT_API rtError_t rtFree(void* ptr) {
    return capi_call("rtFree", [&] {
        graph::check_unsafe("rtFree");
        free_device(ptr, nullptr, "rtFree");
    });
}

RT_API rtError_t rtMallocAsync(void** ptr, size_t size, rtStream_t stream) {
    return capi_call("rtMallocAsync", [&] {
        require_out(ptr, "ptr");
        auto s = runtime().stream(stream);
        *ptr = allocate_device(s->device(), size, s.get(), "rtMallocAsync");
    });
}

RT_API rtError_t rtFreeAsync(void* ptr, rtStream_t stream) {
    return capi_call("rtFreeAsync", [&] {
        auto s = runtime().stream(stream);
        free_device(ptr, s.get(), "rtFreeAsync");
    });
}

RT_API rtError_t rtMallocHost(void** ptr, size_t size) {
    return capi_call("rtMallocHost", [&] {
        require_out(ptr, "ptr");
        *ptr = allocate_pinned_host(runtime().current_device(), size);
    });
}

RT_API rtError_t rtFreeHost(void* ptr) {
    return capi_call("rtFreeHost", [&] { free_pinned_host(ptr); });
}

RT_API rtError_t rtHostRegister(void* ptr, size_t size, unsigned int flags) {
    return capi_call("rtHostRegister", [&] {
        if (flags != RT_HOST_REGISTER_DEFAULT)
            fail(RT_ERROR_INVALID_VALUE, "flags 0x%x has unknown bits (expected RT_HOST_REGISTER_DEFAULT)", flags);
        register_host(runtime().current_device(), ptr, size);
    });
}

RT_API rtError_t rtHostUnregister(void* ptr) {
    return capi_call("rtHostUnregister", [&] { unregister_host(ptr); });
}

RT_API rtError_t rtHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned int flags) {
    return capi_call("rtHostGetDevicePointer", [&] {
        require_out(device_ptr, "device_ptr");
        if (flags != 0) fail(RT_ERROR_INVALID_VALUE, "flags 0x%x must be 0", flags);
        *device_ptr = mapped_device_pointer(host_ptr);
    });
}

RT_API rtError_t rtMemcpy(void* dst, const void* src, size_t count, rtMemcpyKind kind) {
    return capi_call("rtMemcpy", [&] {
        refuse_wait_in_queue_context("rtMemcpy");
        graph::check_unsafe("rtMemcpy");
        Stream& s = *runtime().current_device().default_stream();
        enqueue_copy(s, dst, src, count, kind_value(kind), "rtMemcpy");
        s.synchronize();
    });
}

RT_API rtError_t rtMemcpyAsync(void* dst, const void* src, size_t count, rtMemcpyKind kind, rtStream_t stream) {
    return capi_call("rtMemcpyAsync", [&] {
        enqueue_copy(*runtime().stream(stream), dst, src, count, kind_value(kind), "rtMemcpyAsync");
    });
}

RT_API rtError_t rtMemset(void* ptr, int value, size_t count) {
    return capi_call("rtMemset", [&] {
        refuse_wait_in_queue_context("rtMemset");
        graph::check_unsafe("rtMemset");
        Stream& s = *runtime().current_device().default_stream();
        enqueue_fill(s, ptr, value, count, "rtMemset");
        s.synchronize();
    });
}

RT_API rtError_t rtMemsetAsync(void* ptr, int value, size_t count, rtStream_t stream) {
    return capi_call("rtMemsetAsync", [&] { enqueue_fill(*runtime().stream(stream), ptr, value, count, "rtMemsetAsync"); });
}

RT_API rtError_t rtEnablePoolAllocator(size_t pool_size, size_t block_size, unsigned int flags) {
    return capi_call("rtEnablePoolAllocator",
                     [&] { runtime().current_device().memory().enable_pool(pool_size, block_size, flags); });
}

RT_API rtError_t rtEnableMemoryReuse(int enable) {
    return capi_call("rtEnableMemoryReuse", [&] { runtime().current_device().memory().set_reuse(enable != 0); });
}

RT_API rtError_t rtEnableZeroCopy(int enable) {
    return capi_call("rtEnableZeroCopy", [&] {
        CoreDevice& d = runtime().current_device();
        if (enable && !d.info().host_addressable)
            fail(RT_ERROR_NOT_SUPPORTED, "%s cannot address host memory in place", d.label().c_str());
        d.memory().set_zero_copy(enable != 0);
    });
}

RT_API rtError_t rtMemEmptyCache(void) {
    return capi_call("rtMemEmptyCache", [&] { runtime().current_device().memory().empty_cache(); });
}

RT_API rtError_t rtMemGetStats(rtMemStats* stats) {
    return capi_call("rtMemGetStats", [&] {
        require_out(stats, "stats");
        *stats = runtime().current_device().memory().stats();
    });
}

RT_API rtError_t rtMemResetPeakStats(void) {
    return capi_call("rtMemResetPeakStats", [&] { runtime().current_device().memory().reset_peaks(); });
}

}  // extern "C"
