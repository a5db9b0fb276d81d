"""acl.util — pyACL's helpers: addresses of Python buffers, views of raw memory, and threads for report loops."""
import ctypes
import threading
import warnings

from ._constants import ACL_ERROR_INVALID_PARAM, ACL_SUCCESS


def bytes_to_ptr(data):
    """The address of `data`'s own buffer (a bytes or bytearray object, not a copy): what acl.rt.memcpy reads from or,
    as in pyACL, writes into. Valid while `data` lives."""
    if isinstance(data, bytes):
        return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0
    if isinstance(data, bytearray):
        if not data:
            return 0
        return ctypes.addressof((ctypes.c_char * len(data)).from_buffer(data))
    raise TypeError(f"acl.util.bytes_to_ptr: expected bytes or bytearray, got {type(data).__name__}")


def ptr_to_bytes(ptr, size):
    """A bytes object holding a copy of the `size` bytes at host address `ptr`."""
    if size < 0:
        raise ValueError(f"acl.util.ptr_to_bytes: size {size} is negative")
    if size == 0:
        return b""
    if not ptr:
        raise ValueError(f"acl.util.ptr_to_bytes: NULL address with size {size}")
    return ctypes.string_at(ptr, size)


def numpy_to_ptr(array):
    """The address of a numpy array's data (valid while the array lives). A non-contiguous array is refused with a
    warning, as pyACL does, since copies read contiguous bytes: pass np.ascontiguousarray(array)."""
    interface = array.__array_interface__
    if not array.flags["C_CONTIGUOUS"]:
        warnings.warn("acl.util.numpy_to_ptr: the array is not C-contiguous; copies from its address read other "
                      "bytes than its elements (use numpy.ascontiguousarray)", stacklevel=2)
    return interface["data"][0]


_npy_types = None


def _dtype_of(npy_type):
    global _npy_types
    import numpy as np
    if _npy_types is None:
        _npy_types = {np.dtype(t).num: np.dtype(t) for t in set(np.sctypeDict.values())}
    try:
        return _npy_types[npy_type]
    except KeyError:
        raise ValueError(f"acl.util.ptr_to_numpy: {npy_type} is not a NumPy type number "
                         f"(NPY_INT32 is 5, NPY_FLOAT32 11, NPY_FLOAT16 23)") from None


def ptr_to_numpy(ptr, shape, npy_type):
    """A numpy array of `shape` and NumPy type number `npy_type` viewing the host memory at `ptr` (no copy: writes
    through the array reach that memory; valid while the memory is)."""
    import numpy as np
    dtype = _dtype_of(npy_type)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
    count = 1
    for extent in shape:
        if extent < 0:
            raise ValueError(f"acl.util.ptr_to_numpy: negative extent in shape {shape}")
        count *= extent
    nbytes = count * dtype.itemsize
    if nbytes == 0:
        return np.empty(shape, dtype)
    if not ptr:
        raise ValueError(f"acl.util.ptr_to_numpy: NULL address for {nbytes} bytes")
    buffer = (ctypes.c_char * nbytes).from_address(ptr)
    return np.frombuffer(buffer, dtype=dtype, count=count).reshape(shape)


# ---- threads: start_thread runs fn(args_list) on a new thread; its id is what acl.rt.subscribe_report takes.
_threads = {}
_threads_lock = threading.Lock()


def start_thread(fn, args_list):
    """Starts a thread running `fn(args_list)`; `thread_id, ret`. The id is the thread's pthread id
    (threading.Thread.ident), the id AscendCL's aclrtSubscribeReport takes. The new thread has no current context:
    set one with acl.rt.set_context, as in pyACL."""
    if not callable(fn):
        raise TypeError(f"acl.util.start_thread: expected a callable, got {type(fn).__name__}")
    thread = threading.Thread(target=fn, args=(args_list,), daemon=True, name="acl.util.start_thread")
    thread.start()
    with _threads_lock:
        _threads[thread.ident] = thread
    return thread.ident, ACL_SUCCESS


def stop_thread(thread_id):
    """Waits for a thread of start_thread to return (its function must end: tell it to, first) and forgets it.
    An id start_thread did not give: ACL_ERROR_INVALID_PARAM."""
    with _threads_lock:
        thread = _threads.pop(thread_id, None)
    if thread is None:
        return ACL_ERROR_INVALID_PARAM
    thread.join()
    return ACL_SUCCESS
