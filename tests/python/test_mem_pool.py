"""Memory pool objects from Python (issue 20): runtime.MemPool, pool.alloc, set/get_device_mem_pool, attributes,
release thresholds, trimming, destruction with live memory, and the errors of each."""
import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import runtime

MiB = 1 << 20
BLOCK = 2 * MiB  # a pool of 64 MiB or more commits 2 MiB blocks


@pytest.fixture(autouse=True)
def _default_pool():
    """Every test starts and ends with the default pool current and nothing of its own left."""
    runtime.synchronize()
    gc.collect()
    yield
    runtime.set_device_mem_pool(runtime.MemPool.default())
    gc.collect()
    runtime.synchronize()
    assert runtime.memory_stats()["num_live_allocations"] == 0


def test_pool_alloc_statistics_threshold_and_trim():
    s = runtime.Stream()
    with runtime.MemPool(max_size=64 * MiB) as pool:
        assert pool.release_threshold == 0 and pool.used == 0 and pool.reserved == 0
        assert pool.reuse_allow_opportunistic and pool.reuse_follow_event_dependencies
        pool.release_threshold = 2 * BLOCK
        mems = [pool.alloc(BLOCK, stream=s) for _ in range(4)]
        assert pool.used == 4 * BLOCK and pool.reserved == 4 * BLOCK
        assert pool.used_high == 4 * BLOCK
        data = np.arange(BLOCK // 4, dtype=np.float32)
        runtime.copy(mems[0], data)
        back = np.zeros_like(data)
        runtime.copy(back, mems[0])
        np.testing.assert_array_equal(back, data)
        for m in mems[1:]:
            m.free()
        assert pool.used == BLOCK
        assert pool.reserved == 4 * BLOCK, "nothing goes back before a synchronize"
        s.synchronize()
        assert pool.reserved == 2 * BLOCK, "at the synchronize, down to the threshold"
        pool.trim_to(0)
        assert pool.reserved == BLOCK, "the live block stays"
        pool.reset_high()
        assert pool.used_high == BLOCK and pool.reserved_high == BLOCK
        mems[0].free()
        s.synchronize()
        assert pool.used == 0


def test_two_pools_are_independent_and_alloc_follows_the_current_pool():
    s = runtime.Stream()
    a = runtime.MemPool(release_threshold=1 << 62)
    b = runtime.MemPool()
    default = runtime.MemPool.default()
    assert runtime.get_device_mem_pool() == default
    runtime.set_device_mem_pool(a)
    assert runtime.get_device_mem_pool() is a
    x = runtime.alloc(4096, stream=s)  # rtMallocAsync: the current pool
    assert a.used == 4096 and b.used == 0
    runtime.set_device_mem_pool(b)
    y = runtime.alloc(512, stream=s)
    assert b.used == 512 and a.used == 4096
    x.free()  # back to a, although b is current
    assert a.used == 0 and b.used == 512
    y.free()
    s.synchronize()
    assert a.reserved == BLOCK, "a keeps its memory (its threshold is huge)"
    assert b.reserved == 0, "b returns it at the synchronize (threshold 0)"
    assert a.release_threshold == 1 << 62 and b.release_threshold == 0
    runtime.set_device_mem_pool(default)
    a.destroy()
    b.destroy()


def test_destroy_with_live_memory_keeps_it_valid_and_falls_back_to_the_default_pool():
    s = runtime.Stream()
    before = runtime.memory_stats()["reserved_bytes"]
    pool = runtime.MemPool()
    runtime.set_device_mem_pool(pool)
    m = pool.alloc(BLOCK, stream=s, dtype=np.uint8)
    runtime.copy(m, np.full(BLOCK, 7, np.uint8))
    pool.destroy()
    assert runtime.get_device_mem_pool() == runtime.MemPool.default()
    with pytest.raises(runtime.InvalidValueError, match="destroyed"):
        pool.used
    back = np.zeros(BLOCK, np.uint8)
    runtime.copy(back, m)
    assert (back == 7).all()
    assert runtime.memory_stats()["reserved_bytes"] - before == BLOCK
    m.free()
    s.synchronize()
    assert runtime.memory_stats()["reserved_bytes"] == before


def test_default_pool_is_configured_by_the_enable_switches():
    s = runtime.Stream()
    default = runtime.MemPool.default()
    assert default.is_default and not default._owned
    assert default.release_threshold == 2**64 - 1
    try:
        runtime.enable_pool_allocator(64 * MiB, block_size=MiB)
        runtime.enable_memory_reuse(True)
        used, reserved = default.used, default.reserved  # memory other tests still hold, outside the new pool
        m = runtime.alloc(3 * MiB, stream=s)
        assert default.used - used == 3 * MiB and default.reserved - reserved == 3 * MiB
        m.free()
        s.synchronize()
        assert default.reserved - reserved == 3 * MiB, "reuse on, no threshold: cached"
        default.release_threshold = reserved + MiB
        s.synchronize()
        assert default.reserved - reserved == MiB, "down to the threshold at the synchronize"
        default.trim_to(0)
        assert default.reserved == reserved
    finally:
        default.release_threshold = 2**64 - 1
        runtime.enable_memory_reuse(False)
        runtime.enable_pool_allocator(0)


def test_errors_name_what_was_wrong():
    with pytest.raises(runtime.InvalidValueError, match="max_size"):
        runtime.MemPool(max_size=-1)
    with pytest.raises(runtime.InvalidDeviceError):
        runtime.MemPool(device=1000)
    pool = runtime.MemPool()
    with pytest.raises(runtime.InvalidValueError, match="release_threshold"):
        pool.release_threshold = "big"
    with pytest.raises(runtime.InvalidValueError, match="True or False"):
        pool.reuse_allow_opportunistic = 2
    with pytest.raises(runtime.InvalidValueError, match="must be a runtime.Stream"):
        pool.alloc(16, stream=42)
    with pytest.raises(runtime.InvalidValueError, match="does not own"):
        runtime.MemPool.default().destroy()
    with pytest.raises(runtime.InvalidValueError, match="must be a runtime.MemPool"):
        runtime.set_device_mem_pool("pool")
    with pytest.raises(runtime.InvalidValueError, match="cannot be destroyed"):
        runtime._core.mem_pool_destroy(runtime.MemPool.default().handle)
    with pytest.raises(runtime.InvalidValueError, match="read only"):
        runtime._core.mem_pool_set_u64(pool.handle, runtime._core.MEMPOOL_ATTR_USED_MEM_CURRENT, 0)
    handle = pool.handle
    pool.destroy()
    with pytest.raises(runtime.InvalidHandleError, match="not a live memory pool"):
        runtime._core.mem_pool_get_u64(handle, runtime._core.MEMPOOL_ATTR_USED_MEM_CURRENT)
    with pytest.raises(runtime.InvalidValueError, match="destroyed"):
        pool.alloc(16)


_TWO_DEVICES = """
import runtime
other = runtime.MemPool(device=1)
for call, words in ((lambda: runtime.set_device_mem_pool(other, device=0), "not to device 0"),
                    (lambda: other.alloc(16, stream=runtime.Stream(device=0)), "stream's device")):
    try:
        call()
        raise SystemExit("no error")
    except runtime.InvalidValueError as e:
        assert words in str(e), str(e)
m = other.alloc(4096, stream=runtime.Stream(device=1))
assert other.used == 4096 and runtime.memory_stats(0)["allocated_bytes"] == 0
m.free()
other.destroy()
print("ok")
"""


def test_pools_of_another_device_are_refused():
    """In a process of its own with two cpu devices, whatever this one has."""
    env = dict(os.environ, RUNTIME_CPU_DEVICES="2")
    r = subprocess.run([sys.executable, "-c", _TWO_DEVICES], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_threads_share_a_pool():
    pool = runtime.MemPool()
    errors = []

    def work(k):
        try:
            s = runtime.Stream()
            for i in range(50):
                m = pool.alloc(4096 * (k + 1), stream=s, dtype=np.uint8)
                runtime.copy(m, np.full(m.nbytes, (k + i) & 0xFF, np.uint8))
                back = np.zeros(m.nbytes, np.uint8)
                runtime.copy(back, m)
                if not (back == ((k + i) & 0xFF)).all():
                    errors.append((k, i))
                m.free()
            s.synchronize()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert pool.used == 0
    pool.destroy()
