// Core memory operations: allocation through the registry, and validated copies and fills on streams.
#pragma once

#include <cstddef>

#include "core/device.hpp"
#include "core/stream.hpp"

namespace rt {

/// Device memory on `device`; 0 bytes gives nullptr. `stream`: stream-ordered (rtMallocAsync) or null.
/// Throws OUT_OF_MEMORY with the requested, free and reserved figures.
void* allocate_device(CoreDevice& device, size_t bytes, Stream* stream, const char* api);
/// Frees device memory. `stream` null (rtFree): reusable once all work queued so far is done; otherwise
/// stream-ordered (rtFreeAsync). Throws INVALID_VALUE for anything but the start of a live device allocation.
void free_device(void* ptr, Stream* stream, const char* api);
void* allocate_pinned_host(CoreDevice& device, size_t bytes);
void free_pinned_host(void* ptr);
void register_host(CoreDevice& device, void* ptr, size_t bytes);
void unregister_host(void* ptr);
/// The device address of pinned/registered host memory; requires zero copy on its device.
void* mapped_device_pointer(void* host_ptr);

/// Checks the operands against the registry and `kind` (DEFAULT: inferred), then enqueues on `stream`.
/// `kind` is an int: the C ABI may pass any value, which is validated before use. `api` names the caller.
void enqueue_copy(Stream& stream, void* dst, const void* src, size_t bytes, int kind, const char* api);
void enqueue_fill(Stream& stream, void* dst, int value, size_t bytes, const char* api);

}  // namespace rt
