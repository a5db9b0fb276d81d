"""runtime-bench — the seed's performance table for each device, side by side with OpenCL (PoCL), memcpy and numpy.

Runs the packaged C++ program ``runtime/bin/runtime-bench-core`` once per device (``--json``), which measures
the runtime and the PoCL / memcpy peers in the same process, alternating run by run; this wrapper adds numpy's
``np.multiply(a, 2, out=b)`` over 16M floats as a second peer of the kernel (half its runs before the C++ run,
half after), prints the table (progress on stderr), or a JSON array (``--json``), and draws bandwidth against
transfer size (``--plot FILE.png``, from the C++ program's ``--sweep``).

Usage: ``runtime-bench [--device cpu:0] [--quick] [--json] [--plot FILE.png]`` or ``python -m runtime.bench ...``.
The wrapper never imports the runtime itself: the C++ program has the machine to itself while it measures.
``runtime-bench dvpp [...]`` is the DVPP table instead (runtime/bench_dvpp.py: vision pre-processing against OpenCV,
simplejpeg, Pillow, torchvision).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

#: The metric names of issue 7, each present once per device in ``--json``.
METRICS = ("H2D_bandwidth", "D2H_bandwidth", "D2D_bandwidth", "H2D_latency", "D2H_latency", "D2D_latency",
           "launch_latency", "batched_launch", "event_roundtrip", "alloc_free", "jit_cold", "jit_cached",
           "kernel_twice_16M")

#: The seed's reference figures (its performance table), by metric.
SEED = {"H2D_bandwidth": "12.5 GB/s", "D2H_bandwidth": "12.5 GB/s", "D2D_bandwidth": "450 GB/s",
        "H2D_latency": "15 us", "D2H_latency": "15 us", "D2D_latency": "2 us"}

KERNEL_N = 16 << 20  # floats in the kernel_twice_16M rows
_HIGHER_IS_BETTER_UNITS = ("GB/s", "GFLOP/s")


def _core_path(explicit: Optional[str]) -> Path:
    """The C++ benchmark: --core, $RUNTIME_BENCH_CORE, the packaged runtime/bin/, or PATH."""
    for cand in (explicit, os.environ.get("RUNTIME_BENCH_CORE"), Path(__file__).with_name("bin") / "runtime-bench-core",
                 shutil.which("runtime-bench-core")):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return Path(cand)
    raise SystemExit("runtime-bench: runtime-bench-core not found (expected in %s; reinstall the package, or pass "
                     "--core PATH / set RUNTIME_BENCH_CORE)" % (Path(__file__).with_name("bin")))


def _progress(msg: str, t0: float) -> None:
    sys.stderr.write("[%5.1fs] %s\n" % (time.monotonic() - t0, msg))
    sys.stderr.flush()


def _run_core(core: Path, args: list, t0: float, label: str) -> str:
    """Runs the C++ program; forwards its progress lines (stderr) as they come; returns its stdout."""
    proc = subprocess.Popen([str(core), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_lines: list = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            line = line.rstrip("\n")
            err_lines.append(line)
            _progress("%s: %s" % (label, line.replace("runtime-bench-core: ", "")), t0)

    th = threading.Thread(target=pump, daemon=True)
    th.start()
    assert proc.stdout is not None
    out = proc.stdout.read()  # (not communicate(): it would race the pump for stderr)
    proc.wait()
    th.join()
    if proc.returncode != 0:
        why = {1: "a runtime call failed", 2: "a result was WRONG (verification failed)"}.get(proc.returncode, "")
        raise SystemExit("runtime-bench: %s %s exited with status %d%s:\n%s" % (
            core.name, " ".join(args), proc.returncode, " (" + why + ")" if why else "", "\n".join(err_lines[-20:])))
    return out


def _devices(core: Path, spec: Optional[str]) -> list:
    listed = json.loads(_run_core(core, ["--list-devices"], time.monotonic(), "devices") or "[]")
    if spec is None or spec == "all":
        return listed
    for d in listed:
        if spec in (d["device"], str(d["index"])) or (spec == d["backend"] and d["device"].endswith(":0")):
            return [d]
    raise SystemExit("runtime-bench: --device %r: no such device (available: %s)" % (
        spec, ", ".join(d["device"] for d in listed) or "none"))


# ---------------------------------------------------------------- the numpy peer of the kernel

def _numpy_times(reps: int) -> tuple:
    """Seconds of `reps` runs of np.multiply(a, 2, out=b) over 16M float32, and the numpy version."""
    import numpy as np

    a = (np.arange(KERNEL_N, dtype=np.float32) % 8191) * np.float32(0.25) - np.float32(1000)
    b = np.empty_like(a)
    np.multiply(a, 2, out=b)  # warm-up (pages of b committed)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        np.multiply(a, 2, out=b)
        times.append(time.perf_counter() - t)
    if not np.array_equal(b, a * np.float32(2)) or b.dtype != np.float32:
        raise SystemExit("runtime-bench: numpy peer computed a wrong result (verification failed)")
    return times, np.__version__


def _stat(values: list) -> tuple:
    v = sorted(values)
    n = len(v)
    med = v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    return med, v[0], v[-1]


def _add_numpy_peer(records: list, times: list, version: str) -> None:
    """Adds numpy as a second peer (`other_peers`) of the kernel_twice_16M rows."""
    med, lo, hi = _stat(times)
    nbytes = 2.0 * KERNEL_N * 4  # read + write
    name = "numpy %s np.multiply(a, 2, out=b)" % version
    for r in records:
        if r["metric"] == "kernel_twice_16M":
            r.setdefault("other_peers", []).append(
                {"peer": name, "value": med * 1e3, "min": lo * 1e3, "max": hi * 1e3})
        elif r["metric"] == "kernel_twice_16M_bandwidth":
            r.setdefault("other_peers", []).append(
                {"peer": name, "value": nbytes / med / 1e9, "min": nbytes / hi / 1e9, "max": nbytes / lo / 1e9})


# ---------------------------------------------------------------- output

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


def _cell(value: Optional[float], lo: Optional[float], hi: Optional[float]) -> str:
    return "-" if value is None else "%s [%s, %s]" % (_fmt(value), _fmt(lo), _fmt(hi))


def _ratio(unit: str, ours: Optional[float], peer: Optional[float]) -> str:
    if not ours or not peer:
        return "-"
    return _fmt(ours / peer if unit in _HIGHER_IS_BETTER_UNITS else peer / ours) + "x"


def format_table(records: list, devices: list, peers_missing: list, quick: bool) -> str:
    """The readable table: one block per device; kernel rows get a second line for numpy."""
    lines = []
    hdr = "%-27s %-5s %-24s %-24s %-8s %-10s %-19s %-4s %s"
    for d in devices:
        recs = [r for r in records if r["device"] == d["device"] and "bytes" not in r]
        peer = next((r["peer"] for r in recs if r.get("peer")), None)
        lines.append("device %s = %s%s" % (d["device"], d["name"], "   (--quick)" if quick else ""))
        lines.append("peer: %s; numpy for the kernel; memcpy rows are the host's copy limit" % (
            peer or "OpenCL (PoCL) MISSING"))
        lines.append("cells: median [min, max]; ratio > 1 means ours is better")
        lines.append("")
        lines.append(hdr % ("metric", "unit", "ours", "peer (PoCL)", "ratio", "seed ref", "target", "met", "what"))
        lines.append("-" * 160)
        for r in recs:
            pv = r.get("peer_value")
            pcell = _cell(pv, r.get("peer_min"), r.get("peer_max")) if pv is not None else (
                "missing" if "missing" in r.get("peer_note", "") else
                "error" if r.get("peer_note") else "-")
            met = r.get("met", "")
            lines.append(hdr % (r["metric"], r["unit"], _cell(r["value"], r["min"], r["max"]), pcell,
                                _ratio(r["unit"], r["value"], pv), r.get("seed") or SEED.get(r["metric"], "-"),
                                r.get("target", "") or "-", met.split(" ")[0] if met else "", r.get("label", "")))
            for o in r.get("other_peers", []):
                pcell = _cell(o["value"], o.get("min"), o.get("max")) if o.get("value") is not None else (
                    "error" if o.get("note", "").startswith("error") else "missing")
                lines.append(hdr % ("  + peer " + o["peer"].split(" ")[0], r["unit"], "", pcell,
                                    _ratio(r["unit"], r["value"], o.get("value")), "", "", "", o["peer"]))
        notes = sorted({"%s: %s" % (r["metric"], r["peer_note"]) for r in recs
                        if r.get("peer_note") and not r["peer_note"].startswith("missing")})
        notes += sorted({"%s: %s: %s" % (r["metric"], o["peer"], o["note"]) for r in recs
                         for o in r.get("other_peers", []) if o.get("note")})
        for n in notes:
            lines.append("note: peer " + n)
        lines.append("")
    for m in peers_missing:
        lines.append("note: %s" % m)
    return "\n".join(lines).rstrip() + "\n"


def plot(records: list, devices: list, path: str) -> Optional[str]:
    """Bandwidth vs transfer size, log-log, ours vs PoCL vs memcpy. Returns why not, or None when written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return "matplotlib missing (%s): pip install matplotlib; no plot written" % e
    sweep = [r for r in records if "bytes" in r]
    if not sweep:
        return "no sweep records to plot"
    fig, axes = plt.subplots(len(devices), 3, figsize=(15, 4.6 * len(devices)), squeeze=False)
    for row, d in zip(axes, devices):
        recs = [r for r in sweep if r["device"] == d["device"]]
        for ax, direction in zip(row, ("H2D", "D2H", "D2D")):
            def series(metric: str, key: str = "value") -> tuple:
                pts = sorted((r["bytes"], r.get(key)) for r in recs if r["metric"] == metric and r.get(key))
                return [p[0] for p in pts], [p[1] for p in pts]
            x, y = series(direction + "_bandwidth_sweep")
            ax.plot(x, y, "o-", color="tab:blue", label="runtime (ours)", linewidth=2)
            x, y = series(direction + "_bandwidth_sweep", "peer_value")
            if x:
                ax.plot(x, y, "s--", color="tab:orange", label="OpenCL (PoCL)")
            for metric, style, lab in (("memcpy_1t_sweep", ":", "memcpy 1 thread"),
                                       ("memcpy_2t_sweep", "-.", "memcpy 2 threads")):
                x, y = series(metric)
                ax.plot(x, y, style, color="gray" if "1t" in metric else "black", label=lab)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ticks = [4, 64, 1 << 10, 16 << 10, 256 << 10, 4 << 20, 256 << 20]
            ax.set_xticks(ticks)
            ax.set_xticklabels(["4 B", "64 B", "1 KiB", "16 KiB", "256 KiB", "4 MiB", "256 MiB"],
                               fontsize=8)
            ax.set_xlabel("transfer size (bytes)")
            ax.set_ylabel("GB/s (copy + synchronize)")
            ax.set_title("%s %s" % (d["device"], direction))
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("runtime-bench: bandwidth vs transfer size (%s, %s)" % (
        platform.node() or "host", datetime.date.today().isoformat()))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


# ---------------------------------------------------------------- main

def main(argv: Optional[list] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["dvpp"]:
        from . import bench_dvpp
        return bench_dvpp.main(argv[1:])
    ap = argparse.ArgumentParser(prog="runtime-bench", description=__doc__.split("\n")[0],
                                 epilog="runtime-bench dvpp --help: the DVPP benchmark's options")
    ap.add_argument("--device", default=None, help="a device like cpu:0 (default: all devices)")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (under a minute)")
    ap.add_argument("--json", action="store_true", help="print a JSON array of records instead of the table")
    ap.add_argument("--plot", metavar="FILE.png", help="draw bandwidth vs transfer size (4 B .. 256 MiB)")
    ap.add_argument("--core", metavar="PATH", help=argparse.SUPPRESS)  # another runtime-bench-core (development)
    args = ap.parse_args(argv)

    t0 = time.monotonic()
    core = _core_path(args.core)
    devices = _devices(core, args.device)
    if not devices:
        raise SystemExit("runtime-bench: no device")
    records: list = []
    missing: list = []
    np_reps = 6 if args.quick else 16
    for d in devices:
        _progress("%s: numpy peer (first half) ..." % d["device"], t0)
        times, np_version = _numpy_times(np_reps // 2)
        core_args = ["--json", "--device", str(d["index"])]
        if args.quick:
            core_args.append("--quick")
        if args.plot:
            core_args.append("--sweep")
        out = _run_core(core, core_args, t0, d["device"])
        recs = json.loads(out)
        _progress("%s: numpy peer (second half) ..." % d["device"], t0)
        more, _ = _numpy_times(np_reps - np_reps // 2)
        _add_numpy_peer(recs, times + more, np_version)
        records.extend(recs)
        notes = {r["peer_note"] for r in recs if r.get("peer_note", "").startswith("missing")}
        missing.extend("%s: peer OpenCL (PoCL) %s" % (d["device"], n) for n in sorted(notes))
    for m in missing:
        _progress(m, t0)
    if args.plot:
        why = plot(records, devices, args.plot)
        _progress(why if why else "plot written to %s" % args.plot, t0)
        if why:
            missing.append(why)
    _progress("done", t0)
    if args.json:
        json.dump(records, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_table(records, devices, missing, args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
