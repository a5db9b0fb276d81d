"""runtime-prof — the summary and timeline plot of a runtime trace (RUNTIME_TRACE, rtProfilerStart, runtime.profile).

    runtime-prof trace.json [--json] [--plot timeline.png] [--flows]

Reads the Chrome trace-event file the runtime writes (docs/observability.md, "Trace"), terminated or not (a killed
program leaves the array open), and prints per kernel its count, total, mean, min and max time; per stream its busy
time (the union of its spans); per device the copy/compute overlap achieved (the time a copy span and a kernel span of
that device run at once, over the device's copy time); the trace's span. `--json` prints the same figures as one JSON
object, `--plot` draws the timeline with matplotlib: one lane per stream, one colour per kind of operation.

This module needs only the standard library (matplotlib for --plot): it reads traces of any machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field

# Operation kinds (the "cat" of a span), in the order the summary and the plot's legend list them.
CATEGORIES = ("kernel", "copy", "fill", "host", "event", "graph", "graph_node", "memory", "collective", "dvpp")
STREAM_NAME = re.compile(r"^(?P<device>\S+) stream (?P<number>\d+)$")


class TraceError(Exception):
    """The file cannot be read as a runtime trace; the message says where and why."""


@dataclass
class Span:
    cat: str
    name: str
    start: float  # µs from the trace's start
    end: float
    args: dict


@dataclass
class Track:
    pid: int
    tid: int
    name: str
    sort_index: float
    spans: list = field(default_factory=list)

    @property
    def device(self):
        """The device of a stream's track ("cpu:0"), None for other tracks (host threads)."""
        m = STREAM_NAME.match(self.name)
        return m.group("device") if m else None


@dataclass
class Trace:
    path: str
    tracks: dict          # (pid, tid) -> Track
    flows: list           # (start (pid, tid, ts), finish (pid, tid, ts)) of each complete arrow
    counters: dict        # counter name -> list of (ts, args)
    terminated: bool      # False: the array was left open (the program was killed, or is still writing)
    cut_event: bool       # a partial last line was left out

    def streams(self):
        """The stream tracks, in the trace's sort order (device, then stream number)."""
        ts = [t for t in self.tracks.values() if t.device is not None]
        return sorted(ts, key=lambda t: (t.pid, t.sort_index, t.name))


# ---------------------------------------------------------------- reading

def _parse_events(text, path):
    """The list of events of a trace's text. Accepts a JSON array (closed or left open after a complete event, as a
    killed program leaves it), or an object with "traceEvents". Returns (events, terminated, cut_event)."""
    stripped = text.strip()
    if not stripped:
        raise TraceError(f"'{path}' is empty (expected a Chrome trace-event JSON array)")
    try:
        doc = json.loads(stripped)
        if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
            return doc["traceEvents"], True, False
        if isinstance(doc, list):
            return doc, True, False
        raise TraceError(f"'{path}' is JSON but not a trace (expected an array of events, or an object with "
                         f"\"traceEvents\")")
    except json.JSONDecodeError:
        pass
    if not stripped.startswith("["):
        raise TraceError(f"'{path}' is not a Chrome trace-event JSON array (it does not start with '[')")
    # An open array: the runtime writes one event per line, the separator before each but the first.
    try:
        return json.loads(stripped.rstrip(",") + "\n]"), False, False
    except json.JSONDecodeError:
        pass
    # The last line was cut short (killed in the middle of a write): read line by line, leave that line out.
    lines = stripped[1:].split("\n")
    events = []
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        item = line.strip().lstrip(",").strip()
        if not item:
            continue
        try:
            events.append(json.loads(item))
        except json.JSONDecodeError as e:
            if i == last:
                return events, False, True
            line_no = i + 1 + text[:len(text) - len(text.lstrip())].count("\n")
            raise TraceError(f"'{path}' line {line_no}: not a JSON event ({e.msg})") from None
    return events, False, False


def _number(event, key, index, path, minimum=None):
    v = event.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or \
            (minimum is not None and v < minimum):
        want = "a finite number" + ("" if minimum is None else f" >= {minimum}")
        raise TraceError(f"'{path}' event {index} ({event.get('ph')} '{event.get('name')}'): '{key}' is {v!r} "
                         f"(expected {want})")
    return float(v)


def _ident(event, key, index, path):
    """A pid or tid (an integer), or a flow id (an integer or a string); absent = 0."""
    v = event.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, (int, str) if key == "id" else int):
        raise TraceError(f"'{path}' event {index} ({event.get('ph')} '{event.get('name')}'): '{key}' is {v!r} "
                         f"(expected an integer)")
    return v


def load(path):
    """Reads the trace at `path`. Raises TraceError (unreadable, not a trace, an event without its times)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise TraceError(f"cannot read '{path}': {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise TraceError(f"'{path}' is not UTF-8 text ({e.reason} at byte {e.start})") from None
    events, terminated, cut = _parse_events(text, path)
    tracks, names, sorts, counters = {}, {}, {}, {}
    starts, finishes = {}, {}
    spans = []
    for index, e in enumerate(events):
        if not isinstance(e, dict):
            raise TraceError(f"'{path}' event {index} is {type(e).__name__} (expected an object)")
        ph = e.get("ph")
        key = (_ident(e, "pid", index, path), _ident(e, "tid", index, path))
        if ph == "M":
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            if e.get("name") == "thread_name" and isinstance(args.get("name"), str):
                names[key] = args["name"]
            elif e.get("name") == "thread_sort_index" and isinstance(args.get("sort_index"), (int, float)):
                sorts[key] = float(args["sort_index"])
        elif ph == "X":
            start = _number(e, "ts", index, path)
            dur = _number(e, "dur", index, path, minimum=0)
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            spans.append((key, Span(str(e.get("cat", "")), str(e.get("name", "")), start, start + dur, args)))
        elif ph in ("s", "f"):
            ts = _number(e, "ts", index, path)
            (starts if ph == "s" else finishes)[(key[0], _ident(e, "id", index, path))] = (key, ts)
        elif ph == "C":
            ts = _number(e, "ts", index, path)
            counters.setdefault(str(e.get("name", "")), []).append(
                (ts, e.get("args") if isinstance(e.get("args"), dict) else {}))
    for key, span in spans:
        track = tracks.get(key)
        if track is None:
            track = tracks[key] = Track(key[0], key[1], names.get(key, f"tid {key[1]}"), sorts.get(key, math.inf))
        track.spans.append(span)
    for key, name in names.items():  # named tracks without spans (a stream that ran nothing) are lanes too
        if key not in tracks:
            tracks[key] = Track(key[0], key[1], name, sorts.get(key, math.inf))
    flows = [(starts[k], finishes[k]) for k in starts if k in finishes]
    for track in tracks.values():
        track.spans.sort(key=lambda s: (s.start, -s.end))
    for series in counters.values():
        series.sort(key=lambda c: c[0])
    return Trace(path, tracks, flows, counters, terminated, cut)


# ---------------------------------------------------------------- figures

def union(intervals):
    """The disjoint, sorted union of (start, end) intervals."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def length(intervals):
    """Total length of disjoint intervals."""
    return sum(e - s for s, e in intervals)


def intersection(a, b):
    """The intersection of two disjoint, sorted interval lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def is_kernel(span):
    """A kernel's execution: a kernel launch, or a kernel node of a graph launch."""
    return span.cat == "kernel" or (span.cat == "graph_node" and span.args.get("type") == "kernel")


def is_copy(span):
    """A copy: a memcpy operation, or a memcpy node of a graph launch."""
    return span.cat == "copy" or (span.cat == "graph_node" and span.args.get("type") == "memcpy")


def summarize(trace):
    """The figures runtime-prof prints, as a JSON-ready dict (times in µs)."""
    all_spans = [s for t in trace.tracks.values() for s in t.spans]
    ops = [s for t in trace.streams() for s in t.spans if s.cat != "api"]
    if all_spans:
        start, end = min(s.start for s in all_spans), max(s.end for s in all_spans)
    else:
        start = end = 0.0

    kernels = {}
    for s in ops:
        if is_kernel(s):
            kernels.setdefault(s.name, []).append(s.end - s.start)
    kernel_rows = sorted(({"name": n, "count": len(d), "total_us": sum(d), "mean_us": sum(d) / len(d),
                           "min_us": min(d), "max_us": max(d)} for n, d in kernels.items()),
                         key=lambda r: (-r["total_us"], r["name"]))

    categories = {}
    for s in ops:
        if s.cat == "graph_node":  # inside its graph launch: counted there
            continue
        c = categories.setdefault(s.cat, [0, 0.0])
        c[0] += 1
        c[1] += s.end - s.start
    category_rows = [{"category": k, "count": v[0], "total_us": v[1]}
                     for k, v in sorted(categories.items(),
                                        key=lambda kv: (CATEGORIES.index(kv[0]) if kv[0] in CATEGORIES else 99, kv[0]))]

    duration = end - start
    ops_start = min((s.start for s in ops), default=0.0)
    ops_end = max((s.end for s in ops), default=0.0)
    ops_duration = ops_end - ops_start
    stream_rows = []
    per_device = {}
    for t in trace.streams():
        spans = [s for s in t.spans if s.cat != "api"]
        busy = length(union((s.start, s.end) for s in spans))
        stream_rows.append({"name": t.name, "device": t.device, "pid": t.pid, "tid": t.tid,
                            "operations": sum(1 for s in spans if s.cat != "graph_node"), "busy_us": busy,
                            "busy_fraction": busy / ops_duration if ops_duration > 0 else None})
        d = per_device.setdefault((t.pid, t.device), ([], []))
        d[0].extend((s.start, s.end) for s in spans if is_copy(s))
        d[1].extend((s.start, s.end) for s in spans if is_kernel(s))
    overlap_rows = []
    for (pid, device), (copies, kernels_) in sorted(per_device.items()):
        cu, ku = union(copies), union(kernels_)
        both = length(intersection(cu, ku))
        copy_us = length(cu)
        overlap_rows.append({"device": device, "pid": pid, "copy_us": copy_us, "kernel_us": length(ku),
                             "overlap_us": both, "overlap_fraction": both / copy_us if copy_us > 0 else None})

    memory_rows = []
    for name, series in sorted(trace.counters.items()):
        if not name.startswith("memory "):
            continue
        peak = {}
        for _, args in series:
            for k, v in args.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    peak[k] = max(peak.get(k, v), v)
        memory_rows.append({"device": name[len("memory "):], "peak_allocated": peak.get("allocated"),
                            "peak_reserved": peak.get("reserved")})

    status = {}
    for s in ops:
        st = s.args.get("status")
        if isinstance(st, str) and st != "ok":
            status[st] = status.get(st, 0) + 1
    return {
        "trace": trace.path,
        "terminated": trace.terminated,
        "cut_event": trace.cut_event,
        "span_us": {"start": start, "end": end, "duration": duration},
        "operations_span_us": {"start": ops_start, "end": ops_end, "duration": ops_duration},
        "operations": sum(1 for s in ops if s.cat != "graph_node"),
        "kernels": kernel_rows,
        "categories": category_rows,
        "streams": stream_rows,
        "overlap": overlap_rows,
        "flows": len(trace.flows),
        "memory": memory_rows,
        "not_ok": status,
    }


# ---------------------------------------------------------------- text

def _ms(us):
    return f"{us / 1000:.3f}"


def _table(title, header, rows):
    """A table with a left-aligned first column and right-aligned others."""
    cells = [header] + rows
    widths = [max(len(str(r[i])) for r in cells) for i in range(len(header))]
    lines = [title]
    for r in cells:
        lines.append("  " + "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                                      for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


def format_summary(s):
    """The summary as the text runtime-prof prints."""
    out = []
    span = s["span_us"]
    ops = s["operations_span_us"]
    out.append(f"trace {s['trace']}: {s['operations']} operations on {len(s['streams'])} streams, "
               f"span {_ms(span['duration'])} ms ({_ms(span['start'])} .. {_ms(span['end'])} ms), "
               f"operations {_ms(ops['duration'])} ms ({_ms(ops['start'])} .. {_ms(ops['end'])} ms)")
    if not s["terminated"]:
        out.append("  (the array is not closed: the program was killed or is still writing; read up to its last "
                   "complete event" + (", a cut-short last line left out)" if s["cut_event"] else ")"))
    pids = {r["pid"] for r in s["streams"]}

    def label(r, key):
        return f"{r[key]} (pid {r['pid']})" if len(pids) > 1 else r[key]

    out.append("")
    if s["kernels"]:
        out.append(_table("kernels", ["name", "count", "total ms", "mean us", "min us", "max us"],
                          [[r["name"], r["count"], _ms(r["total_us"]), f"{r['mean_us']:.3f}", f"{r['min_us']:.3f}",
                            f"{r['max_us']:.3f}"] for r in s["kernels"]]))
    else:
        out.append("kernels: none")
    out.append("")
    out.append(_table("streams (busy: the union of a stream's spans; % of the operations' span)",
                      ["stream", "operations", "busy ms", "busy %"],
                      [[label(r, "name"), r["operations"], _ms(r["busy_us"]),
                        "-" if r["busy_fraction"] is None else f"{100 * r['busy_fraction']:.1f}"]
                       for r in s["streams"]]))
    out.append("")
    out.append(_table("copy/compute overlap (time a copy and a kernel of one device run at once, over its copy time)",
                      ["device", "copy ms", "kernel ms", "overlap ms", "overlap %"],
                      [[label(r, "device"), _ms(r["copy_us"]), _ms(r["kernel_us"]), _ms(r["overlap_us"]),
                        "-" if r["overlap_fraction"] is None else f"{100 * r['overlap_fraction']:.1f}"]
                       for r in s["overlap"]]))
    if s["categories"]:
        out.append("")
        out.append(_table("operations by kind", ["kind", "count", "total ms"],
                          [[r["category"], r["count"], _ms(r["total_us"])] for r in s["categories"]]))
    if s["memory"]:
        out.append("")
        out.append(_table("memory (peak bytes)", ["device", "allocated", "reserved"],
                          [[r["device"], "-" if r["peak_allocated"] is None else int(r["peak_allocated"]),
                            "-" if r["peak_reserved"] is None else int(r["peak_reserved"])] for r in s["memory"]]))
    if s["not_ok"]:
        out.append("")
        out.append("not ok: " + ", ".join(f"{n} {k}" for k, n in sorted(s["not_ok"].items())))
    return "\n".join(out)


# ---------------------------------------------------------------- plot

COLOURS = {"kernel": "#4c72b0", "copy": "#dd8452", "fill": "#937860", "host": "#8172b3", "event": "#c44e52",
           "graph": "#cccccc", "graph_node": "#55a868", "memory": "#da8bc3", "collective": "#ccb974",
           "dvpp": "#64b5cd"}


def plot(trace, out_path, flows=False, window=None):
    """Draws the timeline of `trace` into `out_path` (any format matplotlib writes, by its extension): one lane per
    stream, top to bottom in the trace's order, spans coloured by kind; graph node spans drawn inside their launch;
    with `flows`, an arrow from each event record to the wait it released. The time axis is the trace's (ms from its
    start); `window` (start_ms, end_ms) draws only that part, else the span of the operations."""
    import matplotlib
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    streams = trace.streams()
    if not streams:
        raise TraceError(f"'{trace.path}' has no stream tracks to draw")
    spans = [s for t in streams for s in t.spans if s.cat != "api"]
    if window:
        lo, hi = window[0] * 1000, window[1] * 1000
    else:
        lo, hi = min((s.start for s in spans), default=0.0), max((s.end for s in spans), default=1.0)
    shown = sum(1 for s in spans if s.end >= lo and s.start <= hi)
    lanes = {(t.pid, t.tid): i for i, t in enumerate(streams)}
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.55 * len(streams)))
    used = []
    for t in streams:
        y = lanes[(t.pid, t.tid)]
        by_cat = {}
        for s in t.spans:
            if s.cat != "api" and s.end >= lo and s.start <= hi:
                a, b = max(s.start, lo), min(s.end, hi)  # clipped to the window
                by_cat.setdefault(s.cat, []).append((a / 1000, (b - a) / 1000))
        for cat, bars in by_cat.items():
            nested = cat == "graph_node"
            height = 0.4 if nested else 0.7
            ax.broken_barh(bars, (y - height / 2, height), facecolors=COLOURS.get(cat, "#999999"),
                           edgecolors="black" if not nested else "none", linewidth=0.3, zorder=3 if nested else 2)
            if cat not in used:
                used.append(cat)
    if flows:
        for (skey, sts), (fkey, fts) in trace.flows:
            if skey in lanes and fkey in lanes and lo <= sts <= hi and lo <= fts <= hi:
                ax.annotate("", xy=(fts / 1000, lanes[fkey]), xytext=(sts / 1000, lanes[skey]),
                            arrowprops=dict(arrowstyle="->", color="#c44e52", lw=0.8), zorder=4)
    pids = {t.pid for t in streams}
    ax.set_yticks(range(len(streams)))
    ax.set_yticklabels([t.name if len(pids) == 1 else f"{t.name} (pid {t.pid})" for t in streams])
    ax.set_ylim(len(streams) - 0.5, -0.5)
    pad = (hi - lo) * 0.01 / 1000
    ax.set_xlim(lo / 1000 - pad, hi / 1000 + pad)
    ax.set_xlabel("time (ms from the start of the trace)")
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    ax.set_title(f"{os.path.basename(trace.path)}: {shown} of {len(spans)} operation spans, {len(streams)} streams"
                 + (f", {window[0]:g} to {window[1]:g} ms" if window else ""))
    order = sorted(used, key=lambda c: CATEGORIES.index(c) if c in CATEGORIES else 99)
    ax.legend(handles=[Patch(facecolor=COLOURS.get(c, "#999999"), label=c) for c in order],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------- command line

def main(argv=None):
    p = argparse.ArgumentParser(prog="runtime-prof", description="Summarize a runtime trace (RUNTIME_TRACE=trace.json) "
                                "and draw its timeline.")
    p.add_argument("trace", help="the trace file (Chrome trace-event JSON, closed or not)")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.add_argument("--plot", metavar="PNG", help="draw the timeline into this file (needs matplotlib)")
    p.add_argument("--flows", action="store_true", help="with --plot: draw the event arrows")
    p.add_argument("--window", metavar="START:END", help="with --plot: draw only this part of the trace (ms from its "
                   "start, as the summary prints them), e.g. 150:165")
    args = p.parse_args(argv)
    for opt in ("flows", "window"):
        if getattr(args, opt) and not args.plot:
            p.error(f"--{opt} is an option of the plot: it needs --plot")
    window = None
    if args.window:
        try:
            window = tuple(float(x) for x in args.window.split(":"))
        except ValueError:
            window = ()
        if len(window) != 2 or not all(math.isfinite(x) for x in window) or window[0] >= window[1]:
            p.error(f"--window '{args.window}' is not START:END in ms with START < END (e.g. 150:165)")
    try:
        trace = load(args.trace)
        summary = summarize(trace)
        if args.plot:
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                raise TraceError("--plot needs matplotlib (pip install matplotlib)") from None
            try:
                plot(trace, args.plot, flows=args.flows, window=window)
            except (OSError, ValueError) as e:
                raise TraceError(f"cannot write the plot '{args.plot}': {e}") from None
    except TraceError as e:
        print(f"runtime-prof: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=1) if args.json else format_summary(summary))
    if args.plot and not args.json:
        print(f"\ntimeline: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
