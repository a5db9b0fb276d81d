"""The CUDA-level calls CUDA and AscendCL users reach for (runtime.h's issue-20 block): pointer and device attributes,
peer access and copies, managed and pitched memory, stream priorities, device reset, kernel attributes and
occupancy. Stream(priority=...) and synchronize(timeout=...) live on Stream and Event themselves (core.py).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _core
from .core import Device, DeviceMemory, Stream, _device_index, current_device, current_stream
from .errors import InvalidValueError, make_error

_KINDS = {None: _core.MEMCPY_DEFAULT, "H2H": _core.MEMCPY_HOST_TO_HOST, "H2D": _core.MEMCPY_HOST_TO_DEVICE,
          "D2H": _core.MEMCPY_DEVICE_TO_HOST, "D2D": _core.MEMCPY_DEVICE_TO_DEVICE}


def _address(obj: Any, what: str) -> int:
    """The address of device memory, a numpy array (its data) or an int."""
    if isinstance(obj, DeviceMemory):
        return obj.ptr
    if isinstance(obj, np.ndarray):
        return obj.ctypes.data
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
        return int(obj)
    raise make_error(InvalidValueError, f"{what}: expected runtime.DeviceMemory, a numpy array or an address, "
                                        f"got {type(obj).__name__}")


def _size(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise make_error(InvalidValueError, f"{what} must be a non-negative int, got {value!r}")
    return int(value)


def pointer_attributes(obj: Any) -> dict:
    """What the runtime knows about an address (rtPointerGetAttributes): {"type": "device" | "host" | "managed" |
    "registered" | "unregistered", "device": index or -1, "device_pointer", "host_pointer", "base", "size"}."""
    return _core.pointer_get_attributes(_address(obj, "pointer_attributes"))


def get_device_attribute(name: str, device: Any = None) -> int:
    """One attribute of a device by name (rtDeviceGetAttribute): "warp_size", "multiprocessor_count",
    "max_threads_per_block", "l2_cache_size", "managed_memory", ... (runtime._core.DEVICE_ATTRIBUTES lists them)."""
    code = _core.DEVICE_ATTRIBUTES.get(name) if isinstance(name, str) else None
    if code is None:
        raise make_error(InvalidValueError, f"get_device_attribute: unknown attribute {name!r} (expected one of "
                                            f"{', '.join(sorted(_core.DEVICE_ATTRIBUTES))})")
    index = current_device().index if device is None else _device_index(device)
    return _core.device_get_attribute(code, index)


def can_access_peer(device: Any, peer: Any) -> bool:
    """Whether `device`'s kernels can use memory of `peer` (cpu devices share the host's memory: True)."""
    return _core.device_can_access_peer(_device_index(device), _device_index(peer))


def enable_peer_access(peer: Any) -> None:
    """Lets the current device's kernels use memory of `peer` (IllegalStateError if already enabled)."""
    _core.device_enable_peer_access(_device_index(peer))


def copy_peer(dst: DeviceMemory, src: DeviceMemory, nbytes: Optional[int] = None,
              stream: Optional[Stream] = None) -> None:
    """Copies `nbytes` (default: all of `src`) from device memory of one device to another's (rtMemcpyPeer);
    on `stream`, asynchronously (rtMemcpyPeerAsync: the caller keeps both alive until the stream has passed it)."""
    for role, mem in (("dst", dst), ("src", src)):
        if not isinstance(mem, DeviceMemory):
            raise make_error(InvalidValueError, f"copy_peer: {role} must be runtime.DeviceMemory, "
                                                f"got {type(mem).__name__}")
    n = src.nbytes if nbytes is None else _size(nbytes, "copy_peer: nbytes")
    if stream is None:
        _core.memcpy_peer(dst.ptr, dst.device.index, src.ptr, src.device.index, n)
        return
    with stream.device:
        _core.memcpy_peer_async(dst.ptr, dst.device.index, src.ptr, src.device.index, n,
                                0 if stream._is_default else stream.handle)


def alloc_managed(shape: Any, dtype: Any = np.float32, device: Any = None, attach_host: bool = False) -> DeviceMemory:
    """Managed memory (rtMallocManaged): device memory the host uses through the same address, so mem.numpy()
    and kernels see the same bytes. Freed by runtime.free or when garbage-collected."""
    dt = np.dtype(dtype)
    shape_t = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    count = 1
    for s in shape_t:
        count *= _size(s, "alloc_managed: shape")
    dev = current_device() if device is None else Device(device)
    flags = _core.MEM_ATTACH_HOST if attach_host else _core.MEM_ATTACH_GLOBAL
    with dev:
        ptr = _core.malloc_managed(count * dt.itemsize, flags)
    return DeviceMemory(ptr, count * dt.itemsize, dev, dt, None, shape_t)


def prefetch(mem: DeviceMemory, device: Any = "host", stream: Optional[Stream] = None) -> None:
    """Stream-ordered hint that managed memory will be used on `device` ("host", or a device) next
    (rtMemPrefetchAsync); on cpu nothing moves, and the hint is still ordered on the stream."""
    if not isinstance(mem, DeviceMemory):
        raise make_error(InvalidValueError, f"prefetch: expected runtime.DeviceMemory, got {type(mem).__name__}")
    target = _core.CPU_DEVICE_ID if device == "host" else _device_index(device)
    s = stream or current_stream()
    with s.device:
        _core.mem_prefetch_async(mem.ptr, mem.nbytes, target, 0 if s._is_default else s.handle)


class PitchedMemory:
    """A pitched 2-D allocation (rtMallocPitch): `height` rows of `width` bytes, each `pitch` bytes after the last."""

    def __init__(self, width: int, height: int, device: Any = None) -> None:
        self.width, self.height = _size(width, "alloc_pitch: width"), _size(height, "alloc_pitch: height")
        self.device = current_device() if device is None else Device(device)
        with self.device:
            self.ptr, self.pitch = _core.malloc_pitch(self.width, self.height)

    def free(self) -> None:
        p, self.ptr = self.ptr, 0
        if p:
            with self.device:
                _core.free(p)

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"runtime.PitchedMemory(width={self.width}, height={self.height}, pitch={self.pitch})"


def alloc_pitch(width: int, height: int, device: Any = None) -> PitchedMemory:
    """`height` rows of `width` bytes of device memory with aligned rows (rtMallocPitch)."""
    return PitchedMemory(width, height, device)


def copy_2d(dst: Any, dpitch: int, src: Any, spitch: int, width: int, height: int,
            direction: Optional[str] = None) -> None:
    """Copies `height` rows of `width` bytes, row i from src + i*spitch to dst + i*dpitch (rtMemcpy2D, synchronous).
    Operands: PitchedMemory, DeviceMemory, numpy arrays or addresses; `direction` as runtime.copy's."""
    if direction not in _KINDS:
        raise make_error(InvalidValueError, f"copy_2d: direction {direction!r} is not one of H2H, H2D, D2H, D2D, None")
    d = dst.ptr if isinstance(dst, PitchedMemory) else _address(dst, "copy_2d: dst")
    s = src.ptr if isinstance(src, PitchedMemory) else _address(src, "copy_2d: src")
    _core.memcpy_2d(d, _size(dpitch, "copy_2d: dpitch"), s, _size(spitch, "copy_2d: spitch"),
                    _size(width, "copy_2d: width"), _size(height, "copy_2d: height"), _KINDS[direction])


def get_stream_priority_range(device: Any = None) -> tuple:
    """(least, greatest) stream priorities of a device: Stream(priority=p) takes least >= p >= greatest
    (numerically lower runs first; others are clamped)."""
    dev = current_device() if device is None else Device(device)
    with dev:
        return tuple(_core.device_get_stream_priority_range())


def device_reset(device: Any = None) -> None:
    """Destroys the device's streams, events, modules and device memory after their queued work (rtDeviceReset):
    the Python objects of them raise InvalidHandleError (streams, events, kernels) or report freed memory afterwards.
    Not while other threads use the device."""
    dev = current_device() if device is None else Device(device)
    with dev:
        _core.device_reset()


__all__ = ["pointer_attributes", "get_device_attribute", "can_access_peer", "enable_peer_access", "copy_peer",
           "alloc_managed", "prefetch", "alloc_pitch", "PitchedMemory", "copy_2d", "get_stream_priority_range",
           "device_reset"]
