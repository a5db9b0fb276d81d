"""Exception classes of the runtime package: one per rtError_t, all subclasses of runtime.Error (a RuntimeError).

Every message starts with the C error name (e.g. "RT_ERROR_INVALID_VALUE: ...") followed by the detail:
the C library's rtGetLastErrorMessage() for failures inside it, or the package's own explanation for
failures it detects first (bad Python types, contradictory copy directions, unsupported kernel syntax).
"""

from __future__ import annotations

import builtins


class Error(RuntimeError):
    """Base class of every runtime error. `code` is the rtError_t value, `name` its C name."""

    code: int = 999
    name: str = "RT_ERROR_UNKNOWN"


class InvalidValueError(Error, ValueError):
    """An argument is wrong: type, range, size, a contradictory direction, freed memory."""

    code, name = 1, "RT_ERROR_INVALID_VALUE"


class InvalidDeviceError(Error, ValueError):
    """No device with that index or name."""

    code, name = 2, "RT_ERROR_INVALID_DEVICE"


class InvalidHandleError(Error):
    """A stream, event, module or kernel handle that is not alive (destroyed, unloaded, finalized)."""

    code, name = 3, "RT_ERROR_INVALID_HANDLE"


class OutOfMemoryError(Error, MemoryError):
    """The device (or host) cannot hold the allocation."""

    code, name = 4, "RT_ERROR_OUT_OF_MEMORY"


class NotReadyError(Error):
    """The queried work has not completed yet (e.g. elapsed_time on an unfinished event)."""

    code, name = 5, "RT_ERROR_NOT_READY"


class CompileError(Error):
    """A kernel did not compile: unsupported Python construct (file, line, construct) or compiler diagnostics."""

    code, name = 6, "RT_ERROR_COMPILE_FAILED"


class LaunchError(Error):
    """Queued work failed (kernel assertion/trap, a host function raised); reported by synchronize/query."""

    code, name = 7, "RT_ERROR_LAUNCH_FAILED"


class NotSupportedError(Error, NotImplementedError):
    """The device or the build cannot do this."""

    code, name = 8, "RT_ERROR_NOT_SUPPORTED"


class NotFoundError(Error, LookupError):
    """A named symbol (kernel) does not exist in the module."""

    code, name = 9, "RT_ERROR_NOT_FOUND"


class NotPermittedError(Error):
    """The call would wait from inside queue context: a host function (or a deferred release) that synchronizes
    the stream it runs on, or waits on work that cannot finish before it returns."""

    code, name = 10, "RT_ERROR_NOT_PERMITTED"


class StreamCaptureError(Error):
    """Base class of the errors of stream capture (codes 11..17): a call the capture forbids, a capture broken by an
    earlier error, a stream left unjoined, the default stream used during a capture, the capture ended on another
    thread, a dependency between two captures, a wait on an event recorded in a capture."""


class StreamCaptureUnsupportedError(StreamCaptureError):
    """The call is not allowed while a stream capture is under way (e.g. stream.synchronize() on a capturing
    stream, runtime.copy() or runtime.alloc() during a global-mode capture); it invalidates the capture it would
    have broken."""

    code, name = 11, "RT_ERROR_STREAM_CAPTURE_UNSUPPORTED"


class StreamCaptureInvalidatedError(StreamCaptureError):
    """The capture was invalidated by an earlier error; ending it says which call broke it."""

    code, name = 12, "RT_ERROR_STREAM_CAPTURE_INVALIDATED"


class StreamCaptureUnjoinedError(StreamCaptureError):
    """A stream that joined the capture (by waiting for an event recorded in it) was not joined back before the
    capture ended; the message names it."""

    code, name = 13, "RT_ERROR_STREAM_CAPTURE_UNJOINED"


class StreamCaptureImplicitError(StreamCaptureError):
    """The default stream was used while a stream was capturing."""

    code, name = 14, "RT_ERROR_STREAM_CAPTURE_IMPLICIT"


class StreamCaptureWrongThreadError(StreamCaptureError):
    """The capture was begun on another thread (end it there, or capture in mode "relaxed")."""

    code, name = 15, "RT_ERROR_STREAM_CAPTURE_WRONG_THREAD"


class StreamCaptureIsolationError(StreamCaptureError):
    """A dependency would cross from one capture into another."""

    code, name = 16, "RT_ERROR_STREAM_CAPTURE_ISOLATION"


class CapturedEventError(StreamCaptureError):
    """The event was last recorded in a capture: it stands for no work that could be waited for or queried."""

    code, name = 17, "RT_ERROR_CAPTURED_EVENT"


class GraphExecUpdateError(Error):
    """GraphExec.update refused the graph (the executable graph is unchanged). `result` says what differed:
    "error", "topology_changed", "node_type_changed", "function_changed", "parameters_changed" or
    "not_supported"; the message names the first node that differs."""

    code, name = 18, "RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE"
    result: str = "error"


class IllegalStateError(Error):
    """The object is not in a state that allows the call (e.g. beginning a capture on a stream already
    capturing)."""

    code, name = 19, "RT_ERROR_ILLEGAL_STATE"


class InvalidImageError(Error):
    """Encoded image data (JPEG, PNG) is corrupt, truncated or not of the expected format; the message names the
    image and what the decoder found."""

    code, name = 20, "RT_ERROR_INVALID_IMAGE"


class TimeoutError(Error, builtins.TimeoutError):
    """A wait ran out of time: Stream.synchronize(timeout=...) / Event.synchronize(timeout=...) (the work stays
    queued), or a collective's peer rank that did not arrive (RUNTIME_COMM_TIMEOUT). The message names what was
    waited for."""

    code, name = 21, "RT_ERROR_TIMEOUT"


# The name of code 21 before waits with a timeout existed (collectives only); the same class.
CommTimeoutError = TimeoutError


class NotInitializedError(Error):
    """The driver under a backend is not (or no longer) initialised (e.g. the CUDA driver shutting down)."""

    code, name = 22, "RT_ERROR_NOT_INITIALIZED"


class DeviceLostError(Error):
    """The device stopped working (a lost CUDA context, an uncorrectable ECC error): its work and memory are gone;
    every later call on it fails this way until runtime.device_reset() or a new process."""

    code, name = 23, "RT_ERROR_DEVICE_LOST"


class UnknownError(Error):
    """An internal failure of the runtime."""

    code, name = 999, "RT_ERROR_UNKNOWN"


ERROR_CLASSES = {
    cls.code: cls
    for cls in (InvalidValueError, InvalidDeviceError, InvalidHandleError, OutOfMemoryError, NotReadyError,
                CompileError, LaunchError, NotSupportedError, NotFoundError, NotPermittedError,
                StreamCaptureUnsupportedError, StreamCaptureInvalidatedError, StreamCaptureUnjoinedError,
                StreamCaptureImplicitError, StreamCaptureWrongThreadError, StreamCaptureIsolationError,
                CapturedEventError, GraphExecUpdateError, IllegalStateError, InvalidImageError, TimeoutError,
                NotInitializedError, DeviceLostError, UnknownError)
}


def make_error(cls: type, detail: str) -> Error:
    """An exception of class `cls` whose message is "<C error name>: <detail>", with `.code` set."""
    exc = cls(f"{cls.name}: {detail}")
    exc.code = cls.code
    return exc
