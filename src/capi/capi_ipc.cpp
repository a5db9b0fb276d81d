// C API: inter-process handles of device memory and events (rtIpc*, CUDA's cudaIpc*).
#include <unistd.h>

#include <cstring>

#include "capi/capi_common.hpp"
#include "core/event.hpp"
#include "core/ipc.hpp"
#include "core/memory.hpp"

using namespace rt;

namespace {

constexpr uint32_t kMagic = 0x31495452;  // "RTI1"
enum : uint8_t { kMemory = 1, kEvent = 2 };

/// A handle's 64 bytes: who exported what (checked by the opener), then the exporter's payload.
struct Wire {
    uint32_t magic;
    uint8_t kind;
    uint8_t reserved;
    uint16_t ordinal;  ///< the exporting device's ordinal within its backend
    int32_t pid;       ///< the exporting process
    char backend[12];  ///< the exporting device's backend ("cpu")
    unsigned char payload[ipc::kPayloadBytes];
};
static_assert(sizeof(Wire) == sizeof(rtIpcMemHandle_t) && sizeof(Wire) == sizeof(rtIpcEventHandle_t));

Wire make_wire(uint8_t kind, const CoreDevice& device) {
    Wire w{};
    w.magic = kMagic;
    w.kind = kind;
    w.ordinal = static_cast<uint16_t>(device.info().backend_ordinal);
    w.pid = static_cast<int32_t>(getpid());
    std::strncpy(w.backend, device.info().backend.c_str(), sizeof w.backend - 1);
    return w;
}

/// The handle's header, checked: this runtime's, of `kind`, from another process, of the backend of `device`.
Wire read_wire(const void* handle, uint8_t kind, const CoreDevice& device) {
    Wire w;
    std::memcpy(&w, handle, sizeof w);
    const char* what = kind == kMemory ? "rtIpcMemHandle_t" : "rtIpcEventHandle_t";
    if (w.magic != kMagic || (w.kind != kMemory && w.kind != kEvent))
        fail(RT_ERROR_INVALID_VALUE, "the handle is not an IPC handle of this runtime (expected the bytes of a %s from "
             "%s)", what, kind == kMemory ? "rtIpcGetMemHandle" : "rtIpcGetEventHandle");
    if (w.kind != kind)
        fail(RT_ERROR_INVALID_VALUE, "the handle is an %s handle (expected a %s)", w.kind == kMemory ? "memory" : "event",
             what);
    if (w.pid == getpid())
        fail(RT_ERROR_INVALID_VALUE, "the handle was exported by this process (pid %d): IPC handles open in another "
             "process only, as in CUDA (use the %s itself)", w.pid, kind == kMemory ? "pointer" : "event");
    w.backend[sizeof w.backend - 1] = 0;
    if (device.info().backend != w.backend)
        fail(RT_ERROR_INVALID_VALUE, "the handle holds %s memory of pid %d, but the current device is %s (expected a "
             "current device of the %s backend)", w.backend, w.pid, device.label().c_str(), w.backend);
    return w;
}

}  // namespace

namespace rt::ipc {
std::unique_ptr<backend::Event> create_event(CoreDevice& device, unsigned flags) {
    if (!(flags & RT_EVENT_DISABLE_TIMING))
        fail(RT_ERROR_INVALID_VALUE, "RT_EVENT_INTERPROCESS needs RT_EVENT_DISABLE_TIMING too, as in CUDA (an event "
             "shared between processes records no time)");
    if (!device.info().interprocess)
        fail(RT_ERROR_NOT_SUPPORTED, "interprocess events on %s: the %s backend has no IPC handles yet",
             device.label().c_str(), device.info().backend.c_str());
    return SharedEvent::create();
}
}  // namespace rt::ipc

extern "C" {

RT_API rtError_t rtIpcGetMemHandle(rtIpcMemHandle_t* handle, void* devPtr) {
    return capi_call("rtIpcGetMemHandle", [&] {
        require_out(handle, "handle");
        if (!devPtr) fail(RT_ERROR_INVALID_VALUE, "devPtr is NULL (expected a pointer into memory from rtMalloc)");
        PointerInfo info = runtime().registry.lookup(devPtr);
        if (!info.allocation || info.allocation->kind != MemoryKind::device)
            fail(RT_ERROR_INVALID_VALUE, "devPtr %p is %s (expected a pointer into memory from rtMalloc)", devPtr,
                 describe_pointer(devPtr).c_str());
        const Allocation& a = *info.allocation;
        const char* why = a.ipc_opened    ? "memory opened from another process's handle (export it from there)"
                          : a.module_global ? "a module's global"
                          : a.graph_arena   ? "memory of an executable graph's allocation nodes"
                          : a.managed       ? "managed memory (rtMallocManaged)"
                          : a.pooled        ? "memory of the device's pool (rtEnablePoolAllocator, rtEnableMemoryReuse)"
                                            : nullptr;
        if (why)
            fail(RT_ERROR_INVALID_VALUE, "devPtr %p lies in %s, which cannot be exported (expected memory from rtMalloc%s)",
                 devPtr, why, a.pooled ? " with no pool: rtEnablePoolAllocator(0, 0, 0) removes it" : "");
        Wire w = make_wire(kMemory, *a.device);
        a.device->impl().ipc_export_impl(reinterpret_cast<void*>(a.base), a.size, w.payload);
        std::memcpy(handle, &w, sizeof w);
    });
}

RT_API rtError_t rtIpcOpenMemHandle(void** devPtr, rtIpcMemHandle_t handle, unsigned int flags) {
    return capi_call("rtIpcOpenMemHandle", [&] {
        require_out(devPtr, "devPtr");
        *devPtr = nullptr;
        if (flags & ~RT_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
            fail(RT_ERROR_INVALID_VALUE, "flags 0x%x has unknown bits (expected 0 or RT_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)",
                 flags);
        CoreDevice& d = runtime().current_device();
        Wire w = read_wire(&handle, kMemory, d);
        size_t bytes = 0;
        void* p = d.impl().ipc_open_impl(w.payload, w.pid, &bytes);
        Allocation a{reinterpret_cast<uintptr_t>(p), bytes, MemoryKind::device, &d, false};
        a.ipc_opened = true;
        a.ipc_pid = w.pid;
        try {
            runtime().registry.insert(a);
        } catch (...) {
            d.impl().ipc_close_impl(p, bytes);
            throw;
        }
        *devPtr = p;
    });
}

RT_API rtError_t rtIpcCloseMemHandle(void* devPtr) {
    return capi_call("rtIpcCloseMemHandle", [&] {
        if (!devPtr) fail(RT_ERROR_INVALID_VALUE, "devPtr is NULL (expected a pointer from rtIpcOpenMemHandle)");
        std::optional<Allocation> a = runtime().registry.erase_ipc_opened(reinterpret_cast<uintptr_t>(devPtr));
        if (!a) {
            fail(RT_ERROR_INVALID_VALUE, "devPtr %p is %s (expected a pointer from rtIpcOpenMemHandle, not closed yet)",
                 devPtr, describe_pointer(devPtr).c_str());
        }
        // Unmapped once the work queued so far (which may use it) has run.
        backend::Device* impl = &a->device->impl();
        const size_t size = a->size;
        if (!backend::defer_after_queued_work([impl, devPtr, size] { impl->ipc_close_impl(devPtr, size); }))
            fail(RT_ERROR_OUT_OF_MEMORY, "out of host memory while deferring the unmap of %p", devPtr);
    });
}

RT_API rtError_t rtIpcGetEventHandle(rtIpcEventHandle_t* handle, rtEvent_t event) {
    return capi_call("rtIpcGetEventHandle", [&] {
        require_out(handle, "handle");
        auto e = runtime().event(event);
        if (!e->interprocess())
            fail(RT_ERROR_INVALID_VALUE, "event %p was not created with RT_EVENT_INTERPROCESS (expected an event of "
                 "rtEventCreateWithFlags(RT_EVENT_INTERPROCESS | RT_EVENT_DISABLE_TIMING))", static_cast<void*>(event));
        auto& shared = static_cast<ipc::SharedEvent&>(e->impl());
        Wire w = make_wire(kEvent, e->device());
        shared.export_payload(w.payload);
        std::memcpy(handle, &w, sizeof w);
    });
}

RT_API rtError_t rtIpcOpenEventHandle(rtEvent_t* event, rtIpcEventHandle_t handle) {
    return capi_call("rtIpcOpenEventHandle", [&] {
        require_out(event, "event");
        Runtime& r = runtime();
        CoreDevice& d = r.current_device();
        Wire w = read_wire(&handle, kEvent, d);
        const unsigned flags = RT_EVENT_INTERPROCESS | RT_EVENT_DISABLE_TIMING;
        if (!d.info().interprocess)
            fail(RT_ERROR_NOT_SUPPORTED, "interprocess events on %s: the %s backend has no IPC handles yet",
                 d.label().c_str(), d.info().backend.c_str());
        auto e = std::make_shared<Event>(d, ipc::SharedEvent::open(w.payload, w.pid), flags);
        // Recorded (by some process) or not, the shared state says: waits and queries read it, never this flag.
        e->mark_recorded();
        *event = reinterpret_cast<rtEvent_t>(r.events.insert(std::move(e)));
    });
}

}  // extern "C"
