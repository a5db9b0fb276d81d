"""runtime.profile: the trace of the seed's pipelining pattern parsed and checked (tracks, spans, order, flows, api
calls, memory counters); a killed program's trace reads; an exit inside the block completes the file; refusals."""
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import runtime


def cpu_device_or_skip():
    if runtime.get_device_properties(0).backend != "cpu":
        pytest.skip("the trace's spans are timed on cpu devices")


@runtime.jit
def add_one(data):
    i = runtime.get_global_id()
    data[i] = data[i] + 1.0


def read_trace(path, complete=True):
    """The events of a trace; `complete`: the array must be closed (a killed program's is not)."""
    with open(path) as f:
        text = f.read().rstrip()
    if not text.endswith("]"):
        assert not complete, f"{path} is not closed: ...{text[-200:]}"
        if not text.endswith("}"):  # a kill in the middle of a write cut the last event: dropped
            text = text[:text.rfind("\n")]
        text += "\n]"
    events = json.loads(text)
    assert isinstance(events, list)
    return events


def track_names(events):
    return {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}


def spans(events, tid=None, cat=None):
    out = [e for e in events if e["ph"] == "X" and (tid is None or e["tid"] == tid) and (cat is None or e["cat"] == cat)]
    return sorted(out, key=lambda e: e["ts"])


def test_pipelining_trace(tmp_path):
    cpu_device_or_skip()
    n = 1 << 16
    host = np.random.rand(n).astype(np.float32)
    data1 = runtime.to_device(np.zeros(n, dtype=np.float32))
    device_data = runtime.alloc(host.nbytes)
    stream1, stream2 = runtime.Stream(), runtime.Stream()
    path = tmp_path / "trace.json"
    with runtime.profile(path) as written:
        assert written == str(path)
        stream1.launch_kernel(add_one, data1)
        stream2.launch_copy(device_data, host, direction="H2D")
        done = stream2.record()
        stream1.wait(done)
        stream1.launch_kernel(add_one, data1)
        stream1.synchronize()
        stream2.synchronize()
    assert (data1.numpy() == 2.0).all()

    events = read_trace(path)
    assert all(e["pid"] == os.getpid() for e in events)
    names = track_names(events)
    kernels = spans(events, cat="kernel")
    assert len(kernels) == 2 and all("add_one" in k["name"] for k in kernels)
    t1 = kernels[0]["tid"]
    assert kernels[1]["tid"] == t1
    copies = spans(events, cat="copy")
    assert len(copies) == 1 and copies[0]["args"]["direction"] == "HtoD" and copies[0]["args"]["bytes"] == host.nbytes
    t2 = copies[0]["tid"]
    assert t1 != t2
    for t in (t1, t2):
        assert names[t].startswith("cpu:0 stream ") and names[t] != "cpu:0 stream 0"
    assert [s["name"] for s in spans(events, tid=t2)] == ["memcpy HtoD", "event record"]
    s1 = spans(events, tid=t1)
    assert [s["cat"] for s in s1] == ["kernel", "event", "kernel"]
    assert s1[1]["name"] == "event wait"
    for track in (s1, spans(events, tid=t2)):
        for a, b in zip(track, track[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 0.0015, (a, b)  # one stream: no overlap
            assert a["args"]["op"] < b["args"]["op"]
        for s in track:
            assert s["args"]["status"] == "ok" and s["args"]["queued_us"] >= 0
    record = spans(events, tid=t2)[1]
    assert s1[2]["ts"] + 0.0015 >= record["ts"] + record["dur"]  # the second kernel waited for the record
    (start,) = [e for e in events if e["ph"] == "s"]
    (end,) = [e for e in events if e["ph"] == "f"]
    assert start["id"] == end["id"] and start["tid"] == t2 and end["tid"] == t1 and end["bp"] == "e"
    assert record["ts"] - 0.0015 <= start["ts"] <= record["ts"] + record["dur"] + 0.0015
    api = {e["name"] for e in spans(events, cat="api")}
    assert {"rtLaunchKernelEx", "rtMemcpyAsync", "rtEventRecord", "rtStreamWaitEvent"} & api
    counters = [e for e in events if e["ph"] == "C"]
    assert all(c["name"].startswith("memory cpu:") for c in counters)


def test_flags_leave_out_api_calls_and_memory(tmp_path):
    cpu_device_or_skip()
    path = tmp_path / "t.json"
    with runtime.profile(str(path), flags=runtime.PROFILER_NO_API_CALLS | runtime.PROFILER_NO_MEMORY):
        d = runtime.alloc(4096)
        runtime.memset(d, 1, 4096)
        runtime.free(d)
        runtime.synchronize()
    events = read_trace(path)
    assert not spans(events, cat="api")
    assert not [e for e in events if e["ph"] == "C"]
    assert len(spans(events, cat="fill")) == 1


def test_refusals(tmp_path):
    with pytest.raises(runtime.InvalidValueError, match="path is empty"):
        with runtime.profile(""):
            pass
    with pytest.raises(runtime.InvalidValueError, match="unknown bits"):
        with runtime.profile(tmp_path / "x.json", flags=0x40):
            pass
    with pytest.raises(TypeError):
        with runtime.profile(tmp_path / "x.json", flags="api"):
            pass
    with pytest.raises(runtime.UnknownError, match="No such file or directory"):
        with runtime.profile(tmp_path / "missing-dir" / "x.json"):
            pass
    with runtime.profile(tmp_path / "a.json"):
        with pytest.raises(runtime.IllegalStateError, match="a.json"):
            with runtime.profile(tmp_path / "b.json"):
                pass
    assert not (tmp_path / "b.json").exists()
    read_trace(tmp_path / "a.json")
    with pytest.raises(runtime.IllegalStateError, match="no trace is being written"):
        runtime._core.profiler_stop()


CHILD = textwrap.dedent("""
    import sys, numpy as np, runtime
    @runtime.jit
    def add_one(data):
        i = runtime.get_global_id()
        data[i] = data[i] + 1.0
    d = runtime.to_device(np.zeros(1024, dtype=np.float32))
    runtime._core.profiler_start(sys.argv[1], 0)
    rounds = int(sys.argv[2])
    i = 0
    while rounds < 0 or i < rounds:
        runtime.default_stream().launch_kernel(add_one, d)
        runtime.synchronize()
        i += 1
    # ends without rtProfilerStop: the exit handler completes the file
""")


def child_script(tmp_path):
    """The child's program as a file (@runtime.jit reads its kernels' source)."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return str(script)


def test_killed_program_leaves_a_readable_trace(tmp_path):
    cpu_device_or_skip()
    path = tmp_path / "killed.json"
    child = subprocess.Popen([sys.executable, child_script(tmp_path), str(path), "-1"])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists() and '"cat":"kernel"' in path.read_text():
                break
            time.sleep(0.05)
        else:
            pytest.fail("the child never wrote a kernel span")
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == -9
    events = read_trace(path, complete=False)
    assert spans(events, cat="kernel")


def test_exit_without_stop_completes_the_trace(tmp_path):
    cpu_device_or_skip()
    path = tmp_path / "exit.json"
    subprocess.run([sys.executable, child_script(tmp_path), str(path), "5"], check=True, timeout=120)
    events = read_trace(path, complete=True)
    assert len(spans(events, cat="kernel")) == 5
