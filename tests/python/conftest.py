"""pytest fixtures for the Python package tests: a fresh stream, the repository paths, random generators."""
import os
import pathlib

import numpy as np
import pytest

import runtime

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def stream():
    s = runtime.Stream()
    yield s
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
