"""Seed snippet "数据搬运": asynchronous H2D -> kernel -> D2H on one stream, one synchronize."""
import numpy as np

import runtime


@runtime.jit
def my_kernel(data):
    i = runtime.get_global_id()
    data[i] = data[i] * 2.0


# --- the seed's snippet, as written (result_host is left undefined by the seed: defined where it is first needed)
import runtime
import numpy as np

# 创建流
stream = runtime.Stream()

# 主机内存
host_data = np.random.randn(1024, 1024).astype(np.float32)

# 设备内存
device_data = runtime.alloc(host_data.nbytes)

# H2D 搬运主机到设备
stream.launch_copy(device_data, host_data, direction="H2D")

# 执行核函数
stream.launch_kernel(my_kernel, device_data)

result_host = np.empty_like(host_data)  # (not in the seed)
# D2H 搬运设备到主机
stream.launch_copy(result_host, device_data, direction="D2H")

# 同步
stream.synchronize()

print(f"Result: {result_host}")
# --- end of snippet

assert np.array_equal(result_host, host_data * 2)
print("data movement: result == 2 * host_data")
