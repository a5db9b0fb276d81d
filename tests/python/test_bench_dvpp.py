"""runtime-bench dvpp (issue 16): the quick run has every row with ours measured and checked beside OpenCV; the test
images, crop geometry, harness and checks do what they say. No timing thresholds: speed is the benchmark's job."""
import hashlib
import json
import os
import subprocess
import sys
import time
import types

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")
pytest.importorskip("skimage")

from runtime import bench_dvpp as bd  # noqa: E402


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One `python -m runtime.bench dvpp --quick --json` run (a scratch kernel cache: its first calls build the DVPP
    kernels), shared by the tests below."""
    env = dict(os.environ, RUNTIME_CACHE_DIR=str(tmp_path_factory.mktemp("kernel-cache")))
    env.pop("RUNTIME_BENCH_PILLOW_SIMD", None)
    proc = subprocess.run([sys.executable, "-m", "runtime.bench", "dvpp", "--quick", "--json", "--threads", "2"],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def test_every_row_once_with_ours_measured(quick_run):
    assert [r["metric"] for r in quick_run] == list(bd.ROWS)
    for r in quick_run:
        o = r["ours"]
        assert "note" not in o, (r["metric"], o)
        assert o["name"].startswith("ours runtime.dvpp.") and "2 executors" in o["how"], o
        assert o["runs"] == 3 and 0 < o["min"] <= o["value"] <= o["max"], (r["metric"], o)
        assert r["unit"] == ("img/s" if r["metric"] in ("jpeg_decode_batch_1080p", "classification_pipeline") else "ms")
        assert r["better"] == ("higher" if r["unit"] == "img/s" else "lower")
        assert r["threads"] == 2 and r["device"] == "cpu:0"


def test_every_row_checked_its_results(quick_run):
    """Each row verified ours (and, for the pipeline, every peer against ours) after the warm-up: a wrong result
    would have made the run exit with status 2."""
    for r in quick_run:
        assert r["checks"], r["metric"]
    by = {r["metric"]: r for r in quick_run}
    assert "exactly" in by["resize_1080p_rgb_224"]["checks"][0]
    assert any("IMREAD_REDUCED" in c for c in by["classification_pipeline"]["checks"])


def test_opencv_beside_ours_with_ratios(quick_run):
    for r in quick_run:
        cv = [p for p in r["peers"] if p["name"].startswith("OpenCV")]
        assert cv, r["metric"]
        for p in cv:
            assert p["value"] > 0 and p["min"] <= p["value"] <= p["max"], p
            want = p["value"] / r["ours"]["value"] if r["better"] == "lower" else r["ours"]["value"] / p["value"]
            assert p["ratio"] == pytest.approx(want), p
        assert isinstance(r["met"], bool), r["metric"]  # OpenCV is always a target peer


def test_peers_present_or_saying_why(quick_run):
    by = {r["metric"]: r for r in quick_run}
    names = lambda m: [p["name"] for p in by[m]["peers"]]  # noqa: E731
    assert any(n.startswith("simplejpeg") for n in names("jpeg_decode_batch_1080p"))
    assert any("IMREAD_REDUCED" in n for n in names("classification_pipeline"))
    for r in quick_run:
        for p in r["peers"]:
            assert p["value"] is not None or p["note"].split(":")[0] in ("missing", "error"), p
        simd = [p for p in r["peers"] if p["name"].startswith("Pillow-SIMD")]
        assert len(simd) == 1 and "pillow-simd" in simd[0]["note"], simd  # not asked for in this run
    (tv,) = [p for p in by["classification_pipeline"]["peers"] if p["name"].startswith("torchvision")]
    try:
        import torchvision  # noqa: F401
        assert tv["value"] > 0, tv
    except ImportError:
        assert tv["note"].startswith("missing: torch"), tv


def test_table_mode_prints_rows_side_by_side(tmp_path):
    env = dict(os.environ, RUNTIME_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "runtime.bench", "dvpp", "--quick", "--reps", "1", "--warmup", "1",
                           "--only", "resize_1080p_rgb_224"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "ratio > 1 means ours is better" in proc.stdout
    ours = [i for i, line in enumerate(lines) if line.startswith("resize_1080p_rgb_224")]
    assert len(ours) == 1 and "ours runtime.dvpp.resize" in lines[ours[0]]
    assert "x " in lines[ours[0] + 1] and "INTER_LINEAR" in lines[ours[0] + 1], lines[ours[0] + 1]  # a ratio
    assert "target >= OpenCV" in proc.stdout


def test_unknown_row_refused(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "runtime.bench", "dvpp", "--only", "resize_4k"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "'resize_4k': no such row" in proc.stderr


# ---- the test images


def test_images_are_1080p_photographs_deterministic_and_distinct():
    jpegs = [bd.jpeg_1080p(i) for i in range(8)]
    assert len({hashlib.sha256(j).hexdigest() for j in jpegs}) == 8  # the 8th is the 1st, mirrored
    for i in (0, 7):
        img = cv2.imdecode(np.frombuffer(jpegs[i], np.uint8), cv2.IMREAD_COLOR)[:, :, ::-1]
        assert img.shape == (1080, 1920, 3)
        assert np.abs(img.astype(int) - bd.photo_1080p(i)).mean() < 3  # quality 90 of that photograph
        assert img.std() > 20  # a photograph, not a flat picture
    assert np.array_equal(bd.photo_1080p(7), bd.photo_1080p(0)[:, ::-1])
    # ... and the same bytes in another process (the Pillow-SIMD child makes its own)
    code = "import hashlib, runtime.bench_dvpp as b; print(hashlib.sha256(b.jpeg_1080p(3)).hexdigest())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300).stdout.strip()
    assert out == hashlib.sha256(jpegs[3]).hexdigest()


def test_nv12_of_is_opencvs_i420_interleaved():
    rgb = bd.photo_1080p(1)[:64, :96]
    nv12 = bd.nv12_of(np.ascontiguousarray(rgb))
    assert nv12.shape == (96, 96) and nv12.dtype == np.uint8
    i420 = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2YUV_I420)
    assert np.array_equal(cv2.cvtColor(nv12, cv2.COLOR_YUV2RGB_NV12), cv2.cvtColor(i420, cv2.COLOR_YUV2RGB_I420))
    assert np.array_equal(nv12[64:, 0::2].reshape(-1), i420[64:].reshape(-1)[:32 * 48])  # U first


def test_crop_boxes_inside_and_deterministic():
    boxes = bd.crop_boxes(64)
    assert boxes == bd.crop_boxes(64) and len(set(boxes)) == 64
    for x, y, w, h in boxes:
        assert 96 <= w <= 1080 and 96 <= h <= 1080 and x + w <= 1920 and y + h <= 1080 and x >= 0 and y >= 0


def test_centre_crop_box_is_resize_then_centre_crop():
    assert bd.resized_size(1920, 1080) == (455, 256) and bd.resized_size(300, 451) == (256, 384)
    assert bd.centre_offsets(455, 256) == (116, 16)
    assert bd.centre_crop_box(256, 256) == (16, 16, 224, 224)
    assert bd.centre_crop_box(1920, 1080) == (489, 68, 945, 945)  # 224 * 1080 / 256, centred
    assert bd.centre_crop_box(300, 451) == (19, 94, 262, 263)  # 256 x 384, (16, 80) there
    # the box, resized to 224 x 224, is close to resizing the whole picture and cropping (a smooth photograph)
    img = bd.photo_1080p(2)
    x, y, w, h = bd.centre_crop_box(1920, 1080)
    one = cv2.resize(img[y:y + h, x:x + w], (224, 224), interpolation=cv2.INTER_AREA)
    two = cv2.resize(img, (455, 256), interpolation=cv2.INTER_AREA)[16:240, 116:340]
    assert np.abs(one.astype(int) - two).mean() < 3


# ---- harness, ratios, checks


def test_measure_rotates_and_isolates_a_failing_peer():
    calls = []
    ok = bd.Contestant("a", lambda: calls.append("a"), ours=True)
    bad = bd.Contestant("b", lambda: 1 / 0)
    other = bd.Contestant("c", lambda: calls.append("c"))
    bd.measure([ok, bad, other], reps=4, warmup=2, rounds=2, settle_s=0)
    assert len(ok.times) == 4 and len(other.times) == 4 and not bad.times
    assert bad.note.startswith("error: ZeroDivisionError")
    # warm-up; then per round each in turn: one untimed call and two timed ones, the order rotating
    assert calls == ["a"] * 2 + ["c"] * 2 + ["a"] * 3 + ["c"] * 3 + ["c"] * 3 + ["a"] * 3


def test_measure_settles_each_turn_for_its_time(monkeypatch):
    # On a clock that each call advances by 1 ms, a 3.5 ms settle is 4 untimed calls at the start of every turn.
    clock = [0.0]
    monkeypatch.setattr(bd, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    calls = []

    def call():
        calls.append(clock[0])
        clock[0] += 0.001
    c = bd.Contestant("a", call, ours=True)
    bd.measure([c], reps=2, warmup=0, rounds=2, settle_s=0.0035)
    assert len(calls) == 2 * (4 + 1)
    assert c.times == pytest.approx([0.001, 0.001])


def test_ours_failing_is_reported():
    def boom():
        raise RuntimeError("ours broke\nsecond line")
    ours = bd.Contestant("ours", boom, ours=True)
    bd.measure([ours], reps=1, warmup=1)
    assert ours.note == "error: RuntimeError: ours broke" and not ours.times


def test_ratios_and_targets():
    assert bd.ratio(2.0, 4.0, higher_is_better=False) == 2.0  # ms: half the time
    assert bd.ratio(300.0, 100.0, higher_is_better=True) == 3.0  # img/s
    assert bd.ratio(None, 1.0, True) is None and bd.ratio(1.0, None, False) is None
    rec = {"ours": {"value": 130.0}, "better": "higher", "peers": [], "targets": [["OpenCV 5 + numpy", 1.3]]}
    bd.add_peers(rec, [{"name": "OpenCV 5 + numpy", "value": 100.0}, {"name": "Pillow", "value": 500.0}])
    assert rec["met"] is True and rec["peers"][1]["ratio"] == pytest.approx(0.26)
    bd.add_peers(rec, [{"name": "OpenCV 5 + numpy", "value": 101.0}])
    assert rec["met"] is False
    rec = {"ours": {"value": 1.0}, "better": "lower", "peers": [], "targets": [["Pillow-SIMD", 1.0]]}
    bd.add_peers(rec, [{"name": "Pillow-SIMD", "value": None, "note": "missing: x"}])
    assert rec["met"] is None


def test_table_format():
    row = bd.row_frame("resize_1080p_rgb_224", 2, 4)
    ours = bd.Contestant("ours runtime.dvpp.resize", None, ours=True, how="cpu:0, 2 executors")
    ours.times = [0.001, 0.002, 0.003]
    peer = bd.Contestant("OpenCV 9 cv2.resize INTER_LINEAR", None, how="cv2.setNumThreads(2)")
    peer.times = [0.004]
    row.contestants = [ours, bd.Contestant("Pillow 1", None, note="missing: no")]
    row.contestants.append(peer)
    text = bd.format_table([row.record("cpu:0", 2)], "header")
    assert "2.00 [1.00, 3.00]" in text and "2.00x" in text and "target >= OpenCV, Pillow-SIMD: met" in text
    assert "note: Pillow 1: missing: no (every row)" in text


class _HostOurs:
    """check_row's view of ours: results already on the host."""
    host = staticmethod(lambda m: m)


def test_check_row_catches_a_wrong_result():
    src = bd.photo_1080p(0)
    right = cv2.resize(src, (224, 224), interpolation=cv2.INTER_LINEAR_EXACT)
    row = bd.row_frame("resize_1080p_rgb_224", 2, 4)
    c = bd.Contestant("ours", None, ours=True)
    row.contestants = [c]
    c.result = right
    bd.check_row(row, _HostOurs())
    assert row.checks == ["ours equals cv2.resize INTER_LINEAR_EXACT exactly"]
    wrong = right.copy()
    wrong[100, 100, 1] ^= 1
    c.result = wrong
    with pytest.raises(bd.WrongResult, match="differs from cv2.resize INTER_LINEAR_EXACT"):
        bd.check_row(row, _HostOurs())


def test_check_row_catches_a_pipeline_peer_in_the_wrong_layout():
    row = bd.row_frame("classification_pipeline", 1, 4)
    ours = bd.Contestant("ours", None, ours=True)
    peer = bd.Contestant("OpenCV + numpy", None, how="sequential")
    row.contestants = [ours, peer]
    out = np.empty((1, 3, 224, 224), np.float32)
    bd._cv2_classify(bd.jpeg_1080p(0), out[0])
    ours.result, peer.result = out, out.copy()
    bd.check_row(row, _HostOurs())
    assert row.checks == ["mean difference from OpenCV + numpy (sequential): 0.00 levels"]
    peer.result = np.ascontiguousarray(out.reshape(1, 224, 224, 3).transpose(0, 3, 1, 2))  # HWC read as CHW
    with pytest.raises(bd.WrongResult, match="OpenCV \\+ numpy differs from ours"):
        bd.check_row(row, _HostOurs())


def test_pillow_simd_child_refuses_a_plain_pillow(tmp_path):
    import PIL

    args = types.SimpleNamespace(threads=1, batch=1, crops=1)
    got, why = bd.run_pillow_simd(str(tmp_path), ["resize_1080p_rgb_224"], args, 1, 1)
    assert got == {} and why.startswith("missing: no PIL package under")
    if bd._is_pillow_simd():
        pytest.skip("this Python's own PIL is Pillow-SIMD")
    site = os.path.dirname(os.path.dirname(PIL.__file__))
    got, why = bd.run_pillow_simd(site, ["resize_1080p_rgb_224"], args, 1, 1)
    assert got == {} and why == "error: the PIL under %s is not Pillow-SIMD" % site
