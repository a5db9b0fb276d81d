"""Inter-process handles (rtIpc*, CUDA's cudaIpc*): device memory and events shared with another process of the
same machine and user. docs/memory.md, "Sharing memory and events between processes"."""

from __future__ import annotations

from typing import Any, Optional

from . import _core
from .core import DeviceMemory, _MemExtra, _as_dtype, _device_obj, _prod
from .errors import InvalidValueError, make_error

__all__ = ["IpcMemory", "ipc_get_mem_handle", "ipc_open_mem_handle"]

_HANDLE_BYTES = 64


def _check_handle(handle: Any, what: str) -> bytes:
    if not isinstance(handle, (bytes, bytearray, memoryview)):
        raise make_error(InvalidValueError, f"{what}: handle must be the bytes of an IPC handle, got "
                                            f"{type(handle).__name__}")
    data = bytes(handle)
    if len(data) != _HANDLE_BYTES:
        raise make_error(InvalidValueError, f"{what}: an IPC handle is {_HANDLE_BYTES} bytes, got {len(data)}")
    return data


def ipc_get_mem_handle(mem: DeviceMemory) -> bytes:
    """The 64-byte handle of the allocation `mem` lies in (rtIpcGetMemHandle), for ipc_open_mem_handle in another
    process. A view exports its whole allocation (the opener gets the allocation's base)."""
    if not isinstance(mem, DeviceMemory):
        raise make_error(InvalidValueError, f"ipc_get_mem_handle: expected runtime.DeviceMemory, got "
                                            f"{type(mem).__name__}")
    with mem.device:
        return _core.ipc_get_mem_handle(mem.ptr)


class IpcMemory(DeviceMemory):
    """Device memory another process exported, mapped into this one (ipc_open_mem_handle): used by copies and
    kernels like any DeviceMemory. close(), free(), leaving a `with` block or garbage collection unmaps it (once the
    work queued so far has run); the exporter's memory stays."""

    __slots__ = ()

    def _release_now(self) -> None:
        ptr, self._ptr = self._ptr, 0
        if ptr:
            _core.ipc_close_mem_handle(ptr)

    def close(self) -> None:
        """Unmap it now (as free(); closing twice does nothing)."""
        if not self._freed:
            self.free()

    def __enter__(self) -> "IpcMemory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def ipc_open_mem_handle(handle: Any, shape: Any = None, dtype: Any = None) -> IpcMemory:
    """Map the memory of `handle` (from ipc_get_mem_handle in another process) on the current device. Untyped
    unless `dtype` (and `shape`: default the whole allocation as one dimension) is given; the shape must fit the
    allocation. Opening a handle of this very process is refused, as in CUDA."""
    data = _check_handle(handle, "ipc_open_mem_handle")
    dt = None if dtype is None else _as_dtype(dtype, "ipc_open_mem_handle")
    if shape is not None and dt is None:
        dt = _as_dtype("float32", "ipc_open_mem_handle")
    ptr, size, device = _core.ipc_open_mem_handle(data, 0)
    try:
        shp: Optional[tuple] = None
        nbytes = size
        if dt is not None:
            if shape is None:
                shp = (size // dt.itemsize,)
            else:
                shp = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
                if any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in shp):
                    raise make_error(InvalidValueError, f"ipc_open_mem_handle: shape {shape!r} must be non-negative "
                                                        f"ints")
            nbytes = _prod(shp) * dt.itemsize
            if nbytes > size:
                raise make_error(InvalidValueError, f"ipc_open_mem_handle: shape {shp} of {dt} needs {nbytes} bytes; "
                                                    f"the allocation has {size}")
        ext = _MemExtra()
        ext.special = True  # released through _release_now (rtIpcCloseMemHandle)
        return IpcMemory(ptr, nbytes, _device_obj(device), dt, ext, shp)
    except BaseException:
        _core.ipc_close_mem_handle(ptr)
        raise
