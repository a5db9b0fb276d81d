"""Kernels written in the C++ kernel dialect: runtime.Module(source) compiles them, module.get_function(name)
returns a launchable runtime.Function (like CuPy's RawModule/RawKernel)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _core
from .core import DeviceMemory, Stream, _device_obj, _MemExtra, make_error
from .errors import InvalidValueError
from .launch import call, plan, shape


class Module:
    """A compiled kernel-dialect source (include/runtime/kernel.h is prepended) on the current device.
    A compile error raises CompileError with the compiler's diagnostics."""

    def __init__(self, source: str, options: Optional[str] = None) -> None:
        if not isinstance(source, str):
            raise make_error(InvalidValueError, f"Module: source must be a str, got {type(source).__name__}")
        self._handle = 0
        self._handle = _core.module_load_source(source, options)
        self._functions: dict = {}
        self._device = _core.get_device()

    @classmethod
    def from_file(cls, path: str) -> "Module":
        """Load a precompiled module (runtime-compile's output)."""
        m = cls.__new__(cls)
        m._handle = 0
        m._handle = _core.module_load_file(str(path))
        m._functions = {}
        m._device = _core.get_device()
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

    def get_global(self, name: str, dtype: Any = None) -> DeviceMemory:
        """The module-scope variable `name` (`RT_GLOBAL type name = ...;` in the source) as DeviceMemory over its
        bytes: copies to and from it reach the variable the kernels use (rtModuleGetGlobal). With `dtype`, typed
        memory of nbytes // itemsize elements; without, untyped (a first typed copy gives it its dtype and shape).
        It keeps the module loaded; freeing it only lets go of it. An unknown name raises InvalidValueError listing
        the module's globals."""
        ptr, nbytes = _core.module_get_global(self.handle, str(name))
        dt = None if dtype is None else np.dtype(dtype)
        if dt is not None and nbytes % dt.itemsize:
            raise make_error(InvalidValueError, f"get_global: '{name}' has {nbytes} bytes, not a whole number of "
                                                f"{dt} elements ({dt.itemsize} bytes)")
        ext = _MemExtra()
        ext.imported = _ModuleHold(self)
        return DeviceMemory(ptr, nbytes, _device_obj(self._device), dt, ext,
                            None if dt is None else (nbytes // dt.itemsize,))

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


class _ModuleHold:
    """What a module global's DeviceMemory holds: its module, kept loaded until the memory is let go of."""

    __slots__ = ("module",)

    def __init__(self, module: Module) -> None:
        self.module: Optional[Module] = module

    def release(self) -> None:
        self.module = None


class Function:
    """A kernel of a Module. Arguments: DeviceMemory (a pointer), NumPy scalars (their exact type), Python ints
    (an integer of the parameter's size) and floats (float for 4-byte, double for 8-byte parameters); a parameter
    of more than 8 bytes (a struct, rt_float4) takes a NumPy scalar of its size (e.g. a structured np.void) or bytes.
    A launch runs exactly the items of its global size (on every backend) and, unlike a @runtime.jit kernel's,
    passes no hidden sizes. Arguments are packed by the packer @runtime.jit kernels use (runtime/launch.py)."""

    def __init__(self, module: Module, name: str, handle: int) -> None:
        self.module, self.name, self.handle = module, name, handle
        self.param_sizes = _core.function_get_param_info(handle)
        n = len(self.param_sizes)
        # Untyped parameters ('n'): the kernel reports sizes only.
        self._plan = plan(handle, name, "n" * n, [None] * n, self.param_sizes, [""] * n, 0)

    def _launch(self, stream: Stream, args: tuple, global_size: Any, local_size: Any) -> None:
        glob, local, _ = shape(self.name, args, global_size, local_size)
        # The module stays alive with the arguments until the launch has run: its code must outlive the launch.
        self._plan.launch_shaped(args, stream.handle, glob[0], glob[1], glob[2], local[0], local[1], local[2], True,
                                 self.module)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """f(*args, global_size=None, local_size=None, stream=None): a launch on `stream` or the current stream."""
        call(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<runtime.Function {self.name} ({len(self.param_sizes)} parameters)>"
