// Static memory planning: liveness of allocation nodes over the graph's partial order, then first-fit placement.
#include "graph/memory_plan.hpp"

#include <algorithm>

#include "core/checked_size.hpp"
#include "core/error.hpp"
#include "graph/program.hpp"

namespace rt::graph {

Reachability::Reachability(const Program& program) : program_(program), stamp_(program.commands.size(), 0) {}

void Reachability::next_stamp() {
    if (++current_ == 0) {  // wrapped: forget every old mark
        std::fill(stamp_.begin(), stamp_.end(), 0);
        current_ = 1;
    }
}

void Reachability::mark_descendants(uint32_t from, uint32_t limit) {
    next_stamp();
    stack_.clear();
    stamp_[from] = current_;
    stack_.push_back(from);
    while (!stack_.empty()) {
        const Command& c = program_.commands[stack_.back()];
        stack_.pop_back();
        for (uint32_t k = 0; k < c.successor_count; ++k) {
            uint32_t s = program_.successors[c.first_successor + k];
            if (s > limit || stamp_[s] == current_) continue;  // topological order: nothing past `limit` leads back
            stamp_[s] = current_;
            stack_.push_back(s);
        }
    }
}

void Reachability::mark_ancestors(uint32_t to, uint32_t limit) {
    next_stamp();
    stack_.clear();
    stamp_[to] = current_;
    stack_.push_back(to);
    while (!stack_.empty()) {
        uint32_t node = program_.commands[stack_.back()].node;
        stack_.pop_back();
        for (uint32_t k = program_.node_dep_begin[node]; k < program_.node_dep_begin[node + 1]; ++k) {
            uint32_t p = program_.command_of_node[program_.node_deps[k]];
            if (p < limit || stamp_[p] == current_) continue;
            stamp_[p] = current_;
            stack_.push_back(p);
        }
    }
}

bool Reachability::reaches(uint32_t from, uint32_t to) {
    if (from > to) return false;
    mark_descendants(from, to);
    return marked(to);
}

void plan_memory(Program& program) {
    std::vector<ArenaSlot>& slots = program.slots;
    const size_t n = slots.size();
    program.allocations = n;
    program.allocated_bytes = 0;
    program.arena_bytes = 0;
    for (const ArenaSlot& s : slots) program.allocated_bytes = checked_add(program.allocated_bytes, s.bytes, "the graph's allocations");
    if (n == 0) return;

    // Bit a * n + b: a's free command happens-before b's allocation command, so b may reuse a's memory.
    std::vector<uint64_t> follows((checked_mul(n, n, "the graph's allocation pairs") + 63) / 64, 0);
    auto bit = [&](size_t a, size_t b) { return (follows[(a * n + b) / 64] >> ((a * n + b) % 64)) & 1; };
    Reachability reach(program);
    for (size_t a = 0; a < n; ++a) {
        if (slots[a].free_command == ArenaSlot::kNone) continue;
        reach.mark_descendants(slots[a].free_command, static_cast<uint32_t>(program.commands.size() - 1));
        for (size_t b = 0; b < n; ++b)
            if (b != a && reach.marked(slots[b].command)) follows[(a * n + b) / 64] |= uint64_t{1} << ((a * n + b) % 64);
    }
    // An allocation no free node releases keeps its place and contents from launch to launch: it shares with none.
    auto may_share = [&](size_t a, size_t b) {
        return slots[a].free_command != ArenaSlot::kNone && slots[b].free_command != ArenaSlot::kNone &&
               (bit(a, b) || bit(b, a));
    };

    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return slots[a].bytes > slots[b].bytes; });
    auto rounded = [](size_t bytes) -> uint64_t {
        return checked_add(bytes, kArenaAlignment - 1, "an allocation node's size") & ~(kArenaAlignment - 1);
    };

    std::vector<size_t> placed;
    std::vector<std::pair<uint64_t, uint64_t>> busy;  // [begin, end) of placed allocations that conflict
    for (size_t i : order) {
        const uint64_t size = rounded(slots[i].bytes);
        busy.clear();
        for (size_t j : placed)
            if (!may_share(i, j)) busy.emplace_back(slots[j].offset, slots[j].offset + rounded(slots[j].bytes));
        std::sort(busy.begin(), busy.end());
        uint64_t offset = 0;
        for (const auto& [begin, end] : busy) {
            if (offset + size <= begin) break;  // the gap before this one fits
            offset = std::max(offset, end);
        }
        slots[i].offset = offset;
        program.arena_bytes = std::max<size_t>(program.arena_bytes, checked_add(offset, size, "the graph's arena"));
        placed.push_back(i);
    }
}

}  // namespace rt::graph
