// graph_shape.hpp — the DAGs of empty kernels/tasks that every side of the graph peer rows builds (ours, PoCL's command buffer, oneTBB's flow_graph).
#pragma once

#include <vector>

namespace rtbench {

/// A chain (node i after node i-1) or a fan-out/fan-in (node 0 the root; nodes 1..n-2 after the root, independent
/// of each other; node n-1, the sink, after all of them). Every side builds the same nodes in the same order with the
/// same edges from `deps`, so "per node" means the same thing in every cell of a row.
struct GraphShape {
    enum Kind { Chain = 0, FanOut = 1 };
    Kind kind = Chain;
    int nodes = 1000;  // >= 3

    /// The nodes node `i` runs after (ascending).
    std::vector<int> deps(int i) const {
        std::vector<int> d;
        if (i == 0) return d;
        if (kind == Chain) {
            d.push_back(i - 1);
        } else if (i < nodes - 1) {
            d.push_back(0);
        } else {
            for (int j = 1; j < nodes - 1; ++j) d.push_back(j);
        }
        return d;
    }
    /// "chain" / "fan-out".
    const char* name() const { return kind == Chain ? "chain" : "fan-out"; }
};

/// The counting form of a node (verification only, untimed): every node adds 1 to one shared counter with an atomic
/// increment, so after r replays it holds r * nodes on every side. One counter and the same arguments for every node,
/// because PoCL 3.1's command buffers do not take a kernel's arguments when a command is recorded (every recorded
/// command runs with the arguments set last).

}  // namespace rtbench
