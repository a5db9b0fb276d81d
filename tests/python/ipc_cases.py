"""runtime.ipc_get_mem_handle / ipc_open_mem_handle and interprocess events, across two processes (subprocess).

Run by test_ipc.py in a pytest process of its own started with RUNTIME_CPU_IPC_MEMORY=1: cpu device memory is
shareable only when the runtime is started so."""
import os
import subprocess
import sys
import threading
import textwrap

import numpy as np
import pytest

import runtime

LIMIT = 60  # seconds: every wait across processes ends by then
N = 1 << 19  # float32 elements: 2 MiB, shareable on cpu (at least 1 MiB)


def cpu_device():
    for i in range(runtime.get_device_count()):
        if runtime.get_device_properties(i).backend == "cpu":
            return i
    pytest.skip("no cpu device")


@pytest.fixture
def on_cpu():
    dev = cpu_device()
    with runtime.Device(dev):
        yield dev


def spawn(script, *args):
    """A Python child running `script` (argv: the handles in hex), talking through its stdin and stdout."""
    code = "import sys, numpy as np, runtime\n" + textwrap.dedent(script)
    return subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(child):
    try:
        out, err = child.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        pytest.fail(f"the child did not finish within {LIMIT} s: {err}")
    assert child.returncode == 0, err
    return out


def test_child_writes_through_the_opened_memory_and_the_parent_sees_it(on_cpu):
    mem = runtime.zeros(N, dtype=np.float32)
    handle = runtime.ipc_get_mem_handle(mem)
    assert isinstance(handle, bytes) and len(handle) == 64
    child = spawn(f"""
        runtime.set_device({on_cpu})
        with runtime.ipc_open_mem_handle(bytes.fromhex(sys.argv[1]), shape=({N},), dtype=np.float32) as m:
            assert isinstance(m, runtime.DeviceMemory) and m.shape == ({N},)
            assert runtime.pointer_attributes(m)["type"] == "device"
            assert float(m.numpy()[5]) == 0.0
            runtime.copy(m, np.arange({N}, dtype=np.float32))
        assert m.freed
    """, handle.hex())
    finish(child)
    np.testing.assert_array_equal(mem.numpy(), np.arange(N, dtype=np.float32))


def test_parents_results_are_read_by_the_child_untyped(on_cpu):
    mem = runtime.to_device(np.full(N, 3.5, dtype=np.float32))
    child = spawn(f"""
        runtime.set_device({on_cpu})
        m = runtime.ipc_open_mem_handle(bytes.fromhex(sys.argv[1]))
        assert m.nbytes >= {N * 4}
        host = np.empty({N}, dtype=np.float32)
        runtime.copy(host, m.view(np.float32, shape=(m.nbytes // 4,))[:{N}])
        assert (host == 3.5).all(), host[:4]
        m.close()
        m.close()  # twice: nothing
        print("ok")
    """, runtime.ipc_get_mem_handle(mem).hex())
    assert finish(child).strip() == "ok"


def test_a_stream_of_the_child_waits_for_the_parents_record(on_cpu):
    mem = runtime.zeros(N, dtype=np.float32)
    ev = runtime.Event(interprocess=True)
    stream = runtime.Stream()
    gate = threading.Event()
    stream.launch_host_func(lambda: gate.wait(LIMIT))
    stream.launch_copy(mem, np.full(N, 7.0, dtype=np.float32))
    stream.record(ev)
    child = spawn(f"""
        runtime.set_device({on_cpu})
        ev = runtime.Event.from_ipc_handle(bytes.fromhex(sys.argv[2]))
        m = runtime.ipc_open_mem_handle(bytes.fromhex(sys.argv[1]), shape=({N},), dtype=np.float32)
        assert not ev.query()
        s = runtime.Stream()
        s.wait(ev)
        host = np.zeros({N}, dtype=np.float32)
        s.launch_copy(host, m)
        print("waiting", flush=True)
        s.synchronize(timeout={LIMIT})
        assert (host == 7.0).all(), host[:4]
        ev.synchronize(timeout={LIMIT})
        assert ev.query()
        m.free()
    """, runtime.ipc_get_mem_handle(mem).hex(), ev.ipc_handle().hex())
    try:
        line = child.stdout.readline()
    finally:
        gate.set()
    assert line.strip() == "waiting", child.stderr.read() if not line else line
    finish(child)
    stream.synchronize()
    assert ev.query()


def test_the_parent_synchronizes_on_the_childs_record(on_cpu):
    ev = runtime.Event(interprocess=True)
    assert ev.query()  # never recorded
    child = spawn(f"""
        runtime.set_device({on_cpu})
        ev = runtime.Event.from_ipc_handle(bytes.fromhex(sys.argv[1]))
        s = runtime.Stream()
        s.launch_host_func(lambda: sys.stdin.readline())  # the parent's go
        s.record(ev)
        print("recorded", flush=True)
        s.synchronize(timeout={LIMIT})
    """, ev.ipc_handle().hex())
    line = child.stdout.readline()
    assert line.strip() == "recorded", child.stderr.read()
    assert not ev.query()
    child.stdin.write("go\n")
    child.stdin.flush()
    ev.synchronize(timeout=LIMIT)
    assert ev.query()
    finish(child)


def test_bad_inputs_raise_typed_errors(on_cpu):
    mem = runtime.alloc(N * 4)
    handle = runtime.ipc_get_mem_handle(mem)
    with pytest.raises(runtime.InvalidValueError, match="this process"):
        runtime.ipc_open_mem_handle(handle)
    with pytest.raises(runtime.InvalidValueError, match="64 bytes"):
        runtime.ipc_open_mem_handle(handle[:10])
    with pytest.raises(runtime.InvalidValueError, match="bytes"):
        runtime.ipc_open_mem_handle("not bytes")
    with pytest.raises(runtime.InvalidValueError, match="not an IPC handle"):
        runtime.ipc_open_mem_handle(bytes(64))
    with pytest.raises(runtime.InvalidValueError, match="at least"):
        runtime.ipc_get_mem_handle(runtime.alloc(1024))
    with pytest.raises(runtime.InvalidValueError, match="DeviceMemory"):
        runtime.ipc_get_mem_handle(np.zeros(4))
    with pytest.raises(runtime.InvalidValueError, match="RT_EVENT_INTERPROCESS"):
        runtime.Event().ipc_handle()
    with pytest.raises(runtime.InvalidValueError, match="RT_EVENT_DISABLE_TIMING"):
        runtime.Event(enable_timing=True, interprocess=True)
    ev = runtime.Event(interprocess=True)
    with pytest.raises(runtime.InvalidValueError, match="this process"):
        runtime.Event.from_ipc_handle(ev.ipc_handle())
    with pytest.raises(runtime.InvalidValueError, match="memory handle"):
        runtime.Event.from_ipc_handle(handle)
    runtime.free(mem)


def test_a_handle_of_freed_memory_is_refused_in_the_child(on_cpu):
    mem = runtime.alloc(N * 4)
    handle = runtime.ipc_get_mem_handle(mem)
    runtime.free(mem)
    runtime.synchronize()
    child = spawn(f"""
        runtime.set_device({on_cpu})
        try:
            runtime.ipc_open_mem_handle(bytes.fromhex(sys.argv[1]))
        except runtime.InvalidValueError as e:
            assert "freed" in str(e), str(e)
            print("refused")
    """, handle.hex())
    assert finish(child).strip() == "refused"
