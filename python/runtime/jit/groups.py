"""Work-group structure of a @runtime.jit kernel that calls runtime.barrier(): which code is per work-item and which
is group code, which locals live across a barrier, and the checks that make a barrier well defined.

The translator uses this plan on every target. On cpu it emits the dialect's group form (include/runtime/kernel.h):
the kernel body becomes group code — run once per work-group — in which every maximal run of barrier-free
statements is an `rt_items(rt_it) { ... }` block (the block runs for every item of the group, then a barrier
follows it), and statements that contain a barrier (for, while, if) stay group code around such blocks. Other
targets (cuda) get the flat form: the body as written, `rt_barrier()` where the kernel calls runtime.barrier().

What is group code, and why that is sound:
  - a compound statement containing a barrier must be uniform: its condition (range bounds) may read only group
    values — scalar parameters the kernel never assigns, constants, get_group_id / get_local_size / get_num_groups /
    get_global_size, shapes and strides, group variables — never get_local_id / get_global_id, atomics, device
    function calls or a per-item local (a barrier in divergent control flow is undefined in CUDA and OpenCL: refused
    here); nor memory, even at a uniform index: cpu evaluates the condition once, between blocks, but in the flat form
    every item evaluates it at its own time, racing with another item's write in the same stretch (refused on every
    target, so that a kernel means the same on cpu and cuda: the kernel reads it into a group variable instead);
  - a scalar parameter the kernel assigns must be a group variable (below): a parameter is one value for the group;
  - group variables: the loop variable of such a loop, and locals whose every assignment is at group level with a
    uniform value (`s = get_local_size(0) // 2`, `s //= 2`): one value for the group, plain C++ locals;
  - every other local is per item: declared inside its rt_items block when only that block uses it (and it is
    assigned before it is read, so nothing flows into the block); recomputed at the top of each block that uses it
    when it is assigned once, at the top level, from ids, parameters and constants only (`lid = get_local_id(0)`:
    cheaper than memory); otherwise privatised (`rt_private<T> v;`, used as `v[rt_it]`): one value per item that
    survives from block to block;
  - extra barriers are harmless where every item reaches them: a block boundary is one, so a barrier statement
    just ends the run before it;
  - per-item code may not leave the group's control flow: a `return`, or a `break`/`continue` of a loop that
    contains a barrier, inside a block is refused (the kernel's work is guarded with an if instead).

Item loops (PoCL's implicit loop barriers, made explicit): a barrier-free `for` at group level whose iterations
every item steps alike becomes group code around an rt_items block of its body, so that the items' loop is the
innermost one (the loop the compiler vectorises) instead of each item running the whole loop alone:
    for i in range(start, stop, step): body   ->   for (g = base; g < stop; g += step) rt_items { i = g + off;
                                                                                  if (i < stop) body }
where stop is uniform, step is provably positive (a positive constant, get_local_size / get_num_groups /
get_global_size, products and sums of them, or a group variable assigned once from such a value) and start is
base + off with base uniform and off a sum of local ids (get_global_id(d) is get_group_id(d) * get_local_size(d)
+ get_local_id(d)), so off >= 0: an item's iterations are g + off for the group's g below stop - off, each in its
order, and the group loop (the item with off = 0 runs longest) covers them all. Only the order *between* items
changes: every item's iteration k runs before any item's iteration k + 1. That is one of the schedules CUDA and
OpenCL allow a barrier-free stretch of code (the items of a group are concurrent; an item that reads what another
item writes there without a barrier races), so a race-free kernel computes exactly what it computes flat, each
item's operations in its own order (its sums bit for bit). The loop is left to the items when its trip count is a
compile-time constant (the compiler unrolls it inside the item loop), when its body leaves the loop (break,
continue at its level, return), or when it prints or calls a device function (the order of the output is
observable).
"""

from __future__ import annotations

import ast
from typing import Any, Optional

from .builtins import _ATOMICS, _ID_BUILTINS, barrier

_UNIFORM_IDS = {"get_group_id", "get_local_size", "get_num_groups", "get_global_size"}
_POSITIVE_IDS = {"get_local_size", "get_num_groups", "get_global_size"}  # at least 1 in every launch
_SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda, ast.FunctionDef,
           ast.AsyncFunctionDef, ast.ClassDef)


def _walk(node: ast.AST):
    """ast.walk without entering nested scopes (the translator refuses them anyway)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        todo.extend(c for c in ast.iter_child_nodes(n) if not isinstance(c, _SCOPES))


class GroupPlan:
    """The group structure of one kernel body (tr: the _Translator; resolve: its non-raising resolver)."""

    def __init__(self, tr: Any, resolve: Any) -> None:
        self.tr, self.resolve = tr, resolve
        self._has: dict = {}
        self._segs: dict = {}
        body = tr.k.tree.body
        self.local_arrays = set(tr.local_arrays)
        self.stores: dict = {}  # local -> statements assigning it
        for st in _walk(tr.k.tree):
            if isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                    if isinstance(t, ast.Name):
                        self.stores.setdefault(t.id, []).append(st)
            elif isinstance(st, ast.For) and isinstance(st.target, ast.Name):
                self.stores.setdefault(st.target.id, []).append(st)
        self.group_vars = self._find_group_vars(body)
        self.private: set = set()
        self.block_vars: dict = {}  # id(run list) -> locals declared in that block
        self.remat: dict = {}  # local -> its one assignment, recomputed in each block that uses it
        self.block_remat: dict = {}  # id(run list) -> assignments recomputed at the top of the block, in order
        self.loop_var: dict = {}  # id(item loop body) -> its loop variable (assigned at the top of the block)
        self._items: dict = {}  # id(for statement) -> item_loop()'s answer
        self._check_and_place(body, None)
        self._check_parameters()

    # ---- syntax
    def is_barrier_call(self, n: ast.AST) -> bool:
        return isinstance(n, ast.Call) and self.resolve(n.func) is barrier

    def is_barrier_stmt(self, s: ast.stmt) -> bool:
        return isinstance(s, ast.Expr) and self.is_barrier_call(s.value)

    def has_barrier(self, s: ast.AST) -> bool:
        r = self._has.get(id(s))
        if r is None:
            r = self._has[id(s)] = any(self.is_barrier_call(n) for n in _walk(s))
        return r

    def control(self, s: ast.stmt) -> bool:
        """Whether s is group control flow: a for, while or if with a barrier inside."""
        return isinstance(s, (ast.For, ast.While, ast.If)) and self.has_barrier(s)

    # ---- uniformity
    def nonuniform(self, e: ast.AST, group: Optional[set] = None) -> Optional[str]:
        """What in expression e may differ between the items of a group (None: e is uniform)."""
        group = self.group_vars if group is None else group
        tr = self.tr
        for n in _walk(e):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                # A parameter is uniform while the kernel never assigns it (else only as a group variable).
                if (n.id in tr.params and n.id not in tr.k.assigned) or n.id in self.local_arrays or n.id in group:
                    continue
                if n.id in tr.k.assigned:
                    return f"the per-item value '{n.id}'"
            elif isinstance(n, ast.Call):
                fn = self.resolve(n.func)
                if fn in _ID_BUILTINS and _ID_BUILTINS[fn] not in _UNIFORM_IDS:
                    return f"runtime.{_ID_BUILTINS[fn]}()"
                if fn in _ATOMICS:
                    return f"runtime.{_ATOMICS[fn]}()"
                if fn is not None and type(fn).__name__ == "JitKernel":
                    return f"a call of device function '{fn.name}'"
        return None

    def _group_level(self, stmts: list, out: list, loops: list) -> None:
        """Collect the group-level simple assignments (out) and the group loops' variables (loops)."""
        for s in stmts:
            if self.control(s):
                if isinstance(s, ast.For) and isinstance(s.target, ast.Name):
                    loops.append(s)
                self._group_level(s.body, out, loops)
                self._group_level(s.orelse, out, loops)
            elif isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                t = s.targets[0] if isinstance(s, ast.Assign) else s.target
                if isinstance(t, ast.Name) and t.id not in self.local_arrays and (
                        not isinstance(s, ast.Assign) or len(s.targets) == 1):
                    out.append(s)

    def _find_group_vars(self, body: list) -> set:
        cands: list = []
        loops: list = []
        self._group_level(body, cands, loops)
        allowed = {id(s) for s in cands} | {id(s) for s in loops}
        group = {(s.targets[0] if isinstance(s, ast.Assign) else s.target).id for s in cands}
        group |= {s.target.id for s in loops}
        group = {v for v in group if all(id(st) in allowed for st in self.stores.get(v, []))}
        changed = True
        while changed:
            changed = False
            for s in cands:
                v = (s.targets[0] if isinstance(s, ast.Assign) else s.target).id
                if v in group and self.nonuniform(s.value, group) is not None:
                    group.discard(v)
                    changed = True
        for s in loops:
            if s.target.id not in group:
                raise self.tr.error(s, f"the variable '{s.target.id}' of a loop that contains runtime.barrier() is "
                                       f"also assigned per work-item (it must be the same for the whole group)")
        return group

    # ---- segments: how a group-level statement list is emitted
    def group_stmt(self, s: ast.stmt) -> bool:
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            t = s.targets[0] if isinstance(s, ast.Assign) else s.target
            return isinstance(t, ast.Name) and t.id in self.group_vars
        return isinstance(s, (ast.Break, ast.Continue, ast.Return))

    def segments(self, stmts: list) -> list:
        """[("run", statements) | ("control", statement) | ("group", statement)] in emission order. A run becomes
        one rt_items block; a group assignment moves ahead of the pending run when no statement of that run uses
        its variable and it reads no memory (so it sees and changes nothing the run does), else it ends the run."""
        seg = self._segs.get(id(stmts))
        if seg is not None:
            return seg
        seg, run = [], []

        def flush() -> None:
            if run:
                seg.append(("run", list(run)))
                run.clear()

        for s in stmts:
            if self.is_barrier_stmt(s) or isinstance(s, ast.Pass):
                flush() if not isinstance(s, ast.Pass) else None
            elif self.tr.is_local_array_stmt(s) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)):
                continue  # declared at the top of the kernel; docstrings
            elif self.control(s):
                flush()
                seg.append(("control", s))
            elif self.item_loop(s) is not None:
                flush()
                seg.append(("items", s))
            elif self.group_stmt(s):
                if run and not self._hoistable(s, run):
                    flush()
                seg.append(("group", s))
            else:
                run.append(s)
        flush()
        self._segs[id(stmts)] = seg
        return seg

    def _hoistable(self, s: ast.stmt, run: list) -> bool:
        if isinstance(s, (ast.Break, ast.Continue, ast.Return)):
            return False
        t = s.targets[0] if isinstance(s, ast.Assign) else s.target
        if any(isinstance(n, ast.Subscript) for n in _walk(s.value)):
            return False
        return not any(isinstance(n, ast.Name) and n.id == t.id for r in run for n in _walk(r))

    # ---- item loops (see the module docstring)
    def item_loop(self, s: ast.stmt) -> Optional[tuple]:
        """(base terms, offset dims) when `for` statement s is an item loop: start = sum of the uniform nodes in base
        terms (and get_group_id(d) * get_local_size(d) for ("group", d) terms) + sum of get_local_id(d) for d in
        offset dims; None otherwise."""
        if id(s) in self._items:
            return self._items[id(s)]
        r = self._items[id(s)] = self._item_loop(s)
        return r

    def _item_loop(self, s: ast.stmt) -> Optional[tuple]:
        if not (isinstance(s, ast.For) and isinstance(s.target, ast.Name) and not s.orelse and not self.has_barrier(s)
                and isinstance(s.iter, ast.Call) and self.resolve(s.iter.func) is range and not s.iter.keywords
                and 1 <= len(s.iter.args) <= 3):
            return None
        args = s.iter.args
        start = args[0] if len(args) > 1 else None
        stop = args[1] if len(args) > 1 else args[0]
        step = args[2] if len(args) == 3 else None
        if self.nonuniform(stop) is not None or (step is not None and not self._positive(step, 0)):
            return None
        terms: list = []
        offs: list = []
        if start is not None and not self._start_terms(start, terms, offs, 0):
            return None
        if not offs and self._constant(stop) and (start is None or self._constant(start)):
            return None  # a constant trip count: unrolled inside the items' loop
        for n in _walk(s):
            if isinstance(n, ast.Return):
                return None
            if isinstance(n, ast.Call):
                fn = self.resolve(n.func)
                if fn is print or (fn is not None and type(fn).__name__ == "JitKernel"):
                    return None
        if self._leaves(s.body):
            return None
        return terms, offs

    def _leaves(self, stmts: list) -> bool:
        """Whether a break or continue of the loop whose body is stmts occurs (not one of a nested loop)."""
        for st in stmts:
            if isinstance(st, (ast.Break, ast.Continue)):
                return True
            if isinstance(st, ast.If) and (self._leaves(st.body) or self._leaves(st.orelse)):
                return True
            if isinstance(st, (ast.For, ast.While)) and self._leaves(st.orelse):
                return True
        return False

    def _constant(self, e: ast.AST) -> bool:
        from ..errors import CompileError
        try:
            self.tr.const_int(e)
        except CompileError:
            return False
        return True

    def _id_call(self, e: ast.AST) -> Optional[tuple]:
        """(builtin name, dimension) of a call of an id built-in with a constant dimension, else None."""
        if not isinstance(e, ast.Call):
            return None
        fn = self.resolve(e.func)
        if fn not in _ID_BUILTINS:
            return None
        nodes = list(e.args) + [k.value for k in e.keywords]
        try:
            d = ast.literal_eval(nodes[0]) if nodes else 0
        except ValueError:
            return None
        return (_ID_BUILTINS[fn], d) if len(nodes) <= 1 and d in (0, 1, 2) and not isinstance(d, bool) else None

    def _single_value(self, name: str) -> Optional[ast.AST]:
        """The value of local `name` when its one assignment is a top-level statement of the body (so every read
        after it sees that value), else None."""
        sts = self.stores.get(name, [])
        if len(sts) != 1 or name in self.tr.params:
            return None
        st = sts[0]
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and st in self.tr.k.tree.body):
            return None
        return st.value

    def _positive(self, e: ast.AST, depth: int) -> bool:
        """Whether integer expression e is at least 1 in every launch."""
        if isinstance(e, ast.Constant):
            return type(e.value) is int and e.value > 0
        idc = self._id_call(e)
        if idc is not None:
            return idc[0] in _POSITIVE_IDS
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Mult)):
            return self._positive(e.left, depth) and self._positive(e.right, depth)
        if isinstance(e, ast.Name) and depth < 8 and e.id in self.group_vars:
            v = self._single_value(e.id)
            return v is not None and self._positive(v, depth + 1)
        return False

    def _start_terms(self, e: ast.AST, terms: list, offs: list, depth: int) -> bool:
        """Split start expression e into uniform terms and local-id offsets (appended to terms and offs)."""
        if self.nonuniform(e) is None:
            terms.append(e)
            return True
        idc = self._id_call(e)
        if idc is not None:
            if idc[0] == "get_global_id":
                terms.append(("group", idc[1]))
            elif idc[0] != "get_local_id":
                return False
            offs.append(idc[1])
            return True
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            return self._start_terms(e.left, terms, offs, depth) and self._start_terms(e.right, terms, offs, depth)
        if isinstance(e, ast.Name) and depth < 8:
            v = self._single_value(e.id)
            return v is not None and self._pure(v) and self._start_terms(v, terms, offs, depth + 1)
        return False

    def _pure(self, e: ast.AST) -> bool:
        """Whether e reads only ids, sizes, constants and parameters that are never assigned (its value, evaluated
        again anywhere in the kernel, is the same)."""
        for n in _walk(e):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                if n.id in self.tr.k.assigned or type(self.tr.params.get(n.id)).__name__ == "_Buf" or \
                        n.id in self.local_arrays:
                    return False
            elif isinstance(n, ast.Call):
                if self.resolve(n.func) not in _ID_BUILTINS:
                    return False
            elif isinstance(n, ast.Subscript):
                return False
        return True

    # ---- checks and the placement of per-item locals
    def _check_and_place(self, body: list, _: Any) -> None:
        uses: dict = {}  # per-item local -> ids of the runs using it
        runs: dict = {}  # id(run) -> (run, inside a group loop)

        def visit(stmts: list, in_loop: bool) -> None:
            for kind, s in self.segments(stmts):
                if kind == "run":
                    runs[id(s)] = (s, in_loop)
                    self._check_run(s)
                    for r in s:
                        for n in _walk(r):
                            if isinstance(n, ast.Name) and n.id in self.tr.k.assigned and n.id not in \
                                    self.group_vars and n.id not in self.local_arrays and n.id not in self.tr.params:
                                uses.setdefault(n.id, set()).add(id(s))
                elif kind == "control":
                    self._check_control(s)
                    loop = in_loop or isinstance(s, (ast.For, ast.While))
                    visit(s.body, loop)
                    visit(s.orelse, loop)
                elif kind == "items":  # its body is one block, run once per iteration, the loop variable set first
                    runs[id(s.body)] = (s.body, True)
                    self.loop_var[id(s.body)] = s.target.id
                    for n in [s.target] + [m for st in s.body for m in _walk(st)]:
                        if isinstance(n, ast.Name) and n.id in self.tr.k.assigned and n.id not in \
                                self.group_vars and n.id not in self.local_arrays and n.id not in self.tr.params:
                            uses.setdefault(n.id, set()).add(id(s.body))

        visit(body, False)
        self._find_remat(body, uses)
        for name, ids in uses.items():
            rid = next(iter(ids))
            run, in_loop = runs[rid]
            if name in self.remat:
                for r in ids:
                    self.block_vars.setdefault(r, []).append(name)
            elif len(ids) > 1 or (in_loop and self.loop_var.get(rid) != name and self._live_in(run, name)):
                self.private.add(name)
            else:
                self.block_vars.setdefault(rid, []).append(name)
        # Each block recomputes the rematerialised locals it uses (and those they use) that it does not assign.
        order = list(self.remat)
        for rid, (run, _) in runs.items():
            own = {id(st) for st in run}
            need: set = set()
            todo = [n for n in order if rid in uses.get(n, ())]
            while todo:
                n = todo.pop()
                if n not in need:
                    need.add(n)
                    todo += [m.id for m in _walk(self.remat[n].value) if isinstance(m, ast.Name) and m.id in self.remat]
            stmts = [self.remat[n] for n in order if n in need and id(self.remat[n]) not in own]
            if stmts:
                self.block_remat[rid] = stmts
                for st in stmts:
                    if st.targets[0].id not in self.block_vars.get(rid, []):
                        self.block_vars.setdefault(rid, []).append(st.targets[0].id)

    def _find_remat(self, body: list, uses: dict) -> None:
        """Locals assigned once, by a top-level statement, from ids, scalar parameters, constants and other such
        locals: cheaper to recompute in every block than to keep per item."""
        top = [st for kind, run in self.segments(body) if kind == "run" for st in run]
        for st in top:
            if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)):
                continue
            name = st.targets[0].id
            if name not in uses or len(uses[name]) < 2 or len(self.stores.get(name, [])) != 1:
                continue
            if self._recomputable(st.value):
                self.remat[name] = st

    def _recomputable(self, e: ast.AST) -> bool:
        """Whether e reads only ids, sizes, scalar parameters, constants and rematerialised locals."""
        for n in _walk(e):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                if n.id in self.tr.k.assigned and n.id not in self.remat:
                    return False
                if n.id in self.local_arrays or type(self.tr.params.get(n.id)).__name__ == "_Buf":
                    return False
            elif isinstance(n, ast.Call):
                if self.resolve(n.func) not in _ID_BUILTINS:
                    return False
            elif isinstance(n, ast.Subscript):
                return False
        return True

    def _live_in(self, run: list, name: str) -> bool:
        """Whether `name` may be read in `run` before the run assigns it (its value then comes from an earlier
        iteration of the enclosing group loop)."""
        from ..errors import CompileError
        done = (set(self.tr.k.assigned) - {name}) | set(self.tr.params)
        try:
            self.tr.definitely_assigned(run, done)
        except CompileError:
            return True
        return False

    def _check_parameters(self) -> None:
        """A scalar parameter the kernel assigns must be a group variable: on cpu a parameter is one value for the
        group (group code and every item's block share it), so a per-item store would leak between items."""
        for name in self.tr.params:
            if name in self.tr.k.assigned and name not in self.group_vars:
                st = self.stores.get(name, [self.tr.k.tree])[0]
                raise self.tr.error(st, f"parameter '{name}' is assigned a per-item value in a kernel that calls "
                                        f"runtime.barrier() (parameters are the same for the whole group: assign "
                                        f"the value to a new local instead)")

    def _memory_read(self, e: ast.AST) -> Optional[str]:
        """The first element read of memory (a buffer or local array) in e, as written, or None; a.shape[d] and
        a.strides[d] are not memory."""
        for n in _walk(e):
            if isinstance(n, ast.Subscript) and not (
                    isinstance(n.value, ast.Attribute) and n.value.attr in ("shape", "strides")):
                return ast.unparse(n)
        return None

    def _check_control(self, s: ast.stmt) -> None:
        kind = {ast.For: "for loop", ast.While: "while loop", ast.If: "if statement"}[type(s)]
        if isinstance(s, ast.For):
            what = "range"
            parts = s.iter.args if isinstance(s.iter, ast.Call) else [s.iter]
        else:
            what, parts = "condition", [s.test]
        for p in parts:
            why = self.nonuniform(p)
            if why is not None:
                raise self.tr.error(s, f"runtime.barrier() inside a {kind} whose {what} depends on {why}: a barrier "
                                       f"in divergent control flow (every work-item of the group must reach the same "
                                       f"barriers; make the {what} the same for the whole group)")
        for p in parts:
            read = self._memory_read(p)
            if read is not None:
                # cpu evaluates group code once, between blocks; the flat form (cuda) has every item evaluate it
                # at its own time, so a write by another item in the same stretch makes the items diverge.
                raise self.tr.error(s, f"runtime.barrier() inside a {kind} whose {what} reads memory ('{read}'): "
                                       f"the items of a group may read it at different times, before and after "
                                       f"another item writes it, and diverge (read it into a local at group level "
                                       f"between barriers, e.g. `runtime.barrier(); v = {read}; runtime.barrier()`, "
                                       f"and test the local)")

    def _check_run(self, run: list) -> None:
        def visit(n: ast.AST, loops: int) -> None:
            if isinstance(n, ast.Return):
                raise self.tr.error(n, "'return' in per-item code of a kernel that calls runtime.barrier() (every "
                                       "work-item must reach every barrier: guard the work with an if instead)")
            if isinstance(n, (ast.Break, ast.Continue)) and loops == 0:
                word = "break" if isinstance(n, ast.Break) else "continue"
                raise self.tr.error(n, f"'{word}' in per-item code, out of a loop that contains runtime.barrier() "
                                       f"(a barrier in divergent control flow: only group code may leave such a loop)")
            inner = loops + 1 if isinstance(n, (ast.For, ast.While)) else loops
            for c in ast.iter_child_nodes(n):
                if not isinstance(c, _SCOPES):
                    # a loop's else runs after the loop: not inside it
                    visit(c, loops if isinstance(n, (ast.For, ast.While)) and c in n.orelse else inner)

        for s in run:
            visit(s, 0)
