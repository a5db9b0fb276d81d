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


WIDE = """
struct Pair { double a, b; };
RT_KERNEL void wide(double* out, Pair p, int8_t tag, rt_float4 v, rt_int3 t) {
    out[0] = p.a; out[1] = p.b; out[2] = tag; out[3] = v.x; out[4] = v.w; out[5] = t.z;
}
// test_module_globals.py
"""


def test_parameters_of_more_than_8_bytes(stream):
    f = runtime.Module(WIDE).get_function("wide")
    assert f.param_sizes == [8, 16, 1, 16, 12]
    out = runtime.to_device(np.zeros(6, np.float64))
    pair = np.array([(1.5, -2.5)], dtype=[("a", "f8"), ("b", "f8")])[0]
    f4 = np.array([(1.0, 2.0, 3.0, 4.0)], dtype=np.dtype([("x", "f4"), ("y", "f4"), ("z", "f4"), ("w", "f4")]))[0]
    t = np.array([7, 8, 9], np.int32).tobytes()
    stream.launch_kernel(f, out, pair, np.int8(-3), f4, t, global_size=(1,), local_size=(1,))
    stream.synchronize()
    np.testing.assert_array_equal(out.numpy(), [1.5, -2.5, -3, 1.0, 4.0, 9])
    with pytest.raises(runtime.InvalidValueError, match=r"argument 1: cannot pass .* as a 16-byte parameter \(it is 8 bytes\)"):
        stream.launch_kernel(f, out, np.float64(1), np.int8(0), f4, t, global_size=(1,), local_size=(1,))
    with pytest.raises(runtime.InvalidValueError, match=r"argument 4: .*12-byte parameter \(type tuple; a parameter"):
        stream.launch_kernel(f, out, pair, np.int8(0), f4, (1, 2, 3), global_size=(1,), local_size=(1,))
