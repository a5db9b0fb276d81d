"""runtime-bench (issue 7): `--quick --json` has every metric, positive, in its unit; `--plot` writes a PNG. No timing thresholds."""
import json
import math
import subprocess
import sys

import pytest

from runtime import bench

UNITS = {
    "H2D_bandwidth": "GB/s", "D2H_bandwidth": "GB/s", "D2D_bandwidth": "GB/s",
    "H2D_latency": "us", "D2H_latency": "us", "D2D_latency": "us",
    "launch_latency": "us", "batched_launch": "us", "event_roundtrip": "us", "alloc_free": "us",
    "jit_cold": "ms", "jit_cached": "ms", "kernel_twice_16M": "ms",
}
FIELDS = ("metric", "device", "value", "unit", "min", "max", "peer", "peer_value")

try:
    import matplotlib  # noqa: F401
    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One `python -m runtime.bench --quick --json --plot` run on cpu:0, shared by the tests below."""
    png = tmp_path_factory.mktemp("bench") / "bandwidth.png"
    proc = subprocess.run([sys.executable, "-m", "runtime.bench", "--quick", "--json", "--device", "cpu:0",
                           "--plot", str(png)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), proc.stderr, png


def test_metric_names_match_issue():
    assert set(bench.METRICS) == set(UNITS)


def test_every_metric_present_positive_with_unit(quick_run):
    records, _, _ = quick_run
    by_metric = {}
    for r in records:
        for f in FIELDS:
            assert f in r, (f, r)
        if "bytes" not in r:  # sweep points are extra records
            by_metric.setdefault(r["metric"], []).append(r)
    for metric, unit in UNITS.items():
        assert metric in by_metric, "missing metric %s" % metric
        assert len(by_metric[metric]) == 1, "%s reported %d times for one device" % (metric, len(by_metric[metric]))
        r = by_metric[metric][0]
        assert r["device"] == "cpu:0"
        assert r["unit"] == unit, (metric, r["unit"])
        for key in ("value", "min", "max"):
            assert isinstance(r[key], (int, float)) and math.isfinite(r[key]) and r[key] > 0, (metric, key, r)
        assert r["min"] <= r["value"] <= r["max"], r
        if r["peer"] is not None:  # a missing peer is allowed (it is then null), a present one is sane
            assert isinstance(r["peer"], str) and r["peer"]
            assert r["peer_value"] > 0, r
        else:
            assert r["peer_value"] is None


def test_numpy_peer_of_the_kernel(quick_run):
    records, _, _ = quick_run
    (k,) = [r for r in records if r["metric"] == "kernel_twice_16M"]
    others = k.get("other_peers", [])
    assert any(o["peer"].startswith("numpy") and o["value"] > 0 for o in others), k


GRAPH_ROWS = ("graph_chain_1000_peers", "graph_fanout_1000_peers", "seed_pipeline_graph", "seed_pipeline_graph_4K")


def test_graph_rows_with_their_peers(quick_run):
    """The graph rows (bench/bench_graph_peers.cpp): ours per node / per iteration, and every further peer (oneTBB,
    PoCL one call at a time, the stream version of the pipeline) either a figure or the reason it has none."""
    records, _, _ = quick_run
    by_metric = {r["metric"]: r for r in records if "bytes" not in r}
    for metric in GRAPH_ROWS:
        r = by_metric[metric]
        assert r["unit"] == ("ns" if metric.startswith("graph_") else "us") and r["value"] > 0, r
        assert r["other_peers"], r
        for o in r["other_peers"]:
            assert (o["value"] is not None and o["value"] > 0 and o["min"] <= o["value"] <= o["max"]) or o["note"], o
    for metric in GRAPH_ROWS[:2]:
        names = [o["peer"].split(" ")[0] for o in by_metric[metric]["other_peers"]]
        assert names == ["oneTBB", "PoCL-calls"], names
    for metric in GRAPH_ROWS[2:]:  # the stream version is ours too: always measured
        (streams,) = by_metric[metric]["other_peers"]
        assert streams["peer"].startswith("streams") and streams["value"] > 0, streams
    text = bench.format_table(records, [{"device": "cpu:0", "name": "cpu:0", "index": 0, "backend": "cpu"}], [], True)
    assert "+ peer oneTBB" in text and "+ peer streams" in text


def test_trace_cost_rows(quick_run):
    """The timeline trace's cost (issue 18): launches with the trace on against the same launches with it off, and
    their difference per launch (may be negative in noise; its target is <= 100 ns)."""
    records, _, _ = quick_run
    by_metric = {r["metric"]: r for r in records if "bytes" not in r}
    on = by_metric["batched_launch_traced"]
    assert on["unit"] == "us" and on["value"] > 0 and on["peer_value"] > 0, on
    assert on["peer"].endswith("trace off"), on
    cost = by_metric["trace_cost_per_launch"]
    assert cost["unit"] == "ns" and math.isfinite(cost["value"]) and cost["min"] <= cost["value"] <= cost["max"], cost
    assert cost["target"] == "<= 100 ns", cost


def test_progress_on_stderr(quick_run):
    _, err, _ = quick_run
    assert "kernels" in err and "done" in err


def test_table_renders(quick_run):
    records, _, _ = quick_run
    text = bench.format_table(records, [{"device": "cpu:0", "name": "cpu:0", "index": 0, "backend": "cpu"}], [], True)
    for label in ("H2D", "event round trip", "empty kernel", "JIT cold", "seed ref", "ratio"):
        assert label in text
    assert "12.5 GB/s" in text and "450 GB/s" in text


def test_sweep_records(quick_run):
    records, _, _ = quick_run
    sizes = sorted({r["bytes"] for r in records if r["metric"] == "H2D_bandwidth_sweep"})
    assert sizes[0] == 4 and sizes[-1] == 256 << 20
    assert all(r["value"] > 0 for r in records if "bytes" in r)


@pytest.mark.skipif(not HAVE_MPL, reason="matplotlib not installed (runtime-bench says so and skips the plot)")
def test_plot_writes_png(quick_run):
    _, _, png = quick_run
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10000


def test_unknown_device_is_a_clear_error():
    proc = subprocess.run([sys.executable, "-m", "runtime.bench", "--device", "nosuch:7", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "nosuch:7" in proc.stderr and "cpu:0" in proc.stderr
