// The device memory pool: best fit over a reserved range, blocks committed on first use and, without
// reuse, decommitted as soon as they hold nothing; frees wait for the streams that may still use them.
#include "core/memory_pool.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "core/stream.hpp"
#include "observe/log.hpp"

namespace rt {

template <class T>
LazyArray<T>::LazyArray(size_t n) : n_(n) {
    void* p = mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail(RT_ERROR_OUT_OF_MEMORY, "cannot map bookkeeping for %zu pool blocks", n);
    data_ = static_cast<T*>(p);
}

template <class T>
LazyArray<T>::~LazyArray() {
    if (data_) munmap(data_, n_ * sizeof(T));
}

namespace {
/// Blocks of `block` bytes covering `pool_size`; refuses sizes that overflow when rounded up.
size_t block_count(size_t pool_size, size_t block) {
    if (pool_size > SIZE_MAX - block + 1)
        fail(RT_ERROR_INVALID_VALUE, "pool_size %zu is too large (rounded up to whole blocks it overflows)", pool_size);
    return (pool_size + block - 1) / block;
}

/// "cpu:0": the device a pool's log lines name.
std::string label(backend::Device& device) {
    return device.info().backend + ":" + std::to_string(device.info().backend_ordinal);
}
}  // namespace

MemoryPool::MemoryPool(backend::Device& device, size_t pool_size, size_t block_size)
    : device_(device),
      size_(block_count(pool_size, block_size) * block_size),
      block_(block_size),
      block_shift_(static_cast<unsigned>(__builtin_ctzll(block_size))),
      used_(size_ / block_),
      committed_(size_ / block_) {
    base_ = static_cast<char*>(device_.reserve_impl(size_));
    virtual_ = base_ != nullptr;
    if (!virtual_) {
        base_ = static_cast<char*>(device_.allocate_impl(size_));
        if (!base_)
            fail(RT_ERROR_OUT_OF_MEMORY, "cannot allocate a pool of %zu bytes on this device (it cannot reserve "
                 "address space, so the pool is allocated up front)", size_);
    }
    if (!virtual_) std::memset(&committed_[0], 1, size_ / block_);
    committed_bytes_ = virtual_ ? 0 : size_;
    insert_free(0, size_);
    RT_LOG(memory, info, "pool on %s: %zu bytes in blocks of %zu, %s", label(device_).c_str(), size_, block_,
           virtual_ ? "address space reserved, committed as used" : "allocated up front (the device cannot reserve)");
}

MemoryPool::~MemoryPool() {
    if (!virtual_) {
        device_.free_impl(base_, size_);
        return;
    }
    for (size_t b = 0; b < committed_.size(); ++b)
        if (committed_[b]) device_.decommit_impl(base_ + b * block_, block_);
    device_.unreserve_impl(base_, size_);
}

void MemoryPool::flush_recent() {
    for (size_t i = 0; i < recent_count_; ++i) insert_free(recent_[i].offset, recent_[i].length);
    recent_count_ = 0;
}

void MemoryPool::insert_free(size_t offset, size_t length) {
    // Coalesce with the neighbours on both sides.
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && offset + length == next->first) {
        length += next->second;
        erase_free(next);
    }
    auto it = free_.lower_bound(offset);
    if (it != free_.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == offset) {
            offset = prev->first;
            length += prev->second;
            erase_free(prev);
        }
    }
    if (!spare_free_.empty()) {
        auto node = std::move(spare_free_.back());
        spare_free_.pop_back();
        node.key() = offset;
        node.mapped() = length;
        free_.insert(std::move(node));
    } else {
        free_.emplace(offset, length);
    }
    if (!spare_size_.empty()) {
        auto node = std::move(spare_size_.back());
        spare_size_.pop_back();
        node.value() = {length, offset};
        by_size_.insert(std::move(node));
    } else {
        by_size_.emplace(length, offset);
    }
}

void MemoryPool::erase_free(std::map<size_t, size_t>::iterator it) {
    constexpr size_t kSpare = 32;
    auto s = by_size_.find({it->second, it->first});
    if (spare_size_.size() < kSpare) spare_size_.push_back(by_size_.extract(s));
    else by_size_.erase(s);
    if (spare_free_.size() < kSpare) spare_free_.push_back(free_.extract(it));
    else free_.erase(it);
}

bool MemoryPool::commit_range(size_t offset, size_t length, bool* committed_new) {
    size_t first = offset >> block_shift_, last = (offset + length - 1) >> block_shift_;
    // Commit runs of uncommitted blocks. On failure, blocks this call committed stay committed and
    // empty (cached): the caller trims and retries.
    for (size_t b = first; b <= last; ++b) {
        if (committed_[b]) continue;
        size_t run_end = b;
        while (run_end + 1 <= last && !committed_[run_end + 1]) ++run_end;
        size_t bytes = (run_end - b + 1) * block_;
        if (!device_.commit_impl(base_ + b * block_, bytes)) return false;
        for (size_t u = b; u <= run_end; ++u) committed_[u] = 1;
        committed_bytes_ += bytes;
        *committed_new = true;
        RT_LOG(memory, debug, "pool on %s grew: %zu bytes committed, %zu in all", label(device_).c_str(), bytes,
               committed_bytes_);
        b = run_end;
    }
    for (size_t b = first; b <= last; ++b) {
        size_t lo = std::max(offset, b * block_), hi = std::min(offset + length, (b + 1) * block_);
        used_[b] += hi - lo;
    }
    return true;
}

void MemoryPool::unuse_range(size_t offset, size_t length) {
    size_t first = offset >> block_shift_, last = (offset + length - 1) >> block_shift_;
    size_t released = 0;
    for (size_t b = first; b <= last; ++b) {
        size_t lo = std::max(offset, b * block_), hi = std::min(offset + length, (b + 1) * block_);
        used_[b] -= hi - lo;
        if (used_[b] == 0 && !reuse_ && virtual_ && committed_[b]) {
            device_.decommit_impl(base_ + b * block_, block_);
            committed_[b] = 0;
            committed_bytes_ -= block_;
            released += block_;
        }
    }
    if (released)
        RT_LOG(memory, debug, "pool on %s shrank: %zu bytes of emptied blocks decommitted, %zu still committed",
               label(device_).c_str(), released, committed_bytes_);
}

void MemoryPool::promote(uint64_t id) {
    for (size_t i = 0; i < pending_.size(); ++i) {
        if (pending_[i].id != id) continue;
        Pending p = pending_[i];
        pending_[i] = pending_.back();
        pending_.pop_back();
        unuse_range(p.offset, p.length);
        insert_free(p.offset, p.length);
        return;
    }
}

void* MemoryPool::allocate(size_t bytes, const Stream* stream, bool* committed_new) {
    *committed_new = false;
    size_t n = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (n == 0 || n > size_) return nullptr;

    // A stream reuses its own frees at once: stream order already puts its earlier work first.
    if (stream) {
        Pending* best = nullptr;
        for (Pending& p : pending_)
            if (p.owner == stream && p.length >= n && (!best || p.length < best->length)) best = &p;
        if (best) {
            size_t offset = best->offset;
            best->offset += n;
            best->length -= n;
            if (best->length == 0) {  // taken back whole: its promote finds nothing
                *best = pending_.back();
                pending_.pop_back();
            }
            ++live_;  // the range's bytes were already counted as in use
            return base_ + offset;
        }
    }

    for (size_t i = recent_count_; i-- > 0;)
        if (recent_[i].length == n) {
            size_t offset = recent_[i].offset;
            recent_[i] = recent_[--recent_count_];
            commit_range(offset, n, committed_new);  // blocks stayed committed (reuse is on): counts only
            ++live_;
            return base_ + offset;
        }
    flush_recent();
    auto it = by_size_.lower_bound({n, 0});
    if (it == by_size_.end()) return nullptr;
    size_t offset = it->second, length = it->first;
    erase_free(free_.find(offset));
    if (length > n) insert_free(offset + n, length - n);
    if (!commit_range(offset, n, committed_new)) {
        insert_free(offset, n);
        if (!reuse_) trim();
        return nullptr;
    }
    ++live_;
    return base_ + offset;
}

uint64_t MemoryPool::release(void* p, size_t bytes, const Stream* owner, bool reusable_now) {
    size_t n = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    size_t offset = static_cast<size_t>(static_cast<char*>(p) - base_);
    --live_;
    if (reusable_now) {
        unuse_range(offset, n);
        if (!reuse_) {
            insert_free(offset, n);
        } else {
            if (recent_count_ == kRecent) {
                insert_free(recent_[0].offset, recent_[0].length);
                recent_[0] = recent_[--recent_count_];
            }
            recent_[recent_count_++] = {offset, n};
        }
        return 0;
    }
    pending_.push_back({++next_pending_id_, offset, n, owner});
    return next_pending_id_;
}

size_t MemoryPool::trim(size_t keep) {
    flush_recent();
    if (!virtual_) return 0;
    size_t before = committed_bytes_;
    for (size_t b = committed_.size(); b-- > 0 && committed_bytes_ > keep;)
        if (committed_[b] && used_[b] == 0) {
            device_.decommit_impl(base_ + b * block_, block_);
            committed_[b] = 0;
            committed_bytes_ -= block_;
        }
    if (before != committed_bytes_)
        RT_LOG(memory, info, "pool on %s trimmed: %zu bytes of cached blocks decommitted, %zu still committed",
               label(device_).c_str(), before - committed_bytes_, committed_bytes_);
    return before - committed_bytes_;
}

}  // namespace rt
