"""Memory pool objects (rtMemPool_t): runtime.MemPool, set_device_mem_pool, get_device_mem_pool (docs/memory.md).

A MemPool made here owns a pool of its own (its reservation, statistics and release threshold) and destroys it when
closed or collected; memory still allocated from it stays valid, and the pool goes once that is freed. The views
that get_device_mem_pool and MemPool.default return own nothing."""

from __future__ import annotations

import threading
import weakref
from typing import Any, Optional

import numpy as np

from . import _core
from .core import (DeviceMemory, Stream, _active_captures, _as_dtype, _check_size, _device_index, _device_obj,
                   _MemExtra, current_stream, default_stream)
from .errors import InvalidValueError, make_error

_lock = threading.Lock()
_owners: "weakref.WeakValueDictionary[int, MemPool]" = weakref.WeakValueDictionary()  # handle -> owning object
_current: dict = {}  # device index -> the MemPool made current with set_device_mem_pool (kept alive while current)


class MemPool:
    """A pool of device memory on `device` (the current device if None): `max_size` bytes of address space at most
    (0: the device's memory), `release_threshold` bytes kept reserved at a synchronize (CUDA's default, 0: unused
    memory goes back to the system at every synchronize). As a context manager it is destroyed on exit."""

    __slots__ = ("_handle", "device", "_owned", "__weakref__")

    def __init__(self, device: Any = None, max_size: int = 0, release_threshold: int = 0) -> None:
        self._handle = 0
        self._owned = False
        self.device = _device_obj(_core.get_device() if device is None else _device_index(device))
        size = _check_size(max_size, "MemPool: max_size")
        threshold = _check_size(release_threshold, "MemPool: release_threshold")
        self._handle = _core.mem_pool_create(self.device.index, size)
        self._owned = True
        with _lock:
            _owners[self._handle] = self
        if threshold:
            self.release_threshold = threshold

    @classmethod
    def _view(cls, handle: int, index: int) -> "MemPool":
        with _lock:
            owner = _owners.get(handle)
        if owner is not None:
            return owner
        p = cls.__new__(cls)
        p._handle, p._owned, p.device = handle, False, _device_obj(index)
        return p

    @classmethod
    def default(cls, device: Any = None) -> "MemPool":
        """The default pool of `device`: the allocator enable_pool_allocator / enable_memory_reuse configure."""
        idx = _core.get_device() if device is None else _device_index(device)
        return cls._view(_core.device_get_default_mem_pool(idx), idx)

    @property
    def handle(self) -> int:
        """The rtMemPool_t as an int (0 once destroyed)."""
        return self._handle

    @property
    def is_default(self) -> bool:
        return bool(self._handle) and self._handle == _core.device_get_default_mem_pool(self.device.index)

    def _live(self, what: str) -> int:
        if not self._handle:
            raise make_error(InvalidValueError, f"MemPool.{what}: the pool was destroyed")
        return self._handle

    # ---- attributes
    def _u64(self, attr: int, what: str) -> int:
        return int(_core.mem_pool_get_u64(self._live(what), attr))

    @property
    def release_threshold(self) -> int:
        """Bytes the pool keeps reserved at a synchronize; what is unused beyond goes back to the system."""
        return self._u64(_core.MEMPOOL_ATTR_RELEASE_THRESHOLD, "release_threshold")

    @release_threshold.setter
    def release_threshold(self, value: int) -> None:
        v = _check_size(value, "MemPool.release_threshold")
        _core.mem_pool_set_u64(self._live("release_threshold"), _core.MEMPOOL_ATTR_RELEASE_THRESHOLD, v)

    @property
    def reserved(self) -> int:
        """Bytes the pool holds from the system now."""
        return self._u64(_core.MEMPOOL_ATTR_RESERVED_MEM_CURRENT, "reserved")

    @property
    def reserved_high(self) -> int:
        return self._u64(_core.MEMPOOL_ATTR_RESERVED_MEM_HIGH, "reserved_high")

    @property
    def used(self) -> int:
        """Bytes of the live allocations from the pool, as requested."""
        return self._u64(_core.MEMPOOL_ATTR_USED_MEM_CURRENT, "used")

    @property
    def used_high(self) -> int:
        return self._u64(_core.MEMPOOL_ATTR_USED_MEM_HIGH, "used_high")

    def reset_high(self) -> None:
        """Restart both high-water marks (reserved_high, used_high) from the current values."""
        h = self._live("reset_high")
        _core.mem_pool_set_u64(h, _core.MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0)
        _core.mem_pool_set_u64(h, _core.MEMPOOL_ATTR_USED_MEM_HIGH, 0)

    def _reuse(self, attr: int, what: str) -> bool:
        return bool(_core.mem_pool_get_int(self._live(what), attr))

    def _set_reuse(self, attr: int, value: Any, what: str) -> None:
        if not isinstance(value, (bool, np.bool_)) and not (isinstance(value, (int, np.integer)) and value in (0, 1)):
            raise make_error(InvalidValueError, f"MemPool.{what} must be True or False, got {value!r}")
        _core.mem_pool_set_int(self._live(what), attr, int(bool(value)))

    @property
    def reuse_follow_event_dependencies(self) -> bool:
        return self._reuse(_core.MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, "reuse_follow_event_dependencies")

    @reuse_follow_event_dependencies.setter
    def reuse_follow_event_dependencies(self, value: bool) -> None:
        self._set_reuse(_core.MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, value, "reuse_follow_event_dependencies")

    @property
    def reuse_allow_opportunistic(self) -> bool:
        return self._reuse(_core.MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, "reuse_allow_opportunistic")

    @reuse_allow_opportunistic.setter
    def reuse_allow_opportunistic(self, value: bool) -> None:
        self._set_reuse(_core.MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, value, "reuse_allow_opportunistic")

    @property
    def reuse_allow_internal_dependencies(self) -> bool:
        return self._reuse(_core.MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, "reuse_allow_internal_dependencies")

    @reuse_allow_internal_dependencies.setter
    def reuse_allow_internal_dependencies(self, value: bool) -> None:
        self._set_reuse(_core.MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, value,
                        "reuse_allow_internal_dependencies")

    # ---- operations
    def trim_to(self, min_bytes_to_keep: int = 0) -> None:
        """Return unused reserved memory to the system until at most `min_bytes_to_keep` bytes stay reserved."""
        keep = _check_size(min_bytes_to_keep, "MemPool.trim_to: min_bytes_to_keep")
        _core.mem_pool_trim_to(self._live("trim_to"), keep)

    def alloc(self, nbytes: int, stream: Optional[Stream] = None, dtype: Any = None) -> DeviceMemory:
        """Stream-ordered device memory from this pool (rtMallocFromPoolAsync) on `stream`, a stream of the pool's
        device (None: the current stream if it is on that device, else the device's default stream). Its free is
        ordered on that stream and returns it to this pool."""
        n = _check_size(nbytes, "MemPool.alloc: nbytes")
        dt = None if dtype is None else _as_dtype(dtype, "MemPool.alloc")
        if dt is not None and n % dt.itemsize:
            raise make_error(InvalidValueError, f"MemPool.alloc: nbytes = {n} is not a whole number of {dt} elements "
                                                f"({dt.itemsize} bytes each)")
        if stream is None:
            stream = current_stream()
            if stream.device.index != self.device.index:
                stream = default_stream(self.device.index)
        elif not isinstance(stream, Stream):
            raise make_error(InvalidValueError, f"MemPool.alloc: stream must be a runtime.Stream, got "
                                                f"{type(stream).__name__}")
        h = self._live("alloc")
        with stream.device:
            ptr = _core.malloc_from_pool_async(n, h, 0 if stream._is_default else stream.handle)
        ext = _MemExtra()
        ext.stream = weakref.ref(stream)
        ext.captured = bool(_active_captures) and stream._handle in _active_captures
        return DeviceMemory(ptr, n, stream.device, dt, ext, None)

    def destroy(self) -> None:
        """Destroy the pool now (a pool this object made; views refuse). Memory allocated from it stays valid and
        goes back to the pool's memory, which is released once the last of it is freed."""
        if not self._owned:
            raise make_error(InvalidValueError, "MemPool.destroy: this object does not own the pool (a default pool, "
                                                "or one returned by get_device_mem_pool for a pool made elsewhere)")
        h, self._handle, self._owned = self._handle, 0, False
        with _lock:
            _owners.pop(h, None)
            for idx, p in list(_current.items()):
                if p is self:
                    del _current[idx]
        if h:
            _core.mem_pool_destroy(h)

    close = destroy

    def __enter__(self) -> "MemPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._owned:
            self.destroy()

    def __del__(self) -> None:
        if getattr(self, "_owned", False) and self._handle:
            try:
                _core.mem_pool_destroy(self._handle)
            except Exception:
                pass

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, MemPool) and other._handle == self._handle and bool(self._handle)

    def __hash__(self) -> int:
        return hash(("runtime.MemPool", self._handle))

    def __repr__(self) -> str:
        if not self._handle:
            return "runtime.MemPool(destroyed)"
        kind = "owned" if self._owned else "view"
        return f"runtime.MemPool({self.device.name!r}, handle={self._handle:#x}, {kind})"


def set_device_mem_pool(pool: MemPool, device: Any = None) -> None:
    """Make `pool` the pool that stream-ordered allocations on `device` (default: the pool's device) come from
    (alloc(stream=...), rtMallocAsync). The pool object is kept alive while it is current."""
    if not isinstance(pool, MemPool):
        raise make_error(InvalidValueError, f"set_device_mem_pool: pool must be a runtime.MemPool, got "
                                            f"{type(pool).__name__}")
    idx = pool.device.index if device is None else _device_index(device)
    _core.device_set_mem_pool(idx, pool._live("set_device_mem_pool"))
    with _lock:
        if pool._owned:
            _current[idx] = pool
        else:
            _current.pop(idx, None)


def get_device_mem_pool(device: Any = None) -> MemPool:
    """The pool stream-ordered allocations on `device` (the current device if None) come from now."""
    idx = _core.get_device() if device is None else _device_index(device)
    return MemPool._view(_core.device_get_mem_pool(idx), idx)


__all__ = ["MemPool", "set_device_mem_pool", "get_device_mem_pool"]