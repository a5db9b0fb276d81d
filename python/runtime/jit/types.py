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
    np.dtype(np.float16): "float",
}
# 16-bit floats: stored as the dialect's storage types (rt_half, rt_bfloat16: buffers and local arrays), computed in
# float32 (their values in the generated code are floats). bfloat16 is ml_dtypes' where that package is installed.
_STORAGE = {np.dtype(np.float16): "rt_half"}
try:
    import ml_dtypes as _ml_dtypes
except ImportError:  # bfloat16 needs ml_dtypes (a NumPy dtype of its own)
    _ml_dtypes = None
else:
    _BF16 = np.dtype(_ml_dtypes.bfloat16)
    _CTYPES[_BF16] = "float"
    _STORAGE[_BF16] = "rt_bfloat16"
# Complex types have no kernel-dialect type.
_SUPPORTED_DTYPES = ", ".join(str(d) for d in _CTYPES)


def _storage_c(dt: np.dtype) -> str:
    """The C type an element of dtype dt is stored as in memory (buffers, local arrays)."""
    return _STORAGE.get(dt) or _CTYPES[dt]


def _kind(dt: np.dtype) -> str:
    """NumPy's kind letter, with ml_dtypes' bfloat16 (kind 'V') a float."""
    return "f" if dt in _STORAGE else dt.kind
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
        return _kind(self.dt)  # 'b', 'i', 'u', 'f'

    @property
    def storage(self) -> str:
        """The C type of an element of this type in memory (rt_half for float16; otherwise its C type)."""
        return _storage_c(self.dt)

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
    """A buffer parameter's type: element dtype; for a shaped buffer (one the kernel indexes by its dimensions,
    a[y, x], or whose shape it reads) also its number of dimensions and whether it is C-contiguous: its shape and
    strides are then hidden parameters. An unshaped buffer (ndim None) is indexed flat, a[i], whatever its shape."""

    __slots__ = ("dt", "ndim", "contig", "checked")

    def __init__(self, dt: np.dtype, ndim: Any = None, contig: bool = True, checked: bool = False) -> None:
        self.dt, self.ndim, self.contig = np.dtype(dt), ndim, contig
        self.checked = checked  # checked mode (boundscheck): a flat buffer's element count is a hidden parameter

    @property
    def elem(self) -> Ty:
        return Ty(self.dt)

    @property
    def shaped(self) -> bool:
        return self.ndim is not None

    def key(self) -> tuple:
        return ("buf", self.dt, self.ndim, self.contig, self.checked)

    def hidden(self) -> list:
        """(suffix, what) of the hidden parameters: shape per dimension, then strides in elements (the last one
        left out when contiguous: it is 1); a flat buffer in checked mode: its element count."""
        if self.ndim is None:
            return [("n", "size")] if self.checked else []
        out = [(f"shape{d}", f"shape[{d}]") for d in range(self.ndim)]
        n = self.ndim - 1 if self.contig else self.ndim
        return out + [(f"stride{d}", f"strides[{d}]") for d in range(n)]


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
    if isinstance(t, _Buf):
        if t.ndim is None:
            return f"{t.dt}[]"
        return f"{t.dt}[{', '.join(':' * t.ndim)}{'' if t.contig else ' strided'}]"
    return repr(t)
