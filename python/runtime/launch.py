"""What every kernel launch from Python shares (@runtime.jit kernels and runtime.Function): the launch shape
(global and local size, SPEC §3's default global size) and the one argument packer, a _core.LaunchPlan, which
checks, packs and launches in one native call (python/src/core_module.cpp)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _core
from .core import DeviceMemory, make_error
from .errors import InvalidValueError

DEFAULT_LOCAL = {1: (256, 1, 1), 2: (16, 16, 1), 3: (8, 8, 4)}


def plan(func: int, name: str, codes: str, expected: list, sizes: list, names: list, ndim: int,
         first_itemsize: int = 1, device: int = -1, writes: Optional[list] = None,
         bounded: Optional[list] = None) -> Any:
    """A launch plan of kernel `func`: per parameter a code ('P' device memory, a struct letter for a typed scalar,
    'n' an untyped parameter), what a speculative launch expects of it, its size and name; ndim hidden global
    sizes after the parameters (see LaunchPlan in python/src/core_module.cpp). `writes`: per parameter, whether
    the kernel may write the memory passed there (read-only memory is refused there); None: every parameter may
    be written (a runtime.Function: the constness of its parameters is unknown). `bounded`: (parameter, itemsize,
    dimension) of memory parameters that need at least the global size of that dimension in elements (buffers a
    @runtime.jit kernel indexes by the global id); a launch over more is refused."""
    return _core.LaunchPlan(func, name, codes, expected, sizes, names, DeviceMemory, np.generic, ndim,
                            first_itemsize, device, None if writes is None else [bool(w) for w in writes],
                            [tuple(int(v) for v in b) for b in bounded or ()])


def check_writable(name: str, args: tuple, names: list, writes: Optional[list]) -> None:
    """Raises InvalidValueError for read-only device memory among `args` where the kernel may write (`writes` as
    for plan()): the check of the launch plans, for launches that do not go through one (the reference mode of
    @runtime.jit kernels)."""
    for i, a in enumerate(args):
        if isinstance(a, DeviceMemory) and a.readonly and (writes is None or (i < len(writes) and writes[i])):
            pname = f" ('{names[i]}')" if i < len(names) and names[i] else ""
            raise make_error(InvalidValueError,
                             f"kernel '{name}' argument {i}{pname}: {a._describe()} is read-only, and the kernel may "
                             f"write this parameter: pass a writable copy, e.g. runtime.to_device(x) of the host "
                             f"array")


def _dims(name: str, what: str, v: Any, allow_zero: bool) -> tuple:
    vals = v if isinstance(v, tuple) else (v,)
    if not 1 <= len(vals) <= 3:
        raise make_error(InvalidValueError,
                         f"kernel '{name}': {what} must be an int or a tuple of 1 to 3 ints, got {v!r}")
    out = []
    for x in vals:
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
            raise make_error(InvalidValueError, f"kernel '{name}': {what} must hold ints, got {v!r}")
        if x < 0 or (x == 0 and not allow_zero):
            raise make_error(InvalidValueError, f"kernel '{name}': {what} = {v!r} must be "
                                                f"{'non-negative' if allow_zero else 'positive'}")
        out.append(int(x))
    return tuple(out)


def shape(name: str, args: tuple, global_size: Any, local_size: Any) -> tuple:
    """(global size, local size, ndim), each size padded to 3 dims; SPEC §3 default global size."""
    if global_size is None:
        first = next((a for a in args if isinstance(a, DeviceMemory)), None)
        if first is None:
            raise make_error(InvalidValueError, f"kernel '{name}': no buffer argument to take the global size from; "
                                                f"pass global_size=")
        g = (first.size,)
    else:
        g = _dims(name, "global_size", global_size, True)
    ndim = len(g)
    if local_size is None:
        lo = DEFAULT_LOCAL[ndim][:ndim]
    else:
        lo = _dims(name, "local_size", local_size, False)
        if len(lo) != ndim:
            raise make_error(InvalidValueError, f"kernel '{name}': local_size {local_size!r} has {len(lo)} dims but "
                                                f"global_size has {ndim}")
    return g + (1,) * (3 - ndim), lo + (1,) * (3 - ndim), ndim


def call(kernel: Any, args: tuple, kwargs: dict) -> None:
    """`kernel(*args, global_size=None, local_size=None, stream=None)`: launch_kernel on `stream`, else on the current
    stream (`with stream:`, else the current device's default stream); asynchronous, as every launch. The global
    size defaults to the element count of the first array argument (SPEC §3)."""
    from .core import Stream, current_stream
    unknown = set(kwargs) - {"global_size", "local_size", "stream"}
    if unknown:
        raise make_error(InvalidValueError, f"{kernel.name}(): unexpected keyword argument(s) "
                                            f"{', '.join(sorted(unknown))} (expected global_size, local_size, stream; "
                                            f"kernel arguments are positional)")
    stream = kwargs.get("stream")
    if stream is None:
        stream = current_stream()
    elif not isinstance(stream, Stream):
        raise make_error(InvalidValueError, f"{kernel.name}(): stream must be a runtime.Stream or None, got "
                                            f"{type(stream).__name__}")
    stream.launch_kernel(kernel, *args, global_size=kwargs.get("global_size"), local_size=kwargs.get("local_size"))
