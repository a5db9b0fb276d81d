"""Tests of Python host functions against the rest of the package (issue 11): no binding keeps the GIL while it may
wait, no finalizer waits, a host function that would wait for its own stream gets NotPermittedError. Each case that
could hang runs in a subprocess with a timeout, so the suite itself never hangs."""
import os
import subprocess
import sys
import textwrap

import pytest

import runtime

TIMEOUT = 60

# The executor runs a Python host function blocked on `gate`; to return it needs the GIL. A Timer thread (which
# needs the GIL too) opens the gate while the main thread is inside the call under test: a binding that keeps the
# GIL while it waits for the stream deadlocks here.
PRELUDE = """
import sys, threading
import numpy as np
import runtime
MiB = 1 << 20
s = runtime.Stream()
gate = threading.Event()
def hold():
    s.launch_host_func(lambda: gate.wait(30))
def open_gate_soon():
    threading.Timer(0.2, gate.set).start()
"""

CASES = {
    "malloc_under_pool_pressure": """
        runtime.enable_pool_allocator(pool_size=8 * MiB, block_size=MiB)
        a = runtime.alloc(8 * MiB)
        hold()
        s.memset(a, 0)
        runtime.free(a)  # its block is pending until s passes the memset
        open_gate_soon()
        try:
            b = runtime.alloc(8 * MiB)  # may wait for s (GIL released) or refuse
        except runtime.OutOfMemoryError:
            pass
    """,
    "malloc_host": """
        hold(); open_gate_soon()
        h = runtime.alloc_host(MiB)
    """,
    "free_host_used_by_queued_copy": """
        h = runtime.alloc_host(MiB)
        d = runtime.alloc(MiB)
        hold()
        s.launch_copy(d, h)
        open_gate_soon()
        del h
    """,
    "unregister_host_used_by_queued_copy": """
        x = np.zeros(MiB, np.uint8)
        runtime.register_host(x)
        d = runtime.alloc(MiB)
        hold()
        s.launch_copy(d, x)
        open_gate_soon()
        runtime.unregister_host(x)
    """,
    "free_used_by_queued_copy": """
        d = runtime.alloc(MiB)
        hold()
        s.memset(d, 1)
        open_gate_soon()
        runtime.free(d)
    """,
    "module_unload_with_queued_launch": """
        m = runtime.Module('RT_KERNEL void k(float* a) { a[get_global_id(0)] = 1.0f; }')
        d = runtime.alloc(1024)
        hold()
        s.launch_kernel(m.get_function("k"), d, global_size=256)
        open_gate_soon()
        m.unload()
    """,
    "memory_stats": """
        hold(); open_gate_soon()
        runtime.memory_stats()
    """,
    "event_synchronize": """
        hold()
        ev = s.record()
        open_gate_soon()
        ev.synchronize()
    """,
    "stream_close": """
        hold(); open_gate_soon()
        s.close()
        print("ok"); sys.exit(0)
    """,
}


def run_case(body: str, env: dict = None) -> subprocess.CompletedProcess:
    code = PRELUDE + textwrap.dedent(body) + "\ns.synchronize()\nprint('ok')\n"
    try:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT,
                              env=dict(os.environ, **(env or {})))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"deadlock: no exit within {TIMEOUT} s\nstdout: {e.stdout}\nstderr: {e.stderr}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_binding_does_not_keep_the_gil_while_a_host_function_runs(case):
    r = run_case(CASES[case])
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


def test_host_function_holding_the_last_reference_to_device_memory():
    # Regression (issue 11, finding 1): the callable's release ran DeviceMemory.__del__ -> rtFree, which waited for
    # every stream, including the one running the callback.
    r = run_case("""
        mem = runtime.alloc(MiB)
        s.launch_host_func(lambda m=mem: None)
        del mem
    """)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


def test_host_function_holding_the_last_reference_to_a_stream_and_pinned_memory():
    r = run_case("""
        other = runtime.Stream()
        h = runtime.alloc_host(MiB)
        ev = runtime.Event()
        s.launch_host_func(lambda o=other, h=h, e=ev: None)
        del other, h, ev
    """)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


def test_synchronize_of_its_own_stream_inside_a_host_function_is_not_permitted():
    # Regression (issue 11, finding 5, Python side): this hung forever.
    r = run_case("""
        caught = []
        def cb():
            try:
                s.synchronize()
            except runtime.Error as e:
                caught.append(e)
        s.launch_host_func(cb)
        s.synchronize()
        assert len(caught) == 1 and isinstance(caught[0], runtime.NotPermittedError), caught
        assert caught[0].code == 10 and "RT_ERROR_NOT_PERMITTED" in str(caught[0]), caught[0]
    """)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


def test_not_permitted_error_class():
    assert issubclass(runtime.NotPermittedError, runtime.Error)
    assert runtime.errors.ERROR_CLASSES[10] is runtime.NotPermittedError
    assert runtime._core.ERROR_CODES["RT_ERROR_NOT_PERMITTED"] == 10


def test_releases_at_interpreter_exit_do_not_crash():
    # Work still queued at exit: the exit hook synchronizes, then late releases leak instead of touching Python.
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import threading, numpy as np, runtime
        s = runtime.Stream()
        gate = threading.Event()
        s.launch_host_func(lambda: gate.wait(30))
        hs = [np.ones(1 << 16, np.float32) for _ in range(64)]
        d = runtime.alloc(1 << 18)
        for h in hs:
            s.launch_copy(d, h)
        s.launch_host_func(lambda hs=hs: None)
        threading.Timer(0.1, gate.set).start()
        print("exiting")
    """)], capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0 and "exiting" in r.stdout, f"rc={r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
