"""Tests of alloc/free/copy: direction rules (SPEC §3), bounds, dtypes, DLPack, host operand kinds, lifetimes."""
import array
import gc
import threading

import numpy as np
import pytest

import runtime
from conftest import skip_unless_host_addressable


def test_alloc_attributes():
    m = runtime.alloc(4096)
    assert m.nbytes == 4096 and m.ptr != 0 and m.ptr % 256 == 0
    assert m.dtype == np.float32 and not m.typed and m.size == 1024 and len(m) == 1024
    assert isinstance(m.device, runtime.Device)
    t = runtime.alloc(80, dtype=np.int64)
    assert t.dtype == np.int64 and t.typed and t.size == 10
    assert runtime.alloc(0).nbytes == 0


@pytest.mark.parametrize("bad", [-1, 1.5, "10", None, True])
def test_alloc_bad_size(bad):
    with pytest.raises(runtime.InvalidValueError) as e:
        runtime.alloc(bad)
    assert "RT_ERROR_INVALID_VALUE" in str(e.value)


@pytest.mark.parametrize("bad", [1 << 64, 10**30, np.uint64(1) << np.uint64(63), 2.0])
def test_alloc_size_out_of_range_is_refused_by_name(bad):
    if isinstance(bad, np.integer):  # 2**63 fits a size_t: refused by the device as out of memory, not wrapped
        with pytest.raises(runtime.OutOfMemoryError):
            runtime.alloc(bad)
        return
    with pytest.raises(runtime.InvalidValueError, match=str(bad).replace(".", r"\.")):
        runtime.alloc(bad)


@pytest.mark.parametrize("shape, what", [((2**32, 2**32), "2\\*\\*64-1"), ((2**62, 4), "2\\*\\*64-1"),
                                         ((-4, -4), "negative"), ((4, -1), "negative"), (-3, "negative"),
                                         ((2.0, 3), "must be an int"), ((3, "4"), "must be an int"),
                                         ((True, 2), "must be an int"), (1.5, "must be an int")])
def test_empty_shape_that_would_wrap_or_is_not_ints_is_refused(shape, what):
    # Regression (issue 11, finding 6): (2**32, 2**32) gave a 0-byte allocation, (-4, -4) one of 64 bytes.
    with pytest.raises(runtime.InvalidValueError, match=what) as e:
        runtime.empty(shape, dtype=np.float32)
    assert repr(shape) in str(e.value) or str(shape) in str(e.value)


def test_empty_shapes_exact():
    assert runtime.empty((3, 4), dtype=np.float64).nbytes == 96
    assert runtime.empty([2, 5], dtype=np.int16).nbytes == 20
    assert runtime.empty((0, 7)).nbytes == 0
    assert runtime.empty((), dtype=np.int32).nbytes == 4  # a 0-d shape is one element, as in numpy
    assert runtime.empty(np.int64(6), dtype=np.uint8).nbytes == 6


def test_copy_and_memset_counts_out_of_range():
    d = runtime.alloc(16)
    h = np.zeros(4, np.float32)
    for bad in (-1, 1 << 64, 2.0):
        with pytest.raises(runtime.InvalidValueError, match="nbytes"):
            runtime.copy(d, h, nbytes=bad)
        with pytest.raises(runtime.InvalidValueError, match="nbytes"):
            runtime.memset(d, 0, nbytes=bad)
    with pytest.raises(runtime.InvalidValueError, match="alloc_host"):
        runtime.alloc_host(1 << 64)


def test_alloc_bad_dtype():
    for bad in (np.dtype("U4"), np.dtype([("a", np.int32)]), np.longdouble, np.dtype(">i4")):
        with pytest.raises(runtime.InvalidValueError, match="not supported"):
            runtime.alloc(16, dtype=bad)
    with pytest.raises(runtime.InvalidValueError, match="whole number"):
        runtime.alloc(6, dtype=np.float32)


def test_out_of_memory_is_memoryerror():
    total = runtime.get_device_properties(0).total_memory
    with pytest.raises(runtime.OutOfMemoryError) as e:
        runtime.alloc(total * 4)
    assert isinstance(e.value, MemoryError) and "RT_ERROR_OUT_OF_MEMORY" in str(e.value)
    assert runtime.alloc(1024).nbytes == 1024  # still working


def test_copy_inferred_and_explicit(rng):
    h = rng.random(1000)
    d = runtime.alloc(h.nbytes)
    runtime.copy(d, h)
    assert d.dtype == np.float64  # SPEC §3: a typed host copy types untyped memory
    out = np.zeros_like(h)
    runtime.copy(out, d, direction="D2H")
    assert np.array_equal(out, h)
    d2 = runtime.alloc(h.nbytes)
    runtime.copy(d2, d, direction="D2D")
    assert d2.dtype == np.float64 and np.array_equal(d2.numpy(), h)
    h2 = np.empty_like(h)
    runtime.copy(h2, h, direction="h2h")
    assert np.array_equal(h2, h)


@pytest.mark.parametrize("direction,dst_dev,src_dev", [
    ("D2H", True, False), ("H2D", False, True), ("D2D", False, True), ("H2H", True, False), ("D2D", True, False),
    ("H2D", True, True), ("H2H", True, True), ("D2H", False, False)])
def test_contradicting_direction(direction, dst_dev, src_dev):
    h = np.zeros(16, np.float32)
    d = runtime.alloc(h.nbytes)
    dst = d if dst_dev else h
    src = d if src_dev else h.copy()
    for fn in (runtime.copy, runtime.Stream().launch_copy):
        with pytest.raises(runtime.InvalidValueError) as e:
            fn(dst, src, direction=direction)
        msg = str(e.value)
        assert direction in msg and "contradicts" in msg
        assert ("dst is device memory" if dst_dev else "dst is a host") in msg
        assert ("src is device memory" if src_dev else "src is a host") in msg


def test_bad_direction_string():
    with pytest.raises(runtime.InvalidValueError, match="'sideways' is not one of"):
        runtime.copy(np.zeros(1), np.zeros(1), direction="sideways")


def test_overflowing_copy():
    d = runtime.alloc(16)
    with pytest.raises(runtime.InvalidValueError, match="holds only 16"):
        runtime.copy(d, np.zeros(5, np.float32))
    with pytest.raises(runtime.InvalidValueError, match="holds only"):
        runtime.copy(np.zeros(2, np.float32), d)
    with pytest.raises(runtime.InvalidValueError, match="exceeds the source"):
        runtime.copy(d, np.zeros(2, np.float32), nbytes=9)
    runtime.copy(d, np.arange(4, dtype=np.float32), nbytes=8)  # a partial copy is fine with nbytes=
    assert list(d.numpy()[:2]) == [0.0, 1.0]
    assert d.shape == (4,)  # typed by the partial copy: float32 over the whole memory
    with pytest.raises(runtime.InvalidValueError, match="shape mismatch"):
        runtime.copy(d, np.zeros(2, np.float32))  # a smaller whole copy is refused: partial copies say nbytes=


def test_bad_operands():
    d = runtime.alloc(16)
    with pytest.raises(runtime.InvalidValueError, match="got int"):
        runtime.copy(d, 42)
    with pytest.raises(runtime.InvalidValueError, match="read-only"):
        runtime.copy(b"0123456789abcdef", d)
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(runtime.InvalidValueError, match="read-only"):
        runtime.copy(ro, d)
    with pytest.raises(runtime.InvalidValueError, match="C-contiguous"):
        runtime.copy(np.zeros((4, 2), np.float32)[:, 0], d)


def test_host_operand_kinds():
    d = runtime.alloc(16)
    runtime.copy(d, b"\x01" * 16)
    assert not d.typed  # bytes are untyped
    a = array.array("i", [1, 2, 3, 4])
    runtime.copy(d, a)
    back = array.array("i", [0, 0, 0, 0])
    runtime.copy(back, d)
    assert list(back) == [1, 2, 3, 4]
    ba = bytearray(16)
    runtime.copy(ba, d)
    assert bytes(ba) == a.tobytes()
    # a non-contiguous source is made contiguous
    m = np.arange(8, dtype=np.int32).reshape(4, 2)[:, 1]
    runtime.copy(d, m)
    assert list(d.view(np.int32).numpy()) == [1, 3, 5, 7]


def test_dlpack_host_source():
    class OnlyDLPack:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    src = OnlyDLPack(np.arange(4, dtype=np.float32))
    d = runtime.alloc(16)
    runtime.copy(d, src)
    assert list(d.numpy()) == [0, 1, 2, 3]


def test_free_and_use_after_free():
    d = runtime.alloc(64)
    runtime.free(d)
    assert d.freed
    with pytest.raises(runtime.InvalidValueError, match="already freed"):
        runtime.free(d)
    with pytest.raises(runtime.InvalidValueError, match="was freed"):
        runtime.copy(d, np.zeros(4, np.float32))
    with pytest.raises(runtime.InvalidValueError, match="was freed"):
        runtime.copy(np.zeros(4, np.float32), d)
    with pytest.raises(runtime.InvalidValueError):
        runtime.free(np.zeros(4))


def test_dlpack_zero_copy_cpu():
    if not runtime.get_device_properties(0).unified_addressing:
        pytest.skip("device 0 memory is not host-addressable: numpy cannot view it")
    d = runtime.alloc(40, dtype=np.int32)
    v = np.from_dlpack(d)
    assert v.dtype == np.int32 and v.shape == (10,)
    v[:] = np.arange(10)
    assert list(d.numpy()) == list(range(10))  # same bytes
    assert v.ctypes.data == d.ptr
    assert d.__dlpack_device__() == (1, 0)
    del d
    gc.collect()
    assert v.sum() == 45  # the view keeps the memory alive


def test_dlpack_legacy_and_versioned_capsules():
    d = runtime.alloc(16)
    assert "dltensor_versioned" in repr(d.__dlpack__(max_version=(1, 0)))
    assert "dltensor" in repr(d.__dlpack__())
    own = d.__dlpack_device__()
    with pytest.raises(BufferError):  # a device other than the memory's own
        d.__dlpack__(dl_device=(2, 0) if own != (2, 0) else (1, 0))
    with pytest.raises(BufferError):  # another device without copy=True
        d.__dlpack__(dl_device=(1, 0) if own != (1, 0) else (2, 0), copy=False)


def test_dlpack_waits_for_queued_work(stream):
    skip_unless_host_addressable("numpy cannot view it through DLPack")
    h = np.arange(1 << 20, dtype=np.float32)
    d = runtime.alloc(h.nbytes)
    gate = threading.Event()
    stream.launch_host_func(lambda: gate.wait(5))
    stream.launch_copy(d, h)
    threading.Timer(0.05, gate.set).start()
    v = np.from_dlpack(d)  # must see the copy's result
    assert np.array_equal(v, h)


def test_lifetime_host_array_deleted_after_launch_copy(stream):
    gate = threading.Event()
    stream.launch_host_func(lambda: gate.wait(5))  # hold the stream so the copy runs after `del`
    h = np.arange(1 << 20, dtype=np.float32)
    expect = h.copy()
    d = runtime.alloc(h.nbytes)
    stream.launch_copy(d, h)
    del h
    gc.collect()
    junk = [np.full(1 << 20, -1.0, np.float32) for _ in range(8)]  # reuse freed host memory if it was freed
    gate.set()
    stream.synchronize()
    assert np.array_equal(d.numpy(), expect)
    del junk


def test_lifetime_device_memory_deleted_while_queued(stream):
    gate = threading.Event()
    stream.launch_host_func(lambda: gate.wait(5))
    h = np.arange(1 << 16, dtype=np.float32)
    d = runtime.alloc(h.nbytes)
    out = np.zeros_like(h)
    stream.launch_copy(d, h)
    stream.launch_copy(out, d)
    del d
    gc.collect()
    gate.set()
    stream.synchronize()
    assert np.array_equal(out, h)


def test_free_deferred_until_work_done(stream):
    gate = threading.Event()
    stream.launch_host_func(lambda: gate.wait(5))
    h = np.arange(1 << 16, dtype=np.float32)
    d = runtime.alloc(h.nbytes)
    out = np.zeros_like(h)
    stream.launch_copy(d, h)
    stream.launch_copy(out, d)
    runtime.free(d)  # must not block, must not free under the queued copies
    assert d.freed
    with pytest.raises(runtime.InvalidValueError, match="was freed"):
        stream.launch_copy(d, h)
    gate.set()
    stream.synchronize()
    assert np.array_equal(out, h)
    assert d._freed  # really released once the work completed


def test_to_device_and_empty():
    h = np.arange(12, dtype=np.int16)
    d = runtime.to_device(h)
    assert d.dtype == np.int16 and np.array_equal(d.numpy(), h)
    e = runtime.empty((3, 4), dtype=np.float64)
    assert e.nbytes == 96 and e.size == 12


def test_memset_sync():
    d = runtime.alloc(8, dtype=np.uint8)
    runtime.memset(d, 255)
    assert (d.numpy() == 255).all()
    with pytest.raises(runtime.InvalidValueError):
        runtime.memset(d, -1)
    with pytest.raises(runtime.InvalidValueError):
        runtime.memset("x", 0)


def test_view_dtype():
    d = runtime.alloc(16)
    v = d.view(np.int16)
    assert v.size == 8 and v.dtype == np.int16 and v.ptr == d.ptr
    assert d.size == 4 and not d.typed  # the original keeps its type
    with pytest.raises(runtime.InvalidValueError):
        runtime.alloc(6).view(np.int32)
