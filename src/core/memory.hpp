// Core memory operations: allocation through the registry, and validated copies and fills on streams.
#pragma once

#include <cstddef>

#include "core/device.hpp"
#include "core/stream.hpp"

namespace rt {

/// Device memory on `device`; 0 bytes gives nullptr. Throws OUT_OF_MEMORY with requested/free figures.
void* allocate_device(CoreDevice& device, size_t bytes);
/// Frees device memory after every queued operation has completed. Throws INVALID_VALUE for anything
/// that is not the start of a live device allocation.
void free_device(void* ptr);
void* allocate_pinned_host(CoreDevice& device, size_t bytes);
void free_pinned_host(void* ptr);

/// Checks the operands against the registry and `kind` (DEFAULT: inferred), then enqueues on `stream`.
/// `api` names the calling function in messages.
void enqueue_copy(Stream& stream, void* dst, const void* src, size_t bytes, rtMemcpyKind kind, const char* api);
void enqueue_fill(Stream& stream, void* dst, int value, size_t bytes, const char* api);

}  // namespace rt
