"""bench/bench_python.py runs and checks its kernels (each contestant's output against numpy) with whichever peers are
installed; every kernel row has a positive figure for ours. No timing thresholds: speed is the benchmark's job."""
import json
import os
import subprocess
import sys


def bench_rows(repo, tmp_path, part):
    """Runs `bench_python.py --quick --only <part> --json` with a scratch kernel cache; returns its rows."""
    env = dict(os.environ, RUNTIME_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, str(repo / "bench" / "bench_python.py"), "--quick", "--only", part, "--json"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_kernel_rows_run_and_are_checked(repo, tmp_path):
    rows = bench_rows(repo, tmp_path, "kernels")
    assert set(rows) == {"seed kernel 16M f32 (ms)", "scale 16M f32 (ms)", "stencil 4096^2 f32 (ms)"}
    for label, row in rows.items():
        median, lo, hi = row["ours"]
        assert 0 < lo <= median <= hi, label
        assert "numpy" in row, f"{label}: numpy is always a contestant"


def test_overhead_rows_print_python_and_c_figures(repo, tmp_path):
    rows = bench_rows(repo, tmp_path, "overhead")
    assert set(rows) == {"alloc+free 1 MiB pooled, Python (us)", "alloc+free 1 MiB pooled, C (us)",
                         "launch_copy 4 B + synchronize, Python (us)", "rtMemcpyAsync 4 B + rtStreamSynchronize, C (us)"}
    for label, row in rows.items():
        median, lo, hi = row["ours"]
        assert 0 < lo <= median <= hi, label


def test_group_rows_run_and_are_checked(repo, tmp_path):
    """The local-memory + barrier rows (sum, tiled matmul): @runtime.jit and the C++ dialect, numpy beside them."""
    import runtime
    try:
        runtime.Module("RT_KERNEL void probe(float* x) { RT_LOCAL float t[4]; rt_items(it) { t[0] = 1.0f; } }")
    except runtime.Error:
        import pytest
        pytest.skip("the kernel dialect has no work-group barriers yet (issue 13 item 1)")
    rows = bench_rows(repo, tmp_path, "groups")
    assert set(rows) == {"sum 16M f32, local + barrier, @runtime.jit (ms)", "sum 16M f32, local + barrier, C++ dialect (ms)",
                         "matmul 1024^2 f32, 16x16 local tiles, @runtime.jit (ms)",
                         "matmul 1024^2 f32, 16x16 local tiles, C++ dialect (ms)"}
    for label, row in rows.items():
        median, lo, hi = row["ours"]
        assert 0 < lo <= median <= hi, label
        assert "numpy" in row, label


def test_checked_mode_rows_run_and_are_checked(repo, tmp_path):
    """What checked mode costs: the scale and stencil kernels, default and boundscheck=True, each verified."""
    rows = bench_rows(repo, tmp_path, "checked")
    kernels = ("scale 16M f32", "stencil 4096^2 f32")
    assert set(rows) == {f"{k}, {what}" for k in kernels
                         for what in ("default mode (ms)", "boundscheck=True (ms)", "checked / default (x)")}
    for label, row in rows.items():
        median, lo, hi = row["ours"]
        assert 0 < lo <= median <= hi, label
