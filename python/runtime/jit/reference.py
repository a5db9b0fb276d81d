"""The reference mode (RUNTIME_JIT_INTERPRET=1, or @jit(interpret=True)): the kernel body runs as plain Python over
every work-item, in order, on host views of its buffers; compiled kernels must agree with it (docs/jit.md, "The
reference mode", lists where they may differ).

A kernel that calls runtime.barrier() runs group by group: each item of the group is a generator (its body with
every barrier statement turned into a `yield`), and the group's items step together from one barrier to the next;
items that reach different barriers, or some a barrier while others end, are reported (a barrier in divergent
control flow). runtime.local_array() gives every item of a group the same array. print() formats its values as the
compiled kernel's rt_printf does (ints in decimal, floats as %g, bools as True/False)."""

from __future__ import annotations

import ast
import copy
import os
import sys
from typing import Any, Callable, Optional

import numpy as np

from ..core import DeviceMemory, Stream, make_error
from ..errors import InvalidValueError, LaunchError, StreamCaptureUnsupportedError
from .builtins import _item, barrier, local_array

_ENV_DATA = getattr(os.environ, "_data", None)  # CPython's encoded environment: a plain dict lookup per launch
_ENV_KEY = os.environ.encodekey("RUNTIME_JIT_INTERPRET") if hasattr(os.environ, "encodekey") else None


_CHECK_KEY = os.environ.encodekey("RUNTIME_CHECK_BOUNDS") if hasattr(os.environ, "encodekey") else None


def _env_flag(key: Any, name: str) -> bool:
    """Whether environment variable `name` (encoded: `key`) is set to anything but '', '0', 'false', 'no', 'off'."""
    if _ENV_DATA is not None and key is not None:
        raw = _ENV_DATA.get(key)
        if raw is None:
            return False
        value = os.environ.decodevalue(raw)
    else:
        value = os.environ.get(name, "")
    return value.strip().lower() not in ("", "0", "false", "no", "off")


def interpret_enabled() -> bool:
    """Whether the reference mode is on (RUNTIME_JIT_INTERPRET set to anything but '', '0', 'false', 'no', 'off')."""
    return _env_flag(_ENV_KEY, "RUNTIME_JIT_INTERPRET")


def check_bounds_enabled() -> bool:
    """Whether checked mode is on for every kernel (RUNTIME_CHECK_BOUNDS, read like RUNTIME_JIT_INTERPRET)."""
    return _env_flag(_CHECK_KEY, "RUNTIME_CHECK_BOUNDS")


class _NoWrap(np.ndarray):
    """A buffer's host view in the reference mode: a negative index is an error, as in compiled kernels (NumPy would
    count it from the end)."""

    def _check(self, idx: Any) -> None:
        for i in (idx if isinstance(idx, tuple) else (idx,)):
            if isinstance(i, (int, np.integer)) and i < 0:
                raise IndexError(f"index {int(i)} is negative: kernels index from 0 (an index below 0 or past the "
                                 f"array's shape is out of bounds)")

    def __getitem__(self, idx: Any) -> Any:
        self._check(idx)
        return np.ndarray.__getitem__(self, idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        self._check(idx)
        np.ndarray.__setitem__(self, idx, value)


class _ItemState:
    __slots__ = ("gid", "glob", "local", "group_arrays", "counts", "item")

    def __init__(self) -> None:
        self.group_arrays = None  # the group's local arrays (runtime.local_array), in the order items ask for them
        self.counts: list = []  # per item of the group: local arrays it has asked for so far
        self.item = 0  # the item of the group being run


def mem_layout(mem: DeviceMemory) -> tuple:
    """(shape, strides in bytes or None for C order) of device memory."""
    shape = getattr(mem, "shape", None)
    shape = tuple(int(d) for d in shape) if shape is not None else (mem.size,)
    strides = getattr(mem, "strides", None)
    return shape, (tuple(int(x) for x in strides) if strides is not None else None)


def _ref_print(*values: Any, sep: str = " ", end: str = "\n") -> None:
    """print() as a compiled kernel's rt_printf formats it."""
    out = []
    for v in values:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, (bool, np.bool_)):
            out.append("True" if v else "False")
        elif isinstance(v, (int, np.integer)):
            out.append(str(int(v)))
        else:
            out.append("%g" % float(v))
    sys.stdout.write(sep.join(out) + end)
    sys.stdout.flush()


def _make_factory(k: Any, kernel: bool) -> Optional[Callable]:
    """A factory of the reference version of k's body (print -> _ref_print; for a kernel, barrier statements ->
    yield), or None when the body needs neither."""
    tree = copy.deepcopy(k.tree)
    tree.decorator_list = []
    found = {"print": False, "barrier": False}

    class Rewrite(ast.NodeTransformer):
        def visit_Expr(self, node: ast.Expr) -> Any:
            if kernel and isinstance(node.value, ast.Call) and k._static_callee(node.value.func) is barrier:
                found["barrier"] = True
                return ast.copy_location(ast.Expr(ast.copy_location(ast.Yield(None), node)), node)
            self.generic_visit(node)
            return node

        def visit_Call(self, node: ast.Call) -> Any:
            self.generic_visit(node)
            if k._static_callee(node.func) is print:
                found["print"] = True
                node.func = ast.copy_location(ast.Name("rt_ref_print_", ast.Load()), node.func)
            return node

    tree = Rewrite().visit(tree)
    if not (found["print"] or found["barrier"]):
        return None
    ast.increment_lineno(tree, k.first_line - 1)  # tracebacks name the kernel's own lines
    freevars = list(k.fn.__code__.co_freevars)
    factory = ast.FunctionDef(
        name="rt_ref_factory_",
        args=ast.arguments(posonlyargs=[], args=[ast.arg("rt_ref_print_")] + [ast.arg(v) for v in freevars],
                           kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[tree, ast.Return(ast.Name(tree.name, ast.Load()))], decorator_list=[], returns=None)
    if "type_params" in ast.FunctionDef._fields:
        factory.type_params = []
    mod = ast.fix_missing_locations(ast.Module(body=[factory], type_ignores=[]))
    ns: dict = {}
    exec(compile(mod, k.file, "exec"), k.fn.__globals__, ns)
    return ns["rt_ref_factory_"]


def reference_function(k: Any, kernel: bool = False) -> Callable:
    """The function the reference mode runs for k (a kernel, or a device function it calls)."""
    cache = k._ref_factory
    if cache is None:
        cache = k._ref_factory = {}
    factory = cache.get(kernel)
    if factory is None:
        factory = cache[kernel] = _make_factory(k, kernel) or False
    if not factory:
        return k.fn
    cells = k.fn.__closure__ or ()
    return factory(_ref_print, *[c.cell_contents for c in cells])


def _host_view(mem: DeviceMemory, dt: np.dtype) -> tuple:
    """(numpy view or host copy of mem as dt, write-back function or None)."""
    n = mem.nbytes // dt.itemsize
    if mem.device.properties.unified_addressing:
        import ctypes
        if n == 0:
            return np.empty(0, dt), None
        raw = (ctypes.c_char * (n * dt.itemsize)).from_address(mem.ptr)
        view = np.frombuffer(raw, dtype=dt)
        if mem.readonly:  # a store through any alias raises, as the compiled launch refuses the memory
            view.flags.writeable = False
        return view, None
    from .core import copy
    host = np.empty(n, dt)
    copy(host, mem)
    if mem.readonly:
        host.flags.writeable = False
        return host, None
    return host, (lambda: copy(mem, host))


def _run_reference(k: Any, stream: Stream, args: tuple, glob: tuple, local: tuple, ndim: int) -> None:
    """Run the Python body over every work-item, in order, after the stream's queued work (synchronously)."""
    if stream.is_capturing:
        raise make_error(StreamCaptureUnsupportedError,
                         f"kernel '{k.name}' runs in the reference mode (in Python, at the call), which a stream "
                         f"capture cannot record: capture the compiled kernel (unset RUNTIME_JIT_INTERPRET, or "
                         f"interpret=False)")
    stream.synchronize()
    pyargs, writebacks = [], []
    shaped = k.shaped_params()
    for i, a in enumerate(args):
        if isinstance(a, DeviceMemory):
            ann = k._annotations.get(k.param_names[i])
            dt = k.annotation_dtype(ann, param=k.param_names[i]) if ann is not None else a.dtype
            view, wb = _host_view(a, dt)
            if i in shaped:  # indexed by its dimensions: a view of the memory's shape and strides
                shape, strides = mem_layout(a)
                view = np.lib.stride_tricks.as_strided(view, shape, strides) if strides is not None and view.size \
                    else view.reshape(shape)
            pyargs.append(view.view(_NoWrap))
            if wb:
                writebacks.append(wb)
        else:
            pyargs.append(a)
    st = _ItemState()
    st.glob, st.local = glob, local
    saved = getattr(_item, "state", None)
    _item.state = st
    fn = reference_function(k, kernel=True)
    grouped = _is_generator(fn) or _uses_local_arrays(k)
    try:
        with np.errstate(all="ignore"):  # kernels do not warn per element
            if grouped:
                return _run_groups(k, fn, pyargs, st, ndim)
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


def _is_generator(fn: Callable) -> bool:
    return bool(fn.__code__.co_flags & 0x20)  # CO_GENERATOR: the body had barrier statements


def _uses_local_arrays(k: Any) -> bool:
    return any(isinstance(n, ast.Call) and k._static_callee(n.func) is local_array for n in ast.walk(k.tree))


def _run_groups(k: Any, fn: Callable, pyargs: list, st: _ItemState, ndim: int) -> None:
    """Run the kernel group by group, each group's items stepping together from barrier to barrier."""
    glob, local = st.glob, st.local
    gen = _is_generator(fn)
    if gen and any(glob[d] % local[d] for d in range(3)):
        raise make_error(InvalidValueError, f"kernel '{k.name}' uses barriers: its global size {glob[:ndim]} must be "
                                            f"a whole number of work-groups of {local[:ndim]} in each dimension")
    groups = [-(-glob[d] // local[d]) for d in range(3)]
    for gz in range(groups[2]):
        for gy in range(groups[1]):
            for gx in range(groups[0]):
                items = []
                for lz in range(local[2]):
                    for ly in range(local[1]):
                        for lx in range(local[0]):
                            g = (gx * local[0] + lx, gy * local[1] + ly, gz * local[2] + lz)
                            if g[0] < glob[0] and g[1] < glob[1] and g[2] < glob[2]:
                                items.append(g)
                st.group_arrays, st.counts = [], [0] * len(items)
                gens = []
                for j, g in enumerate(items):
                    st.item, st.gid = j, g
                    r = _step(k, lambda: fn(*pyargs), g, ndim)
                    gens.append(r)
                live = list(range(len(items))) if gen else []
                while live:
                    waiting, ended = [], []
                    for j in live:
                        st.item, st.gid = j, items[j]
                        (waiting if _step(k, lambda: _advance(gens[j]), items[j], ndim) else ended).append(j)
                    lines = {gens[j].gi_frame.f_lineno for j in waiting}
                    if waiting and (ended or len(lines) > 1):
                        where = f"work-item {items[ended[0]][:ndim]} ended" if ended else \
                            f"items wait at barriers on lines {sorted(lines)}"
                        raise make_error(LaunchError, f"kernel '{k.name}' (reference mode): the items of work-group "
                                                      f"{(gx, gy, gz)[:ndim]} reached different barriers ({where}): a "
                                                      f"barrier in divergent control flow")
                    live = waiting
    st.group_arrays = None


def _advance(g: Any) -> bool:
    """Run generator g to its next barrier: True if it stopped at one, False if it ended."""
    try:
        next(g)
        return True
    except StopIteration:
        return False


def _step(k: Any, run: Callable, gid: tuple, ndim: int) -> Any:
    try:
        return run()
    except Exception as e:
        raise make_error(LaunchError, f"kernel '{k.name}' (reference mode) failed at global id "
                                      f"{gid[:ndim]}: {type(e).__name__}: {e}") from e
