"""Seed snippet "Stream 流": create a stream, queue a kernel and a copy, synchronize (names the seed leaves undefined are defined first)."""
import numpy as np

import runtime


@runtime.jit
def kernel_func(data):
    i = runtime.get_global_id()
    data[i] = data[i] + 1.0


args = runtime.to_device(np.zeros(1000, dtype=np.float32))  # the kernel's one argument
src = args
dst = np.empty(1000, dtype=np.float32)

# --- the seed's snippet, as written
import runtime

# 创建流
stream = runtime.Stream()

# 在流上执行操作
stream.launch_kernel(kernel_func, args)
stream.launch_copy(dst, src)

# 同步流
stream.synchronize()
# --- end of snippet

assert (dst == 1.0).all(), dst
print(f"stream: kernel + copy done, dst[:4] = {dst[:4]}")
