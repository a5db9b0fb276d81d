// The in-process transport's data movement: every rank's buffers are addressable, so each piece of the work reads
// its slice straight from the peers' buffers.
#pragma once

#include <vector>

#include "backends/backend.hpp"
#include "comm/comm.hpp"

namespace rt::comm {

/// One matched operation, every rank's operands checked to agree: send[i] and recv[i] are participant i's.
struct Matched {
    Kind kind;
    rtDataType type;
    rtReduceOp op;
    size_t count;
    int root;  ///< broadcast, reduce: the root's participant index
    std::vector<const void*> send;
    std::vector<void*> recv;
};

/// Moves the data of `m` on `workers` (returns when done). Deterministic: pieces only split element ranges.
void run_local(const Matched& m, backend::Workers& workers);

}  // namespace rt::comm
