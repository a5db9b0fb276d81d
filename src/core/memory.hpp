// Core memory operations: allocation through the registry, and validated copies and fills on streams.
#pragma once

#include <cstddef>
#include <string>

#include "core/device.hpp"
#include "core/stream.hpp"

namespace rt {

class MemPoolObject;

/// Device memory on `device`; 0 bytes gives nullptr. `stream`: stream-ordered (rtMallocAsync) or null.
/// Throws OUT_OF_MEMORY with the requested, free and reserved figures.
void* allocate_device(CoreDevice& device, size_t bytes, Stream* stream, const char* api);
/// rtMallocFromPoolAsync (and rtMallocAsync while the device's current pool is a created one): device memory of
/// `pool`, ordered on `stream` (a stream of the pool's device); during a capture, the graph's allocation node.
void* allocate_from_pool(MemPoolObject& pool, size_t bytes, Stream& stream, const char* api);
/// Frees device memory. `stream` null (rtFree): reusable once all work queued so far is done; otherwise
/// stream-ordered (rtFreeAsync). Throws INVALID_VALUE for anything but the start of a live device allocation.
void free_device(void* ptr, Stream* stream, const char* api);
/// What the registry knows of `ptr`, in words, for error messages ("device memory of cpu:0 (allocation ...)").
std::string describe_pointer(const void* ptr);
/// An executable graph's arena: device memory as allocate_device's (not stream-ordered), registered as the graph's
/// (Allocation::graph_arena) so that free_device refuses it; only free_graph_arena frees it, like free_device with
/// no stream.
void* allocate_graph_arena(CoreDevice& device, size_t bytes, const char* api);
void free_graph_arena(void* arena, const char* api);
void* allocate_pinned_host(CoreDevice& device, size_t bytes);
void free_pinned_host(void* ptr);
void register_host(CoreDevice& device, void* ptr, size_t bytes);
void unregister_host(void* ptr);
/// The device address of pinned/registered host memory; requires zero copy on its device.
void* mapped_device_pointer(void* host_ptr);

/// Memory the registry does not know but a caller does: a graph's allocation nodes, which are device memory of the
/// graph's device inside that graph only (graph/node_params.hpp).
class ExtraDeviceMemory {
public:
    /// If `p` lies in such memory: its device, the bytes from `p` to the end of its allocation, and what it is in
    /// words for messages ("memory of allocation node 3 of the graph (0x..., 4096 bytes)").
    virtual bool lookup(const void* p, const CoreDevice** device, size_t* available, std::string* what) const = 0;

protected:
    ~ExtraDeviceMemory() = default;
};

/// The checks of a copy queued on a queue of `queue_device` (rtMemcpyAsync's, a graph's copy node's): `kind` an
/// rtMemcpyKind (DEFAULT inferred from the operands), operands non-NULL with `bytes` available from each, each on the
/// side `kind` says (host memory mapped by zero copy fits both), device memory reachable by that queue. Returns the
/// resolved kind; *elided (optional) is set when nothing must move (0 bytes, or dst == src in mapped memory).
/// `extra` (optional): memory that counts as device memory too. Throws INVALID_VALUE naming `api`.
backend::CopyKind check_copy(const CoreDevice& queue_device, void* dst, const void* src, size_t bytes, int kind,
                             const char* api, bool* elided, const ExtraDeviceMemory* extra = nullptr);
/// check_copy of operands that span different byte counts (a pitched copy: the rows from the first byte to the last
/// byte of each side); nothing is checked when either is 0.
backend::CopyKind check_copy_spans(const CoreDevice& queue_device, void* dst, size_t dst_bytes, const void* src,
                                   size_t src_bytes, int kind, const char* api, bool* elided,
                                   const ExtraDeviceMemory* extra = nullptr);
/// Managed memory (rtMallocManaged) on `device`: device memory the host addresses too, registered as
/// Allocation::managed and freed by free_device. NOT_SUPPORTED where the device has none (DeviceInfo::managed_memory).
void* allocate_managed(CoreDevice& device, size_t bytes, const char* api);
/// The checks of a fill (rtMemsetAsync's): device memory (or mapped host memory) of `queue_device`'s backend, `bytes`
/// available from `dst` (0 bytes: nothing checked). `extra` as check_copy's. `role` names `dst` in messages (DVPP's
/// "src->data": its pictures are checked by these rules too).
void check_fill(const CoreDevice& queue_device, void* dst, size_t bytes, const char* api,
                const ExtraDeviceMemory* extra = nullptr, const char* role = "destination");

/// Checks the operands against the registry and `kind` (DEFAULT: inferred), then enqueues on `stream`.
/// `kind` is an int: the C ABI may pass any value, which is validated before use. `api` names the caller.
void enqueue_copy(Stream& stream, void* dst, const void* src, size_t bytes, int kind, const char* api);
void enqueue_fill(Stream& stream, void* dst, int value, size_t bytes, const char* api);

}  // namespace rt
