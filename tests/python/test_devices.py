"""The same programs on every device: streams, events, memory, DLPack and @runtime.jit, parametrized over cpu:0 and
cuda:0 (cuda entries skip with the reason when no GPU can be used here)."""
import numpy as np
import pytest

import runtime


def _cuda_reason():
    try:
        runtime.device("cuda:0")
        return None
    except runtime.Error as e:
        return f"no CUDA device: {e}"


@pytest.fixture(params=["cpu:0", "cuda:0"])
def device(request):
    if request.param.startswith("cuda"):
        why = _cuda_reason()
        if why:
            pytest.skip(why)
    with runtime.device(request.param) as d:
        yield d


@runtime.jit
def _scale2(inp, out):
    i = runtime.get_global_id()
    out[i] = inp[i] * 2.0


def test_cuda_skip_reason_names_the_cause():
    why = _cuda_reason()
    if why is None:
        pytest.skip("a CUDA device is present")
    assert "cuda" in why
    # The reason is the driver's (library not loadable, no device) or the build's, never a bare "not found".
    assert any(w in why for w in ("cannot be loaded", "no devices", "disabled", "no cuda backend", "cuInit")), why


def test_device_names_resolve(device):
    assert runtime.device(device.name) == device
    assert runtime.get_device_properties(device.name).backend == device.backend


def test_stream_event_memory_roundtrip(device, rng):
    n = 1 << 16
    a = rng.standard_normal(n).astype(np.float32)
    back = np.zeros_like(a)
    s1, s2 = runtime.Stream(), runtime.Stream()
    mem = runtime.alloc(a.nbytes)
    assert mem.device == device
    e = runtime.Event(enable_timing=True)
    start = runtime.Event(enable_timing=True)
    s1.record(start)
    s1.launch_copy(mem, a)
    s1.record(e)
    s2.wait(e)
    s2.launch_copy(back, mem)
    s2.synchronize()
    assert e.query()
    assert start.elapsed_time(e) >= 0.0
    np.testing.assert_array_equal(back, a)
    runtime.free(mem)
    s1.close()
    s2.close()


def test_jit_kernel(device, rng):
    n = 10_000  # not a multiple of the group size: the generated bounds guard matters on cuda
    a = rng.standard_normal(n).astype(np.float32)
    s = runtime.Stream()
    inp, out = runtime.alloc(a.nbytes), runtime.alloc(a.nbytes)
    s.launch_copy(inp, a)
    s.launch_kernel(_scale2, inp, out)
    res = np.empty_like(a)
    s.launch_copy(res, out)
    s.synchronize()
    np.testing.assert_allclose(res, a * 2.0)
    s.close()


def test_dlpack_and_cuda_array_interface(device):
    mem = runtime.alloc(64 * 4, dtype=np.float32)
    dev_type, ordinal = mem.__dlpack_device__()
    if device.backend == "cuda":
        assert (dev_type, ordinal) == (2, device.properties.backend_ordinal)  # kDLCUDA
        cai = mem.__cuda_array_interface__
        assert cai["version"] == 3 and cai["shape"] == (64,) and cai["typestr"] == "<f4"
        assert cai["data"] == (mem.ptr, False)
    else:
        assert dev_type == 1  # kDLCPU
        assert not hasattr(mem, "__cuda_array_interface__")
    runtime.free(mem)
