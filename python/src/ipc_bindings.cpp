// runtime._core's inter-process handles (runtime.h's rtIpc* block): thin bindings for python/runtime/ipc.py and the
// Event class of core.py. Conventions of core_module.cpp: pointers and handles are ints, handles are 64 bytes, every
// call releases the GIL, a failure raises the class registered for its rtError_t with the library's message.
#include <nanobind/nanobind.h>
#include <nanobind/stl/tuple.h>

#include <runtime/runtime.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "bindings_common.hpp"

using rt_bindings::CheckFn;
using rt_bindings::g_check;
using rt_bindings::nogil;

namespace nb = nanobind;

namespace {

/// The 64 bytes of a handle from Python bytes; anything else is refused naming what was expected.
template <class Handle> Handle handle_from(nb::bytes b, const char* what) {
    Handle h{};
    if (b.size() != sizeof h.reserved)
        throw nb::value_error((std::string(what) + ": an IPC handle is " + std::to_string(sizeof h.reserved) +
                               " bytes, got " + std::to_string(b.size()))
                                  .c_str());
    std::memcpy(h.reserved, b.c_str(), sizeof h.reserved);
    return h;
}

}  // namespace

void bind_ipc(nb::module_& m, void (*check)(rtError_t, const char*)) {
    g_check = check;
    m.attr("EVENT_INTERPROCESS") = RT_EVENT_INTERPROCESS;
    m.attr("IPC_MEM_LAZY_ENABLE_PEER_ACCESS") = RT_IPC_MEM_LAZY_ENABLE_PEER_ACCESS;
    m.def("ipc_get_mem_handle", [](uintptr_t p) {
        rtIpcMemHandle_t h{};
        nogil("rtIpcGetMemHandle", [&] { return rtIpcGetMemHandle(&h, reinterpret_cast<void*>(p)); });
        return nb::bytes(h.reserved, sizeof h.reserved);
    }, "rtIpcGetMemHandle: the 64-byte handle of the allocation `ptr` lies in.");
    m.def("ipc_open_mem_handle", [](nb::bytes handle, unsigned flags) {
        rtIpcMemHandle_t h = handle_from<rtIpcMemHandle_t>(handle, "ipc_open_mem_handle");
        void* p = nullptr;
        nogil("rtIpcOpenMemHandle", [&] { return rtIpcOpenMemHandle(&p, h, flags); });
        rtPointerAttributes a{};
        nogil("rtPointerGetAttributes", [&] { return rtPointerGetAttributes(&a, p); });
        return nb::make_tuple(reinterpret_cast<uintptr_t>(p), a.size, a.device);
    }, nb::arg("handle"), nb::arg("flags") = 0u, "rtIpcOpenMemHandle: (ptr, size, device) of the mapped allocation.");
    m.def("ipc_close_mem_handle", [](uintptr_t p) {
        nogil("rtIpcCloseMemHandle", [&] { return rtIpcCloseMemHandle(reinterpret_cast<void*>(p)); });
    });
    m.def("ipc_get_event_handle", [](uintptr_t ev) {
        rtIpcEventHandle_t h{};
        nogil("rtIpcGetEventHandle", [&] { return rtIpcGetEventHandle(&h, reinterpret_cast<rtEvent_t>(ev)); });
        return nb::bytes(h.reserved, sizeof h.reserved);
    });
    m.def("ipc_open_event_handle", [](nb::bytes handle) {
        rtIpcEventHandle_t h = handle_from<rtIpcEventHandle_t>(handle, "Event.from_ipc_handle");
        rtEvent_t ev = nullptr;
        nogil("rtIpcOpenEventHandle", [&] { return rtIpcOpenEventHandle(&ev, h); });
        return reinterpret_cast<uintptr_t>(ev);
    });
}
