"""The pyACL-compatible module `acl` (python/acl/, ctypes over libascendcl): its ACL_* constants against the headers,
its conversions of Python buffers, the init / finalize life cycle and calls before acl.init (a fresh interpreter each),
and acl_cases.py — devices, copies, events, callbacks, capture, DVPP memory — in a pytest process of its own (acl owns
the runtime of its process, as a pyACL program does)."""
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import acl

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
ACL_HEADERS = [REPO / "include" / "acl" / name for name in ("acl_base.h", "acl_rt.h", "error_codes/rt_error_codes.h")]
NPY_INT32 = 5
NPY_FLOAT32 = 11
LIMIT = 300  # seconds: the cases bound each of their own waits; this bounds a whole run


def header_constants(paths):
    """Every ACL_* constant of the headers: `static const int`, numeric #defines and enumerators (implicit values
    counted as C counts them)."""
    out = {}
    number = r"-?(?:0x[0-9a-fA-F]+|\d+)"
    for path in paths:
        text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
        for m in re.finditer(rf"static\s+const\s+int\s+(ACL_\w+)\s*=\s*({number})\s*;", text):
            out[m.group(1)] = int(m.group(2), 0)
        for m in re.finditer(rf"#define\s+(ACL_\w+)\s+\(?({number})U?\)?\s*$", text, flags=re.M):
            out[m.group(1)] = int(m.group(2), 0)
        for m in re.finditer(r"enum\s*\w*\s*\{(.*?)\}", text, flags=re.S):
            value = -1
            for item in filter(None, (i.strip() for i in m.group(1).split(","))):
                name, _, given = (part.strip() for part in item.partition("="))
                value = (int(given, 0) if re.fullmatch(number, given) else out[given]) if given else value + 1
                if name.startswith("ACL_"):
                    out[name] = value
    return out


def run_python(args):
    """Runs a fresh interpreter in this folder (never as an xdist worker); the finished process."""
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run([sys.executable, *args], cwd=HERE, env=env, capture_output=True, text=True, timeout=LIMIT)


def test_constants_match_the_headers():
    constants = header_constants(ACL_HEADERS)
    assert len(constants) > 200
    missing = sorted(name for name in constants if not hasattr(acl, name))
    assert not missing, f"acl lacks {missing}"
    wrong = {name: (getattr(acl, name), value) for name, value in constants.items() if getattr(acl, name) != value}
    assert not wrong, f"acl value != header value: {wrong}"


def test_init_finalize_life_cycle_and_calls_before_init():
    r = run_python(["-c", textwrap.dedent("""
        import acl
        ptr, ret = acl.rt.malloc(64, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        print("before", ptr, ret)
        print("msg", bool(acl.get_recent_err_msg()))
        print("init", acl.init(), acl.init())
        print("finalize", acl.finalize(), acl.finalize())
        print("again", acl.init(), acl.rt.set_device(0), acl.rt.reset_device(0), acl.finalize())
        print("bad config", acl.init("/nonexistent/acl.json"))
    """)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        f"before 0 {acl.ACL_ERROR_UNINITIALIZE}",
        "msg True",
        f"init 0 {acl.ACL_ERROR_REPEAT_INITIALIZE}",
        f"finalize 0 {acl.ACL_ERROR_REPEAT_FINALIZE}",
        "again 0 0 0 0",
        f"bad config {acl.ACL_ERROR_INVALID_FILE}",
    ]


def test_acl_cases_pass_in_a_process_of_their_own():
    r = run_python(["-m", "pytest", "acl_cases.py", "-q", "-p", "no:cacheprovider"])
    assert r.returncode == 0, r.stdout[-20000:] + r.stderr[-5000:]
    assert " passed" in r.stdout and " failed" not in r.stdout, r.stdout[-2000:]


def test_util_conversions_and_their_refusals():
    data = b"\x01\x02\x03\x04"
    ptr = acl.util.bytes_to_ptr(data)
    assert acl.util.ptr_to_bytes(ptr, 4) == data
    assert acl.util.ptr_to_bytes(ptr, 0) == b""
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    view = acl.util.ptr_to_numpy(acl.util.numpy_to_ptr(arr), (2, 3), NPY_FLOAT32)
    np.testing.assert_array_equal(view, arr)
    view[1, 2] = 42.0
    assert arr[1, 2] == 42.0  # a view, not a copy
    assert acl.util.ptr_to_numpy(0, (0, 4), NPY_INT32).shape == (0, 4)
    with pytest.raises(TypeError):
        acl.util.bytes_to_ptr("text")
    with pytest.raises(ValueError):
        acl.util.ptr_to_bytes(0, 4)
    with pytest.raises(ValueError):
        acl.util.ptr_to_numpy(ptr, (1,), 999)
    with pytest.warns(UserWarning, match="not C-contiguous"):
        acl.util.numpy_to_ptr(arr[:, ::2])
    assert acl.util.stop_thread(12345) == acl.ACL_ERROR_INVALID_PARAM
