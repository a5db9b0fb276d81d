// runtime._core — a thin nanobind binding of the C API (runtime.h): handles and pointers are Python ints.
//
// Contracts kept here, so the pure-Python package stays simple:
//  - every failing rt* call raises the exception class registered for its rtError_t (set_error_classes;
//    RuntimeError before registration) with "RT_ERROR_NAME: <rtGetLastErrorMessage()>" and `.code` set;
//  - calls that may block (synchronize, blocking copies, free, compile, every enqueue: a full queue may
//    wait) release the GIL, so Python host functions running on executor threads can take it;
//  - RT_ERROR_NOT_READY from the *query* functions is a value (False), not an exception.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <runtime/runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace nb = nanobind;

nb::object make_dlpack_capsule(uintptr_t data, const std::vector<int64_t>& shape, int dtype_code, int dtype_bits,
                               int device_type, int device_id, nb::object owner, bool versioned, bool read_only);

namespace {

// rtError_t -> Python exception class; filled by runtime/__init__.py through set_error_classes(). A raw, deliberately
// leaked reference: a static nb::dict would be released by a C++ static destructor after the interpreter is gone.
PyObject* g_error_classes = nullptr;

[[noreturn]] void raise_error(rtError_t code, const std::string& detail);

[[noreturn]] void raise_error(rtError_t code, const char* api) {
    const char* detail = rtGetLastErrorMessage();
    raise_error(code, (detail && *detail) ? std::string(detail) : std::string(api) + ": " + rtGetErrorString(code));
}

// The exception class registered for `code`, with "RT_ERROR_NAME: detail" as its message.
[[noreturn]] void raise_error(rtError_t code, const std::string& detail) {
    std::string msg = rtGetErrorName(code);
    msg += ": ";
    msg += detail;
    PyObject* cls = PyExc_RuntimeError;
    if (g_error_classes) {
        nb::int_ key(static_cast<int>(code));
        PyObject* found = PyDict_GetItem(g_error_classes, key.ptr());  // borrowed
        if (found) cls = found;
    }
    PyObject* exc = PyObject_CallFunction(cls, "s", msg.c_str());
    if (!exc) throw nb::python_error();
    PyObject* code_obj = PyLong_FromLong(static_cast<long>(code));
    PyObject_SetAttrString(exc, "code", code_obj);
    Py_XDECREF(code_obj);
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    throw nb::python_error();
}

inline void check(rtError_t code, const char* api) {
    if (code != RT_SUCCESS) raise_error(code, api);
}

template <class T> inline T* as_handle(uintptr_t h) { return reinterpret_cast<T*>(h); }
inline void* as_ptr(uintptr_t p) { return reinterpret_cast<void*>(p); }
inline uintptr_t as_int(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// A query's status: True = complete, False = RT_ERROR_NOT_READY, anything else raises.
bool query_result(rtError_t e, const char* api) {
    if (e == RT_SUCCESS) return true;
    if (e == RT_ERROR_NOT_READY) return false;
    raise_error(e, api);
}

// Host functions: the executor thread takes the GIL, calls the Python callable, and turns an exception into
// the stream's asynchronous error (rtHostFuncSetError). The callable's reference is released in the trampoline.
void host_func_trampoline(void* user_data) {
    if (!Py_IsInitialized()) return;  // interpreter gone: nothing can run (atexit synchronizes before this)
    nb::gil_scoped_acquire gil;
    PyObject* fn = static_cast<PyObject*>(user_data);
    PyObject* result = PyObject_CallNoArgs(fn);
    if (!result) {
        std::string msg = "Python host function raised";
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value) {
            PyObject* s = PyObject_Str(value);
            const char* tn = type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "exception";
            msg += std::string(" ") + tn + ": " + (s ? PyUnicode_AsUTF8(s) : "?");
            Py_XDECREF(s);
        }
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        PyErr_Clear();
        rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, msg.c_str());
    } else {
        Py_DECREF(result);
    }
    Py_DECREF(fn);
}

nb::dict device_properties(int device) {
    rtDeviceProp p;
    std::memset(&p, 0, sizeof p);
    check(rtGetDeviceProperties(&p, device), "rtGetDeviceProperties");
    nb::dict d;
    d["name"] = std::string(p.name);
    d["backend"] = std::string(p.backend);
    d["total_memory"] = p.total_memory;
    d["compute_units"] = p.compute_units;
    d["device_index"] = p.device_index;
    d["backend_ordinal"] = p.backend_ordinal;
    d["max_threads_per_block"] = p.max_threads_per_block;
    d["max_grid_size"] = nb::make_tuple(p.max_grid_size[0], p.max_grid_size[1], p.max_grid_size[2]);
    d["max_block_size"] = nb::make_tuple(p.max_block_size[0], p.max_block_size[1], p.max_block_size[2]);
    d["compute_capability"] = nb::make_tuple(p.compute_capability_major, p.compute_capability_minor);
    d["unified_addressing"] = p.unified_addressing != 0;
    return d;
}

// An exact-global-size launch of glob items per dimension in groups of local: the grid rounds up, and the backend
// skips the items past glob where it can (RT_ITEMS_BOUNDED). False if the grid does not fit 32 bits.
bool launch_config(const size_t glob[3], const unsigned local[3], uintptr_t stream, rtLaunchConfig& config) {
    config = rtLaunchConfig{};
    unsigned* grid[3] = {&config.grid.x, &config.grid.y, &config.grid.z};
    unsigned* block[3] = {&config.block.x, &config.block.y, &config.block.z};
    for (int d = 0; d < 3; ++d) {
        if (local[d] == 0) return false;
        const size_t g = glob[d] / local[d] + (glob[d] % local[d] != 0);
        if (g > 0xffffffffull) return false;
        *grid[d] = static_cast<unsigned>(g);
        *block[d] = local[d];
        config.global[d] = glob[d];
    }
    config.stream = as_handle<rtStream_st>(stream);
    return true;
}

// ---- the @runtime.jit launch fast path
//
// A LaunchPlan is a compiled kernel's argument layout for one signature: per parameter a code ('P' = device memory,
// struct-style letters for scalars) and what the argument must be (for memory: the DeviceMemory class and its _dtype
// value; for scalars: their exact Python type). launch() checks every argument against that, packs the 8-byte
// slots on the stack, launches, and returns the list of device memory objects the caller must keep alive. It
// returns None *without launching* whenever anything is unusual (another signature, freed memory, a value that does
// not fit): the caller then takes the Python path, which compiles, or raises the precise error.
struct LaunchPlan {
    uintptr_t func = 0;
    std::string codes;            // one letter per kernel parameter (without the hidden global sizes)
    std::vector<PyObject*> want;  // owned: the _dtype value (memory) or the Python type (scalars) per parameter
    std::vector<size_t> sizes;    // bytes per parameter, hidden global sizes included
    PyObject* mem_type = nullptr; // owned: runtime.DeviceMemory
    int ndim = 1;
    int first_buf = -1;
    size_t first_itemsize = 1;
    int device = 0;

    LaunchPlan(uintptr_t f, std::string c, nb::list w, nb::object memtype, int nd, size_t first_isz, int dev)
        : func(f), codes(std::move(c)), ndim(nd), first_itemsize(first_isz ? first_isz : 1), device(dev) {
        if (codes.size() != w.size()) throw nb::value_error("LaunchPlan: one expected type per code");
        if (codes.size() + static_cast<size_t>(nd) > 64 || nd < 1 || nd > 3)
            throw nb::value_error("LaunchPlan: at most 64 arguments, 1..3 dims");
        for (size_t i = 0; i < codes.size(); ++i) {
            PyObject* o = w[i].ptr();
            Py_INCREF(o);
            want.push_back(o);
            sizes.push_back(code_size(codes[i]));
            if (codes[i] == 'P' && first_buf < 0) first_buf = static_cast<int>(i);
        }
        for (int d = 0; d < nd; ++d) sizes.push_back(8);
        mem_type = memtype.inc_ref().ptr();
    }
    ~LaunchPlan() {
        if (!Py_IsInitialized()) return;
        for (PyObject* o : want) Py_XDECREF(o);
        Py_XDECREF(mem_type);
    }
    LaunchPlan(const LaunchPlan&) = delete;
    LaunchPlan& operator=(const LaunchPlan&) = delete;

    static size_t code_size(char c) {
        switch (c) {
            case 'P': case 'q': case 'Q': case 'd': return 8;
            case 'i': case 'I': case 'f': return 4;
            case 'h': case 'H': return 2;
            case 'b': case 'B': case '?': return 1;
            default: throw nb::value_error("LaunchPlan: unknown argument code");
        }
    }

    // An attribute of a DeviceMemory, looked up with an interned name.
    static PyObject* attr(PyObject* o, const char* name, PyObject*& cache) {
        if (!cache) cache = PyUnicode_InternFromString(name);
        return PyObject_GetAttr(o, cache);  // new reference or nullptr (error set)
    }

    // One scalar into its 8-byte slot; false (error cleared) when it does not fit: the caller falls back.
    static bool pack_scalar(char code, PyObject* o, uint64_t& slot) {
        slot = 0;
        if (code == '?') {
            int t = PyObject_IsTrue(o);
            if (t < 0) { PyErr_Clear(); return false; }
            slot = static_cast<uint64_t>(t);
            return true;
        }
        if (code == 'f' || code == 'd') {
            double v = PyFloat_AsDouble(o);
            if (v == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return false; }
            if (code == 'd') { std::memcpy(&slot, &v, 8); return true; }
            const float fv = static_cast<float>(v);  // struct's rule: overflow only if rounding gives inf
            if (std::isinf(fv) && !std::isinf(v)) return false;
            std::memcpy(&slot, &fv, 4);
            return true;
        }
        PyObject* idx = PyNumber_Index(o);  // ints, NumPy integers; floats are refused (as struct does)
        if (!idx) { PyErr_Clear(); return false; }
        bool ok = true;
        if (code == 'Q' || code == 'I' || code == 'H' || code == 'B') {
            unsigned long long u = PyLong_AsUnsignedLongLong(idx);
            if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) { PyErr_Clear(); ok = false; }
            const unsigned long long lim = code == 'Q' ? ~0ull : code == 'I' ? 0xffffffffull : code == 'H' ? 0xffffull : 0xffull;
            if (ok && u > lim) ok = false;
            slot = u;
        } else {
            long long v = PyLong_AsLongLong(idx);
            if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); ok = false; }
            const long long lim = code == 'q' ? 0x7fffffffffffffffll : code == 'i' ? 0x7fffffffll : code == 'h' ? 0x7fffll : 0x7fll;
            if (ok && (v > lim || v < -lim - 1)) ok = false;
            uint64_t bits = static_cast<uint64_t>(v);
            const size_t n = code_size(code);
            slot = n == 8 ? bits : (bits & ((1ull << (8 * n)) - 1));
        }
        Py_DECREF(idx);
        return ok;
    }

    // glob/local: 3 dims each, or glob[0] == 0 for "the first buffer's element count" (1-D, groups of 256).
    nb::object launch(nb::handle args_h, uintptr_t stream, const size_t* glob_in, const unsigned* local_in) {
        static PyObject *s_dtype = nullptr, *s_ptr = nullptr, *s_freed = nullptr, *s_deferred = nullptr,
                        *s_nbytes = nullptr;
        PyObject* args = args_h.ptr();
        if (!PyTuple_Check(args)) return nb::none();
        const size_t n = static_cast<size_t>(PyTuple_GET_SIZE(args));
        if (n != codes.size()) return nb::none();
        uint64_t slots[64];
        int nbufs = 0;
        for (size_t i = 0; i < n; ++i) {
            PyObject* o = PyTuple_GET_ITEM(args, i);
            const char c = codes[i];
            if (c == 'P') {
                if (Py_TYPE(o) != reinterpret_cast<PyTypeObject*>(mem_type)) return nb::none();
                PyObject* dt = attr(o, "_dtype", s_dtype);
                if (!dt) { PyErr_Clear(); return nb::none(); }
                int same = dt == want[i] ? 1 : PyObject_RichCompareBool(dt, want[i], Py_EQ);
                Py_DECREF(dt);
                if (same != 1) { PyErr_Clear(); return nb::none(); }
                for (PyObject** flag_name : {&s_freed, &s_deferred}) {
                    PyObject* f = attr(o, flag_name == &s_freed ? "_freed" : "_deferred_free", *flag_name);
                    if (!f) { PyErr_Clear(); return nb::none(); }
                    const bool set = f != Py_False;
                    Py_DECREF(f);
                    if (set) return nb::none();  // freed: the Python path raises
                }
                PyObject* p = attr(o, "_ptr", s_ptr);
                if (!p) { PyErr_Clear(); return nb::none(); }
                unsigned long long v = PyLong_AsUnsignedLongLong(p);
                Py_DECREF(p);
                if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) { PyErr_Clear(); return nb::none(); }
                slots[i] = v;
                ++nbufs;
            } else {
                if (reinterpret_cast<PyObject*>(Py_TYPE(o)) != want[i]) return nb::none();
                if (!pack_scalar(c, o, slots[i])) return nb::none();
            }
        }
        size_t glob[3];
        unsigned local[3];
        if (glob_in) {
            for (int d = 0; d < 3; ++d) { glob[d] = glob_in[d]; local[d] = local_in[d]; }
        } else {
            if (first_buf < 0 || ndim != 1) return nb::none();  // no buffer to size from: the Python path raises
            PyObject* nb_ = attr(PyTuple_GET_ITEM(args, first_buf), "nbytes", s_nbytes);
            if (!nb_) { PyErr_Clear(); return nb::none(); }
            size_t nbytes = PyLong_AsSize_t(nb_);
            Py_DECREF(nb_);
            if (nbytes == static_cast<size_t>(-1) && PyErr_Occurred()) { PyErr_Clear(); return nb::none(); }
            glob[0] = nbytes / first_itemsize; glob[1] = glob[2] = 1;
            local[0] = 256; local[1] = local[2] = 1;
        }
        if (glob[0] == 0 || glob[1] == 0 || glob[2] == 0) return nb::list();  // nothing to run
        for (int d = 0; d < ndim; ++d) slots[n + d] = glob[d];
        void* ptrs[64];
        const size_t total = n + static_cast<size_t>(ndim);
        for (size_t i = 0; i < total; ++i) ptrs[i] = &slots[i];
        rtLaunchConfig config;
        if (!launch_config(glob, local, stream, config)) return nb::none();  // out of range: the Python path reports it
        config.num_args = static_cast<int>(total);
        config.arg_sizes = sizes.data();
        rtError_t e;
        {
            nb::gil_scoped_release r;  // a full queue may block; everything used lives on this frame
            e = rtLaunchKernelEx(as_handle<rtFunction_st>(func), &config, ptrs);
        }
        check(e, "rtLaunchKernelEx");
        PyObject* keep = PyList_New(nbufs);
        if (!keep) throw nb::python_error();
        for (size_t i = 0, k = 0; i < n; ++i)
            if (codes[i] == 'P') {
                PyObject* o = PyTuple_GET_ITEM(args, i);
                Py_INCREF(o);
                PyList_SET_ITEM(keep, static_cast<Py_ssize_t>(k++), o);
            }
        return nb::steal(keep);
    }
};

}  // namespace

NB_MODULE(_core, m) {
    m.doc() = "Thin binding of the runtime C API (runtime.h). Use the `runtime` package instead.";

    m.attr("MEMCPY_HOST_TO_HOST") = static_cast<int>(RT_MEMCPY_HOST_TO_HOST);
    m.attr("MEMCPY_HOST_TO_DEVICE") = static_cast<int>(RT_MEMCPY_HOST_TO_DEVICE);
    m.attr("MEMCPY_DEVICE_TO_HOST") = static_cast<int>(RT_MEMCPY_DEVICE_TO_HOST);
    m.attr("MEMCPY_DEVICE_TO_DEVICE") = static_cast<int>(RT_MEMCPY_DEVICE_TO_DEVICE);
    m.attr("MEMCPY_DEFAULT") = static_cast<int>(RT_MEMCPY_DEFAULT);
    m.attr("STREAM_NON_BLOCKING") = RT_STREAM_NON_BLOCKING;
    m.attr("EVENT_BLOCKING_SYNC") = RT_EVENT_BLOCKING_SYNC;
    m.attr("EVENT_DISABLE_TIMING") = RT_EVENT_DISABLE_TIMING;
    m.attr("VERSION") = nb::make_tuple(RUNTIME_VERSION_MAJOR, RUNTIME_VERSION_MINOR, RUNTIME_VERSION_PATCH);
    nb::dict codes;
    for (rtError_t c : {RT_SUCCESS, RT_ERROR_INVALID_VALUE, RT_ERROR_INVALID_DEVICE, RT_ERROR_INVALID_HANDLE,
                        RT_ERROR_OUT_OF_MEMORY, RT_ERROR_NOT_READY, RT_ERROR_COMPILE_FAILED, RT_ERROR_LAUNCH_FAILED,
                        RT_ERROR_NOT_SUPPORTED, RT_ERROR_NOT_FOUND, RT_ERROR_UNKNOWN})
        codes[rtGetErrorName(c)] = static_cast<int>(c);
    m.attr("ERROR_CODES") = codes;  // {"RT_ERROR_INVALID_VALUE": 1, ...}

    // ---- errors
    m.def("set_error_classes", [](nb::dict classes) {
        PyObject* old = g_error_classes;
        g_error_classes = classes.inc_ref().ptr();
        Py_XDECREF(old);
    },
          "Register {rtError_t code: exception class} used to raise failures.");
    m.def("get_error_name", [](int code) { return std::string(rtGetErrorName(static_cast<rtError_t>(code))); });
    m.def("get_error_string", [](int code) { return std::string(rtGetErrorString(static_cast<rtError_t>(code))); });
    m.def("get_last_error_message", [] { return std::string(rtGetLastErrorMessage()); });

    // ---- init and devices
    m.def("init", [](std::optional<std::string> options) {
        const char* o = options ? options->c_str() : nullptr;
        check(rtInit(o), "rtInit");
    }, nb::arg("options") = nb::none());
    m.def("finalize", [] {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtFinalize(); }
        check(e, "rtFinalize");
    });
    m.def("get_device_count", [] { int n = 0; check(rtGetDeviceCount(&n), "rtGetDeviceCount"); return n; });
    m.def("set_device", [](int d) { check(rtSetDevice(d), "rtSetDevice"); });
    m.def("get_device_by_name", [](const std::string& name) {
        int d = -1;
        check(rtGetDeviceByName(&d, name.c_str()), "rtGetDeviceByName");
        return d;
    }, nb::arg("name"), "Index of the device named 'cpu:0', 'cuda:1' or 'cuda' (rtGetDeviceByName).");
    m.def("get_device", [] { int d = 0; check(rtGetDevice(&d), "rtGetDevice"); return d; });
    m.def("get_device_properties", &device_properties, "dict of rtDeviceProp's fields");
    m.def("device_synchronize", [] {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtDeviceSynchronize(); }
        check(e, "rtDeviceSynchronize");
    });
    m.def("mem_get_info", [] {
        size_t f = 0, t = 0;
        check(rtMemGetInfo(&f, &t), "rtMemGetInfo");
        return nb::make_tuple(f, t);
    });

    // ---- streams
    m.def("stream_create", [](unsigned flags) {
        rtStream_t s = nullptr;
        check(rtStreamCreateWithFlags(&s, flags), "rtStreamCreateWithFlags");
        return as_int(s);
    }, nb::arg("flags") = 0u);
    m.def("stream_destroy", [](uintptr_t s) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtStreamDestroy(as_handle<rtStream_st>(s)); }
        check(e, "rtStreamDestroy");
    });
    m.def("stream_synchronize", [](uintptr_t s) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtStreamSynchronize(as_handle<rtStream_st>(s)); }
        check(e, "rtStreamSynchronize");
    });
    m.def("stream_query", [](uintptr_t s) {
        return query_result(rtStreamQuery(as_handle<rtStream_st>(s)), "rtStreamQuery");
    });
    m.def("stream_wait_event", [](uintptr_t s, uintptr_t ev) {
        check(rtStreamWaitEvent(as_handle<rtStream_st>(s), as_handle<rtEvent_st>(ev)), "rtStreamWaitEvent");
    });
    m.def("launch_host_func", [](uintptr_t s, nb::callable fn) {
        PyObject* f = fn.ptr();
        Py_INCREF(f);  // released by the trampoline after the call
        rtError_t e;
        { nb::gil_scoped_release r; e = rtLaunchHostFunc(as_handle<rtStream_st>(s), &host_func_trampoline, f); }
        if (e != RT_SUCCESS) {
            Py_DECREF(f);
            raise_error(e, "rtLaunchHostFunc");
        }
    }, "Queue a Python callable (no arguments); an exception it raises fails the stream's next synchronize.");

    // ---- events
    m.def("event_create", [](unsigned flags) {
        rtEvent_t ev = nullptr;
        check(rtEventCreateWithFlags(&ev, flags), "rtEventCreateWithFlags");
        return as_int(ev);
    }, nb::arg("flags") = 0u);
    m.def("event_destroy", [](uintptr_t ev) { check(rtEventDestroy(as_handle<rtEvent_st>(ev)), "rtEventDestroy"); });
    m.def("event_record", [](uintptr_t ev, uintptr_t s) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtEventRecord(as_handle<rtEvent_st>(ev), as_handle<rtStream_st>(s)); }
        check(e, "rtEventRecord");
    });
    m.def("event_synchronize", [](uintptr_t ev) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtEventSynchronize(as_handle<rtEvent_st>(ev)); }
        check(e, "rtEventSynchronize");
    });
    m.def("event_query", [](uintptr_t ev) {
        return query_result(rtEventQuery(as_handle<rtEvent_st>(ev)), "rtEventQuery");
    });
    m.def("event_elapsed_time", [](uintptr_t start, uintptr_t end) {
        float ms = 0;
        check(rtEventElapsedTime(&ms, as_handle<rtEvent_st>(start), as_handle<rtEvent_st>(end)), "rtEventElapsedTime");
        return ms;
    });

    // ---- memory
    m.def("malloc", [](size_t n) { void* p = nullptr; check(rtMalloc(&p, n), "rtMalloc"); return as_int(p); });
    m.def("free", [](uintptr_t p) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtFree(as_ptr(p)); }
        check(e, "rtFree");
    });
    m.def("malloc_host", [](size_t n) { void* p = nullptr; check(rtMallocHost(&p, n), "rtMallocHost"); return as_int(p); });
    m.def("free_host", [](uintptr_t p) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtFreeHost(as_ptr(p)); }  // waits for queued copies (host functions need the GIL)
        check(e, "rtFreeHost");
    });
    m.def("memcpy", [](uintptr_t dst, uintptr_t src, size_t n, int kind) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtMemcpy(as_ptr(dst), as_ptr(src), n, static_cast<rtMemcpyKind>(kind)); }
        check(e, "rtMemcpy");
    });
    m.def("memcpy_async", [](uintptr_t dst, uintptr_t src, size_t n, int kind, uintptr_t s) {
        rtError_t e;
        {
            nb::gil_scoped_release r;
            e = rtMemcpyAsync(as_ptr(dst), as_ptr(src), n, static_cast<rtMemcpyKind>(kind), as_handle<rtStream_st>(s));
        }
        check(e, "rtMemcpyAsync");
    });
    m.def("memset", [](uintptr_t p, int v, size_t n) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtMemset(as_ptr(p), v, n); }
        check(e, "rtMemset");
    });
    m.def("memset_async", [](uintptr_t p, int v, size_t n, uintptr_t s) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtMemsetAsync(as_ptr(p), v, n, as_handle<rtStream_st>(s)); }
        check(e, "rtMemsetAsync");
    });

    // ---- memory strategies and statistics (all per current device)
    m.attr("POOL_DEFAULT") = RT_POOL_DEFAULT;
    m.attr("POOL_GROW") = RT_POOL_GROW;
    m.attr("HOST_REGISTER_DEFAULT") = RT_HOST_REGISTER_DEFAULT;
    m.def("malloc_async", [](size_t n, uintptr_t s) {
        void* p = nullptr;
        rtError_t e;
        { nb::gil_scoped_release r; e = rtMallocAsync(&p, n, as_handle<rtStream_st>(s)); }  // may drain frees
        check(e, "rtMallocAsync");
        return as_int(p);
    });
    m.def("free_async", [](uintptr_t p, uintptr_t s) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtFreeAsync(as_ptr(p), as_handle<rtStream_st>(s)); }
        check(e, "rtFreeAsync");
    });
    m.def("enable_pool_allocator", [](size_t pool_size, size_t block_size, unsigned flags) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtEnablePoolAllocator(pool_size, block_size, flags); }
        check(e, "rtEnablePoolAllocator");
    }, nb::arg("pool_size"), nb::arg("block_size"), nb::arg("flags") = 0u);
    m.def("enable_memory_reuse", [](bool on) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtEnableMemoryReuse(on ? 1 : 0); }
        check(e, "rtEnableMemoryReuse");
    });
    m.def("enable_zero_copy", [](bool on) { check(rtEnableZeroCopy(on ? 1 : 0), "rtEnableZeroCopy"); });
    m.def("mem_empty_cache", [] {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtMemEmptyCache(); }
        check(e, "rtMemEmptyCache");
    });
    m.def("host_register", [](uintptr_t p, size_t n, unsigned flags) {
        check(rtHostRegister(as_ptr(p), n, flags), "rtHostRegister");
    }, nb::arg("ptr"), nb::arg("size"), nb::arg("flags") = 0u);
    m.def("host_unregister", [](uintptr_t p) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtHostUnregister(as_ptr(p)); }  // waits for queued copies
        check(e, "rtHostUnregister");
    });
    m.def("host_get_device_pointer", [](uintptr_t p, unsigned flags) {
        void* d = nullptr;
        check(rtHostGetDevicePointer(&d, as_ptr(p), flags), "rtHostGetDevicePointer");
        return as_int(d);
    }, nb::arg("host_ptr"), nb::arg("flags") = 0u);
    m.def("mem_get_stats", [] {
        rtMemStats st;
        std::memset(&st, 0, sizeof st);
        check(rtMemGetStats(&st), "rtMemGetStats");
        nb::dict d;
        d["allocated_bytes"] = st.allocated_bytes;
        d["reserved_bytes"] = st.reserved_bytes;
        d["peak_allocated_bytes"] = st.peak_allocated_bytes;
        d["peak_reserved_bytes"] = st.peak_reserved_bytes;
        d["num_allocs"] = st.num_allocs;
        d["num_frees"] = st.num_frees;
        d["num_cache_hits"] = st.num_cache_hits;
        d["num_cache_misses"] = st.num_cache_misses;
        d["num_ooms"] = st.num_ooms;
        d["largest_free_block"] = st.largest_free_block;
        d["pool_size"] = st.pool_size;
        d["num_elided_copies"] = st.num_elided_copies;
        d["elided_copy_bytes"] = st.elided_copy_bytes;
        d["num_live_allocations"] = st.num_live_allocations;
        return d;
    }, "dict of rtMemStats's fields for the current device");
    m.def("mem_reset_peak_stats", [] { check(rtMemResetPeakStats(), "rtMemResetPeakStats"); });

    // ---- modules and kernels
    m.def("module_load_source", [](const std::string& source, std::optional<std::string> options) {
        rtModule_t mod = nullptr;
        rtError_t e;
        {
            nb::gil_scoped_release r;  // compiling takes long
            e = rtModuleLoadSource(&mod, source.c_str(), options ? options->c_str() : nullptr);
        }
        check(e, "rtModuleLoadSource");
        return as_int(mod);
    }, nb::arg("source"), nb::arg("options") = nb::none());
    m.def("module_load_file", [](const std::string& path) {
        rtModule_t mod = nullptr;
        rtError_t e;
        { nb::gil_scoped_release r; e = rtModuleLoadFile(&mod, path.c_str()); }
        check(e, "rtModuleLoadFile");
        return as_int(mod);
    });
    m.def("module_get_function", [](uintptr_t mod, const std::string& name) {
        rtFunction_t f = nullptr;
        check(rtModuleGetFunction(&f, as_handle<rtModule_st>(mod), name.c_str()), "rtModuleGetFunction");
        return as_int(f);
    });
    m.def("module_unload", [](uintptr_t mod) { check(rtModuleUnload(as_handle<rtModule_st>(mod)), "rtModuleUnload"); });
    m.def("function_get_param_info", [](uintptr_t f) {
        int n = 0;
        check(rtFunctionGetParamInfo(as_handle<rtFunction_st>(f), &n, nullptr), "rtFunctionGetParamInfo");
        std::vector<size_t> sizes(static_cast<size_t>(n > 0 ? n : 0));
        if (n > 0) check(rtFunctionGetParamInfo(as_handle<rtFunction_st>(f), &n, sizes.data()), "rtFunctionGetParamInfo");
        return sizes;
    }, "list of the kernel's parameter sizes in bytes");
    // args: one 8-byte little-endian slot per argument (every dialect parameter the package passes is a scalar of
    // at most 8 bytes or a pointer). sizes: None, or the native size_t array of each argument's size (checked
    // by the library against the kernel's parameters).
    // glob: work-items per dimension (the grid rounds up to whole groups of local; the items past glob are skipped
    // where the backend can). args: one 8-byte little-endian slot per argument (every dialect parameter the package
    // passes is a scalar of at most 8 bytes or a pointer). sizes: None, or the native size_t array of each
    // argument's size (checked by the library against the kernel's parameters).
    m.def("launch_kernel", [](uintptr_t f, size_t g0, size_t g1, size_t g2, unsigned l0, unsigned l1, unsigned l2,
                              nb::bytes args, nb::object sizes, uintptr_t s) {
        const size_t nbytes = args.size();
        if (nbytes % 8 != 0) throw nb::value_error("args must hold one 8-byte slot per argument");
        const int n = static_cast<int>(nbytes / 8);
        if (n > 64) throw nb::value_error("at most 64 kernel arguments");
        void* ptrs[64];
        char* base = const_cast<char*>(args.c_str());
        for (int i = 0; i < n; ++i) ptrs[i] = base + 8 * i;
        const size_t* sz = nullptr;
        if (!sizes.is_none()) {
            nb::bytes sb = nb::cast<nb::bytes>(sizes);
            if (sb.size() != static_cast<size_t>(n) * sizeof(size_t))
                throw nb::value_error("sizes must hold one size_t per argument");
            sz = reinterpret_cast<const size_t*>(sb.c_str());
        }
        const size_t glob[3] = {g0, g1, g2};
        const unsigned local[3] = {l0, l1, l2};
        rtLaunchConfig config;
        if (!launch_config(glob, local, s, config))
            raise_error(RT_ERROR_INVALID_VALUE,
                        "launch of " + std::to_string(g0) + " x " + std::to_string(g1) + " x " + std::to_string(g2) +
                            " items in groups of " + std::to_string(l0) + " x " + std::to_string(l1) + " x " +
                            std::to_string(l2) + ": the number of groups per dimension must be 1..4294967295");
        config.num_args = n;
        config.arg_sizes = sz;
        rtError_t e;
        {
            nb::gil_scoped_release r;  // args/sizes stay alive: the caller's frame holds them
            e = rtLaunchKernelEx(as_handle<rtFunction_st>(f), &config, ptrs);
        }
        check(e, "rtLaunchKernelEx");
    });

    // ---- @runtime.jit launch plans (see LaunchPlan above)
    nb::class_<LaunchPlan>(m, "LaunchPlan",
                           "A compiled kernel's argument layout for one signature: launch() checks, packs and launches "
                           "in one call, returning the device memory to keep alive, or None (nothing launched) when "
                           "the arguments need the Python path.")
        .def(nb::init<uintptr_t, std::string, nb::list, nb::object, int, size_t, int>(), nb::arg("function"),
             nb::arg("codes"), nb::arg("expected"), nb::arg("memory_type"), nb::arg("ndim"),
             nb::arg("first_itemsize"), nb::arg("device"))
        .def_ro("device", &LaunchPlan::device)
        .def("launch", [](LaunchPlan& p, nb::handle args, uintptr_t stream) { return p.launch(args, stream, nullptr, nullptr); },
             nb::arg("args"), nb::arg("stream"), "Launch over the first buffer's element count in groups of 256.")
        .def("launch_shaped", [](LaunchPlan& p, nb::handle args, uintptr_t stream, size_t gx, size_t gy, size_t gz,
                                 unsigned lx, unsigned ly, unsigned lz) {
            const size_t g[3] = {gx, gy, gz};
            const unsigned l[3] = {lx, ly, lz};
            if (!lx || !ly || !lz) throw nb::value_error("local sizes must be positive");
            return p.launch(args, stream, g, l);
        }, nb::arg("args"), nb::arg("stream"), nb::arg("gx"), nb::arg("gy"), nb::arg("gz"), nb::arg("lx"),
             nb::arg("ly"), nb::arg("lz"), "Launch over an explicit global and local size (3 dims each).");

    // ---- DLPack
    m.def("make_dlpack", &make_dlpack_capsule, nb::arg("data"), nb::arg("shape"), nb::arg("dtype_code"),
          nb::arg("dtype_bits"), nb::arg("device_type"), nb::arg("device_id"), nb::arg("owner"),
          nb::arg("versioned"), nb::arg("read_only") = false,
          "A DLPack capsule ('dltensor_versioned' or 'dltensor') viewing `data`; keeps `owner` alive until the "
          "consumer deletes it.");
}
