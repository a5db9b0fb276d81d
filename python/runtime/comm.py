"""runtime.comm — collectives (issue 15): communicators over devices and NCCL's collectives as operations of a stream.

    comms = runtime.comm.init_all(["cpu:0", "cpu:1"])        # one Communicator per rank, driven from this thread
    for c, buf in zip(comms, bufs):
        c.all_reduce(buf)                                       # in place, queued on the device's stream
    runtime.synchronize()

Over comm.h (docs/comm.md): the same matching, ordering, determinism and fault rules. What this module adds:

- Counts and element types come from the buffers: runtime device memory (typed: runtime.empty, to_device, ...) of
  the communicator's device, or numpy arrays when that device is a cpu device. A numpy array is staged through device
  memory on the stream (copied in before the collective when it is read, copied back after it when it is written),
  so, like stream.launch_copy into a numpy array, it holds the result once the stream has been synchronized — not
  when the call returns (every call returns at once: one thread may drive every rank).
- Everything is checked before anything is queued: a refused call (sizes or dtypes that do not fit, a bad op, a
  root or peer out of range, a destroyed communicator, a buffer or stream of another device) raises
  runtime.InvalidValueError (a ValueError) or InvalidHandleError and leaves the communicator's sequence untouched.
- stream=None: the thread's current stream (`with stream:`) when it is on the communicator's device, else that
  device's default stream. Two ranks on one device need two streams (they would wait for each other on one).
- The Python objects a collective uses stay alive until its stream has passed it (inside group(): from the end of
  the outermost group, when the collectives are queued).
- A peer that never arrives fails the collective after RUNTIME_COMM_TIMEOUT seconds (read when the communicator is
  created; default 30): the stream's synchronize raises runtime.CommTimeoutError naming the missing ranks.
"""

from __future__ import annotations

import threading
from typing import Any, Optional, Sequence

import numpy as np

from . import _core
from .core import Device, DeviceMemory, Stream, _device_index, _device_obj, current_stream, default_stream, empty
from .errors import ERROR_CLASSES, Error, InvalidHandleError, InvalidValueError, NotSupportedError, UnknownError, \
    make_error

__all__ = ["Communicator", "init_all", "get_unique_id", "init_rank", "from_mpi", "group"]

_OPS = {"sum": _core.REDUCE_SUM, "prod": _core.REDUCE_PROD, "max": _core.REDUCE_MAX, "min": _core.REDUCE_MIN,
        "avg": _core.REDUCE_AVG}
_DTYPES = {"int8": _core.DATA_INT8, "uint8": _core.DATA_UINT8, "int32": _core.DATA_INT32,
           "uint32": _core.DATA_UINT32, "int64": _core.DATA_INT64, "uint64": _core.DATA_UINT64,
           "float16": _core.DATA_FLOAT16, "bfloat16": _core.DATA_BFLOAT16, "float32": _core.DATA_FLOAT32,
           "float64": _core.DATA_FLOAT64}
_KIND = _core.COMM_COLLECTIVES  # collective name -> comm_collective's selector


def _error(detail: str) -> Error:
    return make_error(InvalidValueError, detail)


# ---- groups: per thread, the work to do once the outermost group has queued its collectives

class _GroupState(threading.local):
    def __init__(self) -> None:
        self.depth = 0
        self.pending: list = []  # (device, stream, keep, copy_backs) per collective called inside the group


_groups = _GroupState()


def _queued(device: Device, stream: Stream, keep: tuple, copy_backs: list) -> None:
    """What follows a collective once it is on its stream: the staged numpy outputs copied back, then `keep` held
    until the stream has passed all of it."""
    with device:
        for host, staged in copy_backs:
            stream.launch_copy(host, staged)  # keeps both until the copy has run, after the collective
        if keep:
            _core.defer_release(stream.handle, keep)


class group:
    """`with runtime.comm.group():` — rtGroupStart/rtGroupEnd: the collectives called in the body (on any
    communicator, from this thread) are checked when called and queued together at the end of the outermost group,
    so that one thread can drive an exchange (send and recv) between ranks, and NCCL-portable code batches its calls.
    The end runs even when the body raises; then the body's exception is the one that propagates."""

    def __enter__(self) -> "group":
        _core.group_start()
        _groups.depth += 1
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        st = _groups
        st.depth -= 1
        try:
            _core.group_end()
        except BaseException:
            if st.depth == 0:
                _finish_group(st, queued=False)
            if exc_type is None:
                raise
            return False
        if st.depth == 0:
            _finish_group(st, queued=True)
        return False


def _finish_group(st: _GroupState, queued: bool) -> None:
    """Runs the outermost group's pending work. Not queued (rtGroupEnd failed): no copy-back (the staged outputs hold
    nothing), but the objects are still kept past the stream's current work, in case part of the group was queued."""
    pending, st.pending = st.pending, []
    for device, stream, keep, copy_backs in pending:
        _queued(device, stream, keep, copy_backs if queued else [])


# ---- operands

class _Buffer:
    """One buffer of a call: the caller's object, the device memory the C call uses (the object itself, or a staging
    copy of a numpy array), its element count and dtype."""

    __slots__ = ("obj", "host", "mem", "size", "dtype", "role")

    def __init__(self, obj: Any, role: str, comm: "Communicator", op: str, written: bool) -> None:
        self.obj, self.role, self.mem, self.host = obj, role, None, None
        what = comm._what(op)
        if isinstance(obj, DeviceMemory):
            _ = obj.ptr  # raises if freed
            if obj.device != comm.device:
                raise _error(f"{what}: {role} is device memory of {obj.device.name}, but the rank is on "
                             f"{comm.device.name} (a collective's buffers belong to its rank's device)")
            if not obj.is_contiguous:
                raise _error(f"{what}: {role} is not C-contiguous (collectives take packed buffers)")
            if written and obj.readonly:
                raise _error(f"{what}: {role} is read-only memory, but the collective writes it")
            self.mem = obj
        elif isinstance(obj, np.ndarray):
            if not comm.device.properties.unified_addressing:
                raise _error(f"{what}: {role} is a numpy array, but {comm.device.name} is not a cpu device "
                             f"(pass device memory of {comm.device.name}: runtime.to_device)")
            if written and not obj.flags.writeable:
                raise _error(f"{what}: {role} is a read-only numpy array, but the collective writes it")
            if written and not obj.flags.c_contiguous:
                raise _error(f"{what}: {role} is a numpy array that is not C-contiguous, but the collective "
                             f"writes it (use numpy.ascontiguousarray)")
            self.host = obj if obj.flags.c_contiguous else np.ascontiguousarray(obj)
        else:
            raise _error(f"{what}: {role} must be runtime device memory or a numpy array, "
                         f"got {type(obj).__name__}")
        self.size = obj.size
        self.dtype = obj.dtype
        if self.dtype.name not in _DTYPES or not self.dtype.isnative:
            raise _error(f"{what}: {role} has dtype {self.dtype}, which collectives do not take (expected one "
                         f"of {', '.join(_DTYPES)})")

    def describe(self) -> str:
        return f"{self.role} ({self.size} elements of {self.dtype})"

    def stage(self, stream: Stream, read: bool) -> None:
        """Gives a numpy array device memory of the rank's device, filled on `stream` when the collective reads it
        (nothing for an empty array: the C API touches no byte of it)."""
        if self.host is not None and self.size:
            self.mem = empty(self.host.shape, self.host.dtype, device=stream.device)
            if read:
                stream.launch_copy(self.mem, self.host)

    def address(self) -> int:
        """The device address the C call uses (0 for an empty or unstaged buffer)."""
        return self.mem.ptr if self.mem is not None and self.size else 0


def _same_dtype(a: _Buffer, b: _Buffer, what: str) -> None:
    if a.dtype != b.dtype:
        raise _error(f"{what}: {a.describe()} and {b.describe()} differ in dtype (a collective does not convert)")


def _expect_size(buf: _Buffer, size: int, why: str, what: str) -> None:
    if buf.size != size:
        raise _error(f"{what}: {buf.describe()} must hold {size} elements ({why})")


# ---- communicators

class Communicator:
    """One rank's handle on a communicator: `rank`, `size`, `device` (a runtime.Device). Every collective is queued
    on a stream of `device` and returns at once (see the module's doc for buffers, streams and errors). destroy()
    releases the handle once its queued collectives have run (as does leaving a `with` block, or garbage
    collection); abort() fails the communicator on every rank at once."""

    def __init__(self, handle: int) -> None:
        self._handle = handle
        self.rank: int = _core.comm_user_rank(handle)
        self.size: int = _core.comm_count(handle)
        self.device: Device = _device_obj(_core.comm_device(handle))

    def _what(self, op: str = "") -> str:
        return f"runtime.comm rank {self.rank} of {self.size}" + (f" {op}" if op else "")

    def _live(self, op: str) -> int:
        if not self._handle:
            raise make_error(InvalidHandleError, f"{self._what(op)}: the communicator was destroyed or aborted")
        return self._handle

    def _stream(self, stream: Any, op: str) -> Stream:
        if stream is None:
            s = current_stream()
            return s if s.device == self.device else default_stream(self.device)
        if not isinstance(stream, Stream):
            raise _error(f"{self._what(op)}: stream must be a runtime.Stream or None, got {type(stream).__name__}")
        if stream.device != self.device:
            raise _error(f"{self._what(op)}: the stream is on {stream.device.name}, but the rank is on "
                         f"{self.device.name} (queue it on a stream of {self.device.name})")
        return stream

    def _rank_arg(self, value: Any, name: str, op: str) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise _error(f"{self._what(op)}: {name} must be an int, got {type(value).__name__}")
        if not 0 <= int(value) < self.size:
            raise _error(f"{self._what(op)}: {name} {int(value)} is out of range (the communicator has ranks "
                         f"0 .. {self.size - 1})")
        return int(value)

    def _op_arg(self, op_name: Any, op: str) -> int:
        code = _OPS.get(op_name) if isinstance(op_name, str) else None
        if code is None:
            raise _error(f"{self._what(op)}: op {op_name!r} is not a reduction (expected one of "
                         f"{', '.join(repr(k) for k in _OPS)})")
        return code

    def _run(self, op: str, handle: int, stream: Stream, reads: Sequence[_Buffer], writes: Sequence[_Buffer],
             send: Optional[_Buffer], recv: Optional[_Buffer], count: int, dtype: Optional[np.dtype],
             red: int = 0, root: int = 0) -> None:
        """Stages numpy operands, queues the collective, then its copy-backs and keep-alive (now, or at the end of
        the outermost group). Called only once every argument has been checked."""
        with self.device:  # a default stream's handle (0) is valid only while its device is the current one
            staged: dict = {}  # one staging copy per caller object (in place: send is recv)
            for b in (*reads, *writes):
                first = staged.setdefault(id(b.obj), b)
                if first is b:
                    b.stage(stream, read=any(b is r for r in reads))
                else:
                    b.mem = first.mem
            sp = send.address() if send is not None else 0
            rp = recv.address() if recv is not None else 0
            copy_backs = [(b.host, b.mem) for b in writes if b.host is not None and b.mem is not None]
            keep = tuple(b.obj for b in staged.values()) + tuple(b.mem for b in staged.values() if b.host is not None)
            code = _DTYPES[dtype.name] if dtype is not None else 0
            if _groups.depth:
                _core.comm_collective(_KIND[op], handle, sp, rp, count, code, red, root, stream.handle, None)
                _groups.pending.append((self.device, stream, keep, copy_backs))
                return
            _core.comm_collective(_KIND[op], handle, sp, rp, count, code, red, root, stream.handle, keep or None)
            if copy_backs:
                _queued(self.device, stream, (), copy_backs)

    # ---- collectives
    def all_reduce(self, send: Any, recv: Any = None, op: str = "sum", stream: Optional[Stream] = None) -> None:
        """recv = the reduction (`op`: "sum", "prod", "max", "min", "avg") of every rank's send, element-wise; in
        place when recv is None (or send itself). send and recv hold the same number of elements of one dtype."""
        what = self._what("all_reduce")
        h = self._live("all_reduce")
        red = self._op_arg(op, "all_reduce")
        s = _Buffer(send, "send", self, "all_reduce", written=recv is None or recv is send)
        r = s if recv is None or recv is send else _Buffer(recv, "recv", self, "all_reduce", written=True)
        _same_dtype(s, r, what)
        _expect_size(r, s.size, "as many as send", what)
        st = self._stream(stream, "all_reduce")
        self._run("all_reduce", h, st, [s], [r], s, r, s.size, s.dtype, red)

    def broadcast(self, buf: Any, root: int = 0, stream: Optional[Stream] = None) -> None:
        """buf = root's buf on every rank (in place)."""
        h = self._live("broadcast")
        root = self._rank_arg(root, "root", "broadcast")
        b = _Buffer(buf, "buf", self, "broadcast", written=True)
        st = self._stream(stream, "broadcast")
        self._run("broadcast", h, st, [b], [b], b, b, b.size, b.dtype, 0, root)

    def reduce(self, send: Any, recv: Any, op: str = "sum", root: int = 0, stream: Optional[Stream] = None) -> None:
        """root's recv = the reduction of every rank's send; recv is not touched, and may be None, on other ranks
        (recv is send: in place)."""
        what = self._what("reduce")
        h = self._live("reduce")
        red = self._op_arg(op, "reduce")
        root = self._rank_arg(root, "root", "reduce")
        s = _Buffer(send, "send", self, "reduce", written=recv is send and self.rank == root)
        if recv is None:
            if self.rank == root:
                raise _error(f"{what}: recv is None on the root (rank {root} receives the result)")
            r = None
        else:
            r = s if recv is send else _Buffer(recv, "recv", self, "reduce", written=self.rank == root)
            _same_dtype(s, r, what)
            _expect_size(r, s.size, "as many as send", what)
        writes = [r] if r is not None and self.rank == root else []
        st = self._stream(stream, "reduce")
        self._run("reduce", h, st, [s], writes, s, r, s.size, s.dtype, red, root)

    def all_gather(self, send: Any, recv: Any, stream: Optional[Stream] = None) -> None:
        """recv[k*n:(k+1)*n] = rank k's send (n elements) on every rank: recv holds size * n elements."""
        what = self._what("all_gather")
        h = self._live("all_gather")
        s = _Buffer(send, "send", self, "all_gather", written=False)
        r = _Buffer(recv, "recv", self, "all_gather", written=True)
        _same_dtype(s, r, what)
        _expect_size(r, self.size * s.size, f"{self.size} ranks x the {s.size} of send", what)
        st = self._stream(stream, "all_gather")
        self._run("all_gather", h, st, [s], [r], s, r, s.size, s.dtype)

    def reduce_scatter(self, send: Any, recv: Any, op: str = "sum", stream: Optional[Stream] = None) -> None:
        """recv on rank k = the reduction of every rank's send[k*n:(k+1)*n] (n: recv's elements; send holds
        size * n)."""
        what = self._what("reduce_scatter")
        h = self._live("reduce_scatter")
        red = self._op_arg(op, "reduce_scatter")
        s = _Buffer(send, "send", self, "reduce_scatter", written=False)
        r = _Buffer(recv, "recv", self, "reduce_scatter", written=True)
        _same_dtype(s, r, what)
        _expect_size(s, self.size * r.size, f"{self.size} ranks x the {r.size} of recv", what)
        st = self._stream(stream, "reduce_scatter")
        self._run("reduce_scatter", h, st, [s], [r], s, r, r.size, s.dtype, red)

    def all_to_all(self, send: Any, recv: Any, stream: Optional[Stream] = None) -> None:
        """recv[k*n:(k+1)*n] on rank r = rank k's send[r*n:(r+1)*n]; send and recv hold size * n elements each."""
        what = self._what("all_to_all")
        h = self._live("all_to_all")
        s = _Buffer(send, "send", self, "all_to_all", written=False)
        r = _Buffer(recv, "recv", self, "all_to_all", written=True)
        _same_dtype(s, r, what)
        _expect_size(r, s.size, "as many as send", what)
        if s.size % self.size:
            raise _error(f"{what}: {s.describe()} must hold a multiple of {self.size} elements (one block per rank)")
        st = self._stream(stream, "all_to_all")
        self._run("all_to_all", h, st, [s], [r], s, r, s.size // self.size, s.dtype)

    def send(self, buf: Any, peer: int, stream: Optional[Stream] = None) -> None:
        """Sends buf to rank `peer`, whose recv(…, peer=this rank) must take as many elements of the same dtype.
        Put both directions of an exchange in one group()."""
        h = self._live("send")
        peer = self._rank_arg(peer, "peer", "send")
        b = _Buffer(buf, "buf", self, "send", written=False)
        st = self._stream(stream, "send")
        self._run("send", h, st, [b], [], b, None, b.size, b.dtype, 0, peer)

    def recv(self, buf: Any, peer: int, stream: Optional[Stream] = None) -> None:
        """Receives into buf what rank `peer` sends to this rank."""
        h = self._live("recv")
        peer = self._rank_arg(peer, "peer", "recv")
        b = _Buffer(buf, "buf", self, "recv", written=True)
        st = self._stream(stream, "recv")
        self._run("recv", h, st, [], [b], None, b, b.size, b.dtype, 0, peer)

    def barrier(self, stream: Optional[Stream] = None) -> None:
        """Completes on every rank's stream once every rank's stream has reached it."""
        h = self._live("barrier")
        st = self._stream(stream, "barrier")
        self._run("barrier", h, st, [], [], None, None, 0, None)

    # ---- life
    def async_error(self) -> Optional[Error]:
        """None while the communicator is healthy; else the exception of the failure that stopped it (a timeout,
        an abort, arguments that differed between ranks) — not raised."""
        code, msg = _core.comm_get_async_error(self._live("async_error"))
        if code == 0:
            return None
        return make_error(ERROR_CLASSES.get(code, UnknownError), msg)

    def abort(self) -> None:
        """Fails the communicator on every rank now (their waiting and queued collectives fail; their streams'
        synchronize raises runtime.IllegalStateError naming the abort) and releases this handle. Returns at once."""
        h, self._handle = self._live("abort"), 0
        _core.comm_abort(h)

    def destroy(self) -> None:
        """Releases this rank's handle once its queued collectives have run (does not wait). Idempotent."""
        h, self._handle = self._handle, 0
        if h:
            _core.comm_destroy(h)

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy()

    def __del__(self) -> None:
        try:
            self.destroy()
        except Exception:  # interpreter shutdown, or the runtime finalized first: nothing left to release
            pass

    def __repr__(self) -> str:
        state = "" if self._handle else ", destroyed"
        return f"runtime.comm.Communicator(rank={self.rank}, size={self.size}, device={self.device.name!r}{state})"


# ---- creation

def init_all(devices: Sequence[Any]) -> list:
    """One communicator over `devices` (ints, names like "cpu:1", or runtime.Device; a device may appear more than
    once), driven from this thread: the Communicator of rank i (on devices[i]) at index i."""
    if isinstance(devices, (str, bytes)) or not hasattr(devices, "__len__"):
        raise _error(f"runtime.comm.init_all: devices must be a list of devices, got {type(devices).__name__}")
    if len(devices) == 0:
        raise _error("runtime.comm.init_all: devices is empty (expected at least one device)")
    return [Communicator(h) for h in _core.comm_init_all([_device_index(d) for d in devices])]


def get_unique_id() -> bytes:
    """A fresh id (128 bytes) for init_rank: made by one rank, handed to the others (threads of this process, or, in a
    process started by mpirun, the other processes of the job: broadcast it, e.g. with mpi4py; see from_mpi)."""
    return _core.comm_get_unique_id()


def init_rank(nranks: int, unique_id: bytes, rank: int) -> Communicator:
    """Joins communicator `unique_id` of `nranks` ranks as `rank`, on the calling thread's current device (enter
    `with runtime.device(d):` first). One rank per thread: waits, with the GIL released, until every rank has joined,
    or raises runtime.CommTimeoutError after RUNTIME_COMM_TIMEOUT seconds naming the ranks that did not."""
    for name, v in (("nranks", nranks), ("rank", rank)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise _error(f"runtime.comm.init_rank: {name} must be an int, got {type(v).__name__}")
    try:
        uid = bytes(unique_id)
    except TypeError:
        raise _error(f"runtime.comm.init_rank: unique_id must be the bytes from get_unique_id(), got "
                     f"{type(unique_id).__name__}") from None
    if len(uid) != _core.COMM_UNIQUE_ID_BYTES:
        raise _error(f"runtime.comm.init_rank: unique_id has {len(uid)} bytes (expected the "
                     f"{_core.COMM_UNIQUE_ID_BYTES} from get_unique_id())")
    return Communicator(_core.comm_init_rank(int(nranks), uid, int(rank)))


def from_mpi(comm: Any = None) -> Communicator:
    """A communicator over an mpi4py communicator's processes (default COMM_WORLD), one rank per process, on the
    calling thread's current device, with the same rank numbers as `comm`. Rank 0 makes the id and broadcasts it over
    `comm`; every process of `comm` must call this (it waits, like init_rank). Run under mpirun; MPI must be at
    MPI_THREAD_MULTIPLE (mpi4py's default)."""
    if comm is None:
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise make_error(NotSupportedError, f"runtime.comm.from_mpi: mpi4py is not installed ({e}); pip install "
                                                f"mpi4py, or pass an mpi4py communicator") from None
        comm = MPI.COMM_WORLD
    for attr in ("Get_rank", "Get_size", "bcast"):
        if not hasattr(comm, attr):
            raise _error(f"runtime.comm.from_mpi: comm must be an mpi4py communicator, got {type(comm).__name__}")
    rank, size = comm.Get_rank(), comm.Get_size()
    uid = get_unique_id() if rank == 0 else None
    uid = comm.bcast(uid, root=0)
    return init_rank(size, uid, rank)
