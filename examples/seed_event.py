"""Seed snippet "Event 事件": order two streams with an event (the producer's copy completes before the consumer's copy back)."""
import numpy as np

import runtime

stream = runtime.Stream()
other_stream = runtime.Stream()
host = np.arange(1 << 20, dtype=np.float32)
dev = runtime.alloc(host.nbytes)
stream.launch_copy(dev, host, direction="H2D")

# --- the seed's snippet, as written
# 创建事件
event = runtime.Event()

# 记录事件
stream.record(event)

# 等待事件
other_stream.wait(event)
# --- end of snippet

back = np.empty_like(host)
other_stream.launch_copy(back, dev, direction="D2H")  # runs after the event: after the H2D copy
other_stream.synchronize()
assert np.array_equal(back, host)
print(f"event: other_stream saw the copy made on stream ({host.nbytes} bytes), event.query() = {event.query()}")
