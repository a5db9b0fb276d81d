"""@runtime.jit device functions: a kernel calls other @runtime.jit functions, each specialised on its argument
types and emitted once per specialisation (RT_DEVICE, ahead of the kernel), returning values; they may take
buffers and shaped arrays, use math and atomics; recursion (direct or mutual) is refused with file and line."""
import math

import numpy as np
import pytest

import runtime
from conftest import MODES, jit_run, skip_unless_kernels_run

import jit_group_kernels as K


@pytest.mark.parametrize("mode", MODES)
def test_nested_device_functions_math_and_atomics(mode, rng):
    x, y = (rng.uniform(-3, 3, 500).astype(np.float32) for _ in range(2))
    _, _, out, total = jit_run(mode, K.uses_device_functions,
                               [x, y, np.zeros(500, np.float32), np.zeros(1, np.float32)])
    np.testing.assert_allclose(out, np.clip(np.hypot(x, y), 0.5, 3), rtol=1e-6)
    assert total[0] == 4 * 500


@pytest.mark.parametrize("mode", MODES)
def test_device_function_specialised_per_argument_type(mode):
    x = np.arange(-5, 5, dtype=np.int32)
    _, out = jit_run(mode, K.ints_through_device_functions, [x, np.zeros(10, np.int64)])
    np.testing.assert_array_equal(out, x.astype(np.int64) ** 2 + np.arange(10) ** 2)


def test_one_rt_device_function_per_specialisation():
    x, o = runtime.empty(10, np.int32), runtime.empty(10, np.int64)
    src = K.ints_through_device_functions.source(x, o, target="cpu")
    # square(int32) and square(weak int) are two specialisations, each emitted once, before the kernel.
    assert src.count("RT_DEVICE int32_t rt_fn_square_") == 1 and src.count("RT_DEVICE int64_t rt_fn_square_") == 1
    assert src.index("RT_DEVICE") < src.index("RT_KERNEL")
    f = runtime.empty(10, np.float32)
    src2 = K.uses_device_functions.source(f, f, f, f, target="cuda")
    assert src2.count("rt_fn_square_") >= 2 and "RT_DEVICE float rt_fn_clamp_" in src2, src2


@pytest.mark.parametrize("mode", MODES)
def test_device_function_indexes_a_shaped_array(mode, rng):
    m = rng.standard_normal((6, 5)).astype(np.float32)
    _, out = jit_run(mode, K.row_sums, [m, np.zeros(6, np.float32)], global_size=6)
    np.testing.assert_allclose(out, m.sum(axis=1), rtol=1e-5)


def _line_of(text):
    return next(i for i, l in enumerate(open(K.__file__), 1) if text in l)


@pytest.mark.parametrize("kernel,callee,chain", [
    (K.calls_recursive, "self_recursive", "self_recursive -> self_recursive"),
    (K.calls_mutual, "rec_a", "rec_a -> rec_b -> rec_a"),
])
def test_recursion_is_refused(kernel, callee, chain):
    with pytest.raises(runtime.CompileError) as e:
        runtime.Stream().launch_kernel(kernel, runtime.empty(1, np.int64))
    msg = str(e.value)
    assert "recursive call" in msg and chain in msg, msg
    line = _line_of("return v * self_recursive(v - 1)") if callee == "self_recursive" else _line_of("return rec_a(v)")
    assert f"jit_group_kernels.py:{line}:" in msg, msg


def test_device_function_errors():
    @runtime.jit
    def no_value(v):
        v = v + 1

    @runtime.jit
    def uses_no_value(out):
        out[0] = no_value(1)

    with pytest.raises(runtime.CompileError, match="returns no value"):
        runtime.Stream().launch_kernel(uses_no_value, runtime.empty(1, np.int64))

    @runtime.jit
    def sometimes(v):
        if v > 0:
            return v

    @runtime.jit
    def uses_sometimes(out):
        out[0] = sometimes(1)

    with pytest.raises(runtime.CompileError, match="some paths"):
        runtime.Stream().launch_kernel(uses_sometimes, runtime.empty(1, np.int64))

    @runtime.jit
    def two(a, b):
        return a + b

    @runtime.jit
    def wrong_arity(out):
        out[0] = two(1)

    with pytest.raises(runtime.CompileError, match="takes 2 argument"):
        runtime.Stream().launch_kernel(wrong_arity, runtime.empty(1, np.int64))


def test_device_function_constants_are_part_of_the_callers_key(monkeypatch):
    import jit_group_kernels as mod
    skip_unless_kernels_run()
    out = runtime.empty(4, np.float32)
    s = runtime.Stream()
    s.launch_kernel(K.calls_scaled, out)
    s.synchronize()
    first = out.numpy().copy()
    monkeypatch.setattr(mod, "SCALE", 3.0)
    s.launch_kernel(K.calls_scaled, out)
    s.synchronize()
    np.testing.assert_array_equal(first * 1.5, out.numpy())


def test_device_functions_called_from_python_outside_kernels():
    with pytest.raises(runtime.InvalidValueError, match="launch_kernel"):
        K.square(3)


@pytest.mark.parametrize("mode", MODES)
def test_local_arrays_passed_to_device_functions(mode, rng):
    """A local array passed to a device function: 2-D and shaped (its shape a constant of the call), 1-D and flat,
    written and read there, across a barrier; on cpu the calls run inside the group form's rt_items blocks."""
    t = K.TILE
    x = rng.integers(-50, 50, 3 * t).astype(np.float32)
    _, out = jit_run(mode, K.local_arrays_through_device_functions, [x, np.zeros(3 * t, np.float32)],
                     local_size=t)
    lid = np.tile(np.arange(t), 3)
    rows = lid * 100 * t + t * (t - 1) / 2  # row lid of the tile: lid * 100 + c for each column c
    np.testing.assert_array_equal(out, rows + np.repeat(x.reshape(3, t).sum(axis=1), t) + np.repeat(x[::t], t))


def test_local_array_arguments_in_the_generated_code():
    x = runtime.empty(3 * K.TILE, np.float32)
    t = K.TILE
    for target in ("cpu", "cuda"):
        src = K.local_arrays_through_device_functions.source(x, x, target=target)
        assert f"(&tile[0][0], lid, " in src and f", {t}L, {t}L, {t}L" in src, src  # pointer, shape, stride
        assert "(&buf[0], " in src, src
    assert "rt_items(rt_it)" in K.local_arrays_through_device_functions.source(x, x, target="cpu")
