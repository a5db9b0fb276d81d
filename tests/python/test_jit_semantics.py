"""@runtime.jit keeps NumPy's semantics: wrapping integer arithmetic at the edges (INT_MAX, INT_MIN, -1, 0),
NumPy's division, modulo and shifts; locals read before they are assigned on some path are refused; dtypes without
a kernel type are refused with the runtime's error; asserts name the Python line; globals are part of the key."""
import inspect
import os
import pathlib
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import runtime

REPO = pathlib.Path(__file__).resolve().parents[2]


def _run(kernel, args, interpret):
    """Launch kernel on device copies of args, compiled or in the reference mode; return the buffers on the host."""
    dev = [runtime.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    s = runtime.Stream()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RUNTIME_JIT_INTERPRET", "1" if interpret else "0")
            s.launch_kernel(kernel, *dev)
            s.synchronize()
    finally:
        s.close()
    return [d.numpy() for d in dev if isinstance(d, runtime.DeviceMemory)]


def _line_of(fn, text):
    """The file line number of the first line of fn's source containing text."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


# ------------------------------------------------------------------------------------- integer arithmetic


@runtime.jit
def int_ops(a, b, add, sub, mul, neg, ab, fdiv, mod, shl, shr, pw, grows):
    i = runtime.get_global_id(0)
    x = a[i]
    y = b[i]
    add[i] = x + y
    sub[i] = x - y
    mul[i] = x * y
    neg[i] = -x
    ab[i] = abs(x)
    fdiv[i] = x // y
    mod[i] = x % y
    shl[i] = x << y
    shr[i] = x >> y
    pw[i] = x ** 3
    grows[i] = x + 1 > x


INT_TYPES = [np.int8, np.uint16, np.int32, np.int64, np.uint32, np.uint64]


def _edge_pairs(dt):
    info = np.iinfo(dt)
    vals = [info.max, info.min, 0, 1, 7, info.max - 1]
    if info.min < 0:
        vals += [-1, -7, info.min + 1]
    bits = 8 * np.dtype(dt).itemsize
    shifts = [bits - 1, bits, bits + 1, min(info.max, 64)]
    a = [x for x in vals for _ in vals + shifts]
    b = [y for _ in vals for y in vals + shifts]
    return np.array(a, dt), np.array(b, dt)


def _numpy_int_ops(a, b):
    with np.errstate(all="ignore"):
        return [a + b, a - b, a * b, -a, np.abs(a), a // b, a % b, a << b, a >> b, a ** a.dtype.type(3),
                a + a.dtype.type(1) > a]


@pytest.mark.parametrize("dt", INT_TYPES, ids=lambda d: np.dtype(d).name)
def test_integer_edges_match_numpy_and_reference(dt):
    a, b = _edge_pairs(dt)
    outs = [np.zeros_like(a) for _ in range(10)] + [np.zeros(a.size, np.bool_)]
    compiled = _run(int_ops, [a, b] + outs, interpret=False)[2:]
    reference = _run(int_ops, [a, b] + outs, interpret=True)[2:]
    expected = _numpy_int_ops(a, b)
    names = ["add", "sub", "mul", "neg", "abs", "floordiv", "mod", "shl", "shr", "pow", "x + 1 > x"]
    for name, c, r, e in zip(names, compiled, reference, expected):
        np.testing.assert_array_equal(r, e, err_msg=f"reference {name} ({np.dtype(dt)}): a={a} b={b}")
        np.testing.assert_array_equal(c, e, err_msg=f"compiled {name} ({np.dtype(dt)}): a={a} b={b}")


def test_int32_max_plus_one_is_not_greater():
    v = np.array([2 ** 31 - 1, -2 ** 31, -1, 0], np.int32)
    res = _run(int_ops, [v, v] + [np.zeros_like(v) for _ in range(10)] + [np.zeros(4, np.bool_)], False)
    np.testing.assert_array_equal(res[-1], [False, True, True, True])
    np.testing.assert_array_equal(res[2], [-2, 0, -2, 0])  # add wraps


def test_generated_code_spells_out_wrapping():
    d32 = runtime.to_device(np.zeros(4, np.int32))
    b = runtime.to_device(np.zeros(4, np.bool_))
    src = int_ops.source(d32, d32, *([d32] * 10), b)
    assert "((int32_t)((uint32_t)(x) + (uint32_t)(y)))" in src
    assert "rtpy_floordiv_i<int32_t, uint32_t>" in src and "rtpy_shl_i<int32_t, uint32_t>" in src
    assert "rtpy_abs_i<int32_t, uint32_t>" in src


@runtime.jit
def float_scale(x, out):
    i = runtime.get_global_id(0)
    out[i] = x[i] * 2.0 + 1.0


def test_float_code_is_unchanged():
    """Floating-point arithmetic is not routed through the integer helpers (it stays vectorisable)."""
    d = runtime.to_device(np.zeros(4, np.float32))
    src = float_scale.source(d, d)
    assert "uint" not in src.split("RT_KERNEL", 1)[1].replace("uint64_t rt_gsize0", "")


WRAP_SRC = """
RT_KERNEL void grows(const int* x, int* out) { out[0] = x[0] + 1 > x[0]; }
"""


def test_cpu_compiler_accepts_fwrapv():
    """-fwrapv is a module option (the JIT passes it on cpu): x + 1 > x is false for INT_MAX."""
    if runtime.current_device().properties.backend != "cpu":
        pytest.skip("g++ option")
    f = runtime.Module(WRAP_SRC, options="-fwrapv").get_function("grows")
    x, out = runtime.to_device(np.array([2 ** 31 - 1], np.int32)), runtime.to_device(np.ones(1, np.int32))
    s = runtime.Stream()
    s.launch_kernel(f, x, out, global_size=1)
    s.synchronize()
    assert out.numpy()[0] == 0
    with pytest.raises(runtime.InvalidValueError, match="-fwrapv"):  # the list of accepted options names it
        runtime.Module(WRAP_SRC, options="-fno-wrapv")


NVRTC_CHECK = """
import numpy as np
import runtime
import test_jit_semantics as T
dev = runtime.device("cuda:0")
assert dev.backend == "cuda", dev.backend
with dev:
    a = runtime.to_device(np.zeros(4, np.{dt}))
    b = runtime.to_device(np.zeros(4, np.bool_))
    T.int_ops.compiled(a, a, *([a] * 10), b)  # NVRTC compiles the generated source (the fake driver loads it)
print("ok")
"""


@pytest.mark.parametrize("dt", ["int32", "int64", "int8"])
def test_generated_integer_code_compiles_with_nvrtc(dt, tmp_path):
    lib = os.environ.get("RUNTIME_FAKE_CUDA_LIB") or str(REPO / "build" / "tests" / "fake_cuda" / "libfake_cuda.so")
    if not os.path.isfile(lib):
        pytest.skip("the fake CUDA driver is not built (build/tests/fake_cuda/libfake_cuda.so; set RUNTIME_FAKE_CUDA_LIB)")
    env = dict(os.environ, RUNTIME_CUDA_DRIVER_LIB=lib, RUNTIME_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(pathlib.Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    env.pop("RUNTIME_CUDA", None)
    r = subprocess.run([sys.executable, "-c", NVRTC_CHECK.format(dt=dt)], env=env, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0 and "cannot compile for cuda" in r.stderr:
        pytest.skip(f"NVRTC is not available: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0 and "ok" in r.stdout, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


# ------------------------------------------------------------------------------------- definite assignment


@runtime.jit
def one_branch(a, out):
    i = runtime.get_global_id(0)
    if a[i] > 0:
        t = 5
    out[i] = t  # read: not assigned when a[i] <= 0


@runtime.jit
def only_in_loop(a, out):
    i = runtime.get_global_id(0)
    for k in range(a[i]):
        last = k
    out[i] = last  # read: the loop may not run


@runtime.jit
def loop_var_after_loop(a, out):
    i = runtime.get_global_id(0)
    for k in range(a[i]):
        pass
    out[i] = k  # read: the loop may not run


@runtime.jit
def carried_before_assigned(a, out):
    i = runtime.get_global_id(0)
    n = 0
    while n < 3:
        out[i] = acc  # read: not assigned on the first iteration
        acc = n
        n += 1


@runtime.jit
def augassign_unassigned(a, out):
    i = runtime.get_global_id(0)
    if a[i] > 0:
        s = 1
    else:
        pass
    s += 1  # read
    out[i] = s


@pytest.mark.parametrize("kernel, var", [(one_branch, "t"), (only_in_loop, "last"), (loop_var_after_loop, "k"),
                                         (carried_before_assigned, "acc"), (augassign_unassigned, "s")],
                         ids=lambda v: getattr(v, "name", v))
def test_local_not_assigned_on_every_path_is_refused(kernel, var):
    a, out = runtime.to_device(np.arange(-2, 2, dtype=np.int32)), runtime.to_device(np.zeros(4, np.int32))
    with pytest.raises(runtime.CompileError) as e:
        runtime.Stream().launch_kernel(kernel, a, out)
    msg = str(e.value)
    assert f"local variable '{var}'" in msg and "UnboundLocalError" in msg, msg
    assert f"{__file__}:{_line_of(kernel.fn, '# read')}:" in msg, msg


@runtime.jit
def assigned_everywhere(a, out):
    i = runtime.get_global_id(0)
    if a[i] > 0:
        t = 5
    elif a[i] < -1:
        t = 7
    else:
        t = 1
    acc = 0
    for k in range(3):
        step = k * 2  # assigned before use in the body
        acc += step
    if a[i] == 0:
        return
    else:
        u = 2  # the other branch returns: u is assigned wherever the read is reached
    n = 0
    while True:
        n += 1
        if n > 2:
            break
    out[i] = t + acc + u + n


def test_locals_assigned_on_every_path_compile_and_match_reference():
    a, out = np.arange(-3, 3, dtype=np.int32), np.full(6, -100, np.int32)
    c = _run(assigned_everywhere, [a, out], interpret=False)
    r = _run(assigned_everywhere, [a, out], interpret=True)
    np.testing.assert_array_equal(c[1], r[1])
    np.testing.assert_array_equal(c[1], [7 + 6 + 2 + 3, 7 + 6 + 2 + 3, 1 + 6 + 2 + 3, -100, 5 + 11, 5 + 11])


# ------------------------------------------------------------------------------------------------ dtypes


@runtime.jit
def doubled(x):
    i = runtime.get_global_id(0)
    x[i] = x[i] * 2


@runtime.jit
def scaled(x, f):
    i = runtime.get_global_id(0)
    x[i] = x[i] * f


@pytest.mark.parametrize("interpret", [False, True], ids=["compiled", "reference"])
@pytest.mark.parametrize("how", ["empty", "view"])
def test_float16_buffer_works(how, interpret, monkeypatch):
    """float16 memory (and views reinterpreting memory as it) is stored as rt_half and computed in float32."""
    monkeypatch.setenv("RUNTIME_JIT_INTERPRET", "1" if interpret else "0")
    h = np.arange(8).astype(np.float16)
    mem = runtime.to_device(h) if how == "empty" else runtime.to_device(h.view(np.uint16)).view(np.float16)
    s = runtime.Stream()
    s.launch_kernel(doubled, mem)
    s.synchronize()
    np.testing.assert_array_equal(mem.numpy(), h * 2)


def test_complex_buffer_is_refused():
    with pytest.raises(runtime.NotSupportedError, match=r"'x'.*complex64.*supported: .*float16"):
        runtime.Stream().launch_kernel(doubled, runtime.empty(8, np.complex64))


def test_supported_dtypes_still_work():
    for dt in (np.int8, np.uint16, np.float32, np.float64):
        h = np.arange(8).astype(dt)
        np.testing.assert_array_equal(_run(doubled, [h], False)[0], h * 2)


# ------------------------------------------------------------------------------------------------ asserts


@runtime.jit
def checks_positive(a):
    i = runtime.get_global_id(0)
    assert a[i] > 0


def test_assert_failure_names_python_file_and_line():
    a = runtime.to_device(np.array([1, 2, -3, 4], np.int32))
    s = runtime.Stream()
    s.launch_kernel(checks_positive, a)
    with pytest.raises(runtime.LaunchError) as e:
        s.synchronize()
    line = _line_of(checks_positive.fn, "assert a[i] > 0")
    assert f"{__file__}:{line}" in str(e.value), str(e.value)
    s.close()


def test_generated_source_maps_lines_to_python():
    src = checks_positive.source(runtime.to_device(np.ones(4, np.int32)))
    assert f'#line {_line_of(checks_positive.fn, "assert a[i] > 0")} "{__file__}"' in src
    assert f'#line {_line_of(checks_positive.fn, "def checks_positive")} "{__file__}"' in src


# ------------------------------------------------------------------------------------------------ globals

SCALE = 2
CFG = types.SimpleNamespace(offset=1.5)


@runtime.jit
def uses_globals(x, out):
    i = runtime.get_global_id(0)
    out[i] = x[i] * SCALE + CFG.offset


def test_changed_global_recompiles_with_new_value():
    global SCALE
    x = np.arange(4, dtype=np.float32)
    saved = SCALE, CFG.offset
    try:
        first = _run(uses_globals, [x, np.zeros(4, np.float32)], False)[1]
        again = _run(uses_globals, [x, np.zeros(4, np.float32)], False)[1]
        SCALE = 3
        changed = _run(uses_globals, [x, np.zeros(4, np.float32)], False)[1]
        reference = _run(uses_globals, [x, np.zeros(4, np.float32)], True)[1]
        CFG.offset = -1.0
        attr = _run(uses_globals, [x, np.zeros(4, np.float32)], False)[1]
        SCALE, CFG.offset = saved
        back = _run(uses_globals, [x, np.zeros(4, np.float32)], False)[1]
    finally:
        SCALE, CFG.offset = saved
    np.testing.assert_array_equal(first, x * 2 + 1.5)
    np.testing.assert_array_equal(again, first)
    np.testing.assert_array_equal(changed, x * 3 + 1.5)
    np.testing.assert_array_equal(reference, changed)
    np.testing.assert_array_equal(attr, x * 3 - 1.0)
    np.testing.assert_array_equal(back, first)
    assert len(uses_globals.signatures) == 3  # a value seen before is served from the in-memory cache


def test_changed_closure_variable_recompiles():
    factor = 2

    @runtime.jit
    def uses_closure(x):
        i = runtime.get_global_id(0)
        x[i] = x[i] * factor

    x = np.arange(4, dtype=np.int32)
    first = _run(uses_closure, [x], False)[0]
    factor = 5
    second = _run(uses_closure, [x], False)[0]
    np.testing.assert_array_equal(first, x * 2)
    np.testing.assert_array_equal(second, x * 5)


FACTOR = 2


@runtime.jit
def times_factor(x, out):
    i = runtime.get_global_id(0)
    out[i] = x[i] * FACTOR


def test_type_of_a_global_is_part_of_the_key():
    global FACTOR
    x = np.arange(4, dtype=np.int32)
    try:
        ints = _run(times_factor, [x, np.zeros(4, np.float64)], False)[1]
        FACTOR = 2.0  # equal to 2, but int32 * float promotes to float64: other code
        floats = _run(times_factor, [x, np.zeros(4, np.float64)], False)[1]
        FACTOR = True
        bools = _run(times_factor, [x, np.zeros(4, np.float64)], False)[1]
    finally:
        FACTOR = 2
    np.testing.assert_array_equal(ints, x * 2)
    np.testing.assert_array_equal(floats, x * 2.0)
    np.testing.assert_array_equal(bools, x * True)
    assert len(times_factor.signatures) == 3


DISK_SCRIPT = """
import os
import numpy as np
import runtime

LIMIT = int(os.environ["LIMIT"])

@runtime.jit
def clip(x):
    i = runtime.get_global_id(0)
    x[i] = min(x[i], LIMIT)

x = runtime.to_device(np.arange(10, dtype=np.int64))
s = runtime.Stream()
s.launch_kernel(clip, x)
s.synchronize()
print(x.numpy().tolist())
"""


def test_disk_cache_does_not_serve_a_module_compiled_for_another_value(tmp_path):
    script = tmp_path / "clip_kernel.py"
    script.write_text(textwrap.dedent(DISK_SCRIPT))
    cache = tmp_path / "cache"
    outs = []
    for limit in (3, 6, 3):
        env = dict(os.environ, RUNTIME_CACHE_DIR=str(cache), LIMIT=str(limit))
        r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout.strip())
    assert outs[0] == str([min(v, 3) for v in range(10)])
    assert outs[1] == str([min(v, 6) for v in range(10)])
    assert outs[2] == outs[0]


# ------------------------------------------------------------------------------------- operands evaluated once


@runtime.jit
def chain_with_an_atomic(out, counter):
    i = runtime.get_global_id(0)
    # Python evaluates the middle operand of a chain once; the atomic's result is 0..n-1, so the chain holds.
    if -1 < runtime.atomic_add(counter, 0, 1) < 1000:
        out[i] = 1


@runtime.jit
def chain_that_stops_early(out, counter):
    i = runtime.get_global_id(0)
    # The first comparison fails: Python evaluates no further operand, so the atomic never runs.
    if i < 0 < runtime.atomic_add(counter, 0, 1):
        out[i] = 1


@runtime.jit
def augmented_store_through_an_atomic_index(out, counter):
    i = runtime.get_global_id(0)
    out[runtime.atomic_add(counter, 0, 1)] += i + 1  # each item takes a slot of its own, once


# (out first: a launch's default size is its first buffer's element count)
@pytest.mark.parametrize("interpret", [False, True], ids=["compiled", "reference"])
def test_operands_with_calls_are_evaluated_once(interpret):
    n = 64
    out, counter = _run(chain_with_an_atomic, [np.zeros(n, np.int32), np.zeros(1, np.int32)], interpret)
    assert counter[0] == n and (out == 1).all()
    out, counter = _run(chain_that_stops_early, [np.zeros(n, np.int32), np.zeros(1, np.int32)], interpret)
    assert counter[0] == 0 and (out == 0).all()
    out, counter = _run(augmented_store_through_an_atomic_index,
                        [np.zeros(n, np.int32), np.zeros(1, np.int32)], interpret)
    assert counter[0] == n  # the index was evaluated once per item (twice would have counted 2n)
    assert sorted(out.tolist()) == list(range(1, n + 1))  # every item's value landed in a slot of its own


@runtime.jit
def float_floordiv(a, b, out):
    i = runtime.get_global_id(0)
    out[i] = a[i] // b[i]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_floordiv_is_numpys(dtype):
    # 1.0 // 0.1: the exact quotient is just below 10 (floor(1.0 / 0.1) would give 10); signs, zeros, infinities.
    a = np.array([1.0, -1.0, 1.0, -1.0, 7.5, -7.5, 0.0, -0.0, 0.0, 1e30, 3.0, 5.0, 0.0, np.inf, 2.0], dtype)
    b = np.array([0.1, 0.1, -0.1, -0.1, 2.0, 2.0, 3.0, 3.0, -3.0, 7.0, np.inf, 0.0, 0.0, 2.0, -np.inf], dtype)
    with np.errstate(all="ignore"):
        expected = np.floor_divide(a, b)
    for interpret in (False, True):
        with np.errstate(all="ignore"):
            _, _, out = _run(float_floordiv, [a, b, np.zeros_like(a)], interpret)
        np.testing.assert_array_equal(out, expected)  # nan where NumPy gives nan
        assert (np.signbit(out) == np.signbit(expected)).all(), (interpret, out, expected)
