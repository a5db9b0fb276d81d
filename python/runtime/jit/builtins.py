"""The work-item built-ins and atomics as Python functions: what kernels call, what the translator recognises, and
what the reference mode runs (each reads the work-item the reference mode is running on this thread)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..core import make_error
from ..errors import InvalidValueError

_item = threading.local()  # the work-item the reference mode is running on this thread


def _state() -> Any:
    st = getattr(_item, "state", None)
    if st is None:
        raise make_error(InvalidValueError, "work-item built-ins are only meaningful inside a kernel "
                                            "(launch it with stream.launch_kernel)")
    return st


def _dim(d: Any) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= int(d) <= 2:
        raise make_error(InvalidValueError, f"dimension must be 0, 1 or 2, got {d!r}")
    return int(d)


def get_global_id(d: int = 0) -> int:
    """Global index of the work-item in dimension d (0..2)."""
    return _state().gid[_dim(d)]


def get_local_id(d: int = 0) -> int:
    """Index of the work-item within its work-group in dimension d."""
    st = _state()
    d = _dim(d)
    return st.gid[d] % st.local[d]


def get_group_id(d: int = 0) -> int:
    """Index of the work-group in dimension d."""
    st = _state()
    d = _dim(d)
    return st.gid[d] // st.local[d]


def get_global_size(d: int = 0) -> int:
    """Number of work-items in dimension d (the launch's global size, not rounded up to whole groups)."""
    return _state().glob[_dim(d)]


def get_local_size(d: int = 0) -> int:
    """Work-group size in dimension d."""
    return _state().local[_dim(d)]


def get_num_groups(d: int = 0) -> int:
    """Number of work-groups in dimension d."""
    st = _state()
    d = _dim(d)
    return -(-st.glob[d] // st.local[d])


def atomic_add(buf: Any, index: int, value: Any) -> Any:
    """buf[index] += value atomically; returns the old value."""
    old = buf[index]
    buf[index] = old + value
    return old


def atomic_min(buf: Any, index: int, value: Any) -> Any:
    """buf[index] = min(buf[index], value) atomically; returns the old value."""
    old = buf[index]
    if value < old:
        buf[index] = value
    return old


def atomic_max(buf: Any, index: int, value: Any) -> Any:
    """buf[index] = max(buf[index], value) atomically; returns the old value."""
    old = buf[index]
    if value > old:
        buf[index] = value
    return old


def atomic_cas(buf: Any, index: int, expected: Any, desired: Any) -> Any:
    """If buf[index] == expected, store desired; atomically; returns the old value."""
    old = buf[index]
    if old == expected:
        buf[index] = desired
    return old


def atomic_exchange(buf: Any, index: int, value: Any) -> Any:
    """Store value into buf[index] atomically; returns the old value."""
    old = buf[index]
    buf[index] = value
    return old


def barrier() -> None:
    """Work-group barrier: every work-item of the group reaches it before any continues, and what they wrote to
    local arrays (and memory) before it is visible to all of them after it. Only as a statement of a kernel body,
    in control flow that is the same for every item of the group (uniform); the reference mode runs it by
    stepping the group's items from barrier to barrier."""
    raise make_error(InvalidValueError, "runtime.barrier() is only meaningful as a statement of a @runtime.jit "
                                        "kernel body (not in a device function, nor outside a kernel)")


def local_array(shape: Any, dtype: Any) -> Any:
    """A work-group-shared array of `shape` (a constant int or tuple of constant ints) and `dtype`, assigned to a
    name at the top level of a kernel body: `tile = runtime.local_array((16, 16), np.float32)`. Every item of a
    group sees the same array; it is not initialised, and lives as long as the group."""
    st = _state()
    groups = getattr(st, "group_arrays", None)
    if groups is None:
        raise make_error(InvalidValueError, "runtime.local_array() is only meaningful in a @runtime.jit kernel body")
    dims = tuple(int(d) for d in shape) if isinstance(shape, (tuple, list)) else (int(shape),)
    dt = np.dtype(dtype)
    k = st.counts[st.item]
    st.counts[st.item] = k + 1
    if k == len(groups):  # the group's first item to get here allocates it; the others share it
        from .reference import _NoWrap  # (reference imports this module) negative indices refused, as compiled
        groups.append(np.zeros(dims, dt).view(_NoWrap))
    arr = groups[k]
    if arr.shape != dims or arr.dtype != dt:
        raise make_error(InvalidValueError, f"runtime.local_array(): items of a group asked for different arrays "
                                            f"({arr.shape} {arr.dtype} and {dims} {dt})")
    return arr


_ID_BUILTINS = {get_global_id: "get_global_id", get_local_id: "get_local_id", get_group_id: "get_group_id",
                get_global_size: "get_global_size", get_local_size: "get_local_size",
                get_num_groups: "get_num_groups"}
_ATOMICS = {atomic_add: "atomic_add", atomic_min: "atomic_min", atomic_max: "atomic_max", atomic_cas: "atomic_cas",
            atomic_exchange: "atomic_exchange"}
