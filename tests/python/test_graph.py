"""Tests of graphs from Python (issue 14): stream capture of copies, @runtime.jit kernels and host functions, replay
against the stream's own result, the with-block, the error classes of capture and update, keep-alive of captured
objects, stream-ordered allocations as allocation nodes, DOT output, and save -> load_graph in another process."""
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import numpy as np
import pytest

import runtime
from conftest import skip_unless_kernels_run

N = 1000


@runtime.jit
def axpb(x, a, b):
    i = runtime.get_global_id()
    x[i] = a * x[i] + b


@runtime.jit
def add_into(out, x, y):
    i = runtime.get_global_id()
    out[i] = x[i] + y[i]


def pipeline(stream, h, d, out, log, a=2.0, b=1.0):
    """H2D copy, a kernel, D2H copy, a host function: the work captured and also run directly."""
    stream.launch_copy(d, h)
    stream.launch_kernel(axpb, d, np.float32(a), np.float32(b))
    stream.launch_copy(out, d)
    stream.launch_host_func(lambda: log.append(out.sum()))


def eventually(pred, what):
    """Waits (bounded: 10 s) for `pred`, dropping the references whose release has arrived meanwhile."""
    deadline = time.monotonic() + 10
    while not pred():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        gc.collect()
        runtime.synchronize()  # drops parked releases (a device synchronize drains them)
        time.sleep(0.001)


# ------------------------------------------------------------------------------------------------ capture and replay

def test_capture_records_instead_of_running_and_replay_gives_the_stream_result(stream):
    skip_unless_kernels_run()
    h = np.arange(N, dtype=np.float32)
    d = runtime.empty(N, np.float32)
    out = np.zeros(N, np.float32)
    log = []
    stream.begin_capture()
    assert stream.is_capturing
    pipeline(stream, h, d, out, log)
    graph = stream.end_capture()
    assert not stream.is_capturing
    stream.synchronize()
    assert isinstance(graph, runtime.Graph)
    assert log == [] and not out.any()  # captured, not run

    types = [n.type for n in graph.nodes()]
    assert types == ["memcpy", "kernel", "memcpy", "host"]
    nodes = graph.nodes()
    assert nodes[0].dependencies() == []
    for prev, node in zip(nodes, nodes[1:]):
        assert node.dependencies() == [prev]
    assert len(graph) == 4

    exe = graph.instantiate()
    assert isinstance(exe, runtime.GraphExec)
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, 2 * h + 1)
    assert log == [pytest.approx(float((2 * h + 1).sum()))]

    # The same work queued directly gives the same result.
    out_direct, log_direct = np.zeros(N, np.float32), []
    pipeline(stream, h, runtime.empty(N, np.float32), out_direct, log_direct)
    stream.synchronize()
    np.testing.assert_array_equal(out, out_direct)
    assert log_direct == log

    # Replays read the captured host array as it is at the launch (in place, as a CUDA graph does).
    h[:] = 10
    out[:] = 0
    exe.launch(stream)
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, np.full(N, 21, np.float32))
    assert len(log) == 3


def test_graph_launch_instantiates_once_and_replays(stream):
    skip_unless_kernels_run()
    d = runtime.zeros(N, np.float32)
    with stream.capture() as graph:
        stream.launch_kernel(axpb, d, np.float32(1), np.float32(1))  # d += 1
    for _ in range(3):
        graph.launch(stream)
    with stream:
        graph.launch()  # the current stream
    stream.synchronize()
    np.testing.assert_array_equal(d.numpy(), np.full(N, 4, np.float32))
    first = graph._exec
    graph.launch(stream)
    assert graph._exec is first  # one executable graph for every graph.launch


def test_with_block_fills_the_graph_when_it_exits(stream):
    d = runtime.zeros(16, np.uint8)
    with stream.capture() as graph:
        stream.memset(d, 7)
        with pytest.raises(runtime.IllegalStateError, match="still being captured"):
            graph.nodes()
    assert [n.type for n in graph.nodes()] == ["memset"]
    assert not d.numpy().any()
    graph.launch(stream)
    stream.synchronize()
    assert (d.numpy() == 7).all()


def test_an_exception_in_the_block_ends_the_capture_and_propagates(stream):
    d = runtime.zeros(16, np.uint8)
    with pytest.raises(ZeroDivisionError):
        with stream.capture() as graph:
            stream.memset(d, 1)
            1 / 0
    assert not stream.is_capturing
    with pytest.raises(runtime.IllegalStateError):
        graph.instantiate()
    stream.memset(d, 3)  # the stream works as before
    stream.synchronize()
    assert (d.numpy() == 3).all()
    with stream.capture() as again:  # and can capture again
        stream.memset(d, 5)
    assert len(again) == 1


def test_jit_kernel_compiled_during_the_capture(stream):
    skip_unless_kernels_run()

    @runtime.jit
    def fresh(x):
        i = runtime.get_global_id()
        x[i] = x[i] * 3

    x = runtime.to_device(np.arange(N, dtype=np.int32))
    with stream.capture() as graph:
        stream.launch_kernel(fresh, x)  # first launch: compiled now, captured as a kernel node
    assert [n.type for n in graph.nodes()] == ["kernel"]
    np.testing.assert_array_equal(x.numpy(), np.arange(N))
    graph.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(x.numpy(), 3 * np.arange(N))


def test_reference_mode_kernels_are_refused_without_breaking_the_capture(stream):
    kernel = runtime.jit(axpb.fn, interpret=True)
    d = runtime.zeros(8, np.float32)
    with stream.capture() as graph:
        with pytest.raises(runtime.StreamCaptureUnsupportedError, match="reference mode"):
            stream.launch_kernel(kernel, d, np.float32(1), np.float32(1))
        stream.memset(d, 0)
    assert len(graph) == 1


def test_fork_and_join_through_events(stream):
    skip_unless_kernels_run()
    other = runtime.Stream()
    x = runtime.to_device(np.ones(N, np.float32))
    y = runtime.to_device(np.full(N, 2, np.float32))
    z = runtime.zeros(N, np.float32)
    with stream.capture() as graph:
        fork = stream.record()
        other.wait(fork)  # `other` joins the capture
        stream.launch_kernel(axpb, x, np.float32(10), np.float32(0))  # x *= 10, on the capturing stream
        other.launch_kernel(axpb, y, np.float32(100), np.float32(0))  # y *= 100, in parallel
        stream.wait(other.record())  # joined back
        stream.launch_kernel(add_into, z, x, y)
    kinds = sorted(n.type for n in graph.nodes())
    assert kinds.count("kernel") == 3
    graph.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(z.numpy(), np.full(N, 210, np.float32))
    other.close()


def test_stream_ordered_allocations_become_allocation_nodes(stream):
    skip_unless_kernels_run()
    out = runtime.zeros(N, np.float32)
    with stream.capture() as graph:
        tmp = runtime.empty(N, np.float32, stream=stream)  # an allocation node
        stream.memset(tmp, 0)
        stream.launch_kernel(axpb, tmp, np.float32(0), np.float32(4))  # tmp = 4
        stream.launch_kernel(add_into, out, out, tmp)
        tmp.free()  # a free node
        tmp2 = runtime.empty(N, np.float32, stream=stream)  # may share tmp's memory: tmp is free by now
        stream.memset(tmp2, 0)
        stream.launch_kernel(add_into, out, out, tmp2)
        tmp2.free()
        kept = runtime.empty(N, np.float32, stream=stream)  # never freed: keeps its place from launch to launch
        stream.memset(kept, 0)
    types = [n.type for n in graph.nodes()]
    assert types.count("mem_alloc") == 3 and types.count("mem_free") == 2
    exe = graph.instantiate()
    info = exe.memory_info()
    assert isinstance(info, runtime.GraphMemoryInfo)
    assert info.allocations == 3
    assert info.allocated_bytes == 3 * N * 4
    # tmp and tmp2 share; `kept` shares with none (its contents live across launches, through tmp's lifetime too)
    assert 2 * N * 4 <= info.arena_bytes < info.allocated_bytes
    exe.launch(stream)
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.numpy(), np.full(N, 8, np.float32))
    del kept  # the graph's memory: dropping it outside the capture frees nothing (no error either)
    gc.collect()


def test_to_dot_writes_a_node_per_node_and_an_edge_per_dependency(stream, tmp_path):
    d = runtime.zeros(64, np.uint8)
    h = np.zeros(64, np.uint8)
    with stream.capture() as graph:
        stream.memset(d, 1)
        stream.launch_copy(h, d)
        stream.launch_host_func(lambda: None)
    path = tmp_path / "g.dot"
    graph.to_dot(path)
    text = path.read_text()
    assert text.lstrip().startswith("digraph")
    assert text.rstrip().endswith("}")
    assert text.count("->") == 2
    graph.to_dot(str(tmp_path / "v.dot"), verbose=True)
    assert (tmp_path / "v.dot").read_text().count("->") == 2


# ------------------------------------------------------------------------------------------------ update

def test_update_takes_new_parameters_and_refuses_another_topology(stream):
    skip_unless_kernels_run()
    d = runtime.zeros(N, np.float32)

    def capture(b, extra=False):
        with stream.capture() as g:
            stream.memset(d, 0)
            stream.launch_kernel(axpb, d, np.float32(1), np.float32(b))
            if extra:
                stream.memset(d, 0)
        return g

    exe = capture(1).instantiate()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(d.numpy(), np.full(N, 1, np.float32))
    exe.update(capture(5))
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(d.numpy(), np.full(N, 5, np.float32))

    with pytest.raises(runtime.GraphExecUpdateError) as info:
        exe.update(capture(7, extra=True))
    assert info.value.result == "topology_changed"
    assert info.value.code == 18
    assert str(info.value).startswith("RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE: ")
    exe.launch(stream)  # unchanged by the refused update
    stream.synchronize()
    np.testing.assert_array_equal(d.numpy(), np.full(N, 5, np.float32))

    with pytest.raises(runtime.InvalidValueError, match="runtime.Graph"):
        exe.update("not a graph")


# ------------------------------------------------------------------------------------------------ errors

def test_error_classes_cover_every_code():
    from runtime.errors import ERROR_CLASSES
    for name, code in runtime._core.ERROR_CODES.items():
        if code == 0:
            continue
        assert ERROR_CLASSES[code].name == name, name
    for code in range(11, 18):
        assert issubclass(ERROR_CLASSES[code], runtime.StreamCaptureError)
    assert not issubclass(runtime.GraphExecUpdateError, runtime.StreamCaptureError)
    assert issubclass(runtime.IllegalStateError, runtime.Error)


def test_capture_misuse_raises_the_right_classes(stream):
    with pytest.raises(runtime.InvalidValueError, match="mode must be one of"):
        stream.begin_capture("sometimes")
    with runtime.device(0):
        with pytest.raises(runtime.StreamCaptureUnsupportedError) as info:
            runtime.default_stream().begin_capture()
    assert info.value.code == 11
    stream.begin_capture()
    with pytest.raises(runtime.IllegalStateError):
        stream.begin_capture()  # already capturing
    assert stream.is_capturing
    with pytest.raises(runtime.StreamCaptureUnsupportedError):
        stream.synchronize()  # a capturing stream cannot be waited for: invalidates the capture
    with pytest.raises(runtime.StreamCaptureInvalidatedError) as info:
        stream.end_capture()
    assert "synchroniz" in str(info.value)  # names what broke it
    assert not stream.is_capturing
    stream.synchronize()  # usable again


def test_synchronous_calls_are_forbidden_in_a_global_capture(stream):
    d = runtime.zeros(16, np.uint8)
    h = np.zeros(16, np.uint8)
    stream.begin_capture()
    with pytest.raises(runtime.StreamCaptureUnsupportedError):
        runtime.copy(h, d)
    with pytest.raises(runtime.StreamCaptureInvalidatedError):
        stream.end_capture()
    # Relaxed: the same call is allowed. (It runs on the default stream, which waits for every blocking stream of
    # the device: the capturing stream must be a non-blocking one, as in CUDA.)
    quiet = runtime.Stream(non_blocking=True)
    with quiet.capture("relaxed") as graph:
        runtime.copy(h, d)
        quiet.memset(d, 1)
    assert len(graph) == 1
    quiet.close()


def test_the_default_stream_is_unusable_while_a_blocking_stream_captures():
    d = runtime.zeros(16, np.uint8)
    stream = runtime.Stream()  # blocking: the legacy default stream would have to wait for it
    assert not stream.non_blocking
    stream.begin_capture()
    try:
        with runtime.device(stream.device.index):
            with pytest.raises(runtime.StreamCaptureImplicitError) as info:
                runtime.default_stream().memset(d, 1)
        assert info.value.code == 14
    finally:
        with pytest.raises(runtime.StreamCaptureInvalidatedError):
            stream.end_capture()
        stream.close()


def test_the_default_stream_is_usable_while_a_non_blocking_stream_captures(stream):
    d = runtime.zeros(16, np.uint8)
    assert stream.non_blocking
    stream.begin_capture()
    with runtime.device(stream.device.index):
        runtime.default_stream().memset(d, 1)  # not ordered with a non-blocking stream: not part of its capture
    stream.end_capture()
    assert (d.numpy() == 1).all()


def test_unjoined_stream_is_named(stream):
    other = runtime.Stream()
    d = runtime.zeros(16, np.uint8)
    stream.begin_capture()
    other.wait(stream.record())
    other.memset(d, 1)  # never joined back
    with pytest.raises(runtime.StreamCaptureUnjoinedError):
        stream.end_capture()
    assert not other.is_capturing
    other.close()


def test_another_thread_in_relaxed_mode_may_allocate_during_a_global_capture(stream):
    errors = []

    def allocate(relaxed):
        try:
            if relaxed:
                with runtime.thread_capture_mode("relaxed"):
                    runtime.free(runtime.alloc(64))
            else:
                runtime.free(runtime.alloc(64))
        except runtime.Error as e:
            errors.append(e)

    stream.begin_capture()
    t = threading.Thread(target=allocate, args=(False,))
    t.start()
    t.join(30)
    assert len(errors) == 1 and isinstance(errors[0], runtime.StreamCaptureUnsupportedError)
    with pytest.raises(runtime.StreamCaptureInvalidatedError):
        stream.end_capture()

    errors.clear()
    stream.begin_capture()
    t = threading.Thread(target=allocate, args=(True,))
    t.start()
    t.join(30)
    assert errors == []
    stream.end_capture().close()


def test_a_failed_node_fails_the_launch_naming_the_node(stream):
    def boom():
        raise ValueError("boom in a graph")

    with stream.capture() as graph:
        stream.launch_host_func(boom)
    graph.launch(stream)
    with pytest.raises(runtime.LaunchError) as info:
        stream.synchronize()
    assert "boom in a graph" in str(info.value)
    assert "node" in str(info.value)
    stream.synchronize()  # reported once


def test_closed_objects_say_so(stream):
    with stream.capture() as graph:
        stream.launch_host_func(lambda: None)
    exe = graph.instantiate()
    graph.close()
    with pytest.raises(runtime.InvalidValueError, match="closed"):
        graph.instantiate()
    exe.launch(stream)  # does not depend on the graph
    stream.synchronize()
    exe.close()
    with pytest.raises(runtime.InvalidValueError, match="closed"):
        exe.launch(stream)
    with pytest.raises(TypeError):
        runtime.Graph()


# ------------------------------------------------------------------------------------------------ keep-alive

class Probe:
    """A weak-referenceable object that captured work uses."""


def test_objects_used_by_a_graph_stay_alive_while_an_executable_graph_exists(stream):
    skip_unless_kernels_run()
    probe = Probe()
    calls = []
    h = np.arange(N, dtype=np.float32)
    out = np.zeros(N, np.float32)
    d = runtime.empty(N, np.float32)

    def host_fn(p=probe):
        calls.append(p)

    with stream.capture() as graph:
        stream.launch_copy(d, h)
        stream.launch_kernel(axpb, d, np.float32(2), np.float32(0))
        stream.launch_copy(out, d)
        stream.launch_host_func(host_fn)
    refs = [weakref.ref(o) for o in (probe, h, out, d, host_fn)]
    out_ref = weakref.ref(out)
    del probe, h, out, d, host_fn  # the user lets go of everything the graph uses
    gc.collect()
    assert all(r() is not None for r in refs)

    exe = graph.instantiate()
    graph.close()  # the executable graph keeps what the graph kept
    gc.collect()
    assert all(r() is not None for r in refs)
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(out_ref(), 2 * np.arange(N, dtype=np.float32))
    assert len(calls) == 1
    calls.clear()

    exe.launch(stream)
    exe.close()  # returns at once; the launch still runs with its objects alive
    stream.synchronize()
    assert len(calls) == 1
    calls.clear()
    eventually(lambda: all(r() is None for r in refs), "the graph's objects to be released")


def test_buffers_freed_by_the_garbage_collector_during_a_capture_are_freed_after_it(stream):
    live = runtime.memory_stats()["num_live_allocations"]
    junk = runtime.alloc(4096)
    d = runtime.zeros(16, np.uint8)
    with stream.capture() as graph:
        del junk  # finalized during the capture: an rtFree now would invalidate it
        gc.collect()
        stream.memset(d, 1)
    assert len(graph) == 1  # the capture was not invalidated
    assert runtime.memory_stats()["num_live_allocations"] == live + 1  # junk went at the end of the capture: d stays


# ------------------------------------------------------------------------------------------------ save and load

LOADER = """
import sys
import numpy as np
import runtime
exe = runtime.load_graph(sys.argv[1])
assert isinstance(exe, runtime.GraphExec)
n = int(sys.argv[2])
s = runtime.Stream()
x = runtime.to_device(np.arange(n, dtype=np.float32) * 2)
y = runtime.zeros(n, np.float32)
try:
    exe.launch(s)  # the named buffers are not bound yet
    s.synchronize()
    print("unbound launch accepted")
except runtime.InvalidValueError as e:
    print("unbound:", e)
exe.launch(s, x=x, out=y)
exe.launch(s)  # the bound buffers stay bound
s.synchronize()
np.save(sys.argv[3], y.numpy())
"""


def test_save_then_load_in_another_process_and_launch_with_new_buffers(stream, tmp_path):
    skip_unless_kernels_run()
    x = runtime.to_device(np.arange(N, dtype=np.float32))
    out = runtime.zeros(N, np.float32)
    with stream.capture() as graph:
        stream.launch_kernel(axpb, x, np.float32(3), np.float32(1))  # x = 3x + 1
        stream.launch_kernel(add_into, out, x, x)  # out = 2x
    exe = graph.instantiate()
    path = tmp_path / "pipeline.rtgraph"
    exe.save(path, x=x, out=out)
    assert path.stat().st_size > 0

    # The same launches here, on the same inputs the child uses: the reference result.
    x2 = runtime.to_device(np.arange(N, dtype=np.float32) * 2)
    y2 = runtime.zeros(N, np.float32)
    with stream.capture() as g2:
        stream.launch_kernel(axpb, x2, np.float32(3), np.float32(1))
        stream.launch_kernel(add_into, y2, x2, x2)
    g2.launch(stream)
    g2.launch(stream)
    stream.synchronize()

    result = tmp_path / "y.npy"
    proc = subprocess.run([sys.executable, "-c", LOADER, str(path), str(N), str(result)], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    unbound = [line for line in proc.stdout.splitlines() if line.startswith("unbound:")]
    assert unbound, proc.stdout  # a launch with a named buffer unbound is refused, naming it
    assert "'x'" in unbound[0] or "'out'" in unbound[0], unbound[0]
    np.testing.assert_array_equal(np.load(result), y2.numpy())


def test_save_refuses_host_functions_and_a_loaded_graph_refuses_new_names(stream, tmp_path):
    with stream.capture() as graph:
        stream.launch_host_func(lambda: None)
    exe = graph.instantiate()
    with pytest.raises(runtime.NotSupportedError, match="node"):
        exe.save(tmp_path / "host.rtgraph")

    d = runtime.zeros(64, np.uint8)
    with stream.capture() as graph:
        stream.memset(d, 9)
    exe = graph.instantiate()
    with pytest.raises(runtime.NotSupportedError):
        exe.save(tmp_path / "unnamed.rtgraph")  # d is a device pointer outside any named buffer
    exe.save(tmp_path / "named.rtgraph", d=d)
    loaded = runtime.load_graph(tmp_path / "named.rtgraph")
    with pytest.raises(runtime.InvalidValueError, match="loaded from a file"):
        loaded.save(tmp_path / "again.rtgraph", d=d)
    e = runtime.zeros(64, np.uint8)
    loaded.launch(stream, d=e)
    stream.synchronize()
    assert (e.numpy() == 9).all() and not d.numpy().any()


def test_named_host_buffers_are_bound_in_place_and_writable(stream, tmp_path):
    d = runtime.zeros(64, np.uint8)
    out = np.zeros(64, np.uint8)
    with stream.capture() as graph:
        stream.memset(d, 7)
        stream.launch_copy(out, d)  # the graph writes the host buffer `out`
    exe = graph.instantiate()
    exe.save(tmp_path / "out.rtgraph", d=d, out=out)
    loaded = runtime.load_graph(tmp_path / "out.rtgraph")
    readonly = np.zeros(64, np.uint8)
    readonly.flags.writeable = False
    with pytest.raises(runtime.InvalidValueError):
        loaded.launch(stream, d=runtime.zeros(64, np.uint8), out=readonly)
    strided = np.zeros(128, np.uint8)[::2]
    with pytest.raises(runtime.InvalidValueError):  # a copy of it would take the results
        loaded.launch(stream, d=runtime.zeros(64, np.uint8), out=memoryview(strided))
    mine = np.zeros(64, np.uint8)
    loaded.launch(stream, d=runtime.zeros(64, np.uint8), out=mine)
    stream.synchronize()
    assert (mine == 7).all()


def test_load_graph_refuses_a_file_that_is_not_a_graph(tmp_path):
    bad = tmp_path / "bad.rtgraph"
    bad.write_bytes(b"not a graph at all" * 10)
    with pytest.raises(runtime.InvalidValueError):
        runtime.load_graph(bad)
    with pytest.raises(runtime.Error):
        runtime.load_graph(tmp_path / "missing.rtgraph")


# ------------------------------------------------------------------------------------------------ docs/graphs.md

def _fenced(text, lang):
    """The fenced code blocks of `lang` in a Markdown text, in order."""
    blocks, inside, lines = [], False, []
    for line in text.splitlines():
        if not inside and line.strip() == "```" + lang:
            inside, lines = True, []
        elif inside and line.strip() == "```":
            inside = False
            blocks.append("\n".join(lines))
        elif inside:
            lines.append(line)
    return blocks


def test_the_python_examples_of_the_document_run(repo, tmp_path):
    skip_unless_kernels_run()
    blocks = _fenced((repo / "docs" / "graphs.md").read_text(), "python")
    assert len(blocks) >= 5
    script = tmp_path / "graphs_doc.py"
    script.write_text("\n\n".join(blocks) + "\nprint('docs ok')\n")
    env = dict(os.environ)
    env.pop("RUNTIME_JIT_INTERPRET", None)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "docs ok" in proc.stdout


def test_the_cpp_example_of_the_document_is_the_one_a_test_runs(repo):
    doc = _fenced((repo / "docs" / "graphs.md").read_text(), "cpp")[0]
    test = (repo / "tests" / "cpp" / "test_cpp_graph.cpp").read_text()
    begin, end = "// docs-example-begin\n", "    // docs-example-end"
    body = test[test.index(begin) + len(begin):test.index(end)]
    assert textwrap.dedent(doc).strip() == textwrap.dedent(body).strip()


# ------------------------------------------------------------------------------------------------ cuda (fake driver)

FAKE_CUDA = """
import numpy as np
import runtime
dev = runtime.device("cuda:0")
assert "Fake CUDA Device" in dev.properties.name, dev.properties.name
with dev:
    s = runtime.Stream()
    h = np.arange(4096, dtype=np.float32)
    back = np.zeros_like(h)
    d = runtime.alloc(h.nbytes)
    calls = []
    with s.capture() as graph:
        s.launch_copy(d, h)
        s.launch_copy(back, d)
        s.launch_host_func(lambda: calls.append(1))
    assert [n.type for n in graph.nodes()] == ["memcpy", "memcpy", "host"]
    assert not back.any() and calls == []
    graph.launch(s)
    s.synchronize()
    np.testing.assert_array_equal(back, h)
    h[:] = 7
    graph.launch(s)
    s.synchronize()
    assert (back == 7).all() and calls == [1, 1]
    s.begin_capture()
    try:
        s.synchronize()
    except runtime.StreamCaptureUnsupportedError:
        pass
    try:
        s.end_capture()
        raise AssertionError("an invalidated capture ended without an error")
    except runtime.StreamCaptureInvalidatedError:
        pass
print("fake cuda graphs ok")
"""


def test_capture_and_replay_on_the_cuda_backend_with_the_fake_driver(repo):
    lib = os.environ.get("RUNTIME_FAKE_CUDA_LIB") or str(repo / "build" / "tests" / "fake_cuda" / "libfake_cuda.so")
    if not os.path.isfile(lib):
        pytest.skip(f"the fake CUDA driver is not built ({lib}; set RUNTIME_FAKE_CUDA_LIB)")
    env = dict(os.environ, RUNTIME_CUDA_DRIVER_LIB=lib)
    proc = subprocess.run([sys.executable, "-c", FAKE_CUDA], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fake cuda graphs ok" in proc.stdout
