"""How a @runtime.jit kernel is launched: _Compiled (a kernel compiled for one signature and device, and its
argument layout: one code per parameter plus the hidden global sizes) and the launch path, from the plan of the
previous launch (one native call) through compiling a new signature to the reference mode. Packing is the one
packer every kernel from Python uses (runtime/launch.py, LaunchPlan in python/src/core_module.cpp)."""

from __future__ import annotations

import struct
from typing import Any, Optional

import numpy as np

from .. import launch as _shared
from ..core import DeviceMemory, Stream
from .reference import _run_reference, interpret_enabled
from .types import _STORAGE, _Buf

_CODES = {"b": "?", "i1": "b", "i2": "h", "i4": "i", "i8": "q", "u1": "B", "u2": "H", "u4": "I", "u8": "Q",
          "f4": "f", "f8": "d"}


def _pack_code(dt: np.dtype) -> str:
    """The packer's letter for a scalar parameter of dtype dt (struct's letters; 16-bit floats are passed as
    float, the type the kernel computes them in)."""
    if dt in _STORAGE:
        return "f"
    return _CODES["b" if dt.kind == "b" else f"{dt.kind}{dt.itemsize}"]


class _Compiled:
    """A kernel compiled for one (signature, device): module/function handles and the argument layout."""

    def __init__(self, source: str, module: int, func: int, params: list, ndim: int, name: str = "",
                 names: tuple = (), may_write: Optional[list] = None, bounded: Optional[list] = None) -> None:
        self.source, self.module, self.func = source, module, func
        self.params = params
        # (parameter, itemsize, dimension) of the buffers indexed by the global id: the plan refuses a global size
        # larger than their element count (JitKernel.id_indexed).
        self.bounded = list(bounded or [])
        # Per entry of `codes` (hidden shapes and strides: never written): whether the kernel may write there.
        writes = list(may_write) if may_write is not None else [True] * len(params)
        self.name, self.names = name, list(names)
        self.param_sizes = [8 if isinstance(p, _Buf) else 4 if p.dt in _STORAGE else p.dt.itemsize for p in params]
        # Shaped buffers' shapes and strides (in elements): int64 parameters after the kernel's own.
        self.hidden = [(i, len(p.hidden())) for i, p in enumerate(params) if isinstance(p, _Buf) and p.hidden()]
        hidden_names = [f"{names[i] if i < len(names) else i}.{what}" for i, p in enumerate(params)
                        if isinstance(p, _Buf) for _, what in p.hidden()]
        self.names = self.names + hidden_names
        self.param_sizes += [8] * len(hidden_names)
        sizes = self.param_sizes + [8] * ndim
        self.sizes = struct.pack(f"@{len(sizes)}N", *sizes)  # the native size_t array (_core.launch_kernel's)
        self.buf_idx = [i for i, p in enumerate(params) if isinstance(p, _Buf)]
        self.first_buf = self.buf_idx[0] if self.buf_idx else -1
        self.first_itemsize = params[self.first_buf].dt.itemsize if self.buf_idx else 1
        self.codes = "".join("P" if isinstance(p, _Buf) else _pack_code(p.dt) for p in params) + "q" * len(hidden_names)
        self.writes = writes + [False] * len(hidden_names)
        self.ndim = ndim

    def plan(self, arg_types: tuple, dev: int) -> Any:
        """The launch plan for arguments of exactly these Python types (dtype values for device memory)."""
        return _shared.plan(self.func, self.name, self.codes, list(arg_types), self.param_sizes, self.names,
                            self.ndim, self.first_itemsize, dev, self.writes, self.bounded)


def launch(k: Any, stream: Stream, args: tuple, global_size: Any, local_size: Any) -> None:
    """Launch JitKernel k (JitKernel._launch): what stream.launch_kernel(k, *args, ...) runs."""
    # Memory with explicit strides (None: C-contiguous) takes the full path, which refuses strided memory where the
    # kernel indexes a buffer flat: the plans and the fast key below look at dtypes only.
    strided = False
    for a in args:
        if type(a) is DeviceMemory and a._strides is not None:
            strided = True
            break
    # Fastest path: the launch plan of the previous default-shaped launch; it checks, packs and launches in one
    # C++ call, or returns None without launching (other argument types, freed memory, ...): then the full path.
    if global_size is None and local_size is None and not strided:
        plan = k._last_plan
        if plan is None and k._last_valued is not None:
            plan, vals = k._last_valued
            if vals != k._values():
                plan = None
        if plan is not None and plan.device == stream.device.index and k._compiled_mode():
            if plan.launch(args, stream.handle) is not None:
                return
    if k._shaped is None:
        k.shaped_params()
    interp = k.interpret if k.interpret is not None else interpret_enabled()
    if k._shaped or (not interp and k.checked()):
        return _launch_hidden(k, stream, args, global_size, local_size)
    if interp or global_size is not None or local_size is not None:
        glob, local, ndim = _shared.shape(k.name, args, global_size, local_size)
    else:
        glob = local = None  # the common case, resolved below from the compiled entry (no per-call parsing)
        ndim = 1
    if interp:
        k._signature(args, ndim)  # same argument checks as the compiled path
        _shared.check_writable(k.name, args, k.param_names, k.may_write)
        k.check_launch_size(args, glob)
        return _run_reference(k, stream, args, glob, local, ndim)
    # Fast key: the Python types of the arguments (dtype for device memory); a miss takes the full path,
    # which validates the arguments and compiles.
    dev = stream.device.index
    types = tuple([a._dtype if type(a) is DeviceMemory else type(a) for a in args])
    vals = k._values()
    fkey = (types, ndim, dev, vals)
    c = k._fast.get(fkey)
    if c is None or strided:
        key, params = k._signature(args, ndim)  # raises for strided memory the kernel indexes flat
        c = k._fast[fkey] = k._get(key, params, ndim, dev)
    plan = k._plans.get(fkey)
    if plan is None:
        plan = k._plans[fkey] = c.plan(types, dev)
    # A strict launch: the arguments have the plan's types, and one whose value the kernel cannot take (freed
    # memory, an integer out of range, ...) raises InvalidValueError.
    if glob is None:
        if c.first_buf < 0:
            _shared.shape(k.name, args, None, None)  # raises: no buffer to take the global size from
        plan.launch_strict(args, stream.handle)
        if vals:
            k._last_valued = (plan, vals)
        else:
            k._last_plan = plan
    else:
        plan.launch_shaped(args, stream.handle, glob[0], glob[1], glob[2], local[0], local[1], local[2], True)


def _layout(k: Any, args: tuple) -> Optional[tuple]:
    """The layout key of the shaped buffer arguments (per shaped parameter its ndim and whether it is C-contiguous),
    or None when one is not device memory (the full path reports it)."""
    from .reference import mem_layout
    key = []
    for i in k._shaped:
        a = args[i] if i < len(args) else None
        if not isinstance(a, DeviceMemory):
            return None
        shape, strides = mem_layout(a)
        isz = a.dtype.itemsize
        key.append((len(shape), not shape or strides is None or strides[-1] == isz))
    return tuple(key)


def _hidden_values(params: list, args: tuple) -> tuple:
    """The hidden parameters' values, in the compiled signature's order: per shaped buffer its shape, then its
    strides in elements (the last left out when it is 1); per flat buffer in checked mode its element count."""
    from .reference import mem_layout
    vals: list = []
    for p, a in zip(params, args):
        if not isinstance(p, _Buf) or not p.hidden():
            continue
        if not p.shaped:
            vals.append(a.nbytes // p.dt.itemsize)
            continue
        shape, strides = mem_layout(a)
        isz = a.dtype.itemsize
        el = [s // isz for s in strides] if strides is not None else None
        if el is None:
            el, step = [], 1
            for d in reversed(shape):
                el.append(step)
                step *= max(d, 1)
            el.reverse()
        vals += list(shape) + (el[:-1] if p.contig else el)
    return tuple(vals)


def _launch_hidden(k: Any, stream: Stream, args: tuple, global_size: Any, local_size: Any) -> None:
    """A launch of a kernel with hidden parameters that follow the arguments: shaped buffers' shapes and strides,
    and in checked mode every flat buffer's element count."""
    interp = k.interpret if k.interpret is not None else interpret_enabled()
    glob, local, ndim = _shared.shape(k.name, args, global_size, local_size)
    if interp:
        k._signature(args, ndim)
        _shared.check_writable(k.name, args, k.param_names, k.may_write)
        k.check_launch_size(args, glob)
        return _run_reference(k, stream, args, glob, local, ndim)
    dev = stream.device.index
    layout = _layout(k, args)
    types = tuple([a._dtype if type(a) is DeviceMemory else type(a) for a in args])
    fkey = (types, layout, ndim, dev, k._values(), k.checked())
    c = k._fast.get(fkey) if layout is not None else None
    if c is None:
        key, params = k._signature(args, ndim)  # raises for arguments the kernel cannot take
        c = k._get(key, params, ndim, dev)
        if layout is not None:
            k._fast[fkey] = c
    hidden = _hidden_values(c.params, args)
    plan = k._plans.get(fkey)
    if plan is None:
        plan = k._plans[fkey] = c.plan(types + (int,) * len(hidden), dev)
    plan.launch_shaped(args + hidden, stream.handle, glob[0], glob[1], glob[2], local[0], local[1], local[2], True)
