"""DVPP's codecs against the reference libraries (issue 16), on scikit-image's photographs and generated images:
JPEG decode equals cv2.imdecode, Pillow and simplejpeg exactly (all three are libjpeg-turbo) for every subsampling,
baseline and progressive, colour and grey; the 4:2:0 outputs keep the JPEG's own luma (Pillow's YCbCr draft); CMYK
JPEGs decode as Pillow converts them (cv2, whose CMYK formula is approximate, within 1); DCT-scaled decodes equal
cv2's IMREAD_REDUCED_* modes; a batch equals its images decoded one by one; PNG decode equals cv2.imdecode for 8- and
16-bit colour and grey, grey + alpha and palettes (and Pillow where Pillow keeps the same bits); encode round trips
within the quality's error and cv2 reads what it writes; corrupt input fails as the C API promises."""
import io

import numpy as np
import pytest

import runtime
from runtime import dvpp

cv2 = pytest.importorskip("cv2")
Image = pytest.importorskip("PIL.Image")
skdata = pytest.importorskip("skimage.data")

pytestmark = pytest.mark.skipif(
    not all(runtime._core.dvpp_available(n) for n in ("rtDvppDecodeJpeg", "rtDvppDecodePng", "rtDvppEncodeJpeg")),
    reason="this libruntime has no DVPP codecs")

PHOTOS = ["astronaut", "coffee", "chelsea"]


def photo(name):
    img = getattr(skdata, name)()
    return img if img.ndim == 3 else np.dstack([img] * 3)


def pil_jpeg(img, **kw):
    b = io.BytesIO()
    Image.fromarray(img).save(b, "JPEG", **kw)
    return b.getvalue()


def cv2_jpeg(img, quality=90):
    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(img[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return buf.tobytes()


def cv2_png(img):
    ok, buf = cv2.imencode(".png", img)
    assert ok
    return buf.tobytes()


def ours(fn, data, fmt, stream):
    mem = fn(data, fmt, stream=stream)
    stream.synchronize()
    return mem.numpy()


def imdecode(data, flags):
    return cv2.imdecode(np.frombuffer(data, np.uint8), flags)


def rgb_of(bgr):
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


# ------------------------------------------------------------------------------------------------------- JPEG

@pytest.mark.parametrize("name", PHOTOS)
@pytest.mark.parametrize("encoding", ["cv2-q90", "444", "422", "420", "progressive", "grey"])
def test_jpeg_decode_equals_opencv_pillow_and_simplejpeg(stream, name, encoding):
    img = photo(name)
    if encoding == "cv2-q90":
        data = cv2_jpeg(img)
    elif encoding == "grey":
        data = pil_jpeg(img[..., 1], quality=85)
    elif encoding == "progressive":
        data = pil_jpeg(img, quality=85, progressive=True)
    else:
        data = pil_jpeg(img, quality=85, subsampling={"444": 0, "422": 1, "420": 2}[encoding])
    rgb = ours(dvpp.decode_jpeg, data, "rgb", stream)
    np.testing.assert_array_equal(rgb, rgb_of(imdecode(data, cv2.IMREAD_COLOR)))
    np.testing.assert_array_equal(rgb, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
    np.testing.assert_array_equal(ours(dvpp.decode_jpeg, data, "bgr", stream), imdecode(data, cv2.IMREAD_COLOR))
    np.testing.assert_array_equal(ours(dvpp.decode_jpeg, data, "gray", stream), imdecode(data, cv2.IMREAD_GRAYSCALE))
    bgra = ours(dvpp.decode_jpeg, data, "bgra", stream)
    np.testing.assert_array_equal(bgra[..., :3], imdecode(data, cv2.IMREAD_COLOR))
    assert (bgra[..., 3] == 255).all()
    simplejpeg = pytest.importorskip("simplejpeg")
    np.testing.assert_array_equal(rgb, simplejpeg.decode_jpeg(data, "RGB"))


@pytest.mark.parametrize("subsampling", [0, 1, 2])
@pytest.mark.parametrize("fmt", ["nv12", "nv21", "i420"])
def test_jpeg_decode_to_yuv420_keeps_the_jpegs_own_luma(stream, subsampling, fmt):
    img = photo("coffee")
    data = pil_jpeg(img, quality=90, subsampling=subsampling)
    h, w = img.shape[:2]
    yuv = ours(dvpp.decode_jpeg, data, fmt, stream)
    assert yuv.shape == (h * 3 // 2, w)
    draft = Image.open(io.BytesIO(data))
    draft.draft("YCbCr", draft.size)  # libjpeg's output before colour conversion (chroma upsampled)
    ycc = np.asarray(draft)
    np.testing.assert_array_equal(yuv[:h], ycc[..., 0])
    if fmt == "i420":
        u = yuv[h:h + h // 4].reshape(h // 2, w // 2)
        v = yuv[h + h // 4:].reshape(h // 2, w // 2)
    else:
        u, v = (yuv[h:, 0::2], yuv[h:, 1::2]) if fmt == "nv12" else (yuv[h:, 1::2], yuv[h:, 0::2])
    if subsampling == 0:  # 4:4:4: each 4:2:0 sample the rounded mean of its 2 x 2 full-resolution samples
        for got, full in ((u, ycc[..., 1]), (v, ycc[..., 2])):
            mean = full.astype(np.int32).reshape(h // 2, 2, w // 2, 2).sum((1, 3))
            np.testing.assert_array_equal(got, (mean + 2) // 4)
    # Any subsampling: the chroma is the JPEG's YCbCr (BT.601 full range): converting back gives the RGB decode's
    # colours up to the chroma resolution the JPEG has.
    up = [cv2.resize(np.ascontiguousarray(c), (w, h), interpolation=cv2.INTER_NEAREST) for c in (v, u)]
    back = cv2.cvtColor(np.dstack([yuv[:h]] + up), cv2.COLOR_YCrCb2RGB)  # OpenCV's JPEG (JFIF) YCrCb
    rgb = ours(dvpp.decode_jpeg, data, "rgb", stream)
    assert np.abs(back.astype(int) - rgb).mean() < 2


def test_jpeg_cmyk_decodes_as_pillow_converts_it(stream):
    img = photo("astronaut")
    b = io.BytesIO()
    Image.fromarray(img).convert("CMYK").save(b, "JPEG", quality=90)
    data = b.getvalue()
    assert dvpp.jpeg_info(data) == (512, 512, 4)
    rgb = ours(dvpp.decode_jpeg, data, "rgb", stream)
    np.testing.assert_array_equal(rgb, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
    assert np.abs(rgb.astype(int) - rgb_of(imdecode(data, cv2.IMREAD_COLOR))).max() <= 1
    gray = ours(dvpp.decode_jpeg, data, "gray", stream)
    # BT.601 luma of that RGB: Pillow's ("L", 16-bit weights) within 1. (cv2's grey of CMYK starts from its own
    # approximate RGB, so it is 2 away in places.)
    pil_gray = np.asarray(Image.fromarray(rgb).convert("L")).astype(int)
    assert np.abs(gray.astype(int) - pil_gray).max() <= 1
    # Grey and 4:2:0 of a CMYK JPEG go through RGB and equal convert_color's conversions of it (BT.601 full range).
    def converted(fmt):
        out = dvpp.convert_color(rgb, "rgb", fmt, full_range=True, stream=stream)
        stream.synchronize()
        return out.numpy()
    np.testing.assert_array_equal(gray, converted("gray"))
    for fmt in ("nv12", "i420"):
        np.testing.assert_array_equal(ours(dvpp.decode_jpeg, data, fmt, stream), converted(fmt))


@pytest.mark.parametrize("reduced, denominator", [(cv2.IMREAD_REDUCED_COLOR_2, 2), (cv2.IMREAD_REDUCED_COLOR_4, 4),
                                                  (cv2.IMREAD_REDUCED_COLOR_8, 8)])
def test_jpeg_scaled_decode_equals_opencvs_reduced_modes(stream, reduced, denominator):
    data = cv2_jpeg(photo("chelsea"))  # 451 x 300: sizes that do not divide
    want = imdecode(data, reduced)
    h, w = want.shape[:2]
    out = runtime.empty((h, w, 3), np.uint8)
    # The smallest of libjpeg's scales whose size covers the minimum: 1/denominator for exactly its size.
    pic = (out.ptr, out.nbytes, 13, 0, 0, 0, 0)  # BGR888
    with stream.device:
        got = runtime._core.dvpp_decode_jpeg_scaled(data, w, h, pic, stream.handle, (out,))
    stream.synchronize()
    assert got[3:5] == (w, h)
    np.testing.assert_array_equal(out.numpy(), want)


def test_jpeg_batch_equals_one_by_one(stream):
    datas = [cv2_jpeg(photo(n)) for n in PHOTOS] + [pil_jpeg(photo("coffee")[:, :, 0], quality=70),
                                                   pil_jpeg(photo("astronaut")[:37, :53], subsampling=0)]
    batch = dvpp.decode_jpeg(datas, stream=stream)
    stream.synchronize()
    assert [m.shape for m in batch] == [rgb_of(imdecode(d, cv2.IMREAD_COLOR)).shape for d in datas]
    for d, m in zip(datas, batch):
        np.testing.assert_array_equal(m.numpy(), rgb_of(imdecode(d, cv2.IMREAD_COLOR)))


def test_jpeg_corrupt_input_fails_as_promised(stream):
    data = cv2_jpeg(photo("coffee"))
    with pytest.raises(runtime.InvalidImageError, match="not a JPEG"):
        dvpp.decode_jpeg(cv2_png(photo("coffee")), stream=stream)
    with pytest.raises(runtime.InvalidImageError, match="size is 0"):
        dvpp.jpeg_info(b"")
    sos = data.rindex(b"\xff\xda")
    cut = data[:sos + (len(data) - sos) // 2]
    assert dvpp.jpeg_info(cut) == (600, 400, 3)  # the header is intact
    dvpp.decode_jpeg([data, cut, data], stream=stream)
    with pytest.raises(runtime.InvalidImageError, match=r"rtDvppDecodeJpegBatch: image 1 of the batch: corrupt or "
                                                        r"truncated JPEG"):
        stream.synchronize()
    # cv2 fills a cut body with grey and says nothing; DVPP refuses it.
    one = dvpp.decode_jpeg(cut, stream=stream)
    with pytest.raises(runtime.InvalidImageError, match=r"rtDvppDecodeJpeg: image 0"):
        stream.synchronize()
    del one
    np.testing.assert_array_equal(ours(dvpp.decode_jpeg, data, "rgb", stream), rgb_of(imdecode(data, cv2.IMREAD_COLOR)))


@pytest.mark.parametrize("fmt", ["rgb", "gray", "nv12"])
def test_jpeg_encode_round_trips_and_opencv_reads_it(stream, fmt):
    img = photo("astronaut")
    if fmt == "gray":
        src = np.ascontiguousarray(img[..., 1])
    elif fmt == "nv12":
        src = ours(dvpp.decode_jpeg, cv2_jpeg(img, 95), "nv12", stream)
    else:
        src = img
    errors = []
    for q in (40, 75, 95):
        enc = dvpp.encode_jpeg(runtime.to_device(src), q, stream=stream, format=None if fmt != "nv12" else "nv12")
        want = imdecode(enc, cv2.IMREAD_UNCHANGED)
        got = ours(dvpp.decode_jpeg, enc, "gray" if fmt == "gray" else "rgb", stream)
        np.testing.assert_array_equal(got, want if fmt == "gray" else rgb_of(want))
        ref = src if fmt != "nv12" else ours(dvpp.decode_jpeg, cv2_jpeg(img, 95), "rgb", stream)
        errors.append(np.abs(got.astype(int) - ref).mean())
    assert errors[0] > errors[1] > errors[2], errors
    assert errors[2] < 2.5, errors


# ------------------------------------------------------------------------------------------------------- PNG

def png_cases():
    img = photo("astronaut")[::2, ::2]
    grey = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
    alpha = (np.arange(grey.size) % 251).reshape(grey.shape).astype(np.uint8)
    cases = {
        "rgb8": cv2_png(img[..., ::-1]),
        "rgba8": cv2_png(np.dstack([img[..., ::-1], alpha])),
        "grey8": cv2_png(grey),
        "rgb16": cv2_png(img[..., ::-1].astype(np.uint16) * 257 + 77),
        "grey16": cv2_png(grey.astype(np.uint16) * 251),
    }
    b = io.BytesIO()
    Image.fromarray(img).quantize(48).save(b, "PNG")
    cases["palette"] = b.getvalue()
    b = io.BytesIO()
    Image.fromarray(np.dstack([grey, alpha]), "LA").save(b, "PNG")
    cases["grey+alpha"] = b.getvalue()
    b = io.BytesIO()
    Image.fromarray(img).quantize(16).save(b, "PNG", bits=4, transparency=2)
    cases["palette4+tRNS"] = b.getvalue()
    return cases


@pytest.mark.parametrize("kind", list(png_cases()))
def test_png_decode_equals_opencv(stream, kind):
    data = png_cases()[kind]
    w, h, c = dvpp.png_info(data)
    assert c == {"rgb8": 3, "rgba8": 4, "grey8": 1, "rgb16": 3, "grey16": 1, "palette": 3, "grey+alpha": 2,
                 "palette4+tRNS": 4}[kind]
    np.testing.assert_array_equal(ours(dvpp.decode_png, data, "bgr", stream), imdecode(data, cv2.IMREAD_COLOR))
    np.testing.assert_array_equal(ours(dvpp.decode_png, data, "rgb", stream), rgb_of(imdecode(data, cv2.IMREAD_COLOR)))
    gray = ours(dvpp.decode_png, data, "gray", stream)
    if c >= 3:
        # Grey of colour: convert_color's BT.601 luma of the RGB bit for bit (one formula in DVPP); cv2.imdecode
        # uses libpng's weights, within 1 of it.
        converted = dvpp.convert_color(dvpp.decode_png(data, "rgb", stream=stream), "rgb", "gray", stream=stream)
        stream.synchronize()
        np.testing.assert_array_equal(gray, converted.numpy())
        assert np.abs(gray.astype(int) - imdecode(data, cv2.IMREAD_GRAYSCALE)).max() <= 1
    else:
        np.testing.assert_array_equal(gray, imdecode(data, cv2.IMREAD_GRAYSCALE))
    rgba = ours(dvpp.decode_png, data, "rgba", stream)
    assert rgba.shape == (h, w, 4)
    if "16" not in kind:  # Pillow clips 16-bit grey instead of taking the high byte as libpng (and cv2) do
        np.testing.assert_array_equal(rgba, np.asarray(Image.open(io.BytesIO(data)).convert("RGBA")))
    unchanged = imdecode(data, cv2.IMREAD_UNCHANGED)
    if unchanged.ndim == 3 and unchanged.shape[2] == 4 and unchanged.dtype == np.uint8:
        np.testing.assert_array_equal(ours(dvpp.decode_png, data, "bgra", stream), unchanged)


def test_png_corrupt_input_fails_as_promised(stream):
    data = png_cases()["rgb8"]
    with pytest.raises(runtime.InvalidImageError, match="not a PNG"):
        dvpp.png_info(cv2_jpeg(photo("coffee")))
    cut = data[:len(data) // 2]
    dvpp.png_info(cut)  # the header is intact
    dvpp.decode_png(cut, stream=stream)
    with pytest.raises(runtime.InvalidImageError, match=r"rtDvppDecodePng: image 0: corrupt or truncated PNG"):
        stream.synchronize()
    np.testing.assert_array_equal(ours(dvpp.decode_png, data, "bgr", stream), imdecode(data, cv2.IMREAD_COLOR))
