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
from .builtins import _ATOMICS, _ID_BUILTINS
from .types import (_ATOMIC_DTYPES, _BOOL, _CTYPES, _F32, _F64, _I64, BOOL, WEAK_FLOAT, WEAK_INT, Ty, _Buf, _Sig,
                    _plain_wraps, _sig_str, _wrap_c, promote)

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


_OWN_SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda, ast.FunctionDef,
               ast.AsyncFunctionDef, ast.ClassDef)


class _Translator(ast.NodeVisitor):
    """One translation of one kernel for one signature and target: infers local types (to a fixed point), then
    emits C++. What a target's own code generation may use: params, locals, block(), expr(), resolve(), emit(),
    function() and element_store (how a store to buffer[index] is emitted: replaceable while a function is built)."""

    def __init__(self, kernel: Any, sig: _Sig, target: Any) -> None:
        self.k = kernel  # the JitKernel
        self.sig = sig
        self.target = target  # target.Target: what the backend the kernel is generated for adds to it
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
        # No bounds test: launches pass the exact global size, and no backend runs the items past it.
        kernel = self.function(f"RT_KERNEL void {self.k.cname}", "", lambda: self.block(self.k.tree.body))
        extra = self.target.extra_code(self)
        out = [f"// Generated by @runtime.jit from {self.k.name} ({self.k.file}:{self.k.first_line}) for "
               f"({', '.join(_sig_str(t) for t in self.sig.params)}), {self.sig.ndim}-D launch."]
        out += [_HELPERS[h] for h in sorted(self.helpers)]
        out += kernel
        out += extra
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

    def function(self, head: str, first_param: str, body: Callable) -> list:
        """`head(first_param, parameters) { locals; body() }`, body emitting the statements."""
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
        for name, t in self.locals.items():
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
            self.element_store(target, ref, et, self.cast(code, vt, et))
        else:
            raise self.unsupported(target, " as an assignment target (use a name or buffer[index])")

    def plain_store(self, target: ast.Subscript, ref: str, et: Ty, value: str) -> None:
        self.emit(f"{ref} = {value};")

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
            self.element_store(s.target, ref, et, self.cast(code, vt, et))
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
    # The prelude's constants (kernel.h): NVRTC has no __builtin_inf/__builtin_nan.
    if math.isnan(v):
        return "RT_NAN"
    if math.isinf(v):
        return "RT_INF" if v > 0 else "(-RT_INF)"
    r = repr(v)
    if "e" not in r and "." not in r:
        r += ".0"
    return r
