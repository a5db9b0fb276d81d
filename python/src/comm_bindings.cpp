// runtime._core's collectives (comm.h): a thin binding of every rtComm*/rtGroup* call for python/runtime/comm.py.
//
// Conventions (those of core_module.cpp, whose helpers are handed in by bind_comm): communicators, streams and
// buffers are ints; data types and reduction ops are the C enum values (DATA_* in core_module.cpp, REDUCE_* here).
// Every call releases the GIL (rtCommInitRank waits for the other ranks, which other Python threads drive); a failure
// raises the exception class registered for its rtError_t with the library's message. A collective keeps `keep` (the
// Python objects its work uses) alive until its stream has passed it; a refused one queues nothing and keeps nothing.
// Inside rtGroupStart/End a collective is only queued at the outermost rtGroupEnd, so comm.py passes keep=None there
// and keeps the objects itself once the group has ended (a deferred release queued now would run before the work).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <runtime/comm.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bindings_common.hpp"

using rt_bindings::CheckFn;
using rt_bindings::g_check;
using rt_bindings::nogil;

namespace nb = nanobind;

namespace {

using KeepFn = rtError_t (*)(rtStream_t, PyObject*);
KeepFn g_keep = nullptr;    // core_module.cpp's defer_keep(): hands a reference to rtStreamDeferRelease

rtComm_t as_comm(uintptr_t h) { return reinterpret_cast<rtComm_t>(h); }

int comm_int(const char* api, rtError_t (*get)(rtComm_t, int*), uintptr_t h) {
    int v = 0;
    nogil(api, [&] { return get(as_comm(h), &v); });
    return v;
}

// The collectives by name, one entry point: comm.py validates and picks; this only forwards.
enum class Op { all_reduce, broadcast, reduce, all_gather, reduce_scatter, all_to_all, send, recv, barrier };

const char* api_name(Op op) {
    switch (op) {
    case Op::all_reduce: return "rtAllReduce";
    case Op::broadcast: return "rtBroadcast";
    case Op::reduce: return "rtReduce";
    case Op::all_gather: return "rtAllGather";
    case Op::reduce_scatter: return "rtReduceScatter";
    case Op::all_to_all: return "rtAlltoAll";
    case Op::send: return "rtSend";
    case Op::recv: return "rtRecv";
    case Op::barrier: return "rtCommBarrier";
    }
    return "rt(unknown collective)";
}

rtError_t call(Op op, rtComm_t c, void* send, void* recv, size_t count, rtDataType type, rtReduceOp red, int root,
               rtStream_t st) {
    switch (op) {
    case Op::all_reduce: return rtAllReduce(send, recv, count, type, red, c, st);
    case Op::broadcast: return rtBroadcast(send, recv, count, type, root, c, st);
    case Op::reduce: return rtReduce(send, recv, count, type, red, root, c, st);
    case Op::all_gather: return rtAllGather(send, recv, count, type, c, st);
    case Op::reduce_scatter: return rtReduceScatter(send, recv, count, type, red, c, st);
    case Op::all_to_all: return rtAlltoAll(send, recv, count, type, c, st);
    case Op::send: return rtSend(send, count, type, root, c, st);
    case Op::recv: return rtRecv(recv, count, type, root, c, st);
    case Op::barrier: return rtCommBarrier(c, st);
    }
    return RT_ERROR_INVALID_VALUE;
}

}  // namespace

void bind_comm(nb::module_& m, void (*check)(rtError_t, const char*), rtError_t (*keep)(rtStream_t, PyObject*)) {
    g_check = check;
    g_keep = keep;

    m.attr("REDUCE_SUM") = static_cast<int>(RT_REDUCE_SUM);
    m.attr("REDUCE_PROD") = static_cast<int>(RT_REDUCE_PROD);
    m.attr("REDUCE_MAX") = static_cast<int>(RT_REDUCE_MAX);
    m.attr("REDUCE_MIN") = static_cast<int>(RT_REDUCE_MIN);
    m.attr("REDUCE_AVG") = static_cast<int>(RT_REDUCE_AVG);
    nb::dict ops;  // the collective names comm_collective takes
    const char* names[] = {"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
                           "all_to_all", "send",      "recv",   "barrier"};
    for (int i = 0; i < 9; ++i) ops[names[i]] = i;
    m.attr("COMM_COLLECTIVES") = ops;
    m.attr("COMM_UNIQUE_ID_BYTES") = sizeof(rtCommUniqueId);

    m.def("comm_init_all", [](const std::vector<int>& devices) {
        std::vector<rtComm_t> comms(devices.size());
        nogil("rtCommInitAll", [&] {
            return rtCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data());
        });
        std::vector<uintptr_t> out;
        for (rtComm_t c : comms) out.push_back(reinterpret_cast<uintptr_t>(c));
        return out;
    }, nb::arg("devices"), "rtCommInitAll: one communicator handle per device, rank i on devices[i].");
    m.def("comm_get_unique_id", [] {
        rtCommUniqueId id;
        std::memset(&id, 0, sizeof id);
        nogil("rtCommGetUniqueId", [&] { return rtCommGetUniqueId(&id); });
        return nb::bytes(id.internal, sizeof id.internal);
    }, "rtCommGetUniqueId: the id's bytes.");
    m.def("comm_init_rank", [](int nranks, nb::bytes unique_id, int rank) {
        rtCommUniqueId id;
        if (unique_id.size() != sizeof id.internal) g_check(RT_ERROR_INVALID_VALUE, "rtCommInitRank");  // comm.py checks
        std::memcpy(id.internal, unique_id.c_str(), sizeof id.internal);
        rtComm_t c = nullptr;
        nogil("rtCommInitRank", [&] { return rtCommInitRank(&c, nranks, id, rank); });
        return reinterpret_cast<uintptr_t>(c);
    }, nb::arg("nranks"), nb::arg("unique_id"), nb::arg("rank"),
          "rtCommInitRank on the calling thread's current device (waits, GIL released, for every rank).");
    m.def("comm_count", [](uintptr_t h) { return comm_int("rtCommCount", &rtCommCount, h); });
    m.def("comm_user_rank", [](uintptr_t h) { return comm_int("rtCommUserRank", &rtCommUserRank, h); });
    m.def("comm_device", [](uintptr_t h) { return comm_int("rtCommDevice", &rtCommDevice, h); });
    m.def("comm_destroy", [](uintptr_t h) { nogil("rtCommDestroy", [&] { return rtCommDestroy(as_comm(h)); }); });
    m.def("comm_abort", [](uintptr_t h) { nogil("rtCommAbort", [&] { return rtCommAbort(as_comm(h)); }); });
    m.def("comm_get_async_error", [](uintptr_t h) {
        rtError_t async = RT_SUCCESS;
        std::string msg;
        {
            nb::gil_scoped_release r;
            rtError_t e = rtCommGetAsyncError(as_comm(h), &async);
            if (e != RT_SUCCESS) async = e;  // a dead handle: report that instead
            if (async != RT_SUCCESS) msg = rtGetLastErrorMessage();
        }
        return nb::make_tuple(static_cast<int>(async), msg);
    }, "rtCommGetAsyncError: (code, message); (0, '') while the communicator is healthy.");
    m.def("group_start", [] { nogil("rtGroupStart", [] { return rtGroupStart(); }); });
    m.def("group_end", [] { nogil("rtGroupEnd", [] { return rtGroupEnd(); }); });

    m.def("comm_collective", [](int which, uintptr_t h, uintptr_t send, uintptr_t recv, size_t count, int dtype,
                                int op, int root, uintptr_t stream, nb::handle keep) {
        if (which < 0 || which > static_cast<int>(Op::barrier)) g_check(RT_ERROR_INVALID_VALUE, "comm_collective");
        const Op o = static_cast<Op>(which);
        rtStream_t st = reinterpret_cast<rtStream_t>(stream);
        PyObject* ref = nullptr;
        if (keep.is_valid() && !keep.is_none()) {
            ref = keep.ptr();
            Py_INCREF(ref);
        }
        rtError_t e, k = RT_SUCCESS;
        {
            nb::gil_scoped_release r;
            e = call(o, as_comm(h), reinterpret_cast<void*>(send), reinterpret_cast<void*>(recv), count,
                     static_cast<rtDataType>(dtype), static_cast<rtReduceOp>(op), root, st);
            if (e == RT_SUCCESS && ref) k = g_keep(st, ref);  // refused: leaked, the queued work may still use it
        }
        if (e != RT_SUCCESS) Py_XDECREF(ref);
        g_check(e, api_name(o));
        g_check(k, "rtStreamDeferRelease");
    }, nb::arg("which"), nb::arg("comm"), nb::arg("send"), nb::arg("recv"), nb::arg("count"), nb::arg("dtype"),
          nb::arg("op"), nb::arg("root"), nb::arg("stream"), nb::arg("keep") = nb::none(),
          "Queues collective COMM_COLLECTIVES[name] (root: the root, or the peer of send/recv); `keep` stays alive "
          "until it has run.");
}
