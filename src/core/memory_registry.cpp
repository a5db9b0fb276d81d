// The allocation registry: interval lookup over live allocations.
#include "core/memory_registry.hpp"

#include <algorithm>
#include <mutex>

namespace rt {

void MemoryRegistry::insert(const Allocation& allocation) {
    std::lock_guard lock(mutex_);
    if (spare_nodes_.empty()) {
        live_[allocation.base] = allocation;
        return;
    }
    auto node = std::move(spare_nodes_.back());
    spare_nodes_.pop_back();
    node.key() = allocation.base;
    node.mapped() = allocation;
    live_.insert(std::move(node));
}

void MemoryRegistry::retain_module_global(const Allocation& allocation) {
    std::lock_guard lock(mutex_);
    auto [it, inserted] = live_.try_emplace(allocation.base, allocation);
    if (inserted) it->second.refs = 0;
    else if (!it->second.module_global) return;  // an allocation of its own there (not possible): left as it is
    it->second.module_global = true;
    ++it->second.refs;
}

void MemoryRegistry::release_module_global(uintptr_t base) {
    std::lock_guard lock(mutex_);
    auto it = live_.find(base);
    if (it == live_.end() || !it->second.module_global) return;
    if (--it->second.refs == 0) live_.erase(it);
}

std::optional<Allocation> MemoryRegistry::erase(uintptr_t base, MemoryKind kind, bool graph_arena) {
    std::lock_guard lock(mutex_);
    auto it = live_.find(base);
    if (it == live_.end() || it->second.kind != kind || it->second.module_global || it->second.graph_arena != graph_arena ||
        it->second.ipc_opened)
        return std::nullopt;
    Allocation out = it->second;
    if (spare_nodes_.size() < 64) spare_nodes_.push_back(live_.extract(it));
    else live_.erase(it);
    freed_[freed_next_++ % kFreedRing] = base;
    return out;
}

std::optional<Allocation> MemoryRegistry::erase_ipc_opened(uintptr_t base) {
    std::lock_guard lock(mutex_);
    auto it = live_.find(base);
    if (it == live_.end() || !it->second.ipc_opened) return std::nullopt;
    Allocation out = it->second;
    live_.erase(it);
    return out;
}

PointerInfo MemoryRegistry::lookup(const void* ptr) const {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard lock(mutex_);
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

std::optional<Allocation> MemoryRegistry::find_overlap(const void* ptr, size_t bytes) const {
    auto begin = reinterpret_cast<uintptr_t>(ptr), end = begin + bytes;
    std::lock_guard lock(mutex_);
    auto it = live_.lower_bound(begin);
    if (it != live_.end() && it->first < end) return it->second;  // starts inside the range
    if (it != live_.begin()) {
        --it;
        if (it->second.base + it->second.size > begin) return it->second;  // starts before, reaches in
    }
    return std::nullopt;
}

bool MemoryRegistry::recently_freed(const void* ptr) const {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard lock(mutex_);
    if (p == 0) return false;
    return std::find(std::begin(freed_), std::end(freed_), p) != std::end(freed_);
}

std::vector<Allocation> MemoryRegistry::take_device_memory(const CoreDevice* device) {
    std::lock_guard lock(mutex_);
    std::vector<Allocation> out;
    for (auto it = live_.begin(); it != live_.end();) {
        const Allocation& a = it->second;
        if (a.device == device && a.kind == MemoryKind::device && !a.module_global && !a.graph_arena &&
            !a.ipc_opened) {
            out.push_back(a);
            it = live_.erase(it);
        } else {
            ++it;
        }
    }
    return out;
}

std::vector<Allocation> MemoryRegistry::take_all() {
    std::lock_guard lock(mutex_);
    std::vector<Allocation> out;
    for (auto& kv : live_) out.push_back(kv.second);
    live_.clear();
    return out;
}

size_t MemoryRegistry::count(const CoreDevice* device) const {
    std::lock_guard lock(mutex_);
    return static_cast<size_t>(std::count_if(live_.begin(), live_.end(), [&](const auto& kv) {
        return !kv.second.module_global && !kv.second.ipc_opened && (!device || kv.second.device == device);
    }));
}

}  // namespace rt
