"""Kernel value types: the dtypes a kernel can use and their C types, NumPy 2 (NEP 50) promotion of strong and weak
scalars, and the types a signature is made of (buffer parameters, scalar parameters, the launch's dimensions)."""

from __future__ import annotations

from typing import Any

import numpy as np

_ATOMIC_DTYPES = {np.dtype(t) for t in (np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64)}
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


def _wrap_c(t: "Ty") -> str:
    """The unsigned C type integer arithmetic on t wraps in."""
    return "uint64_t" if t.dt.itemsize == 8 else "uint32_t"


def _plain_wraps(t: "Ty") -> bool:
    """Whether C's own +, -, * on t already wrap like NumPy (unsigned types C does not promote to int)."""
    return t.kind == "u" and t.dt.itemsize >= 4


class _Sig:
    """What a kernel is specialised on: per parameter a _Buf or a Ty, plus the launch's number of dimensions."""

    def __init__(self, params: list, ndim: int) -> None:
        self.params, self.ndim = params, ndim


def _sig_str(t: Any) -> str:
    return f"{t.dt}[]" if isinstance(t, _Buf) else repr(t)
