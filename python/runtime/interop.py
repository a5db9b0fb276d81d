"""Array interop of device memory: DLPack both ways (the versioned protocol, DLPack 1.x, and the legacy one) and
the CUDA Array Interface v3.

Export (DeviceMemory.__dlpack__, __dlpack_device__, __cuda_array_interface__): zero-copy, n-d with strides
(DLPack counts strides in elements, the CUDA Array Interface in bytes), read-only memory flagged (the legacy
capsule cannot say read-only, so such memory is exported only through the versioned protocol). The capsule
holds the memory: runtime.free() of exported memory reports it freed at once, but the release waits until every
consumer has let go (a numpy view made by numpy.from_dlpack stays valid).

The `stream=` handshake of DeviceMemory.__dlpack__ (DLPack: the consumer names the stream it will use; the
producer makes that stream wait for its work on the memory):
  - stream=None (numpy and every host consumer, and the CUDA default): the streams of the memory's device that
    still have queued work are synchronized (each one waited for; idle streams cost a query; never a device-wide
    rtDeviceSynchronize), so the consumer may read at once on any stream or on the host;
  - stream=-1: the consumer asks for no synchronisation (its own promise); nothing is done;
  - a runtime.Stream, or the handle (int) of one of the runtime's streams on the memory's device: an event is
    recorded on each of the device's busy streams and the consumer's stream waits for it (no host wait);
  - any other int on cuda (1: legacy default stream, 2: per-thread default, or another library's cudaStream_t):
    the runtime's busy streams are synchronized as for None. DLPack asks the producer to order the consumer's
    stream after its work; work that has completed is ordered before anything the consumer queues, so a host wait
    meets that (it costs the wait, not correctness; making a foreign stream wait for a runtime event would need
    the native event, which the runtime does not expose). 0 is refused (ambiguous in the DLPack specification);
    on cpu memory (kDLCPU) a foreign int is refused.

Import (runtime.from_dlpack): objects with __dlpack__ (numpy arrays, torch tensors, CuPy arrays, runtime memory),
raw DLPack capsules, and objects with only __cuda_array_interface__ (Numba device arrays). Never a copy:
  - kDLCPU / kDLCUDAHost tensors are host memory; they become a DeviceMemory on a cpu device (the `device`
    argument, else the current device when it is a cpu device, else the first cpu device), zero-copy: cpu
    kernels use them in place, copies into and out of them work (the library sees them as the host memory they
    are), memset is refused. A kDLCPU tensor cannot be imported onto a cuda device (copy it: runtime.to_device);
  - kDLCUDA tensors become memory of the runtime's cuda device with that ordinal;
  - other device types are refused.
The imported DeviceMemory keeps the producer's tensor until it is freed (runtime.free) or garbage-collected;
then the producer's deleter runs, exactly once. A producer that is runtime memory is asked with the consumer's
stream (`stream=`, default the current stream) so the handshake above applies; other producers get `stream`
when it is an int (a CUDA stream handle they know), else None — the runtime has no access to their streams,
so synchronise their work first. The "stream" entry of a foreign __cuda_array_interface__ (CAI v3: the consumer
synchronises on it) is waited for without a host wait: the consumer's stream (`stream=` when it is a
runtime.Stream of the memory's device, else the current stream, else that device's default stream) waits for
the work queued so far on the producer's CUstream (rtStreamWaitNativeStream: an event recorded there); use the
memory on that stream, or order other streams after it. "stream": 0 (disallowed by v3) and non-ints are refused.

Extents: `nbytes` of imported memory is the span its elements occupy, from the first to the end of the last (a
broadcast view, stride 0, spans one element; a view with gaps spans them). Negative strides are refused (the
memory of a DeviceMemory lies at ptr .. ptr + nbytes). Read-only imports are refused as kernel arguments where
the kernel may write (runtime.Function: every memory argument; see runtime.launch.plan).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _core
from .core import (Device, DeviceMemory, Event, Stream, _busy_streams, _c_strides, _live_streams, _MemExtra, _prod,
                   _settle, _storage_dtype, copy as _copy, current_device, current_stream, default_stream,
                   empty as _empty, get_device_count, get_device_properties)
from .errors import InvalidDeviceError, InvalidValueError, NotSupportedError, make_error

kDLCPU, kDLCUDA, kDLCUDAHost = 1, 2, 3
_DEVICE_TYPE_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan", 8: "kDLMetal",
                      9: "kDLVPI", 10: "kDLROCM", 11: "kDLROCMHost", 12: "kDLExtDev", 13: "kDLCUDAManaged",
                      14: "kDLOneAPI", 15: "kDLWebGPU", 16: "kDLHexagon", 17: "kDLMAIA"}
_KDL_INT, _KDL_UINT, _KDL_FLOAT, _KDL_BFLOAT, _KDL_COMPLEX, _KDL_BOOL = 0, 1, 2, 4, 5, 6


# ----------------------------------------------------------------------------------------------- dtypes

def _dlpack_dtype(dt: np.dtype) -> tuple:
    """(code, bits) of a storage dtype."""
    if dt.name == "bfloat16":
        return _KDL_BFLOAT, 16
    code = {"b": _KDL_BOOL, "i": _KDL_INT, "u": _KDL_UINT, "f": _KDL_FLOAT, "c": _KDL_COMPLEX}[dt.kind]
    return code, dt.itemsize * 8


def _numpy_dtype(code: int, bits: int, lanes: int) -> np.dtype:
    if lanes != 1:
        raise BufferError(f"from_dlpack: vector elements (lanes = {lanes}) are not supported (expected lanes = 1)")
    dt = None
    if code == _KDL_BOOL and bits == 8:
        dt = np.dtype(np.bool_)
    elif code == _KDL_INT and bits in (8, 16, 32, 64):
        dt = np.dtype(f"int{bits}")
    elif code == _KDL_UINT and bits in (8, 16, 32, 64):
        dt = np.dtype(f"uint{bits}")
    elif code == _KDL_FLOAT and bits in (16, 32, 64):
        dt = np.dtype(f"float{bits}")
    elif code == _KDL_COMPLEX and bits in (64, 128):
        dt = np.dtype(f"complex{bits}")
    elif code == _KDL_BFLOAT and bits == 16:
        try:
            import ml_dtypes
        except ImportError:
            raise BufferError("from_dlpack: a bfloat16 tensor needs the ml_dtypes package (pip install "
                              "ml_dtypes)") from None
        dt = np.dtype(ml_dtypes.bfloat16)
    if dt is None:
        raise BufferError(f"from_dlpack: DLPack dtype (code {code}, {bits} bits) is not supported (expected bool, "
                          f"int8..int64, uint8..uint64, float16/32/64, complex64/128 or bfloat16)")
    return dt


# ----------------------------------------------------------------------------------------------- export

def dlpack_device(mem: DeviceMemory) -> tuple:
    """(device_type, device_id): kDLCUDA with the ordinal for cuda memory; kDLCPU for cpu device memory and
    imported host memory (both host memory)."""
    p = mem.device.properties
    if p.backend == "cuda" and not (mem._ext is not None and (mem._ext.foreign_host or mem._ext.mapped)):
        return (kDLCUDA, p.backend_ordinal)
    if p.backend == "cuda":
        return (kDLCUDAHost, 0)  # host memory mapped for a GPU
    return (kDLCPU, 0)


class _Export:
    """The owner a capsule holds: keeps the exported DeviceMemory (and through it its base) alive and counts as
    a live export of the owning allocation, whose release runtime.free() defers until the count drops to 0."""

    __slots__ = ("mem", "root")

    def __init__(self, mem: DeviceMemory) -> None:
        root = mem._root()
        root._own_extra().exports += 1
        self.mem, self.root = mem, root

    def __del__(self) -> None:
        ext = self.root._ext
        ext.exports -= 1
        if ext.exports == 0 and ext.release_pending and not ext.cai_exported:  # else the owner's __del__ releases
            ext.release_pending = False
            try:
                self.root._deferred_release_done()
            except Exception:
                pass


def _our_stream(mem: DeviceMemory, stream: Any) -> Optional[Stream]:
    if isinstance(stream, Stream):
        if stream.device.index != mem.device.index:
            raise BufferError(f"__dlpack__: stream {stream!r} is not on the memory's device ({mem.device.name})")
        return stream
    for s in list(_live_streams):
        if s._handle and s._handle == stream and s._index == mem.device.index:
            return s
    return None


def order_for_consumer(mem: DeviceMemory, stream: Any) -> None:
    """The producer's side of the DLPack stream handshake (see the module's documentation)."""
    if stream is None:
        _settle(mem)
        return
    if isinstance(stream, (bool, np.bool_)) or not isinstance(stream, (int, np.integer, Stream)):
        raise BufferError(f"__dlpack__: stream must be None, -1, a runtime.Stream or a stream handle (int), got "
                          f"{stream!r}")
    if not isinstance(stream, Stream) and int(stream) == -1:
        return  # the consumer asked for no synchronisation
    ours = _our_stream(mem, stream)
    if ours is not None:
        with mem.device:
            for s in _busy_streams(mem.device.index):
                if s is ours:
                    continue  # in-order: the consumer's own stream already follows its work
                ev = Event()
                s.record(ev)
                ours.wait(ev)
                _core.defer_release(ours.handle, ev)  # the event lives until the consumer's stream has passed it
        return
    cuda = mem.device.properties.backend == "cuda" and dlpack_device(mem)[0] == kDLCUDA
    if int(stream) == 0 and cuda:
        raise BufferError("__dlpack__: stream=0 is ambiguous for CUDA (DLPack): pass 1 (legacy default stream), 2 "
                          "(per-thread default stream), a stream handle, or -1")
    if not cuda:
        raise BufferError(f"__dlpack__: stream={int(stream)} is not a stream of {mem.device.name}: for kDLCPU "
                          f"memory pass None (or a runtime.Stream of that device)")
    _settle(mem)  # a foreign CUDA stream: the runtime cannot queue a wait on it, so its work is completed


def export_dlpack(mem: DeviceMemory, stream: Any, max_version: Any, dl_device: Any, copy: Any) -> Any:
    mine = dlpack_device(mem)
    target = mine if dl_device is None else (int(dl_device[0]), int(dl_device[1]))
    versioned = max_version is not None and int(tuple(max_version)[0]) >= 1
    if copy:
        # A copy: on the host for a kDLCPU consumer, else on the memory's own device.
        if target[0] == kDLCPU:
            order_for_consumer(mem, None if stream is None or target != mine else stream)
            host = mem.numpy()
            return host.__dlpack__(max_version=max_version) if versioned else host.__dlpack__()
        if target != mine:
            raise BufferError(f"__dlpack__: memory on DLPack device {mine} cannot be copied to {target} (a copy goes "
                              f"to the host (kDLCPU) or stays on the memory's device)")
        dup = _empty(mem.shape, mem.dtype, device=mem.device)
        _copy(dup, mem)
        mem = dup
    elif target != mine:
        raise BufferError(f"__dlpack__: memory is on DLPack device {mine} ({mem.device.name}), cannot export it to "
                          f"{target} without a copy (pass copy=True for a host copy)")
    ptr = mem.ptr  # raises if freed
    dt = mem.dtype
    code, bits = _dlpack_dtype(dt)
    if mem.readonly and not versioned:
        raise BufferError("__dlpack__: read-only memory can be exported only through the versioned protocol "
                          "(the consumer must pass max_version >= (1, 0)); the legacy capsule cannot say read-only")
    strides = None
    if not mem.is_contiguous:
        strides = []
        for s in mem.strides:
            if s % dt.itemsize:
                raise BufferError(f"__dlpack__: stride {s} bytes is not a whole number of {dt} elements")
            strides.append(s // dt.itemsize)
    order_for_consumer(mem, stream)
    return _core.make_dlpack(ptr, list(mem.shape), strides, code, bits, mine[0], mine[1], _Export(mem), versioned,
                             mem.readonly)


def cuda_array_interface(mem: DeviceMemory) -> dict:
    """The CUDA Array Interface v3 dict of cuda memory. The work queued on the memory's device is completed first
    ("stream": None promises the consumer needs no synchronisation); consumers read the attribute often (Numba on
    every call), so idle streams cost one query each and nothing else: the dict itself is made once per object
    (shape, dtype and strides are fixed) and copied."""
    if dlpack_device(mem)[0] != kDLCUDA:
        raise AttributeError("__cuda_array_interface__ exists only for memory of a cuda device "
                             f"(this is {mem.device.name} memory)")
    ptr = mem.ptr  # raises if freed
    ext = mem._own_extra()
    mem._root()._own_extra().cai_exported = True  # free() now leaves the release to the owner's finalisation
    cai = ext.cai
    if cai is None:
        dt = mem.dtype
        if dt.name == "bfloat16":
            raise AttributeError("__cuda_array_interface__: bfloat16 has no typestr in the CUDA Array Interface (numpy "
                                 "would read '<V2', raw bytes): exchange bfloat16 memory through DLPack "
                                 "(torch.from_dlpack(mem), cupy.from_dlpack(mem))")
        cai = ext.cai = {"shape": mem.shape, "typestr": dt.str, "data": (ptr, mem.readonly),
                         "strides": None if mem.is_contiguous else mem.strides, "descr": [("", dt.str)],
                         "version": 3, "stream": None}
    _settle(mem)
    return dict(cai)


# ----------------------------------------------------------------------------------------------- import

class _ForeignKeep:
    """The hold of a __cuda_array_interface__ import: the producer object, let go on release()."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def release(self) -> None:
        self.obj = None


def _devices_of(backend: str) -> list:
    return [i for i in range(get_device_count()) if get_device_properties(i).backend == backend]


def _host_device(device: Any, producer: Any) -> Device:
    if device is not None:
        d = Device(device)
        if d.backend != "cpu":
            raise make_error(InvalidDeviceError,
                             f"from_dlpack: the tensor is host memory (kDLCPU), which is imported zero-copy only on a "
                             f"cpu device, not {d.name} (copy it there with runtime.to_device(numpy.from_dlpack(x), "
                             f"device={d.name!r}))")
        return d
    if isinstance(producer, DeviceMemory) and producer.device.backend == "cpu":
        return producer.device
    cur = current_device()
    if cur.backend == "cpu":
        return cur
    cpus = _devices_of("cpu")
    if not cpus:
        raise make_error(NotSupportedError, "from_dlpack: the tensor is host memory (kDLCPU) and there is no cpu "
                                            "device to import it on (copy it with runtime.to_device)")
    return Device(cpus[0])


def _cuda_device(ordinal: int, device: Any, what: str) -> Device:
    found = [i for i in _devices_of("cuda") if get_device_properties(i).backend_ordinal == ordinal]
    if not found:
        raise make_error(InvalidDeviceError, f"from_dlpack: the tensor is on cuda:{ordinal} ({what}), which the "
                                             f"runtime does not have")
    d = Device(found[0])
    if device is not None and Device(device) != d:
        raise make_error(InvalidDeviceError, f"from_dlpack: the tensor is on {d.name}, not {Device(device).name} "
                                             f"(an import never copies)")
    return d


def _memory(ptr: int, shape: tuple, byte_strides: Optional[tuple], dt: np.dtype, dev: Device, hold: Any,
            readonly: bool, host: bool) -> DeviceMemory:
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise BufferError(f"from_dlpack: negative dimension in shape {shape}")
    strides = None
    nbytes = _prod(shape) * dt.itemsize
    if byte_strides is not None:
        strides = tuple(int(s) for s in byte_strides)
        if len(strides) != len(shape):
            raise BufferError(f"from_dlpack: {len(strides)} strides for the {len(shape)} dimensions of shape {shape}")
        c = _c_strides(shape, dt.itemsize)
        if all(n <= 1 or s == cs for n, s, cs in zip(shape, strides, c)):
            strides = None  # C-contiguous (strides of dimensions of extent 1 do not matter)
        elif nbytes:
            if any(s < 0 for n, s in zip(shape, strides) if n > 1):
                raise BufferError(f"from_dlpack: negative strides {strides} (a reversed view) are not supported: the "
                                  f"memory of a DeviceMemory lies at ptr .. ptr + nbytes; import a copy (e.g. "
                                  f"numpy.ascontiguousarray(x))")
            # The bytes the elements really occupy: from the first to the end of the last one (less than
            # size * itemsize for a broadcast (stride 0) view, more for a view with gaps).
            nbytes = sum((n - 1) * s for n, s in zip(shape, strides)) + dt.itemsize
    ext = _MemExtra()
    ext.imported = hold
    ext.readonly = bool(readonly)
    ext.foreign_host = host
    ext.special = True  # off the launch_copy fast path (inferred copy kinds, read-only and stride checks)
    return DeviceMemory(int(ptr), nbytes, dev, dt, ext, shape, strides)


def _from_capsule(capsule: Any, device: Any, producer: Any) -> DeviceMemory:
    hold, ptr, shape, strides, (code, bits, lanes), (dev_type, dev_id), readonly, _version = \
        _core.import_dlpack(capsule)
    try:
        dt = _numpy_dtype(code, bits, lanes)
        if dev_type in (kDLCPU, kDLCUDAHost):
            dev = _host_device(device, producer)
            host = True
        elif dev_type == kDLCUDA:
            dev = _cuda_device(int(dev_id), device, "kDLCUDA")
            host = False
        else:
            name = _DEVICE_TYPE_NAMES.get(dev_type, "unknown")
            raise BufferError(f"from_dlpack: DLPack device type {dev_type} ({name}) is not supported (expected kDLCPU "
                              f"or kDLCUDA)")
        byte_strides = None if strides is None else tuple(s * dt.itemsize for s in strides)
        return _memory(ptr, tuple(shape), byte_strides, dt, dev, hold, readonly, host)
    except BaseException:
        hold.release()  # refused: the producer gets its tensor back now
        raise


def _wait_for_cai_stream(cai: dict, dev: Device, stream: Any) -> None:
    """CAI v3 "stream": the consumer synchronises on the producer's stream. The consumer's stream (`stream` when it
    is a runtime.Stream of `dev`, else the current stream when it is on `dev`, else `dev`'s default stream) waits
    for the work queued so far on the producer's CUstream (an event, no host wait)."""
    foreign = cai.get("stream")
    if foreign is None:
        return  # the producer's work is complete
    if isinstance(foreign, (bool, np.bool_)) or not isinstance(foreign, (int, np.integer)):
        raise BufferError(f"from_dlpack: __cuda_array_interface__ 'stream' must be None or a CUDA stream handle "
                          f"(int), got {foreign!r}")
    if int(foreign) == 0:
        raise BufferError("from_dlpack: __cuda_array_interface__ 'stream' is 0, which the interface (v3) disallows "
                          "as ambiguous (1: legacy default stream, 2: per-thread default stream)")
    if isinstance(stream, Stream) and stream.device == dev:
        consumer = stream
    else:
        consumer = current_stream()
        if consumer.device != dev:
            consumer = default_stream(dev)
    with dev:
        _core.stream_wait_native_stream(consumer.handle, int(foreign))


def _from_cai(obj: Any, cai: dict, device: Any, stream: Any = None) -> DeviceMemory:
    if not isinstance(cai, dict) or "shape" not in cai or "typestr" not in cai or "data" not in cai:
        raise BufferError("from_dlpack: __cuda_array_interface__ must be a dict with shape, typestr and data")
    if cai.get("mask") is not None:
        raise BufferError("from_dlpack: masked arrays (__cuda_array_interface__ 'mask') are not supported")
    dt = np.dtype(cai["typestr"])
    if not _storage_dtype(dt):
        raise BufferError(f"from_dlpack: dtype {dt} of __cuda_array_interface__ is not supported")
    ptr, readonly = cai["data"]
    cudas = _devices_of("cuda")
    if device is not None:
        dev = Device(device)
        if dev.backend != "cuda":
            raise make_error(InvalidDeviceError, f"from_dlpack: __cuda_array_interface__ memory is cuda memory, not "
                                                 f"{dev.name} memory")
    elif current_device().backend == "cuda":
        dev = current_device()
    elif cudas:
        dev = Device(cudas[0])
    else:
        raise make_error(InvalidDeviceError, "from_dlpack: __cuda_array_interface__ memory is cuda memory, and the "
                                             "runtime has no cuda device")
    strides = cai.get("strides")
    _wait_for_cai_stream(cai, dev, stream)
    return _memory(int(ptr or 0), tuple(cai["shape"]), None if strides is None else tuple(strides), dt, dev,
                   _ForeignKeep(obj), bool(readonly), False)


def from_dlpack(obj: Any, *, device: Any = None, stream: Any = None) -> DeviceMemory:
    """A zero-copy DeviceMemory over the memory of `obj`: an object with __dlpack__ (numpy, torch, CuPy, runtime
    memory), a DLPack capsule, or an object with __cuda_array_interface__. Shape, strides and dtype are the
    tensor's; read-only tensors give read-only memory. `device`: where host (kDLCPU) memory is imported (a cpu
    device; default the current one if it is cpu, else the first cpu device), or the device the tensor must be
    on. `stream`: the runtime stream that will use the memory (default: the current stream) for the DLPack
    handshake with a runtime producer; an int is passed to a foreign producer as the consumer's CUDA stream.
    The producer is kept until the memory is freed or collected (its deleter then runs, once). See
    runtime.interop for the device and stream rules."""
    if type(obj).__name__ == "PyCapsule":
        return _from_capsule(obj, device, None)
    if hasattr(obj, "__dlpack__"):
        if isinstance(obj, DeviceMemory):
            consumer = stream if stream is not None else current_stream()
            if isinstance(consumer, Stream) and consumer.device.index != obj.device.index:
                consumer = None  # another device's stream: a host synchronisation instead
            capsule = obj.__dlpack__(stream=consumer, max_version=(1, 0))
        else:
            kind = None
            if hasattr(obj, "__dlpack_device__"):
                kind = int(obj.__dlpack_device__()[0])
            args = {}
            if kind == kDLCUDA and isinstance(stream, (int, np.integer)) and not isinstance(stream, bool):
                args["stream"] = int(stream)
            try:
                capsule = obj.__dlpack__(max_version=(1, 0), **args)
            except TypeError:  # a producer from before DLPack 1.0 (no max_version keyword)
                capsule = obj.__dlpack__(**args)
        return _from_capsule(capsule, device, obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(obj, cai, device, stream)
    raise make_error(InvalidValueError, f"from_dlpack: {type(obj).__name__} has neither __dlpack__ nor "
                                        f"__cuda_array_interface__ (for a host buffer use runtime.to_device)")
