"""Seed snippet "Batch 提交": three kernels queued back to back, one synchronize."""
import numpy as np

import runtime


@runtime.jit
def kernel1(x):
    i = runtime.get_global_id()
    x[i] = x[i] + 1.0


@runtime.jit
def kernel2(x):
    i = runtime.get_global_id()
    x[i] = x[i] * 3.0


@runtime.jit
def kernel3(x):
    i = runtime.get_global_id()
    x[i] = x[i] - 2.0


buf = runtime.to_device(np.arange(4096, dtype=np.float32))
args1 = args2 = args3 = buf

# --- the seed's snippet, as written
stream = runtime.Stream()

# 批量提交
stream.launch_kernel(kernel1, args1)
stream.launch_kernel(kernel2, args2)
stream.launch_kernel(kernel3, args3)

# 一次性同步
stream.synchronize()
# --- end of snippet

expect = (np.arange(4096, dtype=np.float32) + 1) * 3 - 2
assert np.array_equal(buf.numpy(), expect)
print("batch: three kernels in order, one synchronize: correct")
