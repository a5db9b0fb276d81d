"""Targets: what the translation of a @runtime.jit kernel needs to know of the backend it is generated for. The
generic target (cuda, and any backend without a target of its own) adds nothing to the kernel; the cpu target
(cpu_target.py) adds the staged twins. A target is chosen by the backend's name, for the device compiled for."""

from __future__ import annotations

from typing import Any


class Target:
    """The generic target: the kernel alone."""

    backend = "generic"

    def extra_code(self, tr: Any) -> list:
        """C++ lines the target adds after the kernel `tr` (a _Translator) has emitted; default: none."""
        return []

    def __repr__(self) -> str:
        return f"<runtime.jit target {self.backend}>"


_GENERIC = Target()
_TARGETS: dict = {}  # backend name -> Target


def target_for(backend: str) -> Target:
    """The target for kernels of the backend named `backend` ("cpu", "cuda", ...)."""
    t = _TARGETS.get(backend)
    if t is None:
        if backend == "cpu":
            from .cpu_target import CpuTarget  # the staging analysis is loaded only where a cpu device compiles
            t = CpuTarget()
        else:
            t = _GENERIC
        _TARGETS[backend] = t
    return t


def device_target(device: int) -> Target:
    """The target for kernels compiled for device index `device`."""
    from ..core import get_device_properties
    return target_for(get_device_properties(device).backend)
