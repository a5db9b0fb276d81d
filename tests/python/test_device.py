"""Tests of init, devices, device strings, properties and the device context manager."""
import pytest

import runtime


def test_init_and_count():
    runtime.init()
    n = runtime.get_device_count()
    assert n >= 1
    assert runtime.get_device() in range(n)


def test_init_unknown_option():
    with pytest.raises(runtime.InvalidValueError, match="unknown option"):
        runtime.init(colour="blue")


def test_properties_fields():
    p = runtime.get_device_properties(0)
    assert p.backend in ("cpu", "cuda")
    assert p.total_memory > 0 and p.compute_units > 0
    assert p.name.startswith(f"{p.backend}:{p.backend_ordinal}")
    assert p.device_index == 0
    assert "DeviceProperties(" in repr(p)


@pytest.mark.parametrize("spec", [0, "cpu", "cpu:0", " cpu : 0 "])
def test_device_specs(spec):
    p = runtime.get_device_properties(0)
    if p.backend != "cpu":
        pytest.skip("device 0 is not the cpu device on this machine")
    d = runtime.device(spec)
    assert d.index == 0 and str(d) == "cpu:0" and d.backend == "cpu"
    runtime.set_device(spec)
    assert runtime.get_device() == 0


@pytest.mark.parametrize("spec", [-1, 10**6, "tpu:0", "cpu:99", "cuda:99", "", 1.5, None.__class__, True])
def test_bad_device(spec):
    with pytest.raises(runtime.InvalidDeviceError) as e:
        runtime.set_device(spec)
    assert "RT_ERROR_INVALID_DEVICE" in str(e.value)
    assert isinstance(e.value, runtime.Error) and isinstance(e.value, RuntimeError)
    assert runtime.get_device_count() >= 1  # still working


def test_bad_device_lists_available():
    with pytest.raises(runtime.InvalidDeviceError, match="available: .*cpu:0"):
        runtime.get_device_properties("cuda:99")


def test_device_context_restores():
    before = runtime.get_device()
    with runtime.device(0) as d:
        assert runtime.get_device() == d.index
        assert runtime.current_device() == d
    assert runtime.get_device() == before


def test_device_equality_and_hash():
    assert runtime.Device(0) == runtime.Device("cpu:0") or runtime.get_device_properties(0).backend != "cpu"
    assert len({runtime.Device(0), runtime.Device(0)}) == 1
    assert repr(runtime.Device(0)).startswith("runtime.Device(")


def test_mem_get_info():
    free, total = runtime.mem_get_info()
    assert 0 <= free <= total and total > 0


def test_synchronize_device():
    runtime.synchronize()
    runtime.device(0).synchronize()


def _run_two_devices(code: str):
    import os, subprocess, sys, textwrap
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, RUNTIME_CPU_DEVICES="2"))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


def test_device_context_is_per_thread():
    # Regression (issue 11, finding 8): the saved device lived on the Device object, so two threads entering the
    # same one restored each other's device. Barriers force the interleaving enter, enter, exit, exit.
    _run_two_devices("""
        import threading, runtime
        assert runtime.get_device_count() >= 2
        dev = runtime.Device(1)
        step = threading.Barrier(2)
        seen = {}
        def worker(name, start):
            runtime.set_device(start)
            if name == "b": step.wait()
            with dev:
                if name == "a": step.wait()
                step.wait()
                if name == "b": step.wait()
                assert runtime.get_device() == 1
            if name == "a": step.wait()
            seen[name] = runtime.get_device()
        ts = [threading.Thread(target=worker, args=("a", 0)), threading.Thread(target=worker, args=("b", 1))]
        for t in ts: t.start()
        for t in ts: t.join(30)
        assert seen == {"a": 0, "b": 1}, seen
        print("ok")
    """)


def test_stream_of_another_device_takes_many_enqueues():
    # Regression (issue 11, finding 8): keep-alive events were created on the thread's current device, so a stream
    # of another device failed at its 32nd enqueue on cuda. Nothing internal is created per enqueue any more.
    _run_two_devices("""
        import numpy as np, runtime
        runtime.set_device(0)
        s = runtime.Stream(device=1)
        with runtime.device(1):
            d = runtime.alloc(4 * 100, dtype=np.float32)
        out = np.zeros(100, np.float32)
        for i in range(100):
            s.launch_copy(d, np.full(100, i, np.float32))
        s.launch_copy(out, d)
        s.synchronize()
        assert (out == 99).all() and runtime.get_device() == 0
        print("ok")
    """)


def test_default_stream_of_another_device_is_refused_not_misrouted():
    _run_two_devices("""
        import numpy as np, runtime
        s1 = runtime.default_stream(1)
        name = runtime.get_device_properties(1).name.split(" ")[0]  # cpu:1, or cpu:0 when device 0 is a GPU
        try:
            s1.launch_copy(runtime.alloc(16), np.zeros(4, np.float32))
        except runtime.InvalidDeviceError as e:
            assert f"default stream of {name}" in str(e), e
        else:
            raise AssertionError("queued on device 0's default stream")
        s1.synchronize()  # waiting is fine from any device
        with runtime.device(1):
            s1.launch_copy(runtime.alloc(16), np.zeros(4, np.float32))
            s1.synchronize()
        print("ok")
    """)


def test_init_keywords_are_the_backends_prefixed_options():
    """cpu_devices=2 is rtInit's cpu.devices=2; a bad value names the key as the library spells it."""
    runtime.finalize()
    try:
        runtime.init(cpu_devices=2, cuda_enable=0)
        names = [runtime.get_device_properties(i).name for i in range(runtime.get_device_count())]
        assert sum(n.startswith("cpu:") for n in names) == 2 and not any(n.startswith("cuda:") for n in names), names
        runtime.finalize()
        with pytest.raises(runtime.InvalidValueError, match="cpu.devices"):
            runtime.init(cpu_devices="many")
    finally:
        runtime.finalize()
        runtime.init()
