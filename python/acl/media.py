"""acl.media — pyACL's DVPP memory functions over libacl_dvpp (acldvppMalloc / acldvppFree)."""
import ctypes

from ._lib import POINTER, Functions, c_int, c_size_t, c_void_p, handle

_f = Functions("libacl_dvpp.so", {
    "acldvppMalloc": (c_int, POINTER(c_void_p), c_size_t),
    "acldvppFree": (c_int, c_void_p),
})


def dvpp_malloc(size):
    """Device memory that DVPP's operations accept (their alignment and padding); `dev_ptr, ret`."""
    ptr = c_void_p()
    ret = _f.acldvppMalloc(ctypes.byref(ptr), size)
    return handle(ptr.value), ret


def dvpp_free(dev_ptr):
    return _f.acldvppFree(dev_ptr)
