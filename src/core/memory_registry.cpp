// The allocation registry: interval lookup over live allocations.
#include "core/memory_registry.hpp"

#include <algorithm>
#include <mutex>

namespace rt {

namespace {
constexpr size_t kRecentlyFreedLimit = 4096;
}

void MemoryRegistry::insert(const Allocation& allocation) {
    std::unique_lock lock(mutex_);
    live_[allocation.base] = allocation;
    freed_stamp_.erase(allocation.base);
}

std::optional<Allocation> MemoryRegistry::erase(uintptr_t base, MemoryKind kind) {
    std::unique_lock lock(mutex_);
    auto it = live_.find(base);
    if (it == live_.end() || it->second.kind != kind) return std::nullopt;
    Allocation out = it->second;
    live_.erase(it);
    uint64_t stamp = ++next_stamp_;
    freed_stamp_[base] = stamp;
    freed_order_.emplace_back(base, stamp);
    if (freed_order_.size() > kRecentlyFreedLimit) {
        auto [old, old_stamp] = freed_order_.front();
        freed_order_.pop_front();
        auto f = freed_stamp_.find(old);
        if (f != freed_stamp_.end() && f->second == old_stamp) freed_stamp_.erase(f);
    }
    return out;
}

PointerInfo MemoryRegistry::lookup(const void* ptr) const {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    std::shared_lock lock(mutex_);
    PointerInfo info;
    auto it = live_.upper_bound(p);
    if (it != live_.begin()) {
        --it;
        const Allocation& a = it->second;
        if (p < a.base + a.size) {
            info.allocation = a;
            info.available = a.base + a.size - p;
            return info;
        }
    }
    return info;
}

bool MemoryRegistry::recently_freed(const void* ptr) const {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    std::shared_lock lock(mutex_);
    return freed_stamp_.count(p) != 0;
}

std::vector<Allocation> MemoryRegistry::take_all() {
    std::unique_lock lock(mutex_);
    std::vector<Allocation> out;
    for (auto& kv : live_) out.push_back(kv.second);
    live_.clear();
    return out;
}

size_t MemoryRegistry::count(const CoreDevice* device) const {
    std::shared_lock lock(mutex_);
    if (!device) return live_.size();
    return static_cast<size_t>(std::count_if(live_.begin(), live_.end(),
                                             [&](const auto& kv) { return kv.second.device == device; }));
}

}  // namespace rt
