"""acl — a pyACL-compatible module over this runtime's AscendCL face (libascendcl, libacl_dvpp).

Programs written for pyACL run unchanged: `acl.init()`, `acl.rt.set_device(0)`, `ptr, ret = acl.rt.malloc(n, policy)`,
`acl.util.bytes_to_ptr(b)`, `acl.media.dvpp_malloc(n)`, ... Handles and addresses are ints, results come before the
error code, callbacks receive the object given at launch. AscendCL device i is the runtime's device i (the cpu device
by default, a GPU with RUNTIME_BACKEND=cuda). docs/ascendcl.md lists what is supported.

It is a thin ctypes layer, not a compiled extension: the same files serve the wheel and the CANN-shaped install tree
(<toolkit>/python/site-packages, on PYTHONPATH after set_env.sh), and each call is the C call itself."""
import ctypes

from ._constants import *  # noqa: F401,F403  (the ACL_* constants)
from ._lib import Functions, c_char_p, c_int, POINTER, c_int32
from . import mdl, media, rt, util  # noqa: F401

_f = Functions("libascendcl.so", {
    "aclInit": (c_int, c_char_p),
    "aclFinalize": (c_int,),
    "aclrtGetVersion": (c_int, POINTER(c_int32), POINTER(c_int32), POINTER(c_int32)),
    "aclGetRecentErrMsg": (c_char_p,),
    "aclrtGetSocName": (c_char_p,),
})


def init(config_path=None):
    """Starts AscendCL; `config_path` is None, "" or a JSON configuration file. Returns the error code."""
    if config_path is not None and not isinstance(config_path, str):
        raise TypeError(f"acl.init: config_path must be a str or None, not {type(config_path).__name__}")
    return _f.aclInit(None if config_path is None else config_path.encode())


def finalize():
    return _f.aclFinalize()


def get_version():
    """`major, minor, patch, ret` of the AscendCL face."""
    major, minor, patch = c_int32(0), c_int32(0), c_int32(0)
    ret = _f.aclrtGetVersion(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    return major.value, minor.value, patch.value, ret


def get_recent_err_msg():
    """The messages of this thread's failed calls since the last time, newest first; None when there are none."""
    msg = _f.aclGetRecentErrMsg()
    return None if msg is None else msg.decode(errors="replace")


def get_soc_name():
    name = _f.aclrtGetSocName()
    return None if name is None else name.decode(errors="replace")
