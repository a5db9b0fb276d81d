"""@runtime.jit kernels with staged outputs on cpu: the twin is generated exactly for outputs written once per item at
consecutive addresses along x and never read, and staged launches compute what the kernel does."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import runtime
from runtime.jit import Target, target_for
import jit_staging_kernels as K

HERE = pathlib.Path(__file__).resolve().parent


def _source(k, *args, global_size=None, target=None):
    return k.source(*args, global_size=global_size, target=target)


def _f32(n=16):
    return runtime.empty(n, np.float32)


def test_elementwise_and_stencil_kernels_get_a_twin():
    src = _source(K.scale, _f32(), _f32())
    assert "#if RT_ROW_STAGING" in src
    assert "struct rt_staging_scale { enum { count = 1, clipped = 0 }; static constexpr unsigned bytes[1] = {4}; };" in src
    assert "void rt_staged_scale(unsigned char* rt_stage, float* out, float* inp" in src
    assert "((float*)(rt_stage + 0 * RT_STAGE_BYTES))[get_local_id(0)] = " in src
    assert "rt_dst[0] = (void*)&out[i];" in src
    src = _source(K.stencil, _f32(), _f32(), 4, global_size=(2, 2))
    # i = y * n + x may be negative (n is an argument): its stores and loads are checked for that (rt_index_)
    assert "void rt_staged_stencil(" in src
    assert 'rt_dst[0] = (void*)&out[rt_index_((long long)(i), 0x7fffffffffffffffLL, "out[i]")];' in src


def test_the_kernel_itself_is_unchanged_and_the_twin_is_cpu_only():
    src = _source(K.scale, _f32(), _f32())
    kernel, twin = src.split("#if RT_ROW_STAGING")
    assert "RT_KERNEL void scale(" in kernel and "out[i] = " in kernel and "rt_stage" not in kernel
    assert twin.rstrip().endswith("#endif")


def test_only_the_cpu_target_consults_the_staging_analysis(monkeypatch):
    """The twin is the cpu target's (runtime/jit/cpu_target.py): for any other target the analysis is not run and
    the source is the kernel alone, the same kernel the cpu target emits before its twin."""
    from runtime.jit import cpu_target
    calls = []
    real = cpu_target.staged_twin
    monkeypatch.setattr(cpu_target, "staged_twin", lambda tr: calls.append(tr.target.backend) or real(tr))
    cuda = _source(K.scale, _f32(), _f32(), target="cuda")
    assert not calls and "rt_stage" not in cuda and "RT_ROW_STAGING" not in cuda
    cpu = _source(K.scale, _f32(), _f32(), target="cpu")
    assert calls == ["cpu"] and "#if RT_ROW_STAGING" in cpu
    assert cpu.split("#if RT_ROW_STAGING")[0] == cuda
    assert _source(K.scale, _f32(), _f32()) == cpu  # the current device (cpu:0) is the default target
    assert type(target_for("cuda")) is Target and type(target_for("cpu")) is cpu_target.CpuTarget


def test_a_target_adds_its_code_after_the_kernel():
    class Stub(Target):
        backend = "stub"

        def extra_code(self, tr):
            return [f"// stub: {tr.k.cname} with {len(tr.params)} parameters"]

    src = _source(K.scale, _f32(), _f32(), target=Stub())
    assert src.rstrip().endswith("// stub: scale with 2 parameters") and "rt_stage" not in src


def test_several_outputs_are_staged_in_parameter_order_with_their_widths():
    src = _source(K.two_outputs, runtime.empty(8, np.float64), runtime.empty(8, np.int8),
                  runtime.empty(8, np.float64), 1)
    assert "struct rt_staging_two_outputs { enum { count = 2, clipped = 0 }; static constexpr unsigned bytes[2] = {8, 1}; };" in src
    assert "((double*)(rt_stage + 0 * RT_STAGE_BYTES))[get_local_id(0)]" in src
    assert "((int8_t*)(rt_stage + 1 * RT_STAGE_BYTES))[get_local_id(0)]" in src
    # i += offset may make i negative: the stores are checked for that (rt_index_)
    assert 'rt_dst[0] = (void*)&wide[rt_index_((long long)(i), 0x7fffffffffffffffLL, "wide[i]")];' in src
    assert 'rt_dst[1] = (void*)&narrow[rt_index_((long long)(i), 0x7fffffffffffffffLL, "narrow[i]")];' in src


def test_a_guard_that_holds_for_the_leading_items_of_a_row_clips_the_rows():
    src = _source(K.seed_kernel, _f32(), _f32(), 16)
    assert "struct rt_staging_seed_kernel { enum { count = 1, clipped = 1 };" in src
    twin = src.split("void rt_staged_seed_kernel(")[1].split("\n}")[0]
    assert "if" not in twin, "the twin runs without the guard"
    assert "rt_items_below_(size, idx, 0)" in src
    src = _source(K.early_exit, _f32(), _f32(), 0, 16)
    assert "clipped = 1" in src and "rt_items_below_(stop, i, 0)" in src
    assert "if (rt_n <= 0) return 0;" in src, "the row evaluates the rest only when its first item passes"


@pytest.mark.parametrize("kernel,args,gs", [
    (K.volume, lambda: (runtime.empty(8, np.int64), 2, 2), (2, 2, 2)),
    (K.transpose_rows, lambda: (_f32(), _f32(), 4), (4, 4)),
    (K.flags, lambda: (runtime.empty(8, np.bool_), _f32(), 0.5), None),
    (K.staged_and_updated, lambda: (_f32(), _f32(), runtime.empty(16, np.int32)), None),
])
def test_more_kernels_that_qualify(kernel, args, gs):
    assert "rt_staged_" in _source(kernel, *args(), global_size=gs)


@pytest.mark.parametrize("kernel,args,gs", [
    (K.branchy, lambda: (_f32(), _f32()), None),                              # not straight-line
    (K.read_back, lambda: (_f32(), _f32()), None),                            # the output is read (+=)
    (K.strided, lambda: (_f32(), _f32()), None),                              # x coefficient 2
    (K.reversed_index, lambda: (_f32(), _f32(), 16), None),                   # x coefficient -1
    (K.narrow_index, lambda: (_f32(), _f32()), None),                         # index through an int32 (may wrap)
    (K.with_atomic, lambda: (_f32(), _f32(), _f32(1)), None),                 # atomics
    (K.stored_twice, lambda: (_f32(), _f32()), None),                         # two stores to one buffer
    (K.gathered_index, lambda: (_f32(), runtime.empty(16, np.int64), _f32()), None),  # index loaded from memory
    (K.column_store, lambda: (_f32(), _f32(), 4), (4, 4)),                    # x strided by n
    (K.looped, lambda: (_f32(), _f32(), 3), None),                            # a loop
    (K.guard_with_else, lambda: (_f32(), _f32(), 16), None),                  # the guard has an else
    (K.guard_on_y, lambda: (_f32(), _f32(), 4, 4), (4, 4)),                   # the guard is not on x
    (K.trailing_guard, lambda: (_f32(), _f32(), 4), None),                    # holds for trailing items
    (K.guard_then_more, lambda: (_f32(), _f32(), 4), None),                   # statements after the guard
    (K.float_guard, lambda: (_f32(), _f32(), 2.5), None),                     # a float bound
    (K.guard_reads_output, lambda: (runtime.empty(16, np.int64), _f32()), None),  # the guard reads the output
])
def test_kernels_that_do_not_qualify_have_no_twin(kernel, args, gs):
    src = _source(kernel, *args(), global_size=gs)
    assert "RT_ROW_STAGING" not in src and "rt_stage" not in src


@pytest.mark.parametrize("threshold", ["0", None])
def test_staged_launches_compute_what_the_kernel_does(threshold, tmp_path):
    # With the threshold at 0 every launch of a kernel with a twin runs the twin and streams its rows; by default
    # (the last-level cache) these small launches run the kernels themselves. Both must match numpy.
    env = dict(os.environ, RUNTIME_CACHE_DIR=str(tmp_path), PYTHONPATH=str(HERE) + os.pathsep +
               os.environ.get("PYTHONPATH", ""))
    env.pop("RUNTIME_CPU_STREAM_MIN_BYTES", None)
    if threshold is not None:
        env["RUNTIME_CPU_STREAM_MIN_BYTES"] = threshold
    r = subprocess.run([sys.executable, str(HERE / "jit_staging_kernels.py")], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "staged kernels: ok" in r.stdout


def test_the_threshold_option_is_checked():
    with pytest.raises(runtime.InvalidValueError, match="cpu.stream_min_bytes"):
        runtime.init(cpu_stream_min_bytes="lots")
