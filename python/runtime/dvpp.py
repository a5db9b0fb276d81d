"""runtime.dvpp — vision pre-processing as stream operations: JPEG/PNG decode, JPEG encode, resize, crop, letterbox,
colour conversion, normalisation and the fused pre-processing of an inference service (the C API of dvpp.h).

Images are runtime.DeviceMemory of uint8: packed formats shaped (h, w, channels) ("gray" also (h, w)), the 4:2:0
formats ("nv12", "nv21", "i420") shaped (h * 3 // 2, w) — the Y plane's h rows, then the chroma's h / 2 rows, as
OpenCV lays them out. A host numpy array is accepted wherever an image is read: it is copied to the stream's device
on the stream first. A list of images is a batch (one library call where the C API has a batch form).

The format of an image: the `format=` argument where a function takes one (convert_color: `src=`); else the format
this module gave the memory when it made it (decode_jpeg(..., format="nv12") returns memory that resize knows to be
NV12); else inferred from the shape: (h, w, 3) "rgb", (h, w, 4) "rgba", (h, w, 1) and (h, w) "gray" (convert_color
takes a 2-D image as "nv12", its issue-given default). Sizes are (width, height) and boxes (x, y, width, height), as
in OpenCV.

Every operation is queued on `stream` (default: the current stream when it is on the image's device, else the
image's device's default stream) and returns at once with its output allocated by runtime.empty; the objects the
work uses are kept alive until it has run. Arguments are checked in the call (a refused call raises and queues
nothing); a corrupt image found while decoding fails the stream: its next synchronize() raises InvalidImageError
naming the image. encode_jpeg returns bytes, so it synchronizes the stream.
"""

from __future__ import annotations

import operator
import weakref
from typing import Any, Optional, Sequence

import numpy as np

from . import _core
from .core import (Device, DeviceMemory, Stream, _active_captures, current_stream, default_stream, empty,
                   thread_capture_mode)
from .errors import InvalidValueError, NotSupportedError, make_error

__all__ = ["decode_jpeg", "decode_png", "encode_jpeg", "resize", "crop", "crop_resize", "letterbox",
           "convert_color", "normalize", "preprocess", "jpeg_info", "png_info", "letterbox_box", "FORMATS"]

# name -> (rtPixelFormat, channels of a packed format; 0 for 4:2:0)
_FORMATS = {
    "gray": (_core.PIXEL_FORMAT_GRAY8, 1),
    "rgb": (_core.PIXEL_FORMAT_RGB888, 3),
    "bgr": (_core.PIXEL_FORMAT_BGR888, 3),
    "rgba": (_core.PIXEL_FORMAT_RGBA8888, 4),
    "bgra": (_core.PIXEL_FORMAT_BGRA8888, 4),
    "nv12": (_core.PIXEL_FORMAT_YUV420SP_NV12, 0),
    "nv21": (_core.PIXEL_FORMAT_YUV420SP_NV21, 0),
    "i420": (_core.PIXEL_FORMAT_YUV420P, 0),
}
FORMATS = tuple(_FORMATS)
_INTERPOLATIONS = {"nearest": _core.INTERP_NEAREST, "bilinear": _core.INTERP_BILINEAR, "area": _core.INTERP_AREA}
_MATRICES = {("bt601", True): _core.COLOR_BT601_FULL, ("bt601", False): _core.COLOR_BT601_LIMITED,
             ("bt709", True): _core.COLOR_BT709_FULL, ("bt709", False): _core.COLOR_BT709_LIMITED}
_LAYOUTS = ("chw", "hwc")
_U32 = (1 << 32) - 1

# The format this module gave the memory it made (see the module's docstring); views and other memory have none.
_made_as: "weakref.WeakKeyDictionary[DeviceMemory, str]" = weakref.WeakKeyDictionary()


def _error(detail: str) -> InvalidValueError:
    return make_error(InvalidValueError, detail)


# ----------------------------------------------------------------------------------------------- argument checks


def _int(value: Any, what: str, lo: int, hi: int = _U32) -> int:
    """`value` as an int in lo..hi (bools refused)."""
    if isinstance(value, (bool, np.bool_)):
        raise _error(f"{what} must be an int, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise _error(f"{what} must be an int, got {value!r} ({type(value).__name__})") from None
    if not lo <= v <= hi:
        raise _error(f"{what} = {v} is out of range (expected {lo}..{hi})")
    return v


def _size(size: Any, what: str) -> tuple:
    """A (width, height) pair of ints >= 1."""
    if not isinstance(size, (tuple, list)) or len(size) != 2:
        raise _error(f"{what} must be (width, height), got {size!r}")
    return _int(size[0], f"{what}: width", 1), _int(size[1], f"{what}: height", 1)


def _is_box(obj: Any) -> bool:
    return isinstance(obj, (tuple, list)) and len(obj) == 4 and not any(isinstance(v, (tuple, list)) for v in obj)


def _box(box: Any, what: str) -> tuple:
    """An (x, y, width, height) box of ints: x, y >= 0, width, height >= 1 (that it lies inside the image is
    checked by the library, naming the field)."""
    if not _is_box(box):
        raise _error(f"{what} must be (x, y, width, height), got {box!r}")
    return (_int(box[0], f"{what}: x", 0), _int(box[1], f"{what}: y", 0), _int(box[2], f"{what}: width", 1),
            _int(box[3], f"{what}: height", 1))


def _choice(value: Any, table: Any, what: str) -> Any:
    if not isinstance(value, str) or value not in table:
        raise _error(f"{what} must be one of {', '.join(repr(k) for k in table)}, got {value!r}")
    return table[value] if isinstance(table, dict) else value


def _format_name(value: Any, what: str, allowed: Sequence[str] = FORMATS) -> str:
    return _choice(value, {k: k for k in allowed}, what)


def _matrix(matrix: Any, full_range: Any, what: str) -> int:
    _choice(matrix, ("bt601", "bt709"), f"{what}: matrix")
    if not isinstance(full_range, (bool, np.bool_)):
        raise _error(f"{what}: full_range must be a bool, got {full_range!r}")
    return _MATRICES[(matrix, bool(full_range))]


_DTYPES = {"float32": _core.DATA_FLOAT32, "float16": _core.DATA_FLOAT16, "bfloat16": _core.DATA_BFLOAT16,
           "uint8": _core.DATA_UINT8, "int8": _core.DATA_INT8}


def _dtype(dtype: Any, what: str) -> tuple:
    """(numpy dtype, rtDataType) of an output dtype: float32, float16, bfloat16 (ml_dtypes), uint8, int8."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise make_error(NotSupportedError, f"{what}: dtype bfloat16 needs the ml_dtypes package "
                                                f"(pip install ml_dtypes)") from None
        dtype = ml_dtypes.bfloat16
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise _error(f"{what}: dtype {dtype!r} is not a dtype (expected one of {', '.join(_DTYPES)})") from None
    code = _DTYPES.get(dt.name) if dt.isnative else None
    if code is None:
        raise _error(f"{what}: dtype {dt} is not supported (expected one of {', '.join(_DTYPES)})")
    return dt, code


def _per_channel(values: Any, channels: int, what: str) -> list:
    """One float per channel: a number is used for every channel, a sequence must have one per channel."""
    if isinstance(values, (int, float, np.integer, np.floating)) and not isinstance(values, (bool, np.bool_)):
        return [float(values)] * channels
    try:
        seq = [float(v) for v in values]
    except (TypeError, ValueError):
        raise _error(f"{what} must be a number or one number per channel, got {values!r}") from None
    if len(seq) != channels:
        raise _error(f"{what} has {len(seq)} values but the image has {channels} channel(s)")
    return seq


def _fill(fill: Any, fmt: str, what: str) -> tuple:
    """The fill of a letterbox in the format's channel order. A number is a grey level: every colour channel that
    value (alpha 255); for 4:2:0 formats Y that value and U = V = 128. A sequence gives the values themselves, one
    per channel (Y, U, V for the 4:2:0 formats)."""
    channels = _FORMATS[fmt][1]
    if isinstance(fill, (int, np.integer)) and not isinstance(fill, (bool, np.bool_)):
        v = _int(fill, what, 0, 255)
        if channels == 0:
            return (v, 128, 128)
        return (v, v, v, 255)[:channels] if channels == 4 else (v,) * channels
    n = 3 if channels == 0 else channels
    if not isinstance(fill, (tuple, list)) or len(fill) != n:
        raise _error(f"{what} must be an int 0..255 or {n} of them (one per channel of {fmt!r}), got {fill!r}")
    return tuple(_int(v, f"{what}[{i}]", 0, 255) for i, v in enumerate(fill))


# ----------------------------------------------------------------------------------------------- images and streams


def _pick_stream(stream: Any, device: Optional[Device], what: str) -> Stream:
    """The stream of an operation: `stream` (on `device` if that is given too); else the current stream when it is
    on `device` (or no device is known), else `device`'s default stream."""
    if stream is not None:
        if not isinstance(stream, Stream):
            raise _error(f"{what}: stream must be a runtime.Stream, got {type(stream).__name__}")
        if device is not None and stream.device != device:
            raise _error(f"{what}: the stream is on {stream.device.name} but the image is on {device.name} (queue it "
                         f"on a stream of {device.name})")
        return stream
    s = current_stream()
    if device is None or s.device == device:
        return s
    return default_stream(device)


class _Image:
    """One input image: the caller's object, its format and size; once materialized its device memory (the
    caller's, or a copy of a host array queued on the stream) and picture tuple for the binding."""

    __slots__ = ("obj", "fmt", "width", "height", "mem", "picture")

    def __init__(self, obj: Any, fmt: str, width: int, height: int) -> None:
        self.obj, self.fmt, self.width, self.height = obj, fmt, width, height
        self.mem: Optional[DeviceMemory] = None
        self.picture: Optional[tuple] = None


def _geometry(shape: tuple, fmt: Optional[str], default_2d: str, what: str) -> tuple:
    """(format, width, height) of an image of `shape` read as `fmt` (None: by the shape)."""
    if len(shape) not in (2, 3):
        raise _error(f"{what}: an image is shaped (h, w, channels), (h, w) or (h * 3 // 2, w) for 4:2:0, got shape "
                     f"{shape}")
    if fmt is None:
        if len(shape) == 2:
            fmt = default_2d
        else:
            fmt = {1: "gray", 3: "rgb", 4: "rgba"}.get(shape[2])
            if fmt is None:
                raise _error(f"{what}: {shape[2]} channels (shape {shape}): expected 1, 3 or 4")
    channels = _FORMATS[fmt][1]
    if channels == 0:
        if len(shape) != 2 or shape[0] % 3 or shape[1] % 2 or not shape[0] or not shape[1]:
            raise _error(f"{what}: a {fmt!r} image is shaped (h * 3 // 2, w) with h and w even and >= 2 (the Y plane's "
                         f"h rows, then h / 2 rows of chroma), got shape {shape}")
        return fmt, shape[1], shape[0] // 3 * 2
    ok = (len(shape) == 3 and shape[2] == channels) or (len(shape) == 2 and channels == 1)
    if not ok:
        want = "(h, w) or (h, w, 1)" if channels == 1 else f"(h, w, {channels})"
        raise _error(f"{what}: a {fmt!r} image is shaped {want}, got shape {shape}")
    if not shape[0] or not shape[1]:
        raise _error(f"{what}: the image is empty (shape {shape})")
    return fmt, shape[1], shape[0]


def _image_device(obj: Any) -> Optional[Device]:
    return obj.device if isinstance(obj, DeviceMemory) else None


def _batch_device(objs: Sequence, what: str, out: Any = None) -> Optional[Device]:
    """The one device of the device-memory images of a batch and of `out` (None: only host arrays)."""
    outs = [out] if isinstance(out, DeviceMemory) else list(out) if isinstance(out, (list, tuple)) else []
    devs = {d for d in (_image_device(o) for o in list(objs) + outs) if d is not None}
    if len(devs) > 1:
        raise _error(f"{what}: the images are on several devices ({', '.join(sorted(d.name for d in devs))}); a batch "
                     f"runs on one device")
    return devs.pop() if devs else None


def _check_image(obj: Any, fmt: Optional[str], stream: Stream, what: str, default_2d: str = "gray") -> _Image:
    """An input image checked (type, dtype, layout, device, shape against the format), with no side effect."""
    if fmt is not None:
        fmt = _format_name(fmt, f"{what}: format")
    if isinstance(obj, DeviceMemory):
        obj.ptr  # raises if freed
        if obj.dtype != np.uint8:
            raise _error(f"{what}: expected uint8 pixels, got {obj._describe()}")
        if not obj.is_contiguous:
            raise _error(f"{what}: {obj._describe()} is not contiguous (strides {obj.strides})")
        if obj.device != stream.device:
            raise _error(f"{what}: the image is on {obj.device.name} but the stream is on {stream.device.name}")
        return _Image(obj, *_geometry(obj.shape, fmt if fmt is not None else _made_as.get(obj), default_2d, what))
    if isinstance(obj, np.ndarray):
        if obj.dtype != np.uint8:
            raise _error(f"{what}: expected uint8 pixels, got a host array of {obj.dtype}")
        return _Image(obj, *_geometry(obj.shape, fmt, default_2d, what))
    raise _error(f"{what}: expected an image (runtime.DeviceMemory or a numpy uint8 array), got "
                 f"{type(obj).__name__}")


def _materialize(img: _Image, stream: Stream, keep: list) -> _Image:
    """Gives a checked image its device memory (a host array is copied in on the stream) and picture; appends what
    the operation must keep alive to `keep`."""
    obj = img.obj
    if isinstance(obj, DeviceMemory):
        mem = obj
    else:
        host = np.ascontiguousarray(obj)
        mem = _empty(host.shape, np.uint8, stream)
        stream.launch_copy(mem, host)  # keeps `host` alive until the copy has run
    keep.append(mem)
    img.mem = mem
    img.picture = _picture(mem, img.fmt, img.width, img.height)
    return img


def _check_images(objs: Sequence, fmt: Optional[str], stream: Stream, batch: bool, what: str,
                  default_2d: str = "gray") -> list:
    """Every input image checked (materialized by the caller once everything else is checked too: a refusal copies
    nothing)."""
    return [_check_image(o, fmt, stream, f"{what}: image {i}" if batch else f"{what}: image", default_2d)
            for i, o in enumerate(objs)]


def _empty(shape: tuple, dtype: Any, stream: Stream) -> DeviceMemory:
    """runtime.empty on the stream's device. While a capture is under way (which forbids rtMalloc) the allocation is
    made in the relaxed capture mode, as a library allocating inside its caller's capture does: it is plain memory,
    valid from replay to replay and kept by the graph as long as the graph uses it (an allocation node's address
    would only be usable by the graph's own nodes, which the library's checks of a picture's memory refuse)."""
    if _active_captures:
        with thread_capture_mode("relaxed"):
            return empty(shape, dtype, device=stream.device)
    return empty(shape, dtype, device=stream.device)


def _shape_of(fmt: str, width: int, height: int) -> tuple:
    channels = _FORMATS[fmt][1]
    if channels == 0:
        return (height * 3 // 2, width)
    return (height, width) if channels == 1 else (height, width, channels)


class _Outs:
    """Where the outputs of a call go: new memory (runtime.empty), or the caller's `out=` — one runtime.DeviceMemory
    per output, a list of them for several (in the order of the results, a batch's lists flattened) — each checked
    against the output it stands for. All checks happen before anything is queued."""

    def __init__(self, out: Any, count: int, what: str) -> None:
        self.what = what
        self.items: Optional[list] = None
        if out is None:
            return
        items = [out] if isinstance(out, DeviceMemory) else out
        if not isinstance(items, (list, tuple)) or not all(isinstance(m, DeviceMemory) for m in items):
            raise _error(f"{what}: out must be runtime.DeviceMemory or a list of it (one per output), got "
                         f"{type(out).__name__}")
        if len(items) != count:
            raise _error(f"{what}: out has {len(items)} memories for {count} outputs")
        self.items, self.next = list(items), 0

    def take(self, shape: tuple, dtype: Any, stream: Stream, keep: list, fmt: Optional[str] = None) -> DeviceMemory:
        """The memory of the next output (shape and dtype); an image's format `fmt` is remembered for it."""
        dt = np.dtype(dtype)
        if self.items is None:
            mem = _empty(shape, dt, stream)
        else:
            k = self.next
            self.next += 1
            mem = self.items[k]
            where = f"{self.what}: out" + (f"[{k}]" if len(self.items) > 1 else "")
            mem.ptr  # raises if freed
            want = f"{dt}, shape {shape}"
            shapes = (shape, shape + (1,)) if fmt == "gray" else (shape,)
            if mem.readonly:
                raise _error(f"{where}: {mem._describe()} is read-only")
            if not mem.is_contiguous:
                raise _error(f"{where}: {mem._describe()} is not contiguous")
            if mem.device != stream.device:
                raise _error(f"{where}: the memory is on {mem.device.name} but the stream is on {stream.device.name}")
            if mem.dtype != dt or mem.shape not in shapes:
                raise _error(f"{where}: expected {want} for this output, got {mem._describe()}")
        if fmt is not None:
            _made_as[mem] = fmt
        keep.append(mem)
        return mem

    def image(self, fmt: str, width: int, height: int, stream: Stream, keep: list) -> DeviceMemory:
        return self.take(_shape_of(fmt, width, height), np.uint8, stream, keep, fmt)


def _picture(mem: DeviceMemory, fmt: str, width: int, height: int) -> tuple:
    return (mem.ptr, mem.nbytes, _FORMATS[fmt][0], width, height, 0, 0)


def _queue(stream: Stream, fn: Any, *args: Any, keep: list) -> Any:
    """Calls the binding `fn(*args, stream_handle, keep)` with the stream's device current (a default stream's
    handle is its device's while that device is current)."""
    with stream.device:
        return fn(*args, stream.handle, tuple(keep))


def _as_list(obj: Any) -> tuple:
    """(items, is_batch): a list (or tuple of images) is a batch."""
    if isinstance(obj, list):
        return obj, True
    return [obj], False


# ----------------------------------------------------------------------------------------------- codecs


def _encoded(data: Any, what: str) -> Any:
    """Encoded bytes as a bytes-like object the binding reads (bytes, bytearray, memoryview, a uint8 numpy array)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return data
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8:
            raise _error(f"{what}: encoded data must be bytes or a uint8 numpy array, got an array of {data.dtype}")
        return np.ascontiguousarray(data)
    raise _error(f"{what}: encoded data must be bytes or a uint8 numpy array, got {type(data).__name__}")


def jpeg_info(data: Any) -> tuple:
    """(width, height, components) from a JPEG's header (1 grey, 3 colour, 4 CMYK); InvalidImageError if `data`
    is not a JPEG or its header is cut short."""
    return tuple(_core.dvpp_jpeg_get_info(_encoded(data, "jpeg_info")))


def png_info(data: Any) -> tuple:
    """(width, height, components) from a PNG's header (1 grey, 2 grey + alpha, 3 RGB, 4 RGBA)."""
    return tuple(_core.dvpp_png_get_info(_encoded(data, "png_info")))


def _decode_device(device: Any) -> Optional[Device]:
    return None if device is None else Device(device)


def _decode(kind: str, data: Any, format: str, device: Any, stream: Any, out: Any) -> Any:
    what = f"decode_{kind}"
    items, batch = _as_list(data)
    allowed = FORMATS if kind == "jpeg" else ("gray", "rgb", "bgr", "rgba", "bgra")
    fmt = _format_name(format, f"{what}: format", allowed)
    dev = _decode_device(device)
    if dev is None:
        dev = _batch_device([], what, out)
    s = _pick_stream(stream, dev, what)
    info = _core.dvpp_jpeg_get_info if kind == "jpeg" else _core.dvpp_png_get_info
    encoded = [_encoded(d, f"{what}: image {i}" if batch else what) for i, d in enumerate(items)]
    sizes = [info(e)[:2] for e in encoded]
    targets = _Outs(out, len(items), what)
    outs, pictures, keep = [], [], []
    for w, h in sizes:
        mem = targets.image(fmt, w, h, s, keep)
        outs.append(mem)
        pictures.append(_picture(mem, fmt, w, h))
    if kind == "jpeg" and batch:
        if items:
            _queue(s, _core.dvpp_decode_jpeg_batch, encoded, None, None, pictures, keep=keep)
    else:
        fn = _core.dvpp_decode_jpeg if kind == "jpeg" else _core.dvpp_decode_png
        for e, p in zip(encoded, pictures):
            _queue(s, fn, e, p, keep=keep)
    return outs if batch else outs[0]


def decode_jpeg(data: Any, format: str = "rgb", device: Any = None, stream: Optional[Stream] = None, *,
                out: Any = None) -> Any:
    """Decode a JPEG (`bytes` or a uint8 numpy array) into new device memory of `format` ("rgb", "bgr", "rgba",
    "bgra" with alpha 255, "gray", or "nv12", "nv21", "i420": the JPEG's own YCbCr, BT.601 full range, for images of
    even sizes): shaped (h, w, 3) for "rgb". A list of JPEGs is decoded as one batch (spread over the device's
    worker threads) into a list. Queued on `stream` (default: the current stream, or `device`'s default stream);
    a corrupt image fails the stream (InvalidImageError at its next synchronize, naming the image). `out`: memory
    to decode into instead of new memory (of the image's shape; a list for a list)."""
    return _decode("jpeg", data, format, device, stream, out)


def decode_png(data: Any, format: str = "rgb", device: Any = None, stream: Optional[Stream] = None, *,
               out: Any = None) -> Any:
    """Decode a PNG as decode_jpeg does a JPEG (formats "rgb", "bgr", "rgba", "bgra", "gray"; 16-bit PNGs reduced
    to 8 bits, palettes expanded, alpha dropped or added as 255 as the format asks). A list gives a list."""
    return _decode("png", data, format, device, stream, out)


def encode_jpeg(image: Any, quality: int = 95, stream: Optional[Stream] = None, format: Optional[str] = None) -> Any:
    """Encode an image ("rgb", "bgr", "rgba"/"bgra" with alpha ignored, "gray", or a 4:2:0 format taken as JPEG
    YCbCr) at `quality` 1..100 with 4:2:0 chroma; returns the JPEG as bytes (a list of bytes for a list). Waits for
    the stream (it returns the bytes), so it also raises a failure of work queued on it before."""
    q = _int(quality, "encode_jpeg: quality", 1, 100)
    items, batch = _as_list(image)
    s = _pick_stream(stream, _batch_device(items, "encode_jpeg"), "encode_jpeg")
    imgs = [_check_image(o, format, s, f"encode_jpeg: image {i}" if batch else "encode_jpeg: image")
            for i, o in enumerate(items)]
    keep, results = [], []
    for img in imgs:
        _materialize(img, s, keep)
        bound = _core.dvpp_encode_jpeg_bound(img.picture)
        out = np.empty(bound, np.uint8)
        size = np.array([bound], dtype=np.uintp)  # size_t: the capacity in, the JPEG's length out
        keep.extend((out, size))
        _queue(s, _core.dvpp_encode_jpeg, img.picture, q, out.ctypes.data, size.ctypes.data, keep=keep)
        results.append((out, size))
    s.synchronize()
    encoded = [out[:int(size[0])].tobytes() for out, size in results]
    return encoded if batch else encoded[0]


# ----------------------------------------------------------------------------------------------- resize and crop


def _interp(interpolation: Any, what: str) -> int:
    return _choice(interpolation, _INTERPOLATIONS, f"{what}: interpolation")


def resize(image: Any, size: Any, interpolation: str = "bilinear", stream: Optional[Stream] = None,
           format: Optional[str] = None, *, out: Any = None) -> Any:
    """Resize to `size` = (width, height): "bilinear" equals cv2.resize(INTER_LINEAR_EXACT) exactly, "nearest"
    cv2.INTER_NEAREST, "area" is within 1 of cv2.INTER_AREA. 4:2:0 images are resized plane by plane (even sizes).
    A list of images is one batch call; `size` is then one size for all or a list of one size per image. `out`:
    memory to write instead of new memory (a list for a list)."""
    interp = _interp(interpolation, "resize")
    items, batch = _as_list(image)
    if batch and isinstance(size, list) and size and isinstance(size[0], (tuple, list)):
        if len(size) != len(items):
            raise _error(f"resize: {len(size)} sizes for {len(items)} images")
        sizes = [_size(z, f"resize: size {i}") for i, z in enumerate(size)]
    else:
        sizes = [_size(size, "resize: size")] * len(items)
    s = _pick_stream(stream, _batch_device(items, "resize", out), "resize")
    srcs = _check_images(items, format, s, batch, "resize")
    targets = _Outs(out, len(items), "resize")
    keep: list = []
    outs = [targets.image(img.fmt, w, h, s, keep) for img, (w, h) in zip(srcs, sizes)]
    for img in srcs:
        _materialize(img, s, keep)
    dsts = [_picture(o, img.fmt, w, h) for o, img, (w, h) in zip(outs, srcs, sizes)]
    if not batch:
        _queue(s, _core.dvpp_resize, srcs[0].picture, dsts[0], interp, keep=keep)
    elif items:
        _queue(s, _core.dvpp_batch_crop_resize, [i.picture for i in srcs], None, None, dsts, interp, keep=keep)
    return outs if batch else outs[0]


def _boxes_per_image(boxes: Any, n: int, batch: bool, what: str) -> tuple:
    """(per_image, listed): the boxes of each image, and whether its entry was a list (its result is then a list).
    `boxes` is one box (for every image), or for one image a list of boxes, or for a batch a list with an entry
    per image: a box or a list of boxes."""
    flat = isinstance(boxes, (list, tuple)) and bool(boxes) and not any(isinstance(v, (tuple, list)) for v in boxes)
    if flat:  # one box (checked as one: (0, 0, 4) is a bad box, not a list of bad boxes)
        return [[_box(boxes, what)] for _ in range(n)], [False] * n
    if not isinstance(boxes, (list, tuple)):
        raise _error(f"{what} must be (x, y, width, height) or a list of them, got {boxes!r}")
    if not batch:
        return [[_box(b, f"{what} {k}") for k, b in enumerate(boxes)]], [True]
    if len(boxes) != n:
        raise _error(f"{what}: {len(boxes)} entries for {n} images (one box, or a list of boxes, per image)")
    per, listed = [], []
    for i, entry in enumerate(boxes):
        if _is_box(entry):
            per.append([_box(entry, f"{what} of image {i}")])
            listed.append(False)
        elif isinstance(entry, (list, tuple)):
            per.append([_box(b, f"{what} {k} of image {i}") for k, b in enumerate(entry)])
            listed.append(True)
        else:
            raise _error(f"{what} of image {i} must be (x, y, width, height) or a list of them, got {entry!r}")
    return per, listed


def _crop_resize(what: str, image: Any, box: Any, size: Optional[tuple], interpolation: Any, stream: Any,
                 format: Optional[str], out: Any) -> Any:
    interp = _interp(interpolation, what)
    fixed = None if size is None else _size(size, f"{what}: size")
    items, batch = _as_list(image)
    per, listed = _boxes_per_image(box, len(items), batch, f"{what}: box")
    s = _pick_stream(stream, _batch_device(items, what, out), what)
    srcs = _check_images(items, format, s, batch, what)
    targets = _Outs(out, sum(len(b) for b in per), what)
    keep: list = []
    results, dsts, crops = [], [], []
    for img, boxes, is_list in zip(srcs, per, listed):
        row = []
        for b in boxes:
            w, h = fixed if fixed is not None else (b[2], b[3])
            mem = targets.image(img.fmt, w, h, s, keep)
            row.append(mem)
            dsts.append(_picture(mem, img.fmt, w, h))
            crops.append(b)
        results.append(row if is_list else row[0])
    for img in srcs:
        _materialize(img, s, keep)
    if not batch and not listed[0]:
        _queue(s, _core.dvpp_crop_resize, srcs[0].picture, crops[0], dsts[0], interp, keep=keep)
    elif dsts:
        _queue(s, _core.dvpp_batch_crop_resize, [i.picture for i in srcs], [len(b) for b in per], crops, dsts,
               interp, keep=keep)
    return results if batch else results[0]


def crop(image: Any, box: Any, stream: Optional[Stream] = None, format: Optional[str] = None, *,
         out: Any = None) -> Any:
    """A copy of the rectangle `box` = (x, y, width, height) of the image (inside it; even for 4:2:0). A list of
    boxes gives a list of crops; a list of images one box for all, or an entry (a box or a list) per image. `out`:
    memory to write instead of new memory (a list, in the order of the crops, for several)."""
    return _crop_resize("crop", image, box, None, "nearest", stream, format, out)


def crop_resize(image: Any, box: Any, size: Any, interpolation: str = "bilinear", stream: Optional[Stream] = None,
                format: Optional[str] = None, *, out: Any = None) -> Any:
    """The rectangle `box` = (x, y, width, height) resized to `size` = (width, height), as resize() does. Boxes and
    batches as crop() takes them; every crop is resized to `size`; the many crops are one library call. `out` as
    crop() takes it."""
    return _crop_resize("crop_resize", image, box, size, interpolation, stream, format, out)


def letterbox_box(image_size: Any, size: Any, format: str = "rgb") -> tuple:
    """Where letterbox() puts an image of `image_size` = (width, height) in an output of `size`: the box
    (x, y, width, height) of the resized image, centred, its aspect ratio kept (each side rounded to the nearest
    pixel; for the 4:2:0 formats every value rounded down to even). Map a point of the output back to the image
    with x_image = (x - box_x) * image_width / box_width."""
    iw, ih = _size(image_size, "letterbox_box: image_size")
    ow, oh = _size(size, "letterbox_box: size")
    fmt = _format_name(format, "letterbox_box: format")
    if iw * oh >= ih * ow:  # the width is the limit (exact integer comparison of iw / ih and ow / oh)
        bw, bh = ow, max(1, (2 * ih * ow + iw) // (2 * iw))
    else:
        bw, bh = max(1, (2 * iw * oh + ih) // (2 * ih)), oh
    bw, bh = min(bw, ow), min(bh, oh)
    if _FORMATS[fmt][1] == 0:
        if ow % 2 or oh % 2:
            raise _error(f"letterbox_box: a {fmt!r} output has even sizes, got {ow} x {oh}")
        bw, bh = max(2, bw & ~1), max(2, bh & ~1)
        return ((ow - bw) // 2) & ~1, ((oh - bh) // 2) & ~1, bw, bh
    return (ow - bw) // 2, (oh - bh) // 2, bw, bh


def letterbox(image: Any, size: Any, fill: Any = 114, interpolation: str = "bilinear",
              stream: Optional[Stream] = None, format: Optional[str] = None, *, out: Any = None) -> Any:
    """Resize into `size` = (width, height) keeping the aspect ratio, centred (letterbox_box() gives where), the
    rest filled with `fill`: a grey level 0..255 (every colour channel, alpha 255; Y with U = V = 128 for 4:2:0) or
    one value per channel in the format's order. A list of images gives a list. `out`: memory to write instead of
    new memory (a list for a list)."""
    interp = _interp(interpolation, "letterbox")
    ow, oh = _size(size, "letterbox: size")
    items, batch = _as_list(image)
    s = _pick_stream(stream, _batch_device(items, "letterbox", out), "letterbox")
    imgs = [_check_image(o, format, s, f"letterbox: image {i}" if batch else "letterbox: image")
            for i, o in enumerate(items)]
    plan = [(_fill(fill, img.fmt, "letterbox: fill"), letterbox_box((img.width, img.height), (ow, oh), img.fmt))
            for img in imgs]
    targets = _Outs(out, len(imgs), "letterbox")
    kept = [[] for _ in imgs]
    mems = [targets.image(img.fmt, ow, oh, s, k) for img, k in zip(imgs, kept)]
    outs = []
    for img, (f, paste), mem, keep in zip(imgs, plan, mems, kept):
        _materialize(img, s, keep)
        _queue(s, _core.dvpp_crop_resize_paste, img.picture, None, _picture(mem, img.fmt, ow, oh), paste, f, interp,
               keep=keep)
        outs.append(mem)
    return outs if batch else outs[0]


# ----------------------------------------------------------------------------------------------- colour, normalise


def convert_color(image: Any, src: Optional[str] = None, dst: str = "rgb", matrix: str = "bt601",
                  full_range: bool = False, stream: Optional[Stream] = None, *, out: Any = None) -> Any:
    """Convert between formats of the same size: 4:2:0 ("nv12", "nv21", "i420") <-> packed ("rgb", "bgr", "rgba",
    "bgra" with alpha 255, "gray": the Y plane), packed <-> packed (channel order, alpha, grey as BT.601 luma as
    OpenCV), 4:2:0 <-> 4:2:0. `matrix` ("bt601", "bt709") and `full_range` apply where YUV meets RGB; "bt601"
    limited range is within 1 of cv2.cvtColor. `src` is the image's format (default: as recorded or by the shape;
    a 2-D image is "nv12"). A list gives a list. `out`: memory to write instead of new memory (a list for a
    list)."""
    dst_fmt = _format_name(dst, "convert_color: dst")
    code = _matrix(matrix, full_range, "convert_color")
    items, batch = _as_list(image)
    s = _pick_stream(stream, _batch_device(items, "convert_color", out), "convert_color")
    imgs = [_check_image(o, src, s, f"convert_color: image {i}" if batch else "convert_color: image", "nv12")
            for i, o in enumerate(items)]
    targets = _Outs(out, len(imgs), "convert_color")
    kept = [[] for _ in imgs]
    mems = [targets.image(dst_fmt, img.width, img.height, s, k) for img, k in zip(imgs, kept)]
    outs = []
    for img, mem, keep in zip(imgs, mems, kept):
        _materialize(img, s, keep)
        _queue(s, _core.dvpp_convert_color, img.picture, _picture(mem, dst_fmt, img.width, img.height), code,
               keep=keep)
        outs.append(mem)
    return outs if batch else outs[0]


def _layout(layout: Any, what: str) -> bool:
    """True for "chw"."""
    return _choice(layout, {"chw": True, "hwc": False}, f"{what}: layout")


def normalize(image: Any, mean: Any, std: Any, layout: str = "chw", dtype: Any = np.float32,
              stream: Optional[Stream] = None, format: Optional[str] = None, *, out: Any = None) -> DeviceMemory:
    """(pixel - mean[c]) / std[c] per channel c (a number: every channel), computed as fma(pixel, 1/std, -mean/std)
    in float32, written as `dtype` (float32, float16, "bfloat16" or ml_dtypes.bfloat16: rounded to nearest even;
    uint8, int8: rounded and saturated) in `layout` "chw" (channels, h, w) or "hwc" (h, w, channels). Packed
    images only (convert 4:2:0 first, or use preprocess). Pixel values are 0..255: torchvision's 0..1 mean and std
    are multiplied by 255. A list of images of one size and format gives one (n, ...) array. `out`: memory of that
    shape and dtype to write instead of new memory."""
    chw = _layout(layout, "normalize")
    dt, code = _dtype(dtype, "normalize")
    items, batch = _as_list(image)
    if batch and not items:
        raise _error("normalize: an empty batch (the output's size would be unknown)")
    s = _pick_stream(stream, _batch_device(items, "normalize", out), "normalize")
    imgs = [_check_image(o, format, s, f"normalize: image {i}" if batch else "normalize: image")
            for i, o in enumerate(items)]
    first = imgs[0]
    for i, img in enumerate(imgs):
        if _FORMATS[img.fmt][1] == 0:
            raise _error(f"normalize: image {i} is {img.fmt!r}; normalize takes packed images (convert_color it "
                         f"first, or use preprocess, which converts on the fly)")
        if (img.width, img.height, _FORMATS[img.fmt][1]) != (first.width, first.height, _FORMATS[first.fmt][1]):
            raise _error(f"normalize: image {i} is {img.width} x {img.height} {img.fmt!r} but image 0 is "
                         f"{first.width} x {first.height} {first.fmt!r}: a batch gives one array, so its images "
                         f"have one size and channel count (normalize them one by one otherwise)")
    c = _FORMATS[first.fmt][1]
    m = _per_channel(mean, c, "normalize: mean")
    d = _per_channel(std, c, "normalize: std")
    shape = (c, first.height, first.width) if chw else (first.height, first.width, c)
    keep: list = []
    dst = _Outs(out, 1, "normalize").take(((len(imgs),) + shape) if batch else shape, dt, s, keep)
    for img in imgs:
        _materialize(img, s, keep)
    step = c * first.width * first.height * dt.itemsize
    for i, img in enumerate(imgs):
        _queue(s, _core.dvpp_normalize, img.picture, dst.ptr + i * step, code, chw, m, d, keep=keep)
    return dst


# ----------------------------------------------------------------------------------------------- preprocess


def _is_encoded(obj: Any) -> bool:
    return isinstance(obj, (bytes, bytearray, memoryview)) or (isinstance(obj, np.ndarray) and obj.ndim == 1)


def _scaled_box(box: tuple, iw: int, ih: int, dw: int, dh: int) -> tuple:
    """`box` of an iw x ih image mapped onto its dw x dh decode (outward to whole pixels, kept inside)."""
    x0, y0 = box[0] * dw // iw, box[1] * dh // ih
    x1 = min(dw, -(-(box[0] + box[2]) * dw // iw))
    y1 = min(dh, -(-(box[1] + box[3]) * dh // ih))
    return x0, y0, max(1, x1 - x0), max(1, y1 - y0)


def preprocess(image: Any, size: Any, crop: Any = None, mean: Any = 0.0, std: Any = 1.0, layout: str = "chw",
               dtype: Any = np.float32, interpolation: str = "bilinear", *, dst: str = "rgb",
               format: Optional[str] = None, matrix: str = "bt601", full_range: bool = False, paste: Any = None,
               fill: Any = 0, scaled_decode: bool = True, stream: Optional[Stream] = None,
               device: Any = None, out: Any = None) -> DeviceMemory:
    """The fused pre-processing in one pass over each source: crop (`crop` = (x, y, width, height); None: all of
    it) -> resize to `size` = (width, height) (or into the box `paste` of it, the rest `fill`) -> colour conversion
    to `dst` ("rgb", "bgr" or "gray"; a 4:2:0 source with `matrix` and `full_range`) -> (pixel - mean) / std ->
    `layout` and `dtype`, as normalize(). The result equals crop_resize/letterbox, convert_color and normalize
    applied one after the other, bit for bit, with no intermediate image.

    `image` may be encoded JPEG (or PNG) bytes: it is decoded into `dst`'s format first, a JPEG with DCT scaling
    when `scaled_decode` (at the smallest of libjpeg's 1/8 .. 8/8 scales that leaves the crop at least as large as
    its destination, a fraction of a full decode; `crop` is in the original image's pixels, mapped onto that
    scale). A list is a batch (a box or a list of one box or None per image; encoded images decoded in one batch
    call): the output is (n, channels, height, width) ("chw") or (n, height, width, channels) ("hwc"); a single
    image gives (channels, height, width) or (height, width, channels). `device`: where encoded images are decoded
    when no device-memory image or stream says. `out`: memory of the output's shape and dtype to write instead of
    new memory."""
    what = "preprocess"
    ow, oh = _size(size, f"{what}: size")
    dst_fmt = _format_name(dst, f"{what}: dst", ("rgb", "bgr", "gray"))
    chw = _layout(layout, what)
    dt, code = _dtype(dtype, what)
    interp = _interp(interpolation, what)
    mcode = _matrix(matrix, full_range, what)
    if not isinstance(scaled_decode, (bool, np.bool_)):
        raise _error(f"{what}: scaled_decode must be a bool, got {scaled_decode!r}")
    c = _FORMATS[dst_fmt][1]
    m = _per_channel(mean, c, f"{what}: mean")
    d = _per_channel(std, c, f"{what}: std")
    pbox = None if paste is None else _box(paste, f"{what}: paste")
    f = _fill(fill, dst_fmt, f"{what}: fill")
    items, batch = _as_list(image)
    if batch and not items:
        raise _error(f"{what}: an empty batch")
    if crop is None or _is_box(crop):
        boxes = [None if crop is None else _box(crop, f"{what}: crop")] * len(items)
    elif batch and isinstance(crop, (list, tuple)) and len(crop) == len(items):
        boxes = [None if b is None else _box(b, f"{what}: crop of image {i}") for i, b in enumerate(crop)]
    else:
        raise _error(f"{what}: crop must be (x, y, width, height), None, or for a batch a list of one of those per "
                     f"image ({len(items)}), got {crop!r}")
    dev = _batch_device([o for o in items if not _is_encoded(o)], what, out)
    if dev is None and device is not None:
        dev = Device(device)
    elif dev is not None and device is not None and Device(device) != dev:
        raise _error(f"{what}: device={Device(device).name} but the images are on {dev.name}")
    s = _pick_stream(stream, dev, what)
    pw, ph = (ow, oh) if pbox is None else (pbox[2], pbox[3])

    # Every image checked (and every header read) before anything is queued.
    plan: list = []  # per image: ("image", _Image) | ("jpeg" | "png", encoded, (width, height))
    for i, obj in enumerate(items):
        w_ = f"{what}: image {i}" if batch else f"{what}: image"
        if not _is_encoded(obj):
            plan.append(("image", _check_image(obj, format, s, w_)))
            continue
        e = _encoded(obj, w_)
        magic = bytes(memoryview(e).cast("B")[:8])
        if magic[:2] == b"\xff\xd8":
            plan.append(("jpeg", e, _core.dvpp_jpeg_get_info(e)[:2]))
        elif magic == b"\x89PNG\r\n\x1a\n":
            plan.append(("png", e, _core.dvpp_png_get_info(e)[:2]))
        else:
            raise _error(f"{w_}: encoded data that is neither JPEG nor PNG (it starts with "
                         f"{magic.hex(' ') or 'nothing'})")
        b = boxes[i]
        iw, ih = plan[-1][2]
        if b is not None and (b[0] + b[2] > iw or b[1] + b[3] > ih):
            raise _error(f"{w_}: crop {b} lies outside the image's {iw} x {ih} pixels")

    keep: list = []
    shape = (c, oh, ow) if chw else (oh, ow, c)
    dst_mem = _Outs(out, 1, what).take(((len(items),) + shape) if batch else shape, dt, s, keep)
    pictures: list = [None] * len(items)
    crops: list = list(boxes)
    jpegs = []  # (index, encoded, (width, height), out picture, (min width, min height))
    for i, entry in enumerate(plan):
        if entry[0] == "image":
            pictures[i] = _materialize(entry[1], s, keep).picture
            continue
        kind, e, (iw, ih) = entry
        mem = _Outs(None, 1, what).image(dst_fmt, iw, ih, s, keep)  # a full-size decode's capacity (a scaled one
        # writes its real size)
        if kind == "png":
            pictures[i] = _queue(s, _core.dvpp_decode_png, e, _picture(mem, dst_fmt, iw, ih), keep=keep)
            continue
        box = boxes[i] if boxes[i] is not None else (0, 0, iw, ih)
        # The smallest decode whose crop still covers its destination: scale * box >= destination on both sides.
        mw = min(iw, -(-pw * iw // box[2])) if scaled_decode else 0
        mh = min(ih, -(-ph * ih // box[3])) if scaled_decode else 0
        jpegs.append((i, e, (iw, ih), _picture(mem, dst_fmt, iw, ih), (mw, mh)))
    if jpegs:
        written = _queue(s, _core.dvpp_decode_jpeg_batch, [j[1] for j in jpegs], [j[4][0] for j in jpegs],
                         [j[4][1] for j in jpegs], [j[3] for j in jpegs], keep=keep)
        for (i, _, (iw, ih), _, _), pic in zip(jpegs, written):
            pictures[i] = pic
            if boxes[i] is not None and (pic[3], pic[4]) != (iw, ih):
                crops[i] = _scaled_box(boxes[i], iw, ih, pic[3], pic[4])
    rects = None
    if any(b is not None for b in crops):
        rects = [b if b is not None else (0, 0, p[3], p[4]) for b, p in zip(crops, pictures)]
    _queue(s, _core.dvpp_preprocess, pictures, rects, ow, oh, interp, _FORMATS[dst_fmt][0], mcode, code, chw, m, d,
           pbox, f, dst_mem.ptr, keep=keep)
    return dst_mem
