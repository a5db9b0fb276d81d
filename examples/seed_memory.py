"""Seed snippet "Memory 内存管理": alloc, copy, free. The seed's copy(dev_mem, host_mem, direction="D2H") contradicts its
operands (destination first, SPEC §3): it raises runtime.InvalidValueError naming both; the correct call follows."""
import numpy as np

import runtime

host_mem = np.random.rand(1024 * 1024).astype(np.float32)  # 4 MB of host data

# --- the seed's snippet, as written (its copy raises: dst is device memory, so "D2H" cannot hold)
try:
    # 分配设备内存
    dev_mem = runtime.alloc(1024 * 1024 * 4)  # 1MB

    # 内存拷贝
    runtime.copy(dev_mem, host_mem, direction="D2H")

    # 释放内存
    runtime.free(dev_mem)
except runtime.InvalidValueError as e:
    print(f"memory: the seed's direction is refused as expected:\n  {e}")
# --- end of snippet

runtime.copy(dev_mem, host_mem, direction="H2D")  # what the snippet means: host -> device
back = np.empty_like(host_mem)
runtime.copy(back, dev_mem, direction="D2H")
assert np.array_equal(back, host_mem)
runtime.free(dev_mem)
print(f"memory: {dev_mem.nbytes} bytes H2D + D2H round trip verified, then freed")
