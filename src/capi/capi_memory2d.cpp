// C API: pitched (2-D) and 3-D copies and fills, peer access and peer copies, managed memory and prefetching.
#include <cstring>
#include <limits>

#include "capi/capi_common.hpp"
#include "core/memory.hpp"
#include "graph/capture.hpp"
#include "observe/trace.hpp"

using namespace rt;

namespace {

/// Row pitch of rtMallocPitch: rows start on this boundary (a cache line for the cpu's copies, the texture pitch
/// alignment CUDA uses for its own).
constexpr size_t kPitchAlignment = 512;

/// Bytes from the first to the last byte of `rows` rows of `width` bytes, `pitch` apart; throws when it overflows.
size_t span_bytes(size_t pitch, size_t width, size_t rows, const char* api, const char* role) {
    if (rows == 0 || width == 0) return 0;
    if (pitch != 0 && rows - 1 > (std::numeric_limits<size_t>::max() - width) / pitch)
        fail(RT_ERROR_INVALID_VALUE, "%s: %s spans more than the address space (%zu rows of pitch %zu)", api, role, rows,
             pitch);
    return (rows - 1) * pitch + width;
}

void require_pitch(size_t pitch, size_t width, const char* api, const char* which) {
    if (pitch < width)
        fail(RT_ERROR_INVALID_VALUE, "%s: %s %zu is smaller than the width %zu (expected a pitch >= width: rows may not "
             "overlap)", api, which, pitch, width);
}

/// The one 2-D copy path (rtMemcpy2D*, rtMemcpy3D* per slice): validates both spans as whole ranges against the
/// registry, then queues one operation. While `stream` captures, each row becomes a copy node of its own.
void enqueue_copy_2d(Stream& stream, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                     size_t height, int kind, const char* api) {
    require_pitch(dpitch, width, api, "dpitch");
    require_pitch(spitch, width, api, "spitch");
    if (width == 0 || height == 0) return;
    if (stream.capture()) {
        for (size_t row = 0; row < height; ++row)
            enqueue_copy(stream, static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch,
                         width, kind, api);
        return;
    }
    const size_t dst_span = span_bytes(dpitch, width, height, api, "the destination");
    const size_t src_span = span_bytes(spitch, width, height, api, "the source");
    // Each side is checked as one range, from its first byte to its last: a row past an allocation is a span past it.
    backend::CopyKind k = check_copy_spans(stream.device(), dst, dst_span, src, src_span, kind, api, nullptr);
    const uint64_t op = stream.next_op();
    trace::enqueue([&] { return trace::copy_op(stream, op, width * height, k); },
                   [&](const trace::Key& traced) {
                       stream.queue().copy_2d_impl(dst, dpitch, src, spitch, width, height, k, traced);
                   });
}

void enqueue_fill_2d(Stream& stream, void* ptr, size_t pitch, int value, size_t width, size_t height, const char* api) {
    require_pitch(pitch, width, api, "pitch");
    if (width == 0 || height == 0) return;
    if (!stream.capture()) check_fill(stream.device(), ptr, span_bytes(pitch, width, height, api, "the destination"), api);
    if (pitch == width) {  // contiguous: one fill
        enqueue_fill(stream, ptr, value, width * height, api);
        return;
    }
    for (size_t row = 0; row < height; ++row) enqueue_fill(stream, static_cast<char*>(ptr) + row * pitch, value, width, api);
}

void check_pitched(const rtPitchedPtr& p, const rtPos& pos, const rtExtent& e, const char* api, const char* role) {
    if (!p.ptr) fail(RT_ERROR_INVALID_VALUE, "%s: %s.ptr is NULL", api, role);
    if (pos.x > p.pitch || e.width > p.pitch - pos.x)
        fail(RT_ERROR_INVALID_VALUE, "%s: %s row of %zu bytes at x %zu exceeds its pitch %zu", api, role, e.width, pos.x,
             p.pitch);
    if (e.depth > 1 && (pos.y > p.ysize || e.height > p.ysize - pos.y))
        fail(RT_ERROR_INVALID_VALUE, "%s: %s holds %zu rows per slice (ysize) but the copy needs rows %zu..%zu", api,
             role, p.ysize, pos.y, pos.y + e.height);
}

void enqueue_copy_3d(Stream& stream, const rtMemcpy3DParms* parms, const char* api) {
    if (!parms) fail(RT_ERROR_INVALID_VALUE, "%s: parms is NULL (expected an rtMemcpy3DParms)", api);
    const rtMemcpy3DParms& q = *parms;
    const rtExtent& e = q.extent;
    if (e.width == 0 || e.height == 0 || e.depth == 0) return;
    check_pitched(q.src, q.src_pos, e, api, "src");
    check_pitched(q.dst, q.dst_pos, e, api, "dst");
    const int kind = kind_value(q.kind);
    for (size_t z = 0; z < e.depth; ++z) {
        const size_t src_slice = q.src.pitch * q.src.ysize, dst_slice = q.dst.pitch * q.dst.ysize;
        const char* s = static_cast<const char*>(q.src.ptr) + (q.src_pos.z + z) * src_slice + q.src_pos.y * q.src.pitch +
                        q.src_pos.x;
        char* d = static_cast<char*>(q.dst.ptr) + (q.dst_pos.z + z) * dst_slice + q.dst_pos.y * q.dst.pitch + q.dst_pos.x;
        enqueue_copy_2d(stream, d, q.dst.pitch, s, q.src.pitch, e.width, e.height, kind, api);
    }
}

/// The device memory `p` lies in, which must belong to `device` (rtMemcpyPeer's operands).
void require_on_device(const void* p, size_t bytes, int device, const char* api, const char* role) {
    CoreDevice& d = runtime().device(device);
    if (bytes == 0) return;
    PointerInfo info = runtime().registry.lookup(p);
    if (!info.allocation || info.allocation->kind != MemoryKind::device)
        fail(RT_ERROR_INVALID_VALUE, "%s: %s %p is not device memory (expected memory from rtMalloc on %s)", api, role, p,
             d.label().c_str());
    if (info.allocation->device != &d)
        fail(RT_ERROR_INVALID_VALUE, "%s: %s %p is memory of %s, but the call names device %d (%s)", api, role, p,
             info.allocation->device->label().c_str(), device, d.label().c_str());
}

/// Synchronous forms: the copy on the current device's default stream, then a wait, as rtMemcpy.
template <class F>
void run_synchronously(const char* api, F&& queue_it) {
    refuse_wait_in_queue_context(api);
    graph::check_unsafe(api);
    Stream& s = *runtime().current_device().default_stream();
    queue_it(s);
    s.synchronize();
}

}  // namespace

extern "C" {

RT_API rtError_t rtMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height) {
    return capi_call("rtMallocPitch", [&] {
        require_out(ptr, "ptr");
        require_out(pitch, "pitch");
        graph::check_unsafe("rtMallocPitch");
        if (width == 0 || height == 0) {
            *ptr = nullptr;
            *pitch = 0;
            return;
        }
        if (width > std::numeric_limits<size_t>::max() - kPitchAlignment)
            fail(RT_ERROR_INVALID_VALUE, "width %zu is too large", width);
        const size_t p = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
        if (height > std::numeric_limits<size_t>::max() / p)
            fail(RT_ERROR_OUT_OF_MEMORY, "%zu rows of pitch %zu exceed the address space", height, p);
        *ptr = allocate_device(runtime().current_device(), p * height, nullptr, "rtMallocPitch");
        *pitch = p;
    });
}

RT_API rtError_t rtMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                            rtMemcpyKind kind) {
    return capi_call("rtMemcpy2D", [&] {
        run_synchronously("rtMemcpy2D", [&](Stream& s) {
            enqueue_copy_2d(s, dst, dpitch, src, spitch, width, height, kind_value(kind), "rtMemcpy2D");
        });
    });
}

RT_API rtError_t rtMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                                 rtMemcpyKind kind, rtStream_t stream) {
    return capi_call("rtMemcpy2DAsync", [&] {
        enqueue_copy_2d(*runtime().stream(stream), dst, dpitch, src, spitch, width, height, kind_value(kind),
                        "rtMemcpy2DAsync");
    });
}

RT_API rtError_t rtMemset2D(void* ptr, size_t pitch, int value, size_t width, size_t height) {
    return capi_call("rtMemset2D", [&] {
        run_synchronously("rtMemset2D", [&](Stream& s) { enqueue_fill_2d(s, ptr, pitch, value, width, height, "rtMemset2D"); });
    });
}

RT_API rtError_t rtMemset2DAsync(void* ptr, size_t pitch, int value, size_t width, size_t height, rtStream_t stream) {
    return capi_call("rtMemset2DAsync", [&] {
        enqueue_fill_2d(*runtime().stream(stream), ptr, pitch, value, width, height, "rtMemset2DAsync");
    });
}

RT_API rtError_t rtMemcpy3D(const rtMemcpy3DParms* parms) {
    return capi_call("rtMemcpy3D", [&] { run_synchronously("rtMemcpy3D", [&](Stream& s) { enqueue_copy_3d(s, parms, "rtMemcpy3D"); }); });
}

RT_API rtError_t rtMemcpy3DAsync(const rtMemcpy3DParms* parms, rtStream_t stream) {
    return capi_call("rtMemcpy3DAsync", [&] { enqueue_copy_3d(*runtime().stream(stream), parms, "rtMemcpy3DAsync"); });
}

RT_API rtError_t rtDeviceCanAccessPeer(int* can_access, int device, int peer_device) {
    return capi_call("rtDeviceCanAccessPeer", [&] {
        require_out(can_access, "can_access");
        CoreDevice& d = runtime().device(device);
        CoreDevice& p = runtime().device(peer_device);
        *can_access = &d != &p && d.info().backend == p.info().backend && d.impl().can_access_peer_impl(p.impl());
    });
}

RT_API rtError_t rtDeviceEnablePeerAccess(int peer_device, unsigned int flags) {
    return capi_call("rtDeviceEnablePeerAccess", [&] {
        if (flags != 0) fail(RT_ERROR_INVALID_VALUE, "flags 0x%x must be 0", flags);
        CoreDevice& d = runtime().current_device();
        CoreDevice& p = runtime().device(peer_device);
        if (&d == &p)
            fail(RT_ERROR_INVALID_DEVICE, "device %d is the current device (%s): a device does not enable access to "
                 "itself", peer_device, d.label().c_str());
        if (d.info().backend != p.info().backend || !d.impl().can_access_peer_impl(p.impl()))
            fail(RT_ERROR_INVALID_DEVICE, "%s cannot access memory of %s (rtDeviceCanAccessPeer gives 0)",
                 d.label().c_str(), p.label().c_str());
        if (!d.enable_peer(p))
            fail(RT_ERROR_ILLEGAL_STATE, "peer access from %s to %s is already enabled", d.label().c_str(),
                 p.label().c_str());
    });
}

RT_API rtError_t rtMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t count) {
    return capi_call("rtMemcpyPeer", [&] {
        require_on_device(dst, count, dst_device, "rtMemcpyPeer", "destination");
        require_on_device(src, count, src_device, "rtMemcpyPeer", "source");
        run_synchronously("rtMemcpyPeer", [&](Stream& s) {
            enqueue_copy(s, dst, src, count, RT_MEMCPY_DEVICE_TO_DEVICE, "rtMemcpyPeer");
        });
    });
}

RT_API rtError_t rtMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t count,
                                   rtStream_t stream) {
    return capi_call("rtMemcpyPeerAsync", [&] {
        require_on_device(dst, count, dst_device, "rtMemcpyPeerAsync", "destination");
        require_on_device(src, count, src_device, "rtMemcpyPeerAsync", "source");
        enqueue_copy(*runtime().stream(stream), dst, src, count, RT_MEMCPY_DEVICE_TO_DEVICE, "rtMemcpyPeerAsync");
    });
}

RT_API rtError_t rtMallocManaged(void** ptr, size_t size, unsigned int flags) {
    return capi_call("rtMallocManaged", [&] {
        require_out(ptr, "ptr");
        graph::check_unsafe("rtMallocManaged");
        if (flags != RT_MEM_ATTACH_GLOBAL && flags != RT_MEM_ATTACH_HOST)
            fail(RT_ERROR_INVALID_VALUE, "flags 0x%x is not RT_MEM_ATTACH_GLOBAL (0x1) or RT_MEM_ATTACH_HOST (0x2)", flags);
        *ptr = allocate_managed(runtime().current_device(), size, "rtMallocManaged");
    });
}

RT_API rtError_t rtMemPrefetchAsync(const void* ptr, size_t count, int device, rtStream_t stream) {
    return capi_call("rtMemPrefetchAsync", [&] {
        auto s = runtime().stream(stream);
        int ordinal = -1;
        if (device != RT_CPU_DEVICE_ID) {
            CoreDevice& target = runtime().device(device);
            if (target.info().backend != s->device().info().backend)
                fail(RT_ERROR_INVALID_DEVICE, "device %d (%s) is not of the stream's backend (%s)", device,
                     target.label().c_str(), s->device().label().c_str());
            ordinal = target.info().backend_ordinal;
        }
        if (count == 0) return;
        if (!ptr) fail(RT_ERROR_INVALID_VALUE, "ptr is NULL (expected managed memory from rtMallocManaged)");
        PointerInfo info = runtime().registry.lookup(ptr);
        if (!info.allocation || !info.allocation->managed)
            fail(RT_ERROR_INVALID_VALUE, "%p is not managed memory (expected memory from rtMallocManaged)", ptr);
        if (count > info.available)
            fail(RT_ERROR_INVALID_VALUE, "%zu bytes from %p run past its managed allocation (%zu bytes left of %zu)",
                 count, ptr, info.available, info.allocation->size);
        if (s->capture()) graph::refuse_on_capturing(*s, "rtMemPrefetchAsync", "a graph has no prefetch nodes");
        s->next_op();
        s->queue().prefetch_impl(ptr, count, ordinal, trace::Key{});  // not a span of its own in traces
    });
}

}  // extern "C"
