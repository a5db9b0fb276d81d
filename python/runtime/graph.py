"""Graphs of the runtime package: work captured from a stream once, then replayed as one operation (graph.h).

    with stream.capture() as graph:          # or stream.begin_capture() ... graph = stream.end_capture()
        stream.launch_copy(d_x, x)
        stream.launch_kernel(scale, d_x, 2.0)
        stream.launch_copy(y, d_x)
    graph.launch(stream)                     # instantiates once, then replays
    exe = graph.instantiate()                # or keep the executable graph yourself
    exe.launch(stream); exe.launch(stream)
    stream.synchronize()                     # a failed node raises here, naming the node

What a capture records: the operations' operands as they are at the call (device addresses, kernel argument
values, host array addresses — replays read and write those host arrays in place, as a CUDA graph does). The
Python objects that captured work uses (arrays, device memory, host functions, kernel arguments) stay alive as long
as the graph or any executable graph made from it exists, and until their launches have completed.

Saved graphs: exe.save(path, x=d_x, y=d_y) names the buffers x and y and writes the executable graph (kernels,
memory plan); runtime.load_graph(path) in any process gives a GraphExec whose launch(stream, x=..., y=...) binds new
buffers of the same sizes. Host functions and other device pointers cannot be saved.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from . import _core
from .core import Device, DeviceMemory, Stream, _host_operand, current_stream
from .errors import GraphExecUpdateError, IllegalStateError, InvalidValueError, make_error

__all__ = ["Graph", "GraphExec", "GraphNode", "GraphMemoryInfo", "load_graph"]

_NODE_TYPES = {0: "kernel", 1: "memcpy", 2: "memset", 3: "host", 4: "graph", 5: "empty", 6: "wait_event",
               7: "event_record", 10: "mem_alloc", 11: "mem_free"}
_UPDATE_RESULTS = {0: "success", 1: "error", 2: "topology_changed", 3: "node_type_changed", 4: "function_changed",
                   5: "parameters_changed", 6: "not_supported"}


class GraphMemoryInfo(NamedTuple):
    """An executable graph's planned memory: the arena it holds for its allocation nodes against the sum of their
    sizes (allocations whose lifetimes do not overlap share memory)."""

    arena_bytes: int
    allocated_bytes: int
    allocations: int


class GraphNode:
    """A node of a Graph: `type` ("kernel", "memcpy", "memset", "host", "graph", "empty", "wait_event",
    "event_record", "mem_alloc", "mem_free") and dependencies(). Valid while its graph is open."""

    __slots__ = ("graph", "_handle", "type")

    def __init__(self, graph: "Graph", handle: int) -> None:
        self.graph, self._handle = graph, handle
        self.type = _NODE_TYPES.get(_core.graph_node_get_type(handle), "unknown")

    def dependencies(self) -> list:
        """The nodes this one runs after."""
        self.graph.handle  # raises if the graph was closed: the node handle died with it
        return [GraphNode(self.graph, h) for h in _core.graph_node_get_dependencies(self._handle)]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GraphNode) and other._handle == self._handle

    def __hash__(self) -> int:
        return hash(self._handle)

    def __repr__(self) -> str:
        return f"runtime.GraphNode({self.type})"


class Graph:
    """A graph of operations with dependencies, from stream.end_capture() or `with stream.capture() as graph:`.

    instantiate() makes a GraphExec (checked, memory-planned, launchable); launch(stream) instantiates once and
    replays that executable graph. A graph belongs to the device of the stream it was captured from."""

    def __init__(self) -> None:
        raise TypeError("runtime.Graph is made by stream.end_capture() or `with stream.capture() as graph:`")

    @classmethod
    def _adopt(cls, handle: int, device: Device) -> "Graph":
        g = cls.__new__(cls)
        g._handle, g.device, g._exec, g._state = handle, device, None, "ready"
        return g

    @classmethod
    def _pending(cls, device: Device) -> "Graph":
        """The graph of a `with stream.capture()` block, before the block has ended."""
        g = cls._adopt(0, device)
        g._state = "capturing"
        return g

    def _take(self, other: "Graph") -> None:
        """Adopt the handle of `other` (the block's captured graph), leaving it empty."""
        self._handle, other._handle = other._handle, 0
        self._state = "ready"

    @property
    def handle(self) -> int:
        """The rtGraph_t as an int."""
        if not self._handle:
            if self._state == "capturing":
                raise make_error(IllegalStateError, "the graph is still being captured: use it after the "
                                                    "`with stream.capture()` block (a block that raised leaves "
                                                    "no graph)")
            raise make_error(InvalidValueError, "the graph was closed")
        return self._handle

    def instantiate(self) -> "GraphExec":
        """A new executable graph of this graph: checked (no cycles, every operand valid), its allocation nodes
        planned into one arena, ready to launch. It does not change when this graph does (see GraphExec.update)."""
        return GraphExec._adopt(_core.graph_instantiate(self.handle), self.device, lambda: self)

    def launch(self, stream: Optional[Stream] = None) -> None:
        """Launch on `stream` (the current stream if None) the executable graph this graph made on its first
        launch: one operation of the stream."""
        h = self.handle
        if self._exec is None:
            ref = weakref.ref(self)  # the graph holds its executable graph: no reference back
            self._exec = GraphExec._adopt(_core.graph_instantiate(h), self.device, ref)
        self._exec.launch(stream)

    def nodes(self) -> list:
        """The nodes in the order they were added (captured)."""
        return [GraphNode(self, h) for h in _core.graph_get_nodes(self.handle)]

    def __len__(self) -> int:
        return len(_core.graph_get_nodes(self.handle))

    def to_dot(self, path: Any, verbose: bool = False) -> None:
        """Write the graph in Graphviz DOT to `path` (`dot -Tsvg path`): a node per node with its kind and main
        parameters (`verbose`: every parameter), an edge per dependency."""
        _core.graph_debug_dot_print(self.handle, os.fspath(path),
                                    _core.GRAPH_DEBUG_DOT_FLAGS_VERBOSE if verbose else 0)

    def close(self) -> None:
        """Destroy the graph (also done when it is garbage-collected); executable graphs made from it are not
        affected, and what its nodes use stays alive while they exist."""
        h, self._handle = self._handle, 0
        self._state = "closed"
        self._exec = None
        if h:
            _core.graph_destroy(h)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        if not self._handle:
            return f"runtime.Graph({self._state})"
        return f"runtime.Graph({len(self)} nodes, device={self.device.name!r})"


def _buffer(obj: Any, role: str) -> tuple:
    """(address, bytes, keep) of a named buffer: device memory, or a C-contiguous host array (used in place)."""
    if isinstance(obj, DeviceMemory):
        ptr = obj.ptr  # raises if freed
        if not obj.is_contiguous:
            raise make_error(InvalidValueError, f"{role}: {obj._describe()} is not contiguous")
        return ptr, obj.nbytes, obj
    if isinstance(obj, np.ndarray) and not obj.flags.c_contiguous:
        raise make_error(InvalidValueError, f"{role}: the host array is not C-contiguous: the graph reads and "
                                            f"writes a buffer in place (use numpy.ascontiguousarray and pass that)")
    # Writable and in place: a graph's copies may write any named buffer, and a copy made here would take its results.
    op = _host_operand(obj, role, True)
    return op.ptr, op.nbytes, op.keep


class GraphExec:
    """An executable graph: from graph.instantiate() or runtime.load_graph(path).

    launch(stream) queues it as one operation of the stream; launches of one executable graph run one at a time,
    in the order they were made, whichever their streams. update(graph) takes new parameters from a graph of the
    same shape; save(path, **named_buffers) writes it to a file."""

    def __init__(self) -> None:
        raise TypeError("runtime.GraphExec is made by graph.instantiate() or runtime.load_graph(path)")

    @classmethod
    def _adopt(cls, handle: int, device: Optional[Device], source: Optional[Callable]) -> "GraphExec":
        x = cls.__new__(cls)
        x._handle, x.device = handle, device
        x._source = source  # () -> the Graph its parameters come from (None: loaded from a file)
        x._bound: dict = {}  # name -> the object bound with set_buffer, kept while bound
        return x

    @property
    def handle(self) -> int:
        """The rtGraphExec_t as an int."""
        if not self._handle:
            raise make_error(InvalidValueError, "the executable graph was closed")
        return self._handle

    def launch(self, stream: Optional[Stream] = None, **buffers: Any) -> None:
        """Queue the executable graph on `stream` (the current stream if None). `buffers` bind named buffers
        (name=device memory or host array of at least the named size) for this launch and the next ones; a named
        buffer never bound fails the launch with InvalidValueError naming it."""
        h = self.handle
        if stream is None:
            stream = current_stream()
        elif not isinstance(stream, Stream):
            raise make_error(InvalidValueError, f"launch: stream must be a runtime.Stream, got "
                                                f"{type(stream).__name__}")
        for name, obj in buffers.items():
            ptr, nbytes, keep = _buffer(obj, f"launch: buffer {name!r}")
            _core.graph_exec_set_buffer(h, name, ptr, nbytes)
            self._bound[name] = keep
        # The bound buffers stay alive until this launch has run, even if rebound or dropped before then.
        keep = tuple(self._bound.values()) if self._bound else None
        _core.graph_launch(h, stream._handle or stream.handle, keep)  # a default stream's handle checks the device

    def upload(self, stream: Optional[Stream] = None) -> None:
        """Make it ready to launch on `stream` without launching it (optional; stream-ordered)."""
        if stream is None:
            stream = current_stream()
        _core.graph_upload(self.handle, stream.handle)

    def update(self, graph: Graph) -> None:
        """Take the parameters of every node of `graph` — the same nodes, captured in the same order with the same
        dependencies, as the graph this one was made from — for the next launches (launches already queued are not
        affected). Refused: GraphExecUpdateError, whose `result` says what differed ("topology_changed",
        "node_type_changed", "function_changed", "parameters_changed", "not_supported", "error") and whose
        message names the first node that differs; this executable graph is then unchanged."""
        if not isinstance(graph, Graph):
            raise make_error(InvalidValueError, f"update: expected a runtime.Graph, got {type(graph).__name__}")
        try:
            _core.graph_exec_update(self.handle, graph.handle)
        except GraphExecUpdateError as e:
            e.result = _UPDATE_RESULTS.get(getattr(e, "result", 1), "error")
            raise
        self._source = lambda: graph

    def save(self, path: Any, **named_buffers: Any) -> None:
        """Write the executable graph to `path`: its nodes, kernels (source, options and built code), memory plan
        and named buffers. `named_buffers` (name=device memory or host array the graph uses) name the graph's
        inputs and outputs: operands inside them are saved relative to them, to be bound anew by
        GraphExec.launch(stream, name=...) after runtime.load_graph. Host functions and device pointers outside
        named buffers and the graph's own allocations cannot be saved (NotSupportedError naming the node)."""
        path = os.fspath(path)
        if not named_buffers:
            _core.graph_exec_save(self.handle, path)
            return
        source = self._source() if self._source is not None else None
        if source is None or not source._handle:
            why = "was loaded from a file (its buffers are named already)" if self._source is None else \
                "came from a graph that was closed (names are bound to a graph)"
            raise make_error(InvalidValueError, f"save: cannot name buffers {sorted(named_buffers)}: the "
                                                f"executable graph {why}; call save(path) without them")
        self.handle  # raises if closed
        # Names belong to a graph and take effect at instantiation: a copy of the graph this one's parameters came
        # from is named and instantiated for the file (the source graph itself stays unnamed).
        clone = _core.graph_clone(source.handle)
        x = 0
        try:
            for name, obj in named_buffers.items():
                ptr, nbytes, _ = _buffer(obj, f"save: buffer {name!r}")
                _core.graph_bind_name(clone, name, ptr, nbytes)
            x = _core.graph_instantiate(clone)
            _core.graph_exec_save(x, path)
        finally:
            if x:
                _core.graph_exec_destroy(x)
            _core.graph_destroy(clone)

    def memory_info(self) -> GraphMemoryInfo:
        """The arena planned for the allocation nodes against the sum of their sizes."""
        return GraphMemoryInfo(*_core.graph_exec_get_memory_info(self.handle))

    def close(self) -> None:
        """Destroy the executable graph once its queued launches have completed (returns at once; also done when
        it is garbage-collected)."""
        h, self._handle = self._handle, 0
        self._bound = {}
        if h:
            _core.graph_exec_destroy(h)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        what = "closed" if not self._handle else f"{self._handle:#x}"
        return f"runtime.GraphExec({what})"


def load_graph(path: Any) -> GraphExec:
    """An executable graph saved by GraphExec.save, on the current device (kernels whose saved code does not fit
    this machine are rebuilt from their source). Bind its named buffers with launch(stream, name=buffer, ...). A
    file that is not such a graph, truncated or corrupted: InvalidValueError saying what is wrong."""
    from .core import current_device
    return GraphExec._adopt(_core.graph_exec_load(os.fspath(path)), current_device(), None)
