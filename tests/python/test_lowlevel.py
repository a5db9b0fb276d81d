"""Tests of the CUDA-level calls (runtime.lowlevel, issue 20): pointer and device attributes, peer copies, managed and
pitched memory, stream priorities, synchronize(timeout=...), device_reset, kernel attributes and occupancy, and the
new error classes."""
import subprocess
import sys
import threading

import numpy as np
import pytest

import runtime
from runtime import _core


def _gate(stream):
    """Blocks `stream` until the returned threading.Event is set (a host function that waits, at most 30 s)."""
    gate = threading.Event()
    stream.launch_host_func(lambda: gate.wait(30))
    return gate


def test_error_classes():
    assert runtime.TimeoutError.code == 21 and issubclass(runtime.TimeoutError, TimeoutError)
    assert runtime.CommTimeoutError is runtime.TimeoutError  # the earlier name of code 21
    assert runtime.NotInitializedError.code == 22
    assert runtime.DeviceLostError.code == 23
    assert _core.ERROR_CODES["RT_ERROR_DEVICE_LOST"] == 23
    assert _core.get_error_name(22) == "RT_ERROR_NOT_INITIALIZED"


def test_pointer_attributes_of_each_kind():
    d = runtime.alloc(4096)
    a = runtime.pointer_attributes(d)
    assert a["type"] == "device" and a["base"] == d.ptr and a["size"] == 4096
    assert a["device"] == d.device.index
    inner = runtime.pointer_attributes(d.ptr + 100)
    assert inner["base"] == d.ptr and inner["device_pointer"] == d.ptr + 100
    h = np.zeros(10)
    assert runtime.pointer_attributes(h)["type"] == "unregistered"
    assert runtime.pointer_attributes(0)["device"] == -1
    with pytest.raises(runtime.InvalidValueError, match="expected runtime.DeviceMemory"):
        runtime.pointer_attributes("nope")


def test_device_attributes_match_properties():
    props = runtime.get_device_properties()
    assert runtime.get_device_attribute("multiprocessor_count") == props.compute_units
    assert runtime.get_device_attribute("max_threads_per_block") == props.max_threads_per_block
    assert runtime.get_device_attribute("warp_size") >= 1
    assert runtime.get_device_attribute("unified_addressing") == 1
    with pytest.raises(runtime.InvalidValueError, match="unknown attribute 'warpsize'"):
        runtime.get_device_attribute("warpsize")
    with pytest.raises(runtime.InvalidDeviceError):
        runtime.get_device_attribute("warp_size", device=10_000)


def test_stream_priority():
    least, greatest = runtime.get_stream_priority_range()
    assert least == 0 and greatest <= 0
    s = runtime.Stream(priority=greatest)
    assert s.priority == greatest
    assert runtime.Stream(priority=greatest - 50).priority == greatest  # clamped
    assert runtime.Stream().priority == 0
    assert runtime.default_stream().priority == 0
    with pytest.raises(runtime.InvalidValueError, match="priority must be an int"):
        runtime.Stream(priority="high")
    h = np.arange(1000, dtype=np.float32)
    d = runtime.alloc(h.nbytes)
    s.launch_copy(d, h)
    s.synchronize()
    assert np.array_equal(d.numpy(), h)


def test_stream_synchronize_timeout():
    s = runtime.Stream()
    s.synchronize(timeout=0)  # idle
    gate = _gate(s)
    with pytest.raises(runtime.TimeoutError, match="did not complete within 20 ms"):
        s.synchronize(timeout=0.02)
    gate.set()
    s.synchronize(timeout=30)
    with pytest.raises(runtime.InvalidValueError, match="negative"):
        s.synchronize(timeout=-1)
    with pytest.raises(runtime.InvalidValueError, match="seconds"):
        s.synchronize(timeout="1")


def test_event_synchronize_timeout():
    s = runtime.Stream()
    e = runtime.Event()
    e.synchronize(timeout=0)  # never recorded
    gate = _gate(s)
    s.record(e)
    with pytest.raises(runtime.TimeoutError, match="event"):
        e.synchronize(timeout=0.01)
    gate.set()
    e.synchronize(timeout=30)
    assert e.query()


def test_timeout_reports_the_stream_failure():
    s = runtime.Stream()

    def boom():
        raise ValueError("deliberate")
    s.launch_host_func(boom)
    with pytest.raises(runtime.LaunchError, match="deliberate"):
        s.synchronize(timeout=30)
    s.synchronize(timeout=30)


def test_managed_memory_shared_with_host():
    if not runtime.get_device_attribute("managed_memory"):
        pytest.skip("no managed memory on this device")
    m = runtime.alloc_managed(16, np.int32)
    assert runtime.pointer_attributes(m)["type"] == "managed"
    runtime.copy(m, np.arange(16, dtype=np.int32))
    s = runtime.Stream()
    runtime.prefetch(m, runtime.current_device(), stream=s)
    s.memset(m, 0, 8)
    runtime.prefetch(m, "host", stream=s)
    s.synchronize()
    out = m.numpy()
    assert out[0] == 0 and out[1] == 0 and out[2] == 2 and out[15] == 15
    plain = runtime.alloc(64)
    with pytest.raises(runtime.InvalidValueError, match="not managed memory"):
        runtime.prefetch(plain, "host", stream=s)
    runtime.free(m)


def test_pitched_copy_roundtrip():
    p = runtime.alloc_pitch(30, 4)
    assert p.pitch >= 30
    src = np.arange(4 * 32, dtype=np.uint8).reshape(4, 32)
    runtime.copy_2d(p, p.pitch, src, 32, 30, 4, "H2D")
    back = np.zeros((4, 40), dtype=np.uint8)
    runtime.copy_2d(back, 40, p, p.pitch, 30, 4, "D2H")
    assert np.array_equal(back[:, :30], src[:, :30])
    assert not back[:, 30:].any()
    with pytest.raises(runtime.InvalidValueError, match="dpitch 10 is smaller than the width 30"):
        runtime.copy_2d(p, 10, src, 32, 30, 4, "H2D")
    with pytest.raises(runtime.InvalidValueError, match="direction"):
        runtime.copy_2d(p, p.pitch, src, 32, 30, 4, "up")
    p.free()


def test_peer_copy_between_devices():
    n = runtime.get_device_count()
    same = [i for i in range(n) if i != runtime.get_device()
            and runtime.get_device_properties(i).backend == runtime.get_device_properties().backend]
    assert runtime.can_access_peer(runtime.get_device(), runtime.get_device()) is False
    with pytest.raises(runtime.InvalidDeviceError):
        runtime.enable_peer_access(runtime.get_device())
    if not same:
        pytest.skip("one device of this backend (RUNTIME_CPU_DEVICES=2 gives two)")
    other = same[0]
    h = np.arange(256, dtype=np.float32)
    a = runtime.to_device(h)
    b = runtime.alloc(h.nbytes, device=other)
    runtime.copy_peer(b, a)
    c = runtime.alloc(h.nbytes)
    s = runtime.Stream()
    runtime.copy_peer(c, b, stream=s)
    s.synchronize()
    assert np.array_equal(c.numpy().view(np.float32), h)


def test_kernel_attributes_and_occupancy():
    m = runtime.Module("RT_KERNEL void scale(float* x, float f) { x[get_global_id(0)] *= f; }")
    f = m.get_function("scale")
    attrs = _core.func_get_attributes(f.handle)
    assert attrs["num_params"] == 2
    assert attrs["max_threads_per_block"] == runtime.get_device_properties().max_threads_per_block
    assert _core.occupancy_max_active_blocks(f.handle, 64, 0) >= 1
    grid, block = _core.occupancy_max_potential_block_size(f.handle, 0, 0)
    assert block >= 1 and grid >= runtime.get_device_properties().compute_units
    with pytest.raises(runtime.InvalidValueError, match="block_size 0"):
        _core.occupancy_max_active_blocks(f.handle, 0, 0)


_RESET_SCRIPT = """
import numpy as np
import runtime
s = runtime.Stream()
e = runtime.Event()
d = runtime.alloc(1024)
ran = []
s.launch_host_func(lambda: ran.append(1))
runtime.device_reset()
assert ran == [1], ran  # queued work completed first
for call in (s.synchronize, e.query):
    try:
        call()
    except runtime.InvalidHandleError:
        pass
    else:
        raise AssertionError(f"{call} after device_reset did not raise InvalidHandleError")
assert runtime.pointer_attributes(d.ptr)["type"] == "unregistered"
h = np.arange(10, dtype=np.float32)
assert np.array_equal(runtime.to_device(h).numpy(), h)  # the device works as new
print("reset ok")
"""


def test_device_reset_invalidates_handles():
    # In a process of its own: a reset destroys every module and stream of the device, the JIT's cached kernels and
    # other tests' objects included.
    done = subprocess.run([sys.executable, "-c", _RESET_SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reset ok" in done.stdout
