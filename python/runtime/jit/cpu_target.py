"""The cpu target: its staged twins. A @runtime.jit kernel whose outputs are written once per item at consecutive
addresses along x and never read gets, beside the kernel, a twin that writes those outputs into the cpu entry's
row stages, and a row function that says where each row's outputs go and how many of its leading items run (the
entry streams whole rows to memory: RT_ROW_STAGING, RT_MAX_STAGED, RT_STAGE_BYTES of the cpu target's prelude).
Only the cpu target uses this module: on other backends no twin is generated."""

from __future__ import annotations

import ast
from typing import Any, Iterable, Optional

from .builtins import _ATOMICS, _ID_BUILTINS
from .target import Target
from .types import Ty, _Buf

MAX_STAGED = 4  # RT_MAX_STAGED of the cpu target's prelude: outputs staged at most


class CpuTarget(Target):
    """The cpu backend: kernels with staged outputs get their twin (after the kernel, under #if RT_ROW_STAGING)."""

    backend = "cpu"

    def extra_code(self, tr: Any) -> list:
        return staged_twin(tr)


def staged_twin(tr: Any) -> list:
    """The twin functions of the kernel `tr` has just emitted, or [] if it has no staged outputs. Kernels that call
    device functions (which may read or write the buffers they are passed) or index shaped arrays get none."""
    if tr.ctx.devfns or any(isinstance(t, _Buf) and t.shaped for t in tr.params.values()):
        return []
    staging = _RowStaging(tr)
    shape = staging.row_shape()
    return [] if shape is None else staging.twin(*shape)


class _RowStaging:
    """The staging analysis of one translation (the translator's params, locals and expressions) and its twin."""

    def __init__(self, tr: Any) -> None:
        self.tr = tr
        self.staged: dict = {}  # buffer parameter -> its stage (0..MAX_STAGED-1)
        self._x_locals: dict = {}  # local -> its x coefficient, along the statements analysed so far

    def twin(self, prefix: list, guard: Optional[tuple], rest: list) -> list:
        """The twin functions of a kernel with staged outputs (the entry's row staging: RT_ROW_STAGING)."""
        tr = self.tr
        names = ", ".join(f"'{n}'" for n in self.staged)
        sizes = ", ".join(str(tr.params[n].dt.itemsize) for n in self.staged)
        c, n = tr.k.cname, len(self.staged)
        out = ["#if RT_ROW_STAGING",
               f"// cpu: {names} written once per item at consecutive addresses along x and never read"
               + (", under a guard that holds for the leading items of a row" if guard else "") +
               f": rows run as rt_staged_{c} (the guard, if any, clipping them), and launches that write more than "
               f"the cache holds stream them to memory (RT_ROW_STAGING: the cpu target's prelude).",
               f"struct rt_staging_{c} {{ enum {{ count = {n}, clipped = {1 if guard else 0} }}; "
               f"static constexpr unsigned bytes[{n}] = {{{sizes}}}; }};"]

        def twin() -> None:
            tr.block(prefix)
            tr.block(rest)

        def row() -> None:
            tr.block(prefix)
            if guard:
                e, r, inclusive = guard
                tr.emit(f"const long long rt_n = rt_items_below_({tr.expr(r)[0]}, {tr.expr(e)[0]}, "
                        f"{int(inclusive)});")
                tr.emit("if (rt_n <= 0) return 0;  // no item of the row passes the guard: nothing more to evaluate")
            tr.block(rest)
            tr.emit("return rt_n;" if guard else "return 1LL << 62;")

        def staged_store(target: ast.Subscript, ref: str, et: Ty, value: str) -> None:
            stage = self.staged.get(target.value.id)
            if stage is None:
                tr.plain_store(target, ref, et, value)
            else:  # the stage's slot of this item
                tr.emit(f"(({et.c}*)(rt_stage + {stage} * RT_STAGE_BYTES))[get_local_id(0)] = {value};")

        def row_store(target: ast.Subscript, ref: str, et: Ty, value: str) -> None:
            stage = self.staged.get(target.value.id)
            if stage is not None:  # where item x = 0 of the row stores it (the others follow it)
                tr.emit(f"rt_dst[{stage}] = (void*)&{ref};")

        tr.element_store = staged_store
        out += tr.function(f"void rt_staged_{c}", "unsigned char* rt_stage", twin)
        tr.element_store = row_store
        if guard:
            out.append("static long long rt_items_below_(long long r, long long e, int inclusive) {  "
                       "// items x = 0, 1, ... of the row with e + x < r (<= r when inclusive)")
            out.append("    __int128 n = (__int128)r - e + inclusive;")
            out.append("    return n <= 0 ? 0 : n >= (1LL << 62) ? (1LL << 62) : (long long)n;")
            out.append("}")
        out += tr.function(f"long long rt_row_{c}", "void** rt_dst", row)
        tr.element_store = tr.plain_store
        out.append("#endif")
        return out


    # ---- which buffers a kernel writes as whole rows
    def row_shape(self) -> Optional[tuple]:
        """(prefix, guard, rest) when the kernel has staged outputs (sets self.staged), else None.

        The body must be straight-line assignments (no loops, atomics or asserts) except for one guard: either a
        final `if e < r:` (or <=, or r > e, r >= e) without else around the rest, or `if e >= r: return` (or >,
        r <= e, r < e) before it, where e is the item's x id plus a row invariant and r a row invariant (so the
        guard holds for the leading items of a row). A staged output is a buffer that is never read and is stored
        exactly once, at an index that is the item's x id plus a row invariant."""
        body = [st for st in self.tr.k.tree.body
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
        staged = [n for n, t in self.tr.params.items()
                  if isinstance(t, _Buf) and n not in reads and stores.get(n) == [1]][:MAX_STAGED]
        if not staged:
            return None
        self.staged = {name: j for j, name in enumerate(staged)}
        return prefix, guard, rest

    @staticmethod
    def loaded(node: ast.AST) -> set:
        return {n.value.id for n in ast.walk(node) if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load)
                and isinstance(n.value, ast.Name)}

    def straight(self, stmts: list, reads: set, stores: dict) -> bool:
        """Assignments only (to locals or buffer elements), no atomics. In order: tracks the locals' x coefficients,
        adds the buffers read to `reads` and each store's index coefficient to `stores`."""
        for st in stmts:
            if not isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                return False
            if any(isinstance(n, ast.Call) and self.tr.resolve(n.func) in _ATOMICS for n in ast.walk(st)):
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
        self._x_locals[target.id] = self.x_typed(c, self.tr.locals.get(target.id))

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
        et, rt = self.tr.expr(left)[1], self.tr.expr(right)[1]
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
            if e.id in self.tr.params:
                return None if isinstance(self.tr.params[e.id], _Buf) else 0
            if e.id in self.tr.k.assigned:
                return self._x_locals.get(e.id)
            return 0  # a global constant
        if isinstance(e, ast.Attribute):
            return 0
        if isinstance(e, ast.Subscript):
            return 0 if self.x_coef(e.slice) == 0 else None
        if isinstance(e, ast.Call):
            fn = self.tr.resolve(e.func)
            if fn in _ID_BUILTINS:
                nodes = list(e.args) + [k.value for k in e.keywords]
                d = ast.literal_eval(nodes[0]) if nodes else 0
                return 1 if d == 0 and _ID_BUILTINS[fn] in ("get_global_id", "get_local_id") else 0
            c = all_zero(e.args)
            if c is None and fn is int and len(e.args) == 1:
                c = self.x_typed(self.x_coef(e.args[0]), self.tr.expr(e.args[0])[1])
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
            return self.x_typed(c, self.tr.expr(e)[1])
        if isinstance(e, (ast.IfExp, ast.Compare, ast.BoolOp)):
            return all_zero(n for n in ast.iter_child_nodes(e) if isinstance(n, ast.expr))
        return None
