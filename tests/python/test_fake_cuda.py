"""The Python package on cuda:0 of the fake CUDA driver (tests/fake_cuda, a test double of libcuda: no GPU).

The driver is chosen when the runtime initialises, so each check runs in a fresh interpreter with
RUNTIME_CUDA_DRIVER_LIB set before `import runtime`. The fake library comes from the C++ build
(build/tests/fake_cuda/libfake_cuda.so, which scripts/test.sh builds first) or $RUNTIME_FAKE_CUDA_LIB."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def _fake_lib():
    p = os.environ.get("RUNTIME_FAKE_CUDA_LIB") or str(REPO / "build" / "tests" / "fake_cuda" / "libfake_cuda.so")
    return p if os.path.isfile(p) else None


PRELUDE = """
import numpy as np
import runtime
dev = runtime.device("cuda:0")
assert dev.backend == "cuda", dev.backend
assert "Fake CUDA Device (test double)" in dev.properties.name, dev.properties.name
"""

CHECKS = {
    "alloc_copy_free": """
        with dev:
            a = np.arange(4096, dtype=np.float32)
            mem = runtime.alloc(a.nbytes)
            assert mem.device == dev
            s = runtime.Stream()
            s.launch_copy(mem, a)
            back = np.zeros_like(a)
            s.launch_copy(back, mem)
            s.synchronize()
            np.testing.assert_array_equal(back, a)
            runtime.free(mem)
            s.close()
    """,
    "cuda_array_interface": """
        with dev:
            mem = runtime.alloc(64 * 4, dtype=np.float32)
            cai = mem.__cuda_array_interface__
            assert cai["version"] == 3, cai
            assert cai["shape"] == (64,) and cai["typestr"] == "<f4", cai
            assert cai["data"] == (mem.ptr, False), cai
            assert mem.ptr != 0
            runtime.free(mem)
    """,
    "dlpack_device": """
        with dev:
            mem = runtime.alloc(256, dtype=np.float32)
            assert mem.__dlpack_device__() == (2, 0), mem.__dlpack_device__()  # kDLCUDA, ordinal 0
            runtime.free(mem)
    """,
    "stream_event": """
        with dev:
            a = np.arange(1 << 16, dtype=np.float32)
            mem = runtime.alloc(a.nbytes)
            s1, s2 = runtime.Stream(), runtime.Stream()
            start, e = runtime.Event(enable_timing=True), runtime.Event(enable_timing=True)
            s1.record(start)
            s1.launch_copy(mem, a)
            s1.record(e)
            s2.wait(e)
            back = np.zeros_like(a)
            s2.launch_copy(back, mem)
            s2.synchronize()
            assert e.query()
            assert start.elapsed_time(e) >= 0.0
            np.testing.assert_array_equal(back, a)
            runtime.free(mem)
            s1.close()
            s2.close()
    """,
}


JIT_CHECK = """
import sys
import numpy as np
import runtime
import jit_staging_kernels as K
dev = runtime.device("cuda:0")
assert dev.backend == "cuda", dev.backend
with dev:
    a, b = runtime.empty(16, np.float32), runtime.empty(16, np.float32)
    src = K.scale.source(a, b)
    assert "rt_stage" not in src and "RT_ROW_STAGING" not in src and "RT_ITEMS_BOUNDED" not in src, src
    assert "runtime.jit.cpu_target" not in sys.modules  # the cpu target's staging is not even loaded
    try:
        K.scale.compiled(a, b)  # NVRTC compiles the kernel alone (the fake driver loads it)
    except runtime.Error as e:
        if "cannot compile for cuda" not in str(e):
            raise
        print("no nvrtc")
print("ok")
"""


def test_jit_source_for_cuda_has_no_staged_twin(tmp_path):
    """On a cuda device the generated source is the kernel alone: no twin, no bounds macro, no cpu analysis."""
    lib = _fake_lib()
    if lib is None:
        pytest.skip("the fake CUDA driver is not built (build/tests/fake_cuda/libfake_cuda.so; set RUNTIME_FAKE_CUDA_LIB)")
    here = str(pathlib.Path(__file__).resolve().parent)
    env = dict(os.environ, RUNTIME_CUDA_DRIVER_LIB=lib, RUNTIME_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    env.pop("RUNTIME_CUDA", None)
    r = subprocess.run([sys.executable, "-c", JIT_CHECK], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_fake_cuda(check, tmp_path):
    lib = _fake_lib()
    if lib is None:
        pytest.skip("the fake CUDA driver is not built (build/tests/fake_cuda/libfake_cuda.so; set RUNTIME_FAKE_CUDA_LIB)")
    env = dict(os.environ, RUNTIME_CUDA_DRIVER_LIB=lib, RUNTIME_CACHE_DIR=str(tmp_path))
    env.pop("RUNTIME_CUDA", None)
    code = PRELUDE + textwrap.dedent(CHECKS[check])
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
