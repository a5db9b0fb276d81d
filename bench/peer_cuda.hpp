// peer_cuda.hpp — runtime-bench-core's cuda section: the runtime against the raw CUDA driver API on one GPU.
#pragma once

namespace rtbench {

/// Prints the side-by-side table for runtime device `device` (a cuda device); returns the exit status.
/// `graphs_only`: only the graph rows (replays of executable graphs against native CUDA graphs of the same nodes).
int run_cuda_peer(int device, bool quick, bool graphs_only = false);

}  // namespace rtbench
