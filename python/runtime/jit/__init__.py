"""@runtime.jit: translates a Python function's AST into kernel-dialect C++, one source per argument signature and
target, compiled once per signature and device through rtModuleLoadSource; plus the reference mode that runs the
body as plain Python over every work-item (RUNTIME_JIT_INTERPRET=1). docs/jit.md is the user's reference: the
subset (types, constructs, built-ins, semantics, errors) with runnable examples, then work-groups, device functions,
shaped arrays, index checks, print and 16-bit floats; this docstring summarises the same rules for the code.

The package, by responsibility:
  builtins.py    the work-item built-ins and atomics as Python functions (kernels call them; the reference runs them)
  types.py       value types: dtypes and their C types, NumPy 2 promotion, signature types
  translate.py   the translator: the AST → kernel-dialect C++ for one signature and target
  target.py      targets: what a backend adds to the generated kernel (the generic one: nothing)
  cpu_target.py  the cpu target: the staging analysis and the staged twins (used for cpu devices only)
  launch.py      compiled signatures, their argument layout, and the launch path (runtime/launch.py packs)
  groups.py      kernels with barriers: group code and per-item code, privatisation, the divergence checks
  reference.py   the reference mode (a group's items step from barrier to barrier)
  kernel.py      JitKernel (source, signatures, constants, caches) and the @jit decorator

Typing follows NumPy 2 (NEP 50) so compiled kernels agree with the reference mode: buffer elements and NumPy
scalars are "strong" typed; Python ints/floats (arguments, literals, ids, range variables) are "weak" — int64 /
float64 that adopt the type of a strong operand of the same kind. Locals take the join of every value assigned
to them. math functions keep float32 when given a float32 operand (the reference computes in double: results
may differ by rounding). Integer arithmetic is NumPy's on every backend: +, -, *, negation, abs and ** wrap
(two's complement, spelled out in the generated code, and cpu modules are built with -fwrapv); // and % follow
Python's floor semantics, x // 0 and x % 0 give 0 as in NumPy (without NumPy's warning), MIN // -1 wraps to MIN;
a shift count below 0 or at least the width gives 0 (>> of a negative value: -1). float16 (and ml_dtypes' bfloat16
where installed) is stored as rt_half (rt_bfloat16) and computed in float32: a float16 value keeps its NumPy type
(float16 + float16 is float16) but its arithmetic rounds only when stored or converted (np.float16(x)), so results
may differ from NumPy's by the float16 rounding of intermediate steps. A local read where it is not assigned on
every path (Python's UnboundLocalError) is refused at compile time.

Work-groups (groups.py): runtime.barrier() as a statement, and `name = runtime.local_array(shape, dtype)` at the top
level of the kernel body (shape: constant ints), shared by the items of a group; control flow around a barrier must
be uniform (refused otherwise: a barrier in divergent control flow), and a kernel with barriers is launched over
whole groups. On cpu the kernel is generated in the dialect's group form (rt_items blocks, rt_private), elsewhere
flat (rt_barrier). Device functions: a kernel may call other @runtime.jit functions, specialised per argument types
and emitted once per specialisation as RT_DEVICE functions returning a value (or none); recursion is refused, and so
are barriers and local arrays in them. Shaped arrays: a buffer indexed a[y, x] (or whose shape, strides, ndim or size
the body reads, itself or through a device function) is specialised on its rank and contiguity and gets its shape
and strides as hidden int64 parameters after the kernel's own; other buffers are indexed flat (a[i]) whatever their
shape, as before. Indices are not checked in compiled kernels (a constant negative index is refused; the reference
mode raises where NumPy does, and wraps negative indices as NumPy does). print(...) is rt_printf: ints in decimal,
floats as %g, bools as True/False, constant strings as themselves, sep= and end= constant strings; the reference mode
prints the same text. Globals and closure variables holding numbers are compiled in as constants and their current values
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
