// cpu device memory: guarded mappings for large allocations, slabs of size-classed slots with redzones for small ones.
#include "backends/cpu/cpu_memory.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/error.hpp"
#include "core/ipc.hpp"

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

DeviceHeap::DeviceHeap(bool shareable) : shareable_(shareable) {
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
        char* const result = data + (inner - round_up(bytes, kAlignment));
        // Large enough to be worth a file descriptor: shareable with another process (rtIpcGetMemHandle). Without a
        // file (out of descriptors) it is anonymous memory, which rtIpcGetMemHandle refuses saying so.
        ipc::SharedFile file =
            shareable_ && bytes >= kShareableBytes ? ipc::create_shared_file(inner) : ipc::SharedFile{};
        if (file.fd >= 0) {
            bool mapped = mmap(data, inner, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, file.fd, 0) != MAP_FAILED;
            if (mapped) {
                try {
                    std::lock_guard lock(mutex_);
                    shared_.emplace(result, Shared{file.fd, file.token});
                } catch (...) {
                    mapped = false;
                }
            }
            if (!mapped) {
                close(file.fd);
                munmap(base, inner + 2 * page);
                return nullptr;
            }
        } else if (mprotect(data, inner, PROT_READ | PROT_WRITE) != 0) {
            munmap(base, inner + 2 * page);
            return nullptr;
        }
#ifdef MADV_HUGEPAGE
        if (inner >= (size_t{2} << 20)) madvise(data, inner, MADV_HUGEPAGE);  // fewer faults and TLB misses
#endif
        return result;  // its end against the trailing guard page
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
        if (shareable_ && bytes >= kShareableBytes) {
            std::lock_guard lock(mutex_);
            if (auto it = shared_.find(p); it != shared_.end()) {
                close(it->second.fd);  // handles exported for it are stale now: their openers see the name gone
                shared_.erase(it);
            }
        }
        return;
    }
    std::lock_guard lock(mutex_);
    // Cannot fail: grow() reserved room for every slot of the class.
    classes_[static_cast<size_t>(class_of(bytes))].free.push_back(p);
}

namespace {
/// The payload of a cpu IPC handle.
struct SharedPayload {
    int32_t fd;
    uint32_t reserved;
    uint64_t token;
    uint64_t bytes;  // the allocation's size; its file holds round_up(bytes, page)
};
static_assert(sizeof(SharedPayload) <= ipc::kPayloadBytes);
}  // namespace

void DeviceHeap::export_shared(void* p, size_t bytes, unsigned char* payload) {
    if (!shareable_)
        fail(RT_ERROR_NOT_SUPPORTED, "the memory of cpu devices is not shareable with other processes unless the runtime "
             "is started with it: set RUNTIME_CPU_IPC_MEMORY=1 (or rtInit option cpu.ipc_memory=1) in the exporting "
             "process, then allocate the memory (off by default: shareable memory gets no transparent huge pages, "
             "which slows large copies and kernels)");
    if (bytes < kShareableBytes)
        fail(RT_ERROR_INVALID_VALUE, "the allocation %p has %zu bytes; on cpu devices only allocations of at least "
             "%zu bytes live in memory another process can map: allocate at least that much for memory you export",
             p, bytes, kShareableBytes);
    SharedPayload out{};
    {
        std::lock_guard lock(mutex_);
        auto it = shared_.find(p);
        if (it == shared_.end())
            fail(RT_ERROR_INVALID_VALUE, "the allocation %p (%zu bytes) is not shareable: no file could be made for it "
                 "when it was allocated (out of file descriptors?); raise the limit (ulimit -n) and allocate it again",
                 p, bytes);
        out.fd = it->second.fd;
        out.token = it->second.token;
    }
    out.bytes = bytes;
    std::memcpy(payload, &out, sizeof out);
}

void* DeviceHeap::open_shared(const unsigned char* payload, int pid, size_t* bytes) {
    SharedPayload in;
    std::memcpy(&in, payload, sizeof in);
    const size_t page = page_bytes();
    const size_t inner = round_up(in.bytes, page);
    if (in.bytes < kShareableBytes || inner < in.bytes || inner > SIZE_MAX / 4)
        fail(RT_ERROR_INVALID_VALUE, "the handle is corrupt: it names an allocation of %llu bytes",
             static_cast<unsigned long long>(in.bytes));
    const int fd = ipc::open_peer_file(pid, in.fd, in.token, "memory");
    struct stat st{};
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < inner) {
        close(fd);
        fail(RT_ERROR_INVALID_VALUE, "the memory of the handle (pid %d) is smaller than the %llu bytes it names", pid,
             static_cast<unsigned long long>(in.bytes));
    }
    // The exporter's layout: the allocation's end against a trailing guard page, a guard page before its first page.
    void* base = mmap(nullptr, inner + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void* data = base == MAP_FAILED ? MAP_FAILED
                                    : mmap(static_cast<char*>(base) + page, inner, PROT_READ | PROT_WRITE,
                                           MAP_SHARED | MAP_FIXED, fd, 0);
    const int err = errno;
    close(fd);  // the mapping keeps the file
    if (data == MAP_FAILED) {
        if (base != MAP_FAILED) munmap(base, inner + 2 * page);
        fail(RT_ERROR_OUT_OF_MEMORY, "cannot map the %llu bytes of memory exported by pid %d: %s",
             static_cast<unsigned long long>(in.bytes), pid, std::strerror(err));
    }
    *bytes = in.bytes;
    return static_cast<char*>(data) + (inner - round_up(in.bytes, kAlignment));
}

void DeviceHeap::close_shared(void* p, size_t bytes) {
    const size_t page = page_bytes();
    const size_t inner = round_up(bytes, page);
    char* first_page = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(p) / page * page);
    munmap(first_page - page, inner + 2 * page);
}

}  // namespace rt::cpu
