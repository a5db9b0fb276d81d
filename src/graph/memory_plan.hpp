// Static memory planning of an instantiated graph: which allocation nodes may share memory (liveness over the DAG),
// and where each one lives in the executable graph's single arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rt::graph {

struct Program;

/// Every allocation starts at a multiple of this in the arena (what allocate_impl promises for device memory).
inline constexpr size_t kArenaAlignment = 256;

/// Paths between the commands of a program (commands are in topological order, so a path only goes to higher
/// indices). One scratch buffer, reused by every query: not thread-safe.
class Reachability {
public:
    explicit Reachability(const Program& program);
    /// Marks every command reachable from `from` (itself included) along edges, up to command `limit`; then
    /// marked(i) answers for i <= limit.
    void mark_descendants(uint32_t from, uint32_t limit);
    /// Marks every command from which `to` is reachable (itself included), down to command `limit`.
    void mark_ancestors(uint32_t to, uint32_t limit);
    bool marked(uint32_t command) const { return stamp_[command] == current_; }
    /// Whether a path leads from `from` to `to` (from == to: true).
    bool reaches(uint32_t from, uint32_t to);

private:
    void next_stamp();
    const Program& program_;
    std::vector<uint32_t> stamp_;  // == current_: marked by the latest query
    uint32_t current_ = 0;
    std::vector<uint32_t> stack_;
};

/// Places program.slots in one arena: allocations A and B may overlap when A's free command happens-before B's
/// allocation command or the other way round (an allocation without a free command keeps its memory and contents
/// from launch to launch, so it overlaps no other); otherwise
/// they get disjoint, kArenaAlignment-aligned ranges. Greedy: largest first, each at the lowest offset that
/// overlaps no conflicting allocation placed before it. Sets slots[i].offset, arena_bytes, allocated_bytes and
/// allocations.
void plan_memory(Program& program);

}  // namespace rt::graph
