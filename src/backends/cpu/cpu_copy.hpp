// Bulk byte movement for the cpu device: cached copies for small/medium sizes, streaming stores for large ones.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rt::cpu {

class Executor;

/// Copies of at least this many bytes use non-temporal (streaming) stores: the destination would not
/// fit the cache anyway, and skipping the read-for-ownership nearly doubles the write bandwidth. glibc's
/// own switch-over point follows the cache size the VM reports (hundreds of MiB here), far too late.
inline constexpr size_t kStreamingBytes = size_t{16} << 20;

/// memcpy for non-overlapping ranges; `streaming` selects non-temporal stores (caller fences, see below).
void copy_bytes(void* dst, const void* src, size_t bytes, bool streaming);
void fill_bytes(void* dst, uint8_t value, size_t bytes, bool streaming);
/// Orders this thread's streaming stores before later stores (e.g. the completion counter).
void streaming_fence();

/// One copy operation of a stream or graph node: memmove where the ranges overlap, else split across the executors
/// from 2 MiB (calling thread included) and streamed past the cache from kStreamingBytes. Returns when done.
void run_copy(Executor& executor, void* dst, const void* src, size_t bytes);
/// One fill operation (rtMemsetAsync, a memset node), split and streamed as run_copy.
void run_fill(Executor& executor, void* dst, uint8_t value, size_t bytes);

}  // namespace rt::cpu
