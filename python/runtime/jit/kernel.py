"""JitKernel: a Python function taken as a @runtime.jit kernel — its source and AST, parameters, the argument
signatures it is specialised on, the globals compiled in as constants, and its caches of compiled kernels and
launch plans per signature and device; plus the @jit decorator."""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import threading
from typing import Any, Callable, Optional

import numpy as np

from .. import _core
from ..core import Device, DeviceMemory, make_error
from ..errors import CompileError, InvalidValueError, NotSupportedError
from .launch import _Compiled, launch
from .builtins import _item, get_global_id
from .reference import check_bounds_enabled, interpret_enabled, mem_layout, reference_function
from .target import Target, device_target, target_for
from .translate import _cname, _Translator
from .types import _BOOL, _CTYPES, _F64, _I64, _SUPPORTED_DTYPES, BOOL, WEAK_FLOAT, WEAK_INT, Ty, _Buf, _Sig

def _block_lines(fn: Callable) -> Optional[list]:
    """The decorator and def lines of `fn` and its indented body, found by indentation from co_firstlineno; None if
    unsure. Unlike inspect.getsourcelines this needs no tokenize (whose regular expressions cost a fresh process
    ~5 ms): it is what makes a warm-cache first launch cheap."""
    code = fn.__code__
    all_lines = linecache.getlines(code.co_filename, fn.__globals__)
    start = code.co_firstlineno - 1
    if not 0 <= start < len(all_lines):
        return None
    first = all_lines[start]
    base = len(first) - len(first.lstrip())
    out = [first]
    seen_def = first.lstrip().startswith(("def ", "async def "))
    for line in all_lines[start + 1:]:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            out.append(line)
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= base:
            if not seen_def and line.lstrip().startswith(("@", "def ", "async def ")):
                seen_def = seen_def or line.lstrip().startswith(("def ", "async def "))
                out.append(line)
                continue
            break
        out.append(line)
    while out and (not out[-1].strip() or out[-1].strip().startswith("#")):
        out.pop()
    return out if seen_def else None


def _source_lines(fn: Callable) -> tuple:
    """(lines, first line number) of a function's source, like inspect.getsourcelines (used as its fallback when the
    quick indentation-based cut does not parse to a function of that name)."""
    lines = _block_lines(fn)
    if lines:
        try:
            tree = ast.parse(textwrap.dedent("".join(lines)))
            node = tree.body[0] if len(tree.body) == 1 else None
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn.__name__:
                return lines, fn.__code__.co_firstlineno
        except (SyntaxError, ValueError):
            pass
    return inspect.getsourcelines(fn)


_MISSING = object()


def _getattrs(obj: Any, attrs: tuple) -> Any:
    for a in attrs:
        obj = getattr(obj, a, _MISSING)
    return obj


def _value_token(v: Any) -> tuple:
    """A cache-key token for a constant's value: its type and exact bits."""
    if isinstance(v, np.generic):
        return (v.dtype.str, v.tobytes())
    if isinstance(v, float):
        return (float, v.hex())
    return (type(v), v if isinstance(v, int) else id(v))


def _global_reads(tree: ast.AST, local_names: set) -> list:
    """The names and attribute chains (("N",), ("cfg", "SCALE")) the body reads that are not its own variables."""
    chains: list = []

    def visit(n: ast.AST) -> None:
        attrs = []
        m = n
        while isinstance(m, ast.Attribute):
            attrs.append(m.attr)
            m = m.value
        if isinstance(m, ast.Name) and isinstance(n.ctx, ast.Load):
            if m.id not in local_names:
                chain = (m.id, *reversed(attrs))
                if chain not in chains:
                    chains.append(chain)
            return
        for c in ast.iter_child_nodes(n):
            visit(c)

    for st in tree.body:
        visit(st)
    return chains



def _may_write(tree: ast.FunctionDef, params: list) -> list:
    """Per parameter, whether the function may write memory through it (launches refuse read-only memory there):
    the base of a subscript store (`a[i] = v`, `a[i] += v`), or a name handed to any call (an atomic, or a device
    function, which may store through it). Conservative: a parameter also counts as written when it is rebound."""
    written = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
            base = n.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                written.add(base.id)
        elif isinstance(n, ast.Call):
            written.update(a.id for a in n.args if isinstance(a, ast.Name))
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            written.add(n.id)
    return [p in written for p in params]

def _unconditional_subscripts(e: ast.AST, out: list) -> None:
    """The subscripts expression e evaluates whatever its values: not those in the branches of a conditional
    expression, nor in the operands of and/or after the first, nor in chained comparisons after the first."""
    if isinstance(e, ast.IfExp):
        _unconditional_subscripts(e.test, out)
        return
    if isinstance(e, ast.BoolOp):
        _unconditional_subscripts(e.values[0], out)
        return
    if isinstance(e, ast.Compare):
        _unconditional_subscripts(e.left, out)
        _unconditional_subscripts(e.comparators[0], out)
        return
    if isinstance(e, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
        return
    if isinstance(e, ast.Subscript):
        out.append(e)
    for c in ast.iter_child_nodes(e):
        _unconditional_subscripts(c, out)


class JitKernel:
    """A Python function compiled to a device kernel per argument signature. Launch it with
    `stream.launch_kernel(kernel, *args, global_size=..., local_size=...)`; see `source(*args)`."""

    def __init__(self, fn: Callable, options: Optional[str] = None, interpret: Optional[bool] = None,
                 boundscheck: Optional[bool] = None) -> None:
        if not inspect.isfunction(fn):
            raise make_error(InvalidValueError, f"@runtime.jit applies to Python functions, got {type(fn).__name__}")
        self.fn = fn
        self.name = fn.__name__
        self.cname = _cname(fn.__name__)
        self.options = options
        self.interpret = interpret
        self.boundscheck = boundscheck  # checked mode: True, False, or None (RUNTIME_CHECK_BOUNDS decides)
        self.file = inspect.getsourcefile(fn) or "<unknown>"
        try:
            lines, self.first_line = _source_lines(fn)
        except OSError as e:
            raise make_error(CompileError, f"@runtime.jit: the source of '{self.name}' is not available ({e})") \
                from None
        module = ast.parse(textwrap.dedent("".join(lines)))
        tree = module.body[0]
        if not isinstance(tree, ast.FunctionDef):
            raise make_error(CompileError, f"{self.file}:{self.first_line}: @runtime.jit needs a 'def' function")
        # AST line numbers count from the first line getsourcelines returned (the decorator): error() adds first_line.
        self.tree = tree
        self._device_function = self._returns_value(tree)
        a = tree.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            raise make_error(CompileError, f"{self.file}:{self.first_line}: @runtime.jit kernel '{self.name}': "
                                           f"parameters must be plain positional names (no defaults, *args, **kw)")
        self.param_names = [p.arg for p in a.args]
        self.def_line = self.first_line + tree.lineno - 1  # the 'def' line (first_line may be a decorator's)
        # The file as a C string literal for #line directives.
        self.c_file = "".join("\\" + c if c in '"\\' else c if c.isprintable() else "?" for c in self.file)
        self.assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.may_write = _may_write(tree, self.param_names)
        self._annotations = dict(getattr(fn, "__annotations__", {}))
        self._cache: dict = {}  # (signature key, device) -> _Compiled
        self._fast: dict = {}  # (argument Python types, ndim, device) -> _Compiled: the launch path's lookup
        self._plans: dict = {}  # same key -> _core.LaunchPlan (C++ check + pack + launch)
        self._last_plan: Any = None  # the plan of the last default-shaped launch: tried first (also by core.py)
        # Globals and closure variables the body reads: those holding numbers are compiled in as constants, so their
        # values are part of every cache key (_values); found when first needed (a global may be defined after the
        # decorator runs). A kernel with such values never sets _last_plan: its launches check the values first.
        self._global_chains = _global_reads(tree, set(self.param_names) | self.assigned)
        self._value_getters: Optional[list] = None
        self._last_valued: Any = None  # (plan, values) of the last default-shaped launch of such a kernel
        self._lock = threading.Lock()
        self._shaped: Optional[tuple] = None  # indices of the shaped buffer parameters (shaped_params)
        self._ref_factory: Any = None  # the reference mode's version of the body (reference.py)
        self._id_indexed: Optional[list] = None  # id_indexed(): (parameter, dimension) of buffers indexed b[i]
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__wrapped__ = fn

    def lookup(self, name: str, missing: Callable) -> Any:
        fn = self.fn
        if fn.__closure__ and name in fn.__code__.co_freevars:
            return fn.__closure__[fn.__code__.co_freevars.index(name)].cell_contents
        if name in fn.__globals__:
            return fn.__globals__[name]
        b = fn.__globals__.get("__builtins__", __builtins__)
        b = b if isinstance(b, dict) else vars(b)
        if name in b:
            return b[name]
        raise missing()

    def annotation_dtype(self, ann: Any, tr: Optional[_Translator] = None, param: str = "") -> np.dtype:
        """The dtype an annotation (object, string, or AST node of a local annotation) denotes."""
        obj = ann
        if isinstance(ann, ast.AST):
            obj = tr.resolve(ann) if not isinstance(ann, ast.Constant) else ann.value
        if isinstance(obj, str):
            try:
                obj = np.dtype(obj)
            except TypeError:
                obj = self.lookup(obj.split(".")[-1], lambda: make_error(
                    CompileError, f"{self.file}:{self.first_line}: annotation {ann!r} of '{param}' is not a dtype"))
        if obj is int:
            return _I64
        if obj is float:
            return _F64
        if obj is bool:
            return _BOOL
        try:
            dt = np.dtype(obj)
        except TypeError:
            dt = None
        if dt is None or dt not in _CTYPES:
            where = f"{self.file}:{self.first_line}"
            raise make_error(CompileError, f"{where}: annotation {obj!r} of '{param}' in @runtime.jit kernel "
                                           f"'{self.name}' is not a supported dtype (supported: {_SUPPORTED_DTYPES})")
        return dt

    # ---- shaped buffers
    def shaped_params(self, _seen: Optional[set] = None) -> tuple:
        """Indices of the parameters the body uses as shaped arrays: indexed with a tuple (a[y, x]), or whose
        shape, strides, ndim or size it reads, or passed where a device function does. Their shapes and strides
        are hidden parameters; every other buffer is indexed flat (a[i]) whatever its shape."""
        if self._shaped is not None:
            return self._shaped
        seen = set() if _seen is None else _seen
        seen.add(self)
        names = set()
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and isinstance(n.slice, ast.Tuple):
                names.add(n.value.id)
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and \
                    n.attr in ("shape", "strides", "ndim", "size"):
                names.add(n.value.id)
            elif isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute)):
                callee = self._static_callee(n.func)
                if isinstance(callee, JitKernel) and callee not in seen:
                    inner = callee.shaped_params(seen)
                    for j, a in enumerate(n.args):
                        if j in inner and isinstance(a, ast.Name):
                            names.add(a.id)
        out = tuple(i for i, p in enumerate(self.param_names) if p in names)
        if _seen is None or not seen - {self}:
            self._shaped = out
        return out

    # ---- the launch-size check
    def id_indexed(self) -> list:
        """(parameter index, dimension d) of each flat buffer the body indexes by a bare global id, b[i] with
        `i = runtime.get_global_id(d)` (i never rebound) or b[runtime.get_global_id(d)], in a statement that every
        work-item runs: a top-level statement before any that may end the item early (a return, an assert, a call of
        a device function, a compound statement holding one of those); accesses inside if/while/for, conditional
        expressions and the later operands of and/or do not count (they may be guarded: `if i < n: b[i] = ...`).
        A launch over more items than such a buffer has elements would index past its end: it is refused."""
        if self._id_indexed is not None:
            return self._id_indexed
        stores: dict = {}
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                stores[n.id] = stores.get(n.id, 0) + 1
        shaped = {self.param_names[i] for i in self.shaped_params()}
        buffers = {p: i for i, p in enumerate(self.param_names) if p not in shaped and p not in stores}

        def id_dim(e: ast.AST) -> Optional[int]:
            if not (isinstance(e, ast.Call) and not e.keywords and len(e.args) <= 1
                    and self._static_callee(e.func) is get_global_id):
                return None
            if not e.args:
                return 0
            d = e.args[0].value if isinstance(e.args[0], ast.Constant) else None
            return d if type(d) is int and 0 <= d <= 2 else None

        def ends_early(st: ast.AST) -> bool:
            for n in ast.walk(st):
                if isinstance(n, (ast.Return, ast.Assert, ast.Raise, ast.Yield)):
                    return True
                if isinstance(n, ast.Call) and isinstance(self._static_callee(n.func), JitKernel):
                    return True
            return False

        ids: dict = {}
        found: list = []
        for st in self.tree.body:
            if ends_early(st):
                break
            if not isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
                continue  # a compound statement: what it indexes may be guarded
            subs: list = []
            for part in ([*st.targets, st.value] if isinstance(st, ast.Assign) else
                         [st.target, st.value] if isinstance(st, (ast.AugAssign, ast.AnnAssign)) else [st.value]):
                if part is not None:
                    _unconditional_subscripts(part, subs)
            for sub in subs:
                if not (isinstance(sub.value, ast.Name) and sub.value.id in buffers):
                    continue
                idx = sub.slice
                d = ids.get(idx.id) if isinstance(idx, ast.Name) else id_dim(idx)
                entry = (buffers[sub.value.id], d)
                if d is not None and entry not in found:
                    found.append(entry)
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                name = st.targets[0].id
                d = id_dim(st.value)
                if d is not None and stores.get(name) == 1:
                    ids[name] = d
        self._id_indexed = found
        return found

    def check_launch_size(self, args: tuple, glob: tuple) -> None:
        """Refuses (InvalidValueError) a launch of glob items over a buffer that id_indexed() says is indexed by
        the global id and has fewer elements (compiled launches check the same in their launch plan)."""
        for i, d in self.id_indexed():
            a = args[i] if i < len(args) else None
            if not isinstance(a, DeviceMemory):
                continue
            ann = self._annotations.get(self.param_names[i])
            dt = self.annotation_dtype(ann, param=self.param_names[i]) if ann is not None else a.dtype
            n = a.nbytes // dt.itemsize
            if n < glob[d]:
                raise make_error(InvalidValueError, launch_size_message(self.name, self.param_names[i], i, d,
                                                                        glob[d], n))

    def checked(self) -> bool:
        """Whether launches bounds-check every buffer access (boundscheck=True, or RUNTIME_CHECK_BOUNDS=1)."""
        return self.boundscheck if self.boundscheck is not None else check_bounds_enabled()

    def _static_callee(self, node: ast.AST) -> Any:
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id in self.assigned or node.id in self.param_names:
            return None
        try:
            obj = self.lookup(node.id, lambda: KeyError(node.id))
        except KeyError:
            return None
        for a in reversed(chain):
            obj = getattr(obj, a, None)
        return obj

    # ---- signatures
    def _param_type(self, i: int, a: Any) -> Any:
        name = self.param_names[i]
        ann = self._annotations.get(name)
        if isinstance(a, DeviceMemory):
            if ann is not None:
                dt = self.annotation_dtype(ann, param=name)
            else:
                if a.dtype not in _CTYPES:
                    raise self._unsupported_dtype(i, "device memory of dtype", a.dtype)
                dt = a.dtype
            shape, strides = mem_layout(a)
            if i not in self.shaped_params():
                if strides is not None and strides != _c_strides(shape, a.dtype.itemsize):
                    raise make_error(InvalidValueError,
                                     f"kernel '{self.name}' argument {i} ('{name}') is strided device memory, which "
                                     f"the kernel indexes flat ({name}[i]): index it by its dimensions, or pass "
                                     f"contiguous memory")
                return _Buf(dt, checked=self.checked())
            if dt.itemsize != a.dtype.itemsize:
                raise make_error(InvalidValueError,
                                 f"kernel '{self.name}' argument {i} ('{name}') is annotated {dt} but is memory of "
                                 f"{a.dtype}, with elements of another size: a shaped array keeps its elements")
            el = _elem_strides(shape, strides, dt.itemsize)
            if el is None:
                raise make_error(InvalidValueError,
                                 f"kernel '{self.name}' argument {i} ('{name}'): strides {strides} are not whole "
                                 f"elements of {dt}")
            return _Buf(dt, len(shape), contig=not shape or el[-1] == 1)
        if ann is not None and isinstance(a, (int, float, np.number, np.bool_)) and not isinstance(a, DeviceMemory):
            return Ty(self.annotation_dtype(ann, param=name))
        if isinstance(a, (bool, np.bool_)):
            return BOOL if isinstance(a, np.bool_) else Ty(_BOOL, True)
        if isinstance(a, int):
            return WEAK_INT
        if isinstance(a, float):
            return WEAK_FLOAT
        if isinstance(a, np.generic):
            if np.dtype(type(a)) not in _CTYPES:
                raise self._unsupported_dtype(i, "a NumPy scalar of dtype", np.dtype(type(a)))
            return Ty(np.dtype(type(a)))
        if isinstance(a, np.ndarray):
            raise make_error(InvalidValueError,
                             f"kernel '{self.name}' argument {i} ('{name}') is a host numpy array: kernels take "
                             f"device memory (runtime.alloc + runtime.copy, or runtime.to_device)")
        raise make_error(InvalidValueError,
                         f"kernel '{self.name}' argument {i} ('{name}') has type {type(a).__name__}: expected "
                         f"runtime device memory, a Python int/float/bool or a NumPy scalar")

    def _unsupported_dtype(self, i: int, what: str, dt: np.dtype) -> NotSupportedError:
        return make_error(NotSupportedError, f"kernel '{self.name}' argument {i} ('{self.param_names[i]}') is {what} "
                                             f"{dt}, which @runtime.jit kernels do not support (supported: "
                                             f"{_SUPPORTED_DTYPES})")

    def _signature(self, args: tuple, ndim: int) -> tuple:
        if len(args) != len(self.param_names):
            raise make_error(InvalidValueError,
                             f"kernel '{self.name}' takes {len(self.param_names)} argument(s) "
                             f"({', '.join(self.param_names)}), got {len(args)}")
        params = [self._param_type(i, a) for i, a in enumerate(args)]
        key = (tuple(p.key() if isinstance(p, _Buf) else (p.dt, p.weak) for p in params), ndim, self._values())
        return key, params

    def _values(self) -> tuple:
        """The current values of the globals and closure variables that the body reads as constants (tokens that
        tell 1, 1.0, True and np.int32(1) apart, and compare NaN equal to itself)."""
        getters = self._value_getters
        if getters is None:
            getters = self._value_getters = self._find_value_getters()
        return tuple([_value_token(g()) for g in getters]) if getters else ()

    def _find_value_getters(self, seen: Optional[set] = None) -> list:
        seen = set() if seen is None else seen
        seen.add(self)
        fn = self.fn
        getters = []
        for chain in self._global_chains:
            name = chain[0]
            if fn.__closure__ and name in fn.__code__.co_freevars:
                cell = fn.__closure__[fn.__code__.co_freevars.index(name)]
                base = lambda cell=cell: cell.cell_contents
            elif name in fn.__globals__:
                base = lambda g=fn.__globals__, name=name: g.get(name, _MISSING)
            else:
                continue  # a builtin (range, min, ...) or undefined: translation resolves or reports it
            get = base if len(chain) == 1 else \
                lambda base=base, attrs=chain[1:]: _getattrs(base(), attrs)
            try:
                v = get()
            except Exception:
                continue
            if isinstance(v, (bool, int, float, np.generic)):
                getters.append(get)
            elif isinstance(v, JitKernel) and v not in seen:
                # A device function's constants are compiled into its callers: part of their cache keys.
                getters += v._find_value_getters(seen)
        return getters

    def source(self, *args: Any, global_size: Any = None, target: Any = None) -> str:
        """The kernel-dialect source generated for these arguments (and a launch of global_size's dims) for the
        current device's backend, or for `target` (a backend name, "cpu" or "cuda": no device needed)."""
        ndim = len(global_size) if isinstance(global_size, tuple) else 1
        _, params = self._signature(args, ndim)
        if target is None:
            target = device_target(_core.get_device())
        elif not isinstance(target, Target):
            target = target_for(str(target))
        return _Translator(self, _Sig(params, ndim), target).translate()

    inspect = source

    def _compile(self, key: tuple, params: list, ndim: int, dev: int) -> _Compiled:
        src = _Translator(self, _Sig(params, ndim), device_target(dev)).translate()
        # -fwrapv backs the wrapping arithmetic the translation spells out (loop counters, ids): NumPy semantics.
        mod = _core.module_load_source(src, "-fwrapv" + (" " + self.options if self.options else ""))
        try:
            func = _core.module_get_function(mod, self.cname)
        except Exception:
            _core.module_unload(mod)
            raise
        bounded = [(i, params[i].dt.itemsize, d) for i, d in self.id_indexed()
                   if d < ndim and isinstance(params[i], _Buf)]
        return _Compiled(src, mod, func, params, ndim, self.name, self.param_names, self.may_write, bounded)

    def compiled(self, *args: Any, global_size: Any = None) -> _Compiled:
        """Compile (or fetch from the in-memory cache) for these arguments on the current device."""
        ndim = len(global_size) if isinstance(global_size, tuple) else 1
        key, params = self._signature(args, ndim)
        return self._get(key, params, ndim)

    def _get(self, key: tuple, params: list, ndim: int, dev: Optional[int] = None) -> _Compiled:
        if dev is None:
            dev = _core.get_device()
        c = self._cache.get((key, dev))
        if c is None:
            with self._lock:
                c = self._cache.get((key, dev))
                if c is None:
                    with Device(dev):  # rtModuleLoadSource compiles for the current device
                        c = self._cache[(key, dev)] = self._compile(key, params, ndim, dev)
        return c

    @property
    def signatures(self) -> list:
        """The argument signatures compiled so far."""
        return [k for k, _ in self._cache]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if getattr(_item, "state", None) is not None:  # a device function called by a kernel in the reference mode
            return reference_function(self)(*args, **kwargs)
        if self._device_function:
            raise make_error(InvalidValueError, f"@runtime.jit function '{self.name}' returns a value: it is a device "
                                                f"function, called from kernels; only a kernel (which writes its "
                                                f"results to buffers) is launched, with k(...) or "
                                                f"stream.launch_kernel")
        # k(*args, global_size=None, local_size=None, stream=None): a launch on the current stream (runtime/launch.py).
        from ..launch import call
        return call(self, args, kwargs)

    @staticmethod
    def _returns_value(tree: ast.FunctionDef) -> bool:
        """Whether the body has a `return <value>` of its own (nested definitions aside): a device function's."""
        todo = list(tree.body)
        while todo:
            n = todo.pop()
            if isinstance(n, ast.Return) and n.value is not None:
                return True
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                todo.extend(ast.iter_child_nodes(n))
        return False

    def __repr__(self) -> str:
        return f"<runtime.jit kernel {self.name} ({self.file}:{self.first_line})>"

    # ---- launch
    def _compiled_mode(self) -> bool:
        """Whether launches run the compiled kernel (not the reference mode) without checks (the fast path's
        plans are of unchecked signatures)."""
        return (self.interpret is False or (self.interpret is None and not interpret_enabled())) and \
            not (self.boundscheck or (self.boundscheck is None and check_bounds_enabled()))

    _launch = launch  # stream.launch_kernel's entry (jit/launch.py): a function of the class, no extra call


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    out, step = [], itemsize
    for d in reversed(shape):
        out.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(out))


def _elem_strides(shape: tuple, strides: Optional[tuple], itemsize: int) -> Optional[tuple]:
    """Strides in elements (C order when strides is None); None if a stride is not whole elements."""
    strides = _c_strides(shape, itemsize) if strides is None else strides
    if any(s % itemsize for s in strides):
        return None
    return tuple(s // itemsize for s in strides)


def launch_size_message(kernel: str, param: str, i: int, d: int, size: int, elements: int) -> str:
    """The refusal of a launch over more items than a buffer indexed by the global id has elements (the launch
    plan's C++ check words it the same way)."""
    dim = f" in dimension {d}" if d else ""
    return (f"kernel '{kernel}': global size {size}{dim} is larger than buffer '{param}' (argument {i}), which has "
            f"{elements} element(s) and is indexed by the global id ({param}[i]): pass a global_size of at most "
            f"{elements}, or a larger buffer")


def jit(fn: Optional[Callable] = None, *, options: Optional[str] = None,
        interpret: Optional[bool] = None, boundscheck: Optional[bool] = None) -> Any:
    """Decorator: compile a Python function into a device kernel (the subset it accepts: docs/jit.md).
    `options` go to the kernel compiler ("-O3", "-DNAME=1"); `interpret=True` forces the reference mode;
    `boundscheck=True` (or RUNTIME_CHECK_BOUNDS=1 for every kernel) checks every buffer access, and a launch with an
    index out of bounds fails at the stream's synchronize naming the kernel, the access, the index, the bound and
    the Python line (False: never, whatever the environment)."""
    if fn is None:
        return lambda f: JitKernel(f, options, interpret, boundscheck)
    return JitKernel(fn, options, interpret, boundscheck)
