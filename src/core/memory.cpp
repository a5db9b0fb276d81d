// Core memory operations: every pointer is resolved through the registry before a backend sees it.
#include "core/memory.hpp"

#include "core/runtime.hpp"

namespace rt {

namespace {

const char* kind_name(rtMemcpyKind kind) {
    switch (kind) {
        case RT_MEMCPY_HOST_TO_HOST: return "RT_MEMCPY_HOST_TO_HOST";
        case RT_MEMCPY_HOST_TO_DEVICE: return "RT_MEMCPY_HOST_TO_DEVICE";
        case RT_MEMCPY_DEVICE_TO_HOST: return "RT_MEMCPY_DEVICE_TO_HOST";
        case RT_MEMCPY_DEVICE_TO_DEVICE: return "RT_MEMCPY_DEVICE_TO_DEVICE";
        case RT_MEMCPY_DEFAULT: return "RT_MEMCPY_DEFAULT";
    }
    return "?";
}

/// What the registry knows of a pointer, in words.
std::string describe(const void* ptr, const PointerInfo& info) {
    Runtime& r = runtime();
    if (info.allocation) {
        const Allocation& a = *info.allocation;
        return format("%s memory of %s (allocation %p of %zu bytes)",
                      a.kind == MemoryKind::device ? "device" : "pinned host", a.device->label().c_str(),
                      reinterpret_cast<void*>(a.base), a.size);
    }
    if (r.registry.recently_freed(ptr)) return "freed memory (it was released by rtFree/rtFreeHost)";
    return "host memory not allocated by the runtime";
}

/// Waits for all queued work of every device: memory about to be freed may be used by any of it.
void wait_all_devices_idle() {
    Runtime& r = runtime();
    for (int i = 0; i < r.device_count(); ++i)
        for (auto& s : r.streams_of(r.device(i))) s->wait_idle();
}

void refuse_free(const char* api, void* ptr, const PointerInfo& info, const char* expected) {
    if (info.allocation && info.allocation->base != reinterpret_cast<uintptr_t>(ptr))
        fail(RT_ERROR_INVALID_VALUE, "%s(%p): the pointer is %zu bytes inside %s, not its start", api, ptr,
             reinterpret_cast<uintptr_t>(ptr) - info.allocation->base, describe(ptr, info).c_str());
    if (runtime().registry.recently_freed(ptr))
        fail(RT_ERROR_INVALID_VALUE, "%s(%p): double free (the pointer was already freed)", api, ptr);
    fail(RT_ERROR_INVALID_VALUE, "%s(%p): the pointer is %s (expected %s)", api, ptr, describe(ptr, info).c_str(),
         expected);
}

void* allocate(CoreDevice& device, size_t bytes, MemoryKind kind, const char* api) {
    if (bytes == 0) return nullptr;
    void* p = kind == MemoryKind::device ? device.impl().allocate_impl(bytes) : device.impl().allocate_host_impl(bytes);
    if (!p) {
        size_t free_bytes = 0, total = 0;
        device.impl().mem_info_impl(&free_bytes, &total);
        if (kind == MemoryKind::device)
            fail(RT_ERROR_OUT_OF_MEMORY, "%s: out of memory on %s: requested %zu bytes, %zu bytes free of %zu", api,
                 device.label().c_str(), bytes, free_bytes, total);
        fail(RT_ERROR_OUT_OF_MEMORY, "%s: out of host memory: requested %zu bytes of pinned host memory", api, bytes);
    }
    runtime().registry.insert({reinterpret_cast<uintptr_t>(p), bytes, kind, &device});
    return p;
}

void release(void* ptr, MemoryKind kind, const char* api, const char* expected) {
    if (!ptr) return;
    Runtime& r = runtime();
    std::optional<Allocation> a = r.registry.erase(reinterpret_cast<uintptr_t>(ptr), kind);
    if (!a) refuse_free(api, ptr, r.registry.lookup(ptr), expected);
    wait_all_devices_idle();
    if (kind == MemoryKind::device) a->device->impl().free_impl(ptr, a->size);
    else a->device->impl().free_host_impl(ptr, a->size);
}

/// One operand of a copy: whether it is device memory, and that `bytes` fit from it.
bool check_operand(const char* api, const char* role, const void* ptr, size_t bytes, PointerInfo* info_out) {
    if (!ptr) fail(RT_ERROR_INVALID_VALUE, "%s: %s is NULL", api, role);
    PointerInfo info = runtime().registry.lookup(ptr);
    if (info.allocation && bytes > info.available)
        fail(RT_ERROR_INVALID_VALUE,
             "%s: %s %p: %zu bytes asked but only %zu bytes available from that pointer in %s", api, role, ptr,
             bytes, info.available, describe(ptr, info).c_str());
    *info_out = info;
    return info.allocation && info.allocation->kind == MemoryKind::device;
}

}  // namespace

void* allocate_device(CoreDevice& device, size_t bytes) { return allocate(device, bytes, MemoryKind::device, "rtMalloc"); }
void* allocate_pinned_host(CoreDevice& device, size_t bytes) {
    return allocate(device, bytes, MemoryKind::pinned_host, "rtMallocHost");
}
void free_device(void* ptr) { release(ptr, MemoryKind::device, "rtFree", "a pointer returned by rtMalloc"); }
void free_pinned_host(void* ptr) {
    release(ptr, MemoryKind::pinned_host, "rtFreeHost", "a pointer returned by rtMallocHost");
}

void enqueue_copy(Stream& stream, void* dst, const void* src, size_t bytes, rtMemcpyKind kind, const char* api) {
    if (kind < RT_MEMCPY_HOST_TO_HOST || kind > RT_MEMCPY_DEFAULT)
        fail(RT_ERROR_INVALID_VALUE, "%s: kind %d is not an rtMemcpyKind (expected 0..4)", api, static_cast<int>(kind));
    if (bytes == 0) return;
    PointerInfo di, si;
    bool dst_dev = check_operand(api, "destination", dst, bytes, &di);
    bool src_dev = check_operand(api, "source", src, bytes, &si);
    if (kind == RT_MEMCPY_DEFAULT)
        kind = dst_dev ? (src_dev ? RT_MEMCPY_DEVICE_TO_DEVICE : RT_MEMCPY_HOST_TO_DEVICE)
                       : (src_dev ? RT_MEMCPY_DEVICE_TO_HOST : RT_MEMCPY_HOST_TO_HOST);
    bool want_dst_dev = kind == RT_MEMCPY_HOST_TO_DEVICE || kind == RT_MEMCPY_DEVICE_TO_DEVICE;
    bool want_src_dev = kind == RT_MEMCPY_DEVICE_TO_HOST || kind == RT_MEMCPY_DEVICE_TO_DEVICE;
    if (dst_dev != want_dst_dev)
        fail(RT_ERROR_INVALID_VALUE, "%s: %s needs %s destination, but destination %p is %s", api, kind_name(kind),
             want_dst_dev ? "a device" : "a host", dst, describe(dst, di).c_str());
    if (src_dev != want_src_dev)
        fail(RT_ERROR_INVALID_VALUE, "%s: %s needs %s source, but source %p is %s", api, kind_name(kind),
             want_src_dev ? "a device" : "a host", src, describe(src, si).c_str());
    stream.next_op();
    stream.queue().copy_impl(dst, src, bytes, static_cast<backend::CopyKind>(kind));
}

void enqueue_fill(Stream& stream, void* dst, int value, size_t bytes, const char* api) {
    if (bytes == 0) return;
    PointerInfo info;
    if (!check_operand(api, "destination", dst, bytes, &info))
        fail(RT_ERROR_INVALID_VALUE, "%s: destination %p is %s (expected device memory from rtMalloc)", api, dst,
             describe(dst, info).c_str());
    stream.next_op();
    stream.queue().fill_impl(dst, static_cast<uint8_t>(value), bytes);
}

}  // namespace rt
