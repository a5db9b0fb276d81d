"""acl.mdl — model run instances built by stream capture (aclmdlRI*), over libascendcl.

pyACL's naming: aclmdlRICaptureBegin is acl.mdl.ri_capture_begin, and so on; handles are ints, outputs come first and
the error code last."""
import ctypes

from ._lib import POINTER, Functions, c_int, c_int32, c_void_p, handle
from ._constants import (ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, ACL_MODEL_RI_CAPTURE_MODE_RELAXED,  # noqa: F401
                         ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE,
                         ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED, ACL_MODEL_RI_CAPTURE_STATUS_NONE)

_P = POINTER
_f = Functions("libascendcl.so", {
    "aclmdlRICaptureBegin": (c_int, c_void_p, c_int),
    "aclmdlRICaptureEnd": (c_int, c_void_p, _P(c_void_p)),
    "aclmdlRICaptureGetInfo": (c_int, c_void_p, _P(c_int), _P(c_void_p)),
    "aclmdlRICaptureThreadExchangeMode": (c_int, _P(c_int)),
    "aclmdlRIExecuteAsync": (c_int, c_void_p, c_void_p),
    "aclmdlRIExecute": (c_int, c_void_p, c_int32),
    "aclmdlRIDestroy": (c_int, c_void_p),
})


def ri_capture_begin(stream, mode):
    return _f.aclmdlRICaptureBegin(stream, mode)


def ri_capture_end(stream):
    model_ri = c_void_p()
    ret = _f.aclmdlRICaptureEnd(stream, ctypes.byref(model_ri))
    return handle(model_ri.value), ret


def ri_capture_get_info(stream):
    status, model_ri = c_int(0), c_void_p()
    ret = _f.aclmdlRICaptureGetInfo(stream, ctypes.byref(status), ctypes.byref(model_ri))
    return status.value, handle(model_ri.value), ret


def ri_capture_thread_exchange_mode(mode):
    """Sets this thread's capture mode to `mode`; returns the mode it had, then the error code."""
    value = c_int(mode)
    ret = _f.aclmdlRICaptureThreadExchangeMode(ctypes.byref(value))
    return value.value, ret


def ri_execute_async(model_ri, stream):
    return _f.aclmdlRIExecuteAsync(model_ri, stream)


def ri_execute(model_ri, timeout):
    return _f.aclmdlRIExecute(model_ri, timeout)


def ri_destroy(model_ri):
    return _f.aclmdlRIDestroy(model_ri)
