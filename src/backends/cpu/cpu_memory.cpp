// cpu device memory: guarded mappings for large allocations, slabs of size-classed slots with redzones for small ones.
#include "backends/cpu/cpu_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace rt::cpu {

namespace {

size_t page_bytes() {
    static const size_t page = [] {
        long p = sysconf(_SC_PAGESIZE);
        return p > 0 ? static_cast<size_t>(p) : size_t{4096};
    }();
    return page;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/// The size classes of the slabs: 256-byte steps, then steps of 1.5x and 2x alternately, up to kLargeBytes.
constexpr size_t kClasses[] = {256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768};
static_assert(kClasses[std::size(kClasses) - 1] == DeviceHeap::kLargeBytes);

/// A quarter of the class (at least 256 bytes, whole 256-byte units): beside the class's rounding, what an overrun
/// of a block may write before it reaches the next one.
constexpr size_t redzone(size_t class_size) { return std::max<size_t>(256, (class_size / 4 + 255) / 256 * 256); }

constexpr size_t kSlabBytes = size_t{256} << 10;  // at least this much per slab, and at least 16 slots

}  // namespace

DeviceHeap::DeviceHeap() {
    for (size_t size : kClasses) {
        SizeClass c;
        c.size = size;
        c.stride = size + redzone(size);
        classes_.push_back(std::move(c));
    }
}

DeviceHeap::~DeviceHeap() {
    for (auto& [base, bytes] : slabs_) munmap(base, bytes);
}

int DeviceHeap::class_of(size_t bytes) {
    for (size_t i = 0; i < std::size(kClasses); ++i)
        if (bytes <= kClasses[i]) return static_cast<int>(i);
    return -1;
}

size_t DeviceHeap::slot_bytes(size_t bytes) {
    const int c = class_of(bytes);
    return c < 0 ? 0 : kClasses[c] + redzone(kClasses[c]);
}

size_t DeviceHeap::redzone_after(size_t bytes) {
    if (bytes < kLargeBytes) return slot_bytes(bytes) - bytes;
    return round_up(bytes, kAlignment) - bytes;  // then the trailing guard page
}

bool DeviceHeap::grow(SizeClass& c) {
    const size_t page = page_bytes();
    const size_t slots = std::max<size_t>(16, kSlabBytes / c.stride);
    const size_t bytes = round_up(slots * c.stride, page);
    // A guard page after the slab: an overrun of its last slot that runs past the slab traps.
    void* base = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return false;
    char* p = static_cast<char*>(base);
    if (mprotect(p + bytes, page, PROT_NONE) != 0) {
        munmap(base, bytes + page);
        return false;
    }
    try {
        slabs_.emplace_back(base, bytes + page);
        c.free.reserve(c.total + slots);
    } catch (...) {
        if (!slabs_.empty() && slabs_.back().first == base) slabs_.pop_back();
        munmap(base, bytes + page);
        return false;
    }
    c.total += slots;
    for (size_t i = slots; i-- > 0;) c.free.push_back(p + i * c.stride);  // lowest address handed out first
    return true;
}

void* DeviceHeap::allocate(size_t bytes) {
    if (bytes >= kLargeBytes) {
        const size_t page = page_bytes();
        const size_t inner = round_up(bytes, page);
        if (inner < bytes || inner > SIZE_MAX - 2 * page) return nullptr;
        void* base = mmap(nullptr, inner + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) return nullptr;
        char* data = static_cast<char*>(base) + page;
        if (mprotect(data, inner, PROT_READ | PROT_WRITE) != 0) {
            munmap(base, inner + 2 * page);
            return nullptr;
        }
#ifdef MADV_HUGEPAGE
        if (inner >= (size_t{2} << 20)) madvise(data, inner, MADV_HUGEPAGE);  // fewer faults and TLB misses
#endif
        return data + (inner - round_up(bytes, kAlignment));  // its end against the trailing guard page
    }
    std::lock_guard lock(mutex_);
    SizeClass& c = classes_[static_cast<size_t>(class_of(bytes))];
    if (c.free.empty() && !grow(c)) return nullptr;
    void* p = c.free.back();
    c.free.pop_back();
    return p;
}

void DeviceHeap::free(void* p, size_t bytes) {
    if (bytes >= kLargeBytes) {
        const size_t page = page_bytes();
        const size_t inner = round_up(bytes, page);
        char* first_page = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(p) / page * page);
        munmap(first_page - page, inner + 2 * page);
        return;
    }
    std::lock_guard lock(mutex_);
    // Cannot fail: grow() reserved room for every slot of the class.
    classes_[static_cast<size_t>(class_of(bytes))].free.push_back(p);
}

}  // namespace rt::cpu
