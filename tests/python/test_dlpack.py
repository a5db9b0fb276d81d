"""DLPack both ways (issue 13, item 9): n-d export with strides, versioned and legacy capsules, import of host
memory and of runtime memory, the stream handshake, deleters run exactly once, exported memory outlives free(),
and torch / CuPy where they import."""
import gc
import threading

import numpy as np
import pytest

import runtime
from runtime import _core
from conftest import skip_unless_host_addressable


@pytest.fixture(autouse=True)
def _host_addressable():
    skip_unless_host_addressable("numpy views device memory through DLPack")


class Producer:
    """A DLPack producer over a numpy array that counts how often its tensor's deleter ran (through the owner
    object the capsule holds)."""

    def __init__(self, arr, versioned=True, readonly=False):
        self.arr, self.versioned, self.readonly = arr, versioned, readonly
        self.deleted = 0
        self.streams = []

    class _Owner:
        def __init__(self, producer):
            self.producer = producer

        def __del__(self):
            self.producer.deleted += 1

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        a = self.arr
        strides = [s // a.itemsize for s in a.strides]
        code = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}[a.dtype.kind]
        return _core.make_dlpack(a.ctypes.data, list(a.shape), strides, code, a.itemsize * 8, 1, 0,
                                 self._Owner(self), self.versioned and max_version is not None, self.readonly)


# ----------------------------------------------------------------------------------------------- export

@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), ()])
def test_export_nd_to_numpy_is_zero_copy(shape):
    h = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    d = runtime.to_device(h)
    v = np.from_dlpack(d)
    assert v.shape == shape and v.dtype == np.float64 and v.strides == h.strides and np.array_equal(v, h)
    assert v.ctypes.data == d.ptr
    if shape:
        v[(0,) * len(shape)] = -1.0
        assert d.numpy()[(0,) * len(shape)] == -1.0  # the same bytes


def test_export_of_a_strided_view_keeps_its_strides():
    h = np.arange(60, dtype=np.int32).reshape(6, 10)
    imported = runtime.from_dlpack(h[1::2, ::3])  # non-contiguous runtime memory
    assert not imported.is_contiguous and imported.strides == (80, 12)
    back = np.from_dlpack(imported)
    assert back.strides == (80, 12) and np.array_equal(back, h[1::2, ::3])
    assert back.ctypes.data == h[1:, :].ctypes.data


def test_versioned_and_legacy_capsules():
    d = runtime.empty((2, 2), np.float32)
    assert "dltensor_versioned" in repr(d.__dlpack__(max_version=(1, 0)))
    assert "dltensor_versioned" in repr(d.__dlpack__(max_version=(1, 3)))
    assert '"dltensor"' in repr(d.__dlpack__())
    assert '"dltensor"' in repr(d.__dlpack__(max_version=(0, 8)))


@pytest.mark.parametrize("dt", [np.bool_, np.int8, np.uint32, np.int64, np.float16, np.complex64, np.complex128])
def test_export_dtypes(dt):
    h = (np.arange(6) % 2).astype(dt)
    d = runtime.to_device(h)
    v = np.from_dlpack(d)
    assert v.dtype == np.dtype(dt) and np.array_equal(v, h)


def test_export_copy_true_gives_a_host_copy():
    d = runtime.to_device(np.arange(4, dtype=np.float32))
    c = np.from_dlpack(d, copy=True)
    assert np.array_equal(c, np.arange(4)) and c.ctypes.data != d.ptr
    c[0] = 9
    assert d.numpy()[0] == 0


def test_use_after_free_through_export_stays_valid():
    gc.collect()  # earlier tests' garbage must not be released during the count below
    d = runtime.to_device(np.arange(1024, dtype=np.float32))
    live = runtime.memory_stats()["num_live_allocations"]
    v = np.from_dlpack(d)
    runtime.free(d)
    assert d.freed
    with pytest.raises(runtime.InvalidValueError, match="was freed"):
        d.numpy()
    assert runtime.memory_stats()["num_live_allocations"] == live  # still allocated: the consumer holds it
    junk = [runtime.to_device(np.full(1024, -1.0, np.float32)) for _ in range(4)]  # would reuse it if released
    assert v[0] == 0.0 and v[1023] == 1023.0 and v.sum() == sum(range(1024))
    del v
    gc.collect()
    assert runtime.memory_stats()["num_live_allocations"] == live - 1 + len(junk)  # released with the consumer
    del junk


def test_export_of_a_view_defers_the_free_of_its_base():
    d = runtime.to_device(np.arange(8, dtype=np.int32))
    v = np.from_dlpack(d.view(shape=(2, 4)))
    runtime.free(d)
    assert v.shape == (2, 4) and v[1, 3] == 7
    del v
    gc.collect()


def test_read_only_import_is_exported_read_only():
    h = np.arange(4, dtype=np.float32)
    h.flags.writeable = False
    d = runtime.from_dlpack(h)
    assert d.readonly
    with pytest.raises(runtime.InvalidValueError, match="read-only"):
        runtime.copy(d, np.zeros(4, np.float32))
    with pytest.raises(runtime.InvalidValueError, match="read-only"):
        runtime.memset(d, 0)
    back = np.from_dlpack(d)
    assert not back.flags.writeable and np.array_equal(back, h)
    with pytest.raises(BufferError, match="read-only"):
        d.__dlpack__()  # the legacy capsule cannot say read-only


def test_export_to_another_device_is_refused():
    d = runtime.empty(4)
    with pytest.raises(BufferError, match="cannot export"):
        d.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="cannot be copied"):
        d.__dlpack__(dl_device=(2, 0), copy=True)


def test_stream_handshake_with_a_runtime_stream_does_not_block(stream):
    h = np.arange(1 << 16, dtype=np.float32)
    d = runtime.to_device(h)
    consumer = runtime.Stream()
    gate = threading.Event()
    stream.launch_host_func(lambda: gate.wait(5))
    stream.memset(d, 0)  # queued behind the gate
    cap = d.__dlpack__(stream=consumer.handle, max_version=(1, 0))  # must return without waiting for the gate
    assert not stream.query()
    out = np.empty_like(h)
    consumer.launch_copy(out, d)  # ordered after the memset by the handshake's event
    gate.set()
    consumer.synchronize()
    assert (out == 0).all()
    del cap
    consumer.close()


def test_stream_minus_one_and_bad_streams():
    d = runtime.empty(4)
    d.__dlpack__(stream=-1)  # no synchronisation asked
    with pytest.raises(BufferError, match="kDLCPU"):
        d.__dlpack__(stream=12345)
    with pytest.raises(BufferError, match="stream must be"):
        d.__dlpack__(stream="s")


# ----------------------------------------------------------------------------------------------- import

@pytest.mark.parametrize("versioned", [True, False])
def test_import_runs_the_deleter_exactly_once(versioned):
    p = Producer(np.arange(12, dtype=np.float32).reshape(3, 4), versioned=versioned)
    d = runtime.from_dlpack(p)
    assert d.shape == (3, 4) and d.dtype == np.float32 and d.ptr == p.arr.ctypes.data
    assert p.deleted == 0
    runtime.free(d)
    assert p.deleted == 1
    del d
    gc.collect()
    assert p.deleted == 1
    d2 = runtime.from_dlpack(p)  # garbage collection releases it too
    del d2
    gc.collect()
    assert p.deleted == 2
    assert p.streams == [None, None]  # host memory: the consumer passes no stream (DLPack)


def test_import_refused_runs_the_deleter():
    p = Producer(np.arange(4, dtype=np.float32))
    with pytest.raises(runtime.InvalidDeviceError):
        runtime.from_dlpack(p, device=10**6)  # no such device: refused after the capsule was consumed
    gc.collect()
    assert p.deleted == 1


def test_capsule_consumed_once():
    cap = np.arange(4).__dlpack__()
    d = runtime.from_dlpack(cap)
    assert d.shape == (4,)
    with pytest.raises(TypeError, match="consumed once"):
        runtime.from_dlpack(cap)


def test_import_numpy_zero_copy_keeps_the_producer_alive():
    h = np.arange(20, dtype=np.int64).reshape(4, 5)
    d = runtime.from_dlpack(h)
    assert d.ptr == h.ctypes.data and d.shape == (4, 5) and d.strides == (40, 8)
    assert d.device.backend == "cpu"
    del h
    gc.collect()
    assert np.array_equal(d.numpy(), np.arange(20).reshape(4, 5))


def test_import_numpy_copies_and_kernels_use_it_in_place(stream):
    h = np.zeros(64, dtype=np.float32)
    d = runtime.from_dlpack(h)
    runtime.copy(d, np.arange(64, dtype=np.float32))  # into host memory the runtime did not allocate
    assert np.array_equal(h, np.arange(64))
    out = np.empty_like(h)
    stream.launch_copy(out, d)
    stream.synchronize()
    assert np.array_equal(out, h)

    @runtime.jit
    def inc(a):
        i = runtime.get_global_id()
        a[i] = a[i] + 1

    stream.launch_kernel(inc, d)
    stream.synchronize()
    assert np.array_equal(h, np.arange(64) + 1)


def test_import_strided_is_not_copied_through():
    h = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    d = runtime.from_dlpack(h)
    np.testing.assert_array_equal(d.numpy(), h)  # numpy() gathers a strided memory's elements on the host
    with pytest.raises(runtime.InvalidValueError, match="not contiguous"):
        runtime.copy(d, np.zeros((3, 2), np.float32))
    assert d.view(np.int32).strides == d.strides
    with pytest.raises(runtime.InvalidValueError, match="not contiguous"):
        d.view(shape=(6,))


def test_round_trip_through_runtime_memory():
    d = runtime.to_device(np.arange(6, dtype=np.uint16).reshape(2, 3))
    e = runtime.from_dlpack(d)
    assert e.ptr == d.ptr and e.shape == (2, 3) and e.dtype == np.uint16 and e.device == d.device
    runtime.free(d)  # e holds an export: the memory stays
    assert np.array_equal(np.from_dlpack(e), np.arange(6).reshape(2, 3))
    runtime.free(e)


def test_imported_memory_on_a_cuda_device_argument_is_refused():
    cpu_only = all(runtime.get_device_properties(i).backend == "cpu" for i in range(runtime.get_device_count()))
    if cpu_only:
        pytest.skip("no cuda device")
    with pytest.raises(runtime.InvalidDeviceError, match="kDLCPU"):
        runtime.from_dlpack(np.arange(4), device="cuda:0")


def test_unsupported_dlpack_device_and_dtype_are_refused():
    class OnDevice(Producer):
        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            a = self.arr
            return _core.make_dlpack(a.ctypes.data, list(a.shape), None, 2, 32, 4, 0, self._Owner(self), True)

    p = OnDevice(np.zeros(4, np.float32))
    with pytest.raises(BufferError, match="kDLOpenCL"):
        runtime.from_dlpack(p)
    gc.collect()
    assert p.deleted == 1

    class Lanes(Producer):
        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            a = self.arr
            return _core.make_dlpack(a.ctypes.data, [2], None, 9, 32, 1, 0, self._Owner(self), True)

    q = Lanes(np.zeros(4, np.float32))
    with pytest.raises(BufferError, match="not supported"):
        runtime.from_dlpack(q)
    with pytest.raises(runtime.InvalidValueError, match="neither __dlpack__"):
        runtime.from_dlpack([1, 2, 3])


# ----------------------------------------------------------------------------------------------- extents, read-only

WRITE_SRC = """
RT_KERNEL void fill(float* o) { o[get_global_id(0)] = 2.0f; }
"""


def test_nbytes_of_a_strided_import_is_its_real_span():
    b = runtime.from_dlpack(np.broadcast_to(np.float32(1), (1024,)))  # one element, seen 1024 times
    assert b.shape == (1024,) and b.strides == (0,) and b.size == 1024 and b.nbytes == 4 and b.readonly
    h = np.arange(40, dtype=np.float32).reshape(4, 10)
    g = runtime.from_dlpack(h[:, ::3])  # gaps: from the first element to the end of the last
    assert g.shape == (4, 4) and g.nbytes == (3 * 40 + 3 * 12) + 4
    z = runtime.from_dlpack(np.broadcast_to(np.arange(3, dtype=np.int64), (5, 3)))
    assert z.strides == (0, 8) and z.nbytes == 24
    e = runtime.from_dlpack(np.empty((0, 3), np.float32)[:, ::2])
    assert e.nbytes == 0
    assert runtime.from_dlpack(h.T).nbytes == h.nbytes  # a permutation spans the whole array
    assert np.from_dlpack(b).strides == (0,) and np.array_equal(np.from_dlpack(g), h[:, ::3])


def test_negative_strides_are_refused_clearly():
    p = Producer(np.arange(8, dtype=np.float32)[::-1])
    with pytest.raises(BufferError, match="negative strides"):
        runtime.from_dlpack(p)
    gc.collect()
    assert p.deleted == 1  # refused after the capsule was consumed: the producer gets its tensor back


def test_read_only_memory_is_refused_where_a_kernel_may_write(stream):
    f = runtime.Module(WRITE_SRC).get_function("fill")
    b = runtime.from_dlpack(np.broadcast_to(np.float32(1), (1024,)))
    with pytest.raises(runtime.InvalidValueError, match=r"kernel 'fill' argument 0: .*read-only.*writable copy"):
        stream.launch_kernel(f, b)
    with pytest.raises(runtime.InvalidValueError, match="read-only"):
        stream.launch_kernel(f, b, global_size=1)
    ro = np.zeros(16, np.float32)
    ro.flags.writeable = False
    with pytest.raises(runtime.InvalidValueError, match="read-only"):
        stream.launch_kernel(f, runtime.from_dlpack(ro).view())  # a view keeps the flag
    stream.synchronize()
    assert not ro.any()
    ok = runtime.to_device(np.zeros(16, np.float32))  # the writable copy the message suggests
    stream.launch_kernel(f, ok)
    stream.synchronize()
    assert (ok.numpy() == 2).all()

    @runtime.jit
    def write(o):
        o[runtime.get_global_id()] = 3.0

    with pytest.raises(runtime.InvalidValueError, match="read-only"):
        stream.launch_kernel(write, runtime.from_dlpack(ro))
    w = runtime.from_dlpack(np.zeros(16, np.float32))
    stream.launch_kernel(write, w)  # the same kernel on writable memory: its fast path runs afterwards
    stream.launch_kernel(write, w)
    with pytest.raises(runtime.InvalidValueError, match="read-only"):
        stream.launch_kernel(write, runtime.from_dlpack(ro))  # the fast path declines; the full path refuses
    stream.synchronize()
    assert not ro.any() and (np.from_dlpack(w) == 3).all()


def test_check_writable_for_launches_without_a_plan():
    from runtime import launch
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    d = runtime.from_dlpack(ro)
    with pytest.raises(runtime.InvalidValueError, match=r"kernel 'k' argument 1 \('o'\): .*read-only"):
        launch.check_writable("k", (1, d), ["n", "o"], None)
    launch.check_writable("k", (1, d), ["n", "o"], [False, False])  # a parameter the kernel only reads
    launch.check_writable("k", (1, runtime.empty(4)), ["n", "o"], None)


def test_free_of_imported_memory_waits_for_queued_kernels(stream):
    """runtime.free() never waits; the producer's deleter must still run only after the queued work that uses
    the memory (as rtFree does for the runtime's own memory)."""
    n = 1 << 16
    p = Producer(np.zeros(n, np.float32))
    mb = runtime.from_dlpack(p)
    p_arr = p.arr
    gate = threading.Event()
    stream.launch_host_func(lambda: gate.wait(5))  # the kernel stays queued until the gate opens
    f = runtime.Module(WRITE_SRC).get_function("fill")
    stream.launch_kernel(f, mb)
    runtime.free(mb)
    assert mb.freed
    assert p.deleted == 0  # the kernel has not run: the producer's memory must stay
    gate.set()
    stream.synchronize()
    assert p.deleted == 1 and (p_arr == 2).all()
    del mb
    gc.collect()
    assert p.deleted == 1  # exactly once


def test_free_of_idle_imported_memory_releases_at_once():
    p = Producer(np.zeros(8, np.float32))
    mb = runtime.from_dlpack(p)
    runtime.free(mb)
    assert p.deleted == 1


# ----------------------------------------------------------------------------------------------- torch, cupy

def test_torch_both_ways():
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    d = runtime.from_dlpack(t)
    assert d.shape == (3, 4) and d.dtype == np.float32 and d.ptr == t.data_ptr()
    back = torch.from_dlpack(runtime.to_device(np.arange(6, dtype=np.int64).reshape(2, 3)))
    assert back.shape == (2, 3) and back.dtype == torch.int64 and back.sum().item() == 15
    tt = torch.from_dlpack(runtime.from_dlpack(t.t()))  # strided both ways
    assert tt.stride() == t.t().stride() and torch.equal(tt, t.t())


def test_torch_tensor_written_by_a_kernel_in_place(stream):
    torch = pytest.importorskip("torch")
    t = torch.zeros(64, dtype=torch.float32)
    d = runtime.from_dlpack(t)
    assert d.ptr == t.data_ptr() and not d.readonly
    stream.launch_kernel(runtime.Module(WRITE_SRC).get_function("fill"), d)
    stream.synchronize()
    assert torch.equal(t, torch.full((64,), 2.0))  # the kernel wrote torch's own memory

    @runtime.jit
    def scale(a, k):
        i = runtime.get_global_id()
        a[i] = a[i] * k

    stream.launch_kernel(scale, d, 1.5)
    stream.synchronize()
    assert torch.equal(t, torch.full((64,), 3.0))


def test_torch_from_runtime_memory_with_the_stream_handshake(stream):
    torch = pytest.importorskip("torch")
    d = runtime.to_device(np.zeros(1 << 12, np.float32))
    gate = threading.Event()
    stream.launch_host_func(lambda: gate.wait(5))
    stream.memset(d, 0x3F)  # queued behind the gate: torch must not see the zeros
    threading.Timer(0.05, gate.set).start()  # torch.from_dlpack(d) asks with stream=None: a host wait
    t = torch.from_dlpack(d)
    assert gate.is_set() and t.data_ptr() == d.ptr
    assert torch.all(t.view(torch.int32) == 0x3F3F3F3F)
    runtime.free(d)  # torch's tensor keeps the memory
    assert t.view(torch.int32)[-1].item() == 0x3F3F3F3F
    del t
    gc.collect()


def test_torch_non_contiguous_views():
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.int64).reshape(4, 6)
    for view in (base[:, 1::2], base.t(), base[1:3, 2:5], base.expand(2, 4, 6)[1]):
        d = runtime.from_dlpack(view)
        assert d.shape == tuple(view.shape) and d.strides == tuple(s * 8 for s in view.stride())
        assert d.ptr == view.data_ptr()
        assert np.array_equal(np.from_dlpack(d), view.numpy())
        back = torch.from_dlpack(d)
        assert back.stride() == view.stride() and torch.equal(back, view)
    b = runtime.from_dlpack(torch.ones(1).expand(1000))  # stride 0: one element
    assert b.strides == (0,) and b.nbytes == 4 and b.size == 1000

    @runtime.jit
    def total(a, out):
        out[0] = a.shape[0] + a[1, 2]

    out = runtime.to_device(np.zeros(1, np.int64))
    runtime.default_stream().launch_kernel(total, runtime.from_dlpack(base[:, 1::2]), out, global_size=1)
    runtime.synchronize()
    assert out.numpy()[0] == 4 + base[:, 1::2][1, 2].item()


def test_cupy_both_ways():
    cp = pytest.importorskip("cupy")
    a = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    d = runtime.from_dlpack(a)
    assert d.shape == (3, 4) and d.device.backend == "cuda"
    b = cp.from_dlpack(d)
    assert int(b.data.ptr) == d.ptr
