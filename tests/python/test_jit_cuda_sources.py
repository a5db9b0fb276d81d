"""Every @runtime.jit kernel the test suite compiles also compiles for CUDA: its translation for the cuda target
(with the signatures the other tests used) goes through NVRTC for sm_90 and loads on the fake CUDA driver's cuda:0
(tests/fake_cuda, a test double: no GPU). Runs after the other tests (conftest.py orders it last); run alone it
checks its own kernels only. Skipped when the fake driver is not built or NVRTC is missing."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import runtime
from runtime.jit.target import target_for
from runtime.jit.translate import _Translator
from runtime.jit.types import _Sig

import jit_kernels as K

REPO = pathlib.Path(__file__).resolve().parents[2]


def _fake_lib():
    p = os.environ.get("RUNTIME_FAKE_CUDA_LIB") or str(REPO / "build" / "tests" / "fake_cuda" / "libfake_cuda.so")
    return p if os.path.isfile(p) else None


# Compiled by the child: each source on cuda:0, failures reported by name; "no nvrtc" when NVRTC cannot be loaded.
CHILD = r"""
import json, sys
import runtime
from runtime import _core
jobs = json.load(open(sys.argv[1]))
failures = []
with runtime.device("cuda:0"):
    for name, source, options in jobs:
        try:
            _core.module_unload(_core.module_load_source(source, options))
        except runtime.Error as e:
            if "cannot compile for cuda" in str(e):
                print("no nvrtc")
                sys.exit(0)
            failures.append(f"{name}: {e}")
print(json.dumps({"compiled": len(jobs) - len(failures), "failures": failures}))
"""


def test_every_jit_kernel_of_the_suite_compiles_for_cuda(tmp_path, jit_compiles):
    lib = _fake_lib()
    if lib is None:
        pytest.skip("the fake CUDA driver is not built (build/tests/fake_cuda/libfake_cuda.so; set RUNTIME_FAKE_CUDA_LIB)")
    # Its own kernel first, so that the check means something when run alone: inf/nan literals (D1).
    x, out = runtime.empty(16, np.float32), runtime.empty(4, np.float32)
    own = K.inf_nan_max4.source(x, out, target="cuda")
    assert "RT_INF" in own and "RT_NAN" in own and "__builtin" not in own, own
    jobs, seen = [(K.inf_nan_max4.name, own, "-fwrapv")], set()
    cuda = target_for("cuda")
    for kernel, params, ndim in jit_compiles:
        src = _Translator(kernel, _Sig(params, ndim), cuda).translate()
        options = "-fwrapv" + (" " + kernel.options if kernel.options else "")
        if (src, options) in seen:
            continue
        seen.add((src, options))
        assert "__builtin_inf" not in src and "__builtin_nan" not in src, src
        jobs.append((kernel.name, src, options))
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    env = dict(os.environ, RUNTIME_CUDA_DRIVER_LIB=lib, RUNTIME_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("RUNTIME_CUDA", None)
    r = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "jobs.json")], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    if "no nvrtc" in r.stdout:
        pytest.skip("NVRTC cannot be loaded here")
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert not result["failures"], "\n\n".join(result["failures"])
    print(f"compiled {result['compiled']} JIT-generated sources for cuda (sm_90)")
