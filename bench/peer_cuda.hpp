// peer_cuda.hpp — runtime-bench-core's cuda section: the runtime against the raw CUDA driver API on one GPU.
#pragma once

namespace rtbench {

/// Prints the side-by-side table for runtime device `device` (a cuda device); returns the exit status.
int run_cuda_peer(int device, bool quick);

}  // namespace rtbench
