"""Issue 20's Python findings 3-6: synchronous copies ordered after other streams, frees deferred while DLPack
consumers hold the memory, no silent reinterpretation, and arrays and streams as CuPy users expect them."""
import subprocess
import sys
import time

import numpy as np
import pytest

import runtime

from conftest import host_addressable, launches_execute


@runtime.jit
def fill(d, v: float):
    i = runtime.get_global_id()
    d[i] = v


@runtime.jit
def add(a, b, c):
    i = runtime.get_global_id()
    c[i] = a[i] + b[i]


needs_launches = pytest.mark.skipif(not launches_execute(), reason="the fake CUDA driver runs no kernels")


def late(stream, seconds=0.2):
    """Holds `stream` up, so that a copy which does not wait for it sees the old data."""
    stream.launch_host_func(lambda: time.sleep(seconds))


# ---- finding 3: synchronous copies are ordered after the blocking streams' work (the legacy default stream)


@needs_launches
def test_numpy_waits_for_a_kernel_queued_on_another_stream():
    s = runtime.Stream()
    d = runtime.zeros(1000, np.float32)
    late(s)
    s.launch_kernel(fill, d, 7.0)
    assert (d.numpy() == 7.0).all()


@needs_launches
def test_copy_and_asarray_wait_for_another_stream():
    s = runtime.Stream()
    d = runtime.zeros(256, np.float32)
    late(s)
    s.launch_kernel(fill, d, 3.0)
    h = np.empty(256, np.float32)
    runtime.copy(h, d)
    assert (h == 3.0).all()
    late(s)
    s.launch_kernel(fill, d, 4.0)
    assert (np.asarray(d) == 4.0).all()


def test_synchronous_fill_lands_after_another_streams_copy():
    s = runtime.Stream()
    d = runtime.zeros(64, np.int32)
    late(s)
    s.launch_copy(d, np.full(64, 5, np.int32))
    runtime.memset(d, 0)  # must run after the stream's copy, not before it
    assert (d.numpy() == 0).all()


def test_a_blocking_stream_waits_for_the_default_stream():
    s = runtime.Stream()
    d = runtime.zeros(64, np.int32)
    default = runtime.default_stream()
    late(default)
    default.launch_copy(d, np.full(64, 9, np.int32))
    h = np.zeros(64, np.int32)
    s.launch_copy(h, d)
    s.synchronize()
    assert (h == 9).all()


def test_per_thread_default_stream_is_selected_by_the_environment():
    code = ("import runtime, numpy as np, time\n"
            "s = runtime.Stream()\n"
            "d = runtime.zeros(16, np.int32)\n"
            "gate = []\n"
            "s.launch_host_func(lambda: [time.sleep(0.01) for _ in range(2000) if not gate])\n"
            "d.fill(3)\n"  # the legacy default stream would wait for the held stream: a hang until the gate
            "print(d.numpy().tolist())\n"
            "gate.append(1)\n"
            "s.synchronize()\n")
    env = dict(__import__("os").environ, RUNTIME_DEFAULT_STREAM="per-thread")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([3] * 16)
    env["RUNTIME_DEFAULT_STREAM"] = "sometimes"
    bad = subprocess.run([sys.executable, "-c", "import runtime; runtime.alloc(4)"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0 and "RUNTIME_DEFAULT_STREAM" in bad.stderr and "per-thread" in bad.stderr


# ---- finding 4: a free while DLPack consumers view the memory is deferred until the last lets go


@pytest.mark.skipif(not host_addressable(), reason="numpy views host-addressable (cpu) memory only")
def test_free_with_a_live_dlpack_consumer_is_deferred_and_counted():
    before = runtime.memory_stats()
    d = runtime.to_device(np.arange(1024, dtype=np.float32))
    v = np.from_dlpack(d)
    runtime.free(d)
    st = runtime.memory_stats()
    assert st["num_deferred_frees"] == before["num_deferred_frees"] + 1
    assert st["deferred_free_bytes"] == before["deferred_free_bytes"] + 4096
    assert st["allocated_bytes"] >= before["allocated_bytes"] + 4096  # still allocated
    assert v[3] == 3.0 and v[1023] == 1023.0
    with pytest.raises(runtime.InvalidValueError, match="freed"):
        d.numpy()
    del v
    after = runtime.memory_stats()
    assert after["num_deferred_frees"] == before["num_deferred_frees"]
    assert after["deferred_free_bytes"] == before["deferred_free_bytes"]
    assert after["allocated_bytes"] == before["allocated_bytes"]


# ---- finding 5: no silent reinterpretation


def test_copy_between_dtypes_raises():
    f = runtime.empty(10, np.float32)
    with pytest.raises(runtime.InvalidValueError, match="dtype mismatch.*float32.*int32"):
        runtime.copy(f, np.arange(10, dtype=np.int32))
    i = runtime.to_device(np.arange(10, dtype=np.int32))
    with pytest.raises(runtime.InvalidValueError, match="dtype mismatch"):
        runtime.copy(f, i)
    with pytest.raises(runtime.InvalidValueError, match="dtype mismatch"):
        runtime.copy(np.empty(10, np.float32), i)


def test_view_returns_a_new_object_and_keeps_the_original_type():
    f = runtime.to_device(np.ones(4, np.float32))
    v = f.view(np.int32)
    assert v is not f and v.dtype == np.int32 and f.dtype == np.float32
    assert (v.numpy() == np.ones(4, np.float32).view(np.int32)).all()


def test_asarray_copies_to_the_host():
    d = runtime.to_device(np.arange(6, dtype=np.int16).reshape(2, 3))
    a = np.asarray(d)
    assert a.dtype == np.int16 and a.shape == (2, 3) and (a == np.arange(6).reshape(2, 3)).all()
    assert np.asarray(d, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="without a copy"):
        d.__array__(copy=False)


def test_partial_copies_need_a_size_in_both_directions():
    d = runtime.to_device(np.arange(10, dtype=np.float32))
    with pytest.raises(runtime.InvalidValueError, match="shape mismatch"):
        runtime.copy(np.zeros(20, np.float32), d)  # D2H into a larger array
    with pytest.raises(runtime.InvalidValueError, match="shape mismatch"):
        runtime.copy(d, np.zeros(5, np.float32))  # H2D from a smaller one
    big = np.zeros(20, np.float32)
    runtime.copy(big, d, nbytes=40)
    assert (big[:10] == np.arange(10)).all() and (big[10:] == 0).all()


# ---- finding 6: `with stream:`, callable kernels, slices, array helpers


def test_with_stream_orders_synchronous_operations_on_it():
    s = runtime.Stream(non_blocking=True)  # the legacy default stream would not wait for it: only `with` orders
    d = runtime.zeros(64, np.int32)
    with s:
        late(s)
        s.launch_copy(d, np.full(64, 6, np.int32))
        assert (d.numpy() == 6).all()
        late(s)
        d.fill(2)
        e = runtime.zeros_like(d)  # queued on s
        h = np.empty(64, np.int32)
        runtime.copy(h, d)
        assert (h == 2).all() and (e.numpy() == 0).all()
        t = runtime.to_device([1, 2, 3])
        assert t.numpy().tolist() == [1, 2, 3]


def test_with_stream_raises_the_streams_failure_at_the_synchronous_call():
    s = runtime.Stream(non_blocking=True)
    d = runtime.zeros(4, np.int32)

    def boom():
        raise RuntimeError("on purpose")
    with s:
        s.launch_host_func(boom)
        with pytest.raises(runtime.LaunchError, match="on purpose"):
            d.numpy()
        assert d.numpy().tolist() == [0, 0, 0, 0]  # reported once


@needs_launches
def test_kernels_are_callable_on_the_current_stream():
    a = runtime.to_device(np.arange(100, dtype=np.float32))
    b = runtime.to_device(np.ones(100, np.float32))
    c = runtime.zeros(100, np.float32)
    add(a, b, c)  # the default stream; global size from the first array
    assert (c.numpy() == np.arange(100) + 1).all()
    s = runtime.Stream(non_blocking=True)
    with s:
        late(s)
        fill(c, 5.0)
        assert (c.numpy() == 5.0).all()
    fill(c, 8.0, global_size=10, stream=s)
    s.synchronize()
    assert (c.numpy()[:10] == 8.0).all() and (c.numpy()[10:] == 5.0).all()


def test_kernel_call_refuses_bad_keywords_and_streams():
    c = runtime.zeros(4, np.float32)
    with pytest.raises(runtime.InvalidValueError, match="unexpected keyword.*grid.*global_size, local_size, stream"):
        fill(c, 1.0, grid=4)
    with pytest.raises(runtime.InvalidValueError, match="stream must be a runtime.Stream"):
        fill(c, 1.0, stream=3)


def test_slices_are_views():
    x = runtime.to_device(np.arange(100, dtype=np.int32))
    v = x[10:20]
    assert v.is_view and v.shape == (10,) and v.ptr == x.ptr + 40 and v.is_contiguous
    assert v.numpy().tolist() == list(range(10, 20))
    v.fill(-1)
    assert (x.numpy()[10:20] == -1).all() and x.numpy()[9] == 9 and x.numpy()[20] == 20
    x[0:3] = np.array([7, 8, 9], np.int32)
    assert x.numpy()[:4].tolist() == [7, 8, 9, 3]
    assert x[-1].shape == () and x[-1].numpy() == 99
    stepped = x[1::3]
    assert not stepped.is_contiguous and stepped.shape == (33,)
    assert stepped.numpy().tolist() == x.numpy()[1::3].tolist()
    assert stepped.copy().is_contiguous and stepped.copy().numpy().tolist() == stepped.numpy().tolist()


def test_nd_slices_follow_numpys_basic_indexing():
    h = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = runtime.to_device(h)
    for key in [(1,), (slice(1, 3),), (slice(None), slice(2, 4)), (Ellipsis, 0), (slice(1, None), slice(None, 6, 2)),
                (None, 2), (2, slice(None))]:
        got = x[key]
        assert got.shape == h[key].shape, key
        assert (got.numpy() == h[key]).all(), key
    rows = x[1:3]
    assert rows.is_contiguous and rows.ptr == x.ptr + 24
    with pytest.raises(runtime.InvalidValueError, match="index.*out of bounds"):
        x[4]


def test_indexing_that_needs_a_copy_or_negative_strides_is_refused():
    x = runtime.to_device(np.arange(10, dtype=np.int32))
    with pytest.raises(runtime.InvalidValueError, match="step -1 is not supported"):
        x[::-1]
    with pytest.raises(runtime.InvalidValueError, match="list indices are not supported"):
        x[[1, 2]]
    with pytest.raises(runtime.InvalidValueError, match="ndarray indices are not supported"):
        x[np.array([True] * 10)]
    with pytest.raises(runtime.InvalidValueError, match="strided view"):
        x[::2].fill(3)
    runtime.free(x)
    with pytest.raises(runtime.InvalidValueError, match="freed"):
        x[1:2]


def test_array_helpers():
    z = runtime.zeros((2, 3), np.int16)
    assert z.shape == (2, 3) and (z.numpy() == 0).all()
    e = runtime.empty_like(z)
    assert e.shape == (2, 3) and e.dtype == np.int16 and e.ptr != z.ptr
    zl = runtime.zeros_like(np.ones((4,), np.float64))
    assert zl.dtype == np.float64 and (zl.numpy() == 0).all()
    assert runtime.zeros_like(z, dtype=np.uint8, shape=5).shape == (5,)
    f = runtime.empty(5, np.float32)
    f.fill(1.5)
    assert (f.numpy() == 1.5).all()
    i = runtime.empty(5, np.uint8)
    i.fill(255)
    assert (i.numpy() == 255).all()
    with pytest.raises(runtime.InvalidValueError, match="300 does not fit uint8"):
        i.fill(300)
    with pytest.raises(runtime.InvalidValueError, match="expected a number"):
        i.fill("a")
    c = f.copy()
    assert c.ptr != f.ptr and (c.numpy() == 1.5).all()
    as_int = f.astype(np.int32)
    assert as_int.dtype == np.int32 and (as_int.numpy() == 1).all() and f.dtype == np.float32
    assert f.astype(np.float32, copy=False) is f
    t = runtime.to_device([1, 2, 3])
    assert t.dtype == np.int64 and t.numpy().tolist() == [1, 2, 3]
    assert runtime.to_device([[1.0, 2.0]]).shape == (1, 2)
    with pytest.raises(runtime.InvalidValueError, match="cannot convert|object array"):
        runtime.to_device([[1], [2, 3]])
