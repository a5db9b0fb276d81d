"""Tests of runtime.dvpp's API (issue 16): output shapes, dtypes and formats, batches, host inputs, the stream an
operation runs on, keep-alive of what queued work uses, and every refusal with its message. The pixel values
checked here are the exact ones a test can state without a reference library (crops are slices, an identity resize
is a copy, nearest halving takes every other pixel, rgb <-> bgr reverses the channels, normalisation is numpy's);
exactness against OpenCV lives in test_dvpp_resize.py, test_dvpp_color.py and test_dvpp_codec.py."""
import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import runtime
from runtime import dvpp
from conftest import skip_unless_kernels_run


def rgb_image(h, w, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def nv12_image(h, w, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h * 3 // 2, w), dtype=np.uint8)


def photo(h=96, w=128):
    """A smooth colour image (JPEG-friendly: its round trip error is small)."""
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([x * 255 // max(1, w - 1), y * 255 // max(1, h - 1), (x + y) * 255 // (w + h)],
                    axis=-1).astype(np.uint8)


def jpeg_bytes(img, quality=95):
    cv2 = pytest.importorskip("cv2")
    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(img[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return buf.tobytes()


def png_bytes(img):
    cv2 = pytest.importorskip("cv2")
    ok, buf = cv2.imencode(".png", np.ascontiguousarray(img[..., ::-1]) if img.ndim == 3 else img)
    assert ok
    return buf.tobytes()


def host(mem, stream):
    stream.synchronize()
    return mem.numpy()


# ---------------------------------------------------------------------------------------------------- refusals
# Checked in Python before anything is allocated or queued.

def refused(match, fn, *args, **kwargs):
    before = runtime.memory_stats()["num_allocs"]
    with pytest.raises(runtime.InvalidValueError, match=match):
        fn(*args, **kwargs)
    assert runtime.memory_stats()["num_allocs"] == before, "a refused call allocated memory"


IMG = rgb_image(8, 10)


@pytest.mark.parametrize("size, match", [
    ((0, 4), r"resize: size: width = 0 is out of range"),
    ((4, -1), r"resize: size: height = -1 is out of range"),
    ((4,), r"resize: size must be \(width, height\)"),
    (4, r"resize: size must be \(width, height\)"),
    ((4.0, 4), r"resize: size: width must be an int"),
    ((True, 4), r"resize: size: width must be an int"),
    ((2**32, 4), r"out of range \(expected 1..4294967295\)"),
])
def test_bad_size(size, match):
    refused(match, dvpp.resize, IMG, size)


@pytest.mark.parametrize("box, match", [
    ((0, 0, 4), r"crop: box must be \(x, y, width, height\)"),
    ((-1, 0, 4, 4), r"crop: box: x = -1 is out of range"),
    ((0, 0, 0, 4), r"crop: box: width = 0 is out of range"),
    ("box", r"crop: box must be \(x, y, width, height\) or a list of them"),
])
def test_bad_box(box, match):
    refused(match, dvpp.crop, IMG, box)


def test_bad_names():
    refused(r"resize: interpolation must be one of 'nearest', 'bilinear', 'area', got 'cubic'", dvpp.resize, IMG,
            (4, 4), "cubic")
    refused(r"resize: image: format must be one of 'gray', 'rgb', .*'i420', got 'yuv'", dvpp.resize, IMG, (4, 4),
            format="yuv")
    refused(r"convert_color: dst must be one of", dvpp.convert_color, IMG, "rgb", "hsv")
    refused(r"convert_color: matrix must be one of 'bt601', 'bt709', got 'bt2020'", dvpp.convert_color, IMG, "rgb",
            "bgr", "bt2020")
    refused(r"convert_color: full_range must be a bool, got 1", dvpp.convert_color, IMG, "rgb", "bgr", "bt601", 1)
    refused(r"normalize: layout must be one of 'chw', 'hwc', got 'nchw'", dvpp.normalize, IMG, 0, 1, "nchw")
    refused(r"normalize: dtype float64 is not supported \(expected one of float32, float16, bfloat16, uint8, int8\)",
            dvpp.normalize, IMG, 0, 1, dtype=np.float64)
    refused(r"preprocess: dst must be one of 'rgb', 'bgr', 'gray', got 'rgba'", dvpp.preprocess, IMG, (4, 4),
            dst="rgba")
    refused(r"decode_png: format must be one of 'gray', 'rgb', 'bgr', 'rgba', 'bgra', got 'nv12'", dvpp.decode_png,
            b"\x89PNG", "nv12")
    refused(r"encode_jpeg: quality = 0 is out of range \(expected 1..100\)", dvpp.encode_jpeg, IMG, 0)


@pytest.mark.parametrize("image, match", [
    (np.zeros((4, 4, 3), np.float32), r"resize: image: expected uint8 pixels, got a host array of float32"),
    (np.zeros((4, 4, 2), np.uint8), r"resize: image: 2 channels \(shape \(4, 4, 2\)\): expected 1, 3 or 4"),
    (np.zeros((2, 4, 4, 3), np.uint8), r"resize: image: an image is shaped \(h, w, channels\)"),
    (np.zeros((0, 4, 3), np.uint8), r"resize: image: the image is empty \(shape \(0, 4, 3\)\)"),
    ([1, 2, 3], r"resize: image 0: expected an image \(runtime.DeviceMemory or a numpy uint8 array\), got int"),
    ("picture", r"resize: image: expected an image .*got str"),
])
def test_bad_images(image, match):
    refused(match, dvpp.resize, image, (4, 4))


def test_bad_image_for_its_format():
    refused(r"a 'nv12' image is shaped \(h \* 3 // 2, w\) with h and w even.*got shape \(5, 4\)", dvpp.resize,
            np.zeros((5, 4), np.uint8), (4, 4), format="nv12")
    refused(r"a 'nv12' image is shaped .*got shape \(6, 5\)", dvpp.convert_color, np.zeros((6, 5), np.uint8))
    refused(r"a 'rgb' image is shaped \(h, w, 3\), got shape \(4, 4, 4\)", dvpp.resize, np.zeros((4, 4, 4), np.uint8),
            (2, 2), format="rgb")
    refused(r"a 'gray' image is shaped \(h, w\) or \(h, w, 1\), got shape \(8, 10, 3\)", dvpp.resize, IMG, (2, 2),
            format="gray")


def test_bad_device_memory():
    f32 = runtime.empty((4, 4, 3), np.float32)
    refused(r"resize: image: expected uint8 pixels, got device memory on .*float32", dvpp.resize, f32, (2, 2))
    mem = runtime.to_device(IMG)
    mem.free()
    with pytest.raises(runtime.InvalidValueError, match=r"was freed"):
        dvpp.resize(mem, (2, 2))


def test_bad_per_channel_values():
    refused(r"normalize: mean has 2 values but the image has 3 channel\(s\)", dvpp.normalize, IMG, [1, 2], 1)
    refused(r"normalize: std must be a number or one number per channel, got 'x'", dvpp.normalize, IMG, 0, "x")
    refused(r"preprocess: mean has 3 values but the image has 1 channel\(s\)", dvpp.preprocess, IMG, (4, 4),
            mean=[1, 2, 3], dst="gray")
    refused(r"letterbox: fill = 256 is out of range \(expected 0..255\)", dvpp.letterbox, IMG, (4, 4), 256)
    refused(r"letterbox: fill must be an int 0..255 or 3 of them \(one per channel of 'rgb'\)", dvpp.letterbox, IMG,
            (4, 4), (1, 2))


def test_a_refused_batch_copies_nothing():
    # image 1 is bad: image 0 (a host array) must not have been copied in already
    refused(r"resize: image 1: expected uint8 pixels", dvpp.resize, [IMG, IMG.astype(np.int16)], (4, 4))
    refused(r"resize: 1 sizes for 2 images", dvpp.resize, [IMG, IMG], [(4, 4)])
    refused(r"crop: box: 1 entries for 2 images", dvpp.crop, [IMG, IMG], [(0, 0, 2, 2)])
    refused(r"normalize: image 1 is 4 x 4 'rgb' but image 0 is 10 x 8 'rgb': a batch gives one array",
            dvpp.normalize, [IMG, rgb_image(4, 4)], 0, 1)


def test_bad_stream():
    refused(r"resize: stream must be a runtime.Stream, got int", dvpp.resize, IMG, (4, 4), stream=0)


def test_normalize_refuses_420():
    refused(r"normalize: image 0 is 'nv12'; normalize takes packed images \(convert_color it first, or use "
            r"preprocess", dvpp.normalize, nv12_image(4, 4), 0, 1, format="nv12")


def test_preprocess_refuses_unknown_bytes():
    refused(r"preprocess: image: encoded data that is neither JPEG nor PNG \(it starts with 47 49 46 38 39 61 2e 2e\)",
            dvpp.preprocess, b"GIF89a..", (4, 4))
    refused(r"preprocess: crop must be \(x, y, width, height\), None, or for a batch a list",
            dvpp.preprocess, [IMG, IMG], (4, 4), crop=[(0, 0, 2, 2)])


def test_batch_on_several_devices():
    if runtime.get_device_count() < 2:
        pytest.skip("one device")
    with runtime.device(1):
        other = runtime.to_device(IMG)
    refused(r"resize: the images are on several devices", dvpp.resize, [runtime.to_device(IMG), other], (4, 4))



def test_bad_out():
    img = runtime.to_device(IMG)
    refused(r"resize: out must be runtime.DeviceMemory or a list of it \(one per output\), got ndarray", dvpp.resize,
            img, (5, 4), out=np.zeros((4, 5, 3), np.uint8))
    refused(r"resize: out: expected uint8, shape \(4, 5, 3\) for this output, got device memory on .*uint8, shape "
            r"\(5, 4, 3\)", dvpp.resize, img, (5, 4), out=runtime.empty((5, 4, 3), np.uint8))
    refused(r"resize: out: expected uint8, shape \(4, 5, 3\) for this output, got .*float32", dvpp.resize, img,
            (5, 4), out=runtime.empty((4, 5, 3), np.float32))
    refused(r"resize: out has 1 memories for 2 outputs", dvpp.resize, [img, img], (5, 4),
            out=[runtime.empty((4, 5, 3), np.uint8)])
    refused(r"crop: out\[1\]: expected uint8, shape \(3, 3, 3\)", dvpp.crop, IMG, [(0, 0, 2, 2), (0, 0, 3, 3)],
            out=[runtime.empty((2, 2, 3), np.uint8), runtime.empty((2, 2, 3), np.uint8)])
    refused(r"normalize: out: expected float32, shape \(3, 8, 10\) for this output", dvpp.normalize, IMG, 0, 1,
            out=runtime.empty((8, 10, 3), np.float32))
    refused(r"preprocess: out: expected float16, shape \(2, 3, 4, 4\)", dvpp.preprocess, [IMG, IMG], (4, 4),
            dtype=np.float16, out=runtime.empty((2, 3, 4, 4), np.float32))
    freed = runtime.empty((4, 5, 3), np.uint8)
    freed.free()
    with pytest.raises(runtime.InvalidValueError, match=r"was freed"):
        dvpp.resize(img, (5, 4), out=freed)

# ---------------------------------------------------------------------------------------------------- letterbox_box

@pytest.mark.parametrize("image, size, box", [
    ((640, 480), (416, 416), (0, 52, 416, 312)),      # wide: the width fills
    ((480, 640), (416, 416), (52, 0, 312, 416)),      # tall: the height fills
    ((100, 50), (200, 100), (0, 0, 200, 100)),        # the same aspect: all of it
    ((1920, 1080), (640, 640), (0, 140, 640, 360)),
    ((1000, 1), (10, 10), (0, 4, 10, 1)),             # at least one pixel
    ((3, 2), (10, 10), (0, 1, 10, 7)),                # 6.67 rounds to 7; (10 - 7) // 2
])
def test_letterbox_box(image, size, box):
    assert dvpp.letterbox_box(image, size) == box


def test_letterbox_box_420_is_even():
    assert dvpp.letterbox_box((3, 2), (10, 10), "nv12") == (0, 2, 10, 6)  # 7 down to 6, centred
    assert dvpp.letterbox_box((1000, 1), (10, 10), "i420") == (0, 4, 10, 2)
    with pytest.raises(runtime.InvalidValueError, match=r"letterbox_box: a 'nv12' output has even sizes, got 9 x 10"):
        dvpp.letterbox_box((4, 4), (9, 10), "nv12")


# ---------------------------------------------------------------------------------------------------- resize, crop

def test_resize_shapes_and_formats(stream):
    skip_unless_kernels_run()
    out = dvpp.resize(IMG, (5, 3), stream=stream)
    assert isinstance(out, runtime.DeviceMemory)
    assert (out.shape, out.dtype) == ((3, 5, 3), np.uint8)
    assert dvpp.resize(rgb_image(8, 10)[..., :1], (5, 3), stream=stream).shape == (3, 5)  # (h, w, 1) is gray
    assert dvpp.resize(np.zeros((8, 10, 4), np.uint8), (5, 3), stream=stream).shape == (3, 5, 4)
    nv = dvpp.resize(nv12_image(8, 10), (6, 4), stream=stream, format="nv12")
    assert nv.shape == (6, 6)
    # the format is remembered: resizing that NV12 output again needs no format=
    assert dvpp.resize(nv, (4, 2), stream=stream).shape == (3, 4)
    stream.synchronize()


def test_identity_resize_and_nearest_halving(stream):
    skip_unless_kernels_run()
    for interp in ("nearest", "bilinear", "area"):
        np.testing.assert_array_equal(host(dvpp.resize(IMG, (10, 8), interp, stream=stream), stream), IMG)
    np.testing.assert_array_equal(host(dvpp.resize(IMG, (5, 4), "nearest", stream=stream), stream), IMG[::2, ::2])
    nv = nv12_image(8, 12)
    half = host(dvpp.resize(nv, (6, 4), "nearest", stream=stream, format="nv12"), stream)
    y, uv = nv[:8], nv[8:].reshape(4, 6, 2)
    np.testing.assert_array_equal(half[:4], y[::2, ::2])
    np.testing.assert_array_equal(half[4:].reshape(2, 3, 2), uv[::2, ::2])


def test_host_and_device_inputs_agree(stream):
    skip_unless_kernels_run()
    img = rgb_image(33, 47, seed=3)
    a = host(dvpp.resize(img, (20, 11), stream=stream), stream)
    b = host(dvpp.resize(runtime.to_device(img), (20, 11), stream=stream), stream)
    np.testing.assert_array_equal(a, b)
    # a non-contiguous host array is copied as the image it shows
    c = host(dvpp.resize(np.ascontiguousarray(img[:, ::-1])[:, ::-1], (20, 11), stream=stream), stream)
    np.testing.assert_array_equal(a, c)


def test_resize_batch(stream):
    skip_unless_kernels_run()
    imgs = [rgb_image(8, 10, seed=i) for i in range(3)]
    outs = dvpp.resize(imgs, (5, 4), "nearest", stream=stream)
    assert isinstance(outs, list) and [o.shape for o in outs] == [(4, 5, 3)] * 3
    for img, o in zip(imgs, outs):
        np.testing.assert_array_equal(host(o, stream), img[::2, ::2])
    sized = dvpp.resize(imgs, [(10, 8), (5, 4), (2, 1)], stream=stream)
    assert [o.shape for o in sized] == [(8, 10, 3), (4, 5, 3), (1, 2, 3)]
    np.testing.assert_array_equal(host(sized[0], stream), imgs[0])
    assert dvpp.resize([], (4, 4), stream=stream) == []



def test_out_is_written(stream):
    skip_unless_kernels_run()
    out = runtime.empty((4, 5, 3), np.uint8)
    assert dvpp.resize(IMG, (5, 4), "nearest", stream=stream, out=out) is out
    np.testing.assert_array_equal(host(out, stream), IMG[::2, ::2])
    grey = runtime.empty((4, 5, 1), np.uint8)  # (h, w, 1) stands for a grey output too
    dvpp.resize(IMG[..., 0], (5, 4), "nearest", stream=stream, out=grey)
    np.testing.assert_array_equal(host(grey, stream)[..., 0], IMG[::2, ::2, 0])
    many = [runtime.empty((2, 2, 3), np.uint8), runtime.empty((1, 3, 3), np.uint8)]
    got = dvpp.crop([IMG], [[(0, 0, 2, 2), (1, 1, 3, 1)]], stream=stream, out=many)
    assert got[0][0] is many[0] and got[0][1] is many[1]
    np.testing.assert_array_equal(host(many[1], stream), IMG[1:2, 1:4])
    # the format is remembered for out memory too: this (12, 10) memory is NV12, not grey
    nv = runtime.empty((12, 10), np.uint8)
    dvpp.resize(nv12_image(8, 10), (10, 8), stream=stream, format="nv12", out=nv)
    assert dvpp.resize(nv, (4, 2), stream=stream).shape == (3, 4)
    stream.synchronize()

def test_crop_is_a_slice(stream):
    skip_unless_kernels_run()
    img = rgb_image(20, 30, seed=1)
    np.testing.assert_array_equal(host(dvpp.crop(img, (3, 5, 7, 4), stream=stream), stream), img[5:9, 3:10])
    parts = dvpp.crop(img, [(0, 0, 30, 20), (29, 19, 1, 1)], stream=stream)
    assert isinstance(parts, list) and len(parts) == 2
    np.testing.assert_array_equal(host(parts[0], stream), img)
    np.testing.assert_array_equal(host(parts[1], stream), img[19:20, 29:30])
    nv = nv12_image(8, 12, seed=2)
    c = host(dvpp.crop(nv, (2, 4, 6, 4), stream=stream, format="nv12"), stream)
    np.testing.assert_array_equal(c[:4], nv[4:8, 2:8])
    np.testing.assert_array_equal(c[4:], nv[8 + 2:8 + 4, 2:8])


def test_crop_batch_structure(stream):
    skip_unless_kernels_run()
    a, b = rgb_image(10, 10, seed=4), rgb_image(12, 14, seed=5)
    out = dvpp.crop([a, b], [(1, 1, 3, 3), [(0, 0, 2, 2), (5, 5, 4, 2)]], stream=stream)
    assert isinstance(out[0], runtime.DeviceMemory) and isinstance(out[1], list) and len(out[1]) == 2
    np.testing.assert_array_equal(host(out[0], stream), a[1:4, 1:4])
    np.testing.assert_array_equal(host(out[1][1], stream), b[5:7, 5:9])
    same = dvpp.crop([a, b], (2, 2, 3, 3), stream=stream)
    np.testing.assert_array_equal(host(same[1], stream), b[2:5, 2:5])


def test_crop_resize_equals_resize_of_the_crop(stream):
    skip_unless_kernels_run()
    img = rgb_image(40, 50, seed=6)
    box = (7, 3, 31, 22)
    got = host(dvpp.crop_resize(img, box, (13, 9), stream=stream), stream)
    ref = host(dvpp.resize(img[3:25, 7:38], (13, 9), stream=stream), stream)
    np.testing.assert_array_equal(got, ref)
    many = dvpp.crop_resize([img, img], [box, [box, (0, 0, 50, 40)]], (13, 9), stream=stream)
    np.testing.assert_array_equal(host(many[0], stream), ref)
    np.testing.assert_array_equal(host(many[1][0], stream), ref)
    assert many[1][1].shape == (9, 13, 3)


def test_crop_outside_the_image_is_refused_by_the_library(stream):
    with pytest.raises(runtime.InvalidValueError, match=r"rtDvppCropResize: crop"):
        dvpp.crop(IMG, (5, 0, 6, 2), stream=stream)
    with pytest.raises(runtime.InvalidValueError, match=r"rtDvppBatchCropResize: crop"):
        dvpp.crop([IMG], [[(0, 0, 2, 2), (0, 7, 2, 2)]], stream=stream)


def test_letterbox(stream):
    skip_unless_kernels_run()
    img = rgb_image(30, 60, seed=7)  # 2:1 into a square: a band in the middle
    out = host(dvpp.letterbox(img, (40, 40), fill=114, stream=stream), stream)
    x, y, w, h = dvpp.letterbox_box((60, 30), (40, 40))
    assert (x, y, w, h) == (0, 10, 40, 20)
    assert out.shape == (40, 40, 3)
    assert (out[:y] == 114).all() and (out[y + h:] == 114).all()
    np.testing.assert_array_equal(out[y:y + h], host(dvpp.resize(img, (w, h), stream=stream), stream))
    coloured = host(dvpp.letterbox(img, (40, 40), fill=(1, 2, 3), stream=stream), stream)
    np.testing.assert_array_equal(coloured[0, 0], [1, 2, 3])
    rgba = host(dvpp.letterbox(np.zeros((30, 60, 4), np.uint8), (40, 40), fill=9, stream=stream), stream)
    np.testing.assert_array_equal(rgba[0, 0], [9, 9, 9, 255])
    nv = host(dvpp.letterbox(nv12_image(30, 60), (40, 40), fill=16, stream=stream, format="nv12"), stream)
    assert (nv[:10] == 16).all() and (nv[40:45] == 128).all()  # Y above the band, then the chroma rows above it


# ---------------------------------------------------------------------------------------------------- colour

def test_convert_color_shapes_and_channel_order(stream):
    skip_unless_kernels_run()
    img = rgb_image(6, 8, seed=8)
    bgr = host(dvpp.convert_color(img, "rgb", "bgr", stream=stream), stream)
    np.testing.assert_array_equal(bgr, img[..., ::-1])
    rgba = host(dvpp.convert_color(img, "rgb", "rgba", stream=stream), stream)
    np.testing.assert_array_equal(rgba[..., :3], img)
    assert (rgba[..., 3] == 255).all()
    assert dvpp.convert_color(img, "rgb", "gray", stream=stream).shape == (6, 8)
    assert dvpp.convert_color(img, "rgb", "nv12", stream=stream).shape == (9, 8)
    assert dvpp.convert_color(img, "rgb", "i420", stream=stream).shape == (9, 8)
    # a 2-D image is NV12 to convert_color; the output remembers its format
    rgb = dvpp.convert_color(nv12_image(6, 8), stream=stream)
    assert rgb.shape == (6, 8, 3)
    back = dvpp.convert_color(rgb, dst="bgr", stream=stream)
    np.testing.assert_array_equal(host(back, stream), host(rgb, stream)[..., ::-1])
    outs = dvpp.convert_color([img, img], "rgb", "bgr", stream=stream)
    assert isinstance(outs, list) and len(outs) == 2
    np.testing.assert_array_equal(host(outs[1], stream), img[..., ::-1])


def test_convert_color_grey_nv12_is_its_y_plane(stream):
    skip_unless_kernels_run()
    nv = nv12_image(6, 8, seed=9)
    np.testing.assert_array_equal(host(dvpp.convert_color(nv, "nv12", "gray", stream=stream), stream), nv[:6])


# ---------------------------------------------------------------------------------------------------- normalize

def reference_normalize(img, mean, std):
    """What rtDvppNormalize computes: fma(pixel, 1/std, -mean/std) in float32 (float64 product, one rounding)."""
    inv = (np.float32(1) / np.asarray(std, np.float32)).astype(np.float64)
    bias = (-np.asarray(mean, np.float32) / np.asarray(std, np.float32)).astype(np.float64)
    return (img.astype(np.float64) * inv + bias).astype(np.float32)


def test_normalize_layouts_and_values(stream):
    skip_unless_kernels_run()
    img = rgb_image(5, 7, seed=10)
    mean, std = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
    ref = reference_normalize(img, mean, std)
    chw = host(dvpp.normalize(img, mean, std, stream=stream), stream)
    assert chw.shape == (3, 5, 7) and chw.dtype == np.float32
    np.testing.assert_array_equal(chw, ref.transpose(2, 0, 1))
    hwc = host(dvpp.normalize(img, mean, std, "hwc", stream=stream), stream)
    np.testing.assert_array_equal(hwc, ref)
    grey = host(dvpp.normalize(img[..., 0], 10, 2, stream=stream), stream)
    assert grey.shape == (1, 5, 7)
    np.testing.assert_array_equal(grey[0], reference_normalize(img[..., 0], 10, 2))


def test_normalize_dtypes(stream):
    skip_unless_kernels_run()
    img = rgb_image(4, 6, seed=11)
    ref = reference_normalize(img, 100, 3).transpose(2, 0, 1)
    half = host(dvpp.normalize(img, 100, 3, dtype=np.float16, stream=stream), stream)
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half, ref.astype(np.float16))
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf = host(dvpp.normalize(img, 100, 3, dtype="bfloat16", stream=stream), stream)
    assert bf.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(bf, ref.astype(ml_dtypes.bfloat16))
    u8 = host(dvpp.normalize(img, 0, 0.5, dtype=np.uint8, stream=stream), stream)  # 2 * pixel, saturated
    np.testing.assert_array_equal(u8, np.minimum(img.astype(np.int32) * 2, 255).astype(np.uint8).transpose(2, 0, 1))
    i8 = host(dvpp.normalize(img, 128, 1, dtype=np.int8, stream=stream), stream)
    np.testing.assert_array_equal(i8, (img.astype(np.int32) - 128).astype(np.int8).transpose(2, 0, 1))


def test_normalize_batch_is_one_array(stream):
    skip_unless_kernels_run()
    imgs = [rgb_image(4, 6, seed=s) for s in range(3)]
    out = host(dvpp.normalize(imgs, 1, 2, stream=stream), stream)
    assert out.shape == (3, 3, 4, 6)
    for i, img in enumerate(imgs):
        np.testing.assert_array_equal(out[i], reference_normalize(img, 1, 2).transpose(2, 0, 1))


def test_normalize_std_zero_is_refused_by_the_library(stream):
    with pytest.raises(runtime.InvalidValueError, match=r"rtDvppNormalize: std"):
        dvpp.normalize(IMG, 0, [1, 0, 1], stream=stream)


# ---------------------------------------------------------------------------------------------------- preprocess

def test_preprocess_equals_the_composition(stream):
    skip_unless_kernels_run()
    img = rgb_image(50, 70, seed=12)
    box, size = (5, 3, 60, 44), (24, 16)
    mean, std = [1, 2, 3], [4, 5, 6]
    fused = host(dvpp.preprocess(img, size, box, mean, std, stream=stream), stream)
    assert fused.shape == (3, 16, 24) and fused.dtype == np.float32
    steps = dvpp.normalize(dvpp.crop_resize(img, box, size, stream=stream), mean, std, stream=stream)
    np.testing.assert_array_equal(fused, host(steps, stream))
    bgr = host(dvpp.preprocess(img, size, box, layout="hwc", dst="bgr", stream=stream), stream)
    ref = dvpp.normalize(dvpp.convert_color(dvpp.crop_resize(img, box, size, stream=stream), "rgb", "bgr",
                                            stream=stream), 0, 1, "hwc", stream=stream)
    np.testing.assert_array_equal(bgr, host(ref, stream))


def test_preprocess_batch_and_420(stream):
    skip_unless_kernels_run()
    imgs = [rgb_image(20, 30, seed=s) for s in range(2)]
    out = dvpp.preprocess(imgs, (8, 6), crop=[None, (2, 2, 10, 10)], stream=stream)
    assert out.shape == (2, 3, 6, 8)
    single = host(dvpp.preprocess(imgs[1], (8, 6), crop=(2, 2, 10, 10), stream=stream), stream)
    np.testing.assert_array_equal(host(out, stream)[1], single)
    nv = dvpp.preprocess(nv12_image(20, 30), (8, 6), format="nv12", dtype=np.float16, layout="hwc", stream=stream)
    assert (nv.shape, nv.dtype) == ((6, 8, 3), np.float16)
    stream.synchronize()


def test_preprocess_of_jpeg_bytes(stream):
    skip_unless_kernels_run()
    data = jpeg_bytes(photo(96, 128))
    full = host(dvpp.preprocess(data, (32, 24), scaled_decode=False, stream=stream), stream)
    ref = host(dvpp.preprocess(dvpp.decode_jpeg(data, stream=stream), (32, 24), stream=stream), stream)
    np.testing.assert_array_equal(full, ref)
    # scaled: decoded at 1/4 (32 x 24), which is what the output needs; the crop is in the original's pixels
    scaled = host(dvpp.preprocess(data, (32, 24), stream=stream), stream)
    assert scaled.shape == (3, 24, 32)
    assert np.abs(scaled - full).mean() < 8
    batch = dvpp.preprocess([data, np.frombuffer(data, np.uint8), photo(96, 128)], (16, 16), crop=(16, 0, 96, 96),
                            stream=stream)
    assert batch.shape == (3, 3, 16, 16)
    with pytest.raises(runtime.InvalidValueError, match=r"preprocess: image: crop \(0, 0, 129, 96\) lies outside the "
                                                        r"image's 128 x 96 pixels"):
        dvpp.preprocess(data, (8, 8), crop=(0, 0, 129, 96), stream=stream)


# ---------------------------------------------------------------------------------------------------- codecs

def test_decode_jpeg_shapes_formats_and_batch(stream):
    skip_unless_kernels_run()
    img = photo(48, 64)
    data = jpeg_bytes(img)
    assert dvpp.jpeg_info(data) == (64, 48, 3)
    rgb = dvpp.decode_jpeg(data, stream=stream)
    assert (rgb.shape, rgb.dtype) == ((48, 64, 3), np.uint8)
    assert np.abs(host(rgb, stream).astype(int) - img).max() < 16
    assert dvpp.decode_jpeg(data, "gray", stream=stream).shape == (48, 64)
    assert dvpp.decode_jpeg(data, "bgra", stream=stream).shape == (48, 64, 4)
    nv = dvpp.decode_jpeg(data, "nv12", stream=stream)
    assert nv.shape == (72, 64)
    # remembered as NV12 (a 2-D image would otherwise be grey: one component)
    assert dvpp.jpeg_info(dvpp.encode_jpeg(nv, stream=stream)) == (64, 48, 3)
    same = dvpp.decode_jpeg(np.frombuffer(data, np.uint8), stream=stream)
    np.testing.assert_array_equal(host(same, stream), host(rgb, stream))
    batch = dvpp.decode_jpeg([data, jpeg_bytes(photo(20, 30))], stream=stream)
    assert [b.shape for b in batch] == [(48, 64, 3), (20, 30, 3)]
    np.testing.assert_array_equal(host(batch[0], stream), host(rgb, stream))
    assert dvpp.decode_jpeg([], stream=stream) == []


def test_decode_jpeg_refusals_and_failures(stream):
    with pytest.raises(runtime.InvalidImageError):
        dvpp.jpeg_info(b"not a jpeg")
    with pytest.raises(runtime.InvalidImageError):
        dvpp.decode_jpeg(b"\xff\xd8", stream=stream)  # a header cut short: refused in the call
    with pytest.raises(runtime.InvalidValueError, match=r"decode_jpeg: encoded data must be bytes or a uint8 numpy "
                                                        r"array, got an array of int32"):
        dvpp.decode_jpeg(np.zeros(8, np.int32), stream=stream)
    data = jpeg_bytes(photo(64, 64))
    cut = data[:len(data) // 2]
    dvpp.decode_jpeg([data, cut], stream=stream)
    with pytest.raises(runtime.InvalidImageError, match=r"image 1"):
        stream.synchronize()
    # the stream stays usable
    assert dvpp.decode_jpeg(data, stream=stream).shape == (64, 64, 3)
    stream.synchronize()


def test_encode_jpeg(stream):
    skip_unless_kernels_run()
    img = photo(40, 56)
    enc = dvpp.encode_jpeg(img, 90, stream=stream)
    assert isinstance(enc, bytes) and enc[:2] == b"\xff\xd8"
    assert dvpp.jpeg_info(enc) == (56, 40, 3)
    back = host(dvpp.decode_jpeg(enc, stream=stream), stream)
    assert np.abs(back.astype(int) - img).mean() < 3
    both = dvpp.encode_jpeg([img, runtime.to_device(img)], stream=stream)
    assert isinstance(both, list) and both[0] == both[1]
    assert dvpp.jpeg_info(dvpp.encode_jpeg(img[..., 0], stream=stream)) == (56, 40, 1)


def test_decode_png(stream):
    skip_unless_kernels_run()
    img = rgb_image(9, 13, seed=13)
    data = png_bytes(img)
    assert dvpp.png_info(data) == (13, 9, 3)
    np.testing.assert_array_equal(host(dvpp.decode_png(data, stream=stream), stream), img)
    rgba = host(dvpp.decode_png(data, "rgba", stream=stream), stream)
    np.testing.assert_array_equal(rgba[..., :3], img)
    assert (rgba[..., 3] == 255).all()
    assert [m.shape for m in dvpp.decode_png([data, data], "gray", stream=stream)] == [(9, 13)] * 2


# ---------------------------------------------------------------------------------------------------- streams, keep-alive

def test_current_stream_is_used():
    skip_unless_kernels_run()
    s = runtime.Stream()
    gate = threading.Event()
    s.launch_host_func(lambda: gate.wait(30))
    with s:
        out = dvpp.resize(IMG, (5, 4), "nearest")
    assert not s.query()  # queued behind the gate: on s, not on the default stream
    gate.set()
    s.synchronize()
    np.testing.assert_array_equal(out.numpy(), IMG[::2, ::2])
    s.close()


def test_inputs_stay_alive_until_the_work_ran():
    skip_unless_kernels_run()
    s = runtime.Stream(non_blocking=True)  # to_device below must not wait for the gated stream
    gate = threading.Event()
    s.launch_host_func(lambda: gate.wait(30))
    big = rgb_image(600, 800, seed=14)  # large enough that numpy gives freed memory back to the system
    expected = big[::2, ::2].copy()
    out = dvpp.resize(big.copy(), (400, 300), "nearest", stream=s)  # the only reference to the copy is the call's
    dev = runtime.to_device(big)
    out2 = dvpp.crop(dev, (0, 0, 800, 600), stream=s)
    del dev
    gc.collect()
    gate.set()
    s.synchronize()
    np.testing.assert_array_equal(out.numpy(), expected)
    np.testing.assert_array_equal(out2.numpy(), big)
    s.close()


def test_default_stream_of_the_image_device():
    skip_unless_kernels_run()
    if runtime.get_device_count() < 2:
        pytest.skip("one device")
    with runtime.device(1):
        mem = runtime.to_device(IMG)
    out = dvpp.resize(mem, (5, 4), "nearest")  # current device 0: runs on device 1's default stream
    assert out.device == mem.device
    runtime.device(1).synchronize()
    np.testing.assert_array_equal(out.numpy(), IMG[::2, ::2])
    s0 = runtime.Stream(0)
    with pytest.raises(runtime.InvalidValueError, match=r"resize: the stream is on cpu:0 but the image is on cpu:1"):
        dvpp.resize(mem, (5, 4), stream=s0)



def test_capture_and_replay(stream):
    skip_unless_kernels_run()
    src = runtime.to_device(IMG)
    with stream.capture() as graph:  # the outputs and the host input's copy are allocated in the relaxed mode
        half = dvpp.resize(src, (5, 4), "nearest", stream=stream)
        crop = dvpp.crop(np.ascontiguousarray(IMG[::-1]), (0, 0, 4, 4), stream=stream)
    types = [n.type for n in graph.nodes()]
    assert "kernel" in types and "memcpy" in types
    exe = graph.instantiate()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(half.numpy(), IMG[::2, ::2])
    np.testing.assert_array_equal(crop.numpy(), IMG[::-1][:4, :4])
    other = rgb_image(8, 10, seed=15)
    runtime.copy(src, other)  # a replay reads the input as it is now
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(half.numpy(), other[::2, ::2])

# ---------------------------------------------------------------------------------------------------- docs/dvpp.md

def fenced(text, lang):
    """The fenced code blocks of `lang` in a Markdown text, in order."""
    blocks, inside, lines = [], False, []
    for line in text.splitlines():
        if not inside and line.strip() == "```" + lang:
            inside, lines = True, []
        elif inside and line.strip() == "```":
            inside = False
            blocks.append("\n".join(lines))
        elif inside:
            lines.append(line)
    return blocks


def test_the_python_examples_of_the_document_run(repo, tmp_path):
    skip_unless_kernels_run()
    blocks = fenced((repo / "docs" / "dvpp.md").read_text(), "python")
    assert len(blocks) >= 2
    script = tmp_path / "dvpp_doc.py"
    script.write_text("\n\n".join(blocks) + "\nprint('docs ok')\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "docs ok" in proc.stdout
