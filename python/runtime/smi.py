"""runtime-smi — the devices of this machine and the processes using the runtime, with what each holds per device.

Every process that uses the runtime keeps a small status file, ``<pid>.json``, in ``/dev/shm/runtime-smi/``
(``$RUNTIME_SMI_DIR`` overrides the directory; ``RUNTIME_SMI=0`` in a process's environment keeps it out): its
devices' memory allocated and reserved, pool state, streams, operations and kernels launched, rewritten at most
every ~100 ms when a figure changes, removed when the process ends. The file of a process that was killed stays
behind: runtime-smi recognises it (no such process any more, or the pid is now another process's: its start time
differs) and removes it. docs/observability.md describes the file.

Usage: ``runtime-smi [--json] [--watch [SECONDS] [--count N]]`` or ``python -m runtime.smi ...``.
``runtime.device_usage(device)`` gives the same figures of the calling process.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Optional

from . import _core

#: The "format" of the status files this reader understands.
FORMAT = "runtime-smi/1"
DEFAULT_DIRECTORY = "/dev/shm/runtime-smi"
_STATUS_NAME = re.compile(r"^(\d+)\.json$")
_TEMP_NAME = re.compile(r"^\.(\d+)\.json\.tmp$")


def device_usage(device: Any = None) -> dict:
    """What this process uses of `device` (int, "cpu:0", Device; the current device if None): its device index,
    label ("cpu:0"), name, backend, memory_total, memory (memory_stats' counters: allocated_bytes,
    reserved_bytes, pool_size, largest_free_block, ...), streams (live, the default stream included), operations and
    kernels_launched (queued on the device's streams since the runtime started) — a device's entry in runtime-smi's
    status file (rtDeviceGetUsage)."""
    from .core import _device_index

    index = _core.get_device() if device is None else _device_index(device)
    return _core.device_usage(index)


def status_directory() -> Path:
    """Where the status files are: $RUNTIME_SMI_DIR if set and not empty, else /dev/shm/runtime-smi."""
    return Path(os.environ.get("RUNTIME_SMI_DIR") or DEFAULT_DIRECTORY)


def _start_time(pid: int) -> Optional[int]:
    """The start time of process `pid` (/proc/<pid>/stat's field 22), None if there is no such live process (gone,
    or a zombie that has ended and waits to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    fields = stat[stat.rfind(")") + 2:].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass  # gone already, or another user's file in the sticky directory


def _read_status(path: Path) -> Optional[dict]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def read_processes(directory: Optional[Path] = None) -> list:
    """The status of every live process that publishes one in `directory` (default: status_directory()), by pid.
    Files left by processes that no longer run — no such pid, or a pid now used by a process that started at
    another time — are removed; unreadable files of live processes are skipped."""
    directory = status_directory() if directory is None else Path(directory)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    out = []
    for name in names:
        path = directory / name
        temp = _TEMP_NAME.match(name)
        if temp:  # a file being written, or left half-written by a process killed meanwhile
            if _start_time(int(temp.group(1))) is None:
                _remove(path)
            continue
        m = _STATUS_NAME.match(name)
        if not m:
            continue
        pid = int(m.group(1))
        started = _start_time(pid)
        data = _read_status(path)
        if started is None or (data is not None and data.get("start_time") != started):
            # Read again before removing: the pid's new process may have just replaced the file with its own.
            again = _read_status(path) if started is not None else None
            if again is None or again.get("start_time") != started:
                _remove(path)
                continue
            data = again
        if data is None or data.get("pid") != pid:
            continue
        out.append(data)
    out.sort(key=lambda d: d["pid"])
    return out


def list_devices() -> list:
    """The devices the runtime sees from this process: device (index), label, name, backend, memory_total.
    The runtime starts here, if it had not, without a status file of its own (runtime-smi uses no device)."""
    saved = os.environ.get("RUNTIME_SMI")
    os.environ["RUNTIME_SMI"] = "0"  # read when the runtime starts, by the first call below
    try:
        devices = []
        for i in range(_core.get_device_count()):
            p = _core.get_device_properties(i)
            devices.append({"device": i, "label": "%s:%d" % (p["backend"], p["backend_ordinal"]), "name": p["name"],
                            "backend": p["backend"], "memory_total": int(p["total_memory"])})
        return devices
    finally:
        if saved is None:
            del os.environ["RUNTIME_SMI"]
        else:
            os.environ["RUNTIME_SMI"] = saved


def snapshot() -> dict:
    """{"devices": list_devices(), "processes": read_processes(), "directory": ..., "time": ...}; "devices_error"
    (the message) instead of devices when the runtime cannot list them."""
    snap: dict = {"time": time.time(), "directory": str(status_directory())}
    try:
        snap["devices"] = list_devices()
    except Exception as e:  # the runtime refused to start (a bad RUNTIME_BACKEND ...): processes are still listed
        snap["devices"] = []
        snap["devices_error"] = str(e)
    snap["processes"] = read_processes()
    return snap


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def _table(rows: list, right: set) -> list:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
            .rstrip() for r in rows]


def format_snapshot(snap: dict) -> str:
    """The readable form of snapshot(): a devices table, then one row per device of each process."""
    when = datetime.datetime.fromtimestamp(snap["time"]).strftime("%Y-%m-%d %H:%M:%S")
    lines = [f"runtime-smi  {when}  (status files in {snap['directory']})", "", "Devices"]
    if snap.get("devices_error"):
        lines.append("  cannot list the devices: " + snap["devices_error"])
    elif not snap["devices"]:
        lines.append("  no devices")
    else:
        rows = [("index", "device", "name", "backend", "memory total")]
        rows += [(d["device"], d["label"], d["name"], d["backend"], _bytes(d["memory_total"])) for d in snap["devices"]]
        lines += ["  " + r for r in _table(rows, {0, 4})]
    lines += ["", "Processes"]
    rows = [("pid", "command", "device", "allocated", "reserved", "pool", "pool free", "streams", "operations",
             "kernels")]
    for p in snap["processes"]:
        program, _, rest = str(p.get("command", "")).partition(" ")
        command = (os.path.basename(program) + " " + rest).strip()  # the program's name, not its directory
        command = command if len(command) <= 32 else command[:29] + "..."
        for d in p.get("devices", []):
            m = d["memory"]
            pooled = m["pool_size"] > 0
            rows.append((p["pid"], command, d["label"], _bytes(m["allocated_bytes"]), _bytes(m["reserved_bytes"]),
                         _bytes(m["pool_size"]) if pooled else "-", _bytes(m["largest_free_block"]) if pooled else "-",
                         d["streams"], d["operations"], d["kernels_launched"]))
    if len(rows) == 1:
        lines.append("  no process is using the runtime")
    else:
        lines += ["  " + r for r in _table(rows, {0, 3, 4, 5, 6, 7, 8, 9})]
    return "\n".join(lines) + "\n"


def _positive_seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return v


def _positive_count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of refreshes, got {text!r}")
    return v


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(prog="runtime-smi", description="The devices and the processes using the runtime "
                                 "on this machine (status files in $RUNTIME_SMI_DIR, default /dev/shm/runtime-smi).")
    ap.add_argument("--json", action="store_true",
                    help="print a JSON object (devices, processes); with --watch, one object per line per refresh")
    ap.add_argument("--watch", nargs="?", const=1.0, type=_positive_seconds, metavar="SECONDS",
                    help="refresh every SECONDS (default 1) until interrupted")
    ap.add_argument("--count", type=_positive_count, metavar="N", help="with --watch: stop after N refreshes")
    args = ap.parse_args(argv)
    if args.count is not None and args.watch is None:
        ap.error("--count needs --watch")
    clear = args.watch is not None and not args.json and sys.stdout.isatty()
    status = 0
    shown = 0
    try:
        while True:
            snap = snapshot()
            if snap.get("devices_error"):
                sys.stderr.write("runtime-smi: cannot list the devices: %s\n" % snap["devices_error"])
                status = 1
            if args.json:
                text = json.dumps(snap, separators=(",", ":")) if args.watch else json.dumps(snap, indent=2)
                sys.stdout.write(text + "\n")
            else:
                sys.stdout.write(("\x1b[H\x1b[2J" if clear else "") + format_snapshot(snap))
            sys.stdout.flush()
            shown += 1
            if args.watch is None or (args.count is not None and shown >= args.count):
                return status
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return status


if __name__ == "__main__":
    sys.exit(main())
