"""Module globals (RT_GLOBAL, Module.get_global) and the dialect's 16-bit parameters from Python (issue 13)."""
import numpy as np
import pytest

import runtime

SRC = """
RT_GLOBAL float gain = 2.0f;
RT_GLOBAL int32_t lut[4] = {1, 2, 3, 4};
RT_KERNEL void apply(float* out, rt_half h) {
    size_t i = get_global_id(0);
    out[i] = gain * (float)lut[i % 4] + (float)h;
}
// test_module_globals.py
"""


def test_globals_round_trip_and_reach_kernels(stream):
    m = runtime.Module(SRC)
    gain = m.get_global("gain", np.float32)
    assert gain.nbytes == 4 and gain.shape == (1,) and gain.dtype == np.float32
    back = np.zeros(1, np.float32)
    runtime.copy(back, gain)
    assert back[0] == 2.0  # the source's initial value
    runtime.copy(gain, np.array([3.0], np.float32))
    lut = m.get_global("lut")  # untyped: the first typed copy gives it int32 x 4
    runtime.copy(lut, np.array([10, 20, 30, 40], np.int32))
    out = runtime.to_device(np.zeros(8, np.float32))
    stream.launch_kernel(m.get_function("apply"), out, np.float16(0.5), global_size=(8,), local_size=(4,))
    stream.synchronize()
    np.testing.assert_array_equal(out.numpy(), np.array([10, 20, 30, 40] * 2, np.float32) * 3.0 + 0.5)


def test_global_errors():
    m = runtime.Module(SRC + "// a source of its own: no other handle shares its module\n")
    with pytest.raises(runtime.InvalidValueError, match="no global named 'gian'.*its globals: gain, lut"):
        m.get_global("gian")
    with pytest.raises(runtime.InvalidValueError, match="not a whole number of float64"):
        m.get_global("gain", np.float64)
    g = m.get_global("gain", np.float32)
    m.unload()
    with pytest.raises(runtime.Error):
        m.get_global("gain")
    # The address is no longer device memory to the runtime once no handle of its module is loaded.
    with pytest.raises(runtime.Error):
        runtime.copy(g, np.array([1.0], np.float32))
