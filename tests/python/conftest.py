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
