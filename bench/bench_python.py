# bench_python.py — the Python package's performance: launch overhead, @runtime.jit compile/cache times, kernel speed vs Numba, Warp (cpu) and numpy.
"""Usage: python bench/bench_python.py [--quick] [--json]

Rows (every figure: median of the runs, [min..max]; contestants alternate run by run so they share the load of
a busy machine; every kernel's output is checked against numpy once per contestant):

  alloc+free, Python/C  µs per pooled runtime.free(runtime.alloc(1 MiB)) (pool + reuse on), and the same rtMalloc +
                        rtFree pair looped in C inside the binding, measured in the same run (issue 11 target: <= 1 µs)
  launch_copy + sync    µs per 4-byte stream.launch_copy + synchronize from Python, and rtMemcpyAsync +
                        rtStreamSynchronize looped in C (issue 11 target: <= 3 µs)

  launch enqueue        µs per stream.launch_kernel of a compiled @runtime.jit kernel (batches of 1000, the
                        synchronize after each batch is not timed); the "C++ launch" row is the raw binding
                        _core.launch_kernel with pre-packed arguments (the C API's cost plus one nanobind call)
  launch python cost    enqueue minus the C++ launch (issue 4 target: <= 5 µs)
  launch + sync, 256    one tiny launch and its completion (peers: a call of the compiled function)
  jit cold              first launch in a fresh process with an empty kernel cache (ms; excludes imports)
  jit warm disk cache   first launch in a fresh process whose kernel cache is filled (ms; excludes imports)
  seed kernel 16M f32   the seed's kernel as written (`if idx < size: output_data[idx] = input_data[idx] * 2`) over
                        16M floats (ms, launch + synchronize, data already in place); Numba: its prange loop,
                        Warp: the same kernel, numpy: np.multiply
  scale 16M f32         out[i] = in[i] * 2 over 16M floats (no bounds test)
  stencil 4096^2 f32    2-D 5-point stencil (interior points) over 4096x4096 floats (ms)
  ..., boundscheck=True  (--only checked) the scale and stencil kernels in checked mode beside the default mode, and
                        the checked / default ratio of the medians: what checked mode costs
  sum 16M f32, local + barrier   a 256-item tree per work-group in a local array (runtime.barrier between
                        levels), passes 16M -> 64K -> 256 -> 1 (ms); @runtime.jit and the same kernel in the C++
                        dialect's group form (rt_items), numpy.sum beside them; the jit/C++ time ratio is printed
  matmul 1024^2 f32, 16x16 local tiles   tiled product through two 16x16 local arrays per group (ms); @runtime.jit
                        (shaped arrays a[y, x]) and the C++ dialect, numpy's BLAS matmul beside them
                        Kernel rows time each contestant in bursts (an untimed call, then 3 timed ones): the
                        steady state of a loop of calls. A single call right after another contestant's would
                        charge it for waking its threads, or for the previous one's threads still spinning
                        (Numba's OpenMP workers spin for a while after each parallel region).

Ratio = ours / the best peer (< 1: we are faster). A peer that cannot be imported is reported as missing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

PEERS = ("numba", "warp", "numpy")
SCALE_N = 16 * 1024 * 1024
STENCIL_N = 4096
C02 = np.float32(0.2)

# ------------------------------------------------------------------------------------------ peers' imports


def _quiet_warp(wp) -> None:
    """No banner or per-module log lines; forward-only kernels (no adjoint code to compile)."""
    wp.config.quiet = True
    wp.config.log_level = 30  # logging.WARNING
    wp.config.enable_backward = False


def _try_import(name: str):
    try:
        if name == "numba":
            import numba
            return numba
        if name == "warp":
            import warp as wp
            _quiet_warp(wp)
            wp.init()
            if "cpu" not in [str(d) for d in wp.get_devices()]:
                return "warp has no cpu device"
            return wp
        if name == "numpy":
            return np
    except Exception as e:  # ImportError, or a broken install
        return f"{type(e).__name__}: {e}"
    return "unknown peer"


# ----------------------------------------------------------------------------------------------- helpers


def _stats(xs: list) -> tuple:
    return statistics.median(xs), min(xs), max(xs)


def _fmt(st, unit: str) -> str:
    if isinstance(st, str):
        return st
    med, lo, hi = st
    p = 3 if med < 10 else (1 if med < 1000 else 0)
    return f"{med:.{p}f} [{lo:.{p}f}..{hi:.{p}f}] {unit}"


def _alternate(runners: dict, reps: int) -> dict:
    """runners: name -> zero-argument callable returning one measurement. Round-robin, rotating the start."""
    out = {k: [] for k in runners}
    names = list(runners)
    for r in range(reps):
        for j in range(len(names)):
            k = names[(r + j) % len(names)]
            out[k].append(runners[k]())
    return out


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def _burst(fn, timed: int = 3) -> list:
    """One untimed call, then `timed` timed ones (ms): the contestant's steady state."""
    fn()
    return [_timed(fn) for _ in range(timed)]


# ------------------------------------------------------------------------------------------------ kernels

def _ours_kernels():
    import runtime

    @runtime.jit
    def scale(out, inp):
        i = runtime.get_global_id()
        out[i] = inp[i] * 2

    @runtime.jit
    def stencil(out, inp, n):
        # One work-item per interior point (launched over (n-2) x (n-2)), like Numba's loops and Warp's kernel.
        x = runtime.get_global_id(0) + 1
        y = runtime.get_global_id(1) + 1
        i = y * n + x
        out[i] = 0.2 * (inp[i] + inp[i - 1] + inp[i + 1] + inp[i - n] + inp[i + n])

    return runtime, scale, stencil


def _numba_kernels(numba):
    from numba import njit, prange

    @njit(parallel=True)
    def scale(out, inp):
        for i in prange(inp.shape[0]):
            out[i] = inp[i] * np.float32(2)

    @njit(parallel=True)
    def stencil(out, a):
        n, m = a.shape
        for i in prange(1, n - 1):
            for j in range(1, m - 1):
                out[i, j] = C02 * (a[i, j] + a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1])

    @njit
    def tiny(out, inp):
        for i in range(inp.shape[0]):
            out[i] = inp[i] * np.float32(2)

    return scale, stencil, tiny


def _warp_kernels(wp):
    @wp.kernel
    def scale(out: wp.array(dtype=wp.float32), inp: wp.array(dtype=wp.float32)):
        i = wp.tid()
        out[i] = inp[i] * 2.0

    @wp.kernel
    def stencil(out: wp.array2d(dtype=wp.float32), a: wp.array2d(dtype=wp.float32)):
        # One thread per interior point (launched over (n-2) x (m-2)).
        i, j = wp.tid()
        i += 1
        j += 1
        out[i, j] = 0.2 * (a[i, j] + a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1])

    return scale, stencil


def _seed_kernels(peers: dict) -> dict:
    """The seed's kernel as its document writes it (a bounds test on `size`), and each peer's own form of it."""
    import runtime
    kernels = {}

    @runtime.jit
    def my_kernel(input_data, output_data, size):
        idx = runtime.get_global_id()
        if idx < size:
            output_data[idx] = input_data[idx] * 2
    kernels["ours"] = my_kernel

    if not isinstance(peers["numba"], str):
        from numba import njit, prange

        @njit(parallel=True)
        def nb_kernel(input_data, output_data, size):
            for idx in prange(size):
                output_data[idx] = input_data[idx] * np.float32(2)
        kernels["numba"] = nb_kernel

    if not isinstance(peers["warp"], str):
        wp = peers["warp"]

        @wp.kernel
        def wp_kernel(input_data: wp.array(dtype=wp.float32), output_data: wp.array(dtype=wp.float32), size: int):
            idx = wp.tid()
            if idx < size:
                output_data[idx] = input_data[idx] * 2.0
        kernels["warp"] = wp_kernel
    return kernels


def _stencil_ref(a: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a)
    out[1:-1, 1:-1] = C02 * (a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
    return out


def _check(name: str, what: str, got: np.ndarray, want: np.ndarray) -> None:
    if not np.allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-6):
        raise AssertionError(f"{name}: wrong {what} result")


# -------------------------------------------------------------------------------------- kernel contestants

def _setup_kernels(peers: dict, which: str, host: np.ndarray) -> dict:
    """name -> zero-argument callable running the kernel once to completion; each is verified first."""
    want = _stencil_ref(host) if which == "stencil" else host * np.float32(2)
    runners: dict = {}

    runtime, k_scale, k_stencil = _ours_kernels()
    seed = _seed_kernels(peers) if which == "seed" else {}
    s = runtime.Stream()
    d_in = runtime.to_device(host.ravel())
    d_out = runtime.empty(host.size, np.float32)
    runtime.memset(d_out, 0)
    if which == "seed":
        def ours():
            s.launch_kernel(seed["ours"], d_in, d_out, host.size)
            s.synchronize()
    elif which == "scale":
        def ours():
            s.launch_kernel(k_scale, d_out, d_in)
            s.synchronize()
    else:
        n = host.shape[0]

        def ours():
            # Rows of work-items: a work-group is a contiguous run of a row (what the cpu backend vectorises).
            s.launch_kernel(k_stencil, d_out, d_in, n, global_size=(n - 2, n - 2), local_size=(min(n - 2, 1024), 1))
            s.synchronize()
    ours()
    _check("ours", which, d_out.numpy(), want)
    runners["ours"] = ours

    if not isinstance(peers["numba"], str):
        nb_scale, nb_stencil, _ = _numba_kernels(peers["numba"])
        o = np.zeros_like(host)
        fn = {"scale": lambda: nb_scale(o, host), "stencil": lambda: nb_stencil(o, host),
              "seed": lambda: seed["numba"](host, o, host.size)}[which]
        fn()
        _check("numba", which, o, want)
        runners["numba"] = fn

    if not isinstance(peers["warp"], str):
        wp = peers["warp"]
        w_scale, w_stencil = _warp_kernels(wp)
        w_in = wp.array(host, dtype=wp.float32, device="cpu")
        w_out = wp.zeros(host.shape, dtype=wp.float32, device="cpu")
        kern = {"scale": w_scale, "stencil": w_stencil, "seed": seed.get("warp")}[which]
        dim = (host.shape[0] - 2, host.shape[1] - 2) if which == "stencil" else host.shape
        inputs = [w_in, w_out, host.size] if which == "seed" else [w_out, w_in]

        def warp_run():
            wp.launch(kern, dim=dim, inputs=inputs, device="cpu")
            wp.synchronize_device("cpu")
        warp_run()
        _check("warp", which, w_out.numpy(), want)
        runners["warp"] = warp_run

    o2 = np.zeros_like(host)
    if which != "stencil":
        def numpy_run():
            np.multiply(host, np.float32(2), out=o2)
    else:
        a = host
        tmp = np.empty_like(a[1:-1, 1:-1])
        inner = o2[1:-1, 1:-1]

        def numpy_run():
            np.add(a[1:-1, 1:-1], a[:-2, 1:-1], out=tmp)
            tmp.__iadd__(a[2:, 1:-1])
            tmp.__iadd__(a[1:-1, :-2])
            tmp.__iadd__(a[1:-1, 2:])
            np.multiply(tmp, C02, out=inner)
    numpy_run()
    _check("numpy", which, o2, want)
    runners["numpy"] = numpy_run
    return runners


def bench_kernels(peers: dict, reps: int) -> dict:
    rows = {}
    rng = np.random.default_rng(1)
    labels = {"seed": "seed kernel 16M f32 (ms)", "scale": "scale 16M f32 (ms)", "stencil": "stencil 4096^2 f32 (ms)"}
    for which, shape in (("seed", (SCALE_N,)), ("scale", (SCALE_N,)), ("stencil", (STENCIL_N, STENCIL_N))):
        host = rng.random(shape, dtype=np.float32)
        runners = _setup_kernels(peers, which, host)
        bursts = _alternate({k: (lambda f=f: _burst(f)) for k, f in runners.items()}, reps)
        times = {k: [t for b in v for t in b] for k, v in bursts.items()}
        label = labels[which]
        rows[label] = {k: _stats(v) for k, v in times.items()}
    return rows


# ------------------------------------------------------------------------------------------- checked mode

def bench_checked(peers: dict, reps: int) -> dict:
    """What checked mode (@runtime.jit(boundscheck=True)) costs: the scale and stencil kernels above, compiled in the
    default mode and checked, alternating run by run on the same buffers (each verified once). The ratio row is
    checked / default (medians)."""
    import runtime
    _, k_scale, k_stencil = _ours_kernels()
    rng = np.random.default_rng(2)
    rows: dict = {}
    s = runtime.Stream()
    for which, shape in (("scale", (SCALE_N,)), ("stencil", (STENCIL_N, STENCIL_N))):
        host = rng.random(shape, dtype=np.float32)
        want = _stencil_ref(host) if which == "stencil" else host * np.float32(2)
        d_in = runtime.to_device(host.ravel())
        d_out = runtime.empty(host.size, np.float32)
        runners = {}
        for mode, check in (("default", False), ("checked", True)):
            k = runtime.jit((k_scale if which == "scale" else k_stencil).fn, boundscheck=check)
            if which == "scale":
                def run(k=k):
                    s.launch_kernel(k, d_out, d_in)
                    s.synchronize()
            else:
                n = shape[0]

                def run(k=k, n=n):
                    s.launch_kernel(k, d_out, d_in, n, global_size=(n - 2, n - 2), local_size=(min(n - 2, 1024), 1))
                    s.synchronize()
            runtime.memset(d_out, 0)
            run()
            _check(mode, which, d_out.numpy(), want)
            runners[mode] = run
        bursts = _alternate({k: (lambda f=f: _burst(f)) for k, f in runners.items()}, reps)
        times = {k: _stats([t for b in v for t in b]) for k, v in bursts.items()}
        label = "scale 16M f32" if which == "scale" else "stencil 4096^2 f32"
        rows[f"{label}, default mode (ms)"] = {"ours": times["default"]}
        rows[f"{label}, boundscheck=True (ms)"] = {"ours": times["checked"]}
        rows[f"{label}, checked / default (x)"] = {"ours": (times["checked"][0] / times["default"][0],) * 3}
    return rows


# ------------------------------------------------------------------------------------------- call overhead

def bench_overhead(peers: dict, reps: int) -> dict:
    """Python call overhead (issue 11) with the C figure of the same operation measured in the same run: a pooled
    runtime.free(runtime.alloc(1 MiB)) pair (the seed's pool + reuse, as runtime-bench-core's alloc_free row) and a
    4-byte launch_copy + synchronize. The C loops run in the binding (_core.bench_*), so no Python is timed there."""
    import runtime
    from runtime import _core
    runtime.enable_pool_allocator(4 << 30, 2 << 20)
    runtime.enable_memory_reuse(True)
    n = 20000
    alloc, free = runtime.alloc, runtime.free

    def py_pair():
        t = time.perf_counter()
        for _ in range(n):
            free(alloc(1 << 20))
        return (time.perf_counter() - t) / n * 1e6

    s = runtime.Stream()
    d = runtime.alloc(4, dtype=np.float32)
    h = np.ones(1, np.float32)
    s.launch_copy(d, h)
    s.synchronize()
    assert d.numpy()[0] == 1.0
    copy, sync = s.launch_copy, s.synchronize
    m = n // 4

    def py_copy():
        t = time.perf_counter()
        for _ in range(m):
            copy(d, h)
            sync()
        return (time.perf_counter() - t) / m * 1e6

    h_ptr = h.ctypes.data
    times = _alternate({"py_pair": py_pair, "c_pair": lambda: _core.bench_malloc_free(1 << 20, n),
                        "py_copy": py_copy,
                        "c_copy": lambda: _core.bench_copy_sync(d.ptr, h_ptr, 4, _core.MEMCPY_HOST_TO_DEVICE,
                                                                s.handle, m)}, reps)
    s.synchronize()
    s.close()
    runtime.free(d)
    runtime.enable_memory_reuse(False)
    runtime.enable_pool_allocator(0, 0)
    return {"alloc+free 1 MiB pooled, Python (us)": {"ours": _stats(times["py_pair"])},
            "alloc+free 1 MiB pooled, C (us)": {"ours": _stats(times["c_pair"])},
            "launch_copy 4 B + synchronize, Python (us)": {"ours": _stats(times["py_copy"])},
            "rtMemcpyAsync 4 B + rtStreamSynchronize, C (us)": {"ours": _stats(times["c_copy"])}}


# ------------------------------------------------------------------------------------------- launch cost

def bench_launch(peers: dict, reps: int) -> dict:
    runtime, k_scale, _ = _ours_kernels()
    from runtime import _core
    s = runtime.Stream()
    n = 256
    host = np.arange(n, dtype=np.float32)
    a = runtime.to_device(host)
    b = runtime.empty(n, np.float32)
    s.launch_kernel(k_scale, b, a)
    s.synchronize()
    assert np.array_equal(b.numpy(), host * 2)
    compiled = k_scale.compiled(b, a)
    # Pre-packed arguments for the raw binding: pointers, then the hidden global size.
    packed = np.array([b.ptr, a.ptr, n], dtype=np.uint64).tobytes()
    func, sizes, h = compiled.func, compiled.sizes, s.handle
    batch = 1000
    launch = s.launch_kernel
    raw = _core.launch_kernel

    def ours():
        t = time.perf_counter()
        for _ in range(batch):
            launch(k_scale, b, a)
        t = time.perf_counter() - t
        s.synchronize()
        return t / batch * 1e6

    def cpp():
        t = time.perf_counter()
        for _ in range(batch):
            raw(func, 1, 1, 1, 256, 1, 1, packed, sizes, h)
        t = time.perf_counter() - t
        s.synchronize()
        return t / batch * 1e6

    times = _alternate({"ours": ours, "cpp": cpp}, reps * 3)
    over = [o - c for o, c in zip(times["ours"], times["cpp"])]
    rows = {"launch enqueue (us)": {"ours": _stats(times["ours"])},
            "C++ launch: raw _core.launch_kernel (us)": {"ours": _stats(times["cpp"])},
            "launch python cost above C++ (us)": {"ours": _stats(over)}}

    # Launch + completion of a tiny kernel; peers: a call of their compiled function on 256 floats.
    def ours_sync():
        t = time.perf_counter()
        for _ in range(100):
            launch(k_scale, b, a)
            s.synchronize()
        return (time.perf_counter() - t) / 100 * 1e6
    runners = {"ours": ours_sync}
    if not isinstance(peers["numba"], str):
        _, _, nb_tiny = _numba_kernels(peers["numba"])
        o = np.empty_like(host)
        nb_tiny(o, host)

        def numba_call():
            t = time.perf_counter()
            for _ in range(100):
                nb_tiny(o, host)
            return (time.perf_counter() - t) / 100 * 1e6
        runners["numba"] = numba_call
    if not isinstance(peers["warp"], str):
        wp = peers["warp"]
        w_scale, _ = _warp_kernels(wp)
        wi = wp.array(host, dtype=wp.float32, device="cpu")
        wo = wp.zeros(n, dtype=wp.float32, device="cpu")
        wp.launch(w_scale, dim=n, inputs=[wo, wi], device="cpu")

        def warp_call():
            t = time.perf_counter()
            for _ in range(100):
                wp.launch(w_scale, dim=n, inputs=[wo, wi], device="cpu")
                wp.synchronize_device("cpu")
            return (time.perf_counter() - t) / 100 * 1e6
        runners["warp"] = warp_call
    o3 = np.empty_like(host)

    def numpy_call():
        t = time.perf_counter()
        for _ in range(100):
            np.multiply(host, np.float32(2), out=o3)
        return (time.perf_counter() - t) / 100 * 1e6
    runners["numpy"] = numpy_call
    times = _alternate(runners, reps * 3)
    rows["launch + sync, 256 floats (us)"] = {k: _stats(v) for k, v in times.items()}
    return rows


# ---------------------------------------------------------------------------- jit compile times (children)

_CHILD_SRC = {
    "ours": '''
import runtime
@runtime.jit
def scale(out, inp):
    i = runtime.get_global_id()
    out[i] = inp[i] * 2
def first(host):
    s = runtime.Stream()
    a = runtime.to_device(host); b = runtime.empty(host.size, host.dtype)
    def go():
        s.launch_kernel(scale, b, a); s.synchronize()
        return b.numpy()
    return go
''',
    "numba": '''
import numpy as np
from numba import njit, prange
@njit(parallel=True, cache=True)
def scale(out, inp):
    for i in prange(inp.shape[0]):
        out[i] = inp[i] * np.float32(2)
def first(host):
    out = np.empty_like(host)
    def go():
        scale(out, host)
        return out
    return go
''',
    "warp": '''
import warp as wp
@wp.kernel
def scale(out: wp.array(dtype=wp.float32), inp: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = inp[i] * 2.0
def first(host):
    a = wp.array(host, dtype=wp.float32, device="cpu"); b = wp.zeros(host.size, dtype=wp.float32, device="cpu")
    def go():
        wp.launch(scale, dim=host.size, inputs=[b, a], device="cpu"); wp.synchronize_device("cpu")
        return b.numpy()
    return go
''',
}


def _child(tool: str, workdir: str) -> None:
    """In a fresh process: import the tool, then time kernel definition + first launch to completion (ms)."""
    host = np.arange(1024, dtype=np.float32)
    if tool == "ours":
        os.environ["RUNTIME_CACHE_DIR"] = os.path.join(workdir, "cache")
        import runtime
        runtime.alloc(4).free()  # initialise the runtime (devices, executors) outside the timing
    elif tool == "numba":
        os.environ["NUMBA_CACHE_DIR"] = os.path.join(workdir, "cache")
        import numba  # noqa: F401
    elif tool == "warp":
        import warp as wp
        _quiet_warp(wp)
        wp.config.kernel_cache_dir = os.path.join(workdir, "cache")
        wp.init()
    sys.path.insert(0, workdir)
    t = time.perf_counter()
    import kern_child  # noqa: E402  (defines the kernel)
    out = kern_child.first(host)()
    ms = (time.perf_counter() - t) * 1e3
    if not np.array_equal(np.asarray(out), host * 2):
        raise SystemExit(f"{tool}: wrong result")
    print(json.dumps({"ms": ms}))


def _run_child(tool: str, workdir: str) -> float:
    env = dict(os.environ)
    env.pop("RUNTIME_JIT_INTERPRET", None)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", tool, workdir], env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise RuntimeError(f"{tool} child failed: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])["ms"]


def bench_jit(peers: dict, reps: int) -> dict:
    tools = ["ours"] + [p for p in ("numba", "warp") if not isinstance(peers[p], str)]
    cold = {t: [] for t in tools}
    warm = {t: [] for t in tools}
    for r in range(reps):
        for j in range(len(tools)):
            tool = tools[(r + j) % len(tools)]
            d = tempfile.mkdtemp(prefix=f"bench_jit_{tool}_")
            try:
                with open(os.path.join(d, "kern_child.py"), "w") as f:
                    f.write(f"# kernel for bench_python.py's {tool} compile-time child\n" + _CHILD_SRC[tool])
                cold[tool].append(_run_child(tool, d))
                shutil.rmtree(os.path.join(d, "__pycache__"), ignore_errors=True)  # not numba's: it uses cache/
                warm[tool].append(_run_child(tool, d))
            finally:
                shutil.rmtree(d, ignore_errors=True)
    return {"jit cold: first launch, empty cache (ms)": {t: _stats(v) for t, v in cold.items()},
            "jit warm disk cache, fresh process (ms)": {t: _stats(v) for t, v in warm.items()}}


# ------------------------------------------------------------------- work-groups: local memory + barriers

GROUP_SUM_N = 16 * 1024 * 1024
MATMUL_N = 1024

# The C++ dialect rows run helper A's kernels of bench/kernels/work_groups.cpp (the ones runtime-bench-core measures
# beside PoCL), launched as docs/kernels.md "Performance" says; the @runtime.jit rows the same algorithms written as
# a Numba-CUDA user writes them (per-item grid-stride accumulation, then a tree in a local array with barriers;
# 16 x 16 tiles) — issue 13 target: jit within 1.2x of the C++ dialect.
GROUP_KERNELS_CPP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels", "work_groups.cpp")
SUM_GROUPS, SUM_ITEMS = 1024, 256


def _group_jit_kernels():
    import runtime

    @runtime.jit
    def sum_groups(x, out, n):
        buf = runtime.local_array(256, np.float32)
        lid = runtime.get_local_id(0)
        acc = np.float32(0)
        for i in range(runtime.get_global_id(0), n, runtime.get_global_size(0)):
            acc += x[i]
        buf[lid] = acc
        runtime.barrier()
        s = runtime.get_local_size(0) // 2
        while s > 0:
            if lid < s:
                buf[lid] += buf[lid + s]
            runtime.barrier()
            s //= 2
        if lid == 0:
            out[runtime.get_group_id(0)] = buf[0]

    @runtime.jit
    def matmul_tiled(a, b, c):
        ta = runtime.local_array((16, 16), np.float32)
        tb = runtime.local_array((16, 16), np.float32)
        tx = runtime.get_local_id(0)
        ty = runtime.get_local_id(1)
        col = runtime.get_global_id(0)
        row = runtime.get_global_id(1)
        acc = np.float32(0)
        for t in range(a.shape[0] // 16):
            ta[ty, tx] = a[row, t * 16 + tx]
            tb[ty, tx] = b[t * 16 + ty, col]
            runtime.barrier()
            for k in range(16):
                acc += ta[ty, k] * tb[k, tx]
            runtime.barrier()
        c[row, col] = acc

    return runtime, sum_groups, matmul_tiled


def bench_groups(peers: dict, reps: int) -> dict:
    """Sum of 16M float32 (per-item grid-stride sums, a 256-item tree per group in local memory, a second pass over
    the 1024 partial sums) and a 1024 x 1024 float32 product with 16 x 16 local tiles: @runtime.jit against
    bench/kernels/work_groups.cpp's C++ dialect kernels (group form), numpy.sum and numpy's matmul (BLAS) beside
    them; every result checked (the two sums bit for bit: each item adds the same elements in the same order)."""
    runtime, j_sum, j_mm = _group_jit_kernels()
    with open(GROUP_KERNELS_CPP) as f:
        mod = runtime.Module(f.read())
    c_sum, c_mm = mod.get_function("sum_groups"), mod.get_function("matmul_tiled")
    rng = np.random.default_rng(2)
    s = runtime.Stream()

    host = rng.random(GROUP_SUM_N, dtype=np.float32)
    d_x = runtime.to_device(host)
    partial, total = runtime.empty(SUM_GROUPS, np.float32), runtime.empty(1, np.float32)

    def summer(k, count):
        def go():  # 1024 groups of 256 -> 1024 partial sums, then one group -> the total
            s.launch_kernel(k, d_x, partial, count(GROUP_SUM_N), global_size=SUM_GROUPS * SUM_ITEMS,
                            local_size=SUM_ITEMS)
            s.launch_kernel(k, partial, total, count(SUM_GROUPS), global_size=SUM_ITEMS, local_size=SUM_ITEMS)
            s.synchronize()
        return go

    want = float(np.sum(host, dtype=np.float64))
    sums = {"jit": summer(j_sum, int), "cpp": summer(c_sum, np.uint32)}
    totals = {}
    for name, fn in sums.items():
        fn()
        got = float(total.numpy()[0])
        if abs(got - want) > 1e-3 * abs(want):
            raise AssertionError(f"{name}: wrong group sum {got} (want {want})")
        totals[name] = got
    if totals["jit"] != totals["cpp"]:
        raise AssertionError(f"the @runtime.jit sum {totals['jit']} is not the C++ kernel's {totals['cpp']} bit for bit")
    sums["numpy"] = lambda: np.sum(host)

    n = MATMUL_N
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    d_a, d_b, d_c = runtime.to_device(a), runtime.to_device(b), runtime.empty((n, n), np.float32)
    want_c = a @ b

    def mm_jit():
        s.launch_kernel(j_mm, d_a, d_b, d_c, global_size=(n, n), local_size=(16, 16))
        s.synchronize()

    def mm_cpp():
        s.launch_kernel(c_mm, d_a, d_b, d_c, np.uint32(n), global_size=(n, n), local_size=(16, 16))
        s.synchronize()

    mms = {"jit": mm_jit, "cpp": mm_cpp}
    for name, fn in mms.items():
        runtime.memset(d_c, 0)
        fn()
        if not np.allclose(d_c.numpy(), want_c, rtol=1e-4, atol=1e-3):
            raise AssertionError(f"{name}: wrong tiled matmul result")
    o = np.empty_like(a)
    mms["numpy"] = lambda: np.matmul(a, b, out=o)

    rows = {}
    for label, runners in (("sum 16M f32, local + barrier", sums), ("matmul 1024^2 f32, 16x16 local tiles", mms)):
        # numpy last in every round and the two kernels swapping places round by round: each follows numpy's run
        # (which slows the next few kernel runs on this machine) equally often, so the ratio compares like with like.
        t = {k: [] for k in runners}
        for r in range(reps):
            for k in (("jit", "cpp") if r % 2 == 0 else ("cpp", "jit")) + ("numpy",):
                t[k] += _burst(runners[k])
        rows[f"{label}, @runtime.jit (ms)"] = {"ours": _stats(t["jit"]), "numpy": _stats(t["numpy"])}
        rows[f"{label}, C++ dialect (ms)"] = {"ours": _stats(t["cpp"]), "numpy": _stats(t["numpy"])}
        ratio = statistics.median(t["jit"]) / statistics.median(t["cpp"])
        print(f"{label}: @runtime.jit / C++ dialect time {ratio:.2f}x (target <= 1.2x): "
              f"{'ok' if ratio <= 1.2 else 'MISSED'}")
    mod.unload()
    return rows


# ------------------------------------------------------------------------------------------------ cuda vs CuPy

def bench_cuda(peers: dict, reps: int) -> dict:
    """out[i] = in[i] * 2 over 256M floats on cuda:0: @runtime.jit against CuPy's cp.multiply(a, 2, out=b) on the same
    GPU, in this process (target: ours at least 0.9x CuPy's throughput). Skipped without a GPU or CuPy."""
    import runtime
    try:
        dev = runtime.device("cuda:0")
    except runtime.Error as e:
        print(f"cuda: skipped ({e})")
        return {}
    try:
        import cupy as cp
    except Exception as e:  # noqa: BLE001 - any import failure means "no peer"
        print(f"cuda: CuPy missing ({e}); measuring the runtime alone")
        cp = None
    n = 256 << 20
    host = np.arange(n, dtype=np.float32) % 1000
    rt_mod, scale, _ = _ours_kernels()
    with dev:
        s = runtime.Stream()
        d_in = runtime.alloc(host.nbytes, dtype=np.float32)
        d_out = runtime.alloc(host.nbytes, dtype=np.float32)
        s.launch_copy(d_in, host)
        s.synchronize()

        def ours():
            s.launch_kernel(scale, d_out, d_in)
            s.synchronize()
        ours()
        _check("ours", "cuda scale", d_out.numpy()[:1 << 20], host[:1 << 20] * 2)
        runners = {"ours": lambda: _timed(ours)}
        if cp is not None:
            a = cp.asarray(host)
            b = cp.empty_like(a)

            def cupy_run():
                cp.multiply(a, 2, out=b)
                cp.cuda.Stream.null.synchronize()
            cupy_run()
            _check("cupy", "cuda scale", cp.asnumpy(b[:1 << 20]), host[:1 << 20] * 2)
            runners["cupy"] = lambda: _timed(cupy_run)
        times = _alternate(runners, max(reps, 5))
    out = {"cuda out=in*2, 256M floats (ms)": {k: _stats(v) for k, v in times.items()}}
    if "cupy" in times:
        ratio = min(times["cupy"]) / min(times["ours"])
        print(f"cuda scale 256M floats: ours/cupy throughput {ratio:.3f}x (target >= 0.9x): "
              f"{'ok' if ratio >= 0.9 else 'MISSED'}")
    return out


# ------------------------------------------------------------------------------------------------- table

def _table(rows: dict, peers: dict) -> str:
    cols = ["ours"] + list(PEERS)
    header = ["metric"] + cols + ["ratio ours/best peer"]
    lines = []
    for metric, cells in rows.items():
        line = [metric]
        for c in cols:
            if c in cells:
                line.append(_fmt(cells[c], ""))
            elif c != "ours" and isinstance(peers.get(c), str):
                line.append("missing")
            else:
                line.append("-")
        best = [cells[p][0] for p in PEERS if p in cells and not isinstance(cells[p], str)]
        line.append(f"{cells['ours'][0] / min(best):.2f}" if best and "ours" in cells else "-")
        lines.append(line)
    widths = [max(len(r[i]) for r in [header] + lines) for i in range(len(header))]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in lines]
    return "\n".join(out)


def main() -> int:
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs (3 per kernel row, 1 per compile row)")
    ap.add_argument("--json", action="store_true", help="also print the rows as JSON")
    ap.add_argument("--only", default="overhead,launch,jit,kernels,groups,checked,cuda",
                    help="comma-separated parts (default: all; groups = local memory + barrier sum and tiled matmul, "
                         "@runtime.jit vs the C++ dialect; checked = the kernels in checked mode (boundscheck=True) "
                         "vs the default mode; cuda = @runtime.jit vs CuPy on cuda:0 when present)")
    args = ap.parse_args()
    os.environ.pop("RUNTIME_JIT_INTERPRET", None)
    peers = {p: _try_import(p) for p in PEERS}
    for p, m in peers.items():
        if isinstance(m, str):
            print(f"peer {p}: missing ({m})")
    import runtime
    props = runtime.get_device_properties()
    ver = {p: getattr(m, "__version__", "?") for p, m in peers.items() if not isinstance(m, str)}
    print(f"device: {props.name} ({props.backend}); cpus: {os.cpu_count()}; peers: {ver}")
    reps = 3 if args.quick else 11
    rows: dict = {}
    parts = {"overhead": bench_overhead, "launch": bench_launch, "jit": bench_jit, "kernels": bench_kernels,
             "groups": bench_groups, "checked": bench_checked, "cuda": bench_cuda}
    for part in [parts[p] for p in args.only.split(",")]:
        try:
            rows.update(part(peers, reps if part is not bench_jit else (1 if args.quick else 3)))
        except Exception:
            traceback.print_exc()
            print(f"{part.__name__}: failed", file=sys.stderr)
            print(_table(rows, peers))
            return 1
    print(_table(rows, peers))
    print("figures: median [min..max]; launch rows in µs, others in ms; ratio < 1: ours is faster")
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
