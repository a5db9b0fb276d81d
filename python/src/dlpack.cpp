// DLPack for runtime._core: export builds 'dltensor_versioned' (DLPack >= 1.0) or legacy 'dltensor' capsules; import
// takes either kind of capsule from a producer and holds its managed tensor until released (the producer's deleter
// runs exactly once). The structs are the DLPack ABI (dlpack.h v1.x), declared here so the build needs no header.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace {

struct DLDevice { int32_t device_type; int32_t device_id; };
struct DLDataType { uint8_t code; uint8_t bits; uint16_t lanes; };
struct DLTensor {
    void* data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t* shape;
    int64_t* strides;
    uint64_t byte_offset;
};
struct DLManagedTensor {
    DLTensor dl_tensor;
    void* manager_ctx;
    void (*deleter)(DLManagedTensor* self);
};
struct DLPackVersion { uint32_t major; uint32_t minor; };
struct DLManagedTensorVersioned {
    DLPackVersion version;
    void* manager_ctx;
    void (*deleter)(DLManagedTensorVersioned* self);
    uint64_t flags;
    DLTensor dl_tensor;
};
constexpr uint64_t DLPACK_FLAG_BITMASK_READ_ONLY = 1ull << 0;
constexpr uint32_t DLPACK_MAJOR = 1, DLPACK_MINOR = 0;  // what the exported capsules claim

// One allocation holds the manager context: the owner's reference and the shape and stride arrays.
struct Context {
    PyObject* owner;
    std::vector<int64_t> shape;
    std::vector<int64_t> strides;
};

// Deleters may run on any thread (the consumer decides), so they take the GIL before touching Python objects.
void release_context(void* ctx) {
    auto* c = static_cast<Context*>(ctx);
    if (!c) return;
    if (Py_IsInitialized()) {
        PyGILState_STATE st = PyGILState_Ensure();
        Py_XDECREF(c->owner);
        PyGILState_Release(st);
    }
    delete c;
}
void delete_versioned(DLManagedTensorVersioned* t) {
    release_context(t->manager_ctx);
    delete t;
}
void delete_legacy(DLManagedTensor* t) {
    release_context(t->manager_ctx);
    delete t;
}

// Capsule destructors: only a capsule never consumed (still named 'dltensor*') owns its tensor.
void capsule_versioned_destructor(PyObject* cap) {
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        auto* t = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, "dltensor_versioned"));
        if (t && t->deleter) t->deleter(t);
    } else {
        PyErr_Clear();
    }
}
void capsule_legacy_destructor(PyObject* cap) {
    if (PyCapsule_IsValid(cap, "dltensor")) {
        auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
        if (t && t->deleter) t->deleter(t);
    } else {
        PyErr_Clear();
    }
}

}  // namespace

nb::object make_dlpack_capsule(uintptr_t data, const std::vector<int64_t>& shape,
                               const std::optional<std::vector<int64_t>>& strides, int dtype_code, int dtype_bits,
                               int device_type, int device_id, nb::object owner, bool versioned, bool read_only) {
    if (strides && strides->size() != shape.size()) throw nb::value_error("make_dlpack: one stride per dimension");
    auto* ctx = new Context{owner.ptr(), shape, strides ? *strides : std::vector<int64_t>{}};
    Py_INCREF(ctx->owner);
    DLTensor t;
    std::memset(&t, 0, sizeof t);
    t.data = reinterpret_cast<void*>(data);
    t.device = DLDevice{device_type, device_id};
    t.ndim = static_cast<int32_t>(ctx->shape.size());
    t.dtype = DLDataType{static_cast<uint8_t>(dtype_code), static_cast<uint8_t>(dtype_bits), 1};
    t.shape = ctx->shape.empty() ? nullptr : ctx->shape.data();
    t.strides = (strides && !ctx->strides.empty()) ? ctx->strides.data() : nullptr;  // NULL: compact row-major
    t.byte_offset = 0;
    PyObject* cap;
    if (versioned) {
        auto* m = new DLManagedTensorVersioned{};
        m->version = DLPackVersion{DLPACK_MAJOR, DLPACK_MINOR};
        m->manager_ctx = ctx;
        m->deleter = &delete_versioned;
        m->flags = read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
        m->dl_tensor = t;
        cap = PyCapsule_New(m, "dltensor_versioned", &capsule_versioned_destructor);
        if (!cap) { delete_versioned(m); throw nb::python_error(); }
    } else {
        auto* m = new DLManagedTensor{};
        m->dl_tensor = t;
        m->manager_ctx = ctx;
        m->deleter = &delete_legacy;
        cap = PyCapsule_New(m, "dltensor", &capsule_legacy_destructor);
        if (!cap) { delete_legacy(m); throw nb::python_error(); }
    }
    return nb::steal(cap);
}

// A consumed capsule's managed tensor: release() (or destruction) calls the producer's deleter, exactly once.
// Called with the GIL held (from Python); producers' deleters take it themselves when they need it, which is
// re-entrant.
struct DLPackHold {
    void* managed = nullptr;
    bool versioned = false;
    DLPackHold() = default;
    DLPackHold(const DLPackHold&) = delete;
    DLPackHold& operator=(const DLPackHold&) = delete;
    ~DLPackHold() { release(); }
    void release() {
        void* m = managed;
        managed = nullptr;
        if (!m) return;
        if (versioned) {
            auto* t = static_cast<DLManagedTensorVersioned*>(m);
            if (t->deleter) t->deleter(t);
        } else {
            auto* t = static_cast<DLManagedTensor*>(m);
            if (t->deleter) t->deleter(t);
        }
    }
    bool held() const { return managed != nullptr; }
};

// Consumes a DLPack capsule (renamed 'used_dltensor*', so the producer's capsule destructor leaves the tensor to
// the hold): (hold, data + byte_offset, shape, strides in elements or None, (code, bits, lanes),
// (device_type, device_id), read_only, (major, minor)). A capsule whose major version is not 1 is refused
// untouched (it keeps its tensor, deleted with the capsule).
nb::tuple import_dlpack_capsule(nb::handle capsule) {
    PyObject* cap = capsule.ptr();
    const DLTensor* t = nullptr;
    auto hold = std::make_unique<DLPackHold>();
    uint32_t major = 0, minor = 0;
    bool read_only = false;
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, "dltensor_versioned"));
        if (!m) throw nb::python_error();
        major = m->version.major;
        minor = m->version.minor;
        if (major != 1)
            throw nb::buffer_error(("DLPack: the producer's tensor has version " + std::to_string(major) + "." +
                                    std::to_string(minor) + "; only 1.x is understood")
                                       .c_str());
        t = &m->dl_tensor;
        read_only = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
        if (PyCapsule_SetName(cap, "used_dltensor_versioned") != 0) throw nb::python_error();
        hold->managed = m;
        hold->versioned = true;
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
        if (!m) throw nb::python_error();
        t = &m->dl_tensor;
        if (PyCapsule_SetName(cap, "used_dltensor") != 0) throw nb::python_error();
        hold->managed = m;
    } else {
        PyErr_Clear();
        throw nb::type_error("DLPack: expected an unconsumed 'dltensor' or 'dltensor_versioned' capsule (a capsule "
                             "can be consumed once)");
    }
    const int nd = t->ndim;
    if (nd < 0) throw nb::buffer_error("DLPack: negative ndim");
    nb::list shape;
    for (int i = 0; i < nd; ++i) shape.append(t->shape[i]);
    nb::object strides = nb::none();
    if (t->strides && nd > 0) {
        nb::list s;
        for (int i = 0; i < nd; ++i) s.append(t->strides[i]);
        strides = s;
    }
    const uintptr_t data = reinterpret_cast<uintptr_t>(t->data) + static_cast<uintptr_t>(t->byte_offset);
    nb::object h = nb::cast(hold.release(), nb::rv_policy::take_ownership);
    return nb::make_tuple(h, data, shape, strides, nb::make_tuple(t->dtype.code, t->dtype.bits, t->dtype.lanes),
                          nb::make_tuple(t->device.device_type, t->device.device_id), read_only,
                          nb::make_tuple(major, minor));
}

void bind_dlpack(nb::module_& m) {
    nb::class_<DLPackHold>(m, "DLPackHold", "A consumed DLPack tensor: release() runs the producer's deleter (once; "
                                            "also when the hold is garbage-collected).")
        .def("release", &DLPackHold::release)
        .def_prop_ro("held", &DLPackHold::held);
    m.def("make_dlpack", &make_dlpack_capsule, nb::arg("data"), nb::arg("shape"), nb::arg("strides"),
          nb::arg("dtype_code"), nb::arg("dtype_bits"), nb::arg("device_type"), nb::arg("device_id"), nb::arg("owner"),
          nb::arg("versioned"), nb::arg("read_only") = false,
          "A DLPack capsule ('dltensor_versioned' or 'dltensor') viewing `data` with `shape` and `strides` (elements; "
          "None: compact row-major); keeps `owner` alive until the consumer deletes it.");
    m.def("import_dlpack", &import_dlpack_capsule, nb::arg("capsule"),
          "Consume a DLPack capsule: (hold, data, shape, strides or None, (code, bits, lanes), (device_type, "
          "device_id), read_only, (major, minor)).");
}
