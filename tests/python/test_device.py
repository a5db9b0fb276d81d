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
