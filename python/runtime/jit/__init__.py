"""@runtime.jit: translates a Python function's AST into kernel-dialect C++ (SPEC §4), one source per argument
signature and target, compiled once per signature and device through rtModuleLoadSource; plus the reference mode
that runs the body as plain Python over every work-item (RUNTIME_JIT_INTERPRET=1).

The package, by responsibility:
  builtins.py    the work-item built-ins and atomics as Python functions (kernels call them; the reference runs them)
  types.py       value types: dtypes and their C types, NumPy 2 promotion, signature types
  translate.py   the translator: the AST → kernel-dialect C++ for one signature and target
  target.py      targets: what a backend adds to the generated kernel (the generic one: nothing)
  cpu_target.py  the cpu target: the staging analysis and the staged twins (used for cpu devices only)
  launch.py      compiled signatures, their argument layout, and the launch path (runtime/launch.py packs)
  reference.py   the reference mode
  kernel.py      JitKernel (source, signatures, constants, caches) and the @jit decorator

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

from ..launch import shape as _shape
from .builtins import (atomic_add, atomic_cas, atomic_exchange, atomic_max, atomic_min, barrier, local_array, get_global_id,
                       get_global_size, get_group_id, get_local_id, get_local_size, get_num_groups)
from .kernel import JitKernel, jit
from .launch import _Compiled
from .reference import _run_reference, interpret_enabled
from .target import Target, target_for
from .translate import _Translator
from .types import BOOL, WEAK_FLOAT, WEAK_INT, Ty, promote

__all__ = [
    "jit", "JitKernel", "interpret_enabled", "Target", "target_for", "Ty", "promote", "WEAK_INT", "WEAK_FLOAT",
    "BOOL", "get_global_id", "get_local_id", "get_group_id", "get_global_size", "get_local_size", "get_num_groups",
    "atomic_add", "atomic_min", "atomic_max", "atomic_cas", "atomic_exchange", "barrier", "local_array",
]
