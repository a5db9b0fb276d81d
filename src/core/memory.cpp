// Core memory operations: every pointer is resolved through the registry before a backend sees it.
#include "core/memory.hpp"

#include <algorithm>
#include <cstring>

#include "core/checked_size.hpp"
#include "core/mem_pool.hpp"
#include "core/runtime.hpp"
#include "graph/capture.hpp"
#include "graph/graph.hpp"

namespace rt {

namespace {

const char* kind_name(int kind) {
    switch (kind) {
        case RT_MEMCPY_HOST_TO_HOST: return "RT_MEMCPY_HOST_TO_HOST";
        case RT_MEMCPY_HOST_TO_DEVICE: return "RT_MEMCPY_HOST_TO_DEVICE";
        case RT_MEMCPY_DEVICE_TO_HOST: return "RT_MEMCPY_DEVICE_TO_HOST";
        case RT_MEMCPY_DEVICE_TO_DEVICE: return "RT_MEMCPY_DEVICE_TO_DEVICE";
        case RT_MEMCPY_DEFAULT: return "RT_MEMCPY_DEFAULT";
    }
    return "?";
}

const char* kind_words(MemoryKind k) {
    switch (k) {
        case MemoryKind::device: return "device";
        case MemoryKind::pinned_host: return "pinned host";
        case MemoryKind::registered_host: return "registered host";
    }
    return "?";
}

/// What the registry knows of a pointer, in words.
std::string describe(const void* ptr, const PointerInfo& info) {
    if (info.allocation) {
        const Allocation& a = *info.allocation;
        if (a.module_global)
            return format("a module global of %s (rtModuleGetGlobal: %p, %zu bytes)", a.device->label().c_str(),
                          reinterpret_cast<void*>(a.base), a.size);
        if (a.ipc_opened)
            return format("memory of process %d opened on %s by rtIpcOpenMemHandle (%p, %zu bytes; "
                          "rtIpcCloseMemHandle unmaps it)", a.ipc_pid, a.device->label().c_str(),
                          reinterpret_cast<void*>(a.base), a.size);
        if (a.graph_arena)
            return format("the memory of an executable graph's allocation nodes on %s (its arena %p of %zu bytes, "
                          "freed by rtGraphExecDestroy)", a.device->label().c_str(), reinterpret_cast<void*>(a.base),
                          a.size);
        return format("%s memory of %s (allocation %p of %zu bytes)", kind_words(a.kind), a.device->label().c_str(),
                      reinterpret_cast<void*>(a.base), a.size);
    }
    if (runtime().registry.recently_freed(ptr)) return "freed memory (it was released by rtFree/rtFreeHost)";
    return "host memory not allocated by the runtime";
}

}  // namespace

std::string describe_pointer(const void* ptr) { return describe(ptr, runtime().registry.lookup(ptr)); }

namespace {

[[noreturn]] void refuse_release(const char* api, void* ptr, const char* expected) {
    PointerInfo info = runtime().registry.lookup(ptr);
    if (info.allocation && info.allocation->base != reinterpret_cast<uintptr_t>(ptr))
        fail(RT_ERROR_INVALID_VALUE, "%s(%p): the pointer is %zu bytes inside %s, not its start", api, ptr,
             reinterpret_cast<uintptr_t>(ptr) - info.allocation->base, describe(ptr, info).c_str());
    if (!info.allocation && runtime().registry.recently_freed(ptr))
        fail(RT_ERROR_INVALID_VALUE, "%s(%p): double free (the pointer was already freed)", api, ptr);
    fail(RT_ERROR_INVALID_VALUE, "%s(%p): the pointer is %s (expected %s)", api, ptr, describe(ptr, info).c_str(),
         expected);
}

/// How a copy may use an operand: as device memory, as host memory, or as either (host memory mapped
/// for the device by zero copy).
enum class Side { host, device, mapped };

/// A checked operand: where it lies, and how to say so.
struct Operand {
    Side side = Side::host;
    const CoreDevice* owner = nullptr;  // the device of the allocation holding it (null: host memory unknown to us)
    PointerInfo info;                   // the registry's view
    std::string extra_what;             // non-empty: memory described by an ExtraDeviceMemory
    std::string what(const void* p) const { return extra_what.empty() ? describe(p, info) : extra_what; }
};

Operand check_operand(const char* api, const char* role, const void* ptr, size_t bytes, const ExtraDeviceMemory* extra) {
    if (!ptr) fail(RT_ERROR_INVALID_VALUE, "%s: %s is NULL", api, role);
    Operand op;
    size_t available = 0;
    if (extra && extra->lookup(ptr, &op.owner, &available, &op.extra_what)) {
        op.side = Side::device;
    } else {
        op.info = runtime().registry.lookup(ptr);
        if (!op.info.allocation) {
            if (graph::is_provisional_address(ptr))
                fail(RT_ERROR_INVALID_VALUE, "%s: %s %p is the address of a graph's allocation node, which only "
                     "nodes of that graph may use", api, role, ptr);
            require_range(ptr, bytes, api, role);  // memory the registry cannot bound
            return op;
        }
        const Allocation& a = *op.info.allocation;
        available = op.info.available;
        op.owner = a.device;
        op.side = a.kind == MemoryKind::device ? Side::device
                  : a.device->memory().zero_copy() ? Side::mapped : Side::host;
    }
    if (bytes > available)
        fail(RT_ERROR_INVALID_VALUE,
             "%s: %s %p: %zu bytes asked but only %zu bytes available from that pointer in %s", api, role, ptr,
             bytes, available, op.what(ptr).c_str());
    return op;
}

}  // namespace

/// rtMalloc, or rtMallocAsync from the device's default pool: the device's allocator (DeviceMemory).
static void* allocate_default(CoreDevice& device, size_t bytes, Stream* stream, const char* api);

void* allocate_device(CoreDevice& device, size_t bytes, Stream* stream, const char* api) {
    if (stream)  // rtMallocAsync allocates from the device's current pool
        if (std::shared_ptr<MemPoolObject> pool = device.memory().current_pool())
            return allocate_from_pool(*pool, bytes, *stream, api);
    return allocate_default(device, bytes, stream, api);
}

void* allocate_from_pool(MemPoolObject& pool, size_t bytes, Stream& stream, const char* api) {
    if (pool.is_default()) return allocate_default(pool.device(), bytes, &stream, api);
    if (void* p = nullptr; stream.capture() && graph::capture_alloc(stream, bytes, &p, api)) return p;
    if (bytes == 0) return nullptr;
    const int64_t traced_from = trace::on() ? trace::now() : 0;
    void* p = pool.allocate(bytes, &stream, api);
    Allocation a{reinterpret_cast<uintptr_t>(p), bytes, MemoryKind::device, &pool.device(), true};
    a.mem_pool = &pool;
    runtime().registry.insert(a);
    if (traced_from) [[unlikely]]
        trace::host_span(stream, trace::Cat::memory, "malloc async", bytes, traced_from);
    return p;
}

static void* allocate_default(CoreDevice& device, size_t bytes, Stream* stream, const char* api) {
    if (void* p = nullptr; stream && stream->capture() && graph::capture_alloc(*stream, bytes, &p, api)) return p;
    if (bytes == 0) return nullptr;
    const int64_t traced_from = stream && trace::on() ? trace::now() : 0;
    bool pooled = false;
    void* p = device.memory().allocate(bytes, stream, &pooled, api);
    runtime().registry.insert({reinterpret_cast<uintptr_t>(p), bytes, MemoryKind::device, &device, pooled});
    if (traced_from) [[unlikely]]
        trace::host_span(*stream, trace::Cat::memory, "malloc async", bytes, traced_from);
    return p;
}

void* allocate_managed(CoreDevice& device, size_t bytes, const char* api) {
    if (!device.info().managed_memory)
        fail(RT_ERROR_NOT_SUPPORTED, "%s: %s has no managed memory", api, device.label().c_str());
    if (bytes == 0) return nullptr;
    Allocation a{0, bytes, MemoryKind::device, &device, false};
    a.managed = true;
    if (device.info().host_addressable) {
        // Device memory the host addresses anyway: the device's own allocator (pool, statistics) serves it.
        a.base = reinterpret_cast<uintptr_t>(device.memory().allocate(bytes, nullptr, &a.pooled, api));
    } else {
        void* p = device.impl().allocate_managed_impl(bytes);
        if (!p) fail(RT_ERROR_OUT_OF_MEMORY, "%s: %s cannot hold %zu bytes of managed memory", api, device.label().c_str(),
                     bytes);
        a.base = reinterpret_cast<uintptr_t>(p);
    }
    runtime().registry.insert(a);
    return reinterpret_cast<void*>(a.base);
}

void free_device(void* ptr, Stream* stream, const char* api) {
    if (!ptr) return;
    if (stream && stream->capture() && graph::capture_free(*stream, ptr, api)) return;
    const int64_t traced_from = stream && trace::on() ? trace::now() : 0;
    std::optional<Allocation> a = runtime().registry.erase(reinterpret_cast<uintptr_t>(ptr), MemoryKind::device);
    if (!a) refuse_release(api, ptr, "a pointer returned by rtMalloc or rtMallocAsync");
    if (a->mem_pool) {  // a created pool's: back to it, whatever the device's current pool is now
        a->mem_pool->release(ptr, a->size, stream);
        if (traced_from) [[unlikely]] trace::host_span(*stream, trace::Cat::memory, "free async", a->size, traced_from);
        return;
    }
    if (a->managed && !a->device->info().host_addressable) {
        // The backend's managed memory (outside the device's allocator): freed once the queued work has run.
        backend::Device* impl = &a->device->impl();
        const size_t size = a->size;
        if (!backend::defer_after_queued_work([impl, ptr, size] { impl->free_impl(ptr, size); }))
            fail(RT_ERROR_OUT_OF_MEMORY, "%s: out of host memory while deferring the free of %p", api, ptr);
        return;
    }
    a->device->memory().release(ptr, a->size, a->pooled, stream);
    if (traced_from) [[unlikely]] trace::host_span(*stream, trace::Cat::memory, "free async", a->size, traced_from);
}

void* allocate_graph_arena(CoreDevice& device, size_t bytes, const char* api) {
    if (bytes == 0) return nullptr;
    bool pooled = false;
    void* p = device.memory().allocate(bytes, nullptr, &pooled, api);
    Allocation a{reinterpret_cast<uintptr_t>(p), bytes, MemoryKind::device, &device, pooled};
    a.graph_arena = true;
    runtime().registry.insert(a);
    return p;
}

void free_graph_arena(void* arena, const char* api) {
    if (!arena) return;
    std::optional<Allocation> a = runtime().registry.erase(reinterpret_cast<uintptr_t>(arena), MemoryKind::device, true);
    if (!a) fail(RT_ERROR_INVALID_VALUE, "%s: %p is not an executable graph's arena", api, arena);
    a->device->memory().release(arena, a->size, a->pooled, nullptr);
}

void* allocate_pinned_host(CoreDevice& device, size_t bytes) {
    if (bytes == 0) return nullptr;
    Runtime& r = runtime();
    // Pinned for the backends that pin (cuda's portable memory serves every GPU and is plain memory to the cpu
    // devices), whichever device is current; the current device's own kind when none can, or when that fails (a
    // lost GPU).
    CoreDevice* owner = &device;
    void* p = nullptr;
    if (!device.info().portable_host_memory) {
        for (int i = 0; i < r.device_count() && !p; ++i) {
            CoreDevice& d = r.device(i);
            if (!d.info().portable_host_memory) continue;
            try {
                if ((p = d.impl().allocate_host_impl(bytes))) owner = &d;
            } catch (const Error&) {
            }
        }
    }
    if (!p) p = device.impl().allocate_host_impl(bytes);
    if (!p) fail(RT_ERROR_OUT_OF_MEMORY, "out of host memory: requested %zu bytes of pinned host memory", bytes);
    Allocation a{reinterpret_cast<uintptr_t>(p), bytes, MemoryKind::pinned_host, &device, false};
    a.host_owner = owner;
    r.registry.insert(a);
    return p;
}

void free_pinned_host(void* ptr) {
    if (!ptr) return;
    Runtime& r = runtime();
    std::optional<Allocation> a = r.registry.erase(reinterpret_cast<uintptr_t>(ptr), MemoryKind::pinned_host);
    if (!a) refuse_release("rtFreeHost", ptr, "a pointer returned by rtMallocHost");
    // Queued copies may still read or write it: the timeline returns it once they have run.
    CoreDevice* device = a->host_owner ? a->host_owner : a->device;
    size_t size = a->size;
    r.timeline().defer_after(unfinished_points, [device, ptr, size] { device->impl().free_host_impl(ptr, size); });
}

void register_host(CoreDevice& device, void* ptr, size_t bytes) {
    if (!ptr) fail(RT_ERROR_INVALID_VALUE, "ptr is NULL (expected host memory to register)");
    if (bytes == 0) fail(RT_ERROR_INVALID_VALUE, "size is 0 (expected the number of bytes to register)");
    require_range(ptr, bytes, "rtHostRegister");  // the registry's [ptr, ptr + size) must not wrap
    Runtime& r = runtime();
    if (std::optional<Allocation> a = r.registry.find_overlap(ptr, bytes)) {
        void* base = reinterpret_cast<void*>(a->base);
        fail(RT_ERROR_INVALID_VALUE, "[%p, +%zu) overlaps %s", ptr, bytes, describe(base, r.registry.lookup(base)).c_str());
    }
    r.registry.insert({reinterpret_cast<uintptr_t>(ptr), bytes, MemoryKind::registered_host, &device, false});
}

void unregister_host(void* ptr) {
    Runtime& r = runtime();
    if (!ptr) fail(RT_ERROR_INVALID_VALUE, "ptr is NULL (expected a pointer given to rtHostRegister)");
    // The memory is the caller's again when this returns (it may free it): queued copies must be done. That
    // is a wait, which a host function may not do — refused before anything changes.
    refuse_wait_in_queue_context("rtHostUnregister");
    if (!r.registry.erase(reinterpret_cast<uintptr_t>(ptr), MemoryKind::registered_host))
        refuse_release("rtHostUnregister", ptr, "a pointer given to rtHostRegister");
    r.wait_all_idle();
}

void* mapped_device_pointer(void* host_ptr) {
    if (!host_ptr) fail(RT_ERROR_INVALID_VALUE, "host_ptr is NULL");
    PointerInfo info = runtime().registry.lookup(host_ptr);
    if (!info.allocation || info.allocation->kind == MemoryKind::device)
        fail(RT_ERROR_INVALID_VALUE, "%p is %s (expected pinned or registered host memory)", host_ptr,
             describe(host_ptr, info).c_str());
    CoreDevice& d = *info.allocation->device;
    if (!d.memory().zero_copy())
        fail(RT_ERROR_NOT_SUPPORTED, "zero copy is off on %s: call rtEnableZeroCopy(1) first", d.label().c_str());
    if (!d.info().host_addressable)
        fail(RT_ERROR_NOT_SUPPORTED, "%s cannot address host memory in place", d.label().c_str());
    return host_ptr;  // unified addressing: the device sees host memory at the same address
}

backend::CopyKind check_copy(const CoreDevice& queue_device, void* dst, const void* src, size_t bytes, int kind,
                             const char* api, bool* elided, const ExtraDeviceMemory* extra) {
    return check_copy_spans(queue_device, dst, bytes, src, bytes, kind, api, elided, extra);
}

backend::CopyKind check_copy_spans(const CoreDevice& queue_device, void* dst, size_t dst_bytes, const void* src,
                                   size_t src_bytes, int kind, const char* api, bool* elided,
                                   const ExtraDeviceMemory* extra) {
    const size_t bytes = std::min(dst_bytes, src_bytes);
    if (kind < RT_MEMCPY_HOST_TO_HOST || kind > RT_MEMCPY_DEFAULT)
        fail(RT_ERROR_INVALID_VALUE, "%s: kind %d is not an rtMemcpyKind (expected 0..4)", api, kind);
    if (elided) *elided = bytes == 0;
    if (bytes == 0)  // nothing moves: the operands are not looked at (as CUDA)
        return kind == RT_MEMCPY_DEFAULT ? backend::CopyKind::host_to_host : static_cast<backend::CopyKind>(kind);
    Operand d = check_operand(api, "destination", dst, dst_bytes, extra);
    Operand s = check_operand(api, "source", src, src_bytes, extra);
    if (kind == RT_MEMCPY_DEFAULT)
        kind = d.side == Side::device ? (s.side == Side::device ? RT_MEMCPY_DEVICE_TO_DEVICE : RT_MEMCPY_HOST_TO_DEVICE)
                                      : (s.side == Side::device ? RT_MEMCPY_DEVICE_TO_HOST : RT_MEMCPY_HOST_TO_HOST);
    bool want_dst_dev = kind == RT_MEMCPY_HOST_TO_DEVICE || kind == RT_MEMCPY_DEVICE_TO_DEVICE;
    bool want_src_dev = kind == RT_MEMCPY_DEVICE_TO_HOST || kind == RT_MEMCPY_DEVICE_TO_DEVICE;
    auto fits = [](Side side, bool want_device) {
        return side == Side::mapped || (side == Side::device) == want_device;
    };
    if (!fits(d.side, want_dst_dev))
        fail(RT_ERROR_INVALID_VALUE, "%s: %s needs %s destination, but destination %p is %s", api, kind_name(kind),
             want_dst_dev ? "a device" : "a host", dst, d.what(dst).c_str());
    if (!fits(s.side, want_src_dev))
        fail(RT_ERROR_INVALID_VALUE, "%s: %s needs %s source, but source %p is %s", api, kind_name(kind),
             want_src_dev ? "a device" : "a host", src, s.what(src).c_str());
    // Memory the host cannot address (a GPU's) is reachable only through its own backend's queues.
    auto reach = [&](const Operand& op, const char* role, const void* p) {
        if (op.side == Side::device && !op.owner->info().host_addressable &&
            op.owner->info().backend != queue_device.info().backend)
            fail(RT_ERROR_INVALID_VALUE, "%s: %s %p is %s, which a stream of %s cannot reach (queue the copy on a "
                 "stream of %s)", api, role, p, op.what(p).c_str(), queue_device.label().c_str(),
                 op.owner->label().c_str());
    };
    reach(d, "destination", dst);
    reach(s, "source", src);
    // Zero copy: the device already sees these very bytes; nothing to move.
    if (elided) *elided = dst == src && (d.side == Side::mapped || s.side == Side::mapped);
    return static_cast<backend::CopyKind>(kind);
}

void check_fill(const CoreDevice& queue_device, void* dst, size_t bytes, const char* api,
                const ExtraDeviceMemory* extra, const char* role) {
    if (bytes == 0) return;
    Operand op = check_operand(api, role, dst, bytes, extra);
    const bool filling = std::strcmp(role, "destination") == 0;  // rtMemsetAsync's own words; others name a picture
    if (op.side == Side::host)
        fail(RT_ERROR_INVALID_VALUE, "%s: %s %p is %s (expected device memory from rtMalloc)", api, role, dst,
             op.what(dst).c_str());
    if (op.owner->info().backend != queue_device.info().backend)
        fail(RT_ERROR_INVALID_VALUE, "%s: %s %p is %s, which a stream of %s cannot %s (queue the %s on a stream of "
             "%s)", api, role, dst, op.what(dst).c_str(), queue_device.label().c_str(), filling ? "fill" : "use",
             filling ? "fill" : "operation", op.owner->label().c_str());
}

void enqueue_copy(Stream& stream, void* dst, const void* src, size_t bytes, int kind, const char* api) {
    if (stream.capture() && graph::capture_copy(stream, dst, src, bytes, kind, api)) return;
    bool elided = false;
    backend::CopyKind k = check_copy(stream.device(), dst, src, bytes, kind, api, &elided);
    if (elided) {
        if (bytes) stream.device().memory().count_elided_copy(bytes);
        return;
    }
    const uint64_t op = stream.next_op();
    trace::enqueue([&] { return trace::copy_op(stream, op, bytes, k); },
                   [&](const trace::Key& traced) { stream.queue().copy_impl(dst, src, bytes, k, traced); });
}

void enqueue_fill(Stream& stream, void* dst, int value, size_t bytes, const char* api) {
    if (stream.capture() && graph::capture_fill(stream, dst, value, bytes, api)) return;
    if (bytes == 0) return;
    check_fill(stream.device(), dst, bytes, api);
    const uint64_t op = stream.next_op();
    trace::enqueue([&] { return trace::fill_op(stream, op, bytes); },
                   [&](const trace::Key& traced) { stream.queue().fill_impl(dst, static_cast<uint8_t>(value), bytes, traced); });
}

}  // namespace rt
