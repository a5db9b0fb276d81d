"""Typed n-d device memory (issue 13, item 8): shape/strides/dtype fixed at creation, untyped memory typed by its
first typed host copy, copies that never convert or reshape, view(), numpy conversions, freeing through views."""
import gc

import numpy as np
import pytest

import runtime

DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.uint64, np.float16, np.float32, np.float64, np.complex64,
          np.complex128]


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_empty_attributes_are_numpys(dt):
    d = runtime.empty((3, 5, 2), dtype=dt)
    ref = np.empty((3, 5, 2), dtype=dt)
    assert d.shape == ref.shape and d.strides == ref.strides and d.dtype == ref.dtype
    assert d.ndim == 3 and d.size == 30 and d.nbytes == ref.nbytes and d.itemsize == ref.itemsize
    assert d.typed and d.is_contiguous and len(d) == 3


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_to_device_round_trip_keeps_shape_and_dtype(dt, rng):
    h = (rng.random((4, 6)) * 100).astype(dt)
    if np.dtype(dt).kind == "c":
        h = h + 1j * h[::-1]
    d = runtime.to_device(h)
    assert d.shape == (4, 6) and d.dtype == np.dtype(dt)
    back = d.numpy()
    assert back.shape == h.shape and back.dtype == h.dtype and np.array_equal(back, h)


def test_to_device_of_a_strided_array_is_a_contiguous_copy():
    h = np.arange(48, dtype=np.int32).reshape(6, 8)[::2, 1::3]
    d = runtime.to_device(h)
    assert d.shape == h.shape and d.strides == (d.shape[1] * 4, 4) and d.is_contiguous
    assert np.array_equal(d.numpy(), h)


def test_zeros_and_zero_d_memory():
    z = runtime.zeros((2, 3), np.float64)
    assert z.shape == (2, 3) and (z.numpy() == 0).all()
    s = runtime.zeros((), np.int32)
    assert s.shape == () and s.ndim == 0 and s.size == 1 and s.nbytes == 4 and s.numpy().shape == ()
    with pytest.raises(TypeError, match="0-d"):
        len(s)
    e = runtime.empty((0, 4), np.float32)
    assert e.size == 0 and e.shape == (0, 4) and e.numpy().shape == (0, 4)


def test_alloc_with_dtype_is_flat_and_whole():
    d = runtime.alloc(40, dtype=np.int64)
    assert d.shape == (5,) and d.strides == (8,) and d.typed
    with pytest.raises(runtime.InvalidValueError, match="whole number of int64"):
        runtime.alloc(41, dtype=np.int64)


def test_untyped_alloc_takes_dtype_and_shape_from_first_typed_copy():
    h = np.arange(12, dtype=np.float64).reshape(3, 4)
    d = runtime.alloc(h.nbytes)
    assert not d.typed and d.dtype == np.float32 and d.shape == (24,)
    runtime.copy(d, h)
    assert d.typed and d.dtype == np.float64 and d.shape == (3, 4)
    with pytest.raises(runtime.InvalidValueError, match="dtype mismatch"):
        runtime.copy(d, h.astype(np.int64))  # typed now: never retyped by a copy
    assert d.dtype == np.float64


def test_untyped_alloc_typed_by_launch_copy(stream):
    h = np.arange(12, dtype=np.int16).reshape(4, 3)
    d = runtime.alloc(h.nbytes)
    stream.launch_copy(d, h)  # the fast path
    out = np.empty_like(h)
    stream.launch_copy(out, d)
    stream.synchronize()
    assert d.dtype == np.int16 and d.shape == (4, 3) and np.array_equal(out, h)


def test_untyped_alloc_typed_by_d2d_copy():
    src = runtime.to_device(np.arange(6, dtype=np.uint32).reshape(2, 3))
    d = runtime.alloc(src.nbytes)
    runtime.copy(d, src)
    assert d.dtype == np.uint32 and d.shape == (2, 3)


def test_raw_bytes_leave_memory_untyped_and_copy_into_typed_memory():
    d = runtime.alloc(8)
    runtime.copy(d, bytes(range(8)))
    assert not d.typed
    t = runtime.empty(2, np.int32)
    runtime.copy(t, bytes(range(8)))  # a byte image: checked by size only
    assert t.dtype == np.int32 and bytes(t.numpy().tobytes()) == bytes(range(8))
    with pytest.raises(runtime.InvalidValueError, match="the destination has 8"):
        runtime.copy(t, bytes(4))


@pytest.mark.parametrize("copy_fn", ["copy", "launch_copy"])
def test_mismatched_copies_raise_both_ways(copy_fn, stream):
    fn = runtime.copy if copy_fn == "copy" else stream.launch_copy
    d = runtime.empty(8, np.float32)
    cases = [
        (d, np.zeros(8, np.int32), "dtype mismatch"),  # int32 into float32: no silent reinterpretation
        (np.zeros(8, np.int32), d, "dtype mismatch"),
        (d, np.zeros((2, 4), np.float32), "shape mismatch"),
        (np.zeros((2, 4), np.float32), d, "shape mismatch"),
        (d, np.zeros(9, np.float32), "shape mismatch"),
        (np.zeros(16, np.float32), d, "shape mismatch"),  # D2H into a larger host array
    ]
    for dst, src, what in cases:
        with pytest.raises(runtime.InvalidValueError, match=what) as e:
            fn(dst, src)
        msg = str(e.value)
        assert "destination" in msg and "source" in msg, msg
    u = runtime.alloc(32)
    with pytest.raises(runtime.InvalidValueError, match="the destination has 64"):
        fn(np.zeros(16, np.float32), u)  # untyped memory: the byte counts must agree
    with pytest.raises(runtime.InvalidValueError, match="the destination has 32"):
        fn(u, np.zeros(4, np.float32))
    stream.synchronize()


def test_mismatch_messages_name_both_sides():
    d = runtime.empty((2, 3), np.float32)
    with pytest.raises(runtime.InvalidValueError) as e:
        runtime.copy(d, np.zeros((3, 2), np.float32))
    msg = str(e.value)
    assert "(2, 3)" in msg and "(3, 2)" in msg and "view" in msg


def test_partial_copy_needs_matching_dtype():
    d = runtime.empty(8, np.float32)
    runtime.copy(d, np.arange(4, dtype=np.float32), nbytes=16)
    assert list(d.numpy()[:4]) == [0, 1, 2, 3]
    with pytest.raises(runtime.InvalidValueError, match="dtype mismatch"):
        runtime.copy(d, np.arange(4, dtype=np.int32), nbytes=16)


def test_view_reinterprets_without_copy():
    h = np.arange(8, dtype=np.int32)
    d = runtime.to_device(h)
    v = d.view(np.float32)
    assert v.ptr == d.ptr and v.shape == (8,) and v.dtype == np.float32 and v.is_view and v.base is d
    assert d.dtype == np.int32  # the original keeps its type
    assert np.array_equal(v.numpy(), h.view(np.float32))
    b = d.view(np.uint8)
    assert b.shape == (32,)  # the last dimension rescales (numpy's rule)
    q = d.view(np.int64, (2, -1))
    assert q.shape == (2, 2) and np.array_equal(q.numpy(), h.view(np.int64).reshape(2, 2))
    r = d.view(shape=(2, 2, 2))
    assert r.dtype == np.int32 and r.strides == (16, 8, 4)
    runtime.copy(r, np.full((2, 2, 2), 7, np.int32))
    assert (d.numpy() == 7).all()  # the same bytes


def test_view_of_2d_rescales_the_last_dimension():
    d = runtime.empty((3, 4), np.float64)
    assert d.view(np.float32).shape == (3, 8)
    assert d.view(np.complex128).shape == (3, 2)
    with pytest.raises(runtime.InvalidValueError, match="shape="):
        runtime.empty((3, 1), np.int16).view(np.float32)


@pytest.mark.parametrize("shape, what", [((3, 3), "needs 36 bytes"), ((-1, 5), "cannot infer"),
                                         ((-1, -1), "more than one -1"), ((2, -3), "negative"),
                                         ((2.0, 8), "must be an int")])
def test_bad_views_raise(shape, what):
    d = runtime.empty(16, np.int32)
    with pytest.raises(runtime.InvalidValueError, match=what):
        d.view(shape=shape)


def test_view_bad_dtype():
    with pytest.raises(runtime.InvalidValueError, match="not supported"):
        runtime.empty(4).view("U1")


def test_view_keeps_base_alive():
    d = runtime.to_device(np.arange(4, dtype=np.float32))
    v = d.view(np.int32)
    del d
    gc.collect()
    assert np.array_equal(v.numpy(), np.arange(4, dtype=np.float32).view(np.int32))


def test_free_base_frees_views_and_use_after_free_raises(stream):
    d = runtime.to_device(np.arange(16, dtype=np.float32))
    v = d.view(shape=(4, 4))
    vv = v.view(np.uint8)
    with pytest.raises(runtime.InvalidValueError, match="is a view"):
        runtime.free(v)
    before = runtime.memory_stats()["num_frees"]
    runtime.free(d)
    assert runtime.memory_stats()["num_frees"] == before + 1  # released at once: nothing else holds it
    for m in (v, vv):
        assert m.freed
        with pytest.raises(runtime.InvalidValueError, match="was freed"):
            m.ptr
        with pytest.raises(runtime.InvalidValueError, match="was freed"):
            runtime.copy(np.zeros(m.shape, m.dtype), m)
        with pytest.raises(runtime.InvalidValueError, match="was freed"):
            stream.launch_copy(m, np.zeros(m.shape, m.dtype))
        with pytest.raises(runtime.InvalidValueError, match="was freed"):
            m.view(np.int8)
        with pytest.raises(runtime.InvalidValueError, match="was freed"):
            m.__dlpack__()


def test_numpy_is_a_host_copy_of_the_shape():
    h = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    d = runtime.to_device(h)
    a = d.numpy()
    assert a.shape == (2, 3, 4) and a.dtype == np.int64 and np.array_equal(a, h)
    a[0, 0, 0] = 99
    assert d.numpy()[0, 0, 0] == 0  # a copy


def test_repr_shows_shape_dtype_device():
    d = runtime.empty((2, 3), np.int16)
    r = repr(d)
    assert "(2, 3)" in r and "int16" in r and runtime.current_device().name in r
    assert "untyped" in repr(runtime.alloc(8))
    runtime.free(d)
    assert "freed" in repr(d)


def test_memset_and_memory_of_shape():
    d = runtime.empty((4, 4), np.uint8)
    runtime.memset(d, 3)
    assert d.numpy().shape == (4, 4) and (d.numpy() == 3).all()


def test_jit_kernel_on_typed_memory_still_runs():
    @runtime.jit
    def twice(out, inp):
        i = runtime.get_global_id()
        out[i] = inp[i] * 2

    h = np.arange(64, dtype=np.float32)
    a = runtime.to_device(h)
    b = runtime.empty(64, np.float32)
    s = runtime.Stream()
    s.launch_kernel(twice, b, a)
    s.synchronize()
    from conftest import skip_unless_kernels_run
    skip_unless_kernels_run()
    assert np.array_equal(b.numpy(), h * 2)
