"""runtime — an open accelerator runtime: devices, streams, events, device memory and @runtime.jit kernels.

The seed's API (SPEC §2, §3): init, get_device_count, set_device, get_device_properties, Stream, Event, alloc,
copy(dst, src, direction=None), free, @jit with get_global_id(); plus device strings ("cpu:0", "cuda:0"),
stream/device context managers, Event(enable_timing=True).elapsed_time, typed n-d device memory (shape, strides,
dtype; empty/zeros/to_device/view) with DLPack both ways (from_dlpack) and __cuda_array_interface__, typed errors; the
memory strategies (enable_pool_allocator, enable_zero_copy, enable_memory_reuse), pinned/registered/mapped host
memory (alloc_host, register_host, map_host) and exact statistics (memory_stats, memory_summary); graphs (issue 14):
stream.capture() / begin_capture / end_capture give a Graph, instantiate() a GraphExec to launch, update and save,
load_graph reads one back (runtime.graph); vision pre-processing on streams (issue 16): runtime.dvpp; collectives
across ranks (issue 15): runtime.comm.
"""

from __future__ import annotations

import numpy as _np

from . import _core
from .errors import (CapturedEventError, CommTimeoutError, CompileError, Error, GraphExecUpdateError, IllegalStateError,
                     InvalidDeviceError, InvalidHandleError, InvalidImageError, InvalidValueError, LaunchError, NotFoundError,
                     NotPermittedError, NotReadyError, NotSupportedError, OutOfMemoryError, StreamCaptureError,
                     StreamCaptureImplicitError, StreamCaptureInvalidatedError, StreamCaptureIsolationError,
                     StreamCaptureUnjoinedError, StreamCaptureUnsupportedError, StreamCaptureWrongThreadError,
                     UnknownError)
from .errors import ERROR_CLASSES as _ERROR_CLASSES

_core.set_error_classes(dict(_ERROR_CLASSES))

from .core import (Device, DeviceMemory, DeviceProperties, Event, Stream, alloc, copy, current_device,  # noqa: E402
                   current_stream, default_stream, device, empty, finalize, free, get_device, get_device_count,
                   get_device_properties, init, mem_get_info, memset, set_device, synchronize, to_device)
from .core import (alloc_host, empty_cache, enable_memory_reuse, enable_pool_allocator,  # noqa: E402
                   enable_zero_copy, map_host, memory_stats, memory_summary, register_host,
                   reset_peak_memory_stats, unregister_host)
from .jit import (JitKernel, atomic_add, atomic_cas, atomic_exchange, atomic_max, atomic_min, barrier,  # noqa: E402
                  local_array, get_global_id, get_global_size, get_group_id, get_local_id, get_local_size, get_num_groups, jit)
from .kernel import Function, Module  # noqa: E402
from .core import empty_like, zeros, zeros_like  # noqa: E402
from .core import thread_capture_mode  # noqa: E402
from .graph import Graph, GraphExec, GraphMemoryInfo, GraphNode, load_graph  # noqa: E402
from .interop import from_dlpack  # noqa: E402
from . import dvpp  # noqa: E402
from . import comm  # noqa: E402
from .profiler import PROFILER_DEFAULT, PROFILER_NO_API_CALLS, PROFILER_NO_MEMORY, profile  # noqa: E402
from .smi import device_usage  # noqa: E402
from .errors import DeviceLostError, NotInitializedError, TimeoutError  # noqa: E402,A004
from .ipc import IpcMemory, ipc_get_mem_handle, ipc_open_mem_handle  # noqa: E402
from .lowlevel import (alloc_managed, alloc_pitch, can_access_peer, copy_2d, copy_peer, device_reset,  # noqa: E402
                       enable_peer_access, get_device_attribute, get_stream_priority_range, pointer_attributes,
                       prefetch)
from .mempool import MemPool, get_device_mem_pool, set_device_mem_pool  # noqa: E402

# dtypes, for annotations (`def k(a: runtime.float64)`) and alloc(..., dtype=runtime.int32)
bool_ = _np.bool_
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float32, float64 = _np.float32, _np.float64
float16, complex64, complex128 = _np.float16, _np.complex64, _np.complex128

__version__ = "%d.%d.%d" % tuple(_core.VERSION)

__all__ = [
    "Error", "InvalidValueError", "InvalidDeviceError", "InvalidHandleError", "OutOfMemoryError", "NotReadyError",
    "CompileError", "LaunchError", "NotSupportedError", "NotFoundError", "NotPermittedError", "UnknownError",
    "init", "finalize", "get_device_count", "set_device", "get_device", "get_device_properties", "device", "Device",
    "DeviceProperties", "current_device", "synchronize", "mem_get_info",
    "Stream", "Event", "current_stream", "default_stream",
    "alloc", "empty", "to_device", "free", "copy", "memset", "DeviceMemory",
    "enable_pool_allocator", "enable_memory_reuse", "enable_zero_copy", "empty_cache", "memory_stats",
    "memory_summary", "reset_peak_memory_stats", "alloc_host", "register_host", "unregister_host", "map_host",
    "jit", "JitKernel", "Module", "Function",
    "get_global_id", "get_local_id", "get_group_id", "get_global_size", "get_local_size", "get_num_groups",
    "atomic_add", "atomic_min", "atomic_max", "atomic_cas", "atomic_exchange", "barrier", "local_array",
    "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
]
__all__ += ["zeros", "empty_like", "zeros_like", "from_dlpack", "float16", "complex64", "complex128"]
__all__ += ["Graph", "GraphExec", "GraphNode", "GraphMemoryInfo", "load_graph", "thread_capture_mode",
            "StreamCaptureError", "StreamCaptureUnsupportedError", "StreamCaptureInvalidatedError",
            "StreamCaptureUnjoinedError", "StreamCaptureImplicitError", "StreamCaptureWrongThreadError",
            "StreamCaptureIsolationError", "CapturedEventError", "GraphExecUpdateError", "IllegalStateError"]
__all__ += ["InvalidImageError", "CommTimeoutError"]
__all__ += ["profile", "PROFILER_DEFAULT", "PROFILER_NO_API_CALLS", "PROFILER_NO_MEMORY"]
__all__ += ["device_usage"]
__all__ += ["TimeoutError", "NotInitializedError", "DeviceLostError", "pointer_attributes", "get_device_attribute",
            "can_access_peer", "enable_peer_access", "copy_peer", "alloc_managed", "prefetch", "alloc_pitch", "copy_2d",
            "get_stream_priority_range", "device_reset"]
__all__ += ["MemPool", "set_device_mem_pool", "get_device_mem_pool"]
__all__ += ["IpcMemory", "ipc_get_mem_handle", "ipc_open_mem_handle"]
