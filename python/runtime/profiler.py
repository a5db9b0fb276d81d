"""runtime.profile: writes a timeline trace of every stream (Chrome trace-event JSON; docs/observability.md, "Trace")."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Union

from . import _core

PROFILER_DEFAULT = _core.PROFILER_DEFAULT
PROFILER_NO_API_CALLS = _core.PROFILER_NO_API_CALLS
PROFILER_NO_MEMORY = _core.PROFILER_NO_MEMORY


@contextlib.contextmanager
def profile(path: Union[str, "os.PathLike[str]"], flags: int = PROFILER_DEFAULT) -> Iterator[str]:
    """Writes a trace of every operation of every device to `path` while the block runs (rtProfilerStart /
    rtProfilerStop); yields the path. `flags`: PROFILER_DEFAULT, or PROFILER_NO_API_CALLS | PROFILER_NO_MEMORY.
    Operations still queued when the block ends are left out: synchronize inside the block to see them.

    Raises InvalidValueError (empty path, unknown flag bits), IllegalStateError (a trace is already being written),
    UnknownError (the file cannot be created)."""
    if not isinstance(flags, int) or isinstance(flags, bool):
        raise TypeError(f"flags must be an int (PROFILER_* constants), not {type(flags).__name__}")
    if flags < 0 or flags > 0xFFFFFFFF:
        raise _invalid_flags(flags)
    text = os.fspath(path)
    _core.profiler_start(text, flags)
    try:
        yield text
    finally:
        _core.profiler_stop()


def _invalid_flags(flags: int) -> Exception:
    from .errors import InvalidValueError
    return InvalidValueError(f"flags {flags} is out of range (expected PROFILER_DEFAULT or a combination of "
                             "PROFILER_NO_API_CALLS and PROFILER_NO_MEMORY)")


__all__ = ["profile", "PROFILER_DEFAULT", "PROFILER_NO_API_CALLS", "PROFILER_NO_MEMORY"]
