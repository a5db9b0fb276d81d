"""Devices, streams, events and memory of the runtime package: the seed's API over the _core binding.

Lifetimes: every asynchronous enqueue hands the Python objects it uses (host arrays, device memory, kernel
arguments) to the core timeline in the same binding call (rtStreamDeferRelease): they are dropped once the stream
has passed that work. `free` and the finalizers never wait: rtFree, rtFreeHost, rtHostUnregister and
rtStreamDestroy leave memory that queued work still uses to the core, which releases it when that work completes.
"""

from __future__ import annotations

import atexit
import math
import threading
import weakref
from typing import Any, Optional, Union

import numpy as np

from . import _core
from .errors import (Error, InvalidDeviceError, InvalidValueError, NotReadyError, OutOfMemoryError, make_error)

# ----------------------------------------------------------------------------------------------- devices

_devices_cache: Optional[list] = None
_tls = threading.local()


def init(options: Optional[str] = None, **kwargs: Any) -> None:
    """Initialise the runtime (optional: every call initialises on first use).

    `options` is the C API's "key=value;..." string (rtInit: `cpu.devices=2;cuda.enable=0;backend=cuda`); keyword
    arguments are appended to it, a backend's name and its key joined by "_" (cpu_devices=2, cpu_memory="1G",
    cpu_executors=2, cpu_stream_min_bytes="32M", cuda_enable=0) and `backend="cuda"` (the cuda devices come first,
    so device 0 is cuda:0 when a GPU is present). The library checks every key and value: an unknown one raises
    InvalidValueError listing the known keys.
    """
    parts = [options] if options else []
    for key, value in kwargs.items():
        backend, _, rest = key.partition("_")
        if rest and backend in ("cpu", "cuda"):
            key = f"{backend}.{rest}"  # the prefixed spelling: cpu_devices -> cpu.devices
        parts.append(f"{key}={value}")
    _core.init(";".join(parts) if parts else None)


def finalize() -> None:
    """Wait for all work and release every resource of the runtime; all handles become invalid."""
    global _devices_cache
    _core.finalize()  # runs every pending release, then drops what they hand back
    _devices_cache = None
    _default_streams.clear()
    _registered.clear()  # the registrations end with the runtime


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
    local_memory_per_group: int  # bytes of local memory (RT_LOCAL arrays + shared_bytes) one work-group may use

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
        # One parser for every face (rtGetDeviceByName): "cuda:0" without a GPU says why cuda is unavailable.
        return _core.get_device_by_name(spec)
    raise make_error(InvalidDeviceError,
                     f"device must be an int, a string like 'cpu:0' or a Device, got {type(spec).__name__}")


class Device:
    """A device, named like "cpu:0" or "cuda:0". As a context manager it makes itself the calling thread's current
    device and restores that thread's previous one on exit (the saved devices are per thread: one Device object
    may be entered by several threads at once)."""

    __slots__ = ("index",)

    def __init__(self, spec: Any = None) -> None:
        self.index = _core.get_device() if spec is None else _device_index(spec)

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
            _core.device_synchronize()

    def __enter__(self) -> "Device":
        saved = getattr(_tls, "devices", None)
        if saved is None:
            saved = _tls.devices = []
        saved.append(_core.get_device())
        _core.set_device(self.index)
        return self

    def __exit__(self, *exc: Any) -> None:
        _core.set_device(_tls.devices.pop())

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Device) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("runtime.Device", self.index))

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"runtime.Device({self.name!r})"


_device_objs: list = []  # Device per index, shared by the memory objects (no Device made per allocation)


def _device_obj(index: int) -> Device:
    while len(_device_objs) <= index:
        d = Device.__new__(Device)
        d.index = len(_device_objs)
        _device_objs.append(d)
    return _device_objs[index]


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


def _timeout_ms(timeout: Any, what: str) -> Optional[int]:
    """A timeout in seconds as the C API's milliseconds (None: no limit); rounded up, so a short wait still waits."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.integer, np.floating)) or timeout != timeout:
        raise make_error(InvalidValueError, f"{what}: timeout must be a number of seconds or None, got {timeout!r}")
    if timeout < 0:
        raise make_error(InvalidValueError, f"{what}: timeout {timeout} is negative (expected seconds >= 0, or None)")
    return int(min(math.ceil(float(timeout) * 1000.0), 2**31 - 1))


class Event:
    """A marker in a stream: `stream.record(event)`, `other.wait(event)`, `query()`, `synchronize()`,
    `elapsed_time(end)` (ms; both events must be recorded, completed and created with enable_timing=True).
    `interprocess=True`: shareable with another process (`ipc_handle()` there, `Event.from_ipc_handle(handle)`
    here); records in either process are what query, synchronize and waits in both see (no timing)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        flags = 0 if enable_timing else _core.EVENT_DISABLE_TIMING
        if blocking:
            flags |= _core.EVENT_BLOCKING_SYNC
        if interprocess:
            flags |= _core.EVENT_INTERPROCESS
        self.interprocess = bool(interprocess)
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

    def ipc_handle(self) -> bytes:
        """The 64-byte handle another process opens with Event.from_ipc_handle (rtIpcGetEventHandle)."""
        return _core.ipc_get_event_handle(self.handle)

    @classmethod
    def from_ipc_handle(cls, handle: Any) -> "Event":
        """The event another process exported with ipc_handle(), on the current device (rtIpcOpenEventHandle)."""
        from .ipc import _check_handle
        data = _check_handle(handle, "Event.from_ipc_handle")
        ev = cls.__new__(cls)
        ev.interprocess, ev.enable_timing, ev.blocking = True, False, False
        ev.device = current_device()
        ev._recorded = False
        ev._handle = 0
        ev._handle = _core.ipc_open_event_handle(data)
        return ev

    def record(self, stream: Optional["Stream"] = None) -> "Event":
        """Record on `stream` (the current stream if None); returns self."""
        (stream or current_stream()).record(self)
        return self

    def query(self) -> bool:
        """True if the recorded work has completed (or the event was never recorded)."""
        return _core.event_query(self.handle)

    def synchronize(self, timeout: Optional[float] = None) -> None:
        """Block until the recorded work has completed; `timeout` (seconds): raise runtime.TimeoutError once it has
        passed."""
        ms = _timeout_ms(timeout, "Event.synchronize")
        if ms is None:
            _core.event_synchronize(self.handle)
        else:
            _core.event_synchronize_timeout(self.handle, ms)

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


class Stream:
    """An in-order asynchronous queue on a device (the current one by default).

    Every launch_* returns before the work is done; synchronize() waits and raises the first asynchronous
    failure. As a context manager the stream becomes the thread's current stream until exit. The Python objects
    an enqueue uses (host arrays, device memory) are kept alive on the core timeline (rtStreamDeferRelease) until
    the stream has passed that work.
    """

    def __init__(self, device: Any = None, non_blocking: bool = False, priority: int = 0, *,
                 _default_of: Optional[int] = None) -> None:
        self._handle = 0
        self._non_blocking = bool(non_blocking) and _default_of is None
        if _default_of is not None:
            self.device = _device_obj(_default_of)
            self._is_default = True
        else:
            if isinstance(priority, bool) or not isinstance(priority, (int, np.integer)):
                raise make_error(InvalidValueError, f"Stream: priority must be an int (numerically lower runs first; "
                                                    f"see runtime.get_stream_priority_range()), got {priority!r}")
            self.device = Device(device)
            self._is_default = False
            flags = _core.STREAM_NON_BLOCKING if non_blocking else 0
            with self.device:
                self._handle = (_core.stream_create_with_priority(flags, int(priority)) if priority
                                else _core.stream_create(flags))
        self._index = self.device.index
        _live_streams.add(self)

    @property
    def handle(self) -> int:
        """The rtStream_t as an int (0 = the current device's default stream: a default stream's handle is only
        given out while its device is the thread's current one, so work never lands on another device's queue)."""
        if self._is_default:
            if _core.get_device() != self._index:
                raise make_error(InvalidDeviceError,
                                 f"the default stream of {self.device.name} is used while the thread's current device "
                                 f"is {current_device().name} (enter `with runtime.device({self._index}):` first)")
            return 0
        if not self._handle:
            raise make_error(InvalidValueError, "the stream was destroyed")
        return self._handle

    @property
    def non_blocking(self) -> bool:
        """True for a stream made with non_blocking=True (RT_STREAM_NON_BLOCKING): it is not ordered with the legacy
        default stream (synchronous copies and fills do not wait for it, and it does not wait for them)."""
        return self._non_blocking

    # ---- operations
    def launch_kernel(self, kernel: Any, *args: Any, global_size: Any = None, local_size: Any = None) -> None:
        """Queue `kernel(*args)` over `global_size` work-items (default: the element count of the first buffer
        argument) in groups of `local_size` (default 256 in 1-D). Tuples give 2-D/3-D shapes."""
        if global_size is None and local_size is None:
            # Fast path (@runtime.jit, same argument types as the previous default-shaped launch): one C++ call
            # checks, packs, launches and keeps the arguments alive; None means "not launched, take the full path".
            plan = getattr(kernel, "_last_plan", None)
            if plan is not None and plan.device == self._index and kernel._compiled_mode():
                if plan.launch(args, self.handle) is not None:
                    return
        launch = getattr(kernel, "_launch", None)
        if launch is None:
            raise make_error(InvalidValueError,
                             f"launch_kernel: kernel must be a @runtime.jit function or a runtime.Function, "
                             f"got {type(kernel).__name__}")
        launch(self, args, global_size, local_size)

    def launch_copy(self, dst: Any, src: Any, direction: Optional[str] = None, nbytes: Optional[int] = None) -> None:
        """Queue a copy of `src` into `dst` (destination first); direction "H2D"/"D2H"/"D2D"/"H2H" or inferred.
        Both operands are kept alive until the copy has completed."""
        if direction is None and nbytes is None:
            # Fast path: device memory and a numpy array, checked and queued by one binding call (False: take the
            # full path, which explains the refusal).
            td, ts = type(dst), type(src)
            # Taken only when the sides agree (same bytes; typed: same dtype and shape) and the memory is plain.
            if td is DeviceMemory and ts is np.ndarray and not dst._freed and dst.nbytes == src.nbytes and \
                    (dst._ext is None or not dst._ext.special):
                dt = dst._dtype
                if dt is None or ((dt is src.dtype or dt == src.dtype) and dst._shape == src.shape):
                    if _core.memcpy_array_async(dst._ptr, dst.nbytes, src, True, self._handle or self.handle,
                                                (dst, src)):
                        if dt is None:
                            _adopt(dst, src.dtype, src.shape, True)
                        return
            elif ts is DeviceMemory and td is np.ndarray and not src._freed and dst.nbytes == src.nbytes and \
                    (src._ext is None or not src._ext.special):
                dt = src._dtype
                if dt is None or ((dt is dst.dtype or dt == dst.dtype) and src._shape == dst.shape):
                    if _core.memcpy_array_async(src._ptr, src.nbytes, dst, False, self._handle or self.handle,
                                                (dst, src)):
                        return
        d, s, kind, n = _prepare_copy("launch_copy", dst, src, direction, nbytes)
        if n:
            _core.memcpy_async(d.ptr, s.ptr, n, kind, self.handle, (d.keep, s.keep))
        _after_copy(d, s, nbytes is None)

    def memset(self, mem: "DeviceMemory", value: int, nbytes: Optional[int] = None) -> None:
        """Queue setting `nbytes` (default all) bytes of `mem` to `value` (0..255)."""
        n = _check_memset(mem, value, nbytes)
        _core.memset_async(mem.ptr, int(value), n, self.handle, mem)

    def launch_host_func(self, fn: Any) -> None:
        """Queue a Python callable (no arguments) after the work queued so far. It runs on a runtime thread, in
        queue context: a call that would wait for its own stream (stream.synchronize(), a device synchronize)
        raises NotPermittedError inside it. An exception it raises is reported by the next synchronize()/query()
        as a LaunchError."""
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

    def synchronize(self, timeout: Optional[float] = None) -> None:
        """Block until all queued work has completed; raises the stream's first asynchronous failure. `timeout`
        (seconds): raise runtime.TimeoutError instead once it has passed (the work stays queued)."""
        ms = _timeout_ms(timeout, "Stream.synchronize")
        if self._is_default and _core.get_device() != self._index:
            with self.device:
                if ms is None:
                    _core.stream_synchronize(0)
                else:
                    _core.stream_synchronize_timeout(0, ms)
            return
        if ms is None:
            _core.stream_synchronize(self.handle)
        else:
            _core.stream_synchronize_timeout(self.handle, ms)

    @property
    def priority(self) -> int:
        """The priority the stream was created with (clamped into runtime.get_stream_priority_range())."""
        if self._is_default:
            return 0
        return _core.stream_get_priority(self.handle)

    def query(self) -> bool:
        """True if all queued work has completed; raises a pending asynchronous failure."""
        if self._is_default and _core.get_device() != self._index:
            with self.device:
                return _core.stream_query(0)
        return _core.stream_query(self.handle)

    # ---- capture (runtime.graph)
    def begin_capture(self, mode: str = "global") -> None:
        """Start capturing: the work queued on this stream from now on (copies, memsets, kernels, host functions,
        event records and waits, stream-ordered allocations) becomes nodes of a graph instead of running, until
        end_capture(). `mode` ("global", "thread_local" or "relaxed") says which calls the capture forbids
        meanwhile (runtime.graph)."""
        code = _capture_mode_code(mode, "begin_capture")
        _core.stream_begin_capture(self.handle, code)
        _active_captures[self.handle] = (mode, threading.get_ident())

    def end_capture(self) -> "Graph":
        """End the capture begun by begin_capture() and return its runtime.Graph. An invalidated capture raises
        StreamCaptureInvalidatedError naming what broke it, a stream left unjoined StreamCaptureUnjoinedError; the
        capture is over either way."""
        from .graph import Graph
        h = self.handle
        try:
            g = _core.stream_end_capture(h)
        finally:
            _capture_may_have_ended(h)
        return Graph._adopt(g, self.device)

    def capture(self, mode: str = "global") -> "_Capture":
        """`with stream.capture() as graph:` captures the block: `graph` (a runtime.Graph) holds its nodes once the
        block exits. An exception in the block ends the capture, drops its graph and propagates."""
        _capture_mode_code(mode, "capture")
        return _Capture(self, mode)

    @property
    def is_capturing(self) -> bool:
        """Whether the stream is being captured (also after an error invalidated the capture, until it ends)."""
        if self._is_default:
            return False
        return _core.stream_get_capture_info(self.handle)[0] != 0

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
        """Destroy the stream (also done when it is garbage-collected). Never waits: the work already queued
        still runs, and the objects it uses stay alive until it has."""
        h, self._handle = self._handle, 0
        if h:
            _core.stream_destroy(h)
            if h in _active_captures:
                _capture_may_have_ended(h, destroyed=True)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        what = "default" if self._is_default else f"{self._handle:#x}"
        return f"runtime.Stream({what}, device={self.device.name!r})"


_CAPTURE_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}

# The captures begun through this package: {stream handle: (mode, thread id)}. While one forbids rtFree on a thread
# (graph.h's rules), a DeviceMemory finalized there is freed when the capture ends instead (_deferred_frees): a
# garbage collection during a capture must not invalidate it. An explicit free() still fails, as in C.
_active_captures: dict = {}
_deferred_frees: list = []


def _capture_mode_code(mode: Any, what: str) -> int:
    code = _CAPTURE_MODES.get(mode) if isinstance(mode, str) else None
    if code is None:
        raise make_error(InvalidValueError, f"{what}: mode must be one of 'global', 'thread_local', 'relaxed', "
                                            f"got {mode!r}")
    return code


def _thread_capture_mode() -> str:
    return getattr(_tls, "capture_mode", "global")


def _free_forbidden() -> bool:
    """Whether rtFree would be refused on this thread by a capture begun through this package."""
    mine = _thread_capture_mode()
    if mine == "relaxed":
        return False
    me = threading.get_ident()
    for mode, tid in list(_active_captures.values()):
        if mode != "relaxed" and tid == me:
            return True
        if mode == "global" and mine == "global":
            return True
    return False


def _capture_may_have_ended(handle: int, destroyed: bool = False) -> None:
    """Forget the capture of stream `handle` if it is over (an end_capture that failed may have ended it or not),
    then free what waited for it."""
    over = destroyed
    if not over:
        try:
            over = _core.stream_get_capture_info(handle)[0] == 0
        except Error:
            over = True  # not a live stream: no capture either
    if over:
        _active_captures.pop(handle, None)
        _free_deferred()


def _free_deferred() -> None:
    """Free the memory finalized while a capture forbade it, once no capture does."""
    while _deferred_frees and not _free_forbidden():
        mem = _deferred_frees.pop()
        try:
            mem._release(finalizing=True)
        except Exception:
            pass


class _Capture:
    """The context manager of stream.capture(): begins on entry, gives the graph (filled at exit)."""

    def __init__(self, stream: Stream, mode: str) -> None:
        from .graph import Graph
        self.stream, self.mode = stream, mode
        self.graph = Graph._pending(stream.device)

    def __enter__(self) -> "Graph":
        self.stream.begin_capture(self.mode)
        return self.graph

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is None:
            self.graph._take(self.stream.end_capture())
            return False
        try:
            self.stream.end_capture().close()
        except Error:
            pass  # the block's own exception is the one to see; the capture is over either way
        return False


class thread_capture_mode:
    """`with runtime.thread_capture_mode("relaxed"):` sets the calling thread's capture mode for the block
    (rtThreadExchangeStreamCaptureMode): which calls a capture under way in another thread forbids here. Typical
    use: "relaxed" around an allocation a helper thread must make while another thread captures."""

    def __init__(self, mode: str) -> None:
        self.code = _capture_mode_code(mode, "thread_capture_mode")
        self.mode = mode
        self.saved: list = []

    def __enter__(self) -> "thread_capture_mode":
        self.saved.append((_core.thread_exchange_capture_mode(self.code), _thread_capture_mode()))
        _tls.capture_mode = self.mode
        return self

    def __exit__(self, *exc: Any) -> None:
        code, mode = self.saved.pop()
        _core.thread_exchange_capture_mode(code)
        _tls.capture_mode = mode
        _free_deferred()


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


def _entered_stream() -> Optional[Stream]:
    """The stream of the innermost `with stream:` on this thread unless it is a default stream (None: the
    synchronous calls take their usual path, the legacy default stream's)."""
    stack = getattr(_tls, "streams", None)
    if stack:
        st = stack[-1]
        if not st._is_default:
            return st
    return None


def _busy_streams(index: int) -> list:
    """The live streams of device `index` that still have queued work."""
    return [s for s in list(_live_streams)
            if s._index == index and (s._handle or s._is_default) and not s.query()]


def _settle(mem: "DeviceMemory") -> None:
    """Wait for the queued work of every stream of `mem`'s device (work that may touch `mem` must be done before
    a consumer reads it outside the runtime, e.g. through DLPack)."""
    for s in _busy_streams(mem.device.index):
        s.synchronize()


def _release_after_queued_work(index: int, hold: Any) -> None:
    """Let go of `hold` (its destructor releases what it holds) once the work queued so far on device `index` has
    completed, as rtFree does for the runtime's own memory: every stream of the device keeps it through
    rtStreamDeferRelease (an idle stream lets go at once), so it goes when the last one has passed its current
    work. No stream is queried: a query would consume a pending asynchronous failure that synchronize() must report."""
    if _exiting:
        hold.release()  # every device was synchronized at exit, and the timeline no longer drops references
        return
    streams = [s for s in list(_live_streams) if s._index == index and s._handle]
    with _device_obj(index):
        _core.defer_release(0, hold)  # the device's default stream
        for s in streams:
            _core.defer_release(s._handle, hold)
    del hold
    _core.drain_releases()  # what was released at once (idle streams) goes now, on this thread


_exiting = False


@atexit.register
def _at_exit() -> None:
    global _exiting
    # Queued host functions and releases must finish while the interpreter is still whole; after this the
    # binding leaves Python objects alone (a late release leaks its reference rather than touch a dying
    # interpreter).
    # Every device, not only the live Stream objects: a destroyed stream runs what it had queued (rtStreamDestroy
    # does not wait), and stays on its device's list until then.
    try:
        current = _core.get_device()
        for d in range(_core.get_device_count()):
            _core.set_device(d)
            try:
                _core.device_synchronize()
            except Exception:
                pass
        _core.set_device(current)
    except Exception:
        pass
    _exiting = True
    _core.python_exiting()


# ----------------------------------------------------------------------------------------------- memory
#
# Typed device memory: a DeviceMemory has a shape, strides (bytes, numpy's convention) and a dtype fixed at
# creation when it is typed (empty, zeros, to_device, alloc(nbytes, dtype=...), view, from_dlpack). Memory from an
# untyped alloc(nbytes) is a flat float32 buffer until the first typed host copy into it gives it that array's
# dtype and shape (SPEC §3); after that it is typed like any other. Copies never convert or reshape: both sides
# must agree (view() reinterprets explicitly).

_DEFAULT_DTYPE = np.dtype(np.float32)  # SPEC §3: untyped memory is indexed as float32
_H2D, _D2H = _core.MEMCPY_HOST_TO_DEVICE, _core.MEMCPY_DEVICE_TO_HOST
_SUPPORTED_WORDS = ("bool, int8..int64, uint8..uint64, float16, float32, float64, complex64, complex128 "
                    "(and ml_dtypes.bfloat16)")


def _storage_dtype(dt: np.dtype) -> bool:
    """Whether device memory may carry dtype `dt`: the element types of DLPack (bool, ints, IEEE floats, complex,
    bfloat16) in native byte order."""
    if not dt.isnative or dt.fields is not None or dt.subdtype is not None:
        return False
    k, n = dt.kind, dt.itemsize
    return ((k == "b" and n == 1) or (k in "iu" and n in (1, 2, 4, 8)) or (k == "f" and n in (2, 4, 8))
            or (k == "c" and n in (8, 16)) or (dt.name == "bfloat16" and n == 2))


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    out, step = [], itemsize
    for d in reversed(shape):
        out.append(step)
        step *= max(d, 1)
    return tuple(reversed(out))


def _prod(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class _MemExtra:
    """The rarely used parts of a DeviceMemory, kept out of the common object (every plain allocation has none):
    the stream of alloc(stream=...); for map_host the host objects aliased and the registration it made; for a
    view its base (the owner of the memory); for an owner its live views, its live DLPack exports and whether a
    free waits for them; for imported memory (from_dlpack) the producer's hold; and the flags that keep it off the
    copy fast path (read-only, non-contiguous, foreign host memory)."""

    __slots__ = ("stream", "host", "host_registered", "mapped", "base", "views", "exports", "release_pending",
                 "imported", "foreign_host", "readonly", "special", "cai", "captured", "cai_exported")

    def __init__(self) -> None:
        self.stream: Optional[weakref.ref] = None
        self.host: Any = None
        self.host_registered = 0
        self.mapped = False
        self.base: Optional[DeviceMemory] = None
        self.views: Optional[list] = None  # weak references to the views of this owner
        self.exports = 0
        self.release_pending = False
        self.imported: Any = None  # from_dlpack: the producer's hold (its deleter runs when this is released)
        self.foreign_host = False  # imported host memory the runtime did not allocate (copies: kind inferred)
        self.readonly = False
        self.special = False  # off the launch_copy fast path
        self.cai: Optional[dict] = None  # the __cuda_array_interface__ dict, made on first use (cuda memory)
        self.captured = False  # alloc(stream=s) while s was capturing: an allocation node's memory, the graph's
        # The owner's memory (or a view of it) went out through __cuda_array_interface__: its consumers (CuPy, Numba,
        # PyTorch) keep the exporting object alive instead of calling back, so free() leaves the release to the owner's
        # finalisation, when the last of them has let go.
        self.cai_exported = False


class DeviceMemory:
    """Device memory: `ptr`, `nbytes` (the bytes its elements occupy from ptr on: size * itemsize, except for
    strided imports, whose span it is), `device`, `shape`, `strides` (bytes), `dtype`, `ndim`, `size` (elements),
    `itemsize`. Typed memory (empty, zeros, to_device, alloc(nbytes, dtype=...), view, from_dlpack) has its shape
    and dtype fixed for life; memory from an untyped alloc(nbytes) is a flat float32 buffer until the first typed
    host copy into it gives it the source's dtype and shape. A copy never converts or reshapes (both sides must
    agree; view() reinterprets the bytes without copying).

    Interop: DLPack (`numpy.from_dlpack(mem)`, `torch.from_dlpack(mem)`: zero-copy, n-d with strides, versioned
    protocol), `__cuda_array_interface__` v3 on cuda memory, `numpy()` (or `numpy.asarray(mem)`, through __array__) for a host copy.

    Arrays (CuPy's names): `mem[10:20]`, `mem[::2]`, `mem[1:, :3]`, `mem[2]` are views (basic indexing: ints,
    slices with positive steps, ..., None); `mem[key] = value` fills or copies into such a view; `fill`, `copy`,
    `astype`; runtime.empty_like / zeros_like. Synchronous operations run on the current stream (`with stream:`).

    Freed by runtime.free or when garbage-collected; either never waits (rtFree defers the release of memory that
    queued work still uses until that work has completed). A view keeps its base alive; freeing the base makes
    every view report freed. Memory exported through DLPack stays allocated until the consumer lets go of it,
    even if it is freed here first (it reports freed at once; the release waits for the consumer)."""

    # Slots: alloc/free are on hot paths, and a small fixed object is cheaper to make and to drop.
    __slots__ = ("_ptr", "nbytes", "device", "_dtype", "_shape", "_strides", "_freed", "_ext", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, device: Device, dtype: Optional[np.dtype],
                 ext: Optional[_MemExtra] = None, shape: Optional[tuple] = None,
                 strides: Optional[tuple] = None) -> None:
        self._ptr = ptr
        self.nbytes = nbytes
        self.device = device
        self._dtype = dtype
        # typed memory always has a shape; untyped (dtype None) has none until a typed copy gives it one
        self._shape = shape if shape is not None or dtype is None else (nbytes // dtype.itemsize,)
        self._strides = strides  # None: C-contiguous
        self._freed = False
        self._ext = ext

    # ---- attributes
    @property
    def ptr(self) -> int:
        """The device address of the first element as an int; raises if the memory was freed."""
        if self._freed:
            raise make_error(InvalidValueError, f"device memory {self._ptr:#x} ({self.nbytes} bytes) was freed"
                                                + (" (through its base)" if self.is_view else ""))
        return self._ptr

    @property
    def dtype(self) -> np.dtype:
        """The element type (float32 for untyped memory)."""
        return self._dtype if self._dtype is not None else _DEFAULT_DTYPE

    @property
    def typed(self) -> bool:
        """Whether the dtype and shape are fixed (given at creation, or by a typed host copy into untyped memory)."""
        return self._dtype is not None

    @property
    def shape(self) -> tuple:
        """Elements per dimension (untyped memory: (nbytes // 4,), float32)."""
        s = self._shape
        return s if s is not None else (self.nbytes // 4,)

    @property
    def strides(self) -> tuple:
        """Bytes between consecutive elements of each dimension (numpy's convention; C order unless imported or
        viewed otherwise)."""
        s = self._strides
        return s if s is not None else _c_strides(self.shape, self.dtype.itemsize)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return _prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def is_contiguous(self) -> bool:
        """Whether the elements are packed in C order (only imported memory and its views can be otherwise)."""
        return self._strides is None

    @property
    def is_view(self) -> bool:
        """Whether this object is a view() of another DeviceMemory (which owns the memory)."""
        return self._ext is not None and self._ext.base is not None

    @property
    def base(self) -> Optional["DeviceMemory"]:
        """The DeviceMemory that owns the memory of a view; None for an owner."""
        return self._ext.base if self._ext is not None else None

    @property
    def readonly(self) -> bool:
        """Whether the memory may not be written (imported from a read-only DLPack tensor): copies and memset into
        it are refused, and so is passing it to a kernel parameter the kernel may write (every memory argument of
        a runtime.Function, whose parameters' constness is unknown): pass a writable copy."""
        return self._ext is not None and self._ext.readonly

    @property
    def freed(self) -> bool:
        return self._freed

    def __len__(self) -> int:
        s = self.shape
        if not s:
            raise TypeError("len() of a 0-d runtime.DeviceMemory")
        return s[0]

    @property
    def mapped(self) -> bool:
        """Whether this is host memory mapped for the device (runtime.map_host) rather than an allocation."""
        return self._ext is not None and self._ext.mapped

    def __repr__(self) -> str:
        flags = ""
        if not self.typed:
            flags += ", untyped"
        if self.mapped:
            flags += ", mapped host"
        if self.is_view:
            flags += ", view"
        if self._ext is not None and self._ext.imported is not None:
            flags += ", imported"
        if self.readonly:
            flags += ", read-only"
        if self._freed:
            flags += ", freed"
        strides = "" if self._strides is None else f", strides={self._strides}"
        return (f"runtime.DeviceMemory(shape={self.shape}, dtype={self.dtype}{strides}, "
                f"device={self.device.name!r}{flags})")

    # ---- conversions
    def view(self, dtype: Any = None, shape: Any = None) -> "DeviceMemory":
        """A new DeviceMemory over the same bytes (no copy) typed `dtype` (default: this memory's) with `shape`
        (an int or tuple; one dimension may be -1, inferred as in numpy). Without `shape`, the shape is kept, or
        for another itemsize the last dimension is rescaled (numpy's view rule; untyped memory is a flat byte
        buffer). The total number of bytes must be the same. This object keeps its own type; the view keeps it
        alive, and reports freed once it is freed. A non-contiguous memory can only be viewed with a dtype of the
        same itemsize and its own shape."""
        ptr = self.ptr  # raises if freed
        dt = self.dtype if dtype is None else _as_dtype(dtype, "view")
        if not self.is_contiguous and (dt.itemsize != self.itemsize or
                                       (shape is not None and tuple(shape if isinstance(shape, (tuple, list)) else
                                                                     (shape,)) != self.shape)):
            # (its nbytes is the span of its elements, not a size to reshape)
            raise make_error(InvalidValueError,
                             f"view: {self._describe()} is not contiguous (strides {self.strides}): it can only be "
                             f"viewed with a dtype of the same itemsize ({self.itemsize}) and its own shape")
        if not self.is_contiguous:
            new_shape = self.shape
        elif shape is None:
            if not self.typed:
                if self.nbytes % dt.itemsize:
                    raise make_error(InvalidValueError, f"view: {self.nbytes} bytes are not a whole number of {dt} "
                                                        f"elements ({dt.itemsize} bytes each)")
                new_shape = (self.nbytes // dt.itemsize,)
            elif dt.itemsize == self.itemsize:
                new_shape = self.shape
            else:
                s = self.shape
                if not s or (s[-1] * self.itemsize) % dt.itemsize:
                    raise make_error(InvalidValueError,
                                     f"view: cannot view {self._describe()} as {dt} without a shape (the last "
                                     f"dimension of {s[-1] * self.itemsize if s else 0} bytes is not a whole number "
                                     f"of {dt.itemsize}-byte elements; give shape=)" if s else
                                     f"view: a 0-d {self.dtype} memory cannot be viewed as {dt} without shape=")
                new_shape = s[:-1] + (s[-1] * self.itemsize // dt.itemsize,)
        else:
            new_shape = _parse_view_shape(shape, self.nbytes, dt, self)
        strides = self._strides  # checked above: a non-contiguous memory keeps its layout
        root = self._root()
        ext = _MemExtra()
        ext.base = root
        rext = root._own_extra()
        ext.readonly = rext.readonly
        ext.foreign_host = rext.foreign_host
        ext.special = strides is not None or rext.special
        v = DeviceMemory(ptr, self.nbytes, self.device, dt, ext, new_shape, strides)
        if rext.views is None:
            rext.views = []
        rext.views = [r for r in rext.views if r() is not None]
        rext.views.append(weakref.ref(v))
        return v

    def _describe(self) -> str:
        what = f"{self.dtype}, shape {self.shape}" if self.typed else "untyped"
        return f"device memory on {self.device.name} ({what}, {self.nbytes} bytes at {self._ptr:#x})"

    def _root(self) -> "DeviceMemory":
        ext = self._ext
        return ext.base if ext is not None and ext.base is not None else self

    def _own_extra(self) -> _MemExtra:
        if self._ext is None:
            self._ext = _MemExtra()
        return self._ext

    def numpy(self) -> np.ndarray:
        """A host copy (synchronous, ordered as runtime.copy: after the work queued on the current stream, or on
        the legacy default stream and every blocking stream) as a C-contiguous numpy array of this memory's shape
        and dtype. A strided view copies the bytes its elements span, then gathers them on the host."""
        if not self.is_contiguous:
            span = np.empty(self.nbytes, dtype=np.uint8)
            copy(span, self._byte_span())
            return np.ndarray(self.shape, self.dtype, buffer=span, strides=self.strides).copy()
        out = np.empty(self.shape, dtype=self.dtype)
        copy(out, self)
        return out

    get = numpy  # CuPy's name

    # ---- arrays: views by basic indexing, fills, copies, conversions
    def _byte_span(self) -> "DeviceMemory":
        """A flat uint8 view of the bytes from ptr to ptr + nbytes (the span of a strided view's elements)."""
        return self._make_view(self.ptr, self.nbytes, np.dtype(np.uint8), (self.nbytes,), None)

    def _make_view(self, ptr: int, nbytes: int, dt: np.dtype, shape: tuple, strides: Optional[tuple]) -> "DeviceMemory":
        root = self._root()
        ext = _MemExtra()
        ext.base = root
        rext = root._own_extra()
        ext.readonly = rext.readonly
        ext.foreign_host = rext.foreign_host
        ext.special = strides is not None or rext.special
        v = DeviceMemory(ptr, nbytes, self.device, dt, ext, shape, strides)
        rext.views = [r for r in (rext.views or ()) if r() is not None]
        rext.views.append(weakref.ref(v))
        return v

    def __getitem__(self, key: Any) -> "DeviceMemory":
        """A view of the elements `key` selects (numpy's basic indexing: ints, slices, ..., None). Integer-array,
        boolean and negative-step indexing are refused (they need a copy, or strides the runtime's copies and
        kernels do not take)."""
        ptr = self.ptr  # raises if freed
        keys = key if isinstance(key, tuple) else (key,)
        for k in keys:
            if k is Ellipsis or k is None or isinstance(k, slice):
                if isinstance(k, slice) and k.step is not None and (not isinstance(k.step, (int, np.integer)) or
                                                                     isinstance(k.step, (bool, np.bool_)) or k.step < 0):
                    raise make_error(InvalidValueError,
                                     f"index {key!r}: step {k.step!r} is not supported (a view takes a positive "
                                     f"step; reverse on the host: mem.numpy()[::-1])")
            elif isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
                raise make_error(InvalidValueError,
                                 f"index {key!r}: {type(k).__name__} indices are not supported (a view takes ints, "
                                 f"slices, ... and None; integer-array and boolean indexing would need a copy)")
        if Ellipsis not in keys:
            keys = keys + (Ellipsis,)  # an all-int index gives a 0-d view, never a read of an element
        # numpy computes the view on a probe of this layout over one byte, never read: offset, shape and strides.
        probe = np.lib.stride_tricks.as_strided(np.zeros(1, dtype=np.uint8), shape=self.shape, strides=self.strides)
        try:
            sub = probe[keys]
        except IndexError as e:
            raise make_error(InvalidValueError, f"index {key!r} on {self._describe()}: {e}") from None
        offset = sub.__array_interface__["data"][0] - probe.__array_interface__["data"][0]
        shape, strides = tuple(sub.shape), tuple(sub.strides)
        size = _prod(shape)
        itemsize = self.itemsize
        nbytes = 0 if size == 0 else itemsize + sum((n - 1) * st for n, st in zip(shape, strides))
        if strides == _c_strides(shape, itemsize) or size <= 1:
            strides_kept = None
            nbytes = size * itemsize
        else:
            strides_kept = strides
        return self._make_view(ptr + offset, nbytes, self.dtype, shape, strides_kept)

    def __setitem__(self, key: Any, value: Any) -> None:
        """`mem[key] = value`: a scalar fills the view (fill), an array is copied into it (same shape and dtype,
        ordered as runtime.copy)."""
        view = self[key]
        if isinstance(value, (int, float, bool, np.generic)):
            view.fill(value)
        else:
            copy(view, value)

    def fill(self, value: Any) -> None:
        """Set every element to `value`, converted to this dtype as numpy's astype converts it (1.7 into an int
        array is 1); an int outside an integer dtype's range is refused. Ordered as runtime.copy: a value whose
        bytes are all equal (0, -1 for ints, 0.0) is one memset, any other a copy from a host array of the value.
        A strided view is refused (fill its base, or assign a host array: mem[key] = array)."""
        if not self.is_contiguous:
            raise make_error(InvalidValueError, f"fill: {self._describe()} is a strided view (strides "
                                                f"{self.strides}); fill its base or a contiguous view")
        if self.readonly:
            raise make_error(InvalidValueError, f"fill: {self._describe()} is read-only")
        v = np.asarray(value)
        if v.ndim != 0 or v.dtype.kind not in "biufc":
            raise make_error(InvalidValueError, f"fill: expected a number, got {value!r} ({type(value).__name__})")
        if v.dtype.kind in "iu" and self.dtype.kind in "iu":
            info = np.iinfo(self.dtype)
            if not info.min <= int(v) <= info.max:
                raise make_error(InvalidValueError, f"fill: {int(v)} does not fit {self.dtype} "
                                                    f"({info.min}..{info.max})")
        with np.errstate(all="ignore"):
            item = v.astype(self.dtype)
        raw = item.tobytes()
        if raw == raw[:1] * len(raw):
            memset(self, raw[0])
        else:
            copy(self, np.full(self.shape, item, dtype=self.dtype))

    def copy(self) -> "DeviceMemory":
        """A new C-contiguous device array with this one's contents, shape and dtype, on the same device (ordered
        as runtime.copy; a strided view is gathered through the host)."""
        out = empty(self.shape, self.dtype, self.device)
        if self.is_contiguous:
            copy(out, self)
        else:
            copy(out, self.numpy())
        return out

    def astype(self, dtype: Any, copy: bool = True) -> "DeviceMemory":
        """This array converted to `dtype` with numpy's casting rules (float to int truncates; casting="unsafe" as
        numpy's default). The same dtype with copy=False returns self. The conversion runs on the host: a
        device-to-host copy, numpy's astype, a host-to-device copy."""
        dt = _as_dtype(dtype, "astype")
        if dt == self.dtype:
            return self.copy() if copy else self
        return to_device(self.numpy().astype(dt), device=self.device)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """numpy.asarray(mem) / numpy.array(mem): a host copy, as numpy() (ordered as runtime.copy). copy=False
        (numpy 2: "never copy") raises ValueError: device memory always needs a copy to reach a numpy array; for a
        zero-copy view of host-addressable (cpu device) memory use numpy.from_dlpack(mem)."""
        if copy is False:
            raise ValueError("runtime.DeviceMemory cannot be converted to a numpy array without a copy (copy=False); "
                             "use numpy.from_dlpack(mem) for a zero-copy view of cpu device memory")
        out = self.numpy()
        return out if dtype is None or np.dtype(dtype) == out.dtype else out.astype(dtype)

    def __dlpack_device__(self) -> tuple:
        from . import interop
        return interop.dlpack_device(self)

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[tuple] = None, dl_device: Any = None,
                   copy: Optional[bool] = None) -> Any:
        """A DLPack capsule viewing this memory (n-d with strides; 'dltensor_versioned' when the consumer passes
        max_version >= (1, 0), else the legacy 'dltensor'). `stream`: the consumer's stream (see runtime.interop);
        `copy=True` exports a copy (on the host when dl_device is kDLCPU). The memory stays allocated until the
        consumer releases the capsule, even if freed here first."""
        from . import interop
        return interop.export_dlpack(self, stream, max_version, dl_device, copy)

    @property
    def __cuda_array_interface__(self) -> dict:
        """CUDA Array Interface v3 (CuPy, Numba, PyTorch) for memory of a cuda device: shape, typestr, strides
        (None when contiguous), data (ptr, read-only), version 3, and stream None: the queued work of the memory's
        device is completed first, so the consumer needs no synchronisation (repeated reads cost a query per
        stream of the device while nothing is queued). Absent (AttributeError) on other devices and for bfloat16,
        which the interface cannot describe (use DLPack)."""
        from . import interop
        return interop.cuda_array_interface(self)

    # ---- release
    def _release(self, finalizing: bool = False) -> None:
        """Give the memory back (never waits), or, while DLPack consumers hold it, once the last lets go; memory
        exported through __cuda_array_interface__, once this object is finalised (`finalizing`: it is)."""
        self._freed = True
        ext = self._ext
        if ext is None:
            if self._ptr:
                _core.free(self._ptr)
            return
        if ext.base is not None:
            return  # a view owns nothing
        if ext.views:
            for r in ext.views:
                v = r()
                if v is not None:
                    v._freed = True
            ext.views = None
        if ext.exports or (ext.cai_exported and not finalizing):
            # The last DLPack export's deleter releases it (_deferred_release_done), or, after __cuda_array_interface__
            # exports, __del__ once no consumer holds this object.
            ext.release_pending = True
            counts = _deferred.setdefault(self.device.index, [0, 0])
            counts[0] += 1
            counts[1] += self.nbytes
            return
        self._release_now()

    def _deferred_release_done(self) -> None:
        """The last DLPack consumer let go of memory freed meanwhile: released now, and no longer counted."""
        counts = _deferred.get(self.device.index)
        if counts is not None:
            counts[0] -= 1
            counts[1] -= self.nbytes
        self._release_now()

    def _release_now(self) -> None:
        """rtFreeAsync on the stream of alloc(stream=...) while it lives, else rtFree; a map_host mapping undoes the
        registration it made (its host objects stay referenced by this object, which queued work keeps alive as
        long as it needs them); imported memory lets go of the producer (its deleter runs)."""
        ext = self._ext
        if ext.imported is not None:
            hold, ext.imported = ext.imported, None
            # Queued kernels may still use the producer's memory (free() never waits): its deleter runs after them.
            _release_after_queued_work(self.device.index, hold)
            return
        if ext.mapped:
            registered, ext.host_registered = ext.host_registered, 0
            if registered:
                _core.host_unregister(registered)
            return
        if not self._ptr:
            return
        stream = ext.stream() if ext.stream is not None else None
        if ext.captured and (stream is None or stream._handle not in _active_captures):
            return  # an allocation node's memory outside its capture: the graph's executable graphs release it
        if stream is not None and (stream._handle or stream._is_default):
            with stream.device:
                _core.free_async(self._ptr, 0 if stream._is_default else stream._handle)
        else:
            _core.free(self._ptr)

    def free(self) -> None:
        """Free now; memory that queued work still uses is released by the runtime once that work has completed
        (alloc(stream=s) memory: ordered on s). Freeing twice is an error; so is freeing a view (free its base)."""
        if self._freed:
            raise make_error(InvalidValueError, f"free: device memory {self._ptr:#x} ({self.nbytes} bytes) "
                                                f"was already freed")
        if self.is_view:
            raise make_error(InvalidValueError, f"free: {self._describe()} is a view; free the memory it views "
                                                f"(mem.base) instead")
        self._release()

    def __del__(self) -> None:
        ext = self._ext
        if self._freed:
            if ext is not None and ext.release_pending:  # freed while __cuda_array_interface__ consumers held it
                ext.release_pending = False
                try:
                    self._deferred_release_done()
                except Exception:
                    pass
            return
        try:
            if _active_captures and _free_forbidden():
                _deferred_frees.append(self)  # freed when the capture ends (see _active_captures)
                return
            self._release(finalizing=True)
        except Exception:
            pass


def _parse_view_shape(shape: Any, nbytes: int, dt: np.dtype, mem: DeviceMemory) -> tuple:
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    out, infer = [], -1
    for i, d in enumerate(dims):
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise make_error(InvalidValueError, f"view: dimension {i} of shape {shape!r} must be an int, got {d!r}")
        d = int(d)
        if d == -1:
            if infer >= 0:
                raise make_error(InvalidValueError, f"view: shape {shape!r} has more than one -1 dimension")
            infer = i
        elif d < 0:
            raise make_error(InvalidValueError, f"view: dimension {i} of shape {shape!r} is negative ({d})")
        out.append(d)
    known = _prod(tuple(d for i, d in enumerate(out) if i != infer)) * dt.itemsize
    if infer >= 0:
        if known == 0 or nbytes % known:
            raise make_error(InvalidValueError, f"view: cannot infer the -1 dimension of shape {shape!r}: "
                                                f"{mem._describe()} is not a whole number of {known}-byte rows")
        out[infer] = nbytes // known
    elif known != nbytes:
        raise make_error(InvalidValueError, f"view: shape {shape!r} of {dt} needs {known} bytes, but "
                                            f"{mem._describe()} has {nbytes} (a view never changes the size)")
    return tuple(out)


def _as_dtype(dtype: Any, what: str) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise make_error(InvalidValueError, f"{what}: {dtype!r} is not a dtype ({e})") from None
    if not _storage_dtype(dt):
        raise make_error(InvalidValueError, f"{what}: dtype {dt} is not supported (expected {_SUPPORTED_WORDS})")
    return dt


_SIZE_MAX = (1 << 64) - 1  # size_t: the C API's sizes


def _check_size(value: Any, what: str) -> int:
    """`value` as a byte or element count: an int (not a bool) in 0..2**64-1, else InvalidValueError naming it."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise make_error(InvalidValueError, f"{what} must be an int, got {value!r} ({type(value).__name__})")
    v = int(value)
    if v < 0:
        raise make_error(InvalidValueError, f"{what} = {v} is negative (expected 0..2**64-1)")
    if v > _SIZE_MAX:
        raise make_error(InvalidValueError, f"{what} = {v} exceeds the largest size, 2**64-1")
    return v


def _shape_tuple(shape: Any, what: str) -> tuple:
    """`shape` (an int or a tuple/list of ints) as a tuple of ints, each checked (an int, not negative)."""
    dims = shape if isinstance(shape, (tuple, list)) else (shape,)
    out = []
    for i, d in enumerate(dims):
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise make_error(InvalidValueError, f"{what}: dimension {i} of shape {shape!r} must be an int, got "
                                                f"{d!r} ({type(d).__name__})")
        if d < 0:
            raise make_error(InvalidValueError, f"{what}: dimension {i} of shape {shape!r} is negative ({int(d)})")
        out.append(int(d))
    return tuple(out)


def _shape_bytes(shape: Any, itemsize: int, what: str) -> int:
    """Bytes of `shape` elements of `itemsize` bytes, computed exactly: each dimension is checked (int, not
    negative) and the product must fit a size_t."""
    total = itemsize * _prod(_shape_tuple(shape, what))  # Python ints: exact, checked once at the end
    if total > _SIZE_MAX:
        raise make_error(InvalidValueError, f"{what}: shape {shape!r} of {itemsize}-byte elements needs {total} "
                                            f"bytes, more than the largest size (2**64-1)")
    return total


def alloc(nbytes: int, dtype: Any = None, device: Any = None, stream: Optional["Stream"] = None) -> DeviceMemory:
    """Allocate `nbytes` of device memory on `device` (the current device if None). With `dtype` it is typed:
    shape (nbytes // itemsize,), and nbytes must be a whole number of elements. Untyped memory (no dtype) is a
    flat float32 buffer until the first typed host copy into it gives it the source's dtype and shape.

    With `stream`, the allocation is stream-ordered (rtMallocAsync): on the stream's device, usable by work
    queued on `stream` from now on (by other streams once ordered after it, e.g. with an event), served from the
    pool when one is enabled; its free is ordered on that stream too."""
    if type(nbytes) is int and dtype is None and device is None and stream is None and 0 <= nbytes <= _SIZE_MAX:
        # Fast path: untyped memory on the current device, one binding call.
        ptr, dev = _core.malloc_current(nbytes)
        return DeviceMemory(ptr, nbytes, _device_objs[dev] if dev < len(_device_objs) else _device_obj(dev), None)
    n = _check_size(nbytes, "alloc: nbytes")
    dt = None if dtype is None else _as_dtype(dtype, "alloc")
    if dt is not None and n % dt.itemsize:
        raise make_error(InvalidValueError,
                         f"alloc: nbytes = {n} is not a whole number of {dt} elements ({dt.itemsize} bytes each)")
    return _allocate(n, dt, None, device, stream)


def _allocate(n: int, dt: Optional[np.dtype], shape: Optional[tuple], device: Any,
              stream: Optional["Stream"]) -> DeviceMemory:
    if stream is not None:
        if not isinstance(stream, Stream):
            raise make_error(InvalidValueError, f"alloc: stream must be a runtime.Stream, got {type(stream).__name__}")
        if device is not None and _device_index(device) != stream.device.index:
            raise make_error(InvalidValueError, f"alloc: device {device!r} is not the stream's device "
                                                f"({stream.device.name})")
        with stream.device:
            ptr = _core.malloc_async(n, 0 if stream._is_default else stream.handle)
        ext = _MemExtra()
        ext.stream = weakref.ref(stream)
        ext.captured = bool(_active_captures) and stream._handle in _active_captures
        return DeviceMemory(ptr, n, stream.device, dt, ext, shape)
    if device is None:
        ptr, idx = _core.malloc_current(n)
        return DeviceMemory(ptr, n, _device_obj(idx), dt, None, shape)
    dev = Device(device)
    with dev:
        ptr = _core.malloc(n)
    return DeviceMemory(ptr, n, dev, dt, None, shape)


def empty(shape: Any, dtype: Any = np.float32, device: Any = None, stream: Optional["Stream"] = None) -> DeviceMemory:
    """Typed device memory of `shape` (an int, or a tuple or list of ints; () is one element) and `dtype`, C order;
    the contents are undefined. `stream`: stream-ordered, as alloc(stream=...)."""
    dt = _as_dtype(dtype, "empty")
    n = _shape_bytes(shape, dt.itemsize, "empty")
    return _allocate(n, dt, _shape_tuple(shape, "empty"), device, stream)


def zeros(shape: Any, dtype: Any = np.float32, device: Any = None, stream: Optional["Stream"] = None) -> DeviceMemory:
    """empty(shape, dtype) filled with zeros: queued on `stream` (which also orders the allocation), else on the
    current stream (`with stream:`), else synchronously."""
    mem = empty(shape, dtype, device, stream)
    if mem.nbytes:
        fill_on = stream if stream is not None else _entered_stream()
        if fill_on is None:
            with mem.device:
                _core.memset(mem._ptr, 0, mem.nbytes)
        else:
            fill_on.memset(mem, 0)
    return mem


def _like(a: Any, dtype: Any, shape: Any, what: str) -> tuple:
    if isinstance(a, DeviceMemory):
        dt, sh, dev = a.dtype, a.shape, a.device
    elif isinstance(a, np.ndarray):
        dt, sh, dev = a.dtype, a.shape, None
    else:
        raise make_error(InvalidValueError, f"{what}: expected runtime.DeviceMemory or a numpy array, got "
                                            f"{type(a).__name__}")
    return (dt if dtype is None else dtype), (sh if shape is None else shape), dev


def empty_like(a: Any, dtype: Any = None, shape: Any = None) -> DeviceMemory:
    """Uninitialised typed memory with `a`'s dtype and shape (or those given), C order, on `a`'s device (a numpy
    array: the current device)."""
    dt, sh, dev = _like(a, dtype, shape, "empty_like")
    return empty(sh, dt, dev)


def zeros_like(a: Any, dtype: Any = None, shape: Any = None) -> DeviceMemory:
    """empty_like(a) filled with zeros (ordered as zeros())."""
    dt, sh, dev = _like(a, dtype, shape, "zeros_like")
    return zeros(sh, dt, dev)


def to_device(host: Any, stream: Optional[Stream] = None, device: Any = None) -> DeviceMemory:
    """New device memory holding a C-contiguous copy of the host array `host`, with its shape and dtype (a raw
    bytes-like object gives untyped memory; a list, tuple or scalar is converted by numpy.asarray first, with
    numpy's dtype: [1, 2, 3] is int64, [1.0] float64); synchronous unless `stream` (ordered as copy())."""
    if isinstance(host, (list, tuple, int, float, bool, np.generic)) and not isinstance(host, np.ndarray):
        try:
            host = np.asarray(host)
        except ValueError as e:
            raise make_error(InvalidValueError, f"to_device: host is a list or tuple numpy cannot convert ({e})") from None
        if host.dtype == object:
            raise make_error(InvalidValueError, "to_device: host is a list or tuple that numpy converts to an object "
                                                "array (ragged or not numbers)")
    h = _host_operand(host, "to_device: host", writable=False)
    if h.dtype is not None and not _storage_dtype(h.dtype):
        raise make_error(InvalidValueError, f"to_device: dtype {h.dtype} is not supported (expected "
                                            f"{_SUPPORTED_WORDS})")
    mem = _allocate(h.nbytes, h.dtype, h.shape if h.dtype is not None else None, device, None)
    if stream is None:
        copy(mem, h.keep[0])
    else:
        stream.launch_copy(mem, h.keep[0])
    return mem


def free(mem: DeviceMemory) -> None:
    """Free device memory from alloc (or a map_host mapping, or memory imported by from_dlpack: its producer is let
    go). Never waits: memory still used by queued work is released by the runtime once that work has completed,
    memory exported through DLPack once its consumer lets go, and memory exported through __cuda_array_interface__
    once no consumer holds the exporting object (the interface has no release call: consumers keep that object)."""
    if type(mem) is DeviceMemory and mem._ext is None and not mem._freed:
        mem._freed = True  # the common case, inlined: a plain allocation
        _core.free(mem._ptr)
        return
    if not isinstance(mem, DeviceMemory):
        raise make_error(InvalidValueError, f"free: expected runtime.DeviceMemory (from runtime.alloc), "
                                            f"got {type(mem).__name__}")
    mem.free()


# ----------------------------------------------------------------------------------------------- copies


class _Operand:
    """One side of a copy: its kind ("host"/"device"), address, bytes, and its element type and shape (None for
    untyped device memory and raw bytes-like host objects: a byte image, checked by size only)."""

    __slots__ = ("kind", "ptr", "nbytes", "array", "mem", "keep", "desc", "dtype", "shape")

    def __init__(self, kind: str, ptr: int, nbytes: int, array: Any, mem: Any, keep: Any, desc: str,
                 dtype: Optional[np.dtype], shape: Optional[tuple]) -> None:
        self.kind, self.ptr, self.nbytes, self.array, self.mem, self.keep, self.desc = \
            kind, ptr, nbytes, array, mem, keep, desc
        self.dtype, self.shape = dtype, shape


def _raw_bytes(obj: Any, mv: Optional[memoryview]) -> bool:
    """Whether a host object is a byte image without an element type (bytes, bytearray, a 'B'/'c' buffer)."""
    return isinstance(obj, (bytes, bytearray)) or (mv is not None and mv.format in ("B", "c"))


def _host_operand(obj: Any, role: str, writable: bool) -> _Operand:
    arr = None
    mv = None
    original = obj
    if isinstance(obj, np.ndarray):
        arr = obj
    elif hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        dev = obj.__dlpack_device__()
        if int(dev[0]) not in (1, 3):  # kDLCPU, kDLCUDAHost
            raise make_error(InvalidValueError, f"{role}: a DLPack object on device {tuple(dev)} is neither host "
                                                f"memory nor runtime device memory (import it with "
                                                f"runtime.from_dlpack first)")
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
    raw = _raw_bytes(original, mv)
    what = "bytes" if raw else f"{arr.dtype}, shape {arr.shape}"
    desc = f"a host {type(original).__module__}.{type(original).__name__} ({what}, {arr.nbytes} bytes)"
    return _Operand("host", arr.ctypes.data if arr.nbytes else 0, arr.nbytes, arr, None, (original, arr), desc,
                    None if raw else arr.dtype, None if raw else arr.shape)


def _operand(obj: Any, role: str, writable: bool) -> _Operand:
    if isinstance(obj, DeviceMemory):
        ptr = obj.ptr  # raises if freed
        if not obj.is_contiguous:
            raise make_error(InvalidValueError, f"{role}: {obj._describe()} is not contiguous (strides "
                                                f"{obj.strides}); copies move contiguous memory only")
        if writable and obj.readonly:
            raise make_error(InvalidValueError, f"{role}: {obj._describe()} is read-only (imported from a read-only "
                                                f"DLPack tensor)")
        desc = obj._describe()
        return _Operand("device", ptr, obj.nbytes, None, obj, obj, desc, obj._dtype, obj._shape)
    return _host_operand(obj, role, writable)


_DIRECTIONS = {
    "H2D": ("device", "host", _core.MEMCPY_HOST_TO_DEVICE),
    "D2H": ("host", "device", _core.MEMCPY_DEVICE_TO_HOST),
    "D2D": ("device", "device", _core.MEMCPY_DEVICE_TO_DEVICE),
    "H2H": ("host", "host", _core.MEMCPY_HOST_TO_HOST),
}
_BY_KINDS = {(v[0], v[1]): (k, v[2]) for k, v in _DIRECTIONS.items()}


def _check_types(api: str, d: _Operand, s: _Operand, n: int, whole: bool) -> None:
    """A copy never converts or reshapes: typed operands must have the same dtype and, for a whole copy (no
    nbytes=), the same shape; a whole copy moves every byte of both sides (a partial one needs nbytes=)."""
    if d.dtype is not None and s.dtype is not None and d.dtype != s.dtype:
        raise make_error(InvalidValueError,
                         f"{api}: dtype mismatch: the destination is {d.dtype} but the source is {s.dtype} (dst is "
                         f"{d.desc}, src is {s.desc}); a copy never converts: convert the host array, or "
                         f"reinterpret the device bytes with mem.view(dtype=...)")
    if not whole:
        return
    if d.dtype is not None and s.dtype is not None and d.shape != s.shape:
        raise make_error(InvalidValueError,
                         f"{api}: shape mismatch: the destination has shape {d.shape} but the source has shape "
                         f"{s.shape} (dst is {d.desc}, src is {s.desc}); a copy never reshapes: reshape the host "
                         f"array, or use mem.view(shape=...)")
    if n != d.nbytes:
        more = "holds only" if n > d.nbytes else "has"
        raise make_error(InvalidValueError,
                         f"{api}: the source has {n} bytes but the destination {more} {d.nbytes} (dst is {d.desc}, "
                         f"src is {s.desc}); a copy without nbytes= moves the whole source into the whole "
                         f"destination: pass nbytes= for a partial copy")


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
                             f"{api}: nbytes = {n} but the destination holds only {d.nbytes} bytes (dst is {d.desc}, "
                             f"src is {s.desc})")
    _check_types(api, d, s, n, nbytes is None)
    # Imported host memory (from_dlpack of a kDLCPU tensor) is not a runtime allocation: the library infers the
    # direction from its registry, which sees it as the host memory it is.
    if (d.mem is not None and d.mem._ext is not None and d.mem._ext.foreign_host) or \
            (s.mem is not None and s.mem._ext is not None and s.mem._ext.foreign_host):
        kind = _core.MEMCPY_DEFAULT
    return d, s, kind, n


def _adopt(mem: DeviceMemory, dt: np.dtype, shape: tuple, whole: bool) -> None:
    """SPEC §3: a typed copy into untyped device memory gives it the source's dtype, and, for a whole copy, its
    shape (a partial copy: a flat shape over the whole memory)."""
    if not _storage_dtype(dt):
        return
    if whole and _prod(shape) * dt.itemsize == mem.nbytes:
        mem._dtype, mem._shape = dt, tuple(shape)
    elif mem.nbytes % dt.itemsize == 0:
        mem._dtype, mem._shape = dt, (mem.nbytes // dt.itemsize,)


def _after_copy(d: _Operand, s: _Operand, whole: bool) -> None:
    if d.mem is not None and d.mem._dtype is None and s.dtype is not None:
        _adopt(d.mem, s.dtype, s.shape, whole)


def copy(dst: Any, src: Any, direction: Optional[str] = None, nbytes: Optional[int] = None) -> None:
    """Synchronous copy of `src` into `dst` (destination first). `direction` is "H2D", "D2H", "D2D", "H2H" or None
    (inferred); one that contradicts the operands raises InvalidValueError. Without `nbytes` the whole source is
    copied into the whole destination: typed sides must have the same dtype and shape, and the byte counts must be
    equal; with `nbytes`, that many bytes (the dtypes must still agree). Untyped device memory takes the dtype and
    shape of the first typed source copied into it.

    Ordering: on the current stream (`with stream:`), which the copy is queued on and then synchronized (its
    earlier failures are raised); else on the legacy default stream, after the work queued on it and on every
    blocking stream of the device (runtime.Stream() unless non_blocking=True)."""
    st = _entered_stream()
    if st is not None:
        st.launch_copy(dst, src, direction, nbytes)
        st.synchronize()
        return
    d, s, kind, n = _prepare_copy("copy", dst, src, direction, nbytes)
    if n:
        _core.memcpy(d.ptr, s.ptr, n, kind)
    _after_copy(d, s, nbytes is None)


def _check_memset(mem: Any, value: Any, nbytes: Optional[int]) -> int:
    if not isinstance(mem, DeviceMemory):
        raise make_error(InvalidValueError, f"memset: expected runtime.DeviceMemory, got {type(mem).__name__}")
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= int(value) <= 255:
        raise make_error(InvalidValueError, f"memset: value must be an int in 0..255, got {value!r}")
    mem.ptr  # raises if freed
    if not mem.is_contiguous or mem.readonly or (mem._ext is not None and mem._ext.foreign_host):
        why = ("is not contiguous" if not mem.is_contiguous else "is read-only" if mem.readonly else
               "is imported host memory (set it through its producer, e.g. numpy)")
        raise make_error(InvalidValueError, f"memset: {mem._describe()} {why}")
    n = mem.nbytes if nbytes is None else _check_size(nbytes, "memset: nbytes")
    if n > mem.nbytes:
        raise make_error(InvalidValueError, f"memset: nbytes = {n} exceeds the memory ({mem.nbytes} bytes)")
    return n


def memset(mem: DeviceMemory, value: int, nbytes: Optional[int] = None) -> None:
    """Synchronously set `nbytes` (default all) bytes of `mem` to `value` (0..255), ordered as copy() is."""
    n = _check_memset(mem, value, nbytes)
    st = _entered_stream()
    if st is not None:
        st.memset(mem, value, n)
        st.synchronize()
        return
    _core.memset(mem.ptr, int(value), n)


# ----------------------------------------------------------------------------------------------- memory strategies
# The seed's three strategies (pool pre-allocation, zero copy, memory reuse), pinned and registered host memory, and
# the exact per-device statistics of rtMemGetStats. All apply to the current device, or to `device` when given (the
# current device is switched for the call and restored).

# Per device index: [count, bytes] of frees deferred until the last DLPack consumer lets go (memory_stats).
_deferred: dict = {}
_registered: dict = {}  # host pointer -> (object, numpy view, nbytes, device index): kept alive while registered

_STAT_FIELDS = ("allocated_bytes", "reserved_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "num_allocs",
                "num_frees", "num_cache_hits", "num_cache_misses", "num_ooms", "largest_free_block", "pool_size",
                "num_elided_copies", "elided_copy_bytes", "num_live_allocations")


def _flag(value: Any, what: str) -> bool:
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and int(value) in (0, 1)):
        return bool(value)
    raise make_error(InvalidValueError, f"{what} must be True or False, got {value!r}")


def _target(device: Any) -> Device:
    return Device(device)  # the current device when None; entering it switches and restores


def enable_pool_allocator(pool_size: int = 4 * 1024**3, block_size: int = 1024 * 1024, grow: bool = False,
                          device: Any = None) -> None:
    """Serve the device's allocations from a pool: `pool_size` bytes of address space are reserved (not committed:
    resident memory grows only with use), carved in `block_size` units (a power of two, at least 4096), best fit
    with splitting and coalescing. Past `pool_size` an allocation fails with OutOfMemoryError, or with `grow=True`
    is served outside the pool. `pool_size=0` turns the pool off. Refused (InvalidValueError) while allocations
    from the current pool are live."""
    ps = _check_size(pool_size, "enable_pool_allocator: pool_size")
    bs = _check_size(block_size, "enable_pool_allocator: block_size")
    flags = _core.POOL_GROW if _flag(grow, "enable_pool_allocator: grow") else _core.POOL_DEFAULT
    with _target(device):
        _core.enable_pool_allocator(ps, bs, flags)


def enable_memory_reuse(enable: bool = True, device: Any = None) -> None:
    """With reuse on, freed memory stays reserved and serves later allocations that fit (a caching allocator; a
    default pool of the device's capacity in 2 MiB blocks is created if none is enabled); off, freed memory goes
    back to the system at once (and the cache is emptied)."""
    on = _flag(enable, "enable_memory_reuse: enable")
    with _target(device):
        _core.enable_memory_reuse(on)


def enable_zero_copy(enable: bool = True, device: Any = None) -> None:
    """With zero copy on, pinned (alloc_host) and registered (register_host) host memory is used by the device in
    place: map_host gives a device memory object aliasing it, and copies whose source and destination are the same
    bytes are elided (counted in memory_stats()['num_elided_copies']). NotSupportedError on a device that cannot
    address host memory."""
    on = _flag(enable, "enable_zero_copy: enable")
    with _target(device):
        _core.enable_zero_copy(on)


def empty_cache(device: Any = None) -> None:
    """Return the device's unused cached memory (free pool blocks) to the system; live allocations are kept."""
    with _target(device):
        _core.mem_empty_cache()


def memory_stats(device: Any = None) -> dict:
    """Exact memory statistics of the device: allocated_bytes, reserved_bytes, peak_allocated_bytes,
    peak_reserved_bytes, num_allocs, num_frees, num_cache_hits, num_cache_misses, num_ooms, largest_free_block,
    pool_size, num_elided_copies, elided_copy_bytes, num_live_allocations, fragmentation (1 - allocated /
    reserved: the share of reserved memory not handed out; 0.0 when nothing is reserved), and
    num_deferred_frees / deferred_free_bytes: memory freed while DLPack consumers (numpy.from_dlpack, torch...)
    still view it, released when the last lets go (until then it stays allocated and counted above)."""
    dev = _target(device)
    with dev:
        st = _core.mem_get_stats()
    out = {k: int(st[k]) for k in _STAT_FIELDS}
    deferred = _deferred.get(dev.index, (0, 0))
    out["num_deferred_frees"], out["deferred_free_bytes"] = deferred[0], deferred[1]
    reserved = out["reserved_bytes"]
    out["fragmentation"] = max(0.0, 1.0 - out["allocated_bytes"] / reserved) if reserved else 0.0
    return out


def reset_peak_memory_stats(device: Any = None) -> None:
    """Restart the peaks (peak_allocated_bytes, peak_reserved_bytes) from the current values."""
    with _target(device):
        _core.mem_reset_peak_stats()


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device: Any = None) -> str:
    """A readable table of memory_stats(device) (like torch.cuda.memory_summary)."""
    dev = _target(device)
    st = memory_stats(dev.index)
    width = 78
    rule, thin = "=" * width, "-" * width

    def row(label: str, current: str, peak: str = "") -> str:
        return f"| {label:<34}| {current:>18} | {peak:>18} |"

    lines = [rule, f"| {'runtime memory summary, device ' + dev.name:^{width - 4}} |", thin,
             row("Metric", "Current", "Peak"), thin,
             row("Allocated memory", _fmt_bytes(st["allocated_bytes"]), _fmt_bytes(st["peak_allocated_bytes"])),
             row("Reserved memory", _fmt_bytes(st["reserved_bytes"]), _fmt_bytes(st["peak_reserved_bytes"])),
             row("Live allocations", str(st["num_live_allocations"])),
             row("Fragmentation (1 - alloc/reserved)", f"{st['fragmentation'] * 100:.1f} %"), thin,
             row("Allocations / frees", f"{st['num_allocs']} / {st['num_frees']}"),
             row("Cache hits / misses", f"{st['num_cache_hits']} / {st['num_cache_misses']}"),
             row("Out-of-memory errors", str(st["num_ooms"])), thin,
             row("Pool size (address space)", _fmt_bytes(st["pool_size"]) if st["pool_size"] else "no pool"),
             row("Largest free block in the pool", _fmt_bytes(st["largest_free_block"])),
             row("Elided copies (zero copy)", f"{st['num_elided_copies']} ({_fmt_bytes(st['elided_copy_bytes'])})"),
             rule]
    return "\n".join(lines)


def _inplace_host_array(obj: Any, what: str, writable: bool) -> np.ndarray:
    """A numpy view of the host object's own bytes (never a copy): numpy arrays, buffer-protocol objects, DLPack
    host objects; must be C-contiguous and not empty."""
    if isinstance(obj, DeviceMemory):
        raise make_error(InvalidValueError, f"{what}: expected host memory (numpy array, buffer protocol or DLPack), "
                                            f"got runtime device memory")
    if isinstance(obj, np.ndarray):
        arr = obj
    elif hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        if int(obj.__dlpack_device__()[0]) not in (1, 3):  # kDLCPU, kDLCUDAHost
            raise make_error(InvalidValueError, f"{what}: a DLPack object on device {tuple(obj.__dlpack_device__())} "
                                                f"is not host memory")
        arr = np.from_dlpack(obj)
    else:
        try:
            mv = memoryview(obj)
        except TypeError:
            raise make_error(InvalidValueError, f"{what}: expected a host array (numpy, buffer protocol or DLPack), "
                                                f"got {type(obj).__name__}") from None
        if not mv.c_contiguous:
            raise make_error(InvalidValueError, f"{what}: the host buffer is not C-contiguous")
        arr = np.asarray(mv)
        if mv.format == "B":
            arr = arr.view(np.uint8)
    if not arr.flags.c_contiguous:
        raise make_error(InvalidValueError, f"{what}: the host array is not C-contiguous (use numpy.ascontiguousarray "
                                            f"and keep that array)")
    if writable and not arr.flags.writeable:
        raise make_error(InvalidValueError, f"{what}: the host array is read-only (the device would write it)")
    if arr.nbytes == 0:
        raise make_error(InvalidValueError, f"{what}: the host array is empty (0 bytes)")
    return arr


def register_host(obj: Any, device: Any = None) -> Any:
    """Register (page-lock) the host memory of `obj` (a C-contiguous numpy array or buffer-protocol object) with the
    runtime (rtHostRegister): copies treat it as pinned memory, and with zero copy on map_host(obj) uses it in place.
    `obj` is kept alive until unregister_host(obj). Returns `obj`."""
    arr = _inplace_host_array(obj, "register_host", writable=False)
    ptr = arr.ctypes.data
    dev = _target(device)
    with dev:
        _core.host_register(ptr, arr.nbytes)
    _registered[ptr] = (obj, arr, arr.nbytes, dev.index)
    return obj


def unregister_host(obj: Any) -> None:
    """Undo register_host(obj) (waits for queued copies that may still use it). InvalidValueError if `obj` was not
    registered with register_host."""
    arr = _inplace_host_array(obj, "unregister_host", writable=False)
    ptr = arr.ctypes.data
    entry = _registered.get(ptr)
    if entry is None or entry[2] != arr.nbytes:
        raise make_error(InvalidValueError, f"unregister_host: the host memory at {ptr:#x} ({arr.nbytes} bytes) was not "
                                            f"registered with runtime.register_host")
    _core.host_unregister(ptr)
    del _registered[ptr]


def map_host(obj: Any, device: Any = None) -> DeviceMemory:
    """A device memory object aliasing the host memory of `obj` (zero copy: rtHostGetDevicePointer), typed like it,
    usable by kernels (which read and write the host bytes in place) and by copies (a copy between it and the same
    host bytes is elided). `obj` is pinned (alloc_host), registered (register_host), or any C-contiguous writable
    host array, which is then registered until the mapping is freed. Zero copy must be on (enable_zero_copy(True)),
    else NotSupportedError. `obj` stays alive as long as the mapping."""
    arr = _inplace_host_array(obj, "map_host", writable=True)
    ptr, n = arr.ctypes.data, arr.nbytes
    dev = _target(device)
    registered_here = 0
    with dev:
        try:
            dptr = _core.host_get_device_pointer(ptr)
        except InvalidValueError:
            # Neither pinned nor registered: register it for the mapping's lifetime (an overlap is refused).
            _core.host_register(ptr, n)
            registered_here = ptr
            try:
                dptr = _core.host_get_device_pointer(ptr)
            except BaseException:
                _core.host_unregister(ptr)
                raise
    dt = arr.dtype if _storage_dtype(arr.dtype) else None
    ext = _MemExtra()
    ext.host, ext.host_registered, ext.mapped = (obj, arr), registered_here, True
    return DeviceMemory(dptr, n, dev, dt, ext, arr.shape if dt is not None else None)


class _PinnedHost:
    """Owner of one rtMallocHost allocation, exposed to numpy through __array_interface__ (the arrays' base):
    freed (rtFreeHost) when the last array over it dies."""

    __slots__ = ("ptr", "nbytes", "typestr", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, typestr: str) -> None:
        self.ptr, self.nbytes, self.typestr = ptr, nbytes, typestr

    @property
    def __array_interface__(self) -> dict:
        itemsize = np.dtype(self.typestr).itemsize
        return {"version": 3, "shape": (self.nbytes // itemsize,), "typestr": self.typestr,
                "data": (self.ptr, False)}

    def __del__(self) -> None:
        ptr, self.ptr = self.ptr, 0
        if ptr:
            try:
                _core.free_host(ptr)
            except Exception:
                pass


def alloc_host(nbytes: int, dtype: Any = None, device: Any = None) -> np.ndarray:
    """Pinned (page-locked) host memory from rtMallocHost, as a 1-D numpy array of `dtype` (uint8 if None); freed
    when the array (and every view of it) is gone. Copies from/to it are checked like device memory and, with
    zero copy on, map_host uses it in place."""
    n = _check_size(nbytes, "alloc_host: nbytes")
    dt = np.dtype(np.uint8) if dtype is None else _as_dtype(dtype, "alloc_host")
    if n % dt.itemsize:
        raise make_error(InvalidValueError,
                         f"alloc_host: nbytes = {n} is not a whole number of {dt} elements ({dt.itemsize} bytes each)")
    if n == 0:
        return np.empty(0, dtype=dt)
    with _target(device):
        ptr = _core.malloc_host(n)
    return np.asarray(_PinnedHost(ptr, n, dt.str))
