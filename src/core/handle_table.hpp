// Maps opaque C handles to live core objects, so a garbage, stale or wrong-kind handle is refused, never followed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "core/error.hpp"

namespace rt {

/// A handle is tag(8) | generation(32) | slot(24), never a pointer: a destroyed handle's slot gets a new
/// generation, so the old value stays invalid; the tag makes a stream handle useless as an event handle.
///
/// Two ways to resolve a handle: find() returns an owning reference (under a reader lock), borrow()
/// a plain pointer without any lock or reference count (the launch path). A borrow announces itself in
/// a reader count; an object erased while a borrow may be reading is kept (retired) until a later
/// insert, erase or clear sees no borrow in progress, so a borrowed pointer never dangles.
template <class T, uint8_t Tag>
class HandleTable {
    struct Slot;

public:
    HandleTable() = default;
    HandleTable(const HandleTable&) = delete;
    HandleTable& operator=(const HandleTable&) = delete;
    ~HandleTable() {
        clear();
        for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
    }

    uint64_t insert(std::shared_ptr<T> object) {
        std::vector<std::shared_ptr<T>> dead;
        std::unique_lock lock(mutex_);
        uint32_t slot;
        if (!free_.empty()) {
            slot = free_.back();
            free_.pop_back();
        } else {
            slot = slot_count_;
            if (slot >> kSlotBits)
                fail(RT_ERROR_OUT_OF_MEMORY, "too many live handles of one kind (at most %u)", 1u << kSlotBits);
            auto [c, offset] = locate(slot);
            if (offset == 0) chunks_[c].store(new Slot[kFirstChunk << c], std::memory_order_release);
            slot_count_ = slot + 1;
        }
        Slot& s = at(slot);
        uint32_t generation = next_generation();
        s.raw.store(object.get(), std::memory_order_relaxed);
        s.generation.store(generation, std::memory_order_release);  // publishes raw to borrow()
        s.object = std::move(object);
        reap(dead);
        return encode(slot, generation);
    }

    /// The live object, or null if `handle` is not a live handle of this table.
    std::shared_ptr<T> find(uint64_t handle) const {
        uint32_t slot, generation;
        if (!decode(handle, &slot, &generation)) return nullptr;
        std::shared_lock lock(mutex_);
        if (slot >= slot_count_ || at(slot).generation.load(std::memory_order_relaxed) != generation) return nullptr;
        return at(slot).object;
    }

    /// A borrowed object: valid (not destroyed) while the Borrow lives; null if the handle is not live.
    /// Lock-free: one atomic increment and decrement of the table's reader count.
    class Borrow {
    public:
        explicit Borrow(const HandleTable& table, uint64_t handle) : table_(table) {
            table_.readers_.fetch_add(1, std::memory_order_seq_cst);  // before reading the slot: see erase()
            object_ = table_.lookup(handle);
        }
        ~Borrow() { table_.readers_.fetch_sub(1, std::memory_order_release); }
        Borrow(const Borrow&) = delete;
        Borrow& operator=(const Borrow&) = delete;
        T* get() const { return object_; }
        T* operator->() const { return object_; }
        T& operator*() const { return *object_; }
        explicit operator bool() const { return object_ != nullptr; }

    private:
        const HandleTable& table_;
        T* object_;
    };
    Borrow borrow(uint64_t handle) const { return Borrow(*this, handle); }

    /// Removes and returns the object (null if not live).
    std::shared_ptr<T> erase(uint64_t handle) {
        uint32_t slot, generation;
        if (!decode(handle, &slot, &generation)) return nullptr;
        std::vector<std::shared_ptr<T>> dead;
        std::unique_lock lock(mutex_);
        if (slot >= slot_count_) return nullptr;
        Slot& s = at(slot);
        if (s.generation.load(std::memory_order_relaxed) != generation) return nullptr;
        // seq_cst store, then (in reap) a seq_cst load of readers_: a borrow that started after that load
        // sees generation 0; one that started before is counted, and the object stays retired until it ends.
        s.generation.store(0, std::memory_order_seq_cst);
        s.raw.store(nullptr, std::memory_order_relaxed);
        std::shared_ptr<T> out = s.object;
        retired_.push_back(std::move(s.object));
        free_.push_back(slot);
        reap(dead);
        return out;
    }

    /// Removes and returns every object for which pred(const T&) is true (rtDeviceReset). `pred` runs under the
    /// table's lock: it must not call into the table.
    template <class Pred>
    std::vector<std::shared_ptr<T>> erase_if(Pred&& pred) {
        std::vector<std::shared_ptr<T>> out, dead;
        std::unique_lock lock(mutex_);
        for (uint32_t i = 0; i < slot_count_; ++i) {
            Slot& s = at(i);
            if (s.generation.load(std::memory_order_relaxed) == 0 || !pred(*s.object)) continue;
            s.generation.store(0, std::memory_order_seq_cst);  // as erase()
            s.raw.store(nullptr, std::memory_order_relaxed);
            out.push_back(s.object);
            retired_.push_back(std::move(s.object));
            free_.push_back(i);
        }
        reap(dead);
        return out;
    }

    /// Removes every object (teardown).
    void clear() {
        std::vector<std::shared_ptr<T>> dead;
        std::unique_lock lock(mutex_);
        for (uint32_t i = 0; i < slot_count_; ++i) {
            Slot& s = at(i);
            if (s.generation.load(std::memory_order_relaxed) == 0) continue;
            s.generation.store(0, std::memory_order_seq_cst);
            s.raw.store(nullptr, std::memory_order_relaxed);
            retired_.push_back(std::move(s.object));
        }
        free_.clear();
        for (uint32_t i = slot_count_; i-- > 0;) free_.push_back(i);
        reap(dead);
    }

private:
    struct Slot {
        std::atomic<uint32_t> generation{0};  // 0 = free
        std::atomic<T*> raw{nullptr};         // object.get(), readable without the lock
        std::shared_ptr<T> object;            // under mutex_
    };
    static constexpr uint32_t kSlotBits = 24;
    // Slots live in chunks that never move, so borrow() may read them while insert() adds chunks. Chunk
    // c holds kFirstChunk << c slots: a handful of chunks covers every slot, and few slots cost little.
    static constexpr uint32_t kFirstChunk = 64;
    static constexpr int kChunks = 19;  // kFirstChunk * (2^19 - 1) >= 2^24 slots

    /// (chunk, index within it) of a slot.
    static std::pair<int, uint32_t> locate(uint32_t slot) {
        uint32_t q = slot / kFirstChunk + 1;
        int c = 31 - __builtin_clz(q);
        return {c, slot - kFirstChunk * ((1u << c) - 1)};
    }
    Slot& at(uint32_t slot) const {
        auto [c, offset] = locate(slot);
        return chunks_[c].load(std::memory_order_acquire)[offset];
    }

    T* lookup(uint64_t handle) const {
        uint32_t slot, generation;
        if (!decode(handle, &slot, &generation)) return nullptr;
        auto [c, offset] = locate(slot);
        if (c >= kChunks) return nullptr;
        Slot* chunk = chunks_[c].load(std::memory_order_acquire);
        if (!chunk) return nullptr;
        const Slot& s = chunk[offset];
        // Seqlock-style: the generation before and after reading raw must be the handle's, so raw
        // belongs to this handle and not to a later insert into the same slot.
        if (s.generation.load(std::memory_order_seq_cst) != generation) return nullptr;
        T* p = s.raw.load(std::memory_order_acquire);
        if (s.generation.load(std::memory_order_relaxed) != generation) return nullptr;
        return p;
    }

    /// Moves the retired objects into `dead` (destroyed by the caller after unlocking) if no borrow is in
    /// progress (mutex_ held).
    void reap(std::vector<std::shared_ptr<T>>& dead) {
        if (!retired_.empty() && readers_.load(std::memory_order_seq_cst) == 0) dead.swap(retired_);
    }

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

    mutable std::shared_mutex mutex_;  // writers, and find()'s copy of the owning reference
    std::atomic<Slot*> chunks_[kChunks] = {};
    uint32_t slot_count_ = 0;  // slots ever used (under mutex_)
    std::vector<uint32_t> free_;
    std::vector<std::shared_ptr<T>> retired_;  // erased while a borrow may still read them
    mutable std::atomic<int> readers_{0};      // borrows in progress
};

}  // namespace rt
