"""Memory strategies from Python (issue 5): pool, reuse, zero copy, stream-ordered alloc/free, pinned, registered
and mapped host memory, and exact statistics (memory_stats, memory_summary, reset_peak_memory_stats)."""
import gc
import weakref

import numpy as np
import pytest

import runtime
from conftest import device_name, host_addressable, skip_unless_host_addressable, skip_unless_kernels_run

MiB = 1024 * 1024
STAT_KEYS = ("allocated_bytes", "reserved_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "num_allocs",
             "num_frees", "num_cache_hits", "num_cache_misses", "num_ooms", "largest_free_block", "pool_size",
             "num_elided_copies", "elided_copy_bytes", "num_live_allocations")


@runtime.jit
def double_it(a):
    i = runtime.get_global_id()
    a[i] = a[i] * 2.0


@runtime.jit
def fill_slow(a, value, rounds):
    # Enough work per element that queued work is still running when the host frees and reallocates.
    i = runtime.get_global_id()
    acc = 0.0
    for r in range(rounds):
        acc = acc + 1.0
    a[i] = value + acc - float(rounds)


def _quiesce():
    """Finish queued work and collect garbage (other tests' memory), so deltas are exactly ours."""
    runtime.synchronize()
    gc.collect()
    runtime.synchronize()


@pytest.fixture(autouse=True)
def _default_strategies():
    """Every test starts and ends with the defaults: no pool, no reuse, no zero copy."""
    _quiesce()
    yield
    _quiesce()
    runtime.enable_zero_copy(False)
    runtime.enable_memory_reuse(False)
    runtime.enable_pool_allocator(0)


def _delta(before, after):
    return {k: after[k] - before[k] for k in STAT_KEYS}


# ---------------------------------------------------------------------------------------------- statistics


def test_stats_fields():
    st = runtime.memory_stats()
    for k in STAT_KEYS:
        assert isinstance(st[k], int) and st[k] >= 0, k
    assert 0.0 <= st["fragmentation"] <= 1.0
    assert runtime.memory_stats(0).keys() == st.keys()
    assert runtime.memory_stats(device_name(0))["num_allocs"] == st["num_allocs"]


def test_stats_exact_after_known_sequence():
    s0 = runtime.memory_stats()
    a = runtime.alloc(1000)
    b = runtime.alloc(3000, dtype=np.float32)
    d = _delta(s0, runtime.memory_stats())
    assert d["allocated_bytes"] == 4000 and d["reserved_bytes"] == 4000  # no pool: reserved == requested
    assert d["num_allocs"] == 2 and d["num_frees"] == 0 and d["num_live_allocations"] == 2
    assert d["num_cache_misses"] == 2 and d["num_cache_hits"] == 0
    runtime.free(a)
    d = _delta(s0, runtime.memory_stats())
    assert d["allocated_bytes"] == 3000 and d["num_frees"] == 1 and d["num_live_allocations"] == 1
    runtime.free(b)
    st = runtime.memory_stats()
    d = _delta(s0, st)
    assert d["allocated_bytes"] == 0 and d["reserved_bytes"] == 0 and d["num_live_allocations"] == 0
    assert d["num_allocs"] == 2 and d["num_frees"] == 2
    assert st["peak_allocated_bytes"] >= s0["allocated_bytes"] + 4000
    assert runtime.alloc(0).nbytes == 0 and _delta(s0, runtime.memory_stats())["num_allocs"] == 2  # 0 bytes: nothing


def test_reset_peak_memory_stats():
    a = runtime.alloc(8192)
    runtime.free(a)
    runtime.reset_peak_memory_stats()
    st = runtime.memory_stats()
    assert st["peak_allocated_bytes"] == st["allocated_bytes"]
    assert st["peak_reserved_bytes"] == st["reserved_bytes"]
    b = runtime.alloc(5000)
    c = runtime.alloc(7000)
    runtime.free(b)
    runtime.free(c)
    st2 = runtime.memory_stats()
    assert st2["allocated_bytes"] == st["allocated_bytes"]
    assert st2["peak_allocated_bytes"] == st["allocated_bytes"] + 12000
    assert st2["peak_reserved_bytes"] == st["reserved_bytes"] + 12000
    runtime.reset_peak_memory_stats(device=device_name(0))
    assert runtime.memory_stats()["peak_allocated_bytes"] == st["allocated_bytes"]


def test_device_argument_switches_and_restores():
    before = runtime.get_device()
    runtime.memory_stats(device=0)
    runtime.memory_summary(device="cpu:0")
    runtime.reset_peak_memory_stats(device=0)
    runtime.empty_cache(device="cpu:0")
    assert runtime.get_device() == before
    with pytest.raises(runtime.InvalidDeviceError):
        runtime.memory_stats(device=runtime.get_device_count())
    with pytest.raises(runtime.InvalidDeviceError):
        runtime.memory_stats(device="tpu:0")
    assert runtime.get_device() == before


def test_memory_summary_is_a_table():
    a = runtime.alloc(3 * MiB)
    text = runtime.memory_summary()
    runtime.free(a)
    assert isinstance(text, str) and text.count("\n") >= 10
    for label in ("Allocated memory", "Reserved memory", "Cache hits", "Elided copies", "Fragmentation", device_name(0)):
        assert label in text
    assert "MiB" in text


# ---------------------------------------------------------------------------------------------- pool and reuse


def test_seed_strategies_as_written():
    runtime.enable_pool_allocator(
        pool_size=4 * 1024**3,  # 4GB
        block_size=1024 * 1024   # 1MB
    )
    if host_addressable(0):
        runtime.enable_zero_copy(True)
    else:  # zero copy maps host memory in place: refused, saying so, where device memory is not host memory
        with pytest.raises(runtime.NotSupportedError, match="cannot address host memory"):
            runtime.enable_zero_copy(True)
    runtime.enable_memory_reuse(True)
    st = runtime.memory_stats()
    assert st["pool_size"] == 4 * 1024**3
    assert st["reserved_bytes"] == 0  # address space only: nothing committed up front
    a = runtime.alloc(4 * MiB)
    assert runtime.memory_stats()["reserved_bytes"] == 4 * MiB
    runtime.free(a)


def test_cache_hit_on_same_size_with_reuse():
    runtime.enable_pool_allocator(pool_size=64 * MiB, block_size=MiB)
    runtime.enable_memory_reuse(True)
    s0 = runtime.memory_stats()
    a = runtime.alloc(MiB)
    d = _delta(s0, runtime.memory_stats())
    assert d["num_cache_misses"] == 1 and d["num_cache_hits"] == 0 and d["reserved_bytes"] == MiB
    runtime.free(a)
    assert runtime.memory_stats()["reserved_bytes"] == s0["reserved_bytes"] + MiB  # cached, not returned
    b = runtime.alloc(MiB)
    d = _delta(s0, runtime.memory_stats())
    assert d["num_cache_hits"] == 1 and d["num_cache_misses"] == 1 and d["reserved_bytes"] == MiB
    assert d["num_allocs"] == 2 and d["num_frees"] == 1 and d["allocated_bytes"] == MiB
    st = runtime.memory_stats()
    assert st["pool_size"] == 64 * MiB and st["largest_free_block"] == 63 * MiB
    assert st["fragmentation"] == pytest.approx(1 - st["allocated_bytes"] / st["reserved_bytes"])
    runtime.free(b)


def test_empty_cache_lowers_reserved():
    runtime.enable_pool_allocator(pool_size=64 * MiB, block_size=MiB)
    runtime.enable_memory_reuse(True)
    mems = [runtime.alloc(MiB) for _ in range(4)]
    for m in mems:
        runtime.free(m)
    st = runtime.memory_stats()
    assert st["reserved_bytes"] >= 4 * MiB and st["allocated_bytes"] == 0
    runtime.empty_cache()
    st2 = runtime.memory_stats()
    assert st2["reserved_bytes"] < st["reserved_bytes"] and st2["reserved_bytes"] == 0
    assert st2["fragmentation"] == 0.0


def test_reuse_off_returns_memory_at_once():
    runtime.enable_pool_allocator(pool_size=64 * MiB, block_size=MiB)
    runtime.enable_memory_reuse(False)
    a = runtime.alloc(2 * MiB)
    assert runtime.memory_stats()["reserved_bytes"] == 2 * MiB
    runtime.free(a)
    assert runtime.memory_stats()["reserved_bytes"] == 0


def test_pool_refused_while_live_then_switchable():
    runtime.enable_pool_allocator(pool_size=16 * MiB, block_size=MiB)
    a = runtime.alloc(MiB)
    with pytest.raises(runtime.InvalidValueError, match="live"):
        runtime.enable_pool_allocator(pool_size=32 * MiB, block_size=MiB)
    runtime.free(a)
    runtime.enable_pool_allocator(pool_size=32 * MiB, block_size=2 * MiB)
    assert runtime.memory_stats()["pool_size"] == 32 * MiB
    runtime.enable_pool_allocator(0)
    assert runtime.memory_stats()["pool_size"] == 0


def test_pool_out_of_memory_and_recovery():
    runtime.enable_pool_allocator(pool_size=8 * MiB, block_size=MiB)
    s0 = runtime.memory_stats()
    with pytest.raises(runtime.OutOfMemoryError) as info:
        runtime.alloc(16 * MiB)
    assert isinstance(info.value, MemoryError)
    assert str(16 * MiB) in str(info.value)
    assert _delta(s0, runtime.memory_stats())["num_ooms"] == 1
    a = runtime.alloc(4 * MiB)  # everything still works
    runtime.free(a)
    runtime.enable_pool_allocator(pool_size=8 * MiB, block_size=MiB, grow=True)
    b = runtime.alloc(16 * MiB)  # served outside the pool
    assert b.nbytes == 16 * MiB
    runtime.free(b)


@pytest.mark.parametrize("kwargs", [dict(pool_size=-1), dict(block_size=-4096), dict(block_size=1000),
                                    dict(block_size=1024), dict(block_size=0), dict(pool_size=MiB, block_size=2 * MiB),
                                    dict(pool_size=1.5), dict(block_size="1M"), dict(grow="yes")])
def test_pool_bad_arguments(kwargs):
    with pytest.raises(runtime.InvalidValueError):
        runtime.enable_pool_allocator(**kwargs)
    a = runtime.alloc(16)  # the runtime keeps working
    runtime.free(a)


def test_bad_flags():
    for fn in (runtime.enable_memory_reuse, runtime.enable_zero_copy):
        with pytest.raises(runtime.InvalidValueError):
            fn("yes")
        with pytest.raises(runtime.InvalidValueError):
            fn(2)
    with pytest.raises(runtime.InvalidValueError):
        runtime.alloc_host(-1)
    with pytest.raises(runtime.InvalidValueError):
        runtime.alloc_host(6, dtype=np.float32)
    with pytest.raises(runtime.InvalidValueError):
        runtime.alloc(-5, stream=runtime.Stream())


# ---------------------------------------------------------------------------------------------- stream-ordered


def test_stream_ordered_alloc_free(stream):
    skip_unless_kernels_run()
    runtime.enable_pool_allocator(pool_size=64 * MiB, block_size=MiB)
    runtime.enable_memory_reuse(True)
    n = 1 << 16
    host = np.arange(n, dtype=np.float32)
    out = np.empty_like(host)
    s0 = runtime.memory_stats()
    a = runtime.alloc(host.nbytes, stream=stream)
    assert a.device == stream.device
    stream.launch_copy(a, host)
    stream.launch_kernel(double_it, a)
    stream.launch_copy(out, a)
    runtime.free(a)  # pool memory used by one stream only: freed at once, ordered on that stream
    assert a.freed
    assert _delta(s0, runtime.memory_stats())["num_frees"] == 1
    b = runtime.alloc(host.nbytes, stream=stream)  # later work on the same stream may reuse the block
    stream.memset(b, 0xFF)
    stream.synchronize()
    assert np.array_equal(out, host * 2)
    d = _delta(s0, runtime.memory_stats())
    assert d["num_allocs"] == 2 and d["num_live_allocations"] == 1 and d["num_cache_hits"] >= 1
    runtime.free(b)
    with pytest.raises(runtime.InvalidValueError):
        runtime.free(b)


def test_cross_stream_reuse_never_corrupts():
    skip_unless_kernels_run()
    runtime.enable_pool_allocator(pool_size=64 * MiB, block_size=MiB)
    runtime.enable_memory_reuse(True)
    s1, s2 = runtime.Stream(), runtime.Stream()
    n = 1 << 16
    outs = []
    for it in range(4):
        a = runtime.alloc(n * 4, dtype=np.float32, stream=s1)
        s1.launch_kernel(fill_slow, a, float(it + 1), 200)
        out = np.empty(n, dtype=np.float32)
        s1.launch_copy(out, a)
        outs.append((it + 1, out))
        runtime.free(a)  # s1's queued work still uses it
        b = runtime.alloc(n * 4, dtype=np.float32, stream=s2)  # must not be handed a's block before s1 passes
        s2.memset(b, 0)
        runtime.free(b)
    s1.synchronize()
    s2.synchronize()
    for value, out in outs:
        assert np.all(out == value), value
    s1.close()
    s2.close()


def test_free_of_memory_used_by_two_streams_is_deferred():
    skip_unless_kernels_run()
    runtime.enable_pool_allocator(pool_size=64 * MiB, block_size=MiB)
    s1, s2 = runtime.Stream(), runtime.Stream()
    a = runtime.alloc(1 << 18, dtype=np.float32)
    s1.launch_kernel(fill_slow, a, 3.0, 200)
    ev = s1.record()
    s2.wait(ev)
    out = np.empty(1 << 16, dtype=np.float32)
    s2.launch_copy(out, a)
    runtime.free(a)
    s1.synchronize()
    s2.synchronize()
    assert np.all(out == 3.0)
    assert a.freed


def test_alloc_stream_argument_errors():
    with pytest.raises(runtime.InvalidValueError):
        runtime.alloc(16, stream="s")
    with pytest.raises(runtime.InvalidDeviceError):
        runtime.alloc(16, stream=runtime.Stream(), device=runtime.get_device_count())


# ---------------------------------------------------------------------------------------------- host memory


def test_alloc_host_is_pinned_and_freed_with_the_array():
    h = runtime.alloc_host(4096, dtype=np.float32)
    assert isinstance(h, np.ndarray) and h.dtype == np.float32 and h.shape == (1024,)
    h[:] = np.arange(1024)
    d = runtime.to_device(h)
    assert np.array_equal(d.numpy(), h)
    owner = weakref.ref(h.base)
    view = h[10:20]
    del h
    gc.collect()
    assert owner() is not None  # a view still uses it
    del view
    gc.collect()
    assert owner() is None
    assert runtime.alloc_host(0).nbytes == 0
    u8 = runtime.alloc_host(100)
    assert u8.dtype == np.uint8 and u8.nbytes == 100


def test_register_unregister_and_errors():
    x = np.zeros(1024, dtype=np.float32)
    ref = weakref.ref(x)
    assert runtime.register_host(x) is x
    with pytest.raises(runtime.InvalidValueError):
        runtime.register_host(x)  # overlaps itself
    with pytest.raises(runtime.InvalidValueError):
        runtime.register_host(x[10:20])  # inside a registered range
    del x
    gc.collect()
    x = ref()
    assert x is not None  # kept alive while registered
    runtime.unregister_host(x)
    with pytest.raises(runtime.InvalidValueError):
        runtime.unregister_host(x)  # not registered any more
    with pytest.raises(runtime.InvalidValueError):
        runtime.unregister_host(np.zeros(8))
    with pytest.raises(runtime.InvalidValueError):
        runtime.register_host(np.zeros(0))
    with pytest.raises(runtime.InvalidValueError):
        runtime.register_host(np.zeros((8, 8))[:, 1])  # not contiguous
    with pytest.raises(runtime.InvalidValueError):
        runtime.register_host(runtime.alloc(64))
    with pytest.raises(runtime.InvalidValueError):
        runtime.register_host(42)
    buf = bytearray(256)
    runtime.register_host(buf)
    runtime.unregister_host(buf)


def test_map_host_refused_when_zero_copy_off():
    x = np.ones(256, dtype=np.float32)
    with pytest.raises(runtime.NotSupportedError, match="zero copy"):
        runtime.map_host(x)
    pinned = runtime.alloc_host(1024, np.float32)
    with pytest.raises(runtime.NotSupportedError):
        runtime.map_host(pinned)
    runtime.register_host(x)  # the refused map left nothing registered
    runtime.unregister_host(x)


def test_zero_copy_elides_and_counts(stream):
    skip_unless_host_addressable("zero copy maps host memory in place")
    runtime.enable_zero_copy(True)
    h = runtime.alloc_host(1 << 20, np.float32)
    h[:] = np.arange(h.size, dtype=np.float32)
    m = runtime.map_host(h)
    assert m.mapped and m.ptr == h.ctypes.data and m.dtype == np.float32 and m.nbytes == h.nbytes
    s0 = runtime.memory_stats()
    stream.launch_copy(m, h, direction="H2D")  # the device already sees these bytes
    stream.launch_kernel(double_it, m)
    stream.launch_copy(h, m, direction="D2H")
    stream.synchronize()
    d = _delta(s0, runtime.memory_stats())
    assert d["num_elided_copies"] == 2 and d["elided_copy_bytes"] == 2 * h.nbytes
    assert d["num_allocs"] == 0
    assert np.array_equal(h, 2 * np.arange(h.size, dtype=np.float32))
    # a copy to other bytes is real and correct
    out = np.empty_like(h)
    runtime.copy(out, m)
    assert np.array_equal(out, h)
    dev = runtime.alloc(h.nbytes)
    runtime.copy(dev, m, direction="D2D")  # mapped memory serves as device memory
    assert np.array_equal(dev.numpy(), h)
    assert _delta(s0, runtime.memory_stats())["num_elided_copies"] == 2
    runtime.free(dev)
    runtime.free(m)
    with pytest.raises(runtime.InvalidValueError):
        m.ptr


def test_jit_kernel_writes_mapped_host_memory_in_place(stream):
    skip_unless_host_addressable("zero copy maps host memory in place")
    runtime.enable_zero_copy(True)
    x = np.arange(10000, dtype=np.float32)
    expect = x * 4
    m = runtime.map_host(x)  # plain numpy memory: registered for the mapping's lifetime
    stream.launch_kernel(double_it, m)
    stream.launch_kernel(double_it, m)
    runtime.free(m)  # deferred: queued work still uses it
    stream.synchronize()
    assert np.array_equal(x, expect)
    runtime.register_host(x)  # the mapping's registration is gone with it
    runtime.unregister_host(x)


def test_map_host_of_registered_array_and_errors():
    skip_unless_host_addressable("zero copy maps host memory in place")
    runtime.enable_zero_copy(True)
    x = np.zeros(512, dtype=np.int32)
    runtime.register_host(x)
    m = runtime.map_host(x)
    assert m.dtype == np.int32
    runtime.free(m)
    runtime.unregister_host(x)  # still registered by the user, not by the mapping
    with pytest.raises(runtime.InvalidValueError):
        runtime.map_host(np.zeros(4, dtype=np.float32)[::2])
    ro = np.zeros(16, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(runtime.InvalidValueError):
        runtime.map_host(ro)
    with pytest.raises(runtime.InvalidValueError):
        runtime.map_host(runtime.alloc(64))
    with pytest.raises(runtime.InvalidValueError):
        runtime.map_host(np.zeros(0))


def test_zero_copy_off_copies_really():
    if host_addressable(0):
        runtime.enable_zero_copy(True)
    runtime.enable_zero_copy(False)
    h = runtime.alloc_host(4096, np.float32)
    d = runtime.alloc(h.nbytes)
    s0 = runtime.memory_stats()
    runtime.copy(d, h)
    runtime.copy(h, d)
    assert _delta(s0, runtime.memory_stats())["num_elided_copies"] == 0
    runtime.free(d)
