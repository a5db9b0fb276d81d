"""pytest fixtures for the Python package tests: a fresh stream, the repository paths, random generators."""
import os
import pathlib

import numpy as np
import pytest

import runtime

REPO = pathlib.Path(__file__).resolve().parents[2]


def device_name(dev=0):
    """The short name of a device ("cpu:0", "cuda:0"), as the library's messages and memory_summary spell it."""
    return runtime.get_device_properties(dev).name.split(" ")[0]


def host_addressable(dev=0):
    """Whether the device's memory is host-addressable (cpu): numpy can view it, zero copy maps host memory."""
    return bool(runtime.get_device_properties(dev).unified_addressing)


def launches_execute(dev=0):
    """Whether kernels launched on the device run their code: not on the fake CUDA driver (tests/fake_cuda, named by
    RUNTIME_CUDA_DRIVER_LIB), which records launches and runs nothing; it says so through fake_cuda_launches_execute."""
    if runtime.get_device_properties(dev).backend != "cuda":
        return True
    lib = os.environ.get("RUNTIME_CUDA_DRIVER_LIB")
    if not lib:
        return True
    import ctypes
    try:
        fake = ctypes.CDLL(lib, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)
    except OSError:
        return True
    return not hasattr(fake, "fake_cuda_launches_execute") or fake.fake_cuda_launches_execute() != 0


def skip_unless_host_addressable(why, dev=0):
    """Skips, saying why, a test whose subject needs host-addressable device memory (the cpu backend's)."""
    if not host_addressable(dev):
        pytest.skip(f"{device_name(dev)} memory is not host-addressable: {why} (cpu only)")


def skip_unless_kernels_run(dev=0):
    """Skips a test that checks what kernels compute where they compute nothing (the fake CUDA driver)."""
    if not launches_execute(dev):
        pytest.skip(f"{device_name(dev)} is on the fake CUDA driver, which runs no kernel code: checked on a GPU")


# ---- @runtime.jit tests: compiled kernels against the reference mode
MODES = ["compiled", "reference"]


def jit_run(mode, kernel, args, **launch):
    """Launch @runtime.jit kernel `kernel` in `mode` ("compiled" or "reference") on device copies of args (numpy
    arrays; other values are passed as they are) on a fresh stream; the host copies of its device buffers, in order.
    Compiled runs are skipped where kernels compute nothing (the fake CUDA driver)."""
    if mode == "compiled":
        skip_unless_kernels_run()
    dev = [runtime.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    s = runtime.Stream()
    try:
        s.launch_kernel(runtime.jit(kernel.fn, interpret=(mode == "reference")), *dev, **launch)
        s.synchronize()
    finally:
        s.close()
    return [d.numpy() for d in dev if isinstance(d, runtime.DeviceMemory)]


@pytest.fixture
def stream():
    """A non-blocking stream: tests that hold it behind a host function and then copy synchronously (to_device,
    numpy()) test the stream's own ordering, not the legacy default stream's wait for blocking streams
    (test_pyarrays.py tests that)."""
    s = runtime.Stream(non_blocking=True)
    yield s
    if s.is_capturing:  # a test that failed inside a capture: end it here, or the thread's capture fails the next tests
        try:
            s.end_capture()
        except runtime.Error:
            pass
    try:
        s.synchronize()
    finally:
        s.close()


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture
def repo():
    return REPO


@pytest.fixture(autouse=True)
def _no_interpret(monkeypatch):
    # Tests choose the mode explicitly: an inherited RUNTIME_JIT_INTERPRET would make compiled-vs-reference
    # comparisons compare the reference with itself.
    monkeypatch.delenv("RUNTIME_JIT_INTERPRET", raising=False)


# ---- the JIT's sources for cuda (test_jit_cuda_sources.py, run last): every @runtime.jit kernel that the session
# compiles is remembered with its signature, so that its CUDA translation can be compiled with NVRTC afterwards.
_JIT_COMPILES = []


def _remember_jit_compiles():
    from runtime.jit.kernel import JitKernel

    compile_for_device = JitKernel._compile

    def compile_and_remember(self, key, params, ndim, dev):
        compiled = compile_for_device(self, key, params, ndim, dev)  # kernels meant to be refused are not kept
        _JIT_COMPILES.append((self, list(params), ndim))
        return compiled

    JitKernel._compile = compile_and_remember


_remember_jit_compiles()


@pytest.fixture
def jit_compiles():
    """(kernel, params, ndim) of every @runtime.jit compile of the session so far."""
    return list(_JIT_COMPILES)


def pytest_collection_modifyitems(session, config, items):
    # The cuda-source check needs what the other tests compiled: it runs after them.
    last = [i for i in items if i.nodeid.split("::")[0].endswith("test_jit_cuda_sources.py")]
    items[:] = [i for i in items if i not in last] + last
