"""@runtime.jit: translates a Python function's AST into kernel-dialect C++ (SPEC §4), one source per argument
signature, compiled once per signature and device through rtModuleLoadSource; plus the reference mode that runs
the body as plain Python over every work-item (RUNTIME_JIT_INTERPRET=1).

Typing follows NumPy 2 (NEP 50) so compiled kernels agree with the reference mode: buffer elements and NumPy
scalars are "strong" typed; Python ints/floats (arguments, literals, ids, range variables) are "weak" — int64 /
float64 that adopt the type of a strong operand of the same kind. Locals take the join of every value assigned
to them. math functions keep float32 when given a float32 operand (the reference computes in double: results
may differ by rounding). Integer arithmetic is NumPy's on every backend: +, -, *, negation, abs and ** wrap
(two's complement, spelled out in the generated code, and cpu modules are built with -fwrapv); // and % follow
Python's floor semantics, x // 0 and x % 0 give 0 as in NumPy (without NumPy's warning), MIN // -1 wraps to MIN;
a shift count below 0 or at least the width gives 0 (>> of a negative value: -1). float16 has no kernel type
(NotSupportedError). A local read where it is not assigned on every path (Python's UnboundLocalError) is refused at
compile time. Globals and closure variables holding numbers are compiled in as constants and their current values
are part of the cache key: changing one recompiles (each value once) at the next launch; names of modules and
functions are resolved when a signature is first compiled. Generated C++ carries #line directives, so compiler
diagnostics and failed asserts name the Python file and line.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import math
import os
import struct
import sys
import textwrap
import threading
from typing import Any, Callable, Iterable, Optional

import numpy as np

from . import _core
from .core import DeviceMemory, Device, Stream, current_stream, make_error
from .errors import CompileError, InvalidValueError, LaunchError, NotSupportedError

# ------------------------------------------------------------------------------------ built-ins (Python side)

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


_ID_BUILTINS = {get_global_id: "get_global_id", get_local_id: "get_local_id", get_group_id: "get_group_id",
                get_global_size: "get_global_size", get_local_size: "get_local_size",
                get_num_groups: "get_num_groups"}
_ATOMICS = {atomic_add: "atomic_add", atomic_min: "atomic_min", atomic_max: "atomic_max", atomic_cas: "atomic_cas",
            atomic_exchange: "atomic_exchange"}
_MAX_STAGED = 4  # RT_MAX_STAGED in runtime/kernel.h
_ATOMIC_DTYPES = {np.dtype(t) for t in (np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64)}

# ------------------------------------------------------------------------------------------------ types

_CTYPES = {
    np.dtype(np.bool_): "bool", np.dtype(np.int8): "int8_t", np.dtype(np.int16): "int16_t",
    np.dtype(np.int32): "int32_t", np.dtype(np.int64): "int64_t", np.dtype(np.uint8): "uint8_t",
    np.dtype(np.uint16): "uint16_t", np.dtype(np.uint32): "uint32_t", np.dtype(np.uint64): "uint64_t",
    np.dtype(np.float32): "float", np.dtype(np.float64): "double",
}
# float16 and complex types have no kernel-dialect type on every backend (runtime/kernel.h has no half type).
_SUPPORTED_DTYPES = ", ".join(str(d) for d in _CTYPES)
_I64, _F64, _F32, _BOOL = np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.bool_)


class Ty:
    """A value type: a NumPy dtype, and whether it is weak (a Python int/float/bool)."""

    __slots__ = ("dt", "weak")

    def __init__(self, dt: np.dtype, weak: bool = False) -> None:
        self.dt, self.weak = np.dtype(dt), weak

    @property
    def c(self) -> str:
        return _CTYPES[self.dt]

    @property
    def kind(self) -> str:
        return self.dt.kind  # 'b', 'i', 'u', 'f'

    def is_int(self) -> bool:
        return self.kind in "iub"

    def __eq__(self, o: Any) -> bool:
        return isinstance(o, Ty) and o.dt == self.dt and o.weak == self.weak

    def __hash__(self) -> int:
        return hash((self.dt, self.weak))

    def __repr__(self) -> str:
        return f"{'weak ' if self.weak else ''}{self.dt}"


WEAK_INT, WEAK_FLOAT, BOOL = Ty(_I64, True), Ty(_F64, True), Ty(_BOOL, False)


def promote(a: Ty, b: Ty) -> Ty:
    """NumPy 2 promotion of two scalar types (NEP 50 weak Python scalars)."""
    if a.weak and b.weak:
        return WEAK_FLOAT if "f" in (a.kind, b.kind) else WEAK_INT
    if a.weak or b.weak:
        w, s = (a, b) if a.weak else (b, a)
        if w.kind == "f":
            return s if s.kind == "f" else Ty(_F64)
        if s.kind == "b":
            return Ty(_I64) if w.kind != "b" else s
        return s
    if a.kind == "b" and b.kind == "b":
        return BOOL
    return Ty(np.promote_types(a.dt, b.dt))


class _Buf:
    """A buffer parameter's type: element dtype."""

    __slots__ = ("dt",)

    def __init__(self, dt: np.dtype) -> None:
        self.dt = np.dtype(dt)

    @property
    def elem(self) -> Ty:
        return Ty(self.dt)


# ------------------------------------------------------------------------------------------- translation

_CPP_RESERVED = set("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class compl
concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype default delete
do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable
namespace new noexcept not not_eq nullptr operator or or_eq private protected public register reinterpret_cast
requires return short signed sizeof static static_assert static_cast struct switch template this thread_local throw
true try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t printf main
get_global_id get_local_id get_group_id get_global_size get_local_size get_num_groups
atomic_add atomic_min atomic_max atomic_cas atomic_exchange rt_assert
sqrt rsqrt cbrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh
pow fabs floor ceil round trunc fmod fmin fmax fma hypot erf erfc copysign isnan isinf isfinite abs min max
""".split())


def _cname(name: str) -> str:
    """A C++ identifier for a Python name that cannot clash with C++ keywords or the prelude."""
    if name in _CPP_RESERVED or name.startswith("rt") or "__" in name or name.startswith("_"):
        return "py_" + name.strip("_") + "_" + str(len(name))
    return name


_MATH1 = {"sqrt", "exp", "exp2", "expm1", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan",
          "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "fabs", "erf", "erfc", "cbrt"}
_MATH2 = {"pow", "atan2", "fmod", "hypot", "copysign"}
_MATH_TO_INT = {"floor", "ceil", "trunc"}
_MATH_PRED = {"isnan", "isinf", "isfinite"}
_MATH_CONST = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf, "nan": math.nan}

_CONSTRUCTS = {
    "ListComp": "list comprehension", "SetComp": "set comprehension", "DictComp": "dict comprehension",
    "GeneratorExp": "generator expression", "Lambda": "lambda", "List": "list", "Tuple": "tuple", "Dict": "dict",
    "Set": "set", "With": "with statement", "Try": "try statement", "Raise": "raise statement",
    "FunctionDef": "nested function", "ClassDef": "class definition", "Import": "import statement",
    "ImportFrom": "import statement", "Global": "global statement", "Nonlocal": "nonlocal statement",
    "Delete": "del statement", "Yield": "yield", "YieldFrom": "yield from", "Await": "await",
    "JoinedStr": "f-string", "Starred": "starred expression", "Slice": "slice", "NamedExpr": "walrus operator",
    "MatMult": "matrix multiplication operator @", "Is": "'is' comparison", "IsNot": "'is not' comparison",
    "In": "'in' comparison", "NotIn": "'not in' comparison", "Match": "match statement", "AsyncFor": "async for",
    "AsyncWith": "async with", "AsyncFunctionDef": "async function", "Assert": "assert",
}


def _construct(node: ast.AST) -> str:
    n = type(node).__name__
    return _CONSTRUCTS.get(n, n)


_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}

# Integer helpers: NumPy's results where C++ leaves the operation undefined (signed overflow, division by zero,
# MIN // -1, shift counts outside [0, width)). U is the unsigned type the arithmetic wraps in (uint32_t for types
# narrower than 32 bits, which C would otherwise promote to int): +, -, * and negation on U and back to T is
# two's-complement wrapping on g++ and NVRTC alike, so kernels need no compiler flag to match NumPy.
_HELPERS = {
    "floordiv_i": """template <class T, class U> RT_DEVICE T rtpy_floordiv_i(T a, T b) {
    if (b == 0) return 0;                                         // NumPy: x // 0 is 0 (it also warns)
    if ((T)-1 < (T)0 && b == (T)-1) return (T)((U)0 - (U)a);      // MIN // -1 wraps to MIN, no trap
    T q = a / b;
    if ((T)-1 < (T)0 && (a % b != 0) && ((a < 0) != (b < 0))) q = q - 1;  // round toward -inf
    return q;
}""",
    "mod_i": """template <class T, class U> RT_DEVICE T rtpy_mod_i(T a, T b) {
    if (b == 0 || ((T)-1 < (T)0 && b == (T)-1)) return 0;         // NumPy: x % 0 and x % -1 are 0
    T r = a % b;
    if ((T)-1 < (T)0 && r != 0 && ((r < 0) != (b < 0))) r = r + b;  // the sign of the divisor
    return r;
}""",
    "mod_f": """template <class T> RT_DEVICE T rtpy_mod_f(T a, T b) {
    T r = fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r = r + b;
    return r;
}""",
    "pow_i": """template <class T, class U> RT_DEVICE T rtpy_pow_i(T base, T e) {
    T r = 1;
    if (e < 0) return (base == 1) ? 1 : (base == (T)-1 ? ((e & 1) ? (T)-1 : 1) : 0);
    while (e) {
        if (e & 1) r = (T)((U)r * (U)base);
        base = (T)((U)base * (U)base);
        e = e >> 1;
    }
    return r;
}""",
    "shl_i": """template <class T, class U> RT_DEVICE T rtpy_shl_i(T a, T b) {
    return (U)b >= 8 * sizeof(T) ? (T)0 : (T)((U)a << (U)b);     // NumPy: a count < 0 or >= the width gives 0
}""",
    "shr_i": """template <class T, class U> RT_DEVICE T rtpy_shr_i(T a, T b) {
    if ((U)b >= 8 * sizeof(T)) return a < (T)0 ? (T)-1 : (T)0;     // NumPy: the sign, for a count < 0 or >= width
    return (T)(a >> b);
}""",
    "abs_i": """template <class T, class U> RT_DEVICE T rtpy_abs_i(T a) {
    return a < (T)0 ? (T)((U)0 - (U)a) : a;                        // NumPy: abs(MIN) is MIN
}""",
}


def _wrap_c(t: "Ty") -> str:
    """The unsigned C type integer arithmetic on t wraps in."""
    return "uint64_t" if t.dt.itemsize == 8 else "uint32_t"


def _plain_wraps(t: "Ty") -> bool:
    """Whether C's own +, -, * on t already wrap like NumPy (unsigned types C does not promote to int)."""
    return t.kind == "u" and t.dt.itemsize >= 4


_OWN_SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda, ast.FunctionDef,
               ast.AsyncFunctionDef, ast.ClassDef)


class _Sig:
    """What a kernel is specialised on: per parameter a _Buf or a Ty, plus the launch's number of dimensions."""

    def __init__(self, params: list, ndim: int) -> None:
        self.params, self.ndim = params, ndim


class _Translator(ast.NodeVisitor):
    """One translation of one kernel for one signature: infers local types (to a fixed point), then emits C++."""

    def __init__(self, kernel: "JitKernel", sig: _Sig) -> None:
        self.k = kernel
        self.sig = sig
        self.params = {name: t for name, t in zip(kernel.param_names, sig.params)}
        self.locals: dict = {}
        self.helpers: set = set()
        self.lines: list = []
        self.indent = 1
        self.loop_depth = 0
        self.tmp = 0
        self.changed = False
        self.emitting = False
        self.in_cond = False
        self.mode = "kernel"  # or "staged" / "row": the cpu twin functions of a kernel with staged outputs
        self.staged: dict = {}  # buffer parameter -> its stage (0..RT_MAX_STAGED-1)
        self._x_locals: dict = {}
        self.py_line = self.line_marked = kernel.def_line  # the Python line the emitted C++ lines come from

    # ---- errors
    def error(self, node: Any, what: str) -> CompileError:
        line = self.k.first_line + getattr(node, "lineno", 1) - 1
        return make_error(CompileError, f"{self.k.file}:{line}: {what} (in @runtime.jit kernel '{self.k.name}')")

    def unsupported(self, node: Any, extra: str = "") -> CompileError:
        return self.error(node, f"unsupported construct '{_construct(node)}'{extra}")

    # ---- driver
    def translate(self) -> str:
        body = self.k.tree.body
        self.definitely_assigned(body, set())
        for _ in range(20):  # type inference: join of assigned types, to a fixed point
            self.changed = False
            self.block(body)
            if not self.changed:
                break
        else:
            raise self.error(self.k.tree, "local variable types did not settle")
        self.emitting = True
        kernel = self.function(f"RT_KERNEL void {self.k.cname}", "", True, lambda: self.block(self.k.tree.body))
        shape = self.row_shape()
        out = [f"// Generated by @runtime.jit from {self.k.name} ({self.k.file}:{self.k.first_line}) for "
               f"({', '.join(_sig_str(t) for t in self.sig.params)}), {self.sig.ndim}-D launch."]
        out += [_HELPERS[h] for h in sorted(self.helpers)]
        out += kernel
        if shape is not None:
            out += self.staged_twin(*shape)
        return "\n".join(out) + "\n"

    # ---- definite assignment: Python raises UnboundLocalError where C++ would read the zero-initialised local
    def definitely_assigned(self, stmts: list, done: Optional[set]) -> Optional[set]:
        """The locals assigned on every path through `stmts` from a point where those of `done` are (None: the end is
        not reached, after return, break or continue). Raises CompileError where a local is read that is not
        assigned on every path to the read: in one branch of an if only, in a loop body only (for after the loop:
        the body may not run), or later in a loop body than the read (the first iteration)."""
        for s in stmts:
            if done is None:
                return None  # unreachable: Python never runs it
            done = self.assigned_after(s, done)
        return done

    def assigned_after(self, s: ast.stmt, done: set) -> Optional[set]:
        reads = self.reads_assigned
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if s.value is not None:
                reads(s.value, done)
            for t in targets:
                if isinstance(t, ast.Name):
                    if isinstance(s, ast.AugAssign):
                        reads(t, done, load=True)
                    done = done | {t.id}
                else:
                    reads(t, done)
            return done
        if isinstance(s, ast.If):
            reads(s.test, done)
            a, b = self.definitely_assigned(s.body, set(done)), self.definitely_assigned(s.orelse, set(done))
            return b if a is None else a if b is None else a & b
        if isinstance(s, (ast.For, ast.While)):
            if isinstance(s, ast.For):
                reads(s.iter, done)
                start = done | {s.target.id} if isinstance(s.target, ast.Name) else done
            else:
                reads(s.test, done)
                start = done
            self.definitely_assigned(s.body, set(start))
            # After the loop only what held before it: the body may run zero times (a `while True` exits through
            # break, with what held there, at least as much as before).
            return done
        if isinstance(s, ast.Return):
            if s.value is not None:
                reads(s.value, done)
            return None
        if isinstance(s, (ast.Break, ast.Continue)):
            return None
        reads(s, done)  # assert, expression statements, and constructs translation refuses anyway
        return done

    def reads_assigned(self, node: ast.AST, done: set, load: bool = False) -> None:
        if isinstance(node, _OWN_SCOPES):
            return  # names there are the construct's own; translation refuses the construct itself
        if isinstance(node, ast.Name) and (load or isinstance(node.ctx, ast.Load)) and node.id in self.k.assigned \
                and node.id not in self.params and node.id not in done:
            raise self.error(node, f"local variable '{node.id}' is read here but not assigned on every path to this "
                                   f"line (Python raises UnboundLocalError; assign it before the if or loop)")
        for c in ast.iter_child_nodes(node):
            self.reads_assigned(c, done)

    def staged_twin(self, prefix: list, guard: Optional[tuple], rest: list) -> list:
        """The cpu-only twin of a kernel with staged outputs (RT_ROW_STAGING in runtime/kernel.h)."""
        names = ", ".join(f"'{n}'" for n in self.staged)
        sizes = ", ".join(str(self.params[n].dt.itemsize) for n in self.staged)
        c, n = self.k.cname, len(self.staged)
        out = ["#if RT_ROW_STAGING",
               f"// cpu: {names} written once per item at consecutive addresses along x and never read"
               + (", under a guard that holds for the leading items of a row" if guard else "") +
               f": rows run as rt_staged_{c} (the guard, if any, clipping them), and launches that write more than "
               f"the cache holds stream them to memory (RT_ROW_STAGING in runtime/kernel.h).",
               f"struct rt_staging_{c} {{ enum {{ count = {n}, clipped = {1 if guard else 0} }}; "
               f"static constexpr unsigned bytes[{n}] = {{{sizes}}}; }};"]

        def twin() -> None:
            self.block(prefix)
            self.block(rest)

        def row() -> None:
            self.block(prefix)
            if guard:
                e, r, inclusive = guard
                self.emit(f"const long long rt_n = rt_items_below_({self.expr(r)[0]}, {self.expr(e)[0]}, "
                          f"{int(inclusive)});")
                self.emit("if (rt_n <= 0) return 0;  // no item of the row passes the guard: nothing more to evaluate")
            self.block(rest)
            self.emit("return rt_n;" if guard else "return 1LL << 62;")

        self.mode = "staged"
        out += self.function(f"void rt_staged_{c}", "unsigned char* rt_stage", False, twin)
        self.mode = "row"
        if guard:
            out.append("static long long rt_items_below_(long long r, long long e, int inclusive) {  "
                       "// items x = 0, 1, ... of the row with e + x < r (<= r when inclusive)")
            out.append("    __int128 n = (__int128)r - e + inclusive;")
            out.append("    return n <= 0 ? 0 : n >= (1LL << 62) ? (1LL << 62) : (long long)n;")
            out.append("}")
        out += self.function(f"long long rt_row_{c}", "void** rt_dst", False, row)
        self.mode = "kernel"
        out.append("#endif")
        return out

    def function(self, head: str, first_param: str, bounded: bool, body: Callable) -> list:
        """`head(first_param, parameters) { locals; body() }`, body emitting statements in the current mode."""
        self.lines = []
        self.py_line = self.line_marked = self.k.def_line
        body()
        plist = [first_param] if first_param else []
        for name, t in self.params.items():
            if isinstance(t, _Buf):
                plist.append(f"{_CTYPES[t.dt]}* {_cname(name)}")
            else:
                plist.append(f"{t.c} {_cname(name)}")
        nd = self.sig.ndim
        plist += [f"uint64_t rt_gsize{d}" for d in range(nd)]
        out = [self.line_directive(self.k.def_line), f"{head}({', '.join(plist)}) {{"]
        if bounded:
            # Launches pass the exact global size: the cpu backend never runs items past it (RT_ITEMS_BOUNDED), so
            # the test is compiled only where whole groups run; leaving it out on cpu lets the item loop vectorise.
            bound = " || ".join(f"get_global_id({d}) >= rt_gsize{d}" for d in range(nd))
            out.append("#if !RT_ITEMS_BOUNDED")
            out.append(f"    if ({bound}) return;  // items past the global size (grid rounded up to whole groups)")
            out.append("#endif")
        for name, t in self.locals.items():
            out.append(f"    {t.c} {_cname(name)} = 0;")
        out += self.lines
        out.append("}")
        return out

    # ---- staged outputs (cpu): which buffers a kernel writes as whole rows
    def row_shape(self) -> Optional[tuple]:
        """(prefix, guard, rest) when the kernel has staged outputs (sets self.staged), else None.

        The body must be straight-line assignments (no loops, atomics or asserts) except for one guard: either a
        final `if e < r:` (or <=, or r > e, r >= e) without else around the rest, or `if e >= r: return` (or >,
        r <= e, r < e) before it, where e is the item's x id plus a row invariant and r a row invariant (so the
        guard holds for the leading items of a row). A staged output is a buffer that is never read and is stored
        exactly once, at an index that is the item's x id plus a row invariant."""
        body = [st for st in self.k.tree.body
                if not (isinstance(st, ast.Pass) or (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)))]
        prefix, guard, rest, test, skip_when = body, None, [], None, False
        for j, st in enumerate(body):
            if not isinstance(st, ast.If):
                continue
            if st.orelse:
                return None
            if len(st.body) == 1 and isinstance(st.body[0], ast.Return):
                prefix, test, rest, skip_when = body[:j], st.test, body[j + 1:], True
            elif j == len(body) - 1:
                prefix, test, rest = body[:j], st.test, st.body
            else:
                return None
            break
        self._x_locals = {}
        reads: set = set()  # buffers loaded anywhere (the guard included)
        stores: dict = {}  # buffer -> the x coefficient of each store's index
        if not self.straight(prefix, reads, stores):
            return None
        if test is not None:
            reads.update(self.loaded(test))
            guard = self.row_guard(test, skip_when)
            if guard is None:
                return None
        if not self.straight(rest, reads, stores):
            return None
        staged = [n for n, t in self.params.items()
                  if isinstance(t, _Buf) and n not in reads and stores.get(n) == [1]][:_MAX_STAGED]
        if not staged:
            return None
        self.staged = {name: j for j, name in enumerate(staged)}
        return prefix, guard, rest

    @staticmethod
    def loaded(node: ast.AST) -> set:
        return {n.value.id for n in ast.walk(node) if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load)}

    def straight(self, stmts: list, reads: set, stores: dict) -> bool:
        """Assignments only (to locals or buffer elements), no atomics. In order: tracks the locals' x coefficients,
        adds the buffers read to `reads` and each store's index coefficient to `stores`."""
        for st in stmts:
            if not isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                return False
            if any(isinstance(n, ast.Call) and self.resolve(n.func) in _ATOMICS for n in ast.walk(st)):
                return False
            reads.update(self.loaded(st))
            target = st.targets[0] if isinstance(st, ast.Assign) else st.target
            if isinstance(target, ast.Subscript):
                if isinstance(st, ast.AugAssign):
                    reads.add(target.value.id)
                stores.setdefault(target.value.id, []).append(self.x_coef(target.slice))
            else:
                self.track(st)
        return True

    def track(self, st: ast.stmt) -> None:
        """The x coefficient of the local assigned by `st` (a name target)."""
        target = st.targets[0] if isinstance(st, ast.Assign) else st.target
        if isinstance(st, ast.AugAssign):
            c, v = self._x_locals.get(target.id), self.x_coef(st.value)
            c = None if c is None or v is None else c + v if isinstance(st.op, ast.Add) else \
                c - v if isinstance(st.op, ast.Sub) else 0 if c == 0 and v == 0 else None
        else:
            c = self.x_coef(st.value)
        self._x_locals[target.id] = self.x_typed(c, self.locals.get(target.id))

    def row_guard(self, test: ast.AST, skip_when: bool) -> Optional[tuple]:
        """(e, r, inclusive) when `test` (or, skip_when, its negation) is e < r / e <= r with e the x id plus a row
        invariant (a 64-bit integer) and r a row-invariant integer."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Gt, ast.GtE)):  # r > e is e < r
            left, right = right, left
            op = ast.Lt() if isinstance(op, ast.Gt) else ast.LtE()
        if not isinstance(op, (ast.Lt, ast.LtE)):
            return None
        inclusive = isinstance(op, ast.LtE)
        if skip_when:  # skip when left < right (<=): runs while right <= left (<), i.e. e = right, r = left
            left, right, inclusive = right, left, not inclusive
        if self.x_coef(left) != 1 or self.x_coef(right) != 0:
            return None
        et, rt = self.expr(left)[1], self.expr(right)[1]
        if not (et.kind == "i" and et.dt.itemsize == 8):
            return None
        if not (rt.kind == "i" or (rt.kind == "u" and rt.dt.itemsize <= 4)):
            return None
        return left, right, inclusive

    @staticmethod
    def x_typed(c: Optional[int], t: Optional[Ty]) -> Optional[int]:
        """c, if a value of type t carries it exactly: an x-dependent value must be a 64-bit integer (no wrap)."""
        if c == 0 or c is None:
            return c
        return c if t is not None and t.kind in "iu" and t.dt.itemsize == 8 else None

    def x_coef(self, e: ast.AST) -> Optional[int]:
        """k when e's value is k * (the item's x id) + (the same for every item of a row); None otherwise."""
        def all_zero(nodes: Iterable) -> Optional[int]:
            return 0 if all(self.x_coef(n) == 0 for n in nodes) else None
        if isinstance(e, ast.Constant):
            return 0
        if isinstance(e, ast.Name):
            if e.id in self.params:
                return None if isinstance(self.params[e.id], _Buf) else 0
            if e.id in self.k.assigned:
                return self._x_locals.get(e.id)
            return 0  # a global constant
        if isinstance(e, ast.Attribute):
            return 0
        if isinstance(e, ast.Subscript):
            return 0 if self.x_coef(e.slice) == 0 else None
        if isinstance(e, ast.Call):
            fn = self.resolve(e.func)
            if fn in _ID_BUILTINS:
                nodes = list(e.args) + [k.value for k in e.keywords]
                d = ast.literal_eval(nodes[0]) if nodes else 0
                return 1 if d == 0 and _ID_BUILTINS[fn] in ("get_global_id", "get_local_id") else 0
            c = all_zero(e.args)
            if c is None and fn is int and len(e.args) == 1:
                c = self.x_typed(self.x_coef(e.args[0]), self.expr(e.args[0])[1])
            return c
        if isinstance(e, ast.UnaryOp):
            c = self.x_coef(e.operand)
            if isinstance(e.op, ast.USub):
                return None if c is None else -c
            return c if isinstance(e.op, ast.UAdd) or c == 0 else None
        if isinstance(e, ast.BinOp):
            a, b = self.x_coef(e.left), self.x_coef(e.right)
            if a is None or b is None:
                return None
            if a == 0 and b == 0:
                return 0
            if isinstance(e.op, (ast.Add, ast.Sub)):
                c = a + b if isinstance(e.op, ast.Add) else a - b
            elif isinstance(e.op, ast.Mult):
                lit = e.left if a == 0 else e.right
                if not (isinstance(lit, ast.Constant) and type(lit.value) is int):
                    return None
                c = lit.value * (b if a == 0 else a)
            else:
                return None
            return self.x_typed(c, self.expr(e)[1])
        if isinstance(e, (ast.IfExp, ast.Compare, ast.BoolOp)):
            return all_zero(n for n in ast.iter_child_nodes(e) if isinstance(n, ast.expr))
        return None

    def emit(self, line: str) -> None:
        if self.emitting:
            if self.py_line != self.line_marked:
                # The compiler's diagnostics and rt_assert's __FILE__:__LINE__ name the Python statement.
                self.lines.append(self.line_directive(self.py_line))
                self.line_marked = self.py_line
            self.lines.append("    " * self.indent + line)

    def line_directive(self, line: int) -> str:
        return f'#line {line} "{self.k.c_file}"'

    def block(self, stmts: list) -> None:
        for s in stmts:
            self.stmt(s)

    # ---- statements
    def stmt(self, s: ast.stmt) -> None:
        m = getattr(self, "s_" + type(s).__name__, None)
        if m is None:
            raise self.unsupported(s)
        saved, self.py_line = self.py_line, self.k.first_line + s.lineno - 1
        try:
            m(s)
        finally:
            self.py_line = saved  # a compound statement's closing brace belongs to its own line

    def assign_name(self, node: ast.AST, name: str, vt: Ty, code: str) -> None:
        if name in self.params:
            t = self.params[name]
            if isinstance(t, _Buf):
                raise self.error(node, f"cannot assign to buffer parameter '{name}'")
        else:
            old = self.locals.get(name)
            new = vt if old is None else promote(old, vt)
            if old is None or new != old:
                self.locals[name] = new
                self.changed = True
            t = self.locals[name]
        self.emit(f"{_cname(name)} = {self.cast(code, vt, t)};")

    def s_Assign(self, s: ast.Assign) -> None:
        if len(s.targets) != 1:
            raise self.error(s, "unsupported construct 'chained assignment' (a = b = ...)")
        self.store(s.targets[0], s.value, s)

    def s_AnnAssign(self, s: ast.AnnAssign) -> None:
        if not isinstance(s.target, ast.Name) or s.value is None:
            raise self.unsupported(s, " (only 'name: type = value')")
        dt = self.k.annotation_dtype(s.annotation, self)
        t = Ty(dt)
        name = s.target.id
        if name in self.params:
            raise self.error(s, f"cannot re-annotate parameter '{name}'")
        if self.locals.get(name) not in (None, t):
            raise self.error(s, f"'{name}' annotated {dt} but also assigned {self.locals[name]}")
        if name not in self.locals:
            self.locals[name] = t
            self.changed = True
        code, vt = self.expr(s.value)
        self.emit(f"{_cname(name)} = {self.cast(code, vt, t)};")

    def store(self, target: ast.AST, value: ast.AST, node: ast.AST) -> None:
        code, vt = self.expr(value)
        if isinstance(target, ast.Name):
            self.assign_name(node, target.id, vt, code)
        elif isinstance(target, ast.Subscript):
            ref, et = self.subscript(target)
            stage = self.staged.get(target.value.id) if self.mode != "kernel" else None
            if stage is None and self.mode != "row":
                self.emit(f"{ref} = {self.cast(code, vt, et)};")
            elif self.mode == "staged":
                self.emit(f"(({et.c}*)(rt_stage + {stage} * RT_STAGE_BYTES))[get_local_id(0)] = "
                          f"{self.cast(code, vt, et)};")
            elif stage is not None:  # row: where item x = 0 of the row stores it (the others follow it)
                self.emit(f"rt_dst[{stage}] = (void*)&{ref};")
        else:
            raise self.unsupported(target, " as an assignment target (use a name or buffer[index])")

    def s_AugAssign(self, s: ast.AugAssign) -> None:
        op = _BINOPS.get(type(s.op))
        if op is None:
            raise self.error(s, f"unsupported construct '{_construct(s.op)}'")
        if isinstance(s.target, ast.Name):
            cur, ct = self.name(s.target)
            code, vt = self.binop(s, op, (cur, ct), self.expr(s.value))
            self.assign_name(s, s.target.id, vt, code)
        elif isinstance(s.target, ast.Subscript):
            ref, et = self.subscript(s.target)
            code, vt = self.binop(s, op, (ref, et), self.expr(s.value))
            self.emit(f"{ref} = {self.cast(code, vt, et)};")
        else:
            raise self.unsupported(s.target, " as an assignment target")

    def cond(self, node: ast.AST) -> str:
        saved, self.in_cond = self.in_cond, True
        try:
            code, _ = self.expr(node)
        finally:
            self.in_cond = saved
        return code

    def s_If(self, s: ast.If) -> None:
        self.emit(f"if ({self.cond(s.test)}) {{")
        self.indent += 1
        self.block(s.body)
        self.indent -= 1
        if s.orelse:
            self.emit("} else {")
            self.indent += 1
            self.block(s.orelse)
            self.indent -= 1
        self.emit("}")

    def s_While(self, s: ast.While) -> None:
        if s.orelse:
            raise self.error(s, "unsupported construct 'while ... else'")
        self.emit(f"while ({self.cond(s.test)}) {{")
        self.loop(s.body)
        self.emit("}")

    def loop(self, body: list) -> None:
        self.indent += 1
        self.loop_depth += 1
        self.block(body)
        self.loop_depth -= 1
        self.indent -= 1

    def s_For(self, s: ast.For) -> None:
        if s.orelse:
            raise self.error(s, "unsupported construct 'for ... else'")
        it = s.iter
        if not (isinstance(it, ast.Call) and self.resolve(it.func) is range):
            raise self.error(s, "unsupported construct 'for' over anything but range(...)")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.error(s, "range() takes 1 to 3 positional arguments")
        if not isinstance(s.target, ast.Name):
            raise self.unsupported(s.target, " as a loop variable (use a name)")
        parts = []
        for a in it.args:
            code, t = self.expr(a)
            if not t.is_int():
                raise self.error(a, f"range() argument has type {t.dt}, expected an integer")
            parts.append(self.cast(code, t, WEAK_INT))
        start, stop, step = ("0L", parts[0], "1L") if len(parts) == 1 else (
            (parts[0], parts[1], "1L") if len(parts) == 2 else parts)
        const_step = None
        if len(it.args) == 3:
            try:
                const_step = ast.literal_eval(it.args[2])
            except ValueError:
                const_step = None
        else:
            const_step = 1
        if const_step == 0:
            raise self.error(it, "range() step must not be zero")
        self.tmp += 1
        n = self.tmp
        iv, sv, tv = f"rt_i{n}", f"rt_stop{n}", f"rt_step{n}"
        if const_step is None:
            test = f"({tv} > 0 ? {iv} < {sv} : ({tv} < 0 && {iv} > {sv}))"
        else:
            test = f"{iv} < {sv}" if const_step > 0 else f"{iv} > {sv}"
        # Python evaluates the bounds once and the loop variable is a copy: assigning it does not alter iteration.
        self.emit("{")
        self.indent += 1
        self.emit(f"const int64_t {sv} = {stop};")
        self.emit(f"const int64_t {tv} = {step};")
        self.emit(f"for (int64_t {iv} = {start}; {test}; {iv} += {tv}) {{")
        self.indent += 1
        self.assign_name(s, s.target.id, WEAK_INT, iv)
        self.indent -= 1
        self.loop(s.body)
        self.emit("}")
        self.indent -= 1
        self.emit("}")

    def s_Break(self, s: ast.Break) -> None:
        if not self.loop_depth:
            raise self.error(s, "'break' outside a loop")
        self.emit("break;")

    def s_Continue(self, s: ast.Continue) -> None:
        if not self.loop_depth:
            raise self.error(s, "'continue' outside a loop")
        self.emit("continue;")

    def s_Pass(self, s: ast.Pass) -> None:
        pass

    def s_Return(self, s: ast.Return) -> None:
        if s.value is not None:
            raise self.error(s, "unsupported construct 'return with a value' (kernels write results to buffers)")
        self.emit("return;")

    def s_Assert(self, s: ast.Assert) -> None:
        self.emit(f"rt_assert({self.cond(s.test)});")

    def s_Expr(self, s: ast.Expr) -> None:
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return  # docstring
        if not isinstance(s.value, ast.Call):
            raise self.error(s, f"unsupported construct 'expression statement' ({_construct(s.value)})")
        code, _ = self.expr(s.value)
        self.emit(f"(void)({code});")

    # ---- expressions: return (C code, Ty)
    def expr(self, e: ast.AST) -> tuple:
        m = getattr(self, "e_" + type(e).__name__, None)
        if m is None:
            raise self.unsupported(e)
        return m(e)

    def const(self, node: ast.AST, v: Any) -> tuple:
        if isinstance(v, (bool, np.bool_)):
            return ("true" if v else "false"), (BOOL if isinstance(v, np.bool_) else Ty(_BOOL, True))
        if isinstance(v, int):
            if not -2 ** 63 <= v < 2 ** 63:
                raise self.error(node, f"integer constant {v} does not fit in int64")
            return (f"{v}L" if v != -2 ** 63 else "(-9223372036854775807L - 1)"), WEAK_INT
        if isinstance(v, float):
            return _float_literal(v), WEAK_FLOAT
        if isinstance(v, np.generic) and np.dtype(type(v)) in _CTYPES:
            dt = np.dtype(type(v))
            if dt.kind == "f":
                return f"(({_CTYPES[dt]}){_float_literal(float(v))})", Ty(dt)
            return f"(({_CTYPES[dt]}){int(v)}{'UL' if dt.kind == 'u' else 'L'})", Ty(dt)
        raise self.error(node, f"unsupported constant {v!r} of type {type(v).__name__} (kernels use numbers)")

    def e_Constant(self, e: ast.Constant) -> tuple:
        return self.const(e, e.value)

    def name(self, e: ast.Name) -> tuple:
        n = e.id
        if n in self.params:
            t = self.params[n]
            if isinstance(t, _Buf):
                raise self.error(e, f"buffer '{n}' used as a value (index it: {n}[i])")
            return _cname(n), t
        if n in self.locals:
            return _cname(n), self.locals[n]
        if n in self.k.assigned:
            # assigned later in the body (inference has not reached it yet, or read before any assignment)
            if self.emitting:
                raise self.error(e, f"local variable '{n}' has no type (is it used before being assigned?)")
            return "0", WEAK_INT
        obj = self.resolve(e)
        return self.const(e, obj)

    def e_Name(self, e: ast.Name) -> tuple:
        return self.name(e)

    def resolve(self, e: ast.AST) -> Any:
        """The Python object a global name or attribute chain (math.pi, runtime.get_global_id) denotes."""
        if isinstance(e, ast.Name):
            if e.id in self.params or e.id in self.k.assigned:
                raise self.error(e, f"'{e.id}' is a kernel variable, not a function or module")
            return self.k.lookup(e.id, lambda: self.error(e, f"name '{e.id}' is not defined"))
        if isinstance(e, ast.Attribute):
            base = self.resolve(e.value)
            try:
                return getattr(base, e.attr)
            except AttributeError:
                raise self.error(e, f"'{type(base).__name__}' object has no attribute '{e.attr}'") from None
        raise self.unsupported(e, " as a function")

    def e_Attribute(self, e: ast.Attribute) -> tuple:
        return self.const(e, self.resolve(e))

    def subscript(self, e: ast.Subscript) -> tuple:
        if not (isinstance(e.value, ast.Name) and isinstance(self.params.get(e.value.id), _Buf)):
            raise self.error(e, "only buffer parameters can be indexed")
        idx = e.slice
        if isinstance(idx, (ast.Tuple, ast.Slice)):
            raise self.error(e, f"unsupported construct '{_construct(idx)}' index (buffers are 1-D: use "
                                f"buf[y * width + x])")
        code, t = self.expr(idx)
        if not t.is_int() or t.kind == "b":
            raise self.error(e, f"buffer index has type {t.dt}, expected an integer")
        buf = self.params[e.value.id]
        return f"{_cname(e.value.id)}[{code}]", buf.elem

    def e_Subscript(self, e: ast.Subscript) -> tuple:
        return self.subscript(e)

    def cast(self, code: str, src: Ty, dst: Ty) -> str:
        if src.dt == dst.dt:
            return code
        if dst.kind == "b":
            return f"(({code}) != 0)"
        return f"(({dst.c})({code}))"

    def binop(self, node: ast.AST, op: str, a: tuple, b: tuple) -> tuple:
        (ac, at), (bc, bt) = a, b
        t = promote(at, bt)
        if op == "/":
            rt = t if t.kind == "f" else (WEAK_FLOAT if t.weak else Ty(_F64))
            return f"({self.cast(ac, at, rt)} / {self.cast(bc, bt, rt)})", rt
        if op in ("&", "|", "^", "<<", ">>"):
            if not t.is_int():
                raise self.error(node, f"bitwise operator {op} on {at.dt} and {bt.dt} (expected integers)")
            if t.kind == "b" and op in ("&", "|", "^"):
                return f"({self.cast(ac, at, t)} {op} {self.cast(bc, bt, t)})", t
            if t.kind == "b":
                t = WEAK_INT
            x, y = self.cast(ac, at, t), self.cast(bc, bt, t)
            if op in ("<<", ">>"):
                h = "shl_i" if op == "<<" else "shr_i"
                self.helpers.add(h)
                return f"rtpy_{h}<{t.c}, {_wrap_c(t)}>({x}, {y})", t
            return f"(({t.c})({x} {op} {y}))", t
        if t.kind == "b":
            t = WEAK_INT if (at.weak and bt.weak) else Ty(_I64)  # bool arithmetic counts in integers
        x, y = self.cast(ac, at, t), self.cast(bc, bt, t)
        if op == "//":
            if t.kind == "f":
                return f"floor({x} / {y})", t
            self.helpers.add("floordiv_i")
            return f"rtpy_floordiv_i<{t.c}, {_wrap_c(t)}>({x}, {y})", t
        if op == "%":
            if t.kind == "f":
                self.helpers.add("mod_f")
                return f"rtpy_mod_f<{t.c}>({x}, {y})", t
            self.helpers.add("mod_i")
            return f"rtpy_mod_i<{t.c}, {_wrap_c(t)}>({x}, {y})", t
        if op == "**":
            if t.kind == "f":
                return f"pow({x}, {y})", t
            self.helpers.add("pow_i")
            return f"rtpy_pow_i<{t.c}, {_wrap_c(t)}>({x}, {y})", t
        if t.kind == "f" or _plain_wraps(t):
            return f"({x} {op} {y})", t
        # +, -, * wrap like NumPy: signed overflow is undefined in C++, and C promotes narrow types to int.
        u = _wrap_c(t)
        return f"(({t.c})(({u})({x}) {op} ({u})({y})))", t

    def e_BinOp(self, e: ast.BinOp) -> tuple:
        op = _BINOPS.get(type(e.op))
        if op is None:
            raise self.error(e, f"unsupported construct '{_construct(e.op)}'")
        return self.binop(e, op, self.expr(e.left), self.expr(e.right))

    def e_UnaryOp(self, e: ast.UnaryOp) -> tuple:
        if isinstance(e.op, ast.Not):
            saved, self.in_cond = self.in_cond, True
            try:
                code, _ = self.expr(e.operand)
            finally:
                self.in_cond = saved
            return f"(!({code}))", BOOL
        code, t = self.expr(e.operand)
        if isinstance(e.op, ast.UAdd):
            return code, (WEAK_INT if t.kind == "b" else t)
        if isinstance(e.op, ast.USub):
            if t.kind == "b":
                t = WEAK_INT if t.weak else Ty(_I64)
                code = f"(({t.c})({code}))"
            if t.kind == "f" or _plain_wraps(t):
                return f"(-{code})", t
            return f"(({t.c})(({_wrap_c(t)})0 - ({_wrap_c(t)})({code})))", t  # -MIN wraps to MIN, like NumPy
        if isinstance(e.op, ast.Invert):
            if not t.is_int():
                raise self.error(e, f"operator ~ on {t.dt} (expected an integer)")
            if t.kind == "b":
                return f"(!({code}))", t
            return f"(({t.c})(~{code}))", t
        raise self.error(e, f"unsupported construct '{_construct(e.op)}'")

    def e_BoolOp(self, e: ast.BoolOp) -> tuple:
        op = " && " if isinstance(e.op, ast.And) else " || "
        parts = []
        for v in e.values:
            code, t = self.expr(v)
            if t.kind != "b" and not self.in_cond:
                raise self.error(e, "'and'/'or' on non-bool values is only supported in conditions "
                                    "(Python would return one of the operands)")
            parts.append(f"({code})")
        return "(" + op.join(parts) + ")", BOOL

    def e_Compare(self, e: ast.Compare) -> tuple:
        left = self.expr(e.left)
        parts = []
        for op, right in zip(e.ops, e.comparators):
            c = _CMPOPS.get(type(op))
            if c is None:
                raise self.error(e, f"unsupported construct '{_construct(op)}'")  # operators carry no line
            r = self.expr(right)
            t = promote(left[1], r[1])
            parts.append(f"({self.cast(left[0], left[1], t)} {c} {self.cast(r[0], r[1], t)})")
            left = r
        return ("(" + " && ".join(parts) + ")" if len(parts) > 1 else parts[0]), BOOL

    def e_IfExp(self, e: ast.IfExp) -> tuple:
        c = self.cond(e.test)
        a, b = self.expr(e.body), self.expr(e.orelse)
        t = promote(a[1], b[1])
        return f"(({c}) ? {self.cast(a[0], a[1], t)} : {self.cast(b[0], b[1], t)})", t

    # ---- calls
    def e_Call(self, e: ast.Call) -> tuple:
        fn = self.resolve(e.func)
        fname = getattr(fn, "__name__", repr(fn))
        if fn in _ID_BUILTINS:
            return self.call_id(e, fn)
        if fn in _ATOMICS:
            return self.call_atomic(e, fn)
        known = (getattr(fn, "__module__", None) == "math" or fn in (min, max, abs, int, float, bool)
                 or (isinstance(fn, type) and issubclass(fn, np.generic) and np.dtype(fn) in _CTYPES))
        if not known:
            mod = getattr(fn, "__module__", None)
            raise self.error(e, f"unsupported construct 'call of {mod + '.' if mod and mod != 'builtins' else ''}"
                                f"{fname}'")
        if e.keywords:
            raise self.error(e, f"keyword arguments to {fname}() are not supported")
        args = [self.expr(a) for a in e.args]
        if getattr(fn, "__module__", None) == "math" or fn in (math.sqrt,):
            return self.call_math(e, fname, args)
        if fn is min or fn is max:
            if len(args) < 2:
                raise self.error(e, f"{fname}() in a kernel takes 2 or more numbers")
            code, t = args[0]
            for c2, t2 in args[1:]:
                nt = promote(t, t2)
                code, t = f"{fname}({self.cast(code, t, nt)}, {self.cast(c2, t2, nt)})", nt
            return code, t
        if fn is abs:
            self.arity(e, args, 1, "abs")
            code, t = args[0]
            if t.kind == "u":
                return code, t
            if t.kind == "b":
                return f"(({t.c})({code}))", WEAK_INT
            if t.kind == "i":
                self.helpers.add("abs_i")
                return f"rtpy_abs_i<{t.c}, {_wrap_c(t)}>({code})", t
            return f"abs({code})", t
        if fn is int:
            self.arity(e, args, 1, "int")
            return self.cast(args[0][0], args[0][1], WEAK_INT), WEAK_INT
        if fn is float:
            self.arity(e, args, 1, "float")
            return self.cast(args[0][0], args[0][1], WEAK_FLOAT), WEAK_FLOAT
        if fn is bool:
            self.arity(e, args, 1, "bool")
            return f"(({args[0][0]}) != 0)", BOOL
        if isinstance(fn, type) and issubclass(fn, np.generic) and np.dtype(fn) in _CTYPES:
            self.arity(e, args, 1, fname)
            t = Ty(np.dtype(fn))
            return self.cast(args[0][0], args[0][1], t), t
        raise self.error(e, f"unsupported construct 'call of {getattr(fn, '__module__', '') or ''}"
                            f"{'.' if getattr(fn, '__module__', None) else ''}{fname}'")

    def arity(self, e: ast.AST, args: list, n: int, name: str) -> None:
        if len(args) != n:
            raise self.error(e, f"{name}() takes {n} argument(s), got {len(args)}")

    def call_id(self, e: ast.Call, fn: Any) -> tuple:
        name = _ID_BUILTINS[fn]
        if e.keywords and not (len(e.keywords) == 1 and e.keywords[0].arg == "d" and not e.args):
            raise self.error(e, f"runtime.{name}() takes one argument d")
        nodes = list(e.args) + [k.value for k in e.keywords]
        if len(nodes) > 1:
            raise self.error(e, f"runtime.{name}() takes at most one argument (the dimension)")
        d = 0
        if nodes:
            try:
                d = ast.literal_eval(nodes[0])
            except ValueError:
                raise self.error(e, f"runtime.{name}(d): d must be a constant 0, 1 or 2") from None
            if isinstance(d, bool) or d not in (0, 1, 2):
                raise self.error(e, f"runtime.{name}(d): d must be 0, 1 or 2, got {d!r}")
        if name == "get_global_size":
            return (f"((int64_t)rt_gsize{d})" if d < self.sig.ndim else "1L"), WEAK_INT
        return f"((int64_t){name}({d}))", WEAK_INT

    def call_atomic(self, e: ast.Call, fn: Any) -> tuple:
        name = _ATOMICS[fn]
        n = 4 if name == "atomic_cas" else 3
        if e.keywords or len(e.args) != n:
            raise self.error(e, f"runtime.{name}() takes {n} positional arguments "
                                f"(buffer, index{', expected, desired' if n == 4 else ', value'})")
        b = e.args[0]
        if not (isinstance(b, ast.Name) and isinstance(self.params.get(b.id), _Buf)):
            raise self.error(e, f"runtime.{name}(): the first argument must be a buffer parameter")
        buf = self.params[b.id]
        if buf.dt not in _ATOMIC_DTYPES:
            raise self.error(e, f"runtime.{name}() on a {buf.dt} buffer (supported: int32, uint32, int64, uint64, "
                                f"float32, float64)")
        ref, et = self.subscript(ast.copy_location(ast.Subscript(value=b, slice=e.args[1], ctx=ast.Load()), e))
        vals = [self.expr(a) for a in e.args[2:]]
        code = ", ".join(self.cast(c, t, et) for c, t in vals)
        return f"{name}(&{ref}, {code})", et

    def call_math(self, e: ast.Call, fname: str, args: list) -> tuple:
        f32 = any(t.dt == _F32 for _, t in args) and not any(t.dt == _F64 and not t.weak for _, t in args)
        ft = Ty(_F32) if f32 else WEAK_FLOAT
        conv = [self.cast(c, t, ft) for c, t in args]
        if fname in _MATH1:
            self.arity(e, args, 1, f"math.{fname}")
            return f"{fname}({conv[0]})", ft
        if fname == "log":
            if len(args) == 1:
                return f"log({conv[0]})", ft
            self.arity(e, args, 2, "math.log")
            return f"(log({conv[0]}) / log({conv[1]}))", ft
        if fname in _MATH2:
            self.arity(e, args, 2, f"math.{fname}")
            return f"{fname}({conv[0]}, {conv[1]})", ft
        if fname in _MATH_TO_INT:
            self.arity(e, args, 1, f"math.{fname}")
            if args[0][1].is_int():
                return self.cast(args[0][0], args[0][1], WEAK_INT), WEAK_INT
            return f"((int64_t){fname}({conv[0]}))", WEAK_INT
        if fname in _MATH_PRED:
            self.arity(e, args, 1, f"math.{fname}")
            return f"{fname}({conv[0]})", BOOL
        raise self.error(e, f"unsupported construct 'call of math.{fname}'")


def _float_literal(v: float) -> str:
    if math.isnan(v):
        return "__builtin_nan(\"\")"
    if math.isinf(v):
        return "__builtin_inf()" if v > 0 else "(-__builtin_inf())"
    r = repr(v)
    if "e" not in r and "." not in r:
        r += ".0"
    return r


def _sig_str(t: Any) -> str:
    return f"{t.dt}[]" if isinstance(t, _Buf) else repr(t)


# ------------------------------------------------------------------------------------------------ kernels


class _Compiled:
    """A kernel compiled for one (signature, device): module/function handles and the argument packer."""

    def __init__(self, source: str, module: int, func: int, params: list, ndim: int) -> None:
        self.source, self.module, self.func = source, module, func
        fmt = "<" + "".join("Q" if isinstance(p, _Buf) else _pack_code(p.dt) for p in params) + "Q" * ndim
        sizes = [8 if isinstance(p, _Buf) else p.dt.itemsize for p in params] + [8] * ndim
        self.sizes = struct.pack(f"@{len(sizes)}N", *sizes)
        self.buf_idx = [i for i, p in enumerate(params) if isinstance(p, _Buf)]
        self.first_buf = self.buf_idx[0] if self.buf_idx else -1
        self.first_itemsize = params[self.first_buf].dt.itemsize if self.buf_idx else 1
        # A generated packer: one struct.pack call, `.ptr` for buffers (raises if freed), values as given
        # (struct converts Python and NumPy numbers and range-checks integers).
        vals = ", ".join(f"a[{i}].ptr" if isinstance(p, _Buf) else f"a[{i}]" for i, p in enumerate(params))
        gl = ", ".join(f"g[{d}]" for d in range(ndim))
        ns: dict = {"P": struct.Struct(fmt).pack}
        exec(f"def pack(a, g):\n    return P({vals}{', ' if vals else ''}{gl})\n", ns)
        self.pack = ns["pack"]
        self.codes = "".join("P" if isinstance(p, _Buf) else _pack_code(p.dt)[0] for p in params)
        self.ndim = ndim

    def plan(self, arg_types: tuple, dev: int) -> Any:
        """The C++ launch plan for arguments of exactly these Python types (dtype values for device memory)."""
        return _core.LaunchPlan(self.func, self.codes, list(arg_types), DeviceMemory, self.ndim, self.first_itemsize,
                                dev)


_PACK = {"b": "?7x", "i1": "b7x", "i2": "h6x", "i4": "i4x", "i8": "q", "u1": "B7x", "u2": "H6x", "u4": "I4x",
         "u8": "Q", "f4": "f4x", "f8": "d"}


def _pack_code(dt: np.dtype) -> str:
    return _PACK["b" if dt.kind == "b" else f"{dt.kind}{dt.itemsize}"]


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


class JitKernel:
    """A Python function compiled to a device kernel per argument signature. Launch it with
    `stream.launch_kernel(kernel, *args, global_size=..., local_size=...)`; see `source(*args)`."""

    def __init__(self, fn: Callable, options: Optional[str] = None, interpret: Optional[bool] = None) -> None:
        if not inspect.isfunction(fn):
            raise make_error(InvalidValueError, f"@runtime.jit applies to Python functions, got {type(fn).__name__}")
        self.fn = fn
        self.name = fn.__name__
        self.cname = _cname(fn.__name__)
        self.options = options
        self.interpret = interpret
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
        a = tree.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            raise make_error(CompileError, f"{self.file}:{self.first_line}: @runtime.jit kernel '{self.name}': "
                                           f"parameters must be plain positional names (no defaults, *args, **kw)")
        self.param_names = [p.arg for p in a.args]
        self.def_line = self.first_line + tree.lineno - 1  # the 'def' line (first_line may be a decorator's)
        # The file as a C string literal for #line directives.
        self.c_file = "".join("\\" + c if c in '"\\' else c if c.isprintable() else "?" for c in self.file)
        self.assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
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

    # ---- signatures
    def _param_type(self, i: int, a: Any) -> Any:
        name = self.param_names[i]
        ann = self._annotations.get(name)
        if isinstance(a, DeviceMemory):
            if ann is not None:
                return _Buf(self.annotation_dtype(ann, param=name))
            if a.dtype not in _CTYPES:
                raise self._unsupported_dtype(i, "device memory of dtype", a.dtype)
            return _Buf(a.dtype)
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
        key = (tuple(("buf", p.dt) if isinstance(p, _Buf) else (p.dt, p.weak) for p in params), ndim, self._values())
        return key, params

    def _values(self) -> tuple:
        """The current values of the globals and closure variables that the body reads as constants (tokens that
        tell 1, 1.0, True and np.int32(1) apart, and compare NaN equal to itself)."""
        getters = self._value_getters
        if getters is None:
            getters = self._value_getters = self._find_value_getters()
        return tuple([_value_token(g()) for g in getters]) if getters else ()

    def _find_value_getters(self) -> list:
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
        return getters

    def source(self, *args: Any, global_size: Any = None) -> str:
        """The kernel-dialect source generated for these arguments (and a launch of global_size's dims)."""
        ndim = len(global_size) if isinstance(global_size, tuple) else 1
        _, params = self._signature(args, ndim)
        return _Translator(self, _Sig(params, ndim)).translate()

    inspect = source

    def _compile(self, key: tuple, params: list, ndim: int) -> _Compiled:
        src = _Translator(self, _Sig(params, ndim)).translate()
        # -fwrapv backs the wrapping arithmetic the translation spells out (loop counters, ids): NumPy semantics.
        mod = _core.module_load_source(src, "-fwrapv" + (" " + self.options if self.options else ""))
        try:
            func = _core.module_get_function(mod, self.cname)
        except Exception:
            _core.module_unload(mod)
            raise
        return _Compiled(src, mod, func, params, ndim)

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
                        c = self._cache[(key, dev)] = self._compile(key, params, ndim)
        return c

    @property
    def signatures(self) -> list:
        """The argument signatures compiled so far."""
        return [k for k, _ in self._cache]

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise make_error(InvalidValueError, f"a @runtime.jit kernel is launched on a stream: "
                                            f"stream.launch_kernel({self.name}, *args)")

    def __repr__(self) -> str:
        return f"<runtime.jit kernel {self.name} ({self.file}:{self.first_line})>"

    # ---- launch
    def _compiled_mode(self) -> bool:
        """Whether launches run the compiled kernel (not the reference mode)."""
        return self.interpret is False or (self.interpret is None and not interpret_enabled())

    def _launch(self, stream: Stream, args: tuple, global_size: Any, local_size: Any) -> None:
        # Fastest path: the launch plan of the previous default-shaped launch; it checks, packs and launches in one
        # C++ call, or returns None without launching (other argument types, freed memory, ...): then the full path.
        if global_size is None and local_size is None:
            plan = self._last_plan
            if plan is None and self._last_valued is not None:
                plan, vals = self._last_valued
                if vals != self._values():
                    plan = None
            if plan is not None and plan.device == stream.device.index and self._compiled_mode():
                keep = plan.launch(args, stream.handle)
                if keep is not None:
                    if keep:
                        stream._keep_mems(keep)
                    return
        interp = self.interpret if self.interpret is not None else interpret_enabled()
        if interp or global_size is not None or local_size is not None:
            glob, local, ndim = _shape(self.name, args, global_size, local_size)
        else:
            glob = local = None  # the common case, resolved below from the compiled entry (no per-call parsing)
            ndim = 1
        if interp:
            self._signature(args, ndim)  # same argument checks as the compiled path
            return _run_reference(self, stream, args, glob, local, ndim)
        # Fast key: the Python types of the arguments (dtype for device memory); a miss takes the full path,
        # which validates the arguments and compiles.
        dev = stream.device.index
        types = tuple([a._dtype if type(a) is DeviceMemory else type(a) for a in args])
        vals = self._values()
        fkey = (types, ndim, dev, vals)
        c = self._fast.get(fkey)
        if c is None:
            key, params = self._signature(args, ndim)
            c = self._fast[fkey] = self._get(key, params, ndim, dev)
        plan = self._plans.get(fkey)
        if plan is None:
            plan = self._plans[fkey] = c.plan(types, dev)
        if glob is None:
            keep = plan.launch(args, stream.handle)
            if keep is not None:
                if vals:
                    self._last_valued = (plan, vals)
                else:
                    self._last_plan = plan
        else:
            keep = plan.launch_shaped(args, stream.handle, glob[0], glob[1], glob[2], local[0], local[1], local[2])
        if keep is not None:
            if keep:
                stream._keep_mems(keep)
            return
        # The plan declined (freed memory, a value that does not fit, no buffer to size from, ...): the Python
        # packer launches or raises the precise error.
        if glob is None:
            n = args[c.first_buf].nbytes // c.first_itemsize if c.first_buf >= 0 else -1
            if n < 0:
                _shape(self.name, args, None, None)  # raises: no buffer to take the global size from
            if n == 0:
                return
            glob, local = (n, 1, 1), _DEFAULT_LOCAL[1]
        elif 0 in glob:
            return
        try:
            packed = c.pack(args, glob)
        except (struct.error, OverflowError, TypeError) as e:
            raise make_error(InvalidValueError, f"kernel '{self.name}': an argument does not fit its type ({e})") \
                from None
        _core.launch_kernel(c.func, glob[0], glob[1], glob[2], local[0], local[1], local[2], packed, c.sizes,
                            stream.handle)
        if c.buf_idx:
            stream._keep_mems([args[i] for i in c.buf_idx])


_DEFAULT_LOCAL = {1: (256, 1, 1), 2: (16, 16, 1), 3: (8, 8, 4)}


def _dims(name: str, what: str, v: Any, allow_zero: bool) -> tuple:
    vals = v if isinstance(v, tuple) else (v,)
    if not 1 <= len(vals) <= 3:
        raise make_error(InvalidValueError, f"kernel '{name}': {what} must be an int or a tuple of 1 to 3 ints, got {v!r}")
    out = []
    for x in vals:
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
            raise make_error(InvalidValueError, f"kernel '{name}': {what} must hold ints, got {v!r}")
        if x < 0 or (x == 0 and not allow_zero):
            raise make_error(InvalidValueError, f"kernel '{name}': {what} = {v!r} must be "
                                                f"{'non-negative' if allow_zero else 'positive'}")
        out.append(int(x))
    return tuple(out)


def _shape(name: str, args: tuple, global_size: Any, local_size: Any) -> tuple:
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
        lo = _DEFAULT_LOCAL[ndim][:ndim]
    else:
        lo = _dims(name, "local_size", local_size, False)
        if len(lo) != ndim:
            raise make_error(InvalidValueError, f"kernel '{name}': local_size {local_size!r} has {len(lo)} dims but "
                                                f"global_size has {ndim}")
    return g + (1,) * (3 - ndim), lo + (1,) * (3 - ndim), ndim


# ------------------------------------------------------------------------------------------ reference mode


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


def _run_reference(k: JitKernel, stream: Stream, args: tuple, glob: tuple, local: tuple, ndim: int) -> None:
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


def jit(fn: Optional[Callable] = None, *, options: Optional[str] = None,
        interpret: Optional[bool] = None) -> Any:
    """Decorator: compile a Python function into a device kernel (see the module docstring for the subset).
    `options` go to the kernel compiler ("-O3", "-DNAME=1"); `interpret=True` forces the reference mode."""
    if fn is None:
        return lambda f: JitKernel(f, options, interpret)
    return JitKernel(fn, options, interpret)
