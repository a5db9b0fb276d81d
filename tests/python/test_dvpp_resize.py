"""Exactness of runtime.dvpp's resize, crop_resize and letterbox against OpenCV (issue 16): "bilinear" equals
cv2.resize(INTER_LINEAR_EXACT) bit for bit and is within 1 of cv2.INTER_LINEAR on photographs, "nearest" equals
cv2.INTER_NEAREST, "area" is within 1 of cv2.INTER_AREA; over many sizes (growing and shrinking, odd sizes, 1-pixel
edges, ratios 1/32 .. 16, multiples of 256 where OpenCV's double rounding decides the weights' ties), every packed
format and the planes of the 4:2:0 formats, crops, letterboxes and batches; on generated images and scikit-image's
photographs."""
import numpy as np
import pytest

import runtime
from runtime import dvpp
from conftest import skip_unless_kernels_run

cv2 = pytest.importorskip("cv2")

pytestmark = pytest.mark.skipif(
    not all(runtime._core.dvpp_available(n) for n in ("rtDvppResize", "rtDvppCropResize", "rtDvppCropResizePaste",
                                                     "rtDvppBatchCropResize")),
    reason="this libruntime lacks the DVPP resize entry points")

CV = {"nearest": cv2.INTER_NEAREST, "bilinear": cv2.INTER_LINEAR_EXACT, "area": cv2.INTER_AREA}
TOLERANCE = {"nearest": 0, "bilinear": 0, "area": 1}


@pytest.fixture(autouse=True)
def _kernels_run():
    skip_unless_kernels_run()


def noise(h, w, c, seed):
    shape = (h, w) if c == 1 else (h, w, c)
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def photograph(name):
    data = pytest.importorskip("skimage.data")
    return np.ascontiguousarray(getattr(data, name)())


def max_diff(a, b):
    assert a.shape == b.shape, (a.shape, b.shape)
    return int(np.abs(a.astype(np.int32) - b.astype(np.int32)).max()) if a.size else 0


def ours(img, size, interpolation, fmt=None):
    return dvpp.resize(img, size, interpolation=interpolation, format=fmt).numpy()


def size_pairs(n, seed):
    """(src w, src h, dst w, dst h): small and 1-pixel sides, ratios 2^-5 .. 2^4, and multiples of 256."""
    rng = np.random.default_rng(seed)

    def side():
        r = rng.random()
        return int(rng.integers(1, 5)) if r < 0.15 else int(rng.integers(1, 64)) if r < 0.5 else int(rng.integers(1, 400))

    out = []
    for i in range(n):
        sw, sh = side(), side()
        if i % 5 == 0:
            dw, dh = 256 * int(rng.integers(1, 3)), 256
        elif i % 5 == 1:
            dw, dh = side(), side()
        else:
            f = 2.0 ** rng.uniform(-5, 4)
            dw = int(min(900, max(1, round(sw * f))))
            dh = int(min(900, max(1, round(sh * f * 2.0 ** rng.uniform(-0.5, 0.5)))))
        out.append((sw, sh, dw, dh))
    return out


@pytest.mark.parametrize("interpolation", ["bilinear", "nearest", "area"])
@pytest.mark.parametrize("fmt,channels", [("gray", 1), ("rgb", 3), ("bgra", 4)])
def test_equals_opencv_over_many_sizes(interpolation, fmt, channels):
    worst = 0
    for k, (sw, sh, dw, dh) in enumerate(size_pairs(120, seed=channels)):
        img = noise(sh, sw, channels, seed=k)
        got = ours(img, (dw, dh), interpolation, fmt)
        d = max_diff(got, cv2.resize(img, (dw, dh), interpolation=CV[interpolation]))
        assert d <= TOLERANCE[interpolation], f"{sw}x{sh} -> {dw}x{dh}: differs by {d}"
        worst = max(worst, d)
    if interpolation != "area":
        assert worst == 0


@pytest.mark.parametrize("interpolation", ["bilinear", "nearest", "area"])
@pytest.mark.parametrize("sizes", [(309, 279, 768, 768), (206, 186, 512, 512), (279, 309, 768, 768),
                                   (154, 147, 198, 189), (198, 154, 110, 198)])
def test_where_opencvs_double_rounding_decides(sizes, interpolation):
    """Exact positions on a weight's half-way point (bilinear) or an integer (nearest) that OpenCV's double step
    pushes up (309 -> 768, 206 -> 512) or down (279 -> 768, 186 -> 512; nearest 154 -> 198, 147 -> 189, 198 -> 110),
    on hundreds of columns each."""
    sw, sh, dw, dh = sizes
    for c, fmt in [(1, "gray"), (3, "rgb")]:
        img = noise(sh, sw, c, seed=sw)
        d = max_diff(ours(img, (dw, dh), interpolation, fmt), cv2.resize(img, (dw, dh), interpolation=CV[interpolation]))
        assert d <= TOLERANCE[interpolation], f"{sizes} {fmt}: differs by {d}"


@pytest.mark.parametrize("interpolation", ["bilinear", "nearest", "area"])
@pytest.mark.parametrize("name", ["astronaut", "coffee", "camera"])
def test_photographs_at_the_sizes_of_a_pipeline(name, interpolation):
    img = photograph(name)
    full = cv2.resize(img, (1920, 1080), interpolation=cv2.INTER_LINEAR)  # a 1080p frame
    for size in [(224, 224), (256, 256), (640, 640), (299, 171), (1280, 720), (3840, 2160), (7, 5)]:
        src = full if size != (3840, 2160) else img
        d = max_diff(ours(src, size, interpolation), cv2.resize(src, size, interpolation=CV[interpolation]))
        assert d <= TOLERANCE[interpolation], f"{name} {src.shape} -> {size}: differs by {d}"


@pytest.mark.parametrize("name", ["astronaut", "coffee", "chelsea", "camera"])
def test_bilinear_within_1_of_inter_linear_on_photographs(name):
    img = photograph(name)
    for size in [(224, 224), (256, 170), (1000, 1200), (33, 47), (512, 512)]:
        d = max_diff(ours(img, size, "bilinear"), cv2.resize(img, size, interpolation=cv2.INTER_LINEAR))
        assert d <= 1, f"{name} -> {size}: differs by {d} from INTER_LINEAR"


def test_bilinear_within_1_of_inter_linear_on_smooth_images():
    y, x = np.mgrid[0:300, 0:400]
    img = np.stack([(127.5 + 120 * np.sin(x * k / 37.0 + y / 53.0)) for k in (1, 2, 3)], -1).astype(np.uint8)
    for size in [(224, 224), (800, 600), (31, 17), (400, 1), (1, 300)]:
        assert max_diff(ours(img, size, "bilinear"), cv2.resize(img, size, interpolation=cv2.INTER_LINEAR)) <= 1


def test_one_pixel_sources_and_destinations():
    for c, fmt in [(1, "gray"), (3, "rgb"), (4, "rgba")]:
        for (sw, sh) in [(1, 1), (1, 9), (9, 1), (2, 1), (3, 2)]:
            img = noise(sh, sw, c, seed=sw * 10 + sh)
            for (dw, dh) in [(1, 1), (17, 1), (1, 17), (16, 16)]:
                for interp in CV:
                    d = max_diff(ours(img, (dw, dh), interp, fmt), cv2.resize(img, (dw, dh), interpolation=CV[interp]))
                    assert d <= TOLERANCE[interp], f"{fmt} {sw}x{sh} -> {dw}x{dh} {interp}: {d}"


def yuv420(h, w, seed):
    return np.random.default_rng(seed).integers(0, 256, (h * 3 // 2, w), dtype=np.uint8)


def split(img, fmt):
    """The planes of a (h * 3 // 2, w) 4:2:0 image as OpenCV resizes them: Y, then chroma pairs (h/2, w/2, 2) for
    NV12 / NV21 or U and V for I420."""
    h, w = img.shape[0] * 2 // 3, img.shape[1]
    rest = img[h:].reshape(-1)
    if fmt == "i420":
        q = (h // 2) * (w // 2)
        return [img[:h], rest[:q].reshape(h // 2, w // 2), rest[q:].reshape(h // 2, w // 2)]
    return [img[:h], rest.reshape(h // 2, w // 2, 2)]


@pytest.mark.parametrize("fmt", ["nv12", "nv21", "i420"])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest", "area"])
def test_420_formats_plane_by_plane(fmt, interpolation):
    for k, (sw, sh, dw, dh) in enumerate([(64, 48, 32, 24), (2, 2, 20, 12), (1920, 1080, 224, 224), (100, 62, 256, 512),
                                          (38, 94, 2, 2), (640, 360, 1280, 720)]):
        img = yuv420(sh, sw, seed=k)
        got = split(ours(img, (dw, dh), interpolation, fmt), fmt)
        for p, (a, b) in enumerate(zip(got, split(img, fmt))):
            ref = cv2.resize(b, (a.shape[1], a.shape[0]), interpolation=CV[interpolation])
            d = max_diff(a.reshape(ref.shape), ref)
            assert d <= TOLERANCE[interpolation], f"{fmt} {sw}x{sh} -> {dw}x{dh} plane {p}: differs by {d}"


@pytest.mark.parametrize("interpolation", ["bilinear", "nearest", "area"])
def test_crop_resize_equals_resizing_the_slice(interpolation):
    img = photograph("astronaut")
    rng = np.random.default_rng(3)
    for _ in range(40):
        x, y = int(rng.integers(0, 500)), int(rng.integers(0, 500))
        w, h = int(rng.integers(1, 512 - x)), int(rng.integers(1, 512 - y))
        size = (int(rng.integers(1, 300)), int(rng.integers(1, 300)))
        got = dvpp.crop_resize(img, (x, y, w, h), size, interpolation=interpolation).numpy()
        ref = cv2.resize(np.ascontiguousarray(img[y:y + h, x:x + w]), size, interpolation=CV[interpolation])
        assert max_diff(got, ref) <= TOLERANCE[interpolation], (x, y, w, h, size)


def test_letterbox_is_the_resized_image_in_its_box_and_the_fill_around():
    img = photograph("chelsea")  # 451 x 300
    for size, fill in [((640, 640), 114), ((300, 500), (1, 2, 3)), ((451, 300), 0), ((64, 16), 7)]:
        out = dvpp.letterbox(img, size, fill=fill).numpy()
        x, y, w, h = dvpp.letterbox_box((img.shape[1], img.shape[0]), size)
        expected = np.empty((size[1], size[0], 3), np.uint8)
        expected[...] = np.array(fill if isinstance(fill, tuple) else (fill,) * 3, np.uint8)
        expected[y:y + h, x:x + w] = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR_EXACT)
        assert np.array_equal(out, expected), (size, fill)


def test_batches_of_varying_sizes_equal_one_call_each():
    imgs = [photograph("astronaut"), photograph("coffee"), noise(37, 91, 3, seed=5)]
    sizes = [(224, 224), (100, 37), (1, 1)]
    for interp in CV:
        outs = dvpp.resize(imgs, sizes, interpolation=interp)
        for img, size, out in zip(imgs, sizes, outs):
            assert max_diff(out.numpy(), cv2.resize(img, size, interpolation=CV[interp])) <= TOLERANCE[interp]
    boxes = [[(0, 0, 512, 512), (100, 50, 200, 300)], (10, 10, 300, 200), [(90, 36, 1, 1)]]
    outs = dvpp.crop_resize(imgs, boxes, (64, 48))
    for img, entry, got in zip(imgs, boxes, outs):
        entry = entry if isinstance(entry, list) else [entry]
        got = got if isinstance(got, list) else [got]
        for (x, y, w, h), g in zip(entry, got):
            ref = cv2.resize(np.ascontiguousarray(img[y:y + h, x:x + w]), (64, 48), interpolation=cv2.INTER_LINEAR_EXACT)
            assert np.array_equal(g.numpy(), ref)


def test_every_device_gives_the_same_bytes():
    """The same kernels on every device (cpu and, when present, cuda): results identical bit for bit."""
    devices = [d for d in range(runtime.get_device_count())]
    img = photograph("astronaut")
    results = {}
    for d in devices:
        runtime.set_device(d)
        try:
            skip_unless_kernels_run(d)
        except pytest.skip.Exception:
            continue
        results[d] = [ours(img, (224, 224), i) for i in CV]
    runtime.set_device(0)
    first = next(iter(results.values()))
    for d, r in results.items():
        for a, b in zip(first, r):
            assert np.array_equal(a, b), f"device {d} differs"
