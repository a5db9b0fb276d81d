"""The reference mode (RUNTIME_JIT_INTERPRET=1, or @jit(interpret=True)): the kernel body runs as plain Python over
every work-item, in order, on host views of its buffers; compiled kernels must agree with it (SPEC §4)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..core import DeviceMemory, Stream, make_error
from ..errors import LaunchError
from .builtins import _item

_ENV_DATA = getattr(os.environ, "_data", None)  # CPython's encoded environment: a plain dict lookup per launch
_ENV_KEY = os.environ.encodekey("RUNTIME_JIT_INTERPRET") if hasattr(os.environ, "encodekey") else None


def interpret_enabled() -> bool:
    """Whether the reference mode is on (RUNTIME_JIT_INTERPRET set to anything but '', '0', 'false', 'no', 'off')."""
    if _ENV_DATA is not None and _ENV_KEY is not None:
        raw = _ENV_DATA.get(_ENV_KEY)
        if raw is None:
            return False
        value = os.environ.decodevalue(raw)
    else:
        value = os.environ.get("RUNTIME_JIT_INTERPRET", "")
    return value.strip().lower() not in ("", "0", "false", "no", "off")


class _ItemState:
    __slots__ = ("gid", "glob", "local")


def _host_view(mem: DeviceMemory, dt: np.dtype) -> tuple:
    """(numpy view or host copy of mem as dt, write-back function or None)."""
    n = mem.nbytes // dt.itemsize
    if mem.device.properties.unified_addressing:
        import ctypes
        if n == 0:
            return np.empty(0, dt), None
        raw = (ctypes.c_char * (n * dt.itemsize)).from_address(mem.ptr)
        return np.frombuffer(raw, dtype=dt), None
    from .core import copy
    host = np.empty(n, dt)
    copy(host, mem)
    return host, (lambda: copy(mem, host))


def _run_reference(k: Any, stream: Stream, args: tuple, glob: tuple, local: tuple, ndim: int) -> None:
    """Run the Python body over every work-item, in order, after the stream's queued work (synchronously)."""
    stream.synchronize()
    pyargs, writebacks = [], []
    for i, a in enumerate(args):
        if isinstance(a, DeviceMemory):
            ann = k._annotations.get(k.param_names[i])
            dt = k.annotation_dtype(ann, param=k.param_names[i]) if ann is not None else a.dtype
            view, wb = _host_view(a, dt)
            pyargs.append(view)
            if wb:
                writebacks.append(wb)
        else:
            pyargs.append(a)
    st = _ItemState()
    st.glob, st.local = glob, local
    saved = getattr(_item, "state", None)
    _item.state = st
    fn = k.fn
    try:
        with np.errstate(all="ignore"):  # kernels do not warn per element
            for z in range(glob[2]):
                for y in range(glob[1]):
                    for x in range(glob[0]):
                        st.gid = (x, y, z)
                        try:
                            fn(*pyargs)
                        except Exception as e:
                            raise make_error(LaunchError, f"kernel '{k.name}' (reference mode) failed at global id "
                                                          f"{(x, y, z)[:ndim]}: {type(e).__name__}: {e}") from e
    finally:
        _item.state = saved
        for wb in writebacks:
            wb()
