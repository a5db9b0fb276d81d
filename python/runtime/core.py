"""Devices, streams, events and memory of the runtime package: the seed's API over the _core binding.

Lifetimes: every asynchronous enqueue hands the Python objects it uses (host arrays, device memory, kernel
argument buffers) to its stream's keep-alive list. The list is cut into batches; each batch is closed by an
event recorded after its work, and released once that event completes (checked on later calls on the
stream, on synchronize, on alloc/free). Device memory counts the batches that hold it, so `free` of memory
still used by queued work only marks it freed and the real rtFree happens when the last batch is released.
"""

from __future__ import annotations

import atexit
import collections
import re
import threading
import weakref
from typing import Any, Iterable, Optional, Union

import numpy as np

from . import _core
from .errors import (Error, InvalidDeviceError, InvalidValueError, NotReadyError, OutOfMemoryError, make_error)

# ----------------------------------------------------------------------------------------------- devices

_DEVICE_RE = re.compile(r"^\s*([A-Za-z_]+)\s*(?::\s*(\d+))?\s*$")
_devices_cache: Optional[list] = None
_tls = threading.local()


def init(options: Optional[str] = None, **kwargs: Any) -> None:
    """Initialise the runtime (optional: every call initialises on first use).

    `options` is the C API's "key=value;..." string; keyword arguments are appended to it
    (cpu_devices=2, cpu_memory="1G", executors=2).
    """
    parts = [options] if options else []
    for key, value in kwargs.items():
        if key not in ("cpu_devices", "cpu_memory", "executors"):
            raise make_error(InvalidValueError, f"init: unknown option {key!r} (expected cpu_devices, cpu_memory, executors)")
        parts.append(f"{key}={value}")
    _core.init(";".join(parts) if parts else None)


def finalize() -> None:
    """Wait for all work and release every resource of the runtime; all handles become invalid."""
    global _devices_cache
    _release_all_streams()
    _Event._pools.clear()
    _core.finalize()
    _devices_cache = None
    _default_streams.clear()


def get_device_count() -> int:
    """Number of devices over all backends (cpu devices first)."""
    return _core.get_device_count()


class DeviceProperties:
    """Properties of one device: name, backend, total_memory, compute_units, device_index, backend_ordinal, ..."""

    name: str
    backend: str
    total_memory: int
    compute_units: int
    device_index: int
    backend_ordinal: int
    max_threads_per_block: int
    max_grid_size: tuple
    max_block_size: tuple
    compute_capability: tuple
    unified_addressing: bool

    def __init__(self, fields: dict) -> None:
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return (f"DeviceProperties(name={self.name!r}, backend={self.backend!r}, total_memory={self.total_memory}, "
                f"compute_units={self.compute_units}, device_index={self.device_index})")


def _all_devices() -> list:
    global _devices_cache
    if _devices_cache is None:
        _devices_cache = [DeviceProperties(_core.get_device_properties(i)) for i in range(_core.get_device_count())]
    return _devices_cache


def _device_index(spec: Any) -> int:
    """Device index from an int, a string "cpu", "cpu:0", "cuda:1", or a Device."""
    if isinstance(spec, Device):
        return spec.index
    if isinstance(spec, (bool, np.bool_)):
        raise make_error(InvalidDeviceError, f"device must be an int, a string like 'cpu:0' or a Device, got {spec!r}")
    if isinstance(spec, (int, np.integer)):
        n = get_device_count()
        if not 0 <= int(spec) < n:
            raise make_error(InvalidDeviceError, f"no device {int(spec)} (there are {n}: indices 0..{n - 1})")
        return int(spec)
    if isinstance(spec, str):
        m = _DEVICE_RE.match(spec)
        devs = _all_devices()
        if m:
            backend, ordinal = m.group(1).lower(), int(m.group(2) or 0)
            for p in devs:
                if p.backend == backend and p.backend_ordinal == ordinal:
                    return p.device_index
        names = ", ".join(f"{p.backend}:{p.backend_ordinal}" for p in devs)
        raise make_error(InvalidDeviceError, f"no device {spec!r} (available: {names})")
    raise make_error(InvalidDeviceError,
                     f"device must be an int, a string like 'cpu:0' or a Device, got {type(spec).__name__}")


class Device:
    """A device, named like "cpu:0" or "cuda:0". As a context manager it makes itself the thread's current
    device and restores the previous one on exit."""

    __slots__ = ("index", "_saved")

    def __init__(self, spec: Any = None) -> None:
        self.index = _core.get_device() if spec is None else _device_index(spec)
        self._saved: list = []

    @property
    def properties(self) -> DeviceProperties:
        return _all_devices()[self.index]

    @property
    def backend(self) -> str:
        return self.properties.backend

    @property
    def name(self) -> str:
        """The short name: "cpu:0", "cuda:1"."""
        p = self.properties
        return f"{p.backend}:{p.backend_ordinal}"

    def synchronize(self) -> None:
        """Wait for all work on every stream of this device."""
        with self:
            _prune_all()
            _core.device_synchronize()
            _release_all_streams(self.index)

    def __enter__(self) -> "Device":
        self._saved.append(_core.get_device())
        _core.set_device(self.index)
        return self

    def __exit__(self, *exc: Any) -> None:
        _core.set_device(self._saved.pop())

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Device) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("runtime.Device", self.index))

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"runtime.Device({self.name!r})"


def device(spec: Any = None) -> Device:
    """The device `spec` (int, "cpu:0", "cuda:0", Device); the current one if None. Usable with `with`."""
    return Device(spec)


def set_device(spec: Any) -> None:
    """Make `spec` (int, "cpu:0", "cuda:0" or Device) the calling thread's current device."""
    _core.set_device(_device_index(spec))


def get_device() -> int:
    """Index of the calling thread's current device."""
    return _core.get_device()


def current_device() -> Device:
    """The calling thread's current device."""
    return Device(None)


def get_device_properties(spec: Any = None) -> DeviceProperties:
    """Properties of device `spec` (int, "cpu:0", Device; the current device if None)."""
    idx = _core.get_device() if spec is None else _device_index(spec)
    return _all_devices()[idx]


def synchronize() -> None:
    """Wait for all work on every stream of the current device; raises its first asynchronous failure."""
    current_device().synchronize()


def mem_get_info() -> tuple:
    """(free, total) bytes of the current device."""
    return _core.mem_get_info()


# ----------------------------------------------------------------------------------------------- events


class _Event:
    """Pool of untimed events used to close keep-alive batches (creating one per batch would cost more)."""

    _pools: dict = {}

    @classmethod
    def take(cls, device_index: int) -> int:
        pool = cls._pools.setdefault(device_index, [])
        return pool.pop() if pool else _core.event_create(_core.EVENT_DISABLE_TIMING)

    @classmethod
    def give(cls, device_index: int, handle: int) -> None:
        cls._pools.setdefault(device_index, []).append(handle)


class Event:
    """A marker in a stream: `stream.record(event)`, `other.wait(event)`, `query()`, `synchronize()`,
    `elapsed_time(end)` (ms; both events must be recorded, completed and created with enable_timing=True)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False) -> None:
        flags = 0 if enable_timing else _core.EVENT_DISABLE_TIMING
        if blocking:
            flags |= _core.EVENT_BLOCKING_SYNC
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self.device = current_device()
        self._recorded = False
        self._handle = 0
        self._handle = _core.event_create(flags)

    @property
    def handle(self) -> int:
        if not self._handle:
            raise make_error(InvalidValueError, "the event was destroyed")
        return self._handle

    def record(self, stream: Optional["Stream"] = None) -> "Event":
        """Record on `stream` (the current stream if None); returns self."""
        (stream or current_stream()).record(self)
        return self

    def query(self) -> bool:
        """True if the recorded work has completed (or the event was never recorded)."""
        return _core.event_query(self.handle)

    def synchronize(self) -> None:
        """Block until the recorded work has completed."""
        _core.event_synchronize(self.handle)

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event to `end`; both recorded, completed and timed."""
        if not isinstance(end, Event):
            raise make_error(InvalidValueError, f"elapsed_time: end must be a runtime.Event, got {type(end).__name__}")
        for name, ev in (("start", self), ("end", end)):
            if not ev.enable_timing:
                raise make_error(InvalidValueError,
                                 f"elapsed_time: the {name} event was created without timing "
                                 f"(use runtime.Event(enable_timing=True))")
            if not ev._recorded:
                raise make_error(InvalidValueError, f"elapsed_time: the {name} event was never recorded")
            if not ev.query():
                raise make_error(NotReadyError,
                                 f"elapsed_time: the {name} event has not completed yet "
                                 f"(call end.synchronize() or stream.synchronize() first)")
        return float(_core.event_elapsed_time(self.handle, end.handle))

    def close(self) -> None:
        """Destroy the event now (also done when it is garbage-collected)."""
        h, self._handle = self._handle, 0
        if h:
            try:
                _core.event_destroy(h)
            except Error:
                pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"runtime.Event(enable_timing={self.enable_timing}, handle={self._handle:#x})"


# ----------------------------------------------------------------------------------------------- streams

_live_streams: "weakref.WeakSet[Stream]" = weakref.WeakSet()
_default_streams: dict = {}
_BATCH = 32  # enqueues per keep-alive batch: one event record per batch, not per enqueue


class Stream:
    """An in-order asynchronous queue on a device (the current one by default).

    Every launch_* returns before the work is done; synchronize() waits and raises the first asynchronous
    failure. As a context manager the stream becomes the thread's current stream until exit.
    """

    def __init__(self, device: Any = None, non_blocking: bool = False, *, _default_of: Optional[int] = None) -> None:
        self._handle = 0
        self._lock = threading.Lock()
        self._pending: collections.deque = collections.deque()  # (event handle, [objects])
        self._batch: list = []
        self._saved: list = []
        if _default_of is not None:
            self.device = Device(_default_of)
            self._is_default = True
        else:
            self.device = Device(device)
            self._is_default = False
            with self.device:
                self._handle = _core.stream_create(_core.STREAM_NON_BLOCKING if non_blocking else 0)
        _live_streams.add(self)

    @property
    def handle(self) -> int:
        """The rtStream_t as an int (0 = the device's default stream)."""
        if not self._handle and not self._is_default:
            raise make_error(InvalidValueError, "the stream was destroyed")
        return self._handle

    # ---- lifetimes
    # The open batch is a list of per-enqueue object lists, appended as they come (no per-object work on the
    # launch path). Closing it (every _BATCH enqueues, or on demand) records its event, reduces it to its unique
    # objects and counts one use per device memory; releasing a closed batch undoes those counts. Memory in the
    # open batch is therefore not yet counted: free() closes open batches that hold it before looking at _uses.
    def _keep(self, objs: Iterable) -> None:
        """Keep `objs` alive until the work enqueued so far on this stream has completed."""
        flat: list = []
        for o in objs:
            if isinstance(o, tuple):
                flat.extend(o)
            else:
                flat.append(o)
        self._keep_mems(flat)

    def _keep_mems(self, objs: list) -> None:
        """Keep the objects of the list `objs` (which the stream takes over) alive until the work enqueued so far
        has completed."""
        with self._lock:
            b = self._batch
            b.append(objs)
            if len(b) >= _BATCH:  # prune only here: an event query per enqueue would cost more
                self._close_batch()
                self._prune_locked()

    def _close_batch(self) -> None:
        if not self._batch:
            return
        ev = _Event.take(self.device.index)
        _core.event_record(ev, self._handle)
        unique: dict = {}
        for objs in self._batch:
            for o in objs:
                unique[id(o)] = o
        held = list(unique.values())
        for o in held:
            if isinstance(o, DeviceMemory):
                o._uses += 1
        self._pending.append((ev, held))
        self._batch = []

    def _prune_locked(self) -> None:
        while self._pending:
            ev, objs = self._pending[0]
            if not _core.event_query(ev):
                break
            self._pending.popleft()
            _Event.give(self.device.index, ev)
            _release(objs)

    def _prune(self, flush: bool = False) -> None:
        """Release batches whose work completed; `flush` first closes the open batch with an event."""
        with self._lock:
            if flush:
                self._close_batch()
            self._prune_locked()

    def _release_everything(self) -> None:
        """All work of the stream is known complete: release every batch (the open one was never counted)."""
        with self._lock:
            batches = [objs for _, objs in self._pending]
            for ev, _ in self._pending:
                _Event.give(self.device.index, ev)
            self._pending.clear()
            self._batch = []
        for objs in batches:
            _release(objs)

    def _holds_open(self, mem: "DeviceMemory") -> bool:
        """Whether the open (not yet counted) batch holds `mem`."""
        with self._lock:
            return any(mem is o for objs in self._batch for o in objs)

    def _busy_with(self, mem: "DeviceMemory") -> bool:
        with self._lock:
            return any(mem is o for objs in self._batch for o in objs) or any(
                mem is o for _, objs in self._pending for o in objs)

    # ---- operations
    def launch_kernel(self, kernel: Any, *args: Any, global_size: Any = None, local_size: Any = None) -> None:
        """Queue `kernel(*args)` over `global_size` work-items (default: the element count of the first buffer
        argument) in groups of `local_size` (default 256 in 1-D). Tuples give 2-D/3-D shapes."""
        if global_size is None and local_size is None:
            # Fast path (@runtime.jit, same argument types as the previous default-shaped launch): one C++ call
            # checks, packs and launches; None means "not launched, take the full path" (see jit.JitKernel).
            plan = getattr(kernel, "_last_plan", None)
            if plan is not None and plan.device == self.device.index and kernel._compiled_mode():
                keep = plan.launch(args, self.handle)
                if keep is not None:
                    if keep:
                        self._keep_mems(keep)
                    return
        launch = getattr(kernel, "_launch", None)
        if launch is None:
            raise make_error(InvalidValueError,
                             f"launch_kernel: kernel must be a @runtime.jit function or a runtime.Function, "
                             f"got {type(kernel).__name__}")
        launch(self, args, global_size, local_size)

    def launch_copy(self, dst: Any, src: Any, direction: Optional[str] = None, nbytes: Optional[int] = None) -> None:
        """Queue a copy of `src` into `dst` (destination first); direction "H2D"/"D2H"/"D2D"/"H2H" or inferred.
        Host operands are kept alive until the copy has completed."""
        d, s, kind, n = _prepare_copy("launch_copy", dst, src, direction, nbytes)
        if n:
            _core.memcpy_async(d.ptr, s.ptr, n, kind, self.handle)
            self._keep((d.keep, s.keep))
        _after_copy(d, s)

    def memset(self, mem: "DeviceMemory", value: int, nbytes: Optional[int] = None) -> None:
        """Queue setting `nbytes` (default all) bytes of `mem` to `value` (0..255)."""
        n = _check_memset(mem, value, nbytes)
        _core.memset_async(mem.ptr, int(value), n, self.handle)
        self._keep((mem,))

    def launch_host_func(self, fn: Any) -> None:
        """Queue a Python callable (no arguments) after the work queued so far. It must not synchronize the
        runtime; an exception it raises is reported by the next synchronize()/query() as a LaunchError."""
        if not callable(fn):
            raise make_error(InvalidValueError, f"launch_host_func: fn must be callable, got {type(fn).__name__}")
        _core.launch_host_func(self.handle, fn)

    def record(self, event: Optional[Event] = None) -> Event:
        """Record `event` (a new one if None) after the work queued so far; returns it."""
        if event is None:
            event = Event()
        elif not isinstance(event, Event):
            raise make_error(InvalidValueError, f"record: expected a runtime.Event, got {type(event).__name__}")
        _core.event_record(event.handle, self.handle)
        event._recorded = True
        return event

    def wait(self, event: Event) -> None:
        """Work queued on this stream after this call waits for `event` (never blocks the host)."""
        if not isinstance(event, Event):
            raise make_error(InvalidValueError, f"wait: expected a runtime.Event, got {type(event).__name__}")
        _core.stream_wait_event(self.handle, event.handle)

    wait_event = wait

    def synchronize(self) -> None:
        """Block until all queued work has completed; raises the stream's first asynchronous failure."""
        try:
            _core.stream_synchronize(self.handle)
        finally:
            self._release_everything()

    def query(self) -> bool:
        """True if all queued work has completed; raises a pending asynchronous failure."""
        done = _core.stream_query(self.handle)
        if done:
            self._release_everything()
        return done

    # ---- context manager, destruction
    def __enter__(self) -> "Stream":
        stack = _stream_stack()
        stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        stack = _stream_stack()
        if stack and stack[-1] is self:
            stack.pop()

    def close(self) -> None:
        """Wait for the queued work, then destroy the stream (also done when it is garbage-collected)."""
        h, self._handle = self._handle, 0
        if h:
            try:
                _core.stream_destroy(h)
            finally:
                self._release_everything()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        what = "default" if self._is_default else f"{self._handle:#x}"
        return f"runtime.Stream({what}, device={self.device.name!r})"


def _stream_stack() -> list:
    stack = getattr(_tls, "streams", None)
    if stack is None:
        stack = _tls.streams = []
    return stack


def default_stream(device: Any = None) -> Stream:
    """The default stream of `device` (the current device if None)."""
    idx = _core.get_device() if device is None else _device_index(device)
    s = _default_streams.get(idx)
    if s is None:
        s = _default_streams[idx] = Stream(_default_of=idx)
    return s


def current_stream() -> Stream:
    """The innermost stream entered with `with stream:` on this thread, else the current device's default."""
    stack = _stream_stack()
    return stack[-1] if stack else default_stream()


def _release(objs: Iterable) -> None:
    """Undo a closed batch's counts: `objs` are its unique objects."""
    for o in objs:
        if isinstance(o, DeviceMemory):
            o._uses -= 1
            if o._uses == 0 and o._deferred_free:
                o._free_now()


def _prune_all(flush: bool = False) -> None:
    for s in list(_live_streams):
        s._prune(flush)


def _release_all_streams(device_index: Optional[int] = None) -> None:
    for s in list(_live_streams):
        if device_index is None or s.device.index == device_index:
            s._release_everything()


@atexit.register
def _at_exit() -> None:
    # Queued host functions and deferred frees must finish while the interpreter is still whole.
    for s in list(_live_streams):
        try:
            s.synchronize()
        except Exception:
            pass


# ----------------------------------------------------------------------------------------------- memory

_DLPACK_CODES = {"i": 0, "u": 1, "f": 2, "b": 6, "c": 5}
_DEFAULT_DTYPE = np.dtype(np.float32)  # SPEC §3: untyped memory is indexed as float32


class DeviceMemory:
    """Device memory from runtime.alloc: `ptr`, `nbytes`, `device`, `dtype` (float32 unless typed at alloc or by
    a typed host copy into it), `size` (elements of dtype), DLPack export (`numpy.from_dlpack(mem)` is a
    zero-copy view on the cpu device)."""

    def __init__(self, ptr: int, nbytes: int, device: Device, dtype: Optional[np.dtype]) -> None:
        self._ptr = ptr
        self.nbytes = nbytes
        self.device = device
        self._dtype = dtype
        self._uses = 0  # closed keep-alive batches holding this memory (see Stream._close_batch)
        self._deferred_free = False
        self._freed = False

    # ---- attributes
    @property
    def ptr(self) -> int:
        """The device address as an int; raises if the memory was freed."""
        if self._freed or self._deferred_free:
            raise make_error(InvalidValueError, f"device memory {self._ptr:#x} ({self.nbytes} bytes) was freed")
        return self._ptr

    @property
    def dtype(self) -> np.dtype:
        return self._dtype if self._dtype is not None else _DEFAULT_DTYPE

    @property
    def typed(self) -> bool:
        """Whether the dtype was given (alloc, typed copy) rather than the float32 default."""
        return self._dtype is not None

    @property
    def size(self) -> int:
        """Number of elements of `dtype`."""
        return self.nbytes // self.dtype.itemsize

    @property
    def shape(self) -> tuple:
        return (self.size,)

    @property
    def freed(self) -> bool:
        return self._freed or self._deferred_free

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        state = " freed" if self.freed else ""
        return (f"runtime.DeviceMemory(ptr={self._ptr:#x}, nbytes={self.nbytes}, dtype={self.dtype}, "
                f"device={self.device.name!r}{state})")

    # ---- conversions
    def view(self, dtype: Any) -> "DeviceMemory":
        """Set the element type used by kernels and DLPack (the bytes are unchanged); returns self."""
        dt = np.dtype(dtype)
        if self.nbytes % dt.itemsize:
            raise make_error(InvalidValueError,
                             f"view: {self.nbytes} bytes are not a whole number of {dt} elements ({dt.itemsize} bytes)")
        self._dtype = dt
        return self

    def numpy(self) -> np.ndarray:
        """A host copy (synchronous) as a 1-D numpy array of `dtype`."""
        out = np.empty(self.size, dtype=self.dtype)
        copy(out, self)
        return out

    def __dlpack_device__(self) -> tuple:
        p = self.device.properties
        if p.backend == "cuda":
            return (2, p.backend_ordinal)  # kDLCUDA
        return (1, 0)  # kDLCPU: cpu device memory is host memory

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[tuple] = None, dl_device: Any = None,
                   copy: Optional[bool] = None) -> Any:
        """A DLPack capsule viewing this memory as a 1-D array of `dtype` (versioned if the consumer asks)."""
        if copy:
            raise BufferError("runtime.DeviceMemory.__dlpack__: copy=True is not supported (export is zero-copy)")
        mine = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != mine:
            raise BufferError(f"runtime.DeviceMemory.__dlpack__: memory is on DLPack device {mine}, "
                              f"cannot export to {tuple(dl_device)}")
        dt = self.dtype
        if dt.kind not in _DLPACK_CODES:
            raise BufferError(f"runtime.DeviceMemory.__dlpack__: dtype {dt} has no DLPack code")
        # The consumer reads right away: queued work that touches this memory must have completed.
        for s in list(_live_streams):
            if s._busy_with(self):
                s.synchronize()
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return _core.make_dlpack(self.ptr, [self.size], _DLPACK_CODES[dt.kind], dt.itemsize * 8, mine[0], mine[1],
                                 self, versioned)

    # ---- release
    def _free_now(self) -> None:
        if not self._freed:
            self._freed = True
            if self._ptr:
                _core.free(self._ptr)

    def free(self) -> None:
        """Free now, or as soon as the queued work that uses it completes. Freeing twice is an error."""
        if self._freed or self._deferred_free:
            raise make_error(InvalidValueError, f"free: device memory {self._ptr:#x} ({self.nbytes} bytes) "
                                                f"was already freed")
        if self._uses or any(st._holds_open(self) for st in list(_live_streams)):
            _prune_all(flush=True)  # counts the open batches' uses, releases what completed
        if self._uses:
            self._deferred_free = True  # _release frees it when the last batch holding it completes
        else:
            self._free_now()

    def __del__(self) -> None:
        try:
            if not self._freed and self._uses == 0:
                self._free_now()
        except Exception:
            pass


def _as_dtype(dtype: Any, what: str) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise make_error(InvalidValueError, f"{what}: {dtype!r} is not a dtype ({e})") from None
    if dt.kind not in "biuf" or dt.itemsize > 8:
        raise make_error(InvalidValueError,
                         f"{what}: dtype {dt} is not supported (expected bool, int8..int64, uint8..uint64, "
                         f"float32 or float64)")
    return dt


def _check_size(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise make_error(InvalidValueError, f"{what} must be an int, got {type(value).__name__}")
    if value < 0:
        raise make_error(InvalidValueError, f"{what} = {value} is negative")
    return int(value)


def alloc(nbytes: int, dtype: Any = None, device: Any = None) -> DeviceMemory:
    """Allocate `nbytes` of device memory on `device` (the current device if None). `dtype` types it for kernels
    and DLPack; untyped memory is used as float32 until a typed host copy sets its dtype."""
    n = _check_size(nbytes, "alloc: nbytes")
    dt = None if dtype is None else _as_dtype(dtype, "alloc")
    if dt is not None and n % dt.itemsize:
        raise make_error(InvalidValueError,
                         f"alloc: nbytes = {n} is not a whole number of {dt} elements ({dt.itemsize} bytes each)")
    dev = Device(device)
    _prune_all()
    with dev:
        try:
            ptr = _core.malloc(n)
        except OutOfMemoryError:
            # Memory whose free waits on completed work can be released now; then try once more.
            _prune_all(flush=True)
            ptr = _core.malloc(n)
    return DeviceMemory(ptr, n, dev, dt)


def empty(shape: Any, dtype: Any = np.float32, device: Any = None) -> DeviceMemory:
    """Typed device memory for `shape` elements (an int or a tuple; the memory itself is 1-D)."""
    dt = _as_dtype(dtype, "empty")
    count = int(np.prod(shape)) if isinstance(shape, tuple) else _check_size(shape, "empty: shape")
    return alloc(count * dt.itemsize, dt, device)


def to_device(host: Any, stream: Optional[Stream] = None, device: Any = None) -> DeviceMemory:
    """New device memory holding a copy of the host array `host` (typed like it); synchronous unless `stream`."""
    h = _host_operand(host, "to_device: host", writable=False)
    mem = alloc(h.array.nbytes, h.array.dtype if h.array.dtype.kind in "biuf" else None, device)
    if stream is None:
        copy(mem, h.array)
    else:
        stream.launch_copy(mem, h.array)
    return mem


def free(mem: DeviceMemory) -> None:
    """Free device memory from alloc. Memory still used by queued work is freed when that work completes."""
    if not isinstance(mem, DeviceMemory):
        raise make_error(InvalidValueError, f"free: expected runtime.DeviceMemory (from runtime.alloc), "
                                            f"got {type(mem).__name__}")
    mem.free()


# ----------------------------------------------------------------------------------------------- copies


class _Operand:
    __slots__ = ("kind", "ptr", "nbytes", "array", "mem", "keep", "desc")

    def __init__(self, kind: str, ptr: int, nbytes: int, array: Any, mem: Any, keep: Any, desc: str) -> None:
        self.kind, self.ptr, self.nbytes, self.array, self.mem, self.keep, self.desc = \
            kind, ptr, nbytes, array, mem, keep, desc


def _host_operand(obj: Any, role: str, writable: bool) -> _Operand:
    arr = None
    original = obj
    if isinstance(obj, np.ndarray):
        arr = obj
    elif hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        dev = obj.__dlpack_device__()
        if int(dev[0]) not in (1, 3):  # kDLCPU, kDLCUDAHost
            raise make_error(InvalidValueError, f"{role}: a DLPack object on device {tuple(dev)} is neither host "
                                                f"memory nor runtime device memory")
        arr = np.from_dlpack(obj)
    else:
        try:
            mv = memoryview(obj)
        except TypeError:
            raise make_error(InvalidValueError,
                             f"{role}: expected runtime device memory (runtime.alloc) or a host array "
                             f"(numpy, buffer protocol or DLPack), got {type(obj).__name__}") from None
        arr = np.asarray(mv)
        if mv.format == "B":
            arr = arr.view(np.uint8)
    if writable:
        if not arr.flags.writeable:
            raise make_error(InvalidValueError, f"{role}: the host array is read-only")
        if not arr.flags.c_contiguous:
            raise make_error(InvalidValueError,
                             f"{role}: the host destination is not C-contiguous (use numpy.ascontiguousarray)")
    elif not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)  # a source may be made contiguous; kept alive with the copy
    desc = f"a host {type(original).__module__}.{type(original).__name__} ({arr.dtype}, shape {arr.shape}, " \
           f"{arr.nbytes} bytes)"
    return _Operand("host", arr.ctypes.data if arr.nbytes else 0, arr.nbytes, arr, None, (original, arr), desc)


def _operand(obj: Any, role: str, writable: bool) -> _Operand:
    if isinstance(obj, DeviceMemory):
        ptr = obj.ptr  # raises if freed
        desc = f"device memory on {obj.device.name} ({obj.nbytes} bytes)"
        return _Operand("device", ptr, obj.nbytes, None, obj, obj, desc)
    return _host_operand(obj, role, writable)


_DIRECTIONS = {
    "H2D": ("device", "host", _core.MEMCPY_HOST_TO_DEVICE),
    "D2H": ("host", "device", _core.MEMCPY_DEVICE_TO_HOST),
    "D2D": ("device", "device", _core.MEMCPY_DEVICE_TO_DEVICE),
    "H2H": ("host", "host", _core.MEMCPY_HOST_TO_HOST),
}
_BY_KINDS = {(v[0], v[1]): (k, v[2]) for k, v in _DIRECTIONS.items()}


def _prepare_copy(api: str, dst: Any, src: Any, direction: Optional[str], nbytes: Optional[int]) -> tuple:
    if direction is not None and (not isinstance(direction, str) or direction.upper() not in _DIRECTIONS):
        raise make_error(InvalidValueError,
                         f"{api}: direction {direction!r} is not one of 'H2D', 'D2H', 'D2D', 'H2H' (or None: inferred)")
    d = _operand(dst, f"{api}: dst", writable=True)
    s = _operand(src, f"{api}: src", writable=False)
    name, kind = _BY_KINDS[(d.kind, s.kind)]
    if direction is not None and direction.upper() != name:
        want = _DIRECTIONS[direction.upper()]
        raise make_error(InvalidValueError,
                         f"{api}: direction {direction!r} contradicts the operands: dst is {d.desc} and src is "
                         f"{s.desc}, which is {name}; {direction} needs dst on the {want[0]} and src on the "
                         f"{want[1]} (the destination comes first: copy(dst, src))")
    if nbytes is None:
        n = s.nbytes
    else:
        n = _check_size(nbytes, f"{api}: nbytes")
        if n > s.nbytes:
            raise make_error(InvalidValueError, f"{api}: nbytes = {n} exceeds the source ({s.desc})")
    if n > d.nbytes:
        raise make_error(InvalidValueError,
                         f"{api}: the source has {n} bytes but the destination holds only {d.nbytes} "
                         f"(dst is {d.desc}, src is {s.desc})")
    return d, s, kind, n


def _after_copy(d: _Operand, s: _Operand) -> None:
    # SPEC §3: a typed copy into untyped device memory gives it the source's dtype.
    if d.mem is not None and d.mem._dtype is None:
        if s.array is not None and s.array.dtype.kind in "biuf" and s.array.dtype.itemsize <= 8 \
                and d.mem.nbytes % s.array.dtype.itemsize == 0 and not isinstance(s.keep[0], (bytes, bytearray)):
            d.mem._dtype = s.array.dtype
        elif s.mem is not None and s.mem._dtype is not None and d.mem.nbytes % s.mem._dtype.itemsize == 0:
            d.mem._dtype = s.mem._dtype


def copy(dst: Any, src: Any, direction: Optional[str] = None, nbytes: Optional[int] = None) -> None:
    """Synchronous copy of `src` into `dst` (destination first). `direction` is "H2D", "D2H", "D2D", "H2H" or None
    (inferred); one that contradicts the operands raises InvalidValueError. Copies src.nbytes (or `nbytes`)."""
    d, s, kind, n = _prepare_copy("copy", dst, src, direction, nbytes)
    if n:
        _core.memcpy(d.ptr, s.ptr, n, kind)
    _after_copy(d, s)


def _check_memset(mem: Any, value: Any, nbytes: Optional[int]) -> int:
    if not isinstance(mem, DeviceMemory):
        raise make_error(InvalidValueError, f"memset: expected runtime.DeviceMemory, got {type(mem).__name__}")
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= int(value) <= 255:
        raise make_error(InvalidValueError, f"memset: value must be an int in 0..255, got {value!r}")
    n = mem.nbytes if nbytes is None else _check_size(nbytes, "memset: nbytes")
    if n > mem.nbytes:
        raise make_error(InvalidValueError, f"memset: nbytes = {n} exceeds the memory ({mem.nbytes} bytes)")
    return n


def memset(mem: DeviceMemory, value: int, nbytes: Optional[int] = None) -> None:
    """Synchronously set `nbytes` (default all) bytes of `mem` to `value` (0..255)."""
    n = _check_memset(mem, value, nbytes)
    _core.memset(mem.ptr, int(value), n)
