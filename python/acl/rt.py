"""acl.rt — pyACL's runtime functions over libascendcl: devices, contexts, streams, events, memory, callbacks.

Conventions, as pyACL's: handles and addresses are ints (0 for NULL); a call with outputs returns them followed by the
error code, `value, ret = acl.rt.malloc(size, policy)`; a call without outputs returns the code alone."""
import ctypes
import itertools
import threading

from ._lib import (POINTER, Functions, c_float, c_int, c_int32, c_size_t, c_uint32, c_uint64, c_void_p, handle)

_P = POINTER
_f = Functions("libascendcl.so", {
    "aclrtSetDevice": (c_int, c_int32),
    "aclrtResetDevice": (c_int, c_int32),
    "aclrtResetDeviceForce": (c_int, c_int32),
    "aclrtGetDevice": (c_int, _P(c_int32)),
    "aclrtGetDeviceCount": (c_int, _P(c_uint32)),
    "aclrtSynchronizeDevice": (c_int,),
    "aclrtGetRunMode": (c_int, _P(c_int)),
    "aclrtCreateContext": (c_int, _P(c_void_p), c_int32),
    "aclrtDestroyContext": (c_int, c_void_p),
    "aclrtSetCurrentContext": (c_int, c_void_p),
    "aclrtGetCurrentContext": (c_int, _P(c_void_p)),
    "aclrtCreateStream": (c_int, _P(c_void_p)),
    "aclrtCreateStreamWithConfig": (c_int, _P(c_void_p), c_uint32, c_uint32),
    "aclrtDestroyStream": (c_int, c_void_p),
    "aclrtSynchronizeStream": (c_int, c_void_p),
    "aclrtSynchronizeStreamWithTimeout": (c_int, c_void_p, c_int32),
    "aclrtStreamQuery": (c_int, c_void_p, _P(c_int)),
    "aclrtStreamWaitEvent": (c_int, c_void_p, c_void_p),
    "aclrtCreateEvent": (c_int, _P(c_void_p)),
    "aclrtCreateEventWithFlag": (c_int, _P(c_void_p), c_uint32),
    "aclrtDestroyEvent": (c_int, c_void_p),
    "aclrtRecordEvent": (c_int, c_void_p, c_void_p),
    "aclrtResetEvent": (c_int, c_void_p, c_void_p),
    "aclrtQueryEventStatus": (c_int, c_void_p, _P(c_int)),
    "aclrtSynchronizeEvent": (c_int, c_void_p),
    "aclrtEventElapsedTime": (c_int, _P(c_float), c_void_p, c_void_p),
    "aclrtMalloc": (c_int, _P(c_void_p), c_size_t, c_int),
    "aclrtMallocHost": (c_int, _P(c_void_p), c_size_t),
    "aclrtFree": (c_int, c_void_p),
    "aclrtFreeHost": (c_int, c_void_p),
    "aclrtMemset": (c_int, c_void_p, c_size_t, c_int32, c_size_t),
    "aclrtMemsetAsync": (c_int, c_void_p, c_size_t, c_int32, c_size_t, c_void_p),
    "aclrtMemcpy": (c_int, c_void_p, c_size_t, c_void_p, c_size_t, c_int),
    "aclrtMemcpyAsync": (c_int, c_void_p, c_size_t, c_void_p, c_size_t, c_int, c_void_p),
    "aclrtMemcpy2d": (c_int, c_void_p, c_size_t, c_void_p, c_size_t, c_size_t, c_size_t, c_int),
    "aclrtGetMemInfo": (c_int, c_int, _P(c_size_t), _P(c_size_t)),
    "aclrtSubscribeReport": (c_int, c_uint64, c_void_p),
    "aclrtUnSubscribeReport": (c_int, c_uint64, c_void_p),
    "aclrtProcessReport": (c_int, c_int32),
    "aclrtLaunchCallback": (c_int, c_void_p, c_void_p, c_int, c_void_p),
    "aclrtLaunchHostFunc": (c_int, c_void_p, c_void_p, c_void_p),
    "aclrtGetLastError": (c_int, c_int),
    "aclrtPeekAtLastError": (c_int, c_int),
})


# ---- devices
def set_device(device_id):
    return _f.aclrtSetDevice(device_id)


def reset_device(device_id):
    return _f.aclrtResetDevice(device_id)


def reset_device_force(device_id):
    return _f.aclrtResetDeviceForce(device_id)


def get_device():
    dev = c_int32(-1)
    ret = _f.aclrtGetDevice(ctypes.byref(dev))
    return dev.value, ret


def get_device_count():
    count = c_uint32(0)
    ret = _f.aclrtGetDeviceCount(ctypes.byref(count))
    return count.value, ret


def synchronize_device():
    return _f.aclrtSynchronizeDevice()


def get_run_mode():
    mode = c_int(0)
    ret = _f.aclrtGetRunMode(ctypes.byref(mode))
    return mode.value, ret


# ---- contexts
def create_context(device_id):
    ctx = c_void_p()
    ret = _f.aclrtCreateContext(ctypes.byref(ctx), device_id)
    return handle(ctx.value), ret


def destroy_context(context):
    return _f.aclrtDestroyContext(context)


def set_context(context):
    return _f.aclrtSetCurrentContext(context)


def get_context():
    ctx = c_void_p()
    ret = _f.aclrtGetCurrentContext(ctypes.byref(ctx))
    return handle(ctx.value), ret


# ---- streams
def create_stream():
    stream = c_void_p()
    ret = _f.aclrtCreateStream(ctypes.byref(stream))
    return handle(stream.value), ret


def create_stream_with_config(priority, flag):
    stream = c_void_p()
    ret = _f.aclrtCreateStreamWithConfig(ctypes.byref(stream), priority, flag)
    return handle(stream.value), ret


def destroy_stream(stream):
    return _f.aclrtDestroyStream(stream)


def synchronize_stream(stream):
    return _f.aclrtSynchronizeStream(stream)


def synchronize_stream_with_timeout(stream, timeout):
    return _f.aclrtSynchronizeStreamWithTimeout(stream, timeout)


def stream_query(stream):
    status = c_int(0)
    ret = _f.aclrtStreamQuery(stream, ctypes.byref(status))
    return status.value, ret


def stream_wait_event(stream, event):
    return _f.aclrtStreamWaitEvent(stream, event)


# ---- events
def create_event():
    event = c_void_p()
    ret = _f.aclrtCreateEvent(ctypes.byref(event))
    return handle(event.value), ret


def create_event_with_flag(flag):
    event = c_void_p()
    ret = _f.aclrtCreateEventWithFlag(ctypes.byref(event), flag)
    return handle(event.value), ret


def destroy_event(event):
    return _f.aclrtDestroyEvent(event)


def record_event(event, stream):
    return _f.aclrtRecordEvent(event, stream)


def reset_event(event, stream):
    return _f.aclrtResetEvent(event, stream)


def query_event_status(event):
    status = c_int(0)
    ret = _f.aclrtQueryEventStatus(event, ctypes.byref(status))
    return status.value, ret


def synchronize_event(event):
    return _f.aclrtSynchronizeEvent(event)


def event_elapsed_time(start, end):
    ms = c_float(0.0)
    ret = _f.aclrtEventElapsedTime(ctypes.byref(ms), start, end)
    return ms.value, ret


# ---- memory
def malloc(size, policy):
    ptr = c_void_p()
    ret = _f.aclrtMalloc(ctypes.byref(ptr), size, policy)
    return handle(ptr.value), ret


def malloc_host(size):
    ptr = c_void_p()
    ret = _f.aclrtMallocHost(ctypes.byref(ptr), size)
    return handle(ptr.value), ret


def free(dev_ptr):
    return _f.aclrtFree(dev_ptr)


def free_host(host_ptr):
    return _f.aclrtFreeHost(host_ptr)


def memset(dev_ptr, max_count, value, count):
    return _f.aclrtMemset(dev_ptr, max_count, value, count)


def memset_async(dev_ptr, max_count, value, count, stream):
    return _f.aclrtMemsetAsync(dev_ptr, max_count, value, count, stream)


def memcpy(dst, dest_max, src, count, kind):
    return _f.aclrtMemcpy(dst, dest_max, src, count, kind)


def memcpy_async(dst, dest_max, src, count, kind, stream):
    return _f.aclrtMemcpyAsync(dst, dest_max, src, count, kind, stream)


def memcpy2d(dst, dpitch, src, spitch, width, height, kind):
    return _f.aclrtMemcpy2d(dst, dpitch, src, spitch, width, height, kind)


def get_mem_info(attr):
    free_bytes, total = c_size_t(0), c_size_t(0)
    ret = _f.aclrtGetMemInfo(attr, ctypes.byref(free_bytes), ctypes.byref(total))
    return free_bytes.value, total.value, ret


# ---- errors
def get_last_error(level):
    return _f.aclrtGetLastError(level)


def peek_at_last_error(level):
    return _f.aclrtPeekAtLastError(level)


# ---- callbacks
# A Python callable cannot be handed to C as such: one C trampoline serves every callback, and the userData pointer C
# carries is a key into this table of (function, user data). An entry is dropped once its callback has run, except
# for callbacks launched into a capture: those run at every execution of the captured instance, so they stay.
_CALLBACK = ctypes.CFUNCTYPE(None, c_void_p)
_pending = {}
_pending_lock = threading.Lock()
_keys = itertools.count(1)


def _trampoline(key):
    with _pending_lock:
        entry = _pending.get(key)
        if entry is not None and not entry[2]:
            del _pending[key]
    if entry is not None:
        entry[0](entry[1])


_trampoline_c = _CALLBACK(_trampoline)


def _register(fn, user_data, stream):
    if not callable(fn):
        raise TypeError(f"acl.rt: the callback must be callable, not {type(fn).__name__}")
    from . import mdl  # a callback queued during a capture runs at every execution of the captured instance
    status, _, ret = mdl.ri_capture_get_info(stream)
    keep = ret == 0 and status == mdl.ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE
    key = next(_keys)
    with _pending_lock:
        _pending[key] = (fn, user_data, keep)
    return key


def _unregister(key):
    with _pending_lock:
        _pending.pop(key, None)


def subscribe_report(thread_id, stream):
    """Makes thread `thread_id` (acl.util.start_thread's id, or threading.get_ident() of a Python thread) the one
    whose acl.rt.process_report runs `stream`'s callbacks."""
    return _f.aclrtSubscribeReport(thread_id, stream)


def unsubscribe_report(thread_id, stream):
    return _f.aclrtUnSubscribeReport(thread_id, stream)


def process_report(timeout):
    """Runs the callbacks that the streams subscribed to this thread have reached, waiting up to `timeout` ms
    (-1: without limit) for one; the GIL is released while it waits."""
    return _f.aclrtProcessReport(timeout)


def launch_callback(fn, user_data, block_type, stream):
    """Queues `fn(user_data)` on `stream`, to be run by the thread subscribed to it (acl.rt.subscribe_report)."""
    key = _register(fn, user_data, stream)
    ret = _f.aclrtLaunchCallback(ctypes.cast(_trampoline_c, c_void_p), c_void_p(key), block_type, stream)
    if ret != 0:
        _unregister(key)
    return ret


def launch_host_func(stream, fn, args):
    """Queues `fn(args)` on `stream`, run on the runtime's own thread when the stream reaches it (no report thread)."""
    key = _register(fn, args, stream)
    ret = _f.aclrtLaunchHostFunc(stream, ctypes.cast(_trampoline_c, c_void_p), c_void_p(key))
    if ret != 0:
        _unregister(key)
    return ret
