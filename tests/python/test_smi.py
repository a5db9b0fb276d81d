"""runtime-smi and runtime.device_usage: a second process's devices seen through its status file, forgotten when it
exits or is killed; stale and foreign files; RUNTIME_SMI=0; the table, --json and --watch; bad arguments."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import runtime
from runtime import smi

MIB = 1 << 20

# The second process: starts the runtime with two streams of its own, then obeys one command per line of stdin
# ("alloc BYTES", "free", "finalize"), answering each with a line; ends at end of input, without rtFinalize.
CHILD = textwrap.dedent("""
    import sys
    import runtime
    held = []
    streams = [runtime.Stream(), runtime.Stream()]
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, *arg = line.split()
        if cmd == "alloc":
            held.append(runtime.alloc(int(arg[0])))
        elif cmd == "free":
            held.clear()
            runtime.synchronize()
        elif cmd == "finalize":
            held.clear()
            for s in streams:
                s.close()
            runtime.finalize()
        print("done " + cmd, flush=True)
""")


@pytest.fixture
def smi_dir(tmp_path, monkeypatch):
    d = tmp_path / "smi"
    monkeypatch.setenv("RUNTIME_SMI_DIR", str(d))
    monkeypatch.delenv("RUNTIME_SMI", raising=False)
    return d


class Child:
    def __init__(self, env_extra=None):
        env = dict(os.environ)
        env.update(env_extra or {})
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.pid = self.proc.pid
        line = self.proc.stdout.readline()
        assert line == "ready\n", line + self.proc.stderr.read()

    def do(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line == "done %s\n" % command.split()[0], line + self.proc.stderr.read()

    def exit(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0, self.proc.stderr.read()

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=60)

    def close(self):
        if self.proc.poll() is None:
            self.kill()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if not f.closed:
                f.close()


@pytest.fixture
def child(smi_dir):
    made = []

    def make(**env):
        c = Child(env)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def run_smi(*args, check=True):
    """runtime-smi in its own process (the console script's module); its JSON output parsed when --json is given."""
    proc = subprocess.run([sys.executable, "-m", "runtime.smi", *args], capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def smi_json():
    return json.loads(run_smi("--json").stdout)


def process_in(snap, pid):
    found = [p for p in snap["processes"] if p["pid"] == pid]
    assert len(found) <= 1
    return found[0] if found else None


def wait_for_process(pid, predicate, tries=200):
    """runtime-smi --json until the entry of `pid` satisfies `predicate` (the file is rewritten within ~100 ms)."""
    for _ in range(tries):
        snap = smi_json()
        p = process_in(snap, pid)
        if p is not None and predicate(p):
            return snap, p
    raise AssertionError("runtime-smi never showed the expected state of %d: %r" % (pid, process_in(snap, pid)))


def cpu0(entry):
    return next(d for d in entry["devices"] if d["label"] == "cpu:0")


# ---- runtime.device_usage: this process

def test_device_usage_matches_properties_and_memory_stats():
    props = runtime.get_device_properties(0)
    with runtime.device(0):
        keep = runtime.alloc(8192)
    u = runtime.device_usage(0)
    stats = runtime.memory_stats(0)
    assert u["device"] == 0 and u["name"] == props.name and u["backend"] == props.backend
    assert u["label"] == "%s:%d" % (props.backend, props.backend_ordinal)
    assert u["memory_total"] == props.total_memory
    for k in ("allocated_bytes", "reserved_bytes", "num_allocs", "num_frees", "pool_size", "num_live_allocations"):
        assert u["memory"][k] == stats[k], k
    assert u["streams"] >= 1
    del keep


def test_device_usage_counts_streams_operations_and_memory():
    before = runtime.device_usage()
    s = runtime.Stream()
    m = runtime.alloc(MIB)
    s.memset(m, 7)
    s.memset(m, 8)
    now = runtime.device_usage()
    assert now["streams"] == before["streams"] + 1
    assert now["operations"] == before["operations"] + 2
    assert now["memory"]["allocated_bytes"] == before["memory"]["allocated_bytes"] + MIB
    assert now["kernels_launched"] == before["kernels_launched"]
    s.synchronize()
    s.close()
    del m
    runtime.synchronize()


def test_device_usage_counts_kernel_launches():
    @runtime.jit
    def inc(a):
        i = runtime.get_global_id(0)
        a[i] += 1

    import numpy as np
    a = runtime.to_device(np.zeros(16, dtype=np.float32))
    s = runtime.Stream()
    s.launch_kernel(inc, a, global_size=16)  # compiles first
    before = runtime.device_usage()
    s.launch_kernel(inc, a, global_size=16)
    s.launch_kernel(inc, a, global_size=16)
    assert runtime.device_usage()["kernels_launched"] == before["kernels_launched"] + 2
    s.synchronize()
    s.close()


@pytest.mark.parametrize("bad", [-1, 1 << 20, "nosuch:0", True, 1.5])
def test_device_usage_bad_device(bad):
    with pytest.raises(runtime.InvalidDeviceError):
        runtime.device_usage(bad)


def test_device_usage_bad_index_reaches_the_c_check():
    with pytest.raises(runtime.InvalidDeviceError, match="rtDeviceGetUsage: device -1 does not exist"):
        runtime._core.device_usage(-1)


# ---- a second process, seen through runtime-smi

def test_second_process_seen_updated_and_forgotten_after_exit(child, smi_dir):
    c = child()
    c.do("alloc %d" % (3 * MIB))
    snap, p = wait_for_process(c.pid, lambda p: cpu0(p)["memory"]["allocated_bytes"] == 3 * MIB)
    d = cpu0(p)
    assert d["streams"] == 3  # the default stream and the child's two
    assert d["memory"]["reserved_bytes"] >= 3 * MIB and d["memory"]["num_live_allocations"] == 1
    assert "-c" in p["command"] and p["start_time"] > 0
    # The device of the entry is one runtime-smi lists.
    assert d["label"] in {dev["label"] for dev in snap["devices"]}
    # Kept current: a later allocation shows, and a free.
    c.do("alloc %d" % MIB)
    wait_for_process(c.pid, lambda p: cpu0(p)["memory"]["allocated_bytes"] == 4 * MIB)
    c.do("free")
    wait_for_process(c.pid, lambda p: cpu0(p)["memory"]["allocated_bytes"] == 0)
    # Ends without rtFinalize: the exit handler removes the file.
    c.exit()
    assert not (smi_dir / ("%d.json" % c.pid)).exists()
    assert process_in(smi_json(), c.pid) is None


def test_finalize_removes_the_file(child, smi_dir):
    c = child()
    assert (smi_dir / ("%d.json" % c.pid)).exists()
    c.do("finalize")
    assert not (smi_dir / ("%d.json" % c.pid)).exists()
    assert process_in(smi_json(), c.pid) is None
    c.exit()


def test_killed_process_is_ignored_and_its_file_removed(child, smi_dir):
    c = child()
    c.do("alloc %d" % MIB)
    wait_for_process(c.pid, lambda p: cpu0(p)["memory"]["allocated_bytes"] == MIB)
    c.kill()
    path = smi_dir / ("%d.json" % c.pid)
    assert path.exists()  # a killed process cannot remove it
    assert process_in(smi_json(), c.pid) is None
    assert not path.exists()


def test_runtime_smi_0_publishes_nothing(child, smi_dir):
    c = child(RUNTIME_SMI="0")
    c.do("alloc %d" % MIB)
    assert not smi_dir.exists() or not any(smi_dir.iterdir())
    assert process_in(smi_json(), c.pid) is None


def test_bad_runtime_smi_is_refused_naming_it(smi_dir):
    env = dict(os.environ, RUNTIME_SMI="maybe")
    proc = subprocess.run([sys.executable, "-c", "import runtime; runtime.alloc(16)"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode != 0
    assert "InvalidValueError" in proc.stderr and "RUNTIME_SMI='maybe'" in proc.stderr, proc.stderr


FORK_CHILD = textwrap.dedent("""
    import os, sys
    import runtime
    keep = runtime.alloc(4096)
    path = os.path.join(os.environ["RUNTIME_SMI_DIR"], "%d.json" % os.getpid())
    pid = os.fork()
    if pid == 0:
        sys.exit(0)  # runs the exit handlers in a copy of the runtime without its threads
    _, status = os.waitpid(pid, 0)
    print(os.WEXITSTATUS(status), os.path.exists(path), flush=True)
""")


def test_forked_child_leaves_the_parents_file_alone(smi_dir):
    proc = subprocess.run([sys.executable, "-c", FORK_CHILD], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "True"], proc.stdout + proc.stderr
    assert not smi_dir.exists() or not any(smi_dir.iterdir())  # the parent removed its own at exit


# ---- stale and foreign files, written by hand

def _own_start_time():
    stat = open("/proc/self/stat").read()
    return int(stat[stat.rfind(")") + 2:].split()[19])


def _status(pid, start_time, allocated=5):
    return {"format": "runtime-smi/1", "pid": pid, "start_time": start_time, "command": "hand-written",
            "updated_ms": 0, "devices": [{"device": 0, "label": "cpu:0", "name": "cpu:0 (test)", "backend": "cpu",
                                          "memory_total": 1 << 30,
                                          "memory": {"allocated_bytes": allocated, "reserved_bytes": allocated,
                                                     "pool_size": 0, "largest_free_block": 0},
                                          "streams": 1, "operations": 2, "kernels_launched": 3}]}


def _free_pid():
    """A pid no process has now."""
    for pid in range(4_000_000, 3_000_000, -7919):
        if not os.path.exists("/proc/%d" % pid):
            return pid
    pytest.skip("no free pid found")


def test_stale_and_foreign_files(smi_dir):
    smi_dir.mkdir()
    me = os.getpid()  # this test process: alive, and its start time is known
    dead = _free_pid()
    (smi_dir / ("%d.json" % dead)).write_text(json.dumps(_status(dead, 12345)))
    (smi_dir / (".%d.json.tmp" % dead)).write_text("{\"format\": \"runtime-smi/1\", \"pi")  # half-written
    # This pid, but another start time: a pid reused after the writer was killed.
    (smi_dir / ("%d.json" % me)).write_text(json.dumps(_status(me, _own_start_time() + 1)))
    entries = smi.read_processes(smi_dir)
    assert entries == []
    assert sorted(p.name for p in smi_dir.iterdir()) == []
    # The right start time: listed, as written.
    (smi_dir / ("%d.json" % me)).write_text(json.dumps(_status(me, _own_start_time(), allocated=77)))
    # A live process's unreadable file is skipped, not removed; names of other forms are left alone.
    init = 1
    (smi_dir / ("%d.json" % init)).write_text("not json")
    (smi_dir / "notes.txt").write_text("x")
    # A file whose pid is not its name's: skipped.
    parent = os.getppid()
    (smi_dir / ("%d.json" % parent)).write_text(json.dumps(dict(_status(parent, smi._start_time(parent)), pid=me)))
    entries = smi.read_processes(smi_dir)
    assert [e["pid"] for e in entries] == [me]
    assert entries[0]["devices"][0]["memory"]["allocated_bytes"] == 77
    assert (smi_dir / "1.json").exists() and (smi_dir / "notes.txt").exists()
    assert (smi_dir / ("%d.json" % parent)).exists()


def test_missing_directory_lists_no_process(smi_dir):
    assert not smi_dir.exists()
    snap = smi_json()
    assert snap["processes"] == [] and snap["directory"] == str(smi_dir)
    assert not smi_dir.exists()  # runtime-smi itself publishes nothing


# ---- output forms

def test_devices_listed_as_the_runtime_sees_them(smi_dir):
    snap = smi_json()
    assert len(snap["devices"]) == runtime.get_device_count()
    for d in snap["devices"]:
        props = runtime.get_device_properties(d["device"])
        assert d["name"] == props.name and d["backend"] == props.backend
        assert d["memory_total"] == props.total_memory
        assert d["label"] == "%s:%d" % (props.backend, props.backend_ordinal)


def test_table_shows_devices_and_the_process_rows(child, smi_dir):
    c = child()
    c.do("alloc %d" % (2 * MIB))
    wait_for_process(c.pid, lambda p: cpu0(p)["memory"]["allocated_bytes"] == 2 * MIB)
    out = run_smi().stdout
    lines = out.splitlines()
    dev_header = next(i for i, l in enumerate(lines) if l.split()[:2] == ["index", "device"])
    first = lines[dev_header + 1].split()
    assert first[0] == "0" and first[1] == runtime.device_usage(0)["label"]
    proc_header = next(l for l in lines if l.split()[:3] == ["pid", "command", "device"])
    assert "allocated" in proc_header and "kernels" in proc_header
    rows = [l.split() for l in lines if l.split()[:1] == [str(c.pid)]]
    cpu_rows = [r for r in rows if "cpu:0" in r]
    assert len(cpu_rows) == 1, out
    r = cpu_rows[0]
    at = r.index("cpu:0")
    assert r[at + 1:at + 3] == ["2.00", "MiB"], out  # allocated
    assert r[-3:] == ["3", "0", "0"], out  # streams, operations, kernels


def test_devices_that_cannot_be_listed_are_reported_and_processes_still_shown(child, smi_dir, monkeypatch):
    c = child()
    monkeypatch.setenv("RUNTIME_BACKEND", "nosuch")
    proc = run_smi("--json", check=False)
    assert proc.returncode == 1
    assert "RUNTIME_BACKEND='nosuch'" in proc.stderr, proc.stderr
    snap = json.loads(proc.stdout)
    assert snap["devices"] == [] and "RUNTIME_BACKEND='nosuch'" in snap["devices_error"]
    assert process_in(snap, c.pid) is not None
    table = run_smi(check=False)
    assert table.returncode == 1 and "cannot list the devices" in table.stdout


def test_table_without_processes(smi_dir):
    out = run_smi().stdout
    assert "no process is using the runtime" in out


def test_watch_refreshes_count_times_as_json_lines(child, smi_dir):
    c = child()
    proc = run_smi("--json", "--watch", "0.05", "--count", "3")
    lines = proc.stdout.splitlines()
    assert len(lines) == 3
    snaps = [json.loads(l) for l in lines]
    assert all(process_in(s, c.pid) is not None for s in snaps)
    assert snaps[0]["time"] <= snaps[1]["time"] <= snaps[2]["time"]


def test_watch_table_refreshes(smi_dir):
    out = run_smi("--watch", "0.01", "--count", "2").stdout
    assert out.count("Processes") == 2


@pytest.mark.parametrize("args, what", [(["--watch", "0"], "positive number of seconds"),
                                        (["--watch", "-1"], "positive number of seconds"),
                                        (["--watch", "soon"], "positive number of seconds"),
                                        (["--watch", "nan"], "positive number of seconds"),
                                        (["--watch", "1", "--count", "0"], "positive number of refreshes"),
                                        (["--count", "2"], "--count needs --watch"),
                                        (["--bogus"], "unrecognized arguments")])
def test_bad_arguments(args, what):
    proc = run_smi(*args, check=False)
    assert proc.returncode == 2
    assert what in proc.stderr, proc.stderr
