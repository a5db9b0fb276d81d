"""Exactness of runtime.dvpp's colour conversion, normalisation and fused pre-processing (issue 16): 4:2:0 -> RGB
within 1 of cv2.cvtColor (BT.601 limited, OpenCV's matrix) and of the published BT.601 / BT.709 formulas for every
matrix, RGB -> 4:2:0 within 1 of cv2.cvtColor(COLOR_RGB2YUV_I420), grey exactly OpenCV's, normalisation against
numpy's fma (float16 and bfloat16 rounded to nearest even), and preprocess equal bit for bit to crop_resize, then
convert_color, then normalize; on generated images and scikit-image's photographs."""
import numpy as np
import pytest

import runtime
from runtime import dvpp

cv2 = pytest.importorskip("cv2")


def needs(*names):
    missing = [n for n in names if not runtime._core.dvpp_available(n)]
    return pytest.mark.skipif(bool(missing), reason=f"this libruntime lacks {', '.join(missing)}")


COLOR = needs("rtDvppConvertColor")
NORMALIZE = needs("rtDvppNormalize")
FUSED = needs("rtDvppPreprocess", "rtDvppCropResize", "rtDvppConvertColor", "rtDvppNormalize")

RNG = np.random.default_rng(16)


def yuv420(h, w, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h * 3 // 2, w), dtype=np.uint8)


def planes(img, fmt):
    """Y, U, V of a (h * 3 // 2, w) 4:2:0 image."""
    h, w = img.shape[0] * 2 // 3, img.shape[1]
    y, rest = img[:h], img[h:].reshape(-1)
    if fmt == "i420":
        return y, rest[: w * h // 4].reshape(h // 2, w // 2), rest[w * h // 4:].reshape(h // 2, w // 2)
    pairs = rest.reshape(h // 2, w // 2, 2)
    return (y, pairs[..., 0], pairs[..., 1]) if fmt == "nv12" else (y, pairs[..., 1], pairs[..., 0])


def photograph(name="astronaut"):
    data = pytest.importorskip("skimage.data")
    img = getattr(data, name)()
    return np.ascontiguousarray(img[: img.shape[0] // 2 * 2, : img.shape[1] // 2 * 2, :3])


CV_YUV = {("nv12", "rgb"): cv2.COLOR_YUV2RGB_NV12, ("nv12", "bgr"): cv2.COLOR_YUV2BGR_NV12,
          ("nv12", "rgba"): cv2.COLOR_YUV2RGBA_NV12, ("nv12", "bgra"): cv2.COLOR_YUV2BGRA_NV12,
          ("nv21", "rgb"): cv2.COLOR_YUV2RGB_NV21, ("nv21", "bgr"): cv2.COLOR_YUV2BGR_NV21,
          ("nv21", "rgba"): cv2.COLOR_YUV2RGBA_NV21, ("nv21", "bgra"): cv2.COLOR_YUV2BGRA_NV21,
          ("i420", "rgb"): cv2.COLOR_YUV2RGB_I420, ("i420", "bgr"): cv2.COLOR_YUV2BGR_I420,
          ("i420", "rgba"): cv2.COLOR_YUV2RGBA_I420, ("i420", "bgra"): cv2.COLOR_YUV2BGRA_I420}


@COLOR
@pytest.mark.parametrize("src,dst", sorted(CV_YUV))
def test_yuv420_to_rgb_is_within_one_of_opencv(src, dst):
    img = yuv420(96, 130, seed=len(src + dst))
    ours = dvpp.convert_color(img, src, dst).numpy()
    ref = cv2.cvtColor(img, CV_YUV[(src, dst)])
    diff = np.abs(ours.astype(int) - ref)
    assert diff.max() <= 1
    assert (diff == 0).mean() > 0.95, "OpenCV rounds its coefficients to 3 digits, we use the exact ones"


@COLOR
def test_every_yuv_triple_is_within_one_of_opencv():
    # 4096 x 4096 I420: each 2x2 block has one of the 65536 (U, V) pairs and four of the 256 Y values.
    n = 4096
    b = np.arange((n // 2) ** 2, dtype=np.int64).reshape(n // 2, n // 2)
    u, v, y0 = (b & 0xff).astype(np.uint8), ((b >> 8) & 0xff).astype(np.uint8), (b >> 16) * 4
    y = np.empty((n, n), np.uint8)
    for k in range(4):
        y[k >> 1::2, k & 1::2] = y0 + k
    img = np.concatenate([y.ravel(), u.ravel(), v.ravel()]).reshape(n * 3 // 2, n)
    ours = dvpp.convert_color(img, "i420", "rgb").numpy()
    assert np.abs(ours.astype(int) - cv2.cvtColor(img, cv2.COLOR_YUV2RGB_I420)).max() <= 1


def published_rgb(y, u, v, matrix, full_range):
    """BT.601 / BT.709 YUV -> RGB from the luma weights, in float (limited-range Y below 16 is black, as OpenCV)."""
    kr, kb = (0.299, 0.114) if matrix == "bt601" else (0.2126, 0.0722)
    kg = 1 - kr - kb
    y, u, v = (a.astype(np.float64) for a in (y, u, v))
    if not full_range:
        y, u, v = np.maximum(y - 16, 0) * 255 / 219, (u - 128) * 255 / 224 + 128, (v - 128) * 255 / 224 + 128
    du, dv = u - 128, v - 128
    rgb = np.stack([y + 2 * (1 - kr) * dv, y - (2 * kb * (1 - kb) * du + 2 * kr * (1 - kr) * dv) / kg,
                    y + 2 * (1 - kb) * du], axis=-1)
    return np.clip(np.floor(rgb + 0.5), 0, 255)


@COLOR
@pytest.mark.parametrize("matrix", ["bt601", "bt709"])
@pytest.mark.parametrize("full_range", [False, True])
@pytest.mark.parametrize("fmt", ["nv12", "nv21", "i420"])
def test_every_matrix_follows_its_published_coefficients(matrix, full_range, fmt):
    img = yuv420(64, 200, seed=3)
    ours = dvpp.convert_color(img, fmt, "rgb", matrix, full_range).numpy()
    y, u, v = planes(img, fmt)
    up = lambda c: np.repeat(np.repeat(c, 2, 0), 2, 1)  # noqa: E731  (chroma point-sampled: one per 2x2)
    ref = published_rgb(y, up(u), up(v), matrix, full_range)
    diff = np.abs(ours - ref)
    assert diff.max() <= 1
    assert (diff == 0).mean() > 0.98


@COLOR
@pytest.mark.parametrize("src,code", [("rgb", cv2.COLOR_RGB2YUV_I420), ("bgr", cv2.COLOR_BGR2YUV_I420),
                                      ("rgba", cv2.COLOR_RGBA2YUV_I420), ("bgra", cv2.COLOR_BGRA2YUV_I420)])
def test_rgb_to_i420_and_nv12_are_within_one_of_opencv(src, code):
    img = RNG.integers(0, 256, (82, 148, len(src)), dtype=np.uint8)
    ref = cv2.cvtColor(img, code)
    ours = dvpp.convert_color(img, src, "i420").numpy()
    assert np.abs(ours.astype(int) - ref).max() <= 1
    # NV12 and NV21 carry the same samples, interleaved.
    for fmt in ("nv12", "nv21"):
        out = dvpp.convert_color(img, src, fmt).numpy()
        for a, b in zip(planes(out, fmt), planes(ours, "i420")):
            np.testing.assert_array_equal(a, b)


@COLOR
def test_photograph_round_trip_through_nv12_stays_close():
    img = photograph()
    back = dvpp.convert_color(dvpp.convert_color(img, "rgb", "nv12"), "nv12", "rgb").numpy()
    ref = cv2.cvtColor(cv2.cvtColor(img, cv2.COLOR_RGB2YUV_I420), cv2.COLOR_YUV2RGB_I420)
    # Y, U, V each within 1 of OpenCV's, then amplified by the second matrix (at most 1.164 + 2.018), then within 1.
    diff = np.abs(back.astype(int) - ref)
    assert diff.max() <= 4 and diff.mean() < 0.1
    assert np.abs(back.astype(int) - img).mean() < 4


@COLOR
@pytest.mark.parametrize("src,code", [("rgb", cv2.COLOR_RGB2GRAY), ("bgr", cv2.COLOR_BGR2GRAY),
                                      ("rgba", cv2.COLOR_RGBA2GRAY), ("bgra", cv2.COLOR_BGRA2GRAY)])
def test_grey_is_opencvs_exactly(src, code):
    img = RNG.integers(0, 256, (64, 77, len(src)), dtype=np.uint8)
    np.testing.assert_array_equal(dvpp.convert_color(img, src, "gray").numpy().reshape(64, 77), cv2.cvtColor(img, code))


@COLOR
@pytest.mark.parametrize("src,dst,code", [("rgb", "bgr", cv2.COLOR_RGB2BGR), ("rgb", "rgba", cv2.COLOR_RGB2RGBA),
                                          ("bgra", "rgb", cv2.COLOR_BGRA2RGB), ("rgba", "bgra", cv2.COLOR_RGBA2BGRA),
                                          ("gray", "rgb", cv2.COLOR_GRAY2RGB), ("gray", "bgra", cv2.COLOR_GRAY2BGRA)])
def test_channel_orders_and_alpha_are_opencvs_exactly(src, dst, code):
    c = {"gray": 1, "rgb": 3, "bgr": 3, "rgba": 4, "bgra": 4}[src]
    img = RNG.integers(0, 256, (40, 51, c) if c > 1 else (40, 51), dtype=np.uint8)
    ours = dvpp.convert_color(img, src, dst).numpy()
    np.testing.assert_array_equal(ours.reshape(cv2.cvtColor(img, code).shape), cv2.cvtColor(img, code))


def fma_reference(img, mean, std):
    """fma(pixel, 1/std, -mean/std) in float32: exact in float64 (8-bit pixel times a 24-bit scale, then one add),
    rounded once."""
    scale = (np.float32(1) / np.asarray(std, np.float32)).astype(np.float64)
    bias = (-(np.asarray(mean, np.float32) / np.asarray(std, np.float32))).astype(np.float64)
    return (img.astype(np.float64) * scale + bias).astype(np.float32)


MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]


@NORMALIZE
@pytest.mark.parametrize("layout", ["chw", "hwc"])
def test_normalize_float32_is_numpys_fma_and_close_to_the_division(layout):
    img = photograph("chelsea")
    out = dvpp.normalize(img, MEAN, STD, layout=layout).numpy()
    ref = fma_reference(img, MEAN, STD)
    if layout == "chw":
        ref = ref.transpose(2, 0, 1)
    np.testing.assert_array_equal(out, ref)
    division = (img.astype(np.float32) - np.float32(MEAN)) / np.float32(STD)
    division = division.transpose(2, 0, 1) if layout == "chw" else division
    # Within an ulp of the larger term (x / std or mean / std): the fma form cancels where x is near the mean.
    terms = np.maximum(np.abs(img / np.float32(STD)), np.abs(np.float32(MEAN) / np.float32(STD)))
    terms = terms.transpose(2, 0, 1) if layout == "chw" else terms
    assert np.all(np.abs(out.astype(np.float64) - division) <= 2 * np.spacing(terms.astype(np.float32)))


@NORMALIZE
@pytest.mark.parametrize("dtype", [np.float16, "bfloat16", np.uint8, np.int8])
def test_normalize_rounds_each_dtype_to_nearest_even(dtype):
    img = RNG.integers(0, 256, (31, 45, 3), dtype=np.uint8)
    img[0, :, 0] = np.arange(45) * 5  # a spread of values, ties included for the integer dtypes below
    mean, std = [0.5, 100.0, 127.5], [2.0, 0.5, 1.0]
    out = dvpp.normalize(img, mean, std, layout="hwc", dtype=dtype).numpy()
    ref = fma_reference(img, mean, std)
    if dtype == "bfloat16":
        ml = pytest.importorskip("ml_dtypes")
        np.testing.assert_array_equal(out.view(np.uint16), ref.astype(ml.bfloat16).view(np.uint16))
    elif dtype == np.float16:
        np.testing.assert_array_equal(out.view(np.uint16), ref.astype(np.float16).view(np.uint16))
    else:
        info = np.iinfo(dtype)
        np.testing.assert_array_equal(out, np.clip(np.rint(ref), info.min, info.max).astype(dtype))


def composed(image, size, crop, fmt, dst, mean, std, layout, dtype, interpolation, matrix="bt601",
             full_range=False):
    """crop_resize -> convert_color -> normalize, the three operations the fused one equals."""
    resized = dvpp.crop_resize(image, crop, size, interpolation, format=fmt)
    converted = dvpp.convert_color(resized, fmt, dst, matrix, full_range)
    return dvpp.normalize(converted, mean if dst != "gray" else mean[:1], std if dst != "gray" else std[:1],
                          layout, dtype, format=dst).numpy()


@FUSED
@pytest.mark.parametrize("fmt", ["rgb", "bgr", "rgba", "gray", "nv12", "nv21", "i420"])
@pytest.mark.parametrize("interpolation", ["nearest", "bilinear", "area"])
def test_preprocess_equals_crop_resize_convert_normalize(fmt, interpolation):
    rgb = photograph("coffee")
    img = rgb if fmt == "rgb" else dvpp.convert_color(rgb, "rgb", fmt).numpy()
    crop = (40, 20, 300, 200)
    for dst, layout, dtype, size in [("rgb", "chw", np.float32, (64, 48)), ("bgr", "hwc", np.float16, (300, 210)),
                                     ("gray", "chw", np.uint8, (30, 30))]:
        mean, std = [120.0, 110.0, 100.0], [60.0, 58.0, 55.0]
        fused = dvpp.preprocess(img, size, crop, mean if dst != "gray" else mean[:1],
                                std if dst != "gray" else std[:1], layout, dtype, interpolation, dst=dst,
                                format=fmt, matrix="bt709").numpy()
        ref = composed(img, size, crop, fmt, dst, mean, std, layout, dtype, interpolation, "bt709")
        np.testing.assert_array_equal(fused.view(np.uint8), ref.view(np.uint8), err_msg=f"{dst} {layout} {dtype}")


@FUSED
def test_preprocess_of_the_classification_case_is_opencv_within_rounding():
    # 1080p -> centre crop -> 224x224 CHW float32, against OpenCV's INTER_LINEAR_EXACT resize and numpy.
    img = cv2.resize(photograph(), (1920, 1080), interpolation=cv2.INTER_LINEAR)
    crop = (420, 0, 1080, 1080)
    fused = dvpp.preprocess(img, (224, 224), crop, MEAN, STD).numpy()
    x, y, w, h = crop
    small = cv2.resize(img[y:y + h, x:x + w], (224, 224), interpolation=cv2.INTER_LINEAR_EXACT)
    np.testing.assert_array_equal(fused, fma_reference(small, MEAN, STD).transpose(2, 0, 1))
