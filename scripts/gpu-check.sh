#!/usr/bin/env bash
# scripts/gpu-check.sh — the GPU check: builds with the cuda backend, runs every test on cuda:0 and the cuda benchmark; < 6 min on 16 cores.
# Run on a machine with an NVIDIA GPU, its driver and the CUDA toolkit (headers + NVRTC); CuPy is optional (the
# Python benchmark's peer). Prints each phase's result and time; exits non-zero if any phase failed, after all ran.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="${JOBS:-$(nproc)}"
build="${BUILD_DIR:-build-gpu}"
export RUNTIME_CACHE_DIR="${RUNTIME_CACHE_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/runtime-gpu-cache.XXXXXX")}"

results=()
status=0
t_all=$SECONDS
step() { # step NAME COMMAND...: runs it, records ok/FAILED and its time; continues either way
  local name=$1 t0=$SECONDS
  shift
  echo
  echo "=== [$name] ==="
  if "$@"; then results+=("$(printf '%-26s %5ds  ok' "$name" $((SECONDS - t0)))")
  else results+=("$(printf '%-26s %5ds  FAILED' "$name" $((SECONDS - t0)))"); status=1; fi
}

gpu_info() {
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  ls /dev/nvidia* >/dev/null 2>&1 || { echo "no /dev/nvidia* device nodes: this is not a GPU machine" >&2; return 1; }
}
configure_build() {
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRUNTIME_WITH_CUDA=ON -DRUNTIME_TEST_CUDA=ON \
    -DRUNTIME_BUILD_EXAMPLES=OFF >/dev/null &&
    cmake --build "$build" -j"$jobs"
}
devices() { "$build/bench/runtime-bench-core" --list-devices; }
# The *_cuda reruns (RUNTIME_TEST_DEVICE=cuda:0, RUNTIME_BACKEND=cuda) plus the cuda compiler/shim tests; then the
# whole suite once on cpu (with the cuda backend built in and a GPU present: nothing may regress there).
ctest_cuda() { (cd "$build" && ctest --output-on-failure -j"$jobs" -L cuda --timeout 120); }
ctest_cpu() { (cd "$build" && ctest -j"$jobs" -E '_2dev$|_cuda$' --timeout 120 -Q --output-on-failure); }
pip_install() {
  python3 -m pip install --quiet numpy nanobind scikit-build-core pytest &&
    CMAKE_BUILD_PARALLEL_LEVEL="$jobs" python3 -m pip install --quiet --no-build-isolation \
      --config-settings=cmake.define.RUNTIME_WITH_CUDA=ON .
}
# Device-parametrized Python tests run on cuda:0 here (they skip it, with the reason, without a GPU); the rest of
# the suite runs with RUNTIME_BACKEND=cuda, so the default device is the GPU.
pytest_cuda() {
  (cd /tmp && python3 -m pytest "$root/tests/python/test_devices.py" -q -rs) &&
    RUNTIME_BACKEND=cuda python3 -m pytest "$root/tests/python" -q -rs --ignore="$root/tests/python/test_bench.py" \
      -k 'stream or event or memory or jit or module or device'
}
bench_core() { "$build/bench/runtime-bench-core" --device cuda:0 --quick; }
bench_python() { python3 bench/bench_python.py --quick --only cuda; }

step gpu-info gpu_info
step build configure_build
step devices devices
step ctest-cuda ctest_cuda
step ctest-cpu ctest_cpu
step pip-install pip_install
step pytest-cuda pytest_cuda
step bench-core-cuda bench_core
step bench-python-cupy bench_python

echo
echo "=== gpu-check summary ==="
printf '%s\n' "${results[@]}"
printf '%-26s %5ds  %s\n' total $((SECONDS - t_all)) "$([[ $status -eq 0 ]] && echo OK || echo FAILED)"
exit $status
