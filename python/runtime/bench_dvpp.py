"""runtime-bench dvpp — DVPP (issue 16) against OpenCV, simplejpeg, Pillow, Pillow-SIMD and torchvision in one run.

Rows (each a median over repeats, every contestant in turn within a repeat; ratio > 1: ours is better):
  resize_1080p_rgb_224      1920x1080 RGB -> 224x224 bilinear                           ms per image
  nv12_1080p_to_rgb         NV12 1920x1080 -> RGB (BT.601 limited, OpenCV's matrix)      ms per image
  crop_resize_batch         --crops crops of a 1080p RGB photograph, each -> 224x224     ms per batch
  jpeg_decode_batch_1080p   --batch 1080p JPEG photographs (quality 90, 4:2:0) -> RGB    images/s
  classification_pipeline   decode -> shorter side 256 -> centre crop 224 -> (x - mean) / std, CHW float32
                                                                                       images/s

Ours is runtime.dvpp on one device (default cpu:0 with --threads executors), timed up to the end of a synchronize
of its stream, inputs already in device memory except the JPEG bytes (host memory, as for every peer), outputs
allocated by each call as the peers' are. The peers run on the host with the same number of threads: OpenCV with
cv2.setNumThreads(--threads) (sequential loops), or --threads Python threads with cv2.setNumThreads(1) ("pool" rows:
every contestant there releases the GIL); Pillow itself is single-threaded. Pillow-SIMD cannot share a process with
Pillow (both are the package PIL): give a directory it is installed in (`pip install --target DIR pillow-simd`) with
--pillow-simd DIR or $RUNTIME_BENCH_PILLOW_SIMD, and its rows are measured in a child process right after.

Test images are made in memory, deterministically: scikit-image's `data` photographs, cut to 16:9, upscaled to
1920x1080 (bicubic) and encoded by cv2.imencode at quality 90. Every row checks its results (ours against OpenCV's
exact counterpart, the pipeline's peers against ours within their algorithms' differences); the run exits with
status 2 on a wrong result, 1 when one of ours failed (its row says how).
Usage: ``runtime-bench dvpp [--quick] [--json] [--device cpu:0] [--threads N] [--only ROW,...]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import gc
import io
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any, Callable, Optional

import numpy as np

ROWS = ("resize_1080p_rgb_224", "nv12_1080p_to_rgb", "crop_resize_batch", "jpeg_decode_batch_1080p",
        "classification_pipeline")

#: The photographs of skimage.data the test images are made of (colour, shipped with scikit-image: no download).
PHOTOS = ("astronaut", "coffee", "rocket", "chelsea", "hubble_deep_field", "immunohistochemistry", "retina")
WIDTH, HEIGHT = 1920, 1080
JPEG_QUALITY = 90
OUT_SIZE = 224            # resize target and centre crop
RESIZE_SHORTER = 256      # the classification pipeline's resize of the shorter side
#: ImageNet's mean and deviation, on 0..255 pixels.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)

WRONG = 2  # exit status of a run whose results failed their check


class WrongResult(Exception):
    """A contestant computed something other than the row's operation."""


# ---------------------------------------------------------------------------------------------- test images

@functools.lru_cache(maxsize=None)
def photo_1080p(i: int) -> np.ndarray:
    """Test photograph i, (1080, 1920, 3) uint8 RGB: PHOTOS[i % 7] cut to 16:9 (centred), upscaled bicubically;
    mirrored left-right on every second pass through the list, so a batch never holds the same image twice."""
    import cv2
    import skimage.data

    a = np.asarray(getattr(skimage.data, PHOTOS[i % len(PHOTOS)])())
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    a = a[:, :, :3]
    h, w = a.shape[:2]
    cw, ch = (h * 16 // 9, h) if w * 9 >= h * 16 else (w, w * 9 // 16)
    x0, y0 = (w - cw) // 2, (h - ch) // 2
    a = cv2.resize(np.ascontiguousarray(a[y0:y0 + ch, x0:x0 + cw]), (WIDTH, HEIGHT), interpolation=cv2.INTER_CUBIC)
    return np.ascontiguousarray(a[:, ::-1]) if (i // len(PHOTOS)) % 2 else a


@functools.lru_cache(maxsize=None)
def jpeg_1080p(i: int) -> bytes:
    """photo_1080p(i) as a JPEG: cv2.imencode, quality 90 (baseline, 4:2:0 chroma: OpenCV's defaults)."""
    import cv2

    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(photo_1080p(i)[:, :, ::-1]),
                           [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    if not ok:
        raise RuntimeError("cv2.imencode failed")
    return buf.tobytes()


def nv12_of(rgb: np.ndarray) -> np.ndarray:
    """The NV12 picture (h * 3 // 2, w) of an RGB image, by OpenCV's RGB -> I420 (BT.601 limited) and interleaving
    the U and V planes."""
    import cv2

    h, w = rgb.shape[:2]
    i420 = cv2.cvtColor(rgb, cv2.COLOR_RGB2YUV_I420)
    q = (h // 2) * (w // 2)
    u = i420[h:].reshape(-1)[:q].reshape(h // 2, w // 2)
    v = i420[h:].reshape(-1)[q:].reshape(h // 2, w // 2)
    return np.concatenate([i420[:h], np.stack([u, v], axis=2).reshape(h // 2, w)])


def crop_boxes(n: int, width: int = WIDTH, height: int = HEIGHT) -> list:
    """n crop rectangles (x, y, w, h) inside a width x height picture, from 96 pixels to the picture's height, aspect
    3:4 .. 4:3 — the variable crops of a detector's second stage. Deterministic."""
    rng = np.random.default_rng(16)
    boxes = []
    for _ in range(n):
        w = int(rng.integers(96, height + 1))
        h = int(min(height, max(96, round(w * float(rng.uniform(0.75, 4 / 3))))))
        boxes.append((int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1)), w, h))
    return boxes


def resized_size(width: int, height: int, shorter: int = RESIZE_SHORTER) -> tuple:
    """(w, h) after resizing the shorter side to `shorter`, the longer one scaled and truncated (torchvision's
    Resize(int) rule)."""
    if width <= height:
        return shorter, int(shorter * height / width)
    return int(shorter * width / height), shorter


def centre_offsets(width: int, height: int, crop: int = OUT_SIZE) -> tuple:
    """(left, top) of a centred crop x crop square (torchvision's CenterCrop rounding)."""
    return int(round((width - crop) / 2.0)), int(round((height - crop) / 2.0))


def centre_crop_box(width: int, height: int, shorter: int = RESIZE_SHORTER, crop: int = OUT_SIZE) -> tuple:
    """The rectangle (x, y, w, h) of the source picture that 'resize the shorter side to `shorter`, then take the
    centred crop x crop square' keeps, in source pixels (rounded to whole pixels): resizing just that rectangle to
    crop x crop is the same pipeline in one step, as DALI and the fused rtDvppPreprocess do it."""
    rw, rh = resized_size(width, height, shorter)
    left, top = centre_offsets(rw, rh, crop)
    sx, sy = width / rw, height / rh
    w, h = min(width, int(round(crop * sx))), min(height, int(round(crop * sy)))
    x, y = min(width - w, int(round(left * sx))), min(height - h, int(round(top * sy)))
    return x, y, w, h


# ---------------------------------------------------------------------------------------------- timing

class Contestant:
    """One way of doing a row's work: `fn()` does it once (ours: up to the end of a synchronize) and returns the
    result, `setup()` (untimed) runs before each call (cv2.setNumThreads for the pool rows)."""

    def __init__(self, name: str, fn: Optional[Callable[[], Any]], *, ours: bool = False, how: str = "",
                 setup: Optional[Callable[[], None]] = None, note: str = "") -> None:
        self.name, self.fn, self.ours, self.how, self.setup = name, fn, ours, how, setup
        self.note = note  # "missing: why" when fn is None; "error: ..." when it raised
        self.times: list = []
        self.result: Any = None


#: How long each contestant's turn starts with untimed calls (at least one): on this VM a core left idle or busy with
#: another contestant's single-threaded work runs a 2-thread call slowly for about the next millisecond (a
#: 1080p -> 224 resize after 10 ms idle: 0.66, 0.33, 0.25, 0.17, 0.15, 0.11 ms, then 0.09 ms steady), so one untimed
#: call measured the previous contestant's after-effects more than the operation.
SETTLE_SECONDS = 0.005


def measure(contestants: list, reps: int, warmup: int, rounds: int = 7, settle_s: float = SETTLE_SECONDS) -> None:
    """Warm-up calls, then `rounds` rounds in each of which every contestant makes ceil(reps / rounds) timed calls in
    a row (the order rotating by one each round, so drift falls on all alike), after untimed calls for settle_s
    seconds (at least one) that absorb what the previous contestant left behind (its thread pool spinning down, idle
    cores, the caches); each timed call's wall time goes into c.times. A contestant that raises while warming up gets
    an "error: ..." note and no times; the others go on."""
    live = [c for c in contestants if c.fn is not None]
    for c in live:
        try:
            for _ in range(warmup):
                if c.setup:
                    c.setup()
                c.result = c.fn()
        except Exception as e:  # a failing contestant is a finding, not a crash of the benchmark (see main's status)
            c.note = "error: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:120] if str(e) else "")
    live = [c for c in live if not c.note]
    rounds = max(1, min(rounds, reps))
    per_round = -(-reps // rounds)
    gc.collect()
    gc.disable()  # no collection pauses inside a timed call
    try:
        for r in range(rounds):
            for k in range(len(live)):
                c = live[(k + r) % len(live)]
                settle_until = time.perf_counter() + settle_s
                while True:  # untimed
                    if c.setup:
                        c.setup()
                    c.fn()
                    if time.perf_counter() >= settle_until:
                        break
                for _ in range(per_round):
                    if c.setup:
                        c.setup()
                    t = time.perf_counter()
                    c.fn()
                    c.times.append(time.perf_counter() - t)
    finally:
        gc.enable()


def median_min_max(values: list) -> tuple:
    v = sorted(values)
    n = len(v)
    med = v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    return med, v[0], v[-1]


class Row:
    """A row of the table: one operation, ours and its peers. `items` per call turn seconds into the unit: ms per
    call (lower is better) or items per second (higher is better). `targets`: (peer-name prefix, factor) pairs the
    issue asks ours to reach (ours better by at least `factor` against every peer whose name starts so)."""

    def __init__(self, metric: str, unit: str, what: str, items: int, targets: tuple, target_text: str) -> None:
        self.metric, self.unit, self.what, self.items = metric, unit, what, items
        self.targets, self.target_text = targets, target_text
        self.contestants: list = []
        self.checks: list = []  # what was verified, as sentences

    @property
    def higher_is_better(self) -> bool:
        return self.unit.endswith("/s")

    def value(self, seconds: float) -> float:
        return self.items / seconds if self.higher_is_better else seconds * 1e3

    def cell(self, c: Contestant) -> dict:
        """A contestant's figures in the row's unit: value (the median), min, max, runs; its note if any."""
        d: dict = {"name": c.name, "how": c.how, "value": None, "min": None, "max": None}
        if c.times:
            vals = sorted(self.value(t) for t in median_min_max(c.times))
            d.update(value=vals[1], min=vals[0], max=vals[2], runs=len(c.times))
        if c.note:
            d["note"] = c.note
        return d

    def record(self, device: str, threads: int) -> dict:
        ours = next(c for c in self.contestants if c.ours)
        rec: dict = {"metric": self.metric, "unit": self.unit, "what": self.what, "device": device,
                     "threads": threads, "better": "higher" if self.higher_is_better else "lower",
                     "ours": self.cell(ours), "peers": [], "target": self.target_text,
                     "targets": [list(t) for t in self.targets], "checks": self.checks}
        add_peers(rec, [self.cell(c) for c in self.contestants if not c.ours])
        return rec


def add_peers(rec: dict, peers: list) -> None:
    """Appends peer cells to a row record with ours' ratio against each, and (re)computes `met`: ours better by the
    factor of every target (peer-name prefix, factor) against each present peer it names; None when none is."""
    for p in peers:
        p["ratio"] = ratio(rec["ours"]["value"], p["value"], rec["better"] == "higher")
    rec["peers"] += peers
    met = [p["ratio"] >= factor for prefix, factor in rec["targets"] for p in rec["peers"]
           if p["name"].startswith(prefix) and p["ratio"] is not None]
    rec["met"] = all(met) if met else None


def ratio(ours: Optional[float], peer: Optional[float], higher_is_better: bool) -> Optional[float]:
    """How many times better ours is (> 1: ours better), or None when either figure is missing."""
    if not ours or not peer:
        return None
    return ours / peer if higher_is_better else peer / ours


# ---------------------------------------------------------------------------------------------- ours

class Ours:
    """runtime.dvpp on one device, every call on one stream and synchronized before it returns."""

    def __init__(self, device: str, threads: int) -> None:
        import runtime

        if device.startswith("cpu"):
            runtime.init(cpu_executors=threads)
        from runtime import dvpp  # noqa: F401  (ImportError: the caller reports ours missing)

        self.rt, self.dvpp = runtime, dvpp
        self.device = runtime.Device(device)
        # A service keeps a caching allocator on, as CuPy's and PyTorch's are by default (numpy's arrays come from
        # malloc, which hands back the block just freed): without it each call's fresh output is mapped and touched
        # page by page, ~0.1 ms per MiB on this machine.
        runtime.enable_memory_reuse(True, device=self.device)
        self.label = "%s, %d executors" % (device, threads) if device.startswith("cpu") else device
        self.stream = runtime.Stream(self.device)

    def to_device(self, host: np.ndarray) -> Any:
        return self.rt.to_device(host, device=self.device)

    def _sync(self, out: Any) -> Any:
        self.stream.synchronize()
        return out

    def resize(self, src: Any, size: tuple) -> Any:
        return self._sync(self.dvpp.resize(src, size, interpolation="bilinear", stream=self.stream))

    def nv12_to_rgb(self, nv12: Any) -> Any:
        return self._sync(self.dvpp.convert_color(nv12, src="nv12", dst="rgb", stream=self.stream))

    def crop_resize_batch(self, src: Any, boxes: list, size: tuple) -> Any:
        return self._sync(self.dvpp.crop_resize(src, boxes, size, stream=self.stream))

    def decode_batch(self, jpegs: list) -> Any:
        return self._sync(self.dvpp.decode_jpeg(jpegs, format="rgb", stream=self.stream))

    def classify_batch(self, jpegs: list, boxes: list) -> Any:
        return self._sync(self.dvpp.preprocess(jpegs, (OUT_SIZE, OUT_SIZE), crop=boxes, mean=MEAN, std=STD,
                                               layout="chw", dtype=np.float32, stream=self.stream))

    def host(self, mem: Any) -> np.ndarray:
        """A host copy of device memory (or of each of a list of it)."""
        if isinstance(mem, (list, tuple)):
            return [self.host(m) for m in mem]
        return np.array(mem.numpy(), copy=True)


# ---------------------------------------------------------------------------------------------- peers

def _pool_map(pool: concurrent.futures.ThreadPoolExecutor, fn: Callable, items: list) -> list:
    return list(pool.map(fn, items))


def _pillow_version() -> str:
    import PIL

    return PIL.__version__


def _is_pillow_simd() -> bool:
    return ".post" in _pillow_version()  # Pillow-SIMD's versions are Pillow's with a .postN


def _pillow_name() -> str:
    return ("Pillow-SIMD " if _is_pillow_simd() else "Pillow ") + _pillow_version()


def _cv2_classify(data: bytes, out: np.ndarray, flags: Optional[int] = None) -> None:
    """The pipeline as an OpenCV + numpy user writes it, into out (3, 224, 224) float32."""
    import cv2

    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR if flags is None else flags)
    rw, rh = resized_size(bgr.shape[1], bgr.shape[0])
    r = cv2.resize(bgr, (rw, rh), interpolation=cv2.INTER_LINEAR)
    left, top = centre_offsets(rw, rh)
    x = r[top:top + OUT_SIZE, left:left + OUT_SIZE, ::-1].astype(np.float32)  # BGR -> RGB
    x -= np.float32(MEAN)
    x *= np.float32([1 / s for s in STD])
    out[...] = x.transpose(2, 0, 1)


def _pillow_classify(data: bytes, out: np.ndarray) -> None:
    """The pipeline as torchvision's classic PIL transforms do it (Resize(256) with Pillow's bilinear, CenterCrop,
    ToTensor + Normalize as numpy), into out (3, 224, 224) float32."""
    from PIL import Image

    im = Image.open(io.BytesIO(data)).convert("RGB")
    rw, rh = resized_size(*im.size)
    im = im.resize((rw, rh), Image.BILINEAR)
    left, top = centre_offsets(rw, rh)
    x = np.asarray(im.crop((left, top, left + OUT_SIZE, top + OUT_SIZE)), dtype=np.float32)
    x -= np.float32(MEAN)
    x *= np.float32([1 / s for s in STD])
    out[...] = x.transpose(2, 0, 1)


def _pillow_decode(data: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def pillow_contestants(row: str, threads: int, batch: int, crops: int, pool: Any) -> list:
    """Pillow's (or Pillow-SIMD's, whichever PIL this process imports) contestants of a row."""
    from PIL import Image

    name = _pillow_name()
    if row == "resize_1080p_rgb_224":
        im = Image.fromarray(photo_1080p(0))
        return [Contestant(name + " Image.resize BILINEAR", lambda: im.resize((OUT_SIZE, OUT_SIZE), Image.BILINEAR),
                           how="1 thread (antialiased: support widened by the scale)")]
    if row == "nv12_1080p_to_rgb":
        return [Contestant(name, None, note="missing: Pillow reads no NV12 (no 4:2:0 YUV mode)")]
    if row == "crop_resize_batch":
        im = Image.fromarray(photo_1080p(0))
        boxes = [(x, y, x + w, y + h) for x, y, w, h in crop_boxes(crops)]
        one = lambda b: im.resize((OUT_SIZE, OUT_SIZE), Image.BILINEAR, box=b)  # noqa: E731
        return [Contestant(name + " Image.resize(box=) BILINEAR", lambda: [one(b) for b in boxes], how="sequential"),
                Contestant(name + " Image.resize(box=) BILINEAR", lambda: _pool_map(pool, one, boxes),
                           how="pool of %d threads" % threads)]
    jpegs = [jpeg_1080p(i) for i in range(batch)]
    if row == "jpeg_decode_batch_1080p":
        return [Contestant(name + " Image.open().convert('RGB')", lambda: [_pillow_decode(j) for j in jpegs],
                           how="sequential"),
                Contestant(name + " Image.open().convert('RGB')", lambda: _pool_map(pool, _pillow_decode, jpegs),
                           how="pool of %d threads" % threads)]
    if row == "classification_pipeline":
        def run() -> np.ndarray:
            out = np.empty((batch, 3, OUT_SIZE, OUT_SIZE), np.float32)
            list(pool.map(lambda i: _pillow_classify(jpegs[i], out[i]), range(batch)))
            return out
        return [Contestant(name + " + numpy (torchvision's PIL transforms)", run, how="pool of %d threads" % threads)]
    raise ValueError(row)


def cv2_contestants(row: str, threads: int, batch: int, crops: int, pool: Any) -> list:
    import cv2

    name = "OpenCV " + cv2.__version__
    par = lambda: cv2.setNumThreads(threads)  # noqa: E731
    one_thread = lambda: cv2.setNumThreads(1)  # noqa: E731
    par_how, pool_how = "cv2.setNumThreads(%d)" % threads, "pool of %d threads, cv2.setNumThreads(1)" % threads
    if row == "resize_1080p_rgb_224":
        src = photo_1080p(0)
        return [Contestant("%s cv2.resize %s" % (name, interp),
                           functools.partial(cv2.resize, src, (OUT_SIZE, OUT_SIZE),
                                             interpolation=getattr(cv2, interp)), how=par_how, setup=par)
                for interp in ("INTER_LINEAR", "INTER_LINEAR_EXACT")]
    if row == "nv12_1080p_to_rgb":
        nv12 = nv12_of(photo_1080p(0))
        return [Contestant(name + " cv2.cvtColor COLOR_YUV2RGB_NV12",
                           functools.partial(cv2.cvtColor, nv12, cv2.COLOR_YUV2RGB_NV12), how=par_how, setup=par)]
    if row == "crop_resize_batch":
        src = photo_1080p(0)
        boxes = crop_boxes(crops)
        one = lambda b: cv2.resize(src[b[1]:b[1] + b[3], b[0]:b[0] + b[2]], (OUT_SIZE, OUT_SIZE),  # noqa: E731
                                   interpolation=cv2.INTER_LINEAR)
        return [Contestant(name + " cv2.resize INTER_LINEAR of each crop", lambda: [one(b) for b in boxes],
                           how="sequential, " + par_how, setup=par),
                Contestant(name + " cv2.resize INTER_LINEAR of each crop", lambda: _pool_map(pool, one, boxes),
                           how=pool_how, setup=one_thread)]
    jpegs = [jpeg_1080p(i) for i in range(batch)]
    if row == "jpeg_decode_batch_1080p":
        import simplejpeg

        dec = lambda j: cv2.imdecode(np.frombuffer(j, np.uint8), cv2.IMREAD_COLOR)  # noqa: E731
        sj = lambda j: simplejpeg.decode_jpeg(j, colorspace="RGB")  # noqa: E731
        sj_name = "simplejpeg %s decode_jpeg RGB" % simplejpeg.__version__
        return [Contestant(name + " cv2.imdecode", lambda: [dec(j) for j in jpegs], how="sequential", setup=par),
                Contestant(name + " cv2.imdecode", lambda: _pool_map(pool, dec, jpegs), how=pool_how,
                           setup=one_thread),
                Contestant(sj_name, lambda: [sj(j) for j in jpegs], how="sequential"),
                Contestant(sj_name, lambda: _pool_map(pool, sj, jpegs), how="pool of %d threads" % threads)]
    if row == "classification_pipeline":
        def run(flags: Optional[int] = None) -> Callable[[], np.ndarray]:
            def go() -> np.ndarray:
                out = np.empty((batch, 3, OUT_SIZE, OUT_SIZE), np.float32)
                list(pool.map(lambda i: _cv2_classify(jpegs[i], out[i], flags), range(batch)))
                return out
            return go

        def seq() -> np.ndarray:
            out = np.empty((batch, 3, OUT_SIZE, OUT_SIZE), np.float32)
            for i in range(batch):
                _cv2_classify(jpegs[i], out[i])
            return out
        return [Contestant(name + " + numpy", seq, how="sequential, " + par_how, setup=par),
                Contestant(name + " + numpy", run(), how=pool_how, setup=one_thread),
                Contestant(name + " IMREAD_REDUCED_COLOR_4 (DCT-scaled decode) + numpy",
                           run(cv2.IMREAD_REDUCED_COLOR_4), how=pool_how, setup=one_thread)]
    raise ValueError(row)


def torchvision_contestants(row: str, threads: int, batch: int) -> list:
    """torchvision.transforms.v2 for the pipeline row, where torch imports."""
    if row != "classification_pipeline":
        return []
    try:
        import torch
        import torchvision
        from torchvision.io import decode_jpeg
        from torchvision.transforms import v2
    except Exception as e:  # ImportError, or a torch that does not load here
        return [Contestant("torchvision.transforms.v2", None,
                           note="missing: torch / torchvision do not import (%s)" % str(e).splitlines()[0][:80])]
    torch.set_num_threads(threads)
    tf = v2.Compose([v2.Resize(RESIZE_SHORTER, antialias=True), v2.CenterCrop(OUT_SIZE),
                     v2.ToDtype(torch.float32, scale=True),
                     v2.Normalize([m / 255 for m in MEAN], [s / 255 for s in STD])])
    datas = [torch.frombuffer(bytearray(jpeg_1080p(i)), dtype=torch.uint8) for i in range(batch)]

    def run() -> np.ndarray:
        out = torch.empty((batch, 3, OUT_SIZE, OUT_SIZE), dtype=torch.float32)
        for i, d in enumerate(datas):
            out[i] = tf(decode_jpeg(d))
        return out.numpy()  # (x/255 - m/255) / (s/255) = (x - m) / s: the same figures as the others'
    return [Contestant("torchvision %s transforms.v2 (decode_jpeg, Resize, CenterCrop, ToDtype, Normalize)"
                       % torchvision.__version__, run, how="torch.set_num_threads(%d)" % threads)]


# ---------------------------------------------------------------------------------------------- checks

def _max_diff(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.abs(a.astype(np.int32) - b.astype(np.int32)).max())


def check_row(row: Row, ours: Ours) -> None:
    """Verifies what each contestant computed after the warm-up; raises WrongResult. Appends what was checked."""
    import cv2

    res = {c.name + " | " + c.how: c.result for c in row.contestants if c.result is not None}
    mine = next(c for c in row.contestants if c.ours)
    got = ours.host(mine.result)
    m = row.metric
    if m == "resize_1080p_rgb_224":
        want = cv2.resize(photo_1080p(0), (OUT_SIZE, OUT_SIZE), interpolation=cv2.INTER_LINEAR_EXACT)
        if got.shape != want.shape or not np.array_equal(got, want):
            raise WrongResult("%s: ours differs from cv2.resize INTER_LINEAR_EXACT (max %d)" % (
                m, _max_diff(got, want) if got.shape == want.shape else -1))
        row.checks.append("ours equals cv2.resize INTER_LINEAR_EXACT exactly")
    elif m == "nv12_1080p_to_rgb":
        want = cv2.cvtColor(nv12_of(photo_1080p(0)), cv2.COLOR_YUV2RGB_NV12)
        if got.shape != want.shape or _max_diff(got, want) > 1:
            raise WrongResult("%s: ours is not within 1 of cv2.cvtColor" % m)
        row.checks.append("ours within 1 of cv2.cvtColor COLOR_YUV2RGB_NV12 (max %d)" % _max_diff(got, want))
    elif m == "crop_resize_batch":
        src = photo_1080p(0)
        for k, (x, y, w, h) in enumerate(crop_boxes(len(got))):
            want = cv2.resize(np.ascontiguousarray(src[y:y + h, x:x + w]), (OUT_SIZE, OUT_SIZE),
                              interpolation=cv2.INTER_LINEAR_EXACT)
            if not np.array_equal(got[k], want):
                raise WrongResult("%s: ours' crop %d differs from cv2.resize INTER_LINEAR_EXACT" % (m, k))
        row.checks.append("each of ours' %d crops equals cv2.resize INTER_LINEAR_EXACT of it exactly" % len(got))
    elif m == "jpeg_decode_batch_1080p":
        worst = 0
        for k, img in enumerate(got):
            want = cv2.imdecode(np.frombuffer(jpeg_1080p(k), np.uint8), cv2.IMREAD_COLOR)[:, :, ::-1]
            if img.shape != want.shape:
                raise WrongResult("%s: image %d shape %s, cv2.imdecode's %s" % (m, k, img.shape, want.shape))
            d = np.abs(img.astype(np.int16) - want)
            if d.mean() > 0.5:
                raise WrongResult("%s: image %d differs from cv2.imdecode by %.2f on average" % (m, k, d.mean()))
            worst = max(worst, int(d.max()))
        for key, r in res.items():
            if key.startswith("simplejpeg") and _max_diff(r[0], got[0]) > 8:
                raise WrongResult("%s: %s differs from ours by %d" % (m, key, _max_diff(r[0], got[0])))
        row.checks.append("ours against cv2.imdecode (BGR -> RGB): mean difference <= 0.5, max %d "
                          "(libjpeg-turbo 2.1 here, OpenCV's bundled 3.x)" % worst)
    elif m == "classification_pipeline":
        got = np.asarray(got)
        if got.shape[1:] != (3, OUT_SIZE, OUT_SIZE) or got.dtype != np.float32:
            raise WrongResult("%s: ours has shape %s %s" % (m, got.shape, got.dtype))
        std = np.float32(STD).reshape(1, 3, 1, 1)
        for key, r in res.items():
            if key.startswith(mine.name):
                continue
            diff = float(np.abs((np.asarray(r) - got) * std).mean())  # in 0..255 pixel levels
            if diff > 6:
                raise WrongResult("%s: %s differs from ours by %.2f levels on average" % (m, key.split(" |")[0], diff))
            row.checks.append("mean difference from %s: %.2f levels" % (key.replace(" | ", " (") + ")", diff))


# ---------------------------------------------------------------------------------------------- rows

def row_frame(name: str, batch: int, crops: int) -> Row:
    """Row `name` without its contestants: unit, description, items per call, the issue's targets."""
    import cv2

    if name == "resize_1080p_rgb_224":
        return Row(name, "ms", "1920x1080 RGB -> 224x224 bilinear", 1, (("OpenCV", 1.0), ("Pillow-SIMD", 1.0)),
                   ">= OpenCV, Pillow-SIMD")
    if name == "nv12_1080p_to_rgb":
        return Row(name, "ms", "NV12 1920x1080 -> RGB888, BT.601 limited", 1, (("OpenCV", 1.0),), ">= OpenCV")
    if name == "crop_resize_batch":
        return Row(name, "ms", "%d crops (96..1080 px) of a 1080p RGB photo -> 224x224 bilinear, per batch" % crops,
                   1, (("OpenCV", 1.0), ("Pillow-SIMD", 1.0)), ">= OpenCV, Pillow-SIMD")
    if name == "jpeg_decode_batch_1080p":
        return Row(name, "img/s", "%d 1080p JPEG photos (q%d, 4:2:0) -> RGB" % (batch, JPEG_QUALITY), batch,
                   (("OpenCV", 1.0), ("simplejpeg", 1.0)), ">= cv2.imdecode, simplejpeg")
    if name == "classification_pipeline":
        return Row(name, "img/s", "%d 1080p JPEGs: decode, shorter side 256, centre 224, normalise, CHW f32" % batch,
                   batch, (("OpenCV %s + numpy" % cv2.__version__, 1.3), ("torchvision", 1.0)),
                   ">= 1.3x OpenCV + numpy, >= torchvision")
    raise SystemExit("runtime-bench dvpp: --only %r: no such row (rows: %s)" % (name, ", ".join(ROWS)))


_OURS_CALL = {"resize_1080p_rgb_224": "resize", "nv12_1080p_to_rgb": "convert_color",
              "crop_resize_batch": "crop_resize (one batch call)", "jpeg_decode_batch_1080p": "decode_jpeg (a list)",
              "classification_pipeline": "preprocess (JPEG bytes: fused, DCT-scaled decode)"}


def ours_contestant(name: str, o: Optional[Ours], missing: str, batch: int, crops: int) -> Contestant:
    """Our contestant of row `name`, its input put in device memory first (JPEG bytes stay on the host)."""
    label = "ours runtime.dvpp." + _OURS_CALL[name]
    if o is None:
        return Contestant(label, None, ours=True, note=missing)
    fn: Callable[[], Any]
    if name == "resize_1080p_rgb_224":
        src = o.to_device(photo_1080p(0))
        fn = lambda: o.resize(src, (OUT_SIZE, OUT_SIZE))  # noqa: E731
    elif name == "nv12_1080p_to_rgb":
        nv12 = o.to_device(nv12_of(photo_1080p(0)))
        fn = lambda: o.nv12_to_rgb(nv12)  # noqa: E731
    elif name == "crop_resize_batch":
        src, boxes = o.to_device(photo_1080p(0)), crop_boxes(crops)
        fn = lambda: o.crop_resize_batch(src, boxes, (OUT_SIZE, OUT_SIZE))  # noqa: E731
    else:
        jpegs = [jpeg_1080p(i) for i in range(batch)]
        if name == "jpeg_decode_batch_1080p":
            fn = lambda: o.decode_batch(jpegs)  # noqa: E731
        else:
            boxes = [centre_crop_box(WIDTH, HEIGHT)] * batch
            fn = lambda: o.classify_batch(jpegs, boxes)  # noqa: E731
    return Contestant(label, fn, ours=True, how=o.label)


def build_rows(names: list, ours: Optional[Ours], ours_missing: str, threads: int, batch: int, crops: int,
               pool: Any) -> list:
    rows = []
    for name in names:
        row = row_frame(name, batch, crops)
        row.contestants = [ours_contestant(name, ours, ours_missing, batch, crops)]
        row.contestants += cv2_contestants(name, threads, batch, crops, pool)
        row.contestants += pillow_contestants(name, threads, batch, crops, pool)
        row.contestants += torchvision_contestants(name, threads, batch)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------- Pillow-SIMD

def pillow_worker(names: list, threads: int, batch: int, crops: int, reps: int, warmup: int) -> list:
    """The child process of --pillow-simd: this process's Pillow contestants of each row, measured, as
    [{"metric", "peers": [cell, ...]}, ...]."""
    out = []
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for name in names:
            row = row_frame(name, batch, crops)
            cs = pillow_contestants(name, threads, batch, crops, pool)
            measure(cs, reps, warmup)
            out.append({"metric": name, "peers": [row.cell(c) for c in cs]})
    return out


def run_pillow_simd(path: str, names: list, args: Any, reps: int, warmup: int) -> tuple:
    """Measures Pillow-SIMD (installed under `path`) in a child process; (records by metric, None) or ({}, why)."""
    if not os.path.isdir(os.path.join(path, "PIL")):
        return {}, "missing: no PIL package under %s (pip install --target %s pillow-simd)" % (path, path)
    env = dict(os.environ)
    env["PYTHONPATH"] = path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # This file run as a script by runpy (which leaves sys.path alone: the package's own modules shadow nothing, and
    # the child needs neither the runtime nor its extension), in the Pillow-SIMD directory, which PYTHONPATH puts
    # before site-packages' Pillow.
    run = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    cmd = [sys.executable, "-c", run, os.path.abspath(__file__), "--pillow-worker", "--threads", str(args.threads),
           "--batch", str(args.batch), "--crops", str(args.crops), "--reps", str(reps), "--warmup", str(warmup),
           "--only", ",".join(names)]
    p = subprocess.run(cmd, env=env, cwd=path, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        return {}, "error: the Pillow-SIMD child exited with %d: %s" % (p.returncode, p.stderr.strip()[-300:])
    recs = json.loads(p.stdout)
    if not recs or not all(pe["name"].startswith("Pillow-SIMD") for r in recs for pe in r["peers"]):
        return {}, "error: the PIL under %s is not Pillow-SIMD" % path
    return {r["metric"]: r["peers"] for r in recs}, None


# ---------------------------------------------------------------------------------------------- output

def _fmt(v: Optional[float]) -> str:
    if v is None:
        return "-"
    if v >= 1000:
        return "%.0f" % v
    if v >= 100:
        return "%.1f" % v
    if v >= 0.1 or v == 0:
        return "%.2f" % v
    return "%.2g" % v


def _cell(d: dict) -> str:
    if d.get("value") is None:
        return (d.get("note") or "-").split(":")[0]
    return "%s [%s, %s]" % (_fmt(d["value"]), _fmt(d["min"]), _fmt(d["max"]))


def format_table(records: list, header: str) -> str:
    """Rows side by side: ours first, then each peer with ours' ratio against it (> 1: ours better)."""
    fmt = "%-24s %-6s %-26s %-8s %s"
    lines = [header, "cells: median [min, max] over the repeats; ratio > 1 means ours is better", "",
             fmt % ("metric", "unit", "value", "ratio", "contestant (how)"), "-" * 150]
    notes: dict = {}  # "who: note" -> the rows it was seen in
    for r in records:
        met = {True: "met", False: "NOT met", None: "not measured"}[r["met"]]
        o = r["ours"]
        lines.append(fmt % (r["metric"], r["unit"], _cell(o), "", "%s (%s)" % (o["name"], o["how"] or "-")))
        for p in r["peers"]:
            rt = "-" if p["ratio"] is None else _fmt(p["ratio"]) + "x"
            lines.append(fmt % ("", "", _cell(p), rt, "%s (%s)" % (p["name"], p["how"] or "-")))
            if p.get("note"):
                notes.setdefault("%s: %s" % (p["name"], p["note"]), []).append(r["metric"])
        if o.get("note"):
            notes.setdefault("ours: " + o["note"], []).append(r["metric"])
        lines.append(fmt % ("", "", "", "", "%s; target %s: %s" % (r["what"], r["target"], met)))
        for c in r["checks"]:
            lines.append(fmt % ("", "", "", "", "checked: " + c))
        lines.append("")
    lines += ["note: %s (%s)" % (n, ", ".join(rows) if len(rows) < len(records) else "every row")
              for n, rows in notes.items()]
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------- main

def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(prog="runtime-bench dvpp", description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu:0", help="our device (default cpu:0); the peers run on the host")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="our cpu executors = cv2.setNumThreads = the pools' threads (default: the host's cpus)")
    ap.add_argument("--quick", action="store_true", help="a short run with small batches (the tests' mode)")
    ap.add_argument("--json", action="store_true", help="print a JSON array of row records instead of the table")
    ap.add_argument("--only", default=",".join(ROWS), help="rows to run, comma-separated (default: all)")
    ap.add_argument("--batch", type=int, default=None, help="JPEGs per decode / pipeline call (default 8, quick 2)")
    ap.add_argument("--crops", type=int, default=None, help="crops per crop_resize_batch call (default 16, quick 4)")
    ap.add_argument("--reps", type=int, default=None,
                    help="timed calls per contestant (default 21, quick 3), in up to 7 rounds")
    ap.add_argument("--warmup", type=int, default=2, help="untimed calls first (our first also builds kernels)")
    ap.add_argument("--pillow-simd", metavar="DIR", default=os.environ.get("RUNTIME_BENCH_PILLOW_SIMD"),
                    help="a directory Pillow-SIMD is installed in (pip install --target DIR pillow-simd)")
    ap.add_argument("--pillow-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.batch = args.batch or (2 if args.quick else 8)
    args.crops = args.crops or (4 if args.quick else 16)
    reps = args.reps or (3 if args.quick else 21)
    warmup = max(1, args.warmup)
    names = [n for n in args.only.split(",") if n]
    if args.threads < 1 or args.batch < 1 or args.crops < 1 or reps < 1:
        raise SystemExit("runtime-bench dvpp: --threads, --batch, --crops and --reps must be >= 1")
    if args.pillow_worker:
        json.dump(pillow_worker(names, args.threads, args.batch, args.crops, reps, warmup), sys.stdout)
        return 0

    t0 = time.monotonic()

    def progress(msg: str) -> None:
        sys.stderr.write("[%5.1fs] %s\n" % (time.monotonic() - t0, msg))
        sys.stderr.flush()

    ours: Optional[Ours] = None
    ours_missing = ""
    try:
        ours = Ours(args.device, args.threads)
    except ImportError as e:
        ours_missing = "missing: runtime.dvpp does not import (%s)" % e
        progress(ours_missing)
    progress("making %d test JPEGs ..." % args.batch)
    for i in range(args.batch):
        jpeg_1080p(i)
    records = []
    failed = None
    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        rows = build_rows(names, ours, ours_missing, args.threads, args.batch, args.crops, pool)
        for row in rows:
            progress("%s: %d contestants x %d repeats ..." % (row.metric, len(row.contestants), reps))
            measure(row.contestants, reps, warmup)
            if ours is not None and not row.contestants[0].note:
                try:
                    check_row(row, ours)
                except WrongResult as e:
                    failed = failed or str(e)
                    progress("WRONG: %s" % e)
            records.append(row.record(args.device, args.threads))
            for c in row.contestants:
                c.result = None  # (the batches' outputs are large)
    if args.pillow_simd:
        progress("Pillow-SIMD (%s), in a child process ..." % args.pillow_simd)
        by_metric, why = run_pillow_simd(args.pillow_simd, names, args, reps, warmup)
        for r in records:
            peers = by_metric.get(r["metric"]) or [{"name": "Pillow-SIMD", "how": "", "value": None, "min": None,
                                                    "max": None, "note": why or "missing"}]
            add_peers(r, peers)
    else:
        for r in records:
            add_peers(r, [{"name": "Pillow-SIMD", "how": "", "value": None, "min": None, "max": None,
                           "note": "missing: not measured (install it into a directory with pip install --target "
                                   "DIR pillow-simd, then pass --pillow-simd DIR)"}])
    progress("done")
    if args.json:
        json.dump(records, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        import cv2

        header = "runtime-bench dvpp on %s (%s), %d threads for everyone; %s; OpenCV %s, %s, numpy %s%s" % (
            args.device, platform.processor() or platform.machine(), args.threads,
            "--quick" if args.quick else "full run", cv2.__version__, _pillow_name(), np.__version__,
            "" if ours is None else ", runtime " + ours.rt.__version__)
        sys.stdout.write(format_table(records, header))
    if failed:
        sys.stderr.write("runtime-bench dvpp: a result was WRONG: %s\n" % failed)
        return WRONG
    broken = ["%s: %s" % (r["metric"], r["ours"]["note"]) for r in records
              if r["ours"].get("note", "").startswith("error")]
    if broken:
        sys.stderr.write("runtime-bench dvpp: a runtime call failed:\n  %s\n" % "\n  ".join(broken))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
