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
    "cuda_array_interface_consumers_keep_freed_memory": """
        import gc
        with dev:
            class Consumer:  # as CuPy's UnownedMemory and Numba's arrays: the pointer, and the exporting object kept
                def __init__(self, obj):
                    self.owner = obj
                    self.ptr = obj.__cuda_array_interface__["data"][0]

            before = runtime.memory_stats()
            d = runtime.to_device(np.arange(1024, dtype=np.float32))
            c = Consumer(d[256:])  # through a view: the allocation it views is held
            runtime.free(d)
            st = runtime.memory_stats()
            assert st["num_deferred_frees"] == before["num_deferred_frees"] + 1, st
            assert st["deferred_free_bytes"] == before["deferred_free_bytes"] + 4096, st
            assert st["allocated_bytes"] == before["allocated_bytes"] + 4096, st  # still allocated
            assert runtime.pointer_attributes(c.ptr)["type"] == "device"
            try:
                d.numpy()
            except runtime.InvalidValueError as e:
                assert "freed" in str(e), e
            else:
                raise AssertionError("freed memory read")
            del d
            gc.collect()
            assert runtime.memory_stats()["num_deferred_frees"] == st["num_deferred_frees"]  # the consumer holds it
            del c
            gc.collect()
            after = runtime.memory_stats()
            assert after["num_deferred_frees"] == before["num_deferred_frees"], after
            assert after["deferred_free_bytes"] == before["deferred_free_bytes"], after
            assert after["allocated_bytes"] == before["allocated_bytes"], after
            # An exported allocation nobody freed is released when its last holder goes, as any other.
            e = runtime.to_device(np.ones(256, dtype=np.float32))
            c = Consumer(e)
            del e, c
            gc.collect()
            assert runtime.memory_stats()["allocated_bytes"] == before["allocated_bytes"]
    """,
    "cuda_array_interface_export_is_cached_and_refuses_bfloat16": """
        import ml_dtypes
        from runtime import _core
        with dev:
            d = runtime.to_device(np.arange(6, dtype=np.float32).reshape(2, 3))
            first = d.__cuda_array_interface__
            first["shape"] = "mutated"  # a consumer's copy: the next access is unaffected
            again = d.__cuda_array_interface__
            assert again is not first and again["shape"] == (2, 3) and again["data"] == (d.ptr, False), again
            s = runtime.Stream()
            s.memset(d, 0)
            done = s.record()
            assert d.__cuda_array_interface__["stream"] is None and done.query()  # queued work completed first
            b = runtime.to_device(np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16))
            assert not hasattr(b, "__cuda_array_interface__")  # consumers fall back to DLPack
            try:
                b.__cuda_array_interface__
            except AttributeError as e:
                assert "bfloat16" in str(e) and "DLPack" in str(e), e
            else:
                raise AssertionError("bfloat16 exported through the CUDA Array Interface")
            hold, ptr, shape, strides, dtype, device, ro, version = _core.import_dlpack(b.__dlpack__(max_version=(1, 0)))
            assert ptr == b.ptr and dtype == (4, 16, 1) and device == (2, 0) and shape == [4], dtype  # kDLBfloat
            hold.release()
            e = runtime.from_dlpack(b)
            assert e.dtype == ml_dtypes.bfloat16 and e.ptr == b.ptr
            s.close()
    """,
    "cuda_array_interface_import_waits_for_the_producers_stream": """
        import ctypes, os, threading
        fake = ctypes.CDLL(os.environ["RUNTIME_CUDA_DRIVER_LIB"])
        HOSTFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        gate = threading.Event()
        hold_back = HOSTFN(lambda _: gate.wait(30))

        class Foreign:
            def __init__(self, cai):
                self.__cuda_array_interface__ = cai

        with dev:
            n = 4096
            d = runtime.to_device(np.zeros(n, np.uint8))  # the context is current on this thread from here on
            foreign = ctypes.c_void_p()
            assert fake.cuStreamCreate(ctypes.byref(foreign), 0) == 0
            # The producer's work, held back on its own stream: a fill queued behind a host function.
            assert fake.cuLaunchHostFunc(foreign, hold_back, None) == 0
            assert fake.cuMemsetD8Async(ctypes.c_uint64(d.ptr), ctypes.c_ubyte(7), ctypes.c_size_t(n), foreign) == 0
            s = runtime.Stream()
            m = runtime.from_dlpack(Foreign(dict(d.__cuda_array_interface__, stream=foreign.value)), stream=s)
            assert m.ptr == d.ptr
            out = runtime.alloc_host(n)  # pinned: the copy needs no host function (the producer's holds that thread)
            s.launch_copy(out, d)  # ordered after the producer's fill by the import
            assert not s.query(), "the consumer's stream did not wait for the producer's stream"
            gate.set()
            s.synchronize()
            assert (out == 7).all(), out[:8]
            for bad, what in ((0, "disallows"), ("x", "must be None")):
                try:
                    runtime.from_dlpack(Foreign(dict(d.__cuda_array_interface__, stream=bad)))
                except BufferError as e:
                    assert what in str(e), e
                else:
                    raise AssertionError(f"stream={bad!r} accepted")
            try:
                runtime.from_dlpack(Foreign(dict(d.__cuda_array_interface__, stream=0x12345)))
            except runtime.InvalidHandleError as e:
                assert "cuEventRecord" in str(e), e
            else:
                raise AssertionError("an unknown foreign stream was accepted")
            s.synchronize()
            runtime.free(m)
            assert fake.cuStreamDestroy_v2(foreign) == 0
            s.close()
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
