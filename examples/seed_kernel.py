"""Seed snippet "Kernel 执行": a @runtime.jit kernel with runtime.get_global_id(), launched on a stream."""
import numpy as np

import runtime

# --- the seed's snippet, as written
@runtime.jit
def my_kernel(input_data, output_data, size):
    # 核函数实现
    idx = runtime.get_global_id()
    if idx < size:
        output_data[idx] = input_data[idx] * 2

# 分配内存
input_dev = runtime.alloc(1024 * 1024 * 4)
output_dev = runtime.alloc(1024 * 1024 * 4)

# 创建流并执行
stream = runtime.Stream()
stream.launch_kernel(
    my_kernel,
    input_dev, output_dev, 1024 * 1024
)
stream.synchronize()
# --- end of snippet

# The seed never fills input_dev: check the kernel on known data too.
x = np.random.rand(1024 * 1024).astype(np.float32)
runtime.copy(input_dev, x)
stream.launch_kernel(my_kernel, input_dev, output_dev, 1024 * 1024)
stream.synchronize()
y = np.empty_like(x)
runtime.copy(y, output_dev)
assert np.array_equal(y, x * 2)
print("kernel: output == 2 * input over 1M floats")
print("generated source:\n" + my_kernel.source(input_dev, output_dev, 1024 * 1024))
