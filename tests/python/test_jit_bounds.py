"""@runtime.jit kernels cannot index past their buffers unnoticed: the launch-size check (buffers indexed by the bare
global id), negative indices refused in every mode, and checked mode (boundscheck=True / RUNTIME_CHECK_BOUNDS=1)."""

import inspect

import numpy as np
import pytest

import runtime
from conftest import MODES, skip_unless_kernels_run


@runtime.jit
def add(a, b, c):
    i = runtime.get_global_id()
    c[i] = a[i] + b[i]


@runtime.jit
def guarded_add(a, b, c, n):
    i = runtime.get_global_id()
    if i < n:
        c[i] = a[i] + b[i]


@runtime.jit
def early_return(a, n):
    i = runtime.get_global_id()
    if i >= n:
        return
    a[i] = 1.0


@runtime.jit
def shift_left(a, out):
    i = runtime.get_global_id()
    out[i] = a[i - 1]


@runtime.jit
def read_ahead(a, out, n):
    i = runtime.get_global_id()
    if i < n:
        out[i] = a[i + 1]


@runtime.jit
def read_2d(a, out, y, x):
    out[0] = a[y, x]


def _kernel(k, mode, **options):
    """k's function as a fresh kernel in `mode` (its own caches)."""
    return runtime.jit(k.fn, interpret=(mode == "reference"), **options)


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(n for n, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("mode", MODES)
def test_a_launch_over_more_items_than_a_buffer_indexed_by_the_global_id_is_refused(mode):
    # The reproduction: a 1000-element first buffer (the default global size) and 10-element others.
    k = _kernel(add, mode)
    a = runtime.to_device(np.ones(1000, np.float32))
    b, c = runtime.to_device(np.ones(10, np.float32)), runtime.to_device(np.zeros(10, np.float32))
    s = runtime.Stream()
    with pytest.raises(ValueError, match=r"kernel 'add': global size 1000 is larger than buffer '[bc]' \(argument "
                                         r"[12]\), which has 10 element\(s\).*at most 10") as e:
        s.launch_kernel(k, a, b, c)
    assert isinstance(e.value, runtime.InvalidValueError)
    s.synchronize()
    assert (c.numpy() == 0).all(), "nothing ran"
    # global_size=1001 over 1000-element buffers
    a2, c2 = runtime.to_device(np.ones(1000, np.float32)), runtime.empty(1000, np.float32)
    with pytest.raises(runtime.InvalidValueError, match=r"global size 1001 is larger than buffer '.' .*1000 element"):
        s.launch_kernel(k, a2, a2, c2, global_size=1001)
    # the sizes that fit run
    if mode == "compiled":
        skip_unless_kernels_run()
    s.launch_kernel(k, a2, a2, c2, global_size=1000)
    s.synchronize()
    assert (c2.numpy() == 2).all()


@pytest.mark.parametrize("mode", MODES)
def test_guarded_accesses_are_not_refused(mode):
    """A guard (if i < n, an early return) makes a larger launch legitimate: those kernels are launched as asked."""
    if mode == "compiled":
        skip_unless_kernels_run()
    a = runtime.to_device(np.ones(10, np.float32))
    c = runtime.empty(10, np.float32)
    s = runtime.Stream()
    s.launch_kernel(_kernel(guarded_add, mode), a, a, c, 10, global_size=256)
    out = runtime.to_device(np.zeros(10, np.float32))
    s.launch_kernel(_kernel(early_return, mode), out, 10, global_size=256)
    s.synchronize()
    assert (c.numpy() == 2).all() and (out.numpy() == 1).all()


def test_the_launch_plan_checks_every_later_launch_too():
    """The fast path (the previous launch's plan) refuses as the first launch does."""
    skip_unless_kernels_run()
    k = _kernel(add, "compiled")
    a = runtime.to_device(np.ones(100, np.float32))
    s = runtime.Stream()
    for _ in range(2):
        s.launch_kernel(k, a, a, a)
    short = runtime.empty(99, np.float32)
    with pytest.raises(runtime.InvalidValueError, match=r"global size 100 is larger than buffer 'c'.*99 element"):
        s.launch_kernel(k, a, a, short)
    s.synchronize()


@pytest.mark.parametrize("mode", MODES)
def test_a_negative_index_is_an_error(mode):
    """a[i - 1] at i = 0: an error in every mode (NumPy, and the reference mode before, would wrap to the end)."""
    if mode == "compiled":
        skip_unless_kernels_run()
    a = runtime.to_device(np.arange(1000, dtype=np.float32))
    out = runtime.to_device(np.zeros(1000, np.float32))
    s = runtime.Stream()
    with pytest.raises(runtime.LaunchError) as e:
        s.launch_kernel(_kernel(shift_left, mode), a, out)
        s.synchronize()
    msg = str(e.value)
    assert "shift_left" in msg
    if mode == "compiled":
        line = _line_of(shift_left.fn, "out[i] = a[i - 1]")
        assert "a[i - 1] in bounds (index -1: indices start at 0)" in msg, msg
        assert f"{__file__}:{line}" in msg, msg
    else:
        assert "index -1 is negative" in msg, msg
    # the stream stays usable
    s.launch_kernel(_kernel(add, mode), a, a, out)
    s.synchronize()
    assert out.numpy()[999] == 1998


def test_indices_that_are_never_negative_are_not_checked():
    """Ids, range variables and the like need no check: the default mode's common kernel costs nothing."""
    a = runtime.empty(16, np.float32)
    assert "rt_index_" not in add.source(a, a, a)
    assert "rt_index_" in shift_left.source(a, a)


@pytest.mark.parametrize("how", ["decorator", "environment"])
def test_checked_mode_reports_kernel_access_index_bound_and_line(how, monkeypatch):
    skip_unless_kernels_run()
    if how == "decorator":
        k = runtime.jit(read_ahead.fn, boundscheck=True)
    else:
        monkeypatch.setenv("RUNTIME_CHECK_BOUNDS", "1")
        k = runtime.jit(read_ahead.fn)
    a = runtime.to_device(np.arange(1000, dtype=np.float32))
    out = runtime.to_device(np.zeros(1000, np.float32))
    s = runtime.Stream()
    with pytest.raises(runtime.LaunchError) as e:
        s.launch_kernel(k, a, out, 1000)
        s.synchronize()
    msg = str(e.value)
    line = _line_of(read_ahead.fn, "out[i] = a[i + 1]")
    assert "kernel 'read_ahead'" in msg and "a[i + 1] in bounds (index 1000, 1000 elements)" in msg, msg
    assert f"{__file__}:{line}" in msg, msg
    # in bounds it computes what the unchecked kernel does
    s.launch_kernel(k, a, out, 999)
    s.synchronize()
    np.testing.assert_array_equal(out.numpy()[:999], np.arange(1, 1000, dtype=np.float32))


def test_checked_mode_checks_each_dimension_of_a_shaped_array():
    skip_unless_kernels_run()
    k = runtime.jit(read_2d.fn, boundscheck=True)
    a = runtime.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    out = runtime.empty(1, np.float32)
    s = runtime.Stream()
    with pytest.raises(runtime.LaunchError, match=r"a\[y, x\] in bounds \(index 4, 4 elements\)"):
        s.launch_kernel(k, a, out, 0, 4, global_size=1)  # the flat offset 4 is inside the memory
        s.synchronize()
    s.launch_kernel(k, a, out, 2, 3, global_size=1)
    s.synchronize()
    assert out.numpy()[0] == 11


def test_boundscheck_false_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("RUNTIME_CHECK_BOUNDS", "1")
    a = runtime.empty(16, np.float32)
    src = runtime.jit(read_ahead.fn, boundscheck=False).source(a, a, 4)
    assert "rt_a_n" not in src and "0x7fffffffffffffffLL" in src  # no bounds, only the negative check of i + 1
    assert "rt_index_((long long)(i), (long long)(rt_out_n)" in runtime.jit(read_ahead.fn).source(a, a, 4)
