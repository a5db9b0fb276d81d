// runtime._core — a thin nanobind binding of the C API (runtime.h): handles and pointers are Python ints.
//
// Contracts kept here, so the pure-Python package stays simple:
//  - every failing rt* call raises the exception class registered for its rtError_t (set_error_classes;
//    RuntimeError before registration) with "RT_ERROR_NAME: <rtGetLastErrorMessage()>" and `.code` set;
//  - every call into the library releases the GIL (only the error-string look-ups keep it): any of them may wait
//    (a full queue, a pool drain, a compile) or take a lock that a runtime thread holds while it waits for the
//    GIL to run a Python host function;
//  - RT_ERROR_NOT_READY from the *query* functions is a value (False), not an exception;
//  - objects used by queued work are kept alive on the core timeline (rtStreamDeferRelease, see "keep-alive").
#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <runtime/profiler.h>
#include <runtime/runtime.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace nb = nanobind;

void bind_dlpack(nb::module_& m);  // dlpack.cpp: make_dlpack, import_dlpack, DLPackHold
void bind_dvpp(nb::module_& m, void (*check)(rtError_t, const char*), void (*raise)(rtError_t, const std::string&),
               rtError_t (*keep)(rtStream_t, PyObject*));  // dvpp_bindings.cpp: the dvpp_* functions (dvpp.h)
void bind_profiler(nb::module_& m, void (*check)(rtError_t, const char*));  // profiler_bindings.cpp (profiler.h)
void bind_comm(nb::module_& m, void (*check)(rtError_t, const char*),
               rtError_t (*keep)(rtStream_t, PyObject*));  // comm_bindings.cpp: comm_*, group_* (comm.h)
void bind_capi20(nb::module_& m, void (*check)(rtError_t, const char*),
                 void (*drain)());  // capi20_bindings.cpp: the CUDA-level calls (runtime.h, issue 20)
void bind_mempool(nb::module_& m, void (*check)(rtError_t, const char*));  // mempool_bindings.cpp (rtMemPool_t)
void bind_ipc(nb::module_& m, void (*check)(rtError_t, const char*));  // ipc_bindings.cpp: rtIpc*

namespace {

// rtError_t -> Python exception class; filled by runtime/__init__.py through set_error_classes(). A raw, deliberately
// leaked reference: a static nb::dict would be released by a C++ static destructor after the interpreter is gone.
PyObject* g_error_classes = nullptr;

// An integer attribute set on a raised exception besides `code` (e.g. a refused graph update's `result`).
struct ExtraAttr {
    const char* name = nullptr;
    long value = 0;
};

[[noreturn]] void raise_error(rtError_t code, const std::string& detail, ExtraAttr extra = {});

// The thread's last error message, or "<api>: <the code's description>" when the library left none.
std::string last_detail(rtError_t code, const char* api) {
    const char* detail = rtGetLastErrorMessage();
    return (detail && *detail) ? std::string(detail) : std::string(api) + ": " + rtGetErrorString(code);
}

[[noreturn]] void raise_error(rtError_t code, const char* api) { raise_error(code, last_detail(code, api)); }

// rtMemStats as a dict keyed by its field names (memory_stats, device_usage).
nb::dict mem_stats_dict(const rtMemStats& st) {
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
}

// The exception class registered for `code`, with "RT_ERROR_NAME: detail" as its message.
[[noreturn]] void raise_error(rtError_t code, const std::string& detail, ExtraAttr extra) {
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
    if (extra.name) {
        PyObject* v = PyLong_FromLong(extra.value);
        PyObject_SetAttrString(exc, extra.name, v);
        Py_XDECREF(v);
    }
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

// Runs the library call `f` with the GIL released and raises its failure (the one helper every binding uses).
template <class F> inline void nogil(const char* api, F&& f) {
    rtError_t e;
    {
        nb::gil_scoped_release r;
        e = f();
    }
    check(e, api);
}

// ---- keep-alive on the core timeline
//
// Every enqueue hands the Python objects its work uses (host arrays, device memory) to rtStreamDeferRelease, which
// calls release_parked once the stream has passed that work, on a runtime thread in queue context. There the
// release must not wait, and taking the GIL is a wait (a convoy with the thread that launches), so it only parks the
// reference; a thread holding the GIL drops parked references: a pending call scheduled by the first one parked,
// every synchronize binding, and drain_releases(). After the interpreter's exit hook (python_exiting) parked
// references are leaked: decref'ing them during or after finalization could run __del__ on a dead interpreter.
// Leaked on purpose: a release may arrive during static destruction.
std::mutex* g_parked_mu = new std::mutex;
std::vector<PyObject*>* g_parked = new std::vector<PyObject*>;
std::atomic<bool> g_parked_any{false};
std::atomic<bool> g_python_gone{false};

// GIL held. Drops every parked reference (which may run __del__: no runtime lock is held here).
void drain_parked() {
    if (!g_parked_any.load(std::memory_order_acquire) || g_python_gone.load(std::memory_order_acquire)) return;
    std::vector<PyObject*> batch;
    {
        std::lock_guard<std::mutex> lock(*g_parked_mu);
        batch.swap(*g_parked);
        g_parked_any.store(false, std::memory_order_release);
    }
    for (PyObject* o : batch) Py_DECREF(o);
}

int drain_pending_call(void*) {
    drain_parked();
    return 0;
}

// The rtStreamDeferRelease callback: `user_data` is a strong reference to the kept object. Never waits.
void release_parked(void* user_data) {
    bool first;
    {
        std::lock_guard<std::mutex> lock(*g_parked_mu);
        first = g_parked->empty();
        g_parked->push_back(static_cast<PyObject*>(user_data));
        g_parked_any.store(true, std::memory_order_release);
    }
    // Py_AddPendingCall needs neither the GIL nor a thread state; a full pending queue (-1) only delays the drop
    // to the next drain point.
    if (first && !g_python_gone.load(std::memory_order_acquire) && Py_IsInitialized())
        Py_AddPendingCall(&drain_pending_call, nullptr);
}

// Called with the GIL released, right after an enqueue on `stream` succeeded: keeps `keep` (a reference the caller
// took for this) alive until the stream has passed that work. If the core refuses, the reference is leaked: the
// queued work may still use the object, so dropping it would be unsafe.
inline rtError_t defer_keep(rtStream_t stream, PyObject* keep) {
    return keep ? rtStreamDeferRelease(stream, &release_parked, keep) : RT_SUCCESS;
}

// A new reference to `keep`, or nullptr for None (nothing to keep).
inline PyObject* take_keep(nb::handle keep) {
    if (!keep.is_valid() || keep.is_none()) return nullptr;
    Py_INCREF(keep.ptr());
    return keep.ptr();
}

// An enqueue `f` followed, on success, by the deferred release of `keep` (GIL released across both); raises.
template <class F> inline void enqueue_keep(const char* api, rtStream_t stream, nb::handle keep_h, F&& f) {
    PyObject* keep = take_keep(keep_h);
    rtError_t e, k = RT_SUCCESS;
    {
        nb::gil_scoped_release r;
        e = f();
        if (e == RT_SUCCESS) k = defer_keep(stream, keep);
    }
    if (e != RT_SUCCESS) {
        Py_XDECREF(keep);
        raise_error(e, api);
    }
    check(k, "rtStreamDeferRelease");
}

// A query's status: True = complete, False = RT_ERROR_NOT_READY, anything else raises.
bool query_result(rtError_t e, const char* api) {
    if (e == RT_SUCCESS) return true;
    if (e == RT_ERROR_NOT_READY) return false;
    raise_error(e, api);
}

// Host functions: the executor thread takes the GIL, calls the Python callable, and turns an exception into
// the stream's asynchronous error (rtHostFuncSetError). The callable is borrowed: its reference belongs to the
// deferred release queued behind it (launch_host_func), so a skipped host function does not leak it.
void host_func_trampoline(void* user_data) {
    if (g_python_gone.load(std::memory_order_acquire) || !Py_IsInitialized()) {
        // The interpreter is exiting (its exit hook synchronized every stream before): not called.
        rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, "Python host function not run: the interpreter is exiting");
        return;
    }
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
}

nb::dict device_properties(int device) {
    rtDeviceProp p;
    std::memset(&p, 0, sizeof p);
    nogil("rtGetDeviceProperties", [&] { return rtGetDeviceProperties(&p, device); });
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
    d["local_memory_per_group"] = p.local_memory_per_group;
    return d;
}

// An exact-global-size launch of glob items per dimension in groups of local: the grid rounds up, and the backend
// never runs the items past glob. False if the grid does not fit 32 bits.
bool launch_config(const size_t glob[3], const unsigned local[3], uintptr_t stream, rtLaunchConfig& config) {
    config = RT_LAUNCH_CONFIG_INIT;
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

// Why launch_config refused: the message of a launch whose grid does not fit.
std::string grid_error(const size_t glob[3], const unsigned local[3]) {
    return "launch of " + std::to_string(glob[0]) + " x " + std::to_string(glob[1]) + " x " + std::to_string(glob[2]) +
           " items in groups of " + std::to_string(local[0]) + " x " + std::to_string(local[1]) + " x " +
           std::to_string(local[2]) + ": the number of groups per dimension must be 1..4294967295";
}

// ---- the argument packer of every kernel launch from Python
//
// A LaunchPlan is a kernel's argument layout: per parameter a code and a size. 'P' is device memory, a struct-style
// letter a typed scalar (a @runtime.jit signature: 'q' int64, 'f' float32, ...) and 'n' an untyped parameter of
// sizes[i] bytes (a runtime.Function, whose kernel reports only sizes): device memory, a NumPy scalar of exactly
// that size, a bool, an int or a float of 4 or 8 bytes. @runtime.jit plans add the hidden global sizes (ndim 8-byte
// values after the parameters). launch() packs the 8-byte slots on the stack and launches in one call. It runs in
// one of two modes:
//  - speculative (the @runtime.jit fast path, which tries the plan of a previous launch): every argument must have
//    exactly the type the plan was made for (for memory: the DeviceMemory class, its _dtype value, and C order:
//    _strides None); anything unusual (another type, strided or freed memory, a value that does not fit) returns
//    None *without launching*, and the caller takes its full path, which compiles for the new signature or raises;
//  - strict (the full path, and every runtime.Function launch): every argument is converted, and one that cannot
//    be raises InvalidValueError naming the kernel, the argument and why.
// Read-only memory (a read-only DLPack import) is refused for every memory parameter the kernel may write: `writes`
// says which those are (a @runtime.jit kernel knows; a runtime.Function's parameters all count as written, since
// their constness is unknown); a speculative launch declines, so the strict path says why.
struct LaunchPlan {
    uintptr_t func = 0;
    std::string name;               // the kernel's name, for error messages
    std::string codes;              // one letter per kernel parameter (without the hidden global sizes)
    std::vector<std::string> pnames;  // parameter names for error messages ("" where unknown)
    std::vector<PyObject*> want;    // owned: the _dtype value (memory) or the Python type (scalars); None for 'n'
    std::vector<size_t> sizes;      // bytes per parameter, hidden global sizes included
    PyObject* mem_type = nullptr;   // owned: runtime.DeviceMemory
    PyObject* scalar_type = nullptr;  // owned: numpy.generic
    int ndim = 0;                   // hidden global sizes: 1..3 (@runtime.jit), 0 (runtime.Function)
    int first_buf = -1;
    size_t first_itemsize = 1;
    int device = 0;
    std::vector<size_t> wide_at;  // per parameter: its offset among the parameters of more than 8 bytes
    size_t wide_bytes = 0;
    std::vector<char> writes;  // per parameter: the kernel may write the memory passed there
    // (parameter, itemsize, dimension): memory that needs at least glob[dimension] elements (a buffer a @runtime.jit
    // kernel indexes by the global id); a launch over more is refused before anything runs.
    std::vector<std::array<size_t, 3>> bounded;

    LaunchPlan(uintptr_t f, std::string kernel_name, std::string c, nb::list w, std::vector<size_t> param_sizes,
               std::vector<std::string> names, nb::object memtype, nb::object scalartype, int nd,
               size_t first_isz, int dev, std::optional<std::vector<bool>> may_write,
               std::vector<std::array<size_t, 3>> bounded_params)
        : func(f), name(std::move(kernel_name)), codes(std::move(c)), pnames(std::move(names)), ndim(nd),
          first_itemsize(first_isz ? first_isz : 1), device(dev), bounded(std::move(bounded_params)) {
        for (const auto& b : bounded)
            if (b[0] >= codes.size() || codes[b[0]] != 'P' || b[1] == 0 || b[2] > 2)
                throw nb::value_error("LaunchPlan: a bounded parameter must be memory, with an itemsize and a dimension");
        if (codes.size() != w.size() || codes.size() != param_sizes.size())
            throw nb::value_error("LaunchPlan: one expected type and one size per code");
        if (codes.size() + static_cast<size_t>(nd) > 64 || nd < 0 || nd > 3)
            throw nb::value_error("LaunchPlan: at most 64 arguments, 0..3 dims");
        pnames.resize(codes.size());
        if (may_write && may_write->size() != codes.size())
            throw nb::value_error("LaunchPlan: one `writes` flag per parameter");
        for (size_t i = 0; i < codes.size(); ++i) writes.push_back(may_write ? (*may_write)[i] : true);
        for (size_t i = 0; i < codes.size(); ++i) {
            const size_t sz = param_sizes[i];
            if (codes[i] != 'n' && sz != code_size(codes[i]))
                throw nb::value_error("LaunchPlan: a parameter's size does not match its code");
            PyObject* o = w[i].ptr();
            Py_INCREF(o);
            want.push_back(o);
            sizes.push_back(sz);
            if (codes[i] == 'P' && first_buf < 0) first_buf = static_cast<int>(i);
        }
        for (size_t i = 0; i < codes.size(); ++i) {
            wide_at.push_back(wide_bytes);
            if (sizes[i] > 8) wide_bytes += sizes[i];
        }
        for (int d = 0; d < nd; ++d) sizes.push_back(8);
        mem_type = memtype.inc_ref().ptr();
        scalar_type = scalartype.inc_ref().ptr();
    }
    ~LaunchPlan() {
        if (!Py_IsInitialized()) return;
        for (PyObject* o : want) Py_XDECREF(o);
        Py_XDECREF(mem_type);
        Py_XDECREF(scalar_type);
    }
    LaunchPlan(const LaunchPlan&) = delete;
    LaunchPlan& operator=(const LaunchPlan&) = delete;

    static size_t code_size(char c) {
        switch (c) {
            case 'P': case 'q': case 'Q': case 'd': return 8;
            case 'i': case 'I': case 'f': return 4;
            case 'h': case 'H': return 2;
            case 'b': case 'B': case '?': return 1;
            case 'n': return 0;  // untyped: sizes[i]
            default: throw nb::value_error("LaunchPlan: unknown argument code");
        }
    }
    static const char* code_type(char c) {
        switch (c) {
            case 'q': return "int64"; case 'i': return "int32"; case 'h': return "int16"; case 'b': return "int8";
            case 'Q': return "uint64"; case 'I': return "uint32"; case 'H': return "uint16"; case 'B': return "uint8";
            case 'd': return "float64"; case 'f': return "float32"; case '?': return "bool";
            default: return "device memory";
        }
    }

    // An attribute of a DeviceMemory, looked up with an interned name.
    static PyObject* attr(PyObject* o, const char* attr_name, PyObject*& cache) {
        if (!cache) cache = PyUnicode_InternFromString(attr_name);
        return PyObject_GetAttr(o, cache);  // new reference or nullptr (error set)
    }

    // Why a conversion failed: the reason for the message, or a Python error already set (raised as it is).
    struct Refusal {
        std::string why;
        bool python_error = false;
    };

    // An integer into the n low bytes of its slot. The range: signed -2^(8n-1)..2^(8n-1)-1, unsigned 0..2^(8n)-1,
    // or, either_sign, -2^(8n-1)..2^(8n)-1 (the runtime.Function rule: Python's int.to_bytes(n, signed=v < 0)).
    static bool pack_int(PyObject* o, size_t n, bool is_signed, bool either_sign, uint64_t& slot, Refusal& r) {
        PyObject* idx = PyNumber_Index(o);  // ints, NumPy integers; floats are refused (as struct does)
        if (!idx) { PyErr_Clear(); r.why = "not an integer"; return false; }
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
        bool ok = !(v == -1 && PyErr_Occurred()) && overflow >= 0;
        const bool negative = ok && overflow == 0 && v < 0;
        unsigned long long u = static_cast<unsigned long long>(v);
        if (ok && overflow > 0) {  // above LLONG_MAX: at most an unsigned 64-bit value
            u = PyLong_AsUnsignedLongLong(idx);
            ok = !(u == ~0ull && PyErr_Occurred());
        }
        PyErr_Clear();
        Py_DECREF(idx);
        const unsigned w = static_cast<unsigned>(8 * n);
        if (ok && negative) {
            ok = (is_signed || either_sign) && (w == 64 || v >= -(1ll << (w - 1)));
        } else if (ok) {
            const unsigned long long hi = (is_signed && !either_sign) ? (w == 64 ? ~0ull >> 1 : (1ull << (w - 1)) - 1)
                                                                       : (w == 64 ? ~0ull : (1ull << w) - 1);
            ok = u <= hi;
        }
        if (!ok) { r.why = "does not fit"; return false; }
        slot = n == 8 ? u : (u & ((1ull << w) - 1));
        return true;
    }

    // A float into a 4- or 8-byte slot; struct's rule: a float32 overflows only if rounding gives inf.
    static bool pack_float(PyObject* o, size_t n, uint64_t& slot, Refusal& r) {
        const double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) { PyErr_Clear(); r.why = "not a number"; return false; }
        if (n == 8) { std::memcpy(&slot, &v, 8); return true; }
        const float fv = static_cast<float>(v);
        if (std::isinf(fv) && !std::isinf(v)) { r.why = "does not fit"; return false; }
        std::memcpy(&slot, &fv, 4);
        return true;
    }

    // A scalar of a typed (@runtime.jit) parameter into its slot.
    static bool pack_typed(char code, PyObject* o, uint64_t& slot, Refusal& r) {
        slot = 0;
        switch (code) {
            case '?': {
                const int t = PyObject_IsTrue(o);
                if (t < 0) { PyErr_Clear(); r.why = "no truth value"; return false; }
                slot = static_cast<uint64_t>(t);
                return true;
            }
            case 'f': case 'd': return pack_float(o, code_size(code), slot, r);
            case 'Q': case 'I': case 'H': case 'B': return pack_int(o, code_size(code), false, false, slot, r);
            default: return pack_int(o, code_size(code), true, false, slot, r);
        }
    }

    // Whether `o` (a DeviceMemory) is read-only: only memory with extras (_ext) can be. -1: a Python error.
    static int read_only(PyObject* o) {
        static PyObject *s_ext = nullptr, *s_ro = nullptr;
        PyObject* ext = attr(o, "_ext", s_ext);
        if (!ext) return -1;
        const bool plain = ext == Py_None;
        Py_DECREF(ext);
        if (plain) return 0;
        PyObject* ro = attr(o, "readonly", s_ro);
        if (!ro) return -1;
        const int t = PyObject_IsTrue(ro);
        Py_DECREF(ro);
        return t;
    }

    // Device memory's address; freed memory: the DeviceMemory's own error (its `ptr` raises); read-only memory
    // where the kernel may write (`written`) is refused.
    bool pack_memory(PyObject* o, bool strict, bool written, uint64_t& slot, Refusal& r) const {
        static PyObject *s_ptr = nullptr, *s_raw = nullptr, *s_freed = nullptr;
        if (written) {
            const int ro = read_only(o);
            if (ro < 0) {
                if (strict) { r.python_error = true; return false; }
                PyErr_Clear();
                return false;
            }
            if (ro) {
                r.why = codes.find('n') != std::string::npos
                            ? "it is read-only, and a runtime.Function may write any memory argument (the constness "
                              "of its parameters is not known): pass a writable copy, e.g. runtime.to_device(x) "
                              "of the host array"
                            : "it is read-only, and the kernel may write this parameter: pass a writable copy, "
                              "e.g. runtime.to_device(x) of the host array";
                return false;
            }
        }
        PyObject* p;
        if (strict) {
            p = attr(o, "ptr", s_ptr);  // raises for freed memory
            if (!p) { r.python_error = true; return false; }
        } else {
            PyObject* f = attr(o, "_freed", s_freed);
            if (!f) { PyErr_Clear(); return false; }
            const bool freed = f != Py_False;
            Py_DECREF(f);
            if (freed) return false;
            p = attr(o, "_ptr", s_raw);
            if (!p) { PyErr_Clear(); return false; }
        }
        const unsigned long long v = PyLong_AsUnsignedLongLong(p);
        Py_DECREF(p);
        if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) { PyErr_Clear(); r.why = "a bad address"; return false; }
        slot = v;
        return true;
    }

    // An argument of an untyped (runtime.Function) parameter of n bytes into its slot.
    bool pack_untyped(PyObject* o, size_t n, bool written, uint64_t& slot, Refusal& r) const {
        slot = 0;
        if (n < 1 || n > 8) { r.why = "a parameter of " + std::to_string(n) + " bytes"; return false; }
        const auto size_refusal = [&](size_t have) {
            r.why = "it is " + std::to_string(have) + (have == 1 ? " byte" : " bytes");
            return false;
        };
        if (PyObject_IsInstance(o, mem_type) == 1) {
            if (n != 8) return size_refusal(8);
            return pack_memory(o, true, written, slot, r);
        }
        if (PyObject_IsInstance(o, scalar_type) == 1) {  // a NumPy scalar: its exact bytes (before float: float64 is one)
            Py_buffer view;
            if (PyObject_GetBuffer(o, &view, PyBUF_SIMPLE) != 0) { PyErr_Clear(); r.why = "no bytes"; return false; }
            const size_t have = static_cast<size_t>(view.len);
            if (have == n) std::memcpy(&slot, view.buf, n);
            PyBuffer_Release(&view);
            return have == n ? true : size_refusal(have);
        }
        PyErr_Clear();
        if (PyBool_Check(o)) {
            if (n != 1) return size_refusal(1);
            slot = o == Py_True;
            return true;
        }
        if (PyLong_Check(o)) return pack_int(o, n, true, true, slot, r);
        if (PyFloat_Check(o) && (n == 4 || n == 8)) return pack_float(o, n, slot, r);
        r.why = std::string("type ") + Py_TYPE(o)->tp_name;
        return false;
    }

    // An argument of an untyped parameter of more than 8 bytes (a struct, an rt_float4: issue 13) into `dst`: the
    // exact bytes of a NumPy scalar (a structured np.void, np.complex128, ...) or of a bytes-like object of that size.
    bool pack_bytes(PyObject* o, size_t n, unsigned char* dst, Refusal& r) const {
        if (PyObject_IsInstance(o, mem_type) == 1) {
            r.why = "it is 8 bytes";
            return false;
        }
        PyErr_Clear();
        if (PyObject_IsInstance(o, scalar_type) != 1 && !PyBytes_Check(o) && !PyByteArray_Check(o) && !PyMemoryView_Check(o)) {
            PyErr_Clear();
            r.why = std::string("type ") + Py_TYPE(o)->tp_name + "; a parameter of more than 8 bytes takes a NumPy scalar "
                    "(e.g. a structured np.void) or bytes of its size";
            return false;
        }
        Py_buffer view;
        if (PyObject_GetBuffer(o, &view, PyBUF_SIMPLE) != 0) { PyErr_Clear(); r.why = "no bytes"; return false; }
        const size_t have = static_cast<size_t>(view.len);
        if (have == n) std::memcpy(dst, view.buf, n);
        PyBuffer_Release(&view);
        if (have != n) r.why = "it is " + std::to_string(have) + (have == 1 ? " byte" : " bytes");
        return have == n;
    }

    // Raises InvalidValueError: "kernel 'k' argument 2 ('n'): cannot pass 1e+300 as float32 (does not fit)".
    [[noreturn]] void refuse(size_t i, PyObject* o, const Refusal& r) const {
        if (r.python_error) throw nb::python_error();
        std::string what;
        if (codes[i] == 'n') what = "a " + std::to_string(sizes[i]) + "-byte parameter";
        else what = code_type(codes[i]);
        std::string shown = "?";
        if (PyObject* rep = PyObject_Repr(o)) {
            if (const char* u = PyUnicode_AsUTF8(rep)) shown = u;
            Py_DECREF(rep);
        }
        PyErr_Clear();
        if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
        std::string msg = "kernel '" + name + "' argument " + std::to_string(i);
        if (!pnames[i].empty()) msg += " ('" + pnames[i] + "')";
        raise_error(RT_ERROR_INVALID_VALUE, msg + ": cannot pass " + shown + " as " + what + " (" + r.why + ")");
    }

    // glob/local: 3 dims each, or glob_in == nullptr for "the first buffer's element count" (1-D, groups of 256).
    // `also`: None, or an object kept alive with the launch besides the arguments (a Function's Module, whose code
    // it runs; passed per launch: a plan holding it would make a cycle the GC cannot see through).
    // True once launched (or nothing to run); None when a speculative launch declines.
    nb::object launch(nb::handle args_h, uintptr_t stream, const size_t* glob_in, const unsigned* local_in,
                      bool strict, nb::handle also = nb::handle()) {
        static PyObject *s_dtype = nullptr, *s_nbytes = nullptr, *s_strides = nullptr;
        PyObject* args = args_h.ptr();
        if (!PyTuple_Check(args)) {
            if (strict) throw nb::type_error("LaunchPlan: the arguments must be a tuple");
            return nb::none();
        }
        const size_t n = static_cast<size_t>(PyTuple_GET_SIZE(args));
        if (n != codes.size()) {
            if (strict)
                raise_error(RT_ERROR_INVALID_VALUE, "kernel '" + name + "' takes " + std::to_string(codes.size()) +
                                                        " argument(s), got " + std::to_string(n));
            return nb::none();
        }
        size_t glob[3];
        unsigned local[3];
        if (glob_in) {
            for (int d = 0; d < 3; ++d) { glob[d] = glob_in[d]; local[d] = local_in[d]; }
        } else {
            // no buffer to size from: the caller checks that before a strict launch (the Python path raises)
            if (first_buf < 0 || ndim != 1) {
                if (strict) throw nb::value_error("LaunchPlan: no buffer argument to take the global size from");
                return nb::none();
            }
            PyObject* first = PyTuple_GET_ITEM(args, first_buf);
            if (!strict && Py_TYPE(first) != reinterpret_cast<PyTypeObject*>(mem_type)) return nb::none();
            PyObject* nb_ = attr(first, "nbytes", s_nbytes);
            if (!nb_) {
                if (strict) throw nb::python_error();
                PyErr_Clear();
                return nb::none();
            }
            size_t nbytes = PyLong_AsSize_t(nb_);
            Py_DECREF(nb_);
            if (nbytes == static_cast<size_t>(-1) && PyErr_Occurred()) {
                if (strict) throw nb::python_error();
                PyErr_Clear();
                return nb::none();
            }
            glob[0] = nbytes / first_itemsize; glob[1] = glob[2] = 1;
            local[0] = 256; local[1] = local[2] = 1;
        }
        const bool empty = glob[0] == 0 || glob[1] == 0 || glob[2] == 0;
        if (strict && empty) return nb::bool_(true);  // nothing to run: the arguments are not looked at
        for (const auto& b : bounded) {  // more items than elements: refused (a speculative launch declines)
            PyObject* o = PyTuple_GET_ITEM(args, b[0]);
            if (PyObject_IsInstance(o, mem_type) != 1) {
                PyErr_Clear();
                if (!strict) return nb::none();
                continue;  // the packer below says what is wrong with it
            }
            PyObject* nb_ = attr(o, "nbytes", s_nbytes);
            const size_t nbytes = nb_ ? PyLong_AsSize_t(nb_) : static_cast<size_t>(-1);
            Py_XDECREF(nb_);
            if (nbytes == static_cast<size_t>(-1) && PyErr_Occurred()) {
                PyErr_Clear();
                if (!strict) return nb::none();
                continue;  // freed memory: the packer raises its own error
            }
            const size_t elements = nbytes / b[1];
            if (elements >= glob[b[2]]) continue;
            if (!strict) return nb::none();
            // Worded as launch_size_message (python/runtime/jit/kernel.py), which checks the reference mode's launches.
            const std::string pname = pnames[b[0]].empty() ? std::to_string(b[0]) : pnames[b[0]];
            raise_error(RT_ERROR_INVALID_VALUE,
                        "kernel '" + name + "': global size " + std::to_string(glob[b[2]]) +
                            (b[2] ? " in dimension " + std::to_string(b[2]) : std::string()) + " is larger than buffer '" +
                            pname + "' (argument " + std::to_string(b[0]) + "), which has " + std::to_string(elements) +
                            " element(s) and is indexed by the global id (" + pname + "[i]): pass a global_size of at "
                            "most " + std::to_string(elements) + ", or a larger buffer");
        }
        uint64_t slots[64];
        int nbufs = 0;
        Refusal why;
        std::vector<unsigned char> wide(wide_bytes);  // parameters of more than 8 bytes (none: no allocation)
        for (size_t i = 0; i < n; ++i) {
            PyObject* o = PyTuple_GET_ITEM(args, i);
            const char c = codes[i];
            bool ok;
            if (c == 'n' && sizes[i] > 8) {
                ok = pack_bytes(o, sizes[i], wide.data() + wide_at[i], why);
            } else if (c == 'n') {
                ok = pack_untyped(o, sizes[i], writes[i] != 0, slots[i], why);
            } else if (c == 'P') {
                if (strict) {
                    ok = PyObject_IsInstance(o, mem_type) == 1;
                    if (!ok) { PyErr_Clear(); why.why = std::string("type ") + Py_TYPE(o)->tp_name; }
                } else {
                    if (Py_TYPE(o) != reinterpret_cast<PyTypeObject*>(mem_type)) return nb::none();
                    PyObject* dt = attr(o, "_dtype", s_dtype);
                    if (!dt) { PyErr_Clear(); return nb::none(); }
                    int same = dt == want[i] ? 1 : PyObject_RichCompareBool(dt, want[i], Py_EQ);
                    Py_DECREF(dt);
                    if (same != 1) { PyErr_Clear(); return nb::none(); }
                    // Strided memory (_strides not None) declines: a plan made from C-contiguous memory would index
                    // it flat; the full path refuses it or specialises on its layout.
                    PyObject* st = attr(o, "_strides", s_strides);
                    if (!st) { PyErr_Clear(); return nb::none(); }
                    const bool contiguous = st == Py_None;
                    Py_DECREF(st);
                    if (!contiguous) return nb::none();
                    ok = true;
                }
                ok = ok && pack_memory(o, strict, writes[i] != 0, slots[i], why);
                ++nbufs;
            } else {
                if (!strict && reinterpret_cast<PyObject*>(Py_TYPE(o)) != want[i]) return nb::none();
                ok = pack_typed(c, o, slots[i], why);
            }
            if (!ok) {
                if (strict) refuse(i, o, why);
                PyErr_Clear();
                return nb::none();
            }
        }
        if (empty) return nb::bool_(true);  // nothing to run
        for (int d = 0; d < ndim; ++d) slots[n + d] = glob[d];
        void* ptrs[64];
        const size_t total = n + static_cast<size_t>(ndim);
        for (size_t i = 0; i < total; ++i) ptrs[i] = i < n && sizes[i] > 8 ? static_cast<void*>(wide.data() + wide_at[i]) : &slots[i];
        rtLaunchConfig config;
        if (!launch_config(glob, local, stream, config)) {
            if (strict) raise_error(RT_ERROR_INVALID_VALUE, grid_error(glob, local));
            return nb::none();  // out of range: the full path reports it
        }
        config.num_args = static_cast<int>(total);
        config.arg_sizes = sizes.data();
        // The buffers stay alive until the launch has run: the argument tuple itself is kept (one reference, no
        // new object), which holds them; with `also`, both are.
        nb::object both;
        nb::handle keep = nbufs ? nb::handle(args) : nb::handle();
        if (also.is_valid() && !also.is_none()) {
            both = nb::make_tuple(nb::handle(args), also);
            keep = both;
        }
        rtStream_t st = as_handle<rtStream_st>(stream);
        enqueue_keep("rtLaunchKernelEx", st, keep,
                     [&] { return rtLaunchKernelEx(as_handle<rtFunction_st>(func), &config, ptrs); });
        return nb::bool_(true);
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
    // rtDataType (DVPP's and the collectives' element types)
    struct NamedType {
        const char* name;
        rtDataType value;
    };
    static const NamedType data_types[] = {{"DATA_INT8", RT_INT8},       {"DATA_UINT8", RT_UINT8},
                                           {"DATA_INT32", RT_INT32},     {"DATA_UINT32", RT_UINT32},
                                           {"DATA_INT64", RT_INT64},     {"DATA_UINT64", RT_UINT64},
                                           {"DATA_FLOAT16", RT_FLOAT16}, {"DATA_FLOAT32", RT_FLOAT32},
                                           {"DATA_FLOAT64", RT_FLOAT64}, {"DATA_BFLOAT16", RT_BFLOAT16}};
    for (const NamedType& t : data_types) m.attr(t.name) = static_cast<int>(t.value);
    m.attr("VERSION") = nb::make_tuple(RUNTIME_VERSION_MAJOR, RUNTIME_VERSION_MINOR, RUNTIME_VERSION_PATCH);
    nb::dict codes;
    for (rtError_t c : {RT_SUCCESS, RT_ERROR_INVALID_VALUE, RT_ERROR_INVALID_DEVICE, RT_ERROR_INVALID_HANDLE,
                        RT_ERROR_OUT_OF_MEMORY, RT_ERROR_NOT_READY, RT_ERROR_COMPILE_FAILED, RT_ERROR_LAUNCH_FAILED,
                        RT_ERROR_NOT_SUPPORTED, RT_ERROR_NOT_FOUND, RT_ERROR_NOT_PERMITTED,
                        RT_ERROR_STREAM_CAPTURE_UNSUPPORTED, RT_ERROR_STREAM_CAPTURE_INVALIDATED,
                        RT_ERROR_STREAM_CAPTURE_UNJOINED, RT_ERROR_STREAM_CAPTURE_IMPLICIT,
                        RT_ERROR_STREAM_CAPTURE_WRONG_THREAD, RT_ERROR_STREAM_CAPTURE_ISOLATION,
                        RT_ERROR_CAPTURED_EVENT, RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, RT_ERROR_ILLEGAL_STATE,
                        RT_ERROR_INVALID_IMAGE, RT_ERROR_TIMEOUT, RT_ERROR_NOT_INITIALIZED, RT_ERROR_DEVICE_LOST,
                        RT_ERROR_UNKNOWN})
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
        nogil("rtInit", [&] { return rtInit(options ? options->c_str() : nullptr); });
    }, nb::arg("options") = nb::none());
    m.def("finalize", [] {
        nogil("rtFinalize", [] { return rtFinalize(); });
        drain_parked();  // rtFinalize ran every pending release
    });
    m.def("get_device_count", [] {
        int n = 0;
        nogil("rtGetDeviceCount", [&] { return rtGetDeviceCount(&n); });
        return n;
    });
    m.def("set_device", [](int d) { nogil("rtSetDevice", [&] { return rtSetDevice(d); }); });
    m.def("get_device_by_name", [](const std::string& name) {
        int d = -1;
        nogil("rtGetDeviceByName", [&] { return rtGetDeviceByName(&d, name.c_str()); });
        return d;
    }, nb::arg("name"), "Index of the device named 'cpu:0', 'cuda:1' or 'cuda' (rtGetDeviceByName).");
    m.def("get_device", [] {
        int d = 0;
        nogil("rtGetDevice", [&] { return rtGetDevice(&d); });
        return d;
    });
    m.def("get_device_properties", &device_properties, "dict of rtDeviceProp's fields");
    m.def("device_synchronize", [] {
        nogil("rtDeviceSynchronize", [] { return rtDeviceSynchronize(); });
        drain_parked();
    });
    m.def("mem_get_info", [] {
        size_t f = 0, t = 0;
        nogil("rtMemGetInfo", [&] { return rtMemGetInfo(&f, &t); });
        return nb::make_tuple(f, t);
    });

    // ---- keep-alive (see "keep-alive on the core timeline" above)
    m.def("defer_release", [](uintptr_t s, nb::handle keep) {
        rtStream_t st = as_handle<rtStream_st>(s);
        enqueue_keep("rtStreamDeferRelease", st, keep, [] { return RT_SUCCESS; });
    }, nb::arg("stream"), nb::arg("keep"),
          "Keep `keep` alive until every operation queued on the stream so far has completed (rtStreamDeferRelease).");
    m.def("drain_releases", [] { drain_parked(); },
          "Drop the references whose deferred release has arrived (also done by a pending call and by synchronize).");
    m.def("python_exiting", [] {
        drain_parked();
        g_python_gone.store(true, std::memory_order_release);
    }, "The interpreter is exiting: from now on releases and host functions leave Python objects alone (leaked).");

    // ---- streams
    m.def("stream_create", [](unsigned flags) {
        rtStream_t s = nullptr;
        nogil("rtStreamCreateWithFlags", [&] { return rtStreamCreateWithFlags(&s, flags); });
        return as_int(s);
    }, nb::arg("flags") = 0u);
    m.def("stream_destroy", [](uintptr_t s) {
        nogil("rtStreamDestroy", [&] { return rtStreamDestroy(as_handle<rtStream_st>(s)); });
    });
    m.def("stream_synchronize", [](uintptr_t s) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtStreamSynchronize(as_handle<rtStream_st>(s)); }
        drain_parked();  // the releases of the completed work, also when it failed
        check(e, "rtStreamSynchronize");
    });
    m.def("stream_query", [](uintptr_t s) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtStreamQuery(as_handle<rtStream_st>(s)); }
        drain_parked();
        return query_result(e, "rtStreamQuery");
    });
    m.def("stream_wait_event", [](uintptr_t s, uintptr_t ev) {
        nogil("rtStreamWaitEvent", [&] { return rtStreamWaitEvent(as_handle<rtStream_st>(s), as_handle<rtEvent_st>(ev)); });
    });
    m.def("stream_wait_native_stream", [](uintptr_t s, uintptr_t native) {
        nogil("rtStreamWaitNativeStream",
              [&] { return rtStreamWaitNativeStream(as_handle<rtStream_st>(s), reinterpret_cast<void*>(native)); });
    }, nb::arg("stream"), nb::arg("native_stream"),
          "rtStreamWaitNativeStream: work queued on `stream` later waits for the work queued so far on the backend's "
          "own stream `native_stream` (a CUstream as an int).");
    m.def("launch_host_func", [](uintptr_t s, nb::callable fn) {
        // The callable is kept by a deferred release queued right behind it: dropped once the stream has
        // passed the host function, whether it ran or was skipped behind a failure.
        rtStream_t st = as_handle<rtStream_st>(s);
        PyObject* f = fn.ptr();
        enqueue_keep("rtLaunchHostFunc", st, fn, [&] { return rtLaunchHostFunc(st, &host_func_trampoline, f); });
    }, "Queue a Python callable (no arguments); an exception it raises fails the stream's next synchronize.");

    // ---- events
    m.def("event_create", [](unsigned flags) {
        rtEvent_t ev = nullptr;
        nogil("rtEventCreateWithFlags", [&] { return rtEventCreateWithFlags(&ev, flags); });
        return as_int(ev);
    }, nb::arg("flags") = 0u);
    m.def("event_destroy", [](uintptr_t ev) {
        nogil("rtEventDestroy", [&] { return rtEventDestroy(as_handle<rtEvent_st>(ev)); });
    });
    m.def("event_record", [](uintptr_t ev, uintptr_t s) {
        nogil("rtEventRecord", [&] { return rtEventRecord(as_handle<rtEvent_st>(ev), as_handle<rtStream_st>(s)); });
    });
    m.def("event_synchronize", [](uintptr_t ev) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtEventSynchronize(as_handle<rtEvent_st>(ev)); }
        drain_parked();
        check(e, "rtEventSynchronize");
    });
    m.def("event_query", [](uintptr_t ev) {
        rtError_t e;
        { nb::gil_scoped_release r; e = rtEventQuery(as_handle<rtEvent_st>(ev)); }
        return query_result(e, "rtEventQuery");
    });
    m.def("event_elapsed_time", [](uintptr_t start, uintptr_t end) {
        float ms = 0;
        nogil("rtEventElapsedTime", [&] {
            return rtEventElapsedTime(&ms, as_handle<rtEvent_st>(start), as_handle<rtEvent_st>(end));
        });
        return ms;
    });

    // ---- memory
    m.def("malloc", [](size_t n) {
        void* p = nullptr;
        nogil("rtMalloc", [&] { return rtMalloc(&p, n); });  // may drain pending frees under pool pressure
        return as_int(p);
    });
    m.def("malloc_current", [](size_t n) {
        void* p = nullptr;
        int d = 0;
        nogil("rtMalloc", [&] {
            rtError_t e = rtGetDevice(&d);
            return e == RT_SUCCESS ? rtMalloc(&p, n) : e;
        });
        return nb::make_tuple(as_int(p), d);
    }, "(pointer, current device): rtMalloc on the current device and its index, in one call.");
    m.def("free", [](uintptr_t p) { nogil("rtFree", [&] { return rtFree(as_ptr(p)); }); });
    m.def("malloc_host", [](size_t n) {
        void* p = nullptr;
        nogil("rtMallocHost", [&] { return rtMallocHost(&p, n); });
        return as_int(p);
    });
    m.def("free_host", [](uintptr_t p) { nogil("rtFreeHost", [&] { return rtFreeHost(as_ptr(p)); }); });
    m.def("memcpy", [](uintptr_t dst, uintptr_t src, size_t n, int kind) {
        nogil("rtMemcpy", [&] { return rtMemcpy(as_ptr(dst), as_ptr(src), n, static_cast<rtMemcpyKind>(kind)); });
    });
    m.def("memcpy_async", [](uintptr_t dst, uintptr_t src, size_t n, int kind, uintptr_t s, nb::handle keep) {
        rtStream_t st = as_handle<rtStream_st>(s);
        enqueue_keep("rtMemcpyAsync", st, keep, [&] {
            return rtMemcpyAsync(as_ptr(dst), as_ptr(src), n, static_cast<rtMemcpyKind>(kind), st);
        });
    }, nb::arg("dst"), nb::arg("src"), nb::arg("count"), nb::arg("kind"), nb::arg("stream"),
          nb::arg("keep") = nb::none(), "rtMemcpyAsync; `keep` (if not None) stays alive until the copy has run.");
    m.def("memcpy_array_async", [](uintptr_t dev, size_t dev_nbytes, nb::handle array, bool to_device, uintptr_t s,
                                   nb::handle keep) {
        // The launch_copy fast path: the host side's bytes come from the buffer protocol here (numpy's
        // .ctypes.data costs more than the whole copy). False, with nothing queued, when the buffer is not
        // C-contiguous (or not writable as a destination) or does not fit: the Python path then reports why.
        Py_buffer view;
        const int flags = PyBUF_C_CONTIGUOUS | (to_device ? 0 : PyBUF_WRITABLE);
        if (PyObject_GetBuffer(array.ptr(), &view, flags) != 0) {
            PyErr_Clear();
            return false;
        }
        const size_t n = static_cast<size_t>(view.len);
        void* host = view.buf;
        PyBuffer_Release(&view);  // `keep` holds the exporter until the copy has run
        if (n > dev_nbytes) return false;
        if (n == 0) return true;
        rtStream_t st = as_handle<rtStream_st>(s);
        enqueue_keep("rtMemcpyAsync", st, keep, [&] {
            return to_device ? rtMemcpyAsync(as_ptr(dev), host, n, RT_MEMCPY_HOST_TO_DEVICE, st)
                             : rtMemcpyAsync(host, as_ptr(dev), n, RT_MEMCPY_DEVICE_TO_HOST, st);
        });
        return true;
    }, nb::arg("device_ptr"), nb::arg("device_nbytes"), nb::arg("array"), nb::arg("to_device"), nb::arg("stream"),
          nb::arg("keep"));
    m.def("memset", [](uintptr_t p, int v, size_t n) {
        nogil("rtMemset", [&] { return rtMemset(as_ptr(p), v, n); });
    });
    m.def("memset_async", [](uintptr_t p, int v, size_t n, uintptr_t s, nb::handle keep) {
        rtStream_t st = as_handle<rtStream_st>(s);
        enqueue_keep("rtMemsetAsync", st, keep, [&] { return rtMemsetAsync(as_ptr(p), v, n, st); });
    }, nb::arg("ptr"), nb::arg("value"), nb::arg("count"), nb::arg("stream"), nb::arg("keep") = nb::none());

    // ---- memory strategies and statistics (all per current device)
    m.attr("POOL_DEFAULT") = RT_POOL_DEFAULT;
    m.attr("POOL_GROW") = RT_POOL_GROW;
    m.attr("HOST_REGISTER_DEFAULT") = RT_HOST_REGISTER_DEFAULT;
    m.def("malloc_async", [](size_t n, uintptr_t s) {
        void* p = nullptr;
        nogil("rtMallocAsync", [&] { return rtMallocAsync(&p, n, as_handle<rtStream_st>(s)); });
        return as_int(p);
    });
    m.def("free_async", [](uintptr_t p, uintptr_t s) {
        nogil("rtFreeAsync", [&] { return rtFreeAsync(as_ptr(p), as_handle<rtStream_st>(s)); });
    });
    m.def("enable_pool_allocator", [](size_t pool_size, size_t block_size, unsigned flags) {
        nogil("rtEnablePoolAllocator", [&] { return rtEnablePoolAllocator(pool_size, block_size, flags); });
    }, nb::arg("pool_size"), nb::arg("block_size"), nb::arg("flags") = 0u);
    m.def("enable_memory_reuse", [](bool on) {
        nogil("rtEnableMemoryReuse", [&] { return rtEnableMemoryReuse(on ? 1 : 0); });
    });
    m.def("enable_zero_copy", [](bool on) {
        nogil("rtEnableZeroCopy", [&] { return rtEnableZeroCopy(on ? 1 : 0); });
    });
    m.def("mem_empty_cache", [] { nogil("rtMemEmptyCache", [] { return rtMemEmptyCache(); }); });
    m.def("host_register", [](uintptr_t p, size_t n, unsigned flags) {
        nogil("rtHostRegister", [&] { return rtHostRegister(as_ptr(p), n, flags); });
    }, nb::arg("ptr"), nb::arg("size"), nb::arg("flags") = 0u);
    m.def("host_unregister", [](uintptr_t p) {
        nogil("rtHostUnregister", [&] { return rtHostUnregister(as_ptr(p)); });
    });
    m.def("host_get_device_pointer", [](uintptr_t p, unsigned flags) {
        void* d = nullptr;
        nogil("rtHostGetDevicePointer", [&] { return rtHostGetDevicePointer(&d, as_ptr(p), flags); });
        return as_int(d);
    }, nb::arg("host_ptr"), nb::arg("flags") = 0u);
    m.def("mem_get_stats", [] {
        rtMemStats st;
        std::memset(&st, 0, sizeof st);
        nogil("rtMemGetStats", [&] { return rtMemGetStats(&st); });
        return mem_stats_dict(st);
    }, "dict of rtMemStats's fields for the current device");
    m.def("device_usage", [](int device) {
        rtDeviceUsage u;
        std::memset(&u, 0, sizeof u);
        rtDeviceProp p;
        std::memset(&p, 0, sizeof p);
        nogil("rtDeviceGetUsage", [&] { return rtDeviceGetUsage(device, &u); });
        nogil("rtGetDeviceProperties", [&] { return rtGetDeviceProperties(&p, device); });
        // The keys of a device in runtime-smi's status file (docs/observability.md), "label" included.
        nb::dict d;
        d["device"] = u.device;
        d["label"] = std::string(u.backend) + ":" + std::to_string(p.backend_ordinal);
        d["name"] = std::string(u.name);
        d["backend"] = std::string(u.backend);
        d["memory_total"] = u.memory_total;
        d["memory"] = mem_stats_dict(u.memory);
        d["streams"] = u.streams;
        d["operations"] = u.operations;
        d["kernels_launched"] = u.kernels_launched;
        return d;
    }, nb::arg("device"), "dict of rtDeviceUsage's fields for `device` (rtDeviceGetUsage), and its label 'cpu:0'");
    m.def("mem_reset_peak_stats", [] { nogil("rtMemResetPeakStats", [] { return rtMemResetPeakStats(); }); });
    m.def("bench_malloc_free", [](size_t bytes, size_t iterations) {
        // The C figure beside the Python one (bench/bench_python.py): rtMalloc + rtFree pairs, timed in C++.
        double ns = 0;
        nogil("rtMalloc", [&] {
            const auto t0 = std::chrono::steady_clock::now();
            for (size_t i = 0; i < iterations; ++i) {
                void* p = nullptr;
                if (rtError_t e = rtMalloc(&p, bytes); e != RT_SUCCESS) return e;
                if (rtError_t e = rtFree(p); e != RT_SUCCESS) return e;
            }
            ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
            return RT_SUCCESS;
        });
        return iterations ? ns / 1000.0 / static_cast<double>(iterations) : 0.0;
    }, nb::arg("bytes"), nb::arg("iterations"), "µs per rtMalloc + rtFree pair of `bytes`, looped in C++.");
    m.def("bench_copy_sync", [](uintptr_t dst, uintptr_t src, size_t n, int kind, uintptr_t s, size_t iterations) {
        // The C figure beside the Python one: rtMemcpyAsync of n bytes + rtStreamSynchronize, looped in C++.
        double ns = 0;
        nogil("rtMemcpyAsync", [&] {
            rtStream_t st = as_handle<rtStream_st>(s);
            const auto t0 = std::chrono::steady_clock::now();
            for (size_t i = 0; i < iterations; ++i) {
                if (rtError_t e = rtMemcpyAsync(as_ptr(dst), as_ptr(src), n, static_cast<rtMemcpyKind>(kind), st);
                    e != RT_SUCCESS)
                    return e;
                if (rtError_t e = rtStreamSynchronize(st); e != RT_SUCCESS) return e;
            }
            ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
            return RT_SUCCESS;
        });
        return iterations ? ns / 1000.0 / static_cast<double>(iterations) : 0.0;
    }, "µs per rtMemcpyAsync + rtStreamSynchronize pair, looped in C++.");

    // ---- modules and kernels
    m.def("module_load_source", [](const std::string& source, std::optional<std::string> options) {
        rtModule_t mod = nullptr;
        nogil("rtModuleLoadSource",
              [&] { return rtModuleLoadSource(&mod, source.c_str(), options ? options->c_str() : nullptr); });
        return as_int(mod);
    }, nb::arg("source"), nb::arg("options") = nb::none());
    m.def("module_load_file", [](const std::string& path) {
        rtModule_t mod = nullptr;
        nogil("rtModuleLoadFile", [&] { return rtModuleLoadFile(&mod, path.c_str()); });
        return as_int(mod);
    });
    m.def("module_get_function", [](uintptr_t mod, const std::string& name) {
        rtFunction_t f = nullptr;
        nogil("rtModuleGetFunction", [&] { return rtModuleGetFunction(&f, as_handle<rtModule_st>(mod), name.c_str()); });
        return as_int(f);
    });
    m.def("module_get_global", [](uintptr_t mod, const std::string& name) {
        void* ptr = nullptr;
        size_t bytes = 0;
        nogil("rtModuleGetGlobal", [&] { return rtModuleGetGlobal(&ptr, &bytes, as_handle<rtModule_st>(mod), name.c_str()); });
        return nb::make_tuple(as_int(ptr), bytes);
    });
    m.def("module_unload", [](uintptr_t mod) {
        nogil("rtModuleUnload", [&] { return rtModuleUnload(as_handle<rtModule_st>(mod)); });
    });
    m.def("function_get_param_info", [](uintptr_t f) {
        int n = 0;
        nogil("rtFunctionGetParamInfo", [&] { return rtFunctionGetParamInfo(as_handle<rtFunction_st>(f), &n, nullptr); });
        std::vector<size_t> sizes(static_cast<size_t>(n > 0 ? n : 0));
        if (n > 0)
            nogil("rtFunctionGetParamInfo",
                  [&] { return rtFunctionGetParamInfo(as_handle<rtFunction_st>(f), &n, sizes.data()); });
        return sizes;
    }, "list of the kernel's parameter sizes in bytes");
    // glob: work-items per dimension (the grid rounds up to whole groups of local; the items past glob are skipped
    // where the backend can). args: one 8-byte little-endian slot per argument (every dialect parameter the package
    // passes is a scalar of at most 8 bytes or a pointer). sizes: None, or the native size_t array of each
    // argument's size (checked by the library against the kernel's parameters).
    m.def("launch_kernel", [](uintptr_t f, size_t g0, size_t g1, size_t g2, unsigned l0, unsigned l1, unsigned l2,
                              nb::bytes args, nb::object sizes, uintptr_t s, nb::handle keep) {
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
        rtStream_t st = as_handle<rtStream_st>(s);  // args/sizes stay alive across the call: the caller holds them
        enqueue_keep("rtLaunchKernelEx", st, keep, [&] { return rtLaunchKernelEx(as_handle<rtFunction_st>(f), &config, ptrs); });
    }, nb::arg("function"), nb::arg("gx"), nb::arg("gy"), nb::arg("gz"), nb::arg("lx"), nb::arg("ly"), nb::arg("lz"),
          nb::arg("args"), nb::arg("sizes"), nb::arg("stream"), nb::arg("keep") = nb::none(),
          "rtLaunchKernelEx; `keep` (if not None) stays alive until the launch has run.");

    // ---- launch plans: the one argument packer of @runtime.jit kernels and runtime.Function (see LaunchPlan above)
    nb::class_<LaunchPlan>(m, "LaunchPlan",
                           "A kernel's argument layout: launch() packs and launches in one call and returns True; a "
                           "speculative launch returns None (nothing launched) when the arguments are not exactly "
                           "the plan's types, a strict one raises InvalidValueError for an argument it cannot pass.")
        .def(nb::init<uintptr_t, std::string, std::string, nb::list, std::vector<size_t>, std::vector<std::string>,
                      nb::object, nb::object, int, size_t, int, std::optional<std::vector<bool>>,
                      std::vector<std::array<size_t, 3>>>(),
             nb::arg("function"), nb::arg("name"), nb::arg("codes"), nb::arg("expected"), nb::arg("sizes"),
             nb::arg("names"), nb::arg("memory_type"), nb::arg("scalar_type"), nb::arg("ndim"),
             nb::arg("first_itemsize"), nb::arg("device"), nb::arg("writes") = nb::none(),
             nb::arg("bounded") = std::vector<std::array<size_t, 3>>())
        .def_ro("device", &LaunchPlan::device)
        .def("launch", [](LaunchPlan& p, nb::handle args, uintptr_t stream) {
            return p.launch(args, stream, nullptr, nullptr, false);
        }, nb::arg("args"), nb::arg("stream"),
             "Speculative launch over the first buffer's element count in groups of 256 (the hot path: no options).")
        .def("launch_strict", [](LaunchPlan& p, nb::handle args, uintptr_t stream) {
            return p.launch(args, stream, nullptr, nullptr, true);
        }, nb::arg("args"), nb::arg("stream"), "Strict launch over the first buffer's element count in groups of 256.")
        .def("launch_shaped", [](LaunchPlan& p, nb::handle args, uintptr_t stream, size_t gx, size_t gy, size_t gz,
                                 unsigned lx, unsigned ly, unsigned lz, bool strict, nb::handle also) {
            const size_t g[3] = {gx, gy, gz};
            const unsigned l[3] = {lx, ly, lz};
            if (!lx || !ly || !lz) throw nb::value_error("local sizes must be positive");
            return p.launch(args, stream, g, l, strict, also);
        }, nb::arg("args"), nb::arg("stream"), nb::arg("gx"), nb::arg("gy"), nb::arg("gz"), nb::arg("lx"),
             nb::arg("ly"), nb::arg("lz"), nb::arg("strict") = false, nb::arg("also") = nb::none(),
             "Launch over an explicit global and local size (3 dims each); `also` (if not None) stays alive with "
             "the arguments until the launch has run.");

    // ---- stream capture and graphs (graph.h). Graph, node and exec handles are ints like every other handle; the
    // Python objects that captured work uses are kept by the capture's graph: rtStreamDeferRelease on a capturing
    // stream (every enqueue_keep above) attaches the release to the graph, which runs it once the graph and every
    // executable graph made from it are gone and their launches have completed.
    m.attr("STREAM_CAPTURE_MODE_GLOBAL") = static_cast<int>(RT_STREAM_CAPTURE_MODE_GLOBAL);
    m.attr("STREAM_CAPTURE_MODE_THREAD_LOCAL") = static_cast<int>(RT_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    m.attr("STREAM_CAPTURE_MODE_RELAXED") = static_cast<int>(RT_STREAM_CAPTURE_MODE_RELAXED);
    m.attr("GRAPH_DEBUG_DOT_FLAGS_VERBOSE") = RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE;
    m.def("stream_begin_capture", [](uintptr_t s, int mode) {
        nogil("rtStreamBeginCapture",
              [&] { return rtStreamBeginCapture(as_handle<rtStream_st>(s), static_cast<rtStreamCaptureMode>(mode)); });
    }, nb::arg("stream"), nb::arg("mode"));
    m.def("stream_end_capture", [](uintptr_t s) {
        rtGraph_t g = nullptr;
        nogil("rtStreamEndCapture", [&] { return rtStreamEndCapture(as_handle<rtStream_st>(s), &g); });
        return as_int(g);
    }, "rtStreamEndCapture: the captured graph (raises when the capture was invalidated or left a stream unjoined).");
    m.def("stream_get_capture_info", [](uintptr_t s) {
        rtStreamCaptureStatus status = RT_STREAM_CAPTURE_STATUS_NONE;
        unsigned long long id = 0;
        nogil("rtStreamGetCaptureInfo",
              [&] { return rtStreamGetCaptureInfo(as_handle<rtStream_st>(s), &status, &id); });
        return nb::make_tuple(static_cast<int>(status), id);
    }, "(status, capture id): status 0 none, 1 active, 2 invalidated; the id is 0 when not capturing.");
    m.def("thread_exchange_capture_mode", [](int mode) {
        rtStreamCaptureMode m_ = static_cast<rtStreamCaptureMode>(mode);
        nogil("rtThreadExchangeStreamCaptureMode", [&] { return rtThreadExchangeStreamCaptureMode(&m_); });
        return static_cast<int>(m_);
    }, "Sets the calling thread's capture mode and returns the previous one.");
    m.def("graph_destroy", [](uintptr_t g) {
        nogil("rtGraphDestroy", [&] { return rtGraphDestroy(as_handle<rtGraph_st>(g)); });
    });
    m.def("graph_clone", [](uintptr_t g) {
        rtGraph_t c = nullptr;
        nogil("rtGraphClone", [&] { return rtGraphClone(&c, as_handle<rtGraph_st>(g)); });
        return as_int(c);
    });
    m.def("graph_get_nodes", [](uintptr_t g) {
        std::vector<rtGraphNode_t> nodes;
        nogil("rtGraphGetNodes", [&] {
            size_t n = 0;
            rtError_t e = rtGraphGetNodes(as_handle<rtGraph_st>(g), nullptr, &n);
            if (e != RT_SUCCESS || n == 0) return e;
            nodes.resize(n);
            return rtGraphGetNodes(as_handle<rtGraph_st>(g), nodes.data(), &n);
        });
        std::vector<uintptr_t> out;
        for (rtGraphNode_t n : nodes) out.push_back(as_int(n));
        return out;
    }, "The graph's node handles in the order they were added.");
    m.def("graph_node_get_type", [](uintptr_t n) {
        rtGraphNodeType t = RT_GRAPH_NODE_TYPE_EMPTY;
        nogil("rtGraphNodeGetType", [&] { return rtGraphNodeGetType(as_handle<rtGraphNode_st>(n), &t); });
        return static_cast<int>(t);
    });
    m.def("graph_node_get_dependencies", [](uintptr_t node) {
        std::vector<rtGraphNode_t> deps;
        nogil("rtGraphNodeGetDependencies", [&] {
            size_t n = 0;
            rtError_t e = rtGraphNodeGetDependencies(as_handle<rtGraphNode_st>(node), nullptr, &n);
            if (e != RT_SUCCESS || n == 0) return e;
            deps.resize(n);
            return rtGraphNodeGetDependencies(as_handle<rtGraphNode_st>(node), deps.data(), &n);
        });
        std::vector<uintptr_t> out;
        for (rtGraphNode_t d : deps) out.push_back(as_int(d));
        return out;
    });
    m.def("graph_debug_dot_print", [](uintptr_t g, const std::string& path, unsigned flags) {
        nogil("rtGraphDebugDotPrint",
              [&] { return rtGraphDebugDotPrint(as_handle<rtGraph_st>(g), path.c_str(), flags); });
    }, nb::arg("graph"), nb::arg("path"), nb::arg("flags") = 0u);
    m.def("graph_bind_name", [](uintptr_t g, const std::string& name, uintptr_t p, size_t bytes) {
        nogil("rtGraphBindName",
              [&] { return rtGraphBindName(as_handle<rtGraph_st>(g), name.c_str(), as_ptr(p), bytes); });
    });
    m.def("graph_instantiate", [](uintptr_t g, unsigned long long flags) {
        rtGraphExec_t x = nullptr;
        nogil("rtGraphInstantiate", [&] { return rtGraphInstantiate(&x, as_handle<rtGraph_st>(g), flags); });
        return as_int(x);
    }, nb::arg("graph"), nb::arg("flags") = 0ull);
    m.def("graph_upload", [](uintptr_t x, uintptr_t s) {
        nogil("rtGraphUpload", [&] { return rtGraphUpload(as_handle<rtGraphExec_st>(x), as_handle<rtStream_st>(s)); });
    });
    m.def("graph_launch", [](uintptr_t x, uintptr_t s, nb::handle keep) {
        rtStream_t st = as_handle<rtStream_st>(s);
        enqueue_keep("rtGraphLaunch", st, keep, [&] { return rtGraphLaunch(as_handle<rtGraphExec_st>(x), st); });
    }, nb::arg("exec"), nb::arg("stream"), nb::arg("keep") = nb::none(),
          "rtGraphLaunch; `keep` (if not None: the buffers bound to the exec) stays alive until the launch has run.");
    m.def("graph_exec_update", [](uintptr_t x, uintptr_t g) {
        rtGraphExecUpdateResult result = RT_GRAPH_EXEC_UPDATE_SUCCESS;
        rtError_t e;
        {
            nb::gil_scoped_release r;
            e = rtGraphExecUpdate(as_handle<rtGraphExec_st>(x), as_handle<rtGraph_st>(g), &result);
        }
        if (e != RT_SUCCESS)
            raise_error(e, last_detail(e, "rtGraphExecUpdate"), ExtraAttr{"result", static_cast<long>(result)});
    }, "rtGraphExecUpdate; a refusal raises with `.result` set to the rtGraphExecUpdateResult.");
    m.def("graph_exec_set_buffer", [](uintptr_t x, const std::string& name, uintptr_t p, size_t bytes) {
        nogil("rtGraphExecSetBuffer",
              [&] { return rtGraphExecSetBuffer(as_handle<rtGraphExec_st>(x), name.c_str(), as_ptr(p), bytes); });
    });
    m.def("graph_exec_save", [](uintptr_t x, const std::string& path) {
        nogil("rtGraphExecSave", [&] { return rtGraphExecSave(as_handle<rtGraphExec_st>(x), path.c_str()); });
    });
    m.def("graph_exec_load", [](const std::string& path) {
        rtGraphExec_t x = nullptr;
        nogil("rtGraphExecLoad", [&] { return rtGraphExecLoad(&x, path.c_str()); });
        return as_int(x);
    });
    m.def("graph_exec_get_memory_info", [](uintptr_t x) {
        rtGraphMemoryInfo info;
        std::memset(&info, 0, sizeof info);
        nogil("rtGraphExecGetMemoryInfo",
              [&] { return rtGraphExecGetMemoryInfo(as_handle<rtGraphExec_st>(x), &info); });
        return nb::make_tuple(info.arena_bytes, info.allocated_bytes, info.allocations);
    }, "(arena_bytes, allocated_bytes, allocations) of rtGraphMemoryInfo.");
    m.def("graph_exec_destroy", [](uintptr_t x) {
        nogil("rtGraphExecDestroy", [&] { return rtGraphExecDestroy(as_handle<rtGraphExec_st>(x)); });
    });

    // ---- DLPack
    bind_dlpack(m);
    bind_dvpp(m, &check, [](rtError_t c, const std::string& d) { raise_error(c, d); }, &defer_keep);
    bind_profiler(m, &check);
    bind_comm(m, &check, &defer_keep);
    bind_capi20(m, &check, [] { drain_parked(); });
    bind_mempool(m, &check);
    bind_ipc(m, &check);
}
