"""RUNTIME_LOG: what each level and subsystem prints from a real program (a child process: the library reads the
variable when it loads), that nothing but real warnings is printed by default, and the one warning of a bad spec."""
import os
import re
import subprocess
import sys

import pytest

LINE = re.compile(r"^\[runtime \d\d:\d\d:\d\d\.\d{6} tid (\d+) (core|backend|kernels|memory|graph|dvpp|comm) "
                  r"(error|warn|info|debug)\] (.*)$")

# Compiles one kernel (a fresh cache, unless the test reuses it), loads the same source again (the in-process cache),
# then a pool with reuse: an allocation grows it, its free leaves the block cached, empty_cache trims it.
PROGRAM = r"""
import numpy as np
import runtime
SRC = "RT_KERNEL void add_one(float* x) { x[get_global_id(0)] += 1.0f; }"
m = runtime.Module(SRC)
runtime.Module(SRC)
runtime.enable_pool_allocator(pool_size=64 << 20, block_size=1 << 20)
runtime.enable_memory_reuse(True)
p = runtime.alloc(3 << 20)
runtime.free(p)
runtime.synchronize()
runtime.empty_cache()
print("done")
"""


def run(tmp_path, log=None, cache=None, program=PROGRAM, **env_extra):
    env = {k: v for k, v in os.environ.items() if k not in ("RUNTIME_LOG", "RUNTIME_BACKEND")}
    env["RUNTIME_CACHE_DIR"] = str(cache or tmp_path / "cache")
    if log is not None:
        env["RUNTIME_LOG"] = log
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("done"), r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("[runtime ")]
    parsed = []
    for line in lines:
        m = LINE.match(line)
        assert m, f"not a log line: {line!r}"
        parsed.append((m.group(2), m.group(3), m.group(4), int(m.group(1))))
    return parsed


def messages(lines, subsystem=None, level=None):
    return [msg for s, lv, msg, _ in lines if (subsystem is None or s == subsystem) and (level is None or lv == level)]


def test_default_prints_nothing(tmp_path):
    assert run(tmp_path) == []
    assert run(tmp_path, log="") == []
    assert run(tmp_path, log="warn") == []


def test_kernels_info_shows_compiles_then_disk_cache_hits(tmp_path):
    first = run(tmp_path, log="kernels=info")
    assert {(s, lv) for s, lv, _, _ in first} == {("kernels", "info")}, first
    compiled = [m for m in messages(first) if m.startswith("compiled module 'kernel_source' (kernels: add_one; ")]
    assert len(compiled) == 1, first
    assert re.search(r" for \w+ in \d+\.\d{3} s: .*cache", compiled[0]), compiled[0]
    assert not any("disk cache hit" in m for m in messages(first))
    chosen = [m for m in messages(first) if m.startswith("cpu kernels are compiled by '")]
    assert len(chosen) == 1 and chosen[0].endswith("(the first of clang++, c++, g++ on PATH)"), first
    # The same source in another process: from the disk cache, nothing compiled.
    second = run(tmp_path, log="kernels=info")
    assert [m for m in messages(second) if m.startswith("disk cache hit: module 'kernel_source' (kernels: add_one)")]
    assert not any(m.startswith("compiled module") for m in messages(second))


def test_kernels_debug_shows_the_compiler_and_memory_hits(tmp_path):
    lines = run(tmp_path, log="kernels=debug")
    debug = messages(lines, "kernels", "debug")
    runs = [m for m in debug if m.startswith("running the compiler: ")]
    if not runs:  # the cuda backend first (RUNTIME_BACKEND is cleared: cpu is device 0)
        pytest.fail(f"no compiler line: {lines}")
    assert " -o " in runs[0] and ".cpp" in runs[0]
    hits = [m for m in debug if m.startswith("memory cache hit: a kernel source of ")]
    assert len(hits) == 1, debug  # the second runtime.Module(SRC)
    assert messages(lines, "memory") == [] and messages(lines, "backend") == []


def test_memory_info_shows_the_pool_and_its_trim(tmp_path):
    lines = run(tmp_path, log="memory=info")
    info = messages(lines, "memory", "info")
    assert any(re.fullmatch(r"pool on cpu:0: 67108864 bytes in blocks of 1048576, .*", m) for m in info), info
    trims = [m for m in info if m.startswith("pool on cpu:0 trimmed: ")]
    assert trims and re.match(r"pool on cpu:0 trimmed: (\d+) bytes", trims[-1]), info
    assert int(re.match(r"pool on cpu:0 trimmed: (\d+) bytes", trims[-1]).group(1)) == 3 << 20
    assert not messages(lines, "memory", "debug") and not messages(lines, "kernels")
    debug = messages(run(tmp_path, log="memory=debug"), "memory", "debug")
    assert any(m.startswith("pool on cpu:0 grew: 3145728 bytes committed") for m in debug), debug


def test_backend_info_says_which_backends_have_devices_and_why_not(tmp_path):
    lines = run(tmp_path, log="backend=info", RUNTIME_CUDA_DRIVER_LIB=str(tmp_path / "no-libcuda.so"))
    info = messages(lines, "backend", "info")
    assert any(re.fullmatch(r"backend cpu: \d+ device\(s\)", m) for m in info), info
    cuda = [m for m in info if m.startswith("backend cuda: ")]
    assert len(cuda) == 1, info
    if "not built" not in cuda[0]:
        assert cuda[0].startswith("backend cuda: no devices: the CUDA driver library '")
        assert "cannot be loaded" in cuda[0]
        assert any(m.startswith("cuda driver: not available: ") for m in info), info
    debug = messages(run(tmp_path, log="backend=debug", RUNTIME_CUDA_DRIVER_LIB=str(tmp_path / "no-libcuda.so")),
                     "backend", "debug")
    if "not built" not in cuda[0]:
        assert f"cuda driver: trying '{tmp_path / 'no-libcuda.so'}'" in debug


def test_a_bad_spec_prints_one_warning_and_keeps_the_default(tmp_path):
    lines = run(tmp_path, log="warn,kernels=loud")
    assert len(lines) == 1, lines
    s, lv, msg, _ = lines[0]
    assert (s, lv) == ("core", "warn")
    assert msg.startswith("RUNTIME_LOG='warn,kernels=loud' is not understood (item 'kernels=loud': 'loud' is not a "
                          "level): ignored; expected LEVEL or SUBSYSTEM=LEVEL items")
    assert "error, warn, info, debug" in msg and "core, backend, kernels, memory, graph, dvpp" in msg
    lines = run(tmp_path, log="kernel=info")
    assert len(lines) == 1 and "'kernel' is not a subsystem" in lines[0][2]


def test_real_warnings_print_by_default_and_error_hides_them(tmp_path):
    shared = tmp_path / "shared-cache"
    shared.mkdir()
    os.chmod(shared, 0o777)  # writable by others: never used, and the runtime says so
    lines = run(tmp_path, cache=shared)
    assert [(s, lv) for s, lv, _, _ in lines] == [("kernels", "warn")], lines
    assert lines[0][2].startswith(f"kernel cache directory '{shared}' is writable by group or others: not used")
    assert run(tmp_path, log="error", cache=shared) == []


def test_the_tid_is_the_threads(tmp_path):
    program = "import threading, runtime\nprint(threading.get_native_id())\n" + PROGRAM
    env = {k: v for k, v in os.environ.items() if k not in ("RUNTIME_LOG", "RUNTIME_BACKEND")}
    env.update(RUNTIME_CACHE_DIR=str(tmp_path / "cache"), RUNTIME_LOG="kernels=info")
    r = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    main_tid = int(r.stdout.split()[0])
    tids = {int(LINE.match(line).group(1)) for line in r.stderr.splitlines() if line.startswith("[runtime ")}
    assert tids == {main_tid}  # the compile runs on the calling thread


# A graph captured, instantiated and launched (so the graph subsystem speaks), and DVPP decodes on the cpu device.
GRAPH_PROGRAM = r"""
import numpy as np
import runtime
add_one = runtime.Module("RT_KERNEL void add_one(float* x) { x[get_global_id(0)] += 1.0f; }").get_function("add_one")
d = runtime.to_device(np.zeros(64, np.float32))
s = runtime.Stream()
with s.capture() as g:
    s.launch_kernel(add_one, d)
    s.launch_kernel(add_one, d)
exe = g.instantiate()
exe.launch(s)
s.synchronize()
print("done")
"""


def test_graph_info_says_how_an_instantiated_graph_runs(tmp_path):
    lines = run(tmp_path, log="graph=info", program=GRAPH_PROGRAM)
    info = messages(lines, "graph", "info")
    assert len(info) == 1, lines
    assert re.fullmatch(r"rtGraphInstantiate: 2 nodes \(2 kernels\) on cpu:0, arena 0 bytes: lowered by the backend "
                        r"\(one operation per launch\)", info[0]), info
    assert {s for s, _, _, _ in lines} == {"graph"}
    replayed = messages(run(tmp_path, log="graph=info", program=GRAPH_PROGRAM, RUNTIME_GRAPH_LOWERING="0"), "graph")
    assert replayed == ["rtGraphInstantiate: 2 nodes (2 kernels) on cpu:0, arena 0 bytes: replayed node by node by "
                        "the core (RUNTIME_GRAPH_LOWERING=0)"], replayed
    assert run(tmp_path, log="graph=warn", program=GRAPH_PROGRAM) == []


DVPP_PROGRAM = r"""
import numpy as np
import runtime
from runtime import dvpp
y, x = np.mgrid[0:48, 0:64]
image = np.stack([x * 4, y * 5, (x + y) * 2], axis=-1).astype(np.uint8)
jpeg = dvpp.encode_jpeg(runtime.to_device(image))
dvpp.decode_jpeg(jpeg, format="rgb")
dvpp.decode_jpeg(jpeg, format="nv12")
dvpp.decode_jpeg(jpeg, format="i420")
runtime.synchronize()
print("done")
"""


def test_dvpp_debug_says_which_way_each_image_is_decoded(tmp_path):
    lines = run(tmp_path, log="dvpp=debug", program=DVPP_PROGRAM)
    assert {(s, lv) for s, lv, _, _ in lines} == {("dvpp", "debug")}, lines
    m = messages(lines, "dvpp", "debug")
    # encode_jpeg writes 4:2:0 JPEGs: kept as native planes for I420, resampled (interleaved) for NV12.
    assert m == [
        "rtDvppDecodeJpeg: image 0: a 4:2:0 YCbCr JPEG of 64 x 48, by TurboJPEG's own conversion, into 64 x 48 "
        "RGB888 in place",
        "rtDvppDecodeJpeg: image 0: a 4:2:0 YCbCr JPEG of 64 x 48, native planes resampled into 4:2:0, into 64 x 48 "
        "YUV420SP_NV12 in place",
        "rtDvppDecodeJpeg: image 0: a 4:2:0 YCbCr JPEG of 64 x 48, straight into the picture's planes, into 64 x 48 "
        "YUV420P in place",
    ], m
    assert run(tmp_path, log="dvpp=info", program=DVPP_PROGRAM) == []


def test_a_trace_that_cannot_be_written_is_one_core_warning(tmp_path):
    bad = tmp_path / "no-such-dir" / "trace.json"
    program = "import runtime\nruntime.synchronize()\nprint('done')\n"
    lines = run(tmp_path, program=program, RUNTIME_TRACE=str(bad))
    assert len(lines) == 1, lines
    s, lv, msg, _ = lines[0]
    assert (s, lv) == ("core", "warn")
    assert msg.startswith(f"RUNTIME_TRACE={bad}: cannot create the trace file '{bad}': No such file or directory")
    assert msg.endswith("; the program runs without a trace")
    assert run(tmp_path, log="error", program=program, RUNTIME_TRACE=str(bad)) == []
