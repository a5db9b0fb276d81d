"""DVPP in the trace: a traced pipeline's DVPP calls appear as `dvpp` spans named for their work ("jpeg decode",
"resize", ...) with op, queued_us, status and bytes, in stream order on the stream's track, instead of as the host
functions and kernels that carry them; a failed decode's span says so; a batch's images and outcome have spans."""
import json
import struct
import zlib

import numpy as np
import pytest

import runtime
from runtime import dvpp


def cpu_device_or_skip():
    if runtime.get_device_properties(0).backend != "cpu":
        pytest.skip("the trace's spans are timed on cpu devices")


def read_trace(path):
    with open(path) as f:
        events = json.load(f)
    assert isinstance(events, list)
    return events


def spans(events, cat=None):
    out = [e for e in events if e["ph"] == "X" and e["cat"] != "api" and (cat is None or e["cat"] == cat)]
    return sorted(out, key=lambda e: (e["ts"], e["args"]["op"]))


def png_bytes(image):
    """A minimal 8-bit RGB PNG of `image` (h, w, 3): no filter, one IDAT."""
    h, w, _ = image.shape
    raw = b"".join(b"\x00" + image[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


W, H = 64, 48


def picture():
    y, x = np.mgrid[0:H, 0:W]
    return np.stack([x * 4, y * 5, (x + y) * 2], axis=-1).astype(np.uint8)


def test_a_traced_pipeline_shows_its_dvpp_calls(tmp_path):
    cpu_device_or_skip()
    image = picture()
    jpeg = dvpp.encode_jpeg(runtime.to_device(image))  # before the trace: the pipeline decodes it
    png = png_bytes(image)
    path = tmp_path / "trace.json"
    with runtime.profile(path):
        rgb = dvpp.decode_jpeg(jpeg)
        grey = dvpp.decode_png(png, format="gray")
        small = dvpp.resize(rgb, (32, 24))
        boxed = dvpp.letterbox(rgb, (40, 40))
        bgr = dvpp.convert_color(rgb, src="rgb", dst="bgr")
        tensor = dvpp.normalize(small, mean=[0.5, 0.5, 0.5], std=[0.25, 0.25, 0.25])
        pre = dvpp.preprocess(rgb, (16, 16))
        again = dvpp.encode_jpeg(bgr, format="bgr")
        runtime.synchronize()
    assert again[:3] == b"\xff\xd8\xff" and grey is not None and boxed is not None and tensor is not None
    assert pre is not None
    events = read_trace(path)
    every = spans(events)
    # The DVPP work is named for what it does: no anonymous host function or kernel carries it.
    assert not [e for e in every if e["cat"] in ("host", "kernel")], [e["name"] for e in every]
    d = spans(events, "dvpp")
    names = [e["name"] for e in d]
    # In the program's order (a call may queue several operations: resize a columns table, then the rows).
    order = []
    for n in names:
        if not order or order[-1] != n:
            order.append(n)
    assert order == ["jpeg decode", "png decode", "resize", "crop resize paste", "convert color", "normalize",
                     "preprocess", "jpeg encode"], names
    for e in d:
        a = e["args"]
        assert a["status"] == "ok", e
        assert isinstance(a["op"], int) and a["op"] > 0, e
        assert a["queued_us"] >= 0 and e["dur"] >= 0, e
    by_name = {}
    for e in d:
        by_name.setdefault(e["name"], []).append(e)
    assert [e["args"]["bytes"] for e in by_name["jpeg decode"]] == [W * H * 3]
    assert [e["args"]["bytes"] for e in by_name["png decode"]] == [W * H]
    assert {e["args"]["bytes"] for e in by_name["resize"]} == {32 * 24 * 3}
    assert {e["args"]["bytes"] for e in by_name["crop resize paste"]} == {40 * 40 * 3}
    assert [e["args"]["bytes"] for e in by_name["convert color"]] == [W * H * 3]
    assert [e["args"]["bytes"] for e in by_name["normalize"]] == [3 * 32 * 24 * 4]
    assert {e["args"]["bytes"] for e in by_name["preprocess"]} == {3 * 16 * 16 * 4}
    assert [e["args"]["bytes"] for e in by_name["jpeg encode"]] == [W * H * 3]
    # The pictures' sizes: [width, height] of the source and of the output.
    assert [(e["args"]["src"], e["args"]["dst"]) for e in by_name["jpeg decode"]] == [([W, H], [W, H])]
    assert {(tuple(e["args"]["src"]), tuple(e["args"]["dst"])) for e in by_name["resize"]} == {((W, H), (32, 24))}
    # A letterbox reads the whole picture and writes the 40x30 rectangle it pastes into the 40x40 output.
    assert {(tuple(e["args"]["src"]), tuple(e["args"]["dst"])) for e in by_name["crop resize paste"]} == {
        ((W, H), (40, 30))}
    # All on the default stream's track, one after the other: operation numbers rise, spans never overlap.
    tracks = {e["tid"] for e in d}
    assert len(tracks) == 1, tracks
    names_of = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names_of[tracks.pop()] == "cpu:0 stream 0"
    ops = [e["args"]["op"] for e in d]
    assert ops == sorted(ops) and len(set(ops)) == len(ops), ops
    for a, b in zip(d, d[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + 0.002, (a, b)


def test_a_batch_has_a_span_per_image_and_one_for_its_outcome(tmp_path):
    cpu_device_or_skip()
    image = picture()
    jpeg = dvpp.encode_jpeg(runtime.to_device(image))
    cut = jpeg[: jpeg.index(b"\xff\xda") + 40]  # a valid header, a body cut short: fails when decoded
    path = tmp_path / "trace.json"
    with runtime.profile(path):
        dvpp.decode_jpeg([jpeg, cut, jpeg])
        with pytest.raises(runtime.InvalidImageError, match="image 1 of the batch"):
            runtime.synchronize()
    events = read_trace(path)
    d = spans(events, "dvpp")
    images = [e for e in d if e["name"] == "jpeg decode"]
    assert len(images) == 3, [e["name"] for e in d]
    # A batch image's failure is recorded by the batch (the others are decoded): its outcome span fails.
    assert all(e["args"]["bytes"] == W * H * 3 for e in images)
    outcome = [e for e in d if e["name"] == "jpeg decode batch"]
    assert len(outcome) == 1
    assert outcome[0]["args"]["status"] == "failed"
    assert outcome[0]["args"]["bytes"] == 3 * W * H * 3
    # The outcome comes after every image (the lanes join the call's stream before it).
    assert all(e["ts"] + e["dur"] <= outcome[0]["ts"] + 0.002 for e in images)
    assert not [e for e in spans(events) if e["cat"] == "host"]


def test_a_failed_decode_and_what_the_stream_skips_after_it(tmp_path):
    cpu_device_or_skip()
    image = picture()
    jpeg = dvpp.encode_jpeg(runtime.to_device(image))
    cut = jpeg[: jpeg.index(b"\xff\xda") + 40]
    path = tmp_path / "trace.json"
    with runtime.profile(path):
        rgb = dvpp.decode_jpeg(cut)
        dvpp.resize(rgb, (32, 24))
        with pytest.raises(runtime.InvalidImageError):
            runtime.synchronize()
    d = spans(read_trace(path), "dvpp")
    assert [e["name"] for e in d][:1] == ["jpeg decode"]
    assert d[0]["args"]["status"] == "failed"
    skipped = [e for e in d if e["name"] == "resize"]
    assert skipped and all(e["args"]["status"] == "skipped" for e in skipped), d


@runtime.jit
def add_one(data):
    i = runtime.get_global_id()
    data[i] = data[i] + 1.0


def test_other_work_keeps_its_own_spans_and_untraced_calls_record_nothing(tmp_path):
    cpu_device_or_skip()
    image = picture()
    jpeg = dvpp.encode_jpeg(runtime.to_device(image))
    rgb = dvpp.decode_jpeg(jpeg)  # untraced
    data = runtime.to_device(np.zeros(256, np.float32))
    runtime.default_stream().launch_kernel(add_one, data)  # compiled before the trace
    runtime.synchronize()
    ran = []
    path = tmp_path / "trace.json"
    with runtime.profile(path):
        dvpp.resize(rgb, (8, 8))
        s = runtime.default_stream()
        s.launch_kernel(add_one, data)
        s.launch_host_func(lambda: ran.append(1))
        dvpp.convert_color(rgb, src="rgb", dst="bgr")
        runtime.synchronize()
    assert ran == [1]
    every = spans(read_trace(path))
    cats = [(e["cat"], e["name"]) for e in every if e["cat"] in ("dvpp", "kernel", "host")]
    # The user's kernel and host function between two DVPP calls are their own spans.
    kinds = []
    for c in cats:
        if not kinds or kinds[-1] != c:
            kinds.append(c)
    assert kinds == [("dvpp", "resize"), ("kernel", "add_one"), ("host", "host function"),
                     ("dvpp", "convert color")], cats
