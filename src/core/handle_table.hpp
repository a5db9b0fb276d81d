// Maps opaque C handles to live core objects, so a garbage, stale or wrong-kind handle is refused, never followed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <vector>

namespace rt {

/// A handle is tag(8) | generation(32) | slot(24), never a pointer: a destroyed handle's slot gets a new
/// generation, so the old value stays invalid; the tag makes a stream handle useless as an event handle.
template <class T, uint8_t Tag>
class HandleTable {
public:
    uint64_t insert(std::shared_ptr<T> object) {
        std::unique_lock lock(mutex_);
        uint32_t slot;
        if (!free_.empty()) {
            slot = free_.back();
            free_.pop_back();
        } else {
            slot = static_cast<uint32_t>(slots_.size());
            slots_.emplace_back();
        }
        Slot& s = slots_[slot];
        s.generation = next_generation();
        s.object = std::move(object);
        return encode(slot, s.generation);
    }

    /// The live object, or null if `handle` is not a live handle of this table.
    std::shared_ptr<T> find(uint64_t handle) const {
        uint32_t slot, generation;
        if (!decode(handle, &slot, &generation)) return nullptr;
        std::shared_lock lock(mutex_);
        if (slot >= slots_.size() || slots_[slot].generation != generation) return nullptr;
        return slots_[slot].object;
    }

    /// Removes and returns the object (null if not live).
    std::shared_ptr<T> erase(uint64_t handle) {
        uint32_t slot, generation;
        if (!decode(handle, &slot, &generation)) return nullptr;
        std::unique_lock lock(mutex_);
        if (slot >= slots_.size() || slots_[slot].generation != generation) return nullptr;
        std::shared_ptr<T> out = std::move(slots_[slot].object);
        slots_[slot].generation = 0;
        free_.push_back(slot);
        return out;
    }

    /// Removes every object (teardown).
    void clear() {
        std::unique_lock lock(mutex_);
        slots_.clear();
        free_.clear();
    }

    /// Every live object (for device-wide synchronisation).
    std::vector<std::shared_ptr<T>> all() const {
        std::shared_lock lock(mutex_);
        std::vector<std::shared_ptr<T>> out;
        for (const Slot& s : slots_)
            if (s.object) out.push_back(s.object);
        return out;
    }

private:
    struct Slot {
        uint32_t generation = 0;  // 0 = free
        std::shared_ptr<T> object;
    };
    static constexpr uint32_t kSlotBits = 24;

    // Generations come from one process-wide counter so handles from before rtFinalize stay invalid after.
    static uint32_t next_generation() {
        static std::atomic<uint32_t> counter{0};
        uint32_t g;
        do g = counter.fetch_add(1, std::memory_order_relaxed) + 1;
        while (g == 0);
        return g;
    }
    static uint64_t encode(uint32_t slot, uint32_t generation) {
        return (uint64_t{Tag} << 56) | (uint64_t{generation} << kSlotBits) | slot;
    }
    static bool decode(uint64_t handle, uint32_t* slot, uint32_t* generation) {
        if ((handle >> 56) != Tag) return false;
        *slot = static_cast<uint32_t>(handle & ((1u << kSlotBits) - 1));
        *generation = static_cast<uint32_t>(handle >> kSlotBits);
        return *generation != 0;
    }

    mutable std::shared_mutex mutex_;
    std::vector<Slot> slots_;
    std::vector<uint32_t> free_;
};

}  // namespace rt
