"""Kernels written in the C++ kernel dialect: runtime.Module(source) compiles them, module.get_function(name)
returns a launchable runtime.Function (like CuPy's RawModule/RawKernel)."""

from __future__ import annotations

import struct
from typing import Any, Optional

import numpy as np

from . import _core
from .core import DeviceMemory, Stream, make_error
from .errors import InvalidValueError
from .jit import _shape


class Module:
    """A compiled kernel-dialect source (include/runtime/kernel.h is prepended) on the current device.
    A compile error raises CompileError with the compiler's diagnostics."""

    def __init__(self, source: str, options: Optional[str] = None) -> None:
        if not isinstance(source, str):
            raise make_error(InvalidValueError, f"Module: source must be a str, got {type(source).__name__}")
        self._handle = 0
        self._handle = _core.module_load_source(source, options)
        self._functions: dict = {}

    @classmethod
    def from_file(cls, path: str) -> "Module":
        """Load a precompiled module (runtime-compile's output)."""
        m = cls.__new__(cls)
        m._handle = 0
        m._handle = _core.module_load_file(str(path))
        m._functions = {}
        return m

    @property
    def handle(self) -> int:
        if not self._handle:
            raise make_error(InvalidValueError, "the module was unloaded")
        return self._handle

    def get_function(self, name: str) -> "Function":
        """The RT_KERNEL function `name` (NotFoundError lists the module's kernels)."""
        f = self._functions.get(name)
        if f is None:
            f = self._functions[name] = Function(self, name, _core.module_get_function(self.handle, name))
        return f

    def unload(self) -> None:
        """Release the module; launches already queued still complete."""
        h, self._handle = self._handle, 0
        if h:
            _core.module_unload(h)

    def __del__(self) -> None:
        try:
            self.unload()
        except Exception:
            pass


class Function:
    """A kernel of a Module. Arguments: DeviceMemory (a pointer), NumPy scalars (their exact type), Python ints
    (an integer of the parameter's size) and floats (float for 4-byte, double for 8-byte parameters).
    Unlike @runtime.jit kernels there is no hidden bound: the kernel must check its ids itself."""

    def __init__(self, module: Module, name: str, handle: int) -> None:
        self.module, self.name, self.handle = module, name, handle
        self.param_sizes = _core.function_get_param_info(handle)
        self._sizes = struct.pack(f"@{len(self.param_sizes)}N", *self.param_sizes)

    def _pack(self, args: tuple) -> bytes:
        if len(args) != len(self.param_sizes):
            raise make_error(InvalidValueError, f"kernel '{self.name}' takes {len(self.param_sizes)} argument(s), "
                                                f"got {len(args)}")
        out = bytearray()
        for i, (a, size) in enumerate(zip(args, self.param_sizes)):
            try:
                if isinstance(a, DeviceMemory):
                    b = struct.pack("<Q", a.ptr)
                elif isinstance(a, np.generic):
                    b = a.tobytes()
                elif isinstance(a, bool):
                    b = struct.pack("<?", a)
                elif isinstance(a, int):
                    b = a.to_bytes(size, "little", signed=a < 0)
                elif isinstance(a, float) and size in (4, 8):
                    b = struct.pack("<f" if size == 4 else "<d", a)
                else:
                    raise TypeError(f"type {type(a).__name__}")
            except (OverflowError, TypeError, struct.error) as e:
                raise make_error(InvalidValueError, f"kernel '{self.name}' argument {i}: cannot pass {a!r} as a "
                                                    f"{size}-byte parameter ({e})") from None
            if len(b) != size:
                raise make_error(InvalidValueError, f"kernel '{self.name}' argument {i} is {len(b)} bytes but the "
                                                    f"parameter has {size}")
            out += b.ljust(8, b"\0")
        return bytes(out)

    def _launch(self, stream: Stream, args: tuple, global_size: Any, local_size: Any) -> None:
        glob, local, _ = _shape(self.name, args, global_size, local_size)
        if 0 in glob:
            return
        packed = self._pack(args)
        _core.launch_kernel(self.handle, glob[0], glob[1], glob[2], local[0], local[1], local[2], packed,
                            self._sizes, stream.handle)
        bufs = [a for a in args if isinstance(a, DeviceMemory)]
        stream._keep(bufs + [self.module])  # the module's code must outlive the launch

    def __repr__(self) -> str:
        return f"<runtime.Function {self.name} ({len(self.param_sizes)} parameters)>"
