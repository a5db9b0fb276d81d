"""IPC handles across processes: ipc_cases.py runs in a pytest process started with RUNTIME_CPU_IPC_MEMORY=1 (cpu
device memory is shareable only when the runtime is started so); without it an export is refused, saying how."""
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
LIMIT = 300  # seconds: the cases bound each of their own waits; this bounds the whole run


def run_python(args, ipc_memory):
    env = dict(os.environ, RUNTIME_CPU_IPC_MEMORY=ipc_memory)
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run([sys.executable, *args], cwd=HERE, env=env, capture_output=True, text=True, timeout=LIMIT)


def test_ipc_cases_pass_in_a_process_started_with_ipc_memory():
    r = run_python(["-m", "pytest", "ipc_cases.py", "-q", "-p", "no:cacheprovider"], "1")
    assert r.returncode == 0, r.stdout[-20000:] + r.stderr[-5000:]
    assert " passed" in r.stdout and " failed" not in r.stdout, r.stdout[-2000:]


def test_without_ipc_memory_an_export_is_refused_saying_how_to_enable_it():
    r = run_python(["-c", (
        "import numpy as np, runtime\n"
        "mem = runtime.zeros(1 << 20, dtype=np.float32)\n"
        "try:\n"
        "    runtime.ipc_get_mem_handle(mem)\n"
        "except runtime.NotSupportedError as e:\n"
        "    print(e)\n")], "0")
    assert r.returncode == 0, r.stderr
    assert "RUNTIME_CPU_IPC_MEMORY=1" in r.stdout and "cpu.ipc_memory=1" in r.stdout, r.stdout
