"""The translator: a @runtime.jit kernel's Python AST → kernel-dialect C++ (include/runtime/kernel.h) for one
signature and one target. Types are inferred to a fixed point (types.py), then statements and expressions are
emitted with NumPy's integer semantics spelled out; the target may add code of its own after the kernel
(target.py: the cpu target's staged twin, cpu_target.py)."""

from __future__ import annotations

import ast
import math
from typing import Any, Callable, Optional

import numpy as np

from ..core import make_error
from ..errors import CompileError
from .builtins import _ATOMICS, _ID_BUILTINS, barrier, local_array
from .types import (_ATOMIC_DTYPES, _BOOL, _CTYPES, _F32, _F64, _I64, _STORAGE, BOOL, WEAK_FLOAT, WEAK_INT, Ty, _Buf,
                    _Sig, _plain_wraps, _sig_str, _storage_c, _wrap_c, promote)

_CPP_RESERVED = set("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class compl
concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype default delete
do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable
namespace new noexcept not not_eq nullptr operator or or_eq private protected public register reinterpret_cast
requires return short signed sizeof static static_assert static_cast struct switch template this thread_local throw
true try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t printf main it
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
    # NumPy's float floor division (as its divmod): floor(a / b) would round the quotient first (1.0 // 0.1 would
    # be 10, where the exact quotient 9.99... floors to 9). x // 0 is a / b (inf or nan), a zero keeps its sign.
    "floordiv_f": """template <class T> RT_DEVICE T rtpy_floordiv_f(T a, T b) {
    if (b == 0) return a / b;
    T m = fmod(a, b);
    T d = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) d = d - 1;
    if (d == 0) return copysign((T)0, a / b);
    T f = floor(d);
    if (d - f > (T)0.5) f = f + 1;
    return f;
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



def _calls(node: ast.AST) -> bool:
    """Whether evaluating `node` calls anything (an atomic or a device function may have effects): such an operand
    must be evaluated exactly once."""
    return any(isinstance(n, ast.Call) for n in ast.walk(node))

class _Ctx:
    """What the translations of one kernel and of the device functions it calls share: the integer helpers used,
    the device function specialisations (emitted once each, callees first), and the chain of functions being
    translated (a call of one of them is recursion)."""

    def __init__(self) -> None:
        self.helpers: set = set()
        self.checked = False  # checked mode (the kernel's boundscheck): every index is checked against its bound
        self.devfns: dict = {}  # (callee, argument types, ndim) -> [C name, return Ty or None, lines until emitted]
        self.code: list = []  # the device functions' C++ lines, callees first
        self.stack: list = []  # JitKernels being translated, outermost first


def _try_resolve(tr: "_Translator", node: ast.AST) -> Any:
    from ..errors import CompileError
    try:
        return tr.resolve(node)
    except CompileError:
        return None


_OWN_SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda, ast.FunctionDef,
               ast.AsyncFunctionDef, ast.ClassDef)


class _Translator(ast.NodeVisitor):
    """One translation of one kernel for one signature and target: infers local types (to a fixed point), then
    emits C++. What a target's own code generation may use: params, locals, block(), expr(), resolve(), emit(),
    function() and element_store (how a store to buffer[index] is emitted: replaceable while a function is built)."""

    def __init__(self, kernel: Any, sig: _Sig, target: Any, ctx: Optional[_Ctx] = None,
                 device: bool = False) -> None:
        self.k = kernel  # the JitKernel
        self.sig = sig
        self.target = target  # target.Target: what the backend the kernel is generated for adds to it
        self.params = {name: t for name, t in zip(kernel.param_names, sig.params)}
        self.locals: dict = {}
        if ctx is None:
            ctx = _Ctx()
            ctx.checked = kernel.checked()
        self.ctx = ctx
        self.helpers = self.ctx.helpers
        self.device = device  # a device function (called by a kernel), not a kernel
        self.ret: Optional[Ty] = None  # a device function's return type (None: returns no value)
        self.local_arrays: dict = {}  # name -> (element Ty, shape): runtime.local_array()
        self.group: Any = None  # groups.GroupPlan of a kernel that calls runtime.barrier()
        self.grouped = False  # emitted in the cpu group form (rt_items blocks), not flat
        self.private: set = set()  # per-item locals used as name[rt_it] (rt_private<T>)
        self.lines: list = []
        self.indent = 1
        self.loop_depth = 0
        self.tmp = 0
        self.changed = False
        self.emitting = False
        self.in_cond = False
        self.element_store: Callable = self.plain_store  # (subscript node, C reference, its Ty, C value) -> None
        self.py_line = self.line_marked = kernel.def_line  # the Python line the emitted C++ lines come from

    # ---- errors
    def error(self, node: Any, what: str) -> CompileError:
        line = self.k.first_line + getattr(node, "lineno", 1) - 1
        return make_error(CompileError, f"{self.k.file}:{line}: {what} (in @runtime.jit kernel '{self.k.name}')")

    def unsupported(self, node: Any, extra: str = "") -> CompileError:
        return self.error(node, f"unsupported construct '{_construct(node)}'{extra}")

    # ---- driver
    def translate(self) -> str:
        self.ctx.stack.append(self.k)
        try:
            self.prepare()
            self.infer()
            self.emitting = True
            # No bounds test: launches pass the exact global size, and no backend runs the items past it.
            body = self.group_block if self.grouped else self.block
            kernel = self.function(f"RT_KERNEL void {self.k.cname}", "", lambda: body(self.k.tree.body))
            extra = [] if self.group is not None or self.local_arrays else self.target.extra_code(self)
        finally:
            self.ctx.stack.pop()
        out = [f"// Generated by @runtime.jit from {self.k.name} ({self.k.file}:{self.k.first_line}) for "
               f"({', '.join(_sig_str(t) for t in self.sig.params)}), {self.sig.ndim}-D launch"
               + (", work-group form (rt_items blocks between barriers)." if self.grouped else ".")]
        out += [_HELPERS[h] for h in sorted(self.helpers)]
        for lines in self.ctx.code:
            out += lines
        out += kernel
        out += extra
        return "\n".join(out) + "\n"

    def translate_device(self, cname: str) -> tuple:
        """(C++ lines, return Ty or None) of this device function as `cname`."""
        self.ctx.stack.append(self.k)
        try:
            self.prepare()
            self.infer()
            if self.ret is not None and self.definitely_assigned(self.k.tree.body, set(self.params)) is not None:
                raise self.error(self.k.tree, f"device function '{self.k.name}' returns a value on some paths but "
                                              f"can also reach its end (where Python returns None)")
            self.emitting = True
            rc = self.ret.c if self.ret is not None else "void"
            return self.function(f"RT_DEVICE {rc} {cname}", "", lambda: self.block(self.k.tree.body)), self.ret
        finally:
            self.ctx.stack.pop()

    def infer(self) -> None:
        body = self.k.tree.body
        self.definitely_assigned(body, set())
        for _ in range(20):  # type inference: join of assigned types, to a fixed point
            self.changed = False
            self.block(body)
            if not self.changed:
                break
        else:
            raise self.error(self.k.tree, "local variable types did not settle")

    # ---- barriers and local arrays
    def is_local_array_stmt(self, s: ast.stmt) -> bool:
        return isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and \
            _try_resolve(self, s.value.func) is local_array

    def prepare(self) -> None:
        """Find the local arrays and barriers, refuse their misuse, and plan the group form (groups.py)."""
        tree = self.k.tree
        top = {id(s) for s in tree.body}
        what = "device function" if self.device else "kernel"
        barriers = False
        parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        for n in ast.walk(tree):
            if not isinstance(n, ast.Call):
                continue
            fn = _try_resolve(self, n.func)
            if fn is barrier:
                if self.device:
                    raise self.error(n, f"runtime.barrier() in device function '{self.k.name}': barriers are only "
                                        f"allowed in a kernel body (call it from the kernel)")
                if not isinstance(parents.get(id(n)), ast.Expr) or n.args or n.keywords:
                    raise self.error(n, "runtime.barrier() takes no arguments and is a statement of its own")
                barriers = True
            elif fn is local_array:
                st = parents.get(id(n))
                if self.device:
                    raise self.error(n, f"runtime.local_array() in device function '{self.k.name}': local arrays "
                                        f"are declared in a kernel body")
                if not (isinstance(st, ast.Assign) and st.value is n and id(st) in top and len(st.targets) == 1
                        and isinstance(st.targets[0], ast.Name)):
                    raise self.error(n, "runtime.local_array() must be assigned to a name at the top level of the "
                                        "kernel body (tile = runtime.local_array((16, 16), numpy.float32))")
                name = st.targets[0].id
                if name in self.local_arrays or len([m for m in ast.walk(tree) if isinstance(m, ast.Name)
                                                     and m.id == name and isinstance(m.ctx, ast.Store)]) != 1:
                    raise self.error(st, f"local array '{name}' is assigned more than once")
                self.local_arrays[name] = self.local_array_type(n)
        del what
        if barriers:
            from .groups import GroupPlan
            self.group = GroupPlan(self, lambda node: _try_resolve(self, node))
            self.grouped = self.target.backend == "cpu"
            if self.grouped:
                self.private = self.group.private

    def local_array_type(self, n: ast.Call) -> tuple:
        if n.keywords or len(n.args) != 2:
            raise self.error(n, "runtime.local_array(shape, dtype) takes two positional arguments")
        shape_node, dt_node = n.args
        dims = shape_node.elts if isinstance(shape_node, ast.Tuple) else [shape_node]
        shape = tuple(self.const_int(d) for d in dims)
        if not 1 <= len(shape) <= 3 or any(d <= 0 for d in shape):
            raise self.error(n, f"runtime.local_array(): shape {shape} must have 1 to 3 positive dimensions")
        try:
            dt = self.k.annotation_dtype(dt_node, self)
        except Exception as e:  # CompileError from annotation_dtype names the kernel's first line: name this one
            raise self.error(n, f"runtime.local_array(): dtype is not a supported dtype ({e})") from None
        return Ty(dt), shape

    def const_int(self, node: ast.AST) -> int:
        """The value of a constant integer expression (literals, global constants, + - * //)."""
        if isinstance(node, ast.Constant):
            v = node.value
        elif isinstance(node, (ast.Name, ast.Attribute)):
            v = _try_resolve(self, node)  # a kernel variable or an unknown name is not a constant
        elif isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv):
            a, b = self.const_int(node.left), self.const_int(node.right)
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b,
                    ast.FloorDiv: a // b if b else 0}[type(node.op)]
        else:
            v = None
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise self.error(node, f"expected a constant integer (a literal or a global int), got "
                                   f"'{_construct(node)}'")
        return int(v)

    def group_block(self, stmts: list) -> None:
        """A group-level statement list in the cpu group form (groups.py)."""
        for kind, s in self.group.segments(stmts):
            if kind == "run":
                self.items_block(s, lambda run=s: self.block(run))
            elif kind == "items":
                saved, self.py_line = self.py_line, self.k.first_line + s.lineno - 1
                try:
                    self.item_loop(s)
                finally:
                    self.py_line = saved
            else:
                self.stmt(s)

    def items_block(self, run: list, body: Callable) -> None:
        """`rt_items(rt_it) { block locals; recomputed locals; body() }` for the statements `run`."""
        saved, self.py_line = self.py_line, self.k.first_line + run[0].lineno - 1
        self.emit("rt_items(rt_it) {")
        self.indent += 1
        for name in self.group.block_vars.get(id(run), []):
            if name in self.locals:
                self.emit(f"{self.locals[name].c} {_cname(name)} = 0;")
        self.block(self.group.block_remat.get(id(run), []))  # recomputed, not kept per item
        body()
        self.indent -= 1
        self.py_line = self.k.first_line + run[0].lineno - 1
        self.emit("}")
        self.py_line = saved

    def item_loop(self, s: ast.For) -> None:
        """An item loop (groups.py): the range's iterations as group code, each one an rt_items block in which
        every item runs its iteration g + (its local ids) of the loop, if that is below the stop."""
        terms, offs = self.group.item_loop(s)
        args = s.iter.args
        parts = []
        for a in args:
            code, t = self.expr(a) if a is not args[0] or len(args) == 1 else ("", WEAK_INT)
            if a is not args[0] or len(args) == 1:
                if not t.is_int():
                    raise self.error(a, f"range() argument has type {t.dt}, expected an integer")
                parts.append(self.cast(code, t, WEAK_INT))
        stop = parts[0]
        step = parts[1] if len(parts) > 1 else "1L"
        base = []
        for term in terms:
            if isinstance(term, tuple):
                base.append(f"(int64_t)(get_group_id({term[1]}) * get_local_size({term[1]}))")
            else:
                code, t = self.expr(term)
                if not t.is_int():
                    raise self.error(term, f"range() argument has type {t.dt}, expected an integer")
                base.append(self.cast(code, t, WEAK_INT))
        self.tmp += 1
        n = self.tmp
        gv, sv, tv, iv = f"rt_g{n}", f"rt_stop{n}", f"rt_step{n}", f"rt_i{n}"
        self.emit(f"{{  // an item loop: its steps are group code, each one a pass over the items (groups.py)")
        self.indent += 1
        self.emit(f"const int64_t {sv} = {stop};")
        self.emit(f"const int64_t {tv} = {step};")
        self.emit(f"for (int64_t {gv} = {' + '.join(base) if base else '0L'}; {gv} < {sv}; {gv} += {tv}) {{")
        self.indent += 1

        def body() -> None:
            if offs:
                off = " + ".join(f"(int64_t)get_local_id({d})" for d in offs)
                self.emit(f"const int64_t {iv} = {gv} + {off};")
                self.emit(f"if ({iv} < {sv}) {{")
                self.indent += 1
            self.assign_name(s, s.target.id, WEAK_INT, iv if offs else gv)
            self.loop_depth += 1
            self.block(s.body)
            self.loop_depth -= 1
            if offs:
                self.indent -= 1
                self.emit("}")

        self.items_block(s.body, body)
        self.indent -= 1
        self.emit("}")
        self.indent -= 1
        self.emit("}")

    def body_of(self, s: ast.stmt) -> Callable:
        """How the body of compound statement s is emitted: as group code when s contains a barrier (cpu)."""
        return self.group_block if self.grouped and self.emitting and self.group.control(s) else self.block

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
            for t in targets:  # refused here, before its names would read as never assigned
                if isinstance(t, (ast.Tuple, ast.List, ast.Starred)):
                    raise self.error(s, "unsupported construct 'unpacking assignment' (y, x = ...): assign each name "
                                        "on a line of its own")
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

    def function(self, head: str, first_param: str, body: Callable) -> list:
        """`head(first_param, parameters) { locals; body() }`, body emitting the statements."""
        self.lines = []
        self.py_line = self.line_marked = self.k.def_line
        body()
        plist = [first_param] if first_param else []
        hidden = []
        for name, t in self.params.items():
            if isinstance(t, _Buf):
                plist.append(f"{_storage_c(t.dt)}* {_cname(name)}")
                hidden += [f"int64_t {self.hidden_name(name, suffix)}" for suffix, _ in t.hidden()]
            else:
                plist.append(f"{t.c} {_cname(name)}")
        plist += hidden  # shapes and strides of shaped buffers: after the parameters (the launch appends them)
        nd = self.sig.ndim
        plist += [f"uint64_t rt_gsize{d}" for d in range(nd)]
        out = [self.line_directive(self.k.def_line), f"{head}({', '.join(plist)}) {{"]
        for name, (t, shape) in self.local_arrays.items():
            out.append(f"    RT_LOCAL {t.storage} {_cname(name)}{''.join(f'[{d}]' for d in shape)};")
        in_blocks = {v for names in self.group.block_vars.values() for v in names} if self.grouped else set()
        for name, t in self.locals.items():
            if name in self.private:
                out.append(f"    rt_private<{t.c}> {_cname(name)};  // per work-item, live across barriers")
            elif name not in in_blocks:
                out.append(f"    {t.c} {_cname(name)} = 0;")
        out += self.lines
        out.append("}")
        return out

    def emit(self, line: str) -> None:
        if self.emitting:
            if self.py_line != self.line_marked:
                # The compiler's diagnostics and rt_assert's __FILE__:__LINE__ name the Python statement.
                self.lines.append(self.line_directive(self.py_line))
                self.line_marked = self.py_line
            self.lines.append("    " * self.indent + line)

    @staticmethod
    def hidden_name(param: str, suffix: str) -> str:
        return f"rt_{_cname(param)}_{suffix}"

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
        self.emit(f"{self.var(name)} = {self.cast(code, vt, t)};")

    def var(self, name: str) -> str:
        """The C++ expression of local or parameter `name` (a privatised local: its item's element)."""
        return f"{_cname(name)}[rt_it]" if name in self.private else _cname(name)

    def s_Assign(self, s: ast.Assign) -> None:
        if len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) and s.targets[0].id in self.local_arrays:
            return  # runtime.local_array(): declared at the top of the body
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
        self.emit(f"{self.var(name)} = {self.cast(code, vt, t)};")

    def store(self, target: ast.AST, value: ast.AST, node: ast.AST) -> None:
        code, vt = self.expr(value)
        if isinstance(target, ast.Name):
            self.assign_name(node, target.id, vt, code)
        elif isinstance(target, ast.Subscript):
            ref, et = self.subscript(target)
            self.element_store(target, ref, et, self.to_storage(self.cast(code, vt, et), et))
        else:
            raise self.unsupported(target, " as an assignment target (use a name or buffer[index])")

    @staticmethod
    def to_storage(value: str, et: Ty) -> str:
        """A value of element type et as stored in memory (16-bit floats: converted from the float computed)."""
        return f"{et.storage}({value})" if et.dt in _STORAGE else value

    @staticmethod
    def load(ref: str, et: Ty) -> str:
        """An element read from memory as the value computed with (16-bit floats: as float)."""
        return f"((float){ref})" if et.dt in _STORAGE else ref

    def plain_store(self, target: ast.Subscript, ref: str, et: Ty, value: str) -> None:
        self.emit(f"{ref} = {value};")

    def s_AugAssign(self, s: ast.AugAssign) -> None:
        op = _BINOPS.get(type(s.op))
        if op is None:
            raise self.error(s, f"unsupported construct '{_construct(s.op)}'")
        if isinstance(s.target, ast.Name):
            cur, ct = self.name(s.target)
            code, vt = self.binop(s, op, (cur, ct), self.expr(s.value), s.value)
            self.assign_name(s, s.target.id, vt, code)
        elif isinstance(s.target, ast.Subscript):
            ref, et = self.subscript(s.target)
            bound = _calls(s.target.slice)
            if bound:  # the element is read and written: an index that calls something is evaluated once
                self.tmp += 1
                name = f"rt_elem{self.tmp}"
                self.emit("{")
                self.indent += 1
                self.emit(f"auto& {name} = {ref};")
                ref = name
            code, vt = self.binop(s, op, (self.load(ref, et), et), self.expr(s.value), s.value)
            self.element_store(s.target, ref, et, self.to_storage(self.cast(code, vt, et), et))
            if bound:
                self.indent -= 1
                self.emit("}")
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
        body = self.body_of(s)
        self.emit(f"if ({self.cond(s.test)}) {{")
        self.indent += 1
        body(s.body)
        self.indent -= 1
        if s.orelse:
            self.emit("} else {")
            self.indent += 1
            body(s.orelse)
            self.indent -= 1
        self.emit("}")

    def s_While(self, s: ast.While) -> None:
        if s.orelse:
            raise self.error(s, "unsupported construct 'while ... else'")
        self.emit(f"while ({self.cond(s.test)}) {{")
        self.loop(s.body, self.body_of(s))
        self.emit("}")

    def loop(self, body: list, emit_body: Optional[Callable] = None) -> None:
        self.indent += 1
        self.loop_depth += 1
        (emit_body or self.block)(body)
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
        self.loop(s.body, self.body_of(s))
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
        if self.device:
            if s.value is None and any(isinstance(n, ast.Return) and n.value is not None
                                       for n in ast.walk(self.k.tree)):
                raise self.error(s, f"device function '{self.k.name}' returns a value on some paths only")
            if s.value is None:
                self.emit("return;")
                return
            code, vt = self.expr(s.value)
            new = vt if self.ret is None else promote(self.ret, vt)
            if new != self.ret:
                self.ret, self.changed = new, True
            self.emit(f"return {self.cast(code, vt, self.ret)};")
            return
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
        fn = _try_resolve(self, s.value.func)
        if fn is barrier:
            self.emit("rt_barrier();")
            return
        if fn is print:
            return self.call_print(s.value)
        if type(fn).__name__ == "JitKernel":
            code, _ = self.call_device(s.value, fn, void_ok=True)
            self.emit(f"{code};")
            return
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
        if n in self.local_arrays:
            raise self.error(e, f"local array '{n}' used as a value (index it: {n}[i])")
        if n in self.locals:
            return self.var(n), self.locals[n]
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
        if isinstance(e.value, ast.Name) and isinstance(self.params.get(e.value.id), _Buf):
            buf, name = self.params[e.value.id], e.value.id
            if e.attr == "ndim" and buf.shaped:
                return f"{buf.ndim}L", WEAK_INT
            if e.attr == "size" and buf.shaped:
                return "(" + " * ".join(self.hidden_name(name, f"shape{d}") for d in range(buf.ndim)) + ")", WEAK_INT
            raise self.error(e, f"unsupported construct 'buffer attribute {e.attr}' (kernels read a buffer's shape[d], "
                                f"strides[d], ndim and size)")
        return self.const(e, self.resolve(e))

    def shape_attr(self, e: ast.Subscript) -> Optional[tuple]:
        """buf.shape[d] / buf.strides[d] (bytes, like NumPy) of a shaped buffer parameter, or None."""
        v = e.value
        if not (isinstance(v, ast.Attribute) and v.attr in ("shape", "strides") and isinstance(v.value, ast.Name)
                and isinstance(self.params.get(v.value.id), _Buf)):
            return None
        name, buf = v.value.id, self.params[v.value.id]
        try:
            d = ast.literal_eval(e.slice)
        except ValueError:
            d = None
        if isinstance(d, bool) or not isinstance(d, int) or buf.ndim is None or not -buf.ndim <= d < buf.ndim:
            raise self.error(e, f"{name}.{v.attr}[d]: d must be a constant dimension of the "
                                f"{buf.ndim or 1}-D array '{name}'")
        d %= buf.ndim
        if v.attr == "shape":
            return self.hidden_name(name, f"shape{d}"), WEAK_INT
        if d == buf.ndim - 1 and buf.contig:
            return f"{buf.dt.itemsize}L", WEAK_INT
        return f"({self.hidden_name(name, f'stride{d}')} * {buf.dt.itemsize})", WEAK_INT

    def index_code(self, e: ast.AST, node: ast.AST, bound: Optional[str] = None) -> str:
        """The C++ of index e of subscript `node`, checked (rt_index_, kernel.h): against `bound` (its dimension's
        size) in checked mode; else only for being negative, unless the index is >= 0 on every path (nonneg:
        ids, range variables, ...), so the common kernel pays nothing."""
        code, t = self.expr(e)
        if not t.is_int() or t.kind == "b":
            raise self.error(node, f"buffer index has type {t.dt}, expected an integer")
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and isinstance(e.operand, ast.Constant):
            raise self.error(node, "negative index: kernels index from 0 (an index below 0 or past the array's "
                                   "shape is out of bounds)")
        if self.ctx.checked and bound is not None:
            return f'rt_index_((long long)({code}), (long long)({bound}), "{_c_text(ast.unparse(node))}")'
        if not self.nonneg(e):
            return f'rt_index_((long long)({code}), 0x7fffffffffffffffLL, "{_c_text(ast.unparse(node))}")'
        return code

    def subscript(self, e: ast.Subscript) -> tuple:
        base = e.value.id if isinstance(e.value, ast.Name) else None
        idx = e.slice
        if isinstance(idx, ast.Slice):
            raise self.error(e, f"unsupported construct '{_construct(idx)}' index (kernels index elements)")
        parts = idx.elts if isinstance(idx, ast.Tuple) else [idx]
        if base in self.local_arrays:
            et, shape = self.local_arrays[base]
            if len(parts) != len(shape):
                raise self.error(e, f"local array '{base}' has {len(shape)} dimension(s), indexed with "
                                    f"{len(parts)} (a tuple index a[y, x] for each dimension)")
            return _cname(base) + "".join(f"[{self.index_code(p, e, str(n))}]" for p, n in zip(parts, shape)), et
        if base is None or not isinstance(self.params.get(base), _Buf):
            raise self.error(e, "only buffer parameters and local arrays can be indexed")
        buf = self.params[base]
        if not buf.shaped:
            if isinstance(idx, ast.Tuple):
                raise self.error(e, f"unsupported construct 'tuple' index of '{base}', a buffer indexed flat "
                                    f"(index it buf[i], or by all its dimensions)")
            bound = self.hidden_name(base, "n") if buf.checked else None
            return f"{_cname(base)}[{self.index_code(idx, e, bound)}]", buf.elem
        if len(parts) != buf.ndim:
            raise self.error(e, f"'{base}' is a {buf.ndim}-D array, indexed with {len(parts)} index(es): "
                                f"unsupported construct 'tuple' index of another length (one index per dimension)")
        terms = []
        for d, p in enumerate(parts):
            c = self.cast(self.index_code(p, e, self.hidden_name(base, f"shape{d}")), self.expr(p)[1], WEAK_INT)
            if d == buf.ndim - 1 and buf.contig:
                terms.append(c)
            else:
                terms.append(f"{c} * {self.hidden_name(base, f'stride{d}')}")
        return f"{_cname(base)}[{' + '.join(terms)}]", buf.elem

    def e_Subscript(self, e: ast.Subscript) -> tuple:
        sa = self.shape_attr(e)
        if sa is not None:
            return sa
        ref, et = self.subscript(e)
        return self.load(ref, et), et

    def cast(self, code: str, src: Ty, dst: Ty) -> str:
        if src.dt == dst.dt:
            return code
        if dst.kind == "b":
            return f"(({code}) != 0)"
        return f"(({dst.c})({code}))"

    def binop(self, node: ast.AST, op: str, a: tuple, b: tuple, right: Optional[ast.AST] = None) -> tuple:
        (ac, at), (bc, bt) = a, b
        t = promote(at, bt)
        if op in ("//", "%") and t.is_int() and t.kind != "b" and isinstance(right, ast.Constant) and \
                type(right.value) is int and right.value > 0 and right.value & (right.value - 1) == 0:
            # By a power of two, floor division is an arithmetic shift and the floor modulo a mask (two's
            # complement): what NumPy computes, and what lets the compiler count and unroll `s //= 2` loops.
            k = right.value.bit_length() - 1
            x = self.cast(ac, at, t)
            if op == "//":
                return f"(({t.c})({x} >> {k}))", t
            return f"(({t.c})({x} & {right.value - 1}))", t
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
                self.helpers.add("floordiv_f")
                return f"rtpy_floordiv_f<{t.c}>({x}, {y})", t
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
        return self.binop(e, op, self.expr(e.left), self.expr(e.right), e.right)

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
        left, lnode = self.expr(e.left), e.left
        parts = []
        # Python evaluates each operand of a chain once: a middle operand that calls something (an atomic, a device
        # function) is computed once into a temporary, inside a lambda so the chain stays one expression (a loop's
        # condition re-evaluates it) and keeps its short circuit.
        temps = []
        for i, (op, right) in enumerate(zip(e.ops, e.comparators)):
            c = _CMPOPS.get(type(op))
            if c is None:
                raise self.error(e, f"unsupported construct '{_construct(op)}'")  # operators carry no line
            r = self.expr(right)
            if i < len(e.ops) - 1 and _calls(right):
                self.tmp += 1
                name = f"rt_cmp{self.tmp}"
                temps.append((name, r[0], len(parts)))
                r = (name, r[1])
            t = promote(left[1], r[1])
            a, b = self.cast(left[0], left[1], t), self.cast(r[0], r[1], t)
            if t.kind == "i" and c not in ("==", "!=") and self.nonneg(lnode) and self.nonneg(right):
                # Both sides are >= 0: the signed order is the unsigned one, which the compiler knows ids in
                # (`lid < s` then vectorises like the dialect's size_t comparison).
                a, b = f"(uint64_t)({a})", f"(uint64_t)({b})"
            parts.append(f"({a} {c} {b})")
            left, lnode = r, right
        if not temps:
            return ("(" + " && ".join(parts) + ")" if len(parts) > 1 else parts[0]), BOOL
        # Each temporary is computed right after the comparisons before it passed: `a < f() < b` runs f() once, and
        # not at all when the chain stopped earlier.
        code, done = "", 0
        for name, value, at in temps:
            code += "".join(f"if (!{p}) return false; " for p in parts[done:at])
            code += f"const auto {name} = {value}; "
            done = at
        code += f"return {' && '.join(parts[done:])};"
        return f"([&]() -> bool {{ {code} }}())", BOOL

    def e_IfExp(self, e: ast.IfExp) -> tuple:
        c = self.cond(e.test)
        a, b = self.expr(e.body), self.expr(e.orelse)
        t = promote(a[1], b[1])
        return f"(({c}) ? {self.cast(a[0], a[1], t)} : {self.cast(b[0], b[1], t)})", t

    # ---- values known to be >= 0 (for comparisons in the unsigned order)
    def nonneg(self, e: ast.AST) -> bool:
        """Whether integer expression e is >= 0 on every path, whatever the arguments: ids and sizes, constants
        >= 0, and what only operations that keep a value >= 0 without overflowing make of them (// and >> by
        values >= 0, % and & with a side >= 0, min/max), through locals every assignment of which is such a value."""
        if isinstance(e, ast.Constant):
            return type(e.value) in (int, bool) and e.value >= 0
        if isinstance(e, ast.Name):
            if e.id in self.params:
                t = self.params[e.id]
                return not isinstance(t, _Buf) and (t.kind == "b" or (t.kind == "u" and t.dt.itemsize <= 4))
            if e.id in self.k.assigned:
                return e.id in self.nonneg_locals()
            return isinstance(_try_resolve(self, e), (int, np.integer)) and _try_resolve(self, e) >= 0
        if isinstance(e, ast.Call):
            fn = _try_resolve(self, e.func)
            if fn in _ID_BUILTINS:
                return True
            if fn is min and e.args and not e.keywords:
                return all(self.nonneg(a) for a in e.args)
            if fn is max and e.args and not e.keywords:
                return any(self.nonneg(a) for a in e.args)
            return False
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, (ast.FloorDiv, ast.RShift)):
                return self.nonneg(e.left) and self.nonneg(e.right)
            if isinstance(e.op, ast.Mod):  # NumPy: the sign of the divisor (x % 0 is 0)
                return self.nonneg(e.right)
            if isinstance(e.op, ast.BitAnd):
                return self.nonneg(e.left) or self.nonneg(e.right)
            return False
        if isinstance(e, ast.IfExp):
            return self.nonneg(e.body) and self.nonneg(e.orelse)
        return False

    def nonneg_locals(self) -> set:
        """The locals whose every assignment gives a value >= 0 (the greatest such set: s = 128; s //= 2)."""
        if getattr(self, "_nonneg", None) is not None:
            return self._nonneg
        stores: dict = {}
        for n in ast.walk(self.k.tree):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    for m in ast.walk(t):
                        if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Store):
                            stores.setdefault(m.id, []).append((n, t))
        self._nonneg = set(stores) - set(self.params) - set(self.local_arrays)

        def ok(st: ast.AST, t: ast.AST) -> bool:
            if not isinstance(t, ast.Name):
                return False
            if isinstance(st, ast.AnnAssign) and _try_resolve(self, st.annotation) not in (int, np.int64, np.uint64):
                return False  # a narrower declared type may wrap a non-negative value (x: np.int8 = 200)
            if isinstance(st, (ast.Assign, ast.AnnAssign)):
                return st.value is not None and self.nonneg(st.value)
            if isinstance(st, ast.AugAssign):
                return self.nonneg(ast.BinOp(left=t, op=st.op, right=st.value))
            it = st.iter  # for t in range(...): values from start upwards (a positive constant step)
            if not (isinstance(it, ast.Call) and _try_resolve(self, it.func) is range and not it.keywords):
                return False
            if len(it.args) == 3 and not (isinstance(it.args[2], ast.Constant) and type(it.args[2].value) is int
                                          and it.args[2].value > 0):
                return False
            return len(it.args) == 1 or (1 < len(it.args) <= 3 and self.nonneg(it.args[0]))

        changed = True
        while changed:
            changed = False
            for name in list(self._nonneg):
                if not all(ok(st, t) for st, t in stores[name]):
                    self._nonneg.discard(name)
                    changed = True
        return self._nonneg

    # ---- calls
    def e_Call(self, e: ast.Call) -> tuple:
        fn = self.resolve(e.func)
        fname = getattr(fn, "__name__", repr(fn))
        if type(fn).__name__ == "JitKernel":
            return self.call_device(e, fn)
        if fn is print or fn is barrier or fn is local_array:
            hint = " (tile = runtime.local_array(shape, dtype))" if fn is local_array else ""
            raise self.error(e, f"{'runtime.' if fn is not print else ''}{fname}() is a statement of its own{hint}")
        if fn in _ID_BUILTINS:
            return self.call_id(e, fn)
        if fn in _ATOMICS:
            return self.call_atomic(e, fn)
        known = (getattr(fn, "__module__", None) == "math" or fn in (min, max, abs, int, float, bool)
                 or (isinstance(fn, type) and np.dtype(fn) in _CTYPES if _is_dtype_type(fn) else False))
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
        if _is_dtype_type(fn) and np.dtype(fn) in _CTYPES:
            self.arity(e, args, 1, fname)
            t = Ty(np.dtype(fn))
            if t.dt in _STORAGE:  # rounded to the 16-bit type, computed on as float
                return f"((float){t.storage}({self.cast(args[0][0], args[0][1], Ty(_F32))}))", t
            return self.cast(args[0][0], args[0][1], t), t
        raise self.error(e, f"unsupported construct 'call of {getattr(fn, '__module__', '') or ''}"
                            f"{'.' if getattr(fn, '__module__', None) else ''}{fname}'")

    def call_device(self, e: ast.Call, fn: Any, void_ok: bool = False) -> tuple:
        """A call of @runtime.jit function fn from kernel code: fn specialised on the argument types, emitted once
        per specialisation (ahead of its callers) as an RT_DEVICE function."""
        if e.keywords:
            raise self.error(e, f"keyword arguments to device function '{fn.name}' are not supported")
        if len(e.args) != len(fn.param_names):
            raise self.error(e, f"device function '{fn.name}' takes {len(fn.param_names)} argument(s) "
                                f"({', '.join(fn.param_names)}), got {len(e.args)}")
        if fn in self.ctx.stack:
            chain = " -> ".join(k.name for k in self.ctx.stack[self.ctx.stack.index(fn):]) + f" -> {fn.name}"
            raise self.error(e, f"recursive call of device function '{fn.name}' ({chain}): device functions cannot "
                                f"call themselves, directly or through others")
        types, codes = [], []
        for j, a in enumerate(e.args):
            if isinstance(a, ast.Name) and a.id in self.local_arrays:
                # The callee takes a pointer to its first element, as it takes a buffer (CUDA's generic addressing
                # reaches __shared__ memory; on cpu the array lives in the group function's frame, around the
                # rt_items block that calls); shaped where the callee needs it so, its C-order shape as constants.
                et, shape = self.local_arrays[a.id]
                shaped = j in fn.shaped_params()
                types.append(_Buf(et.dt, len(shape) if shaped else None, True, checked=self.ctx.checked))
                codes.append(f"&{_cname(a.id)}{'[0]' * len(shape)}")
                if not shaped and self.ctx.checked:
                    codes.append(f"{math.prod(shape)}L")  # its element count, the bound of a checked flat buffer
                if shaped:
                    codes += [f"{d}L" for d in shape]
                    codes += [f"{math.prod(shape[d + 1:])}L" for d in range(len(shape) - 1)]
                continue
            if isinstance(a, ast.Name) and isinstance(self.params.get(a.id), _Buf):
                buf = self.params[a.id]
                types.append(buf)
                codes.append(_cname(a.id))
                codes += [self.hidden_name(a.id, suffix) for suffix, _ in buf.hidden()]
            else:
                code, t = self.expr(a)
                types.append(t)
                codes.append(code)
        # Hidden shapes go after the parameters: reorder to the callee's layout (pointers/scalars, then hidden).
        plain, hidden, j = [], [], 0
        for t in types:
            plain.append(codes[j])
            j += 1
            if isinstance(t, _Buf):
                n = len(t.hidden())
                hidden += codes[j:j + n]
                j += n
        key = (fn, tuple(t.key() if isinstance(t, _Buf) else (t.dt, t.weak) for t in types), self.sig.ndim)
        ent = self.ctx.devfns.get(key)
        if ent is None:
            cname = f"rt_fn_{fn.cname}_{len(self.ctx.devfns)}"
            sub = _Translator(fn, _Sig(types, self.sig.ndim), self.target, self.ctx, device=True)
            lines, ret = sub.translate_device(cname)
            ent = self.ctx.devfns[key] = [cname, ret, lines]
        cname, ret, lines = ent
        if self.emitting and lines is not None:  # emitted once, where first used (after the functions it calls)
            self.ctx.code.append(lines)
            ent[2] = None
        args = plain + hidden + [f"rt_gsize{d}" for d in range(self.sig.ndim)]
        if ret is None and not void_ok:
            raise self.error(e, f"device function '{fn.name}' returns no value (it is called as a statement)")
        return f"{cname}({', '.join(args)})", ret

    def call_print(self, e: ast.Call) -> None:
        """print(...) as rt_printf: the format follows the values' types (ints in decimal, floats as %g, bools as
        True/False, constant strings as themselves), sep= and end= constant strings."""
        sep, end = " ", "\n"
        for kw in e.keywords:
            if kw.arg not in ("sep", "end") or not (isinstance(kw.value, ast.Constant) and
                                                    isinstance(kw.value.value, str)):
                raise self.error(e, "print() in a kernel takes constant strings as sep= and end=, nothing else")
            if kw.arg == "sep":
                sep = kw.value.value
            else:
                end = kw.value.value
        fmt, vals = [], []
        for a in e.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                fmt.append(a.value.replace("%", "%%"))
                continue
            code, t = self.expr(a)
            if t.kind == "b":
                fmt.append("%s")
                vals.append(f'(({code}) ? "True" : "False")')
            elif t.kind == "i":
                fmt.append("%lld")
                vals.append(f"(long long)({code})")
            elif t.kind == "u":
                fmt.append("%llu")
                vals.append(f"(unsigned long long)({code})")
            else:
                fmt.append("%g")
                vals.append(f"(double)({code})")
        text = sep.replace("%", "%%").join(fmt) + end.replace("%", "%%")
        lit = "".join({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}.get(c, c) if c.isprintable() or c in "\n\t"
                      else f"\\{ord(c):03o}" for c in text)
        self.emit(f'rt_printf("{lit}"{"".join(", " + v for v in vals)});')

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
        if not (isinstance(b, ast.Name) and (isinstance(self.params.get(b.id), _Buf) or b.id in self.local_arrays)):
            raise self.error(e, f"runtime.{name}(): the first argument must be a buffer parameter or a local array")
        dt = self.params[b.id].dt if b.id in self.params else self.local_arrays[b.id][0].dt
        if dt not in _ATOMIC_DTYPES:
            raise self.error(e, f"runtime.{name}() on a {dt} buffer (supported: int32, uint32, int64, uint64, "
                                f"float32, float64)")
        ref, et = self.subscript(ast.copy_location(ast.Subscript(value=b, slice=e.args[1], ctx=ast.Load()), e))
        vals = [self.expr(a) for a in e.args[2:]]
        code = ", ".join(self.cast(c, t, et) for c, t in vals)
        return f"{name}(&{ref}, {code})", et

    def call_math(self, e: ast.Call, fname: str, args: list) -> tuple:
        strong = [t for _, t in args if not t.weak and t.kind == "f"]
        f32 = any(t.dt == _F32 or t.dt in _STORAGE for t in strong) and not any(t.dt == _F64 for t in strong)
        ft = WEAK_FLOAT
        if f32:  # a 16-bit float stays one (NumPy), computed in float; with a float32 operand: float32
            halves = {t.dt for t in strong if t.dt in _STORAGE}
            ft = Ty(_F32) if any(t.dt == _F32 for t in strong) or len(halves) > 1 else Ty(halves.pop())
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


def _c_text(text: str) -> str:
    """Text for inside a C string literal (an access's Python source in a failure message)."""
    return "".join("\\" + c if c in '"\\' else c if c.isprintable() and c != "?" else "." for c in text)


def _float_literal(v: float) -> str:
    # The prelude's constants (kernel.h): NVRTC has no __builtin_inf/__builtin_nan.
    if math.isnan(v):
        return "RT_NAN"
    if math.isinf(v):
        return "RT_INF" if v > 0 else "(-RT_INF)"
    r = repr(v)
    if "e" not in r and "." not in r:
        r += ".0"
    return r


def _is_dtype_type(fn: Any) -> bool:
    """Whether fn is a scalar type a kernel may convert to: numpy's (np.float32) or ml_dtypes' (bfloat16)."""
    if not isinstance(fn, type):
        return False
    if issubclass(fn, np.generic):
        return True
    try:
        return np.dtype(fn) in _STORAGE
    except TypeError:
        return False
