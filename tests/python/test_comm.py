"""runtime.comm: every collective on 2 ranks with exact numpy checks (inputs whose reductions are exact in any
order), in place and numpy staging, dtypes and ops, group(), init_rank from threads, the refusals (checked before
anything is queued), timeouts, abort, and ranks on two cpu devices in a subprocess (RUNTIME_CPU_DEVICES=2)."""
import gc
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import runtime
import runtime.comm as comm
from conftest import skip_unless_host_addressable

try:
    import ml_dtypes
    BF16 = [np.dtype(ml_dtypes.bfloat16)]
except ImportError:
    BF16 = []

DTYPES = [np.dtype(t) for t in (np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16,
                                np.float32, np.float64)] + BF16
N = 37  # odd, so no path is a multiple of a vector width


@pytest.fixture
def ranks():
    """Two ranks on device 0 (a device may appear twice), each with its own non-blocking stream: the legacy default
    stream's synchronous copies (to_device, numpy()) wait for blocking streams, so with both ranks on one device a
    copy between the two ranks' calls would wait for a collective whose second rank has not been called yet."""
    skip_unless_host_addressable("numpy checks of collectives")
    comms = comm.init_all([0, 0])
    streams = [runtime.Stream(0, non_blocking=True), runtime.Stream(0, non_blocking=True)]
    yield comms, streams
    for s in streams:
        s.synchronize()
    for c in comms:
        c.destroy()


def data(rank, dtype, n=N):
    """Small values (0..3 + rank) whose sums, products, max and min over 2 ranks are exact in every dtype."""
    return ((np.arange(n) % 4) + rank).astype(dtype)


def dev(a):
    return runtime.to_device(a)


def sync(streams):
    for s in streams:
        s.synchronize()


def test_attributes_and_context_manager():
    with comm.init_all(["cpu:0", 0])[0] as c0:
        assert (c0.rank, c0.size, c0.device) == (0, 2, runtime.Device(0))
        assert "rank=0, size=2" in repr(c0)
    assert "destroyed" in repr(c0)
    c0.destroy()  # idempotent


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "avg"])
def test_all_reduce_ops_and_dtypes(ranks, dtype, op):
    comms, streams = ranks
    ins = [data(r, dtype) for r in range(2)]
    outs = [runtime.empty(N, dtype) for _ in range(2)]
    for r in range(2):
        comms[r].all_reduce(dev(ins[r]), outs[r], op=op, stream=streams[r])
    sync(streams)
    a, b = (x.astype(np.float64) for x in ins)
    want = {"sum": a + b, "prod": a * b, "max": np.maximum(a, b), "min": np.minimum(a, b),
            "avg": np.trunc((a + b) / 2) if dtype.kind in "iu" else (a + b) / 2}[op]
    for r in range(2):
        np.testing.assert_array_equal(outs[r].numpy().astype(np.float64), want)


def test_all_reduce_in_place_device_and_numpy(ranks):
    comms, streams = ranks
    bufs = [dev(data(0, np.float32)), data(1, np.float32)]  # rank 0: device memory, rank 1: a numpy array
    for r in range(2):
        comms[r].all_reduce(bufs[r], stream=streams[r])
    sync(streams)
    want = data(0, np.float32) + data(1, np.float32)
    np.testing.assert_array_equal(bufs[0].numpy(), want)
    np.testing.assert_array_equal(bufs[1], want)


def test_numpy_out_of_place_and_empty(ranks):
    comms, streams = ranks
    outs = [np.zeros(N, np.int64) for _ in range(2)]
    for r in range(2):
        comms[r].all_reduce(data(r, np.int64), outs[r], stream=streams[r])
        comms[r].all_reduce(np.zeros(0, np.int64), np.zeros(0, np.int64), stream=streams[r])
    sync(streams)
    for r in range(2):
        np.testing.assert_array_equal(outs[r], data(0, np.int64) + data(1, np.int64))


def test_broadcast_and_reduce(ranks):
    comms, streams = ranks
    bufs = [np.full(N, 7.0, np.float16), np.zeros(N, np.float16)]
    outs = [np.full(N, -1, np.int32), None]
    for r in range(2):
        comms[r].broadcast(bufs[r], root=0, stream=streams[r])
        comms[r].reduce(data(r, np.int32), outs[r], op="max", root=0, stream=streams[r])
    sync(streams)
    for r in range(2):
        np.testing.assert_array_equal(bufs[r], np.full(N, 7.0, np.float16))
    np.testing.assert_array_equal(outs[0], np.maximum(data(0, np.int32), data(1, np.int32)))


def test_reduce_to_root_1_leaves_other_recv_alone(ranks):
    comms, streams = ranks
    outs = [np.full(N, -5, np.int32), np.zeros(N, np.int32)]
    for r in range(2):
        comms[r].reduce(data(r, np.int32), outs[r], root=1, stream=streams[r])
    sync(streams)
    np.testing.assert_array_equal(outs[1], data(0, np.int32) + data(1, np.int32))
    np.testing.assert_array_equal(outs[0], np.full(N, -5, np.int32))


def test_all_gather_reduce_scatter_all_to_all(ranks):
    comms, streams = ranks
    gathered = [runtime.empty(2 * N, np.uint8) for _ in range(2)]
    scattered = [np.zeros(N, np.float64) for _ in range(2)]
    exchanged = [np.zeros(2 * N, np.int32) for _ in range(2)]
    for r in range(2):
        comms[r].all_gather(data(r, np.uint8), gathered[r], stream=streams[r])
        comms[r].reduce_scatter(dev(data(r, np.float64, 2 * N)), scattered[r], op="sum", stream=streams[r])
        comms[r].all_to_all(np.arange(2 * N, dtype=np.int32) + 1000 * r, exchanged[r], stream=streams[r])
    sync(streams)
    full = data(0, np.float64, 2 * N) + data(1, np.float64, 2 * N)
    for r in range(2):
        np.testing.assert_array_equal(gathered[r].numpy(), np.concatenate([data(0, np.uint8), data(1, np.uint8)]))
        np.testing.assert_array_equal(scattered[r], full[r * N:(r + 1) * N])
        # block k of rank r's recv = rank k's send block r
        want = np.concatenate([np.arange(r * N, (r + 1) * N) + 1000 * k for k in range(2)]).astype(np.int32)
        np.testing.assert_array_equal(exchanged[r], want)


def test_send_recv_exchange_in_group_and_barrier(ranks):
    comms, streams = ranks
    got = [np.zeros(N, np.float32) for _ in range(2)]
    with comm.group():
        for r in range(2):
            with comm.group():  # nested: only the outermost end queues (and copies the numpy outputs back)
                comms[r].send(data(r, np.float32), peer=1 - r, stream=streams[r])
                comms[r].recv(got[r], peer=1 - r, stream=streams[r])
    for r in range(2):
        comms[r].barrier(stream=streams[r])
    sync(streams)
    for r in range(2):
        np.testing.assert_array_equal(got[r], data(1 - r, np.float32))


def test_group_end_runs_when_the_body_raises(ranks):
    comms, streams = ranks
    outs = [np.zeros(N, np.int32) for _ in range(2)]
    with pytest.raises(KeyError, match="body"):
        with comm.group():
            for r in range(2):
                comms[r].all_reduce(data(r, np.int32), outs[r], stream=streams[r])
            raise KeyError("body")
    # The group ended: what it held was queued, and later calls are queued at once (not held by a dangling group).
    later = [np.zeros(N, np.int32) for _ in range(2)]
    for r in range(2):
        comms[r].all_reduce(data(r, np.int32), later[r], op="min", stream=streams[r])
    sync(streams)
    for r in range(2):
        np.testing.assert_array_equal(outs[r], data(0, np.int32) + data(1, np.int32))
        np.testing.assert_array_equal(later[r], data(0, np.int32))


def test_buffers_stay_alive_until_the_collective_has_run(ranks):
    comms, streams = ranks
    gate = threading.Event()
    streams[0].launch_host_func(lambda: gate.wait(5))  # rank 0's collective cannot run before the gate opens
    outs = [runtime.empty(N, np.float32) for _ in range(2)]
    for r in range(2):
        comms[r].all_reduce(runtime.to_device(data(r, np.float32)), outs[r], stream=streams[r])
    gc.collect()  # the caller's references to the inputs are gone before the collective has run
    for _ in range(20):
        runtime.to_device(np.full(N, 99, np.float32))  # memory freed too early would be reused here
    gate.set()
    sync(streams)
    for r in range(2):
        np.testing.assert_array_equal(outs[r].numpy(), data(0, np.float32) + data(1, np.float32))


def test_default_stream_is_the_current_stream(ranks):
    comms, streams = ranks
    outs = [np.zeros(N, np.int32) for _ in range(2)]
    for r in range(2):
        with streams[r]:
            comms[r].all_reduce(data(r, np.int32), outs[r])
    sync(streams)
    np.testing.assert_array_equal(outs[1], data(0, np.int32) + data(1, np.int32))


def test_init_rank_from_two_threads():
    skip_unless_host_addressable("numpy checks of collectives")
    uid = comm.get_unique_id()
    assert isinstance(uid, bytes) and len(uid) == 128
    results, errors = [None, None], []

    def rank_main(r):
        try:
            with runtime.device(0):
                c = comm.init_rank(2, uid, r)
            assert (c.rank, c.size) == (r, 2)
            s = runtime.Stream(0, non_blocking=True)
            out = np.zeros(N, np.float32)
            c.all_reduce(data(r, np.float32), out, stream=s)
            s.synchronize()
            c.destroy()
            results[r] = out
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    for r in range(2):
        np.testing.assert_array_equal(results[r], data(0, np.float32) + data(1, np.float32))


def test_init_rank_refusals():
    with pytest.raises(runtime.InvalidValueError, match="unique_id has 3 bytes"):
        comm.init_rank(2, b"abc", 0)
    with pytest.raises(runtime.InvalidValueError, match="rank must be an int"):
        comm.init_rank(2, comm.get_unique_id(), "0")
    with pytest.raises(runtime.InvalidValueError, match="devices is empty"):
        comm.init_all([])
    with pytest.raises(runtime.InvalidDeviceError):
        comm.init_all([0, 99])


def test_from_mpi_refuses_what_is_not_an_mpi4py_communicator():
    # (from_mpi itself runs under mpirun: tests/python/test_comm_mpi.py)
    with pytest.raises(runtime.InvalidValueError, match="mpi4py communicator, got int"):
        comm.from_mpi(3)


def refused(comms, streams, match, fn, exc=runtime.InvalidValueError):
    """`fn` is refused with `match`, and nothing was queued: the next all_reduce of both ranks still matches."""
    with pytest.raises(exc, match=match):
        fn()
    outs = [np.zeros(3, np.int32) for _ in range(2)]
    for r in range(2):
        comms[r].all_reduce(np.arange(3, dtype=np.int32), outs[r], stream=streams[r])
    sync(streams)
    np.testing.assert_array_equal(outs[0], 2 * np.arange(3))


def test_refusals_name_both_sides(ranks):
    comms, streams = ranks
    c, s = comms[0], streams[0]
    f32, f64 = np.zeros(4, np.float32), np.zeros(4, np.float64)
    refused(comms, streams, r"send \(4 elements of float32\) and recv \(4 elements of float64\) differ in dtype",
            lambda: c.all_reduce(f32, f64, stream=s))
    refused(comms, streams, r"recv \(5 elements of float32\) must hold 4 elements",
            lambda: c.all_reduce(f32, np.zeros(5, np.float32), stream=s))
    refused(comms, streams, r"recv \(4 elements of float32\) must hold 8 elements \(2 ranks x the 4 of send\)",
            lambda: c.all_gather(f32, np.zeros(4, np.float32), stream=s))
    refused(comms, streams, r"send \(4 elements of float32\) must hold 6 elements \(2 ranks x the 3 of recv\)",
            lambda: c.reduce_scatter(f32, np.zeros(3, np.float32), stream=s))
    refused(comms, streams, "must hold a multiple of 2", lambda: c.all_to_all(np.zeros(3), np.zeros(3), stream=s))
    refused(comms, streams, r"op 'mean' is not a reduction \(expected one of 'sum'",
            lambda: c.all_reduce(f32, op="mean", stream=s))
    refused(comms, streams, r"root 2 is out of range \(the communicator has ranks 0 \.\. 1\)",
            lambda: c.broadcast(f32, root=2, stream=s))
    refused(comms, streams, "peer -1 is out of range", lambda: c.send(f32, peer=-1, stream=s))
    refused(comms, streams, "peer 5 is out of range", lambda: c.recv(f32, peer=5, stream=s))
    refused(comms, streams, "dtype int16, which collectives do not take",
            lambda: c.all_reduce(np.zeros(4, np.int16), stream=s))
    refused(comms, streams, "read-only numpy array", lambda: c.all_reduce(np.zeros(4, np.int32)[:], np.frombuffer(
        bytes(16), np.int32), stream=s))
    refused(comms, streams, "must be runtime device memory or a numpy array, got list",
            lambda: c.all_reduce([1, 2], stream=s))
    refused(comms, streams, "recv is None on the root", lambda: c.reduce(f32, None, root=0, stream=s))
    refused(comms, streams, "stream must be a runtime.Stream", lambda: c.barrier(stream=3))


def test_destroyed_communicator_is_refused():
    c0, c1 = comm.init_all([0, 0])
    c0.destroy()
    with pytest.raises(runtime.InvalidHandleError, match="rank 0 of 2 all_reduce: the communicator was destroyed"):
        c0.all_reduce(np.zeros(2, np.float32))
    with pytest.raises(runtime.InvalidHandleError, match="destroyed"):
        c0.abort()
    c1.destroy()


def test_timeout_names_the_missing_rank(monkeypatch):
    skip_unless_host_addressable("numpy operands")
    monkeypatch.setenv("RUNTIME_COMM_TIMEOUT", "0.2")
    c0, c1 = comm.init_all([0, 0])
    s = runtime.Stream(0, non_blocking=True)
    c0.all_reduce(np.zeros(4, np.float32), stream=s)  # rank 1 never calls it
    with pytest.raises(runtime.CommTimeoutError, match="rank 1") as info:
        s.synchronize()
    assert info.value.code == 21 and isinstance(info.value, runtime.Error)
    assert isinstance(c0.async_error(), runtime.CommTimeoutError)
    c0.destroy()
    c1.destroy()


def test_abort_fails_the_waiting_peer():
    skip_unless_host_addressable("numpy operands")
    c0, c1 = comm.init_all([0, 0])
    assert c0.async_error() is None
    s = runtime.Stream(0, non_blocking=True)
    c0.all_reduce(np.zeros(4, np.float32), stream=s)  # waits for rank 1 (30 s timeout)
    c1.abort()
    with pytest.raises(runtime.IllegalStateError, match="abort"):
        s.synchronize()
    assert isinstance(c0.async_error(), runtime.IllegalStateError)
    with pytest.raises(runtime.InvalidHandleError, match="rank 1 of 2 barrier: the communicator was destroyed or "
                                                         "aborted"):
        c1.barrier()
    c0.destroy()


def test_two_cpu_devices_default_streams():
    # One rank per cpu device, on each device's default stream (stream=None); buffers and streams of the other
    # device are refused.
    code = """
        import numpy as np, pytest, runtime, runtime.comm as comm
        assert runtime.get_device_count() >= 2
        c0, c1 = comm.init_all(["cpu:0", "cpu:1"])
        assert c1.device == runtime.Device(1)
        bufs = [runtime.to_device(np.full(5, r + 1, np.int64), device=r) for r in range(2)]
        outs = [np.zeros(10, np.int64) for _ in range(2)]
        for c, b, o in zip((c0, c1), bufs, outs):
            c.all_reduce(b)
            c.all_gather(b, o)
        runtime.device(0).synchronize(); runtime.device(1).synchronize()
        assert (bufs[1].numpy() == 3).all() and (outs[0] == 3).all(), (bufs[1].numpy(), outs[0])
        with pytest.raises(runtime.InvalidValueError, match="device memory of cpu:1, but the rank is on cpu:0"):
            c0.all_reduce(bufs[1])
        with pytest.raises(runtime.InvalidValueError, match="the stream is on cpu:1, but the rank is on cpu:0"):
            c0.barrier(stream=runtime.Stream(1))
        with runtime.device(1):
            c1.barrier()  # the current device's default stream is the rank's: no device switch needed
        c0.barrier()
        runtime.device(0).synchronize(); runtime.device(1).synchronize()
        print("ok")
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, RUNTIME_CPU_DEVICES="2"), cwd=os.path.dirname(__file__))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


# ------------------------------------------------------------------------------------------------ graphs

def test_captured_collectives_replay_exactly_at_each_launch(ranks):
    """Each rank captures all_reduce out of place, then in place, on its own stream; every launch replays both as the
    rank's next collectives, reading the inputs as they are at the launch (b = 2 * (x0 + x1))."""
    comms, streams = ranks
    sends = [dev(np.zeros(N, np.float32)) for _ in comms]
    recvs = [dev(np.zeros(N, np.float32)) for _ in comms]
    execs = []
    for c, s, a, b in zip(comms, streams, sends, recvs):
        with s.capture() as g:
            c.all_reduce(a, b, stream=s)
            c.all_reduce(b, stream=s)
        execs.append(g.instantiate())
    assert not recvs[0].numpy().any()  # captured, not run
    for launch in range(3):
        xs = [data(r, np.float32) + 10 * launch for r in range(2)]
        for a, x in zip(sends, xs):
            runtime.copy(a, x)
        for e, s in zip(execs, streams):
            e.launch(s)
        sync(streams)
        for r in range(2):
            np.testing.assert_array_equal(recvs[r].numpy(), 2 * (xs[0] + xs[1]), err_msg=f"rank {r}, launch {launch}")


def test_a_rank_that_does_not_launch_its_graph_times_out_naming_it(monkeypatch):
    skip_unless_host_addressable("numpy checks of collectives")
    monkeypatch.setenv("RUNTIME_COMM_TIMEOUT", "0.2")
    comms = comm.init_all([0, 0])
    streams = [runtime.Stream(0, non_blocking=True), runtime.Stream(0, non_blocking=True)]
    bufs = [dev(np.ones(4, np.float32)) for _ in comms]
    execs = []
    for c, s, b in zip(comms, streams, bufs):
        with s.capture() as g:
            c.all_reduce(b, stream=s)
        execs.append(g.instantiate())
    for e, s in zip(execs, streams):
        e.launch(s)
    sync(streams)
    execs[0].launch(streams[0])  # rank 1 does not launch again
    with pytest.raises(runtime.CommTimeoutError, match=r"rtAllReduce \(collective #2.*node 0 of the graph.*rank 1"):
        streams[0].synchronize()
    for c in comms:
        c.destroy()
