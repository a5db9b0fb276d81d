"""Finding and binding this runtime's AscendCL libraries (libascendcl.so, libacl_dvpp.so) with ctypes.

The module is pure Python so that one copy works in both places it is installed: inside the wheel (site-packages/acl/,
the libraries beside it) and inside the CANN-shaped install tree (<toolkit>/python/site-packages/acl/, the libraries in
<toolkit>/lib64, reached through set_env.sh's PYTHONPATH as pyACL is)."""
import ctypes
import os
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates(name):
    """Where `name` is looked for, in order: beside this package (the wheel), the install tree's lib64 (this package
    at <toolkit>/python/site-packages/acl), $ASCEND_TOOLKIT_HOME/lib64, then the loader's own search."""
    yield os.path.join(_HERE, name)
    yield os.path.normpath(os.path.join(_HERE, "..", "..", "..", "lib64", name))
    home = os.environ.get("ASCEND_TOOLKIT_HOME")
    if home:
        yield os.path.join(home, "lib64", name)
    yield name


def _open(name):
    tried = []
    for path in _candidates(name):
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (absent)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError(f"acl: cannot load {name}; tried: " + "; ".join(tried))


_lock = threading.Lock()
_libs = {}


def library(name):
    """The loaded library `name` ("libascendcl.so", "libacl_dvpp.so"), opened on first use."""
    with _lock:
        lib = _libs.get(name)
        if lib is None:
            lib = _libs[name] = _open(name)
        return lib


c_int, c_uint32, c_int32, c_uint64, c_size_t, c_float = (ctypes.c_int, ctypes.c_uint32, ctypes.c_int32,
                                                         ctypes.c_uint64, ctypes.c_size_t, ctypes.c_float)
c_void_p, c_char_p, POINTER = ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER


def bind(lib_name, name, restype, *argtypes):
    """The C function `name` of library `lib_name` with its prototype set (aclError results are ints)."""
    fn = getattr(library(lib_name), name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


class Functions:
    """Lazily bound C functions of one library, declared as name -> (restype, argtypes...)."""

    def __init__(self, lib_name, prototypes):
        self._lib_name = lib_name
        self._prototypes = prototypes
        self._bound = {}

    def __getattr__(self, name):
        try:
            proto = self._prototypes[name]
        except KeyError:
            raise AttributeError(name) from None
        fn = self._bound.get(name)
        if fn is None:
            fn = self._bound[name] = bind(self._lib_name, name, *proto)
        return fn


def handle(value):
    """A C handle or address as pyACL gives it: an int, 0 for NULL."""
    return value or 0
