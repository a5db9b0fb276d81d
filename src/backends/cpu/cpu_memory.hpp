// Where cpu device memory lives: runtime-owned mappings, never the malloc heap, so a kernel's overrun cannot corrupt
// the host's own data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace rt::cpu {

/// Thread-safe. Allocations of at least kLargeBytes get a mapping of their own between two PROT_NONE guard pages,
/// with the allocation's end placed at most 255 bytes before the trailing guard (256-byte alignment, as cudaMalloc
/// guarantees): an overrun past those bytes traps, an underrun past the leading slack of the first page traps too.
/// Smaller allocations come from slabs (anonymous mappings) of one size class each, whose slots are separated by
/// redzones: an overrun up to the redzone (and the class's rounding) leaves the neighbouring block unchanged, and a
/// longer one stays inside device memory. Bookkeeping lives outside the slabs (kernels cannot reach it). Slabs are
/// kept for reuse once mapped (small allocations are bounded by their peak use).
class DeviceHeap {
public:
    static constexpr size_t kAlignment = 256;
    static constexpr size_t kLargeBytes = size_t{32} << 10;  ///< from here on: a guarded mapping of its own

    /// `shareable`: large allocations live in shareable files (rtInit's cpu.ipc_memory).
    explicit DeviceHeap(bool shareable = false);
    ~DeviceHeap();
    DeviceHeap(const DeviceHeap&) = delete;
    DeviceHeap& operator=(const DeviceHeap&) = delete;

    /// `bytes` (> 0) of device memory aligned to kAlignment, or nullptr if the system has no memory for it.
    void* allocate(size_t bytes);
    /// Returns what allocate(bytes) gave, with the same `bytes`.
    void free(void* p, size_t bytes);

    /// From here on, when the heap is shareable, an allocation lives in a shareable file (a memfd mapped MAP_SHARED)
    /// another process can map (rtIpcGetMemHandle); smaller ones, and all of a heap that is not shareable, are
    /// anonymous memory. One file descriptor per such allocation.
    static constexpr size_t kShareableBytes = size_t{1} << 20;
    /// Fills an IPC payload (ipc::kPayloadBytes) for the allocation at `p` of `bytes`; throws INVALID_VALUE saying
    /// why it cannot be shared (too small, no file could be made for it) and what to do.
    void export_shared(void* p, size_t bytes, unsigned char* payload);
    /// Maps the allocation another process (`pid`) exported, laid out as it is there (guard pages included).
    static void* open_shared(const unsigned char* payload, int pid, size_t* bytes);
    /// Unmaps what open_shared mapped.
    static void close_shared(void* p, size_t bytes);

    /// The slot stride of the size class serving `bytes` (< kLargeBytes): the class's size plus its redzone.
    static size_t slot_bytes(size_t bytes);
    /// The bytes between the end of an allocation of `bytes` and whatever memory follows it (the next slot, or a
    /// guard page): what an overrun may write without reaching another allocation.
    static size_t redzone_after(size_t bytes);

private:
    struct SizeClass {
        size_t size = 0;    // largest allocation it serves
        size_t stride = 0;  // size + redzone
        std::vector<void*> free;  // free slots (outside device memory: an overrun cannot corrupt the list)
        size_t total = 0;         // slots mapped (free's capacity: a free never allocates)
    };
    static int class_of(size_t bytes);
    bool grow(SizeClass& c);

    std::mutex mutex_;
    std::vector<SizeClass> classes_;
    std::vector<std::pair<void*, size_t>> slabs_;  // every slab mapped, released with the heap
    struct Shared {
        int fd;
        uint64_t token;
    };
    std::map<void*, Shared> shared_;
    const bool shareable_;  // large allocations that live in a shareable file, by address
};

}  // namespace rt::cpu
