// DLPack export for runtime._core: builds 'dltensor_versioned' (DLPack >= 1.0) or legacy 'dltensor' capsules.
// The structs are the DLPack ABI (dlpack.h v1.0), declared here so the build needs no extra header.
#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
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

// One allocation holds the manager context: the owner's reference and the shape array.
struct Context {
    PyObject* owner;
    std::vector<int64_t> shape;
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

nb::object make_dlpack_capsule(uintptr_t data, const std::vector<int64_t>& shape, int dtype_code, int dtype_bits,
                               int device_type, int device_id, nb::object owner, bool versioned, bool read_only) {
    auto* ctx = new Context{owner.ptr(), shape};
    Py_INCREF(ctx->owner);
    DLTensor t;
    std::memset(&t, 0, sizeof t);
    t.data = reinterpret_cast<void*>(data);
    t.device = DLDevice{device_type, device_id};
    t.ndim = static_cast<int32_t>(ctx->shape.size());
    t.dtype = DLDataType{static_cast<uint8_t>(dtype_code), static_cast<uint8_t>(dtype_bits), 1};
    t.shape = ctx->shape.data();
    t.strides = nullptr;  // compact row-major
    t.byte_offset = 0;
    PyObject* cap;
    if (versioned) {
        auto* m = new DLManagedTensorVersioned{};
        m->version = DLPackVersion{1, 0};
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
