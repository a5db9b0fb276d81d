// C API: device and pinned host memory, copies and fills.
#include "capi/capi_common.hpp"
#include "core/memory.hpp"

using namespace rt;

extern "C" {

RT_API rtError_t rtMalloc(void** ptr, size_t size) {
    return capi_call("rtMalloc", [&] {
        require_out(ptr, "ptr");
        *ptr = allocate_device(runtime().current_device(), size);
    });
}

RT_API rtError_t rtFree(void* ptr) {
    return capi_call("rtFree", [&] { free_device(ptr); });
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

RT_API rtError_t rtMemcpy(void* dst, const void* src, size_t count, rtMemcpyKind kind) {
    return capi_call("rtMemcpy", [&] {
        Stream& s = *runtime().current_device().default_stream();
        enqueue_copy(s, dst, src, count, kind, "rtMemcpy");
        s.synchronize();
    });
}

RT_API rtError_t rtMemcpyAsync(void* dst, const void* src, size_t count, rtMemcpyKind kind, rtStream_t stream) {
    return capi_call("rtMemcpyAsync", [&] { enqueue_copy(*runtime().stream(stream), dst, src, count, kind, "rtMemcpyAsync"); });
}

RT_API rtError_t rtMemset(void* ptr, int value, size_t count) {
    return capi_call("rtMemset", [&] {
        Stream& s = *runtime().current_device().default_stream();
        enqueue_fill(s, ptr, value, count, "rtMemset");
        s.synchronize();
    });
}

RT_API rtError_t rtMemsetAsync(void* ptr, int value, size_t count, rtStream_t stream) {
    return capi_call("rtMemsetAsync", [&] { enqueue_fill(*runtime().stream(stream), ptr, value, count, "rtMemsetAsync"); });
}

}  // extern "C"
