// A device memory pool: reserved address space committed block by block, best-fit with split and coalesce,
// and stream-ordered reuse of freed ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "backends/backend.hpp"

namespace rt {

class Stream;


/// A zero-initialised array whose pages become resident only when written (anonymous mmap), so the
/// pool's per-block bookkeeping does not make a huge, mostly unused reservation resident.
template <class T>
class LazyArray {
public:
    explicit LazyArray(size_t n);
    ~LazyArray();
    LazyArray(const LazyArray&) = delete;
    LazyArray& operator=(const LazyArray&) = delete;
    T& operator[](size_t i) { return data_[i]; }
    const T& operator[](size_t i) const { return data_[i]; }
    size_t size() const { return n_; }

private:
    T* data_ = nullptr;
    size_t n_ = 0;
};

/// Not thread-safe: the owner (DeviceMemory) serialises calls.
class MemoryPool {
public:
    /// Allocation granularity and alignment (cudaMalloc's).
    static constexpr size_t kAlignment = 256;

    /// Reserves `pool_size` bytes of address space (committed in `block_size` units as used). Throws
    /// OUT_OF_MEMORY if the address space cannot be had.
    MemoryPool(backend::Device& device, size_t pool_size, size_t block_size);
    ~MemoryPool();  ///< decommits and releases everything; callers free their allocations first

    bool contains(const void* p) const { return p >= base_ && p < base_ + size_; }
    size_t size() const { return size_; }
    size_t block_size() const { return block_; }

    /// A range for `bytes`, or nullptr if none fits (or the device cannot commit more). `stream`: the
    /// allocating stream, which may reuse its own pending frees at once; null for stream-less allocation.
    /// `*committed_new`: whether memory had to be committed (a cache miss).
    void* allocate(size_t bytes, const Stream* stream, bool* committed_new);
    /// Returns a range: reusable at once if `reusable_now` (returns 0); otherwise pending — reusable by `owner`
    /// (may be null) at once, by everyone once promote(id) is called with the id returned (the caller puts that
    /// on the core timeline, after the points the free waits for).
    uint64_t release(void* p, size_t bytes, const Stream* owner, bool reusable_now);
    /// Makes what is left of pending free `id` reusable (the owner may have taken some or all of it back).
    void promote(uint64_t id);
    bool has_pending() const { return !pending_.empty(); }
    /// Decommits committed blocks that hold no allocation, highest first, until at most `keep` bytes stay
    /// committed (0: every such block); returns the bytes decommitted.
    size_t trim(size_t keep = 0);
    /// With reuse off, a block is decommitted as soon as it holds no allocation.
    void set_reuse(bool reuse) { reuse_ = reuse; }

    size_t committed_bytes() const { return committed_bytes_; }
    size_t largest_free_range() {
        flush_recent();
        return by_size_.empty() ? 0 : by_size_.rbegin()->first;
    }
    size_t live_ranges() const { return live_; }

private:
    struct Pending {
        uint64_t id;
        size_t offset, length;
        const Stream* owner;
    };
    void insert_free(size_t offset, size_t length);
    void erase_free(std::map<size_t, size_t>::iterator it);
    /// Adds `delta` in-use bytes to the blocks overlapping [offset, offset+length).
    bool commit_range(size_t offset, size_t length, bool* committed_new);
    void unuse_range(size_t offset, size_t length);

    backend::Device& device_;
    char* base_ = nullptr;
    size_t size_, block_;
    unsigned block_shift_;  // block_ is a power of two (checked by DeviceMemory): offsets map to blocks by shift
    LazyArray<size_t> used_;     // in-use bytes (live + pending) per block
    LazyArray<uint8_t> committed_;
    bool virtual_ = false;  // reserve/commit supported; else the whole pool was allocated up front
    bool reuse_ = true;
    std::map<size_t, size_t> free_;                  // offset -> length, reusable now, coalesced
    std::set<std::pair<size_t, size_t>> by_size_;    // (length, offset): best fit, lowest address on ties
    std::vector<Pending> pending_;                   // freed, waiting for streams (promoted by the timeline)
    uint64_t next_pending_id_ = 0;
    // The last few released ranges, kept as they are (not coalesced) for an exact-size allocation to
    // take without touching the trees: a malloc/free loop then costs two array scans. Counted as free;
    // flushed into the trees whenever the trees are searched or the pool is trimmed.
    struct Range {
        size_t offset, length;
    };
    static constexpr size_t kRecent = 8;
    Range recent_[kRecent];
    size_t recent_count_ = 0;
    void flush_recent();
    // Nodes of erased free ranges, reused: no heap allocation on the allocate/release path.
    std::vector<std::map<size_t, size_t>::node_type> spare_free_;
    std::vector<std::set<std::pair<size_t, size_t>>::node_type> spare_size_;
    size_t committed_bytes_ = 0;
    size_t live_ = 0;
};

}  // namespace rt
