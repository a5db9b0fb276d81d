"""runtime-prof: the summary of synthetic traces with known answers (closed, left open, cut short), refusals of bad
input, --plot's PNG, and the trace of the seed's pipelining pattern written by the runtime itself."""
import contextlib
import io
import json
import os
import pathlib
import re
import struct
import subprocess
import sys

import pytest

from runtime import prof

PID = 4242
HOST = 1000000 + 77


def meta(tid, name, sort=None):
    out = [{"ph": "M", "name": "thread_name", "pid": PID, "tid": tid, "args": {"name": name}}]
    if sort is not None:
        out.append({"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": tid, "args": {"sort_index": sort}})
    return out


def span(tid, cat, name, ts, dur, op=0, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur,
            "args": {"op": op, "queued_us": 1.0, "status": "ok", **args}}


def write_trace(path, events, close=True, tail=""):
    """Writes `events` as the runtime does: '[', one event per line, the separator before each but the first, and
    '\\n]' when closed; `tail` is appended as it is (a cut-short line)."""
    text = "[\n" + "\n,".join(json.dumps(e) for e in events)
    if close:
        text += "\n]"
    text += tail
    pathlib.Path(path).write_text(text)
    return str(path)


# Two devices; cpu:0 has a kernel stream and a copy stream, cpu:1 a copy and a graph launch with two node spans.
# Times in µs. Known answers are in test_summary_known_answers.
EVENTS = (
    [{"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": f"runtime {PID}"}}]
    + meta(1, "cpu:0 stream 0", 0) + meta(2, "cpu:0 stream 1", 1) + meta(3, "cpu:1 stream 2", 100002)
    + meta(4, "cpu:0 stream 5", 5) + meta(HOST, "host thread 77")
    + [
        span(1, "kernel", "k1", 0.0, 100.0, 1, grid=[4, 1, 1], block=[256, 1, 1], shared=0),
        span(1, "kernel", "k1", 150.0, 100.0, 2, grid=[4, 1, 1], block=[256, 1, 1], shared=0),
        span(1, "event", "event wait", 260.0, 5.0, 3, event=9),
        span(1, "kernel", "k2", 300.0, 30.0, 4, grid=[1, 1, 1], block=[32, 1, 1], shared=0),
        span(2, "copy", "memcpy HtoD", 50.0, 150.0, 1, bytes=4096, direction="HtoD"),
        span(2, "copy", "memcpy DtoH", 240.0, 20.0, 2, bytes=4096, direction="DtoH"),
        span(2, "event", "event record", 262.0, 1.0, 3, event=9),
        span(2, "fill", "memset", 400.0, 10.0, 4, bytes=64),
        span(3, "copy", "memcpy HtoD", 0.0, 10.0, 1, bytes=64, direction="HtoD"),
        span(3, "graph", "graph launch", 20.0, 100.0, 2, graph=1, nodes=3),
        span(3, "graph_node", "k1", 30.0, 50.0, 2, node=0, type="kernel"),
        span(3, "graph_node", "node 1 (memcpy)", 80.0, 20.0, 2, node=1, type="memcpy"),
        {"ph": "s", "cat": "event", "name": "event", "id": 1, "pid": PID, "tid": 2, "ts": 262.5},
        {"ph": "f", "bp": "e", "cat": "event", "name": "event", "id": 1, "pid": PID, "tid": 1, "ts": 262.0},
        {"ph": "X", "cat": "api", "name": "rtLaunchKernel", "pid": PID, "tid": HOST, "ts": -5.0, "dur": 2.0,
         "args": {}},
        {"ph": "C", "name": "memory cpu:0", "pid": PID, "ts": 1.0, "args": {"allocated": 4096, "reserved": 8192}},
        {"ph": "C", "name": "memory cpu:0", "pid": PID, "ts": 2.0, "args": {"allocated": 12288, "reserved": 16384}},
        {"ph": "C", "name": "memory cpu:0", "pid": PID, "ts": 3.0, "args": {"allocated": 0, "reserved": 16384}},
        span(2, "fill", "memset", 500.0, 10.0, 5, bytes=64) | {"args": {"op": 5, "queued_us": 0, "status": "failed"}},
    ]
)


def run_prof_process(*args):
    """`python -m runtime.prof ARGS` in a new interpreter: the command line as users run it."""
    return subprocess.run([sys.executable, "-m", "runtime.prof", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def run_prof(*args):
    """runtime-prof's main with ARGS in this process (what run_prof_process runs, without starting an interpreter
    each time): its exit status (argparse's refusals exit), stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = prof.main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def summary_of(path):
    r = run_prof(path, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def by(rows, key):
    return {r[key]: r for r in rows}


def test_summary_known_answers(tmp_path):
    s = summary_of(write_trace(tmp_path / "t.json", EVENTS))
    assert s["terminated"] is True and s["cut_event"] is False
    # The trace's span: from the api call at -5 µs to the failed memset's end at 510 µs.
    assert s["span_us"] == {"start": -5.0, "end": 510.0, "duration": 515.0}
    assert s["operations_span_us"] == {"start": 0.0, "end": 510.0, "duration": 510.0}  # api calls left out
    assert s["operations"] == 11  # stream operations; graph node spans are part of their launch, api calls no ops

    k = by(s["kernels"], "name")
    assert set(k) == {"k1", "k2"}
    # k1: two launches of 100 µs and the graph's kernel node of 50 µs.
    assert k["k1"]["count"] == 3 and k["k1"]["total_us"] == pytest.approx(250.0)
    assert k["k1"]["mean_us"] == pytest.approx(250.0 / 3)
    assert (k["k1"]["min_us"], k["k1"]["max_us"]) == (50.0, 100.0)
    assert k["k2"] == {"name": "k2", "count": 1, "total_us": 30.0, "mean_us": 30.0, "min_us": 30.0, "max_us": 30.0}
    assert [r["name"] for r in s["kernels"]] == ["k1", "k2"]  # by total time, largest first

    st = by(s["streams"], "name")
    assert list(st) == ["cpu:0 stream 0", "cpu:0 stream 1", "cpu:0 stream 5", "cpu:1 stream 2"]  # sort index order
    assert st["cpu:0 stream 0"]["busy_us"] == pytest.approx(100 + 100 + 5 + 30)
    assert st["cpu:0 stream 0"]["operations"] == 4
    assert st["cpu:0 stream 1"]["busy_us"] == pytest.approx(150 + 20 + 1 + 10 + 10)
    # cpu:1: the copy and the graph launch; the node spans lie inside the launch and add nothing.
    assert st["cpu:1 stream 2"]["busy_us"] == pytest.approx(10 + 100)
    assert st["cpu:1 stream 2"]["operations"] == 2
    assert st["cpu:0 stream 5"]["busy_us"] == 0 and st["cpu:0 stream 5"]["operations"] == 0  # named, ran nothing
    assert st["cpu:0 stream 0"]["busy_fraction"] == pytest.approx(235 / 510)  # of the operations' span
    assert all(r["device"] == r["name"].split()[0] for r in s["streams"])
    assert "host thread 77" not in st

    ov = by(s["overlap"], "device")
    # cpu:0: copies [50,200] [240,260] (170 µs) against kernels [0,100] [150,250] [300,330]: 50 + 50 + 10 µs at once.
    assert ov["cpu:0"]["copy_us"] == pytest.approx(170.0)
    assert ov["cpu:0"]["kernel_us"] == pytest.approx(230.0)
    assert ov["cpu:0"]["overlap_us"] == pytest.approx(110.0)
    assert ov["cpu:0"]["overlap_fraction"] == pytest.approx(110 / 170)
    # cpu:1: the copy [0,10] and the memcpy node [80,100] against the kernel node [30,80]: they only touch.
    assert ov["cpu:1"]["copy_us"] == pytest.approx(30.0) and ov["cpu:1"]["kernel_us"] == pytest.approx(50.0)
    assert ov["cpu:1"]["overlap_us"] == 0 and ov["cpu:1"]["overlap_fraction"] == 0

    cats = by(s["categories"], "category")
    assert [r["category"] for r in s["categories"]] == ["kernel", "copy", "fill", "event", "graph"]
    assert (cats["kernel"]["count"], cats["kernel"]["total_us"]) == (3, 230.0)
    assert (cats["copy"]["count"], cats["copy"]["total_us"]) == (3, 180.0)
    assert (cats["fill"]["count"], cats["graph"]["count"], cats["event"]["count"]) == (2, 1, 2)
    assert s["flows"] == 1
    assert s["memory"] == [{"device": "cpu:0", "peak_allocated": 12288, "peak_reserved": 16384}]
    assert s["not_ok"] == {"failed": 1}


def test_text_summary(tmp_path):
    r = run_prof(write_trace(tmp_path / "t.json", EVENTS))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == (f"trace {tmp_path / 't.json'}: 11 operations on 4 streams, span 0.515 ms (-0.005 .. 0.510 ms), "
                        "operations 0.510 ms (0.000 .. 0.510 ms)")

    def row(first):  # the cells of the table row whose first cell is `first` (cells are 2+ blanks apart)
        hits = [cells for cells in (re.split(r"\s{2,}", line.strip()) for line in lines) if cells[0] == first]
        assert hits, (first, r.stdout)
        return hits[0]  # the first table that has one

    assert row("k1")[1:] == ["3", "0.250", "83.333", "50.000", "100.000"]
    assert row("cpu:1 stream 2")[1:] == ["2", "0.110", "21.6"]
    assert row("cpu:0")[1:] == ["0.170", "0.230", "0.110", "64.7"]  # the overlap table
    assert [c for c in (re.split(r"\s{2,}", line.strip()) for line in lines) if c[0] == "cpu:0"][1][1:] == \
        ["12288", "16384"]  # the memory table
    assert "not ok: 1 failed" in r.stdout
    assert "not closed" not in r.stdout


def test_open_array_reads_the_same(tmp_path):
    closed = summary_of(write_trace(tmp_path / "closed.json", EVENTS))
    left_open = summary_of(write_trace(tmp_path / "open.json", EVENTS, close=False))
    assert left_open["terminated"] is False and left_open["cut_event"] is False
    for key in ("span_us", "operations_span_us", "kernels", "streams", "overlap", "categories", "memory", "flows"):
        assert left_open[key] == closed[key], key
    assert "not closed" in run_prof(tmp_path / "open.json").stdout


def test_cut_short_last_line_is_left_out(tmp_path):
    # A program killed in the middle of a write: the last line is half an event (a third k2 launch).
    cut = json.dumps(span(1, "kernel", "k2", 600.0, 30.0, 9))[:40]
    s = summary_of(write_trace(tmp_path / "cut.json", EVENTS, close=False, tail="\n," + cut))
    assert s["terminated"] is False and s["cut_event"] is True
    assert by(s["kernels"], "name")["k2"]["count"] == 1
    assert s["span_us"]["end"] == 510.0


def test_object_form_and_empty_trace(tmp_path):
    p = tmp_path / "obj.json"
    p.write_text(json.dumps({"traceEvents": EVENTS}))
    assert summary_of(p)["kernels"] == summary_of(write_trace(tmp_path / "t.json", EVENTS))["kernels"]
    # Only a process name: nothing ran; every figure is empty or zero, not an error.
    s = summary_of(write_trace(tmp_path / "empty.json", EVENTS[:1]))
    assert s["operations"] == 0 and s["kernels"] == [] and s["streams"] == [] and s["span_us"]["duration"] == 0


@pytest.mark.parametrize("text, words", [
    ("", "is empty"),
    ("{\"a\": 1}", "is JSON but not a trace"),
    ("hello", "does not start with '['"),
    ("[\n{\"ph\":\"X\"}\n,garbage\n,{\"ph\":\"M\"}", "line 3: not a JSON event"),
    ("[1, 2]", "event 0 is int (expected an object)"),
    ('[{"ph":"X","cat":"kernel","name":"k","ts":1}]', "event 0 (X 'k'): 'dur' is None (expected a finite number >= 0)"),
    ('[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":-2}]', "'dur' is -2"),
    ('[{"ph":"X","cat":"kernel","name":"k","ts":"1","dur":2}]', "'ts' is '1' (expected a finite number)"),
    ('[{"ph":"C","name":"memory cpu:0","ts":true}]', "'ts' is True"),
    ('[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"tid":[1]}]', "'tid' is [1] (expected an integer)"),
    ('[{"ph":"s","name":"event","ts":1,"id":{"a":1}}]', "'id' is {'a': 1}"),
])
def test_bad_input_is_refused_naming_why(tmp_path, text, words):
    p = tmp_path / "bad.json"
    p.write_text(text)
    r = run_prof(p)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("runtime-prof: ") and words in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_unreadable_files_are_refused(tmp_path):
    r = run_prof(tmp_path / "missing.json")
    assert r.returncode == 2 and f"cannot read '{tmp_path / 'missing.json'}': No such file" in r.stderr
    r = run_prof(tmp_path)
    assert r.returncode == 2 and "cannot read" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "bin.json").write_bytes(b"[\xff\xfe")
    r = run_prof(tmp_path / "bin.json")
    assert r.returncode == 2 and "is not UTF-8 text" in r.stderr


def test_usage_errors(tmp_path):
    t = write_trace(tmp_path / "t.json", EVENTS)
    r = run_prof(t, "--flows")
    assert r.returncode == 2 and "--flows is an option of the plot: it needs --plot" in r.stderr
    r = run_prof(t, "--window", "1:2")
    assert r.returncode == 2 and "--window is an option of the plot: it needs --plot" in r.stderr
    for bad in ("2:1", "1", "a:b", "1:2:3", "nan:1", "1:1"):
        r = run_prof(t, "--plot", tmp_path / "w.png", "--window", bad)
        assert r.returncode == 2 and f"--window '{bad}' is not START:END in ms with START < END" in r.stderr, bad
    assert not (tmp_path / "w.png").exists()
    r = run_prof_process()
    assert r.returncode == 2 and "the following arguments are required: trace" in r.stderr
    r = run_prof(t, "--plot", tmp_path / "no" / "such" / "dir.png")
    assert r.returncode == 2 and "cannot write the plot" in r.stderr and "Traceback" not in r.stderr
    r = run_prof(write_trace(tmp_path / "empty.json", EVENTS[:1]), "--plot", tmp_path / "e.png")
    assert r.returncode == 2 and "has no stream tracks to draw" in r.stderr


def png_size(path):
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("extra", [[], ["--flows"], ["--window", "0.1:0.3", "--flows"]])
def test_plot_writes_a_png(tmp_path, extra):
    pytest.importorskip("matplotlib")
    out = tmp_path / "timeline.png"
    r = run_prof(write_trace(tmp_path / "t.json", EVENTS), "--plot", out, *extra)
    assert r.returncode == 0, r.stderr
    assert f"timeline: {out}" in r.stdout
    width, height = png_size(out)
    # 12 inches at 120 dpi; the height grows with the four stream lanes (the host thread has none).
    assert width == 1440 and height == int(round((1.2 + 0.55 * 4) * 120))


def test_union_and_intersection():
    assert prof.union([(5, 6), (0, 2), (1, 3), (3, 4)]) == [(0, 4), (5, 6)]
    assert prof.length(prof.union([])) == 0
    assert prof.intersection([(0, 4), (5, 6)], [(2, 5.5)]) == [(2, 4), (5, 5.5)]
    assert prof.intersection([(0, 1)], [(1, 2)]) == []


# ---------------------------------------------------------------- a trace the runtime writes

PIPELINE = r"""
import numpy as np
import runtime

@runtime.jit
def kernel1(data):
    i = runtime.get_global_id()
    data[i] = data[i] + 1.0

data1 = runtime.to_device(np.zeros(1 << 16, dtype=np.float32))
host_data = np.random.rand(1 << 16).astype(np.float32)
device_data = runtime.alloc(host_data.nbytes)
stream1 = runtime.Stream()
stream2 = runtime.Stream()
for _ in range(3):
    stream1.launch_kernel(kernel1, data1)
    stream2.launch_copy(device_data, host_data, direction="H2D")
stream1.synchronize()
stream2.synchronize()
assert (data1.numpy() == 3.0).all()
"""


KILL_AFTER_FLUSH = r"""
import os, signal, time
path = os.environ["RUNTIME_TRACE"]
deadline = time.monotonic() + 120
while open(path).read().count('"cat":"kernel"') < 3 and time.monotonic() < deadline:
    time.sleep(0.01)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("killed", [False, True])
def test_real_trace_of_the_pipelining_pattern(tmp_path, killed):
    path = tmp_path / "trace.json"
    env = dict(os.environ, RUNTIME_TRACE=str(path))
    env.pop("RUNTIME_BACKEND", None)
    env.pop("RUNTIME_CUDA_DRIVER_LIB", None)
    # killed: the program ends by SIGKILL after its work (no stop, no exit handler), once the writer has flushed its
    # three kernel spans (it polls its own trace: no sleep to guess at).
    code = PIPELINE + (KILL_AFTER_FLUSH if killed else "")
    program = tmp_path / "pipeline.py"  # @runtime.jit reads its kernel's source from the file
    program.write_text(code)
    r = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == (-9 if killed else 0), r.stderr
    s = summary_of(path)
    assert s["terminated"] is (not killed)
    kernels = by(s["kernels"], "name")
    assert list(kernels) == ["kernel1"] and kernels["kernel1"]["count"] == 3
    assert 0 < kernels["kernel1"]["min_us"] <= kernels["kernel1"]["mean_us"] <= kernels["kernel1"]["max_us"]
    streams = [r for r in s["streams"] if r["operations"]]
    # The kernels on one stream, the copies on another, of cpu:0; the to_device copy on the default stream.
    kernel_streams = {r["name"] for r in streams if r["device"] == "cpu:0"}
    assert len(kernel_streams) >= 2
    ov = by(s["overlap"], "device")["cpu:0"]
    assert ov["copy_us"] > 0 and ov["kernel_us"] > 0
    assert 0 <= ov["overlap_us"] <= min(ov["copy_us"], ov["kernel_us"])
    assert by(s["categories"], "category")["copy"]["count"] >= 3
    out = tmp_path / "timeline.png"
    pytest.importorskip("matplotlib")
    p = run_prof(path, "--plot", out)
    assert p.returncode == 0, p.stderr
    assert png_size(out)[0] == 1440
