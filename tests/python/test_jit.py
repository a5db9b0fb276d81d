"""Tests of @runtime.jit: compiled kernels against the reference mode (RUNTIME_JIT_INTERPRET=1) on random inputs,
signatures and caching, launch shapes and the hidden bound, atomics, rt_assert, and CompileError for unsupported
Python (file, line and construct)."""
import ast
import pathlib
import re

import numpy as np
import pytest

import runtime
import jit_bad_kernels
import jit_kernels as K


def _device_args(args):
    return [runtime.to_device(a) if isinstance(a, np.ndarray) else a for a in args]


def run_both(monkeypatch, kernel, args, **launch):
    """Launch `kernel` compiled and in the reference mode on copies of the same inputs; return both host results."""
    results = []
    for interpret in ("0", "1"):
        monkeypatch.setenv("RUNTIME_JIT_INTERPRET", interpret)
        dev = _device_args(args)
        s = runtime.Stream()
        s.launch_kernel(kernel, *dev, **launch)
        s.synchronize()
        results.append([d.numpy() for d in dev if isinstance(d, runtime.DeviceMemory)])
    monkeypatch.delenv("RUNTIME_JIT_INTERPRET")
    return results


def assert_same(compiled, reference, rtol=1e-5, atol=1e-6):
    assert len(compiled) == len(reference)
    for i, (c, r) in enumerate(zip(compiled, reference)):
        assert c.dtype == r.dtype
        if c.dtype.kind == "f":
            np.testing.assert_allclose(c, r, rtol=rtol, atol=atol, err_msg=f"buffer {i}")
        else:
            np.testing.assert_array_equal(c, r, err_msg=f"buffer {i}")


N = 1000  # not a multiple of the default local size: exercises the hidden bound


def test_saxpy(monkeypatch, rng):
    x, y = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    c, r = run_both(monkeypatch, K.saxpy, [2.5, x, y, np.zeros(N, np.float32)])
    assert_same(c, r)
    np.testing.assert_allclose(c[2], np.float32(2.5) * x + y, rtol=1e-5, atol=1e-6)  # FMA contraction


def test_inf_and_nan_literals_match_the_reference(monkeypatch):
    x = np.array([1, 2, 3, 4, -np.inf, -np.inf, -np.inf, -np.inf, 0, np.inf, 5, 6, np.nan, 7, -1, 2],
                 np.float32)
    c, r = run_both(monkeypatch, K.inf_nan_max4, [x, np.zeros(4, np.float32)], global_size=4)
    assert_same(c, r)
    np.testing.assert_array_equal(c[1], np.array([4, -np.inf, np.nan, 7], np.float32))
    for target in ("cpu", "cuda"):
        src = K.inf_nan_max4.source(runtime.to_device(x), runtime.to_device(np.zeros(4, np.float32)), target=target)
        assert "RT_INF" in src and "RT_NAN" in src and "__builtin_inf" not in src, src


@pytest.mark.parametrize("dt", [np.int32, np.int64])
def test_int_floor_semantics(monkeypatch, rng, dt):
    a = rng.integers(-1000, 1000, N).astype(dt)
    b = rng.integers(1, 50, N).astype(dt) * rng.choice([-1, 1], N).astype(dt)
    z = np.zeros(N, dt)
    c, r = run_both(monkeypatch, K.int_arith, [a, b, z, z, z])
    assert_same(c, r)
    np.testing.assert_array_equal(c[2], a // b)
    np.testing.assert_array_equal(c[3], a % b)


def test_int_division_by_zero_gives_zero_like_numpy(monkeypatch):
    a = np.array([7, -7, 0, 5], np.int32)
    b = np.zeros(4, np.int32)
    c, r = run_both(monkeypatch, K.int_arith, [a, b, b.copy(), b.copy(), b.copy()])
    assert_same(c, r)
    assert (c[2] == 0).all() and (c[3] == 0).all()


def test_float_floordiv_mod(monkeypatch, rng):
    a = rng.uniform(-10, 10, N)
    b = rng.uniform(0.5, 3, N) * rng.choice([-1, 1], N)
    c, r = run_both(monkeypatch, K.float_floordiv_mod, [a, b, np.zeros(N), np.zeros(N)])
    assert_same(c, r, rtol=1e-12, atol=1e-12)


def test_control_flow(monkeypatch, rng):
    x = rng.uniform(-2, 2, N).astype(np.float32)
    c, r = run_both(monkeypatch, K.control_flow, [x, np.zeros(N, np.int32), 10])
    assert_same(c, r)


def test_math(monkeypatch, rng):
    x = rng.uniform(-5, 5, N)
    z = np.zeros(N)
    c, r = run_both(monkeypatch, K.math_funcs, [x, z, z, np.zeros(N, np.int64)])
    assert_same(c, r, rtol=1e-12, atol=1e-12)


def test_math_float32(monkeypatch, rng):
    x = rng.uniform(-5, 5, N).astype(np.float32)
    z = np.zeros(N, np.float32)
    c, r = run_both(monkeypatch, K.math_funcs, [x, z, z, np.zeros(N, np.int32)])
    assert_same(c, r, rtol=2e-5, atol=2e-5)


def test_mixed_types(monkeypatch, rng):
    a = rng.integers(-10, 10, N).astype(np.int32)
    b = rng.uniform(-10, 10, N).astype(np.float32)
    c, r = run_both(monkeypatch, K.mixed_types, [a, b, 1.25, np.zeros(N), np.zeros(N, np.int64)])
    assert_same(c, r)


def test_local_type_join(monkeypatch, rng):
    x = rng.standard_normal(64).astype(np.float32)
    c, r = run_both(monkeypatch, K.accumulate, [x, np.zeros(64, np.float32), 64])
    assert_same(c, r, rtol=1e-4, atol=1e-5)
    assert "float acc" in K.accumulate.source(*_device_args([x, np.zeros(64, np.float32)]), 64)


@pytest.mark.parametrize("dt", [np.uint8, np.int8, np.int16, np.uint16, np.uint32, np.uint64])
def test_small_and_unsigned_ints_wrap(monkeypatch, rng, dt):
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max, N, endpoint=True, dtype=dt)
    b = rng.integers(info.min, info.max, N, endpoint=True, dtype=dt)
    c, r = run_both(monkeypatch, K.small_ints, [a, b, np.zeros(N, dt)])
    assert_same(c, r)


def test_numpy_scalars(monkeypatch, rng):
    x = rng.standard_normal(N).astype(np.float32)
    c, r = run_both(monkeypatch, K.numpy_scalars, [x, np.zeros(N, np.float32), np.float32(1.5), np.int16(3)])
    assert_same(c, r)


@pytest.mark.parametrize("local", [None, 1, 7, 64])
def test_ids(monkeypatch, local):
    n = 777
    bufs = [np.zeros(n, np.int64) for _ in range(6)]
    c, r = run_both(monkeypatch, K.ids, bufs, local_size=local)
    assert_same(c, r)
    lsz = local or 256
    np.testing.assert_array_equal(c[0], np.arange(n))
    np.testing.assert_array_equal(c[1], np.arange(n) % lsz)
    assert (c[3] == -(-n // lsz)).all() and (c[4] == n).all() and (c[5] == lsz).all()


def test_stencil_2d(monkeypatch, rng):
    w, h = 37, 23
    src = rng.standard_normal(w * h).astype(np.float32)
    c, r = run_both(monkeypatch, K.stencil2d, [src, np.zeros(w * h, np.float32), w, h], global_size=(w, h),
                    local_size=(8, 4))
    assert_same(c, r)
    g = src.reshape(h, w)
    inner = 0.2 * (g[1:-1, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:] + g[:-2, 1:-1] + g[2:, 1:-1])
    np.testing.assert_allclose(c[1].reshape(h, w)[1:-1, 1:-1], inner, rtol=1e-5, atol=1e-6)


def test_histogram_atomic_add(monkeypatch, rng):
    x = rng.random(5000)
    c, r = run_both(monkeypatch, K.histogram, [x, np.zeros(10, np.int32), 10])
    assert_same(c, r)
    np.testing.assert_array_equal(c[1], np.histogram(x, bins=10, range=(0, 1))[0])


def test_atomics_misc(monkeypatch, rng):
    x = rng.uniform(0.5, 10, N).astype(np.float32)
    args = [x, np.full(1, -1e30, np.float32), np.full(1, 1e30, np.float32), np.zeros(N, np.float32),
            np.zeros(N, np.float32), np.ones(N, np.float32)]
    c, r = run_both(monkeypatch, K.atomics_misc, args)
    assert_same(c, r)
    assert c[1][0] == x.max() and c[2][0] == x.min()


def test_power_and_bits(monkeypatch, rng):
    a = rng.integers(-50, 50, N).astype(np.int64)
    c, r = run_both(monkeypatch, K.power_bits, [a, np.zeros(N, np.int64), np.zeros(N)])
    assert_same(c, r)


def test_early_return(monkeypatch, rng):
    x = rng.standard_normal(N).astype(np.float32)
    c, r = run_both(monkeypatch, K.early_return, [x, np.zeros(N, np.float32)])
    assert_same(c, r)


def test_annotations(monkeypatch, rng):
    x = rng.uniform(-100, 100, N)
    dx = runtime.alloc(x.nbytes)  # untyped: the annotation says float64
    runtime.copy(dx, x.view(np.uint8))
    results = []
    for interpret in ("0", "1"):
        monkeypatch.setenv("RUNTIME_JIT_INTERPRET", interpret)
        out = runtime.alloc(N * 4)
        s = runtime.Stream()
        s.launch_kernel(K.annotated, dx, out, 0.5, global_size=N)
        s.synchronize()
        results.append(out.numpy().view(np.int32))
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], (x * np.float32(0.5)).astype(np.float32).astype(np.int32))


def test_bool_buffers(monkeypatch, rng):
    x = rng.random(N)
    c, r = run_both(monkeypatch, K.bool_buffers, [x, np.zeros(N, np.bool_), np.zeros(N, np.int32)])
    assert_same(c, r)


def test_hidden_bound_no_write_past_global_size(stream):
    n = 300  # 2 groups of 256: items 300..511 must do nothing
    buf = runtime.to_device(np.zeros(600, np.int64))
    stream.launch_kernel(K.fill_ids, buf, global_size=n)
    stream.synchronize()
    out = buf.numpy()
    np.testing.assert_array_equal(out[:n], np.arange(1, n + 1))
    assert (out[n:] == 0).all()


def test_default_global_size_is_first_buffer(stream):
    buf = runtime.to_device(np.zeros(1234, np.int32))
    stream.launch_kernel(K.fill_ids, buf)
    stream.synchronize()
    np.testing.assert_array_equal(buf.numpy(), np.arange(1, 1235))


def test_zero_size_launch_is_noop(stream):
    stream.launch_kernel(K.fill_ids, runtime.alloc(0, dtype=np.int32))
    stream.synchronize()


def test_compiled_once_per_signature(stream):
    k = runtime.jit(K.saxpy.fn)
    f32 = [runtime.to_device(np.ones(10, np.float32)) for _ in range(3)]
    for _ in range(3):
        stream.launch_kernel(k, 2.0, *f32)
    assert len(k.signatures) == 1
    stream.launch_kernel(k, np.float32(2.0), *f32)
    f64 = [runtime.to_device(np.ones(10)) for _ in range(3)]
    stream.launch_kernel(k, 2.0, *f64)
    assert len(k.signatures) == 3
    stream.synchronize()
    assert k.compiled(2.0, *f32) is k.compiled(2.5, *f32)


def test_source_is_inspectable():
    d = runtime.alloc(64)
    src = K.saxpy.source(2.0, d, d, d)
    assert "RT_KERNEL void saxpy(" in src and "get_global_id(0)" in src and "float*" in src
    assert K.saxpy.inspect(2.0, d, d, d) == src
    src64 = K.saxpy.source(2.0, d.view(np.float64), d, d)
    assert "double*" in src64


def test_generated_kernels_have_no_bounds_test(stream):
    """Launches pass the exact global size and no backend runs the items past it, so the generated kernel has no
    bounds test (for any target) and no RT_ITEMS_BOUNDED; sizes that are not a multiple of the group work."""
    d = runtime.alloc(64)
    for target in (None, "cpu", "cuda"):
        src = K.saxpy.source(2.0, d, d, d, target=target)
        assert "RT_ITEMS_BOUNDED" not in src and ">= rt_gsize0" not in src, src
        src2 = K.stencil2d.source(d, d, 8, 8, global_size=(8, 8), target=target)
        assert "RT_ITEMS_BOUNDED" not in src2 and ">= rt_gsize" not in src2, src2
    for n in (1, 255, 257, 1000, 4097):
        x = np.arange(n, dtype=np.float32)
        xs, ys = runtime.to_device(x), runtime.to_device(np.ones(n + 512, np.float32))
        out = runtime.to_device(np.full(n + 512, -1.0, np.float32))  # longer than x: items past n must not run
        stream.launch_kernel(K.saxpy, 2.0, xs, ys, out)
        stream.synchronize()
        o = out.numpy()
        assert np.array_equal(o[:n], 2.0 * x + 1.0) and np.all(o[n:] == -1.0), n


def test_rt_assert_is_launch_error_and_runtime_survives(stream):
    x = runtime.to_device(np.array([1.0, 2.0, -1.0, 3.0]))
    stream.launch_kernel(K.checked, x)
    with pytest.raises(runtime.LaunchError) as e:
        stream.synchronize()
    assert "RT_ERROR_LAUNCH_FAILED" in str(e.value)
    ok = runtime.to_device(np.array([1.0, 2.0]))
    stream.launch_kernel(K.checked, ok)
    stream.synchronize()


def test_reference_mode_assert_is_launch_error(monkeypatch, stream):
    monkeypatch.setenv("RUNTIME_JIT_INTERPRET", "1")
    x = runtime.to_device(np.array([1.0, -2.0]))
    with pytest.raises(runtime.LaunchError, match=r"global id \(1,\)"):
        stream.launch_kernel(K.checked, x)


def test_launch_errors(stream):
    d = runtime.alloc(40)
    with pytest.raises(runtime.InvalidValueError, match="takes 4 argument"):
        stream.launch_kernel(K.saxpy, 1.0, d)
    with pytest.raises(runtime.InvalidValueError, match="host numpy array"):
        stream.launch_kernel(K.saxpy, 1.0, np.zeros(10), d, d)
    with pytest.raises(runtime.InvalidValueError, match="has type str"):
        stream.launch_kernel(K.saxpy, "1.0", d, d, d)
    with pytest.raises(runtime.InvalidValueError, match="no buffer argument"):
        stream.launch_kernel(runtime.jit(lambda_free_kernel), 3)
    for bad in (-1, (1, 2, 3, 4), 1.5, (4, "x")):
        with pytest.raises(runtime.InvalidValueError, match="global_size"):
            stream.launch_kernel(K.fill_ids, d, global_size=bad)
    with pytest.raises(runtime.InvalidValueError, match="local_size"):
        stream.launch_kernel(K.fill_ids, d, local_size=0)
    with pytest.raises(runtime.InvalidValueError, match="dims"):
        stream.launch_kernel(K.fill_ids, d, global_size=(2, 2), local_size=4)
    with pytest.raises(runtime.InvalidValueError, match="does not fit"):
        stream.launch_kernel(K.small_ints, d, d, d) if False else \
            stream.launch_kernel(K.numpy_scalars, d, d, np.float32(1), 2**70)
    freed = runtime.alloc(16)
    runtime.free(freed)
    with pytest.raises(runtime.InvalidValueError, match="freed"):
        stream.launch_kernel(K.fill_ids, freed, global_size=4)
    with pytest.raises(runtime.InvalidValueError, match="takes 4 argument"):
        K.saxpy(1.0, d, d)  # a call is a launch on the current stream: checked as launch_kernel's arguments
    stream.synchronize()


def lambda_free_kernel(n):
    pass


def _expected_errors():
    src = pathlib.Path(jit_bad_kernels.__file__).read_text().splitlines()
    out = []
    for lineno, line in enumerate(src, 1):
        m = re.search(r"# LINE:(.*)$", line)
        if m:
            fn_name = next(l for l in reversed(src[:lineno]) if l.startswith("def ")).split("(")[0][4:]
            out.append((fn_name, lineno, m.group(1)))
    return out


@pytest.mark.parametrize("name,line,construct", _expected_errors())
def test_compile_errors_name_file_line_construct(name, line, construct):
    k = getattr(jit_bad_kernels, name)
    d = runtime.alloc(16)
    args = [d] + [0] * (len(k.param_names) - 1)
    with pytest.raises(runtime.CompileError) as e:
        runtime.Stream().launch_kernel(k, *args)
    msg = str(e.value)
    assert msg.startswith("RT_ERROR_COMPILE_FAILED: ")
    assert f"jit_bad_kernels.py:{line}:" in msg, msg
    assert construct in msg, msg
    assert name in msg


def test_bad_signature_is_compile_error():
    def star(*args):
        pass

    with pytest.raises(runtime.CompileError, match="plain positional"):
        runtime.jit(star)
    with pytest.raises(runtime.InvalidValueError):
        runtime.jit(42)


def test_builtins_outside_kernels():
    with pytest.raises(runtime.InvalidValueError, match="inside a kernel"):
        runtime.get_global_id()
    buf = np.array([1, 5], np.int32)
    assert runtime.atomic_add(buf, 0, 2) == 1 and buf[0] == 3
    assert runtime.atomic_max(buf, 1, 9) == 5 and buf[1] == 9
    assert runtime.atomic_min(buf, 1, 2) == 9 and buf[1] == 2
    assert runtime.atomic_cas(buf, 1, 2, 7) == 2 and buf[1] == 7
    assert runtime.atomic_cas(buf, 1, 3, 8) == 7 and buf[1] == 7
    assert runtime.atomic_exchange(buf, 0, 0) == 3 and buf[0] == 0


def test_jit_options_and_interpret_flag(stream, monkeypatch):
    @runtime.jit(options="-O2")
    def k(out):
        out[runtime.get_global_id()] = 4

    d = runtime.to_device(np.zeros(8, np.int32))
    stream.launch_kernel(k, d)
    stream.synchronize()
    assert (d.numpy() == 4).all()

    @runtime.jit(interpret=True)
    def k2(out):
        out[runtime.get_global_id()] = 5

    stream.launch_kernel(k2, d)
    assert (d.numpy() == 5).all() and not k2.signatures  # ran in Python, never compiled
