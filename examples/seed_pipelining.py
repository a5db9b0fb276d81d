"""Seed snippet "流水线化": overlap a kernel on one stream with a copy on another."""
import numpy as np

import runtime


@runtime.jit
def kernel1(data):
    i = runtime.get_global_id()
    data[i] = data[i] + 1.0


data1 = runtime.to_device(np.zeros(1 << 20, dtype=np.float32))
host_data = np.random.rand(1 << 20).astype(np.float32)
device_data = runtime.alloc(host_data.nbytes)

# --- the seed's snippet, as written
stream1 = runtime.Stream()
stream2 = runtime.Stream()

# Stream 1: 执行上一次计算
stream1.launch_kernel(kernel1, data1)

# Stream 2: 加载下一次数据
stream2.launch_copy(device_data, host_data, direction="H2D")

# 同步
stream1.synchronize()
stream2.synchronize()
# --- end of snippet

assert (data1.numpy() == 1.0).all() and np.array_equal(device_data.numpy(), host_data)
print("pipelining: kernel on stream1 and copy on stream2 both complete and correct")
