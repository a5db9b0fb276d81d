"""Seed snippet "Runtime 初始化": init, device count, set_device, device properties."""
# --- the seed's snippet, as written
import runtime

# 初始化 Runtime
runtime.init()

# 获取设备信息
device_count = runtime.get_device_count()
print(f"Available devices: {device_count}")

# 选择设备
runtime.set_device(0)

# 获取设备属性
props = runtime.get_device_properties(0)
print(f"Device name: {props.name}")
print(f"Device memory: {props.total_memory / 1024**3:.2f} GB")
# --- end of snippet

assert device_count >= 1 and props.total_memory > 0
print(f"Backend: {props.backend}, compute units: {props.compute_units}")
