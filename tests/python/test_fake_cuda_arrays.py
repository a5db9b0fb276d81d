"""Typed memory, DLPack (kDLCUDA) and __cuda_array_interface__ on cuda:0 of the fake CUDA driver (no GPU): each
check runs in a fresh interpreter with the driver chosen before `import runtime` (see test_fake_cuda.py)."""
import os
import subprocess
import sys
import textwrap

import pytest

from test_fake_cuda import PRELUDE, _fake_lib

CHECKS = {
    "typed_copies": """
        with dev:
            h = np.arange(12, dtype=np.float64).reshape(3, 4)
            d = runtime.alloc(h.nbytes)
            runtime.copy(d, h)
            assert d.shape == (3, 4) and d.dtype == np.float64
            np.testing.assert_array_equal(d.numpy(), h)
            try:
                runtime.copy(np.zeros(24, np.float32), d)
            except runtime.InvalidValueError as e:
                assert "dtype mismatch" in str(e), e
            else:
                raise AssertionError("a float64 -> float32 copy was not refused")
            v = d.view(np.int64, (4, 3))
            np.testing.assert_array_equal(v.numpy(), h.view(np.int64).reshape(4, 3))
            runtime.free(d)
            assert v.freed
    """,
    "dlpack_cuda_export": """
        with dev:
            d = runtime.to_device(np.arange(6, dtype=np.int32).reshape(2, 3))
            assert d.__dlpack_device__() == (2, 0)
            cap = d.__dlpack__(max_version=(1, 0))
            assert "dltensor_versioned" in repr(cap)
            try:
                np.from_dlpack(d)  # numpy reads host memory only
            except (BufferError, RuntimeError, TypeError, ValueError):
                pass
            else:
                raise AssertionError("numpy viewed cuda memory")
            host = np.from_dlpack(d, device="cpu", copy=True)  # a host copy is possible
            np.testing.assert_array_equal(host, np.arange(6).reshape(2, 3))
            try:
                d.__dlpack__(stream=0)
            except BufferError as e:
                assert "ambiguous" in str(e), e
            else:
                raise AssertionError("stream=0 accepted on cuda")
            d.__dlpack__(stream=1)  # the legacy default stream of a foreign consumer: synchronised
            s = runtime.Stream()
            d.__dlpack__(stream=s.handle)  # one of ours: an event handshake
            s.synchronize()
    """,
    "dlpack_cuda_import": """
        with dev:
            d = runtime.to_device(np.arange(8, dtype=np.float32).reshape(2, 4))

            class Wrapped:  # a foreign producer of kDLCUDA memory (the capsule path, not runtime's own)
                def __init__(self, m):
                    self.m = m
                def __dlpack_device__(self):
                    return self.m.__dlpack_device__()
                def __dlpack__(self, **kw):
                    return self.m.__dlpack__(**kw)

            e = runtime.from_dlpack(Wrapped(d))
            assert e.device == dev and e.ptr == d.ptr and e.shape == (2, 4) and e.dtype == np.float32
            assert not e.is_view and e.__dlpack_device__() == (2, 0)
            runtime.free(d)  # e holds an export of d: the memory stays
            e2 = runtime.from_dlpack(e)
            runtime.free(e)
            runtime.free(e2)
            cpu = runtime.from_dlpack(np.arange(3))  # host memory goes to a cpu device
            assert cpu.device.backend == "cpu", cpu.device
            try:
                runtime.from_dlpack(np.arange(3), device=dev)
            except runtime.InvalidDeviceError as err:
                assert "kDLCPU" in str(err), err
            else:
                raise AssertionError("host memory imported onto cuda")
    """,
    "cuda_array_interface_both_ways": """
        with dev:
            d = runtime.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
            cai = d.__cuda_array_interface__
            assert cai["version"] == 3 and cai["shape"] == (3, 4) and cai["typestr"] == "<f4", cai
            assert cai["strides"] is None and cai["stream"] is None and cai["data"] == (d.ptr, False), cai

            class Foreign:  # a Numba-like object with only the interface
                def __init__(self, cai):
                    self.__cuda_array_interface__ = cai

            f = Foreign(dict(cai, shape=(3, 2), strides=(16, 8)))  # every other column
            m = runtime.from_dlpack(f)
            assert m.device == dev and m.shape == (3, 2) and m.strides == (16, 8) and not m.is_contiguous
            out = m.__cuda_array_interface__
            assert out["strides"] == (16, 8) and out["data"][0] == d.ptr, out
            cap = m.__dlpack__(max_version=(1, 0))  # strided export: 4 and 2 elements
            del cap
            try:
                runtime.from_dlpack(Foreign(dict(cai, mask=object())))
            except BufferError as e:
                assert "mask" in str(e), e
            else:
                raise AssertionError("masked interface accepted")
            runtime.free(m)
            runtime.free(d)
    """,
}


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_fake_cuda_arrays(check, tmp_path):
    lib = _fake_lib()
    if lib is None:
        pytest.skip("the fake CUDA driver is not built (build/tests/fake_cuda/libfake_cuda.so; "
                    "set RUNTIME_FAKE_CUDA_LIB)")
    env = dict(os.environ, RUNTIME_CUDA_DRIVER_LIB=lib, RUNTIME_CACHE_DIR=str(tmp_path))
    env.pop("RUNTIME_CUDA", None)
    code = PRELUDE + textwrap.dedent(CHECKS[check])
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
