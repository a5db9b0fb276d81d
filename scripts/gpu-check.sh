#!/usr/bin/env bash
# scripts/gpu-check.sh — the GPU check in two commands of < 6 min each on 16 cores: `build` (probes, configure + build, the Python package), then `test` (the *_cuda reruns one at a time, the cuda benchmarks, graph replays against native CUDA graphs, the Python GPU tests).
#
# Usage: scripts/gpu-check.sh build|test|all            (all = build then test, for a machine without a time cap)
#
# For a machine with an NVIDIA GPU, its driver and the CUDA toolkit (headers + NVRTC) and no network. Every step writes
# its full output to a file in $GPU_CHECK_LOG_DIR (default <build>/gpu-check-logs); the terminal gets one line per step
# and, for a step that failed, the end of its log. Exit status: non-zero if any step failed, after all ran. Steps
# that cannot run here (no GoogleTest, no pytest, no CuPy) are SKIPPED with the reason, which does not fail the run.
#
# GoogleTest (the C++ tests; none is installed on the GPU machine, and it has no network) is taken from, in order:
#   $RUNTIME_GTEST_SOURCE_DIR (a source tree), $GTEST_ROOT (an installed prefix), an installed GoogleTest that CMake
#   finds, then shared/googletest (a source tree, e.g. a copy of /usr/src/googletest) or shared/gtest-install (a
#   prefix built elsewhere) next to the checkout or inside it, then /usr/src/googletest. With none, the C++ tests are
#   configured off (RUNTIME_BUILD_TESTS=OFF) and the benchmarks and Python tests still run.
# pytest, when the machine's Python lacks it, is installed from wheels in $GPU_CHECK_WHEELS or shared/wheels (no index).
#
# Environment: BUILD_DIR (build-gpu), JOBS (nproc), PYTHON (python3), GPU_CHECK_LOG_DIR, GPU_CHECK_CMAKE_ARGS (more
# configure arguments, e.g. -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON to use a source tree over an installed GoogleTest), and per-step time limits
# GPU_CHECK_LIMIT_<STEP> in seconds (defaults below; a step past its limit is stopped and reported TIMED OUT).
# GPU_CHECK_DRY_RUN=1 runs every step without a GPU, against the fake driver (tests/fake_cuda; RUNTIME_CUDA_DRIVER_LIB):
# the C++ reruns whose tests check what kernels compute, and the Python suites that do, are left out there.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode="${1:-all}"
case $mode in build | test | all) ;; *) echo "usage: $0 build|test|all" >&2; exit 2 ;; esac
jobs="${JOBS:-$(nproc)}"
build="${BUILD_DIR:-build-gpu}"
[[ $build = /* ]] || build="$root/$build"
logs="${GPU_CHECK_LOG_DIR:-$build/gpu-check-logs}"
py="${PYTHON:-python3}"
dry="${GPU_CHECK_DRY_RUN:-0}"
pysite="$build/python-site" # the Python package, installed with pip --target (the machine's site-packages untouched)
mkdir -p "$logs"
export RUNTIME_CACHE_DIR="${RUNTIME_CACHE_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/runtime-gpu-cache.XXXXXX")}"
fake_driver="$build/tests/fake_cuda/libfake_cuda.so"

# ---- bookkeeping: one line per step; the full output in $logs/<step>.log
results=()
status=0
t_all=$SECONDS
step() { # step NAME LIMIT_SECONDS FUNCTION: runs FUNCTION (output to the log) under a time limit; continues either way
  local name=$1 limit=$2 fn=$3 t0=$SECONDS rc var
  var="GPU_CHECK_LIMIT_$(tr 'a-z-' 'A-Z_' <<<"$name")"
  limit="${!var:-$limit}"
  local log="$logs/$name.log"
  : >"$log"
  # The function runs in a child shell so that `timeout` can stop it and everything it started.
  timeout -k 10 "$limit" bash -c "$(declare -p root build logs py dry pysite jobs fake_driver 2>/dev/null); \
    $(declare -f); set -o pipefail; $fn" >>"$log" 2>&1
  rc=$?
  local verdict="ok"
  if ((rc == 77)); then verdict="SKIPPED ($(tail -n 1 "$log"))"
  elif ((rc == 124 || rc == 137)); then verdict="TIMED OUT after ${limit}s"; status=1
  elif ((rc != 0)); then verdict="FAILED (exit $rc)"; status=1
  fi
  results+=("$(printf '%-16s %4ds  %s' "$name" $((SECONDS - t0)) "$verdict")")
  printf '%-16s %4ds  %s   [%s]\n' "$name" $((SECONDS - t0)) "$verdict" "$log"
  if [[ $verdict == FAILED* || $verdict == TIMED* ]]; then
    # The end of the log, and for ctest the names of the failed tests.
    grep -E '^[[:space:]]*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception|Not Run)' "$log" | head -40
    tail -n 15 "$log" | sed 's/^/    | /'
  fi
  return 0
}
skip() { echo "$1"; exit 77; } # inside a step: the last line is the reason shown in the summary

# ---- the steps (each runs in its own shell, output to its log)

# What the machine has: the GPU, the loader's CUDA libraries, NVRTC where the runtime looks for it, GoogleTest.
probes() {
  echo "== nvidia-smi"
  if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv || nvidia-smi
  else echo "nvidia-smi: not found"; fi
  echo "== device nodes"; ls -l /dev/nvidia* 2>&1 | head -8
  echo "== ldconfig -p | grep -E 'libcuda|libnvrtc'"; ldconfig -p 2>/dev/null | grep -E 'libcuda|libnvrtc' || echo "(none in the loader cache)"
  echo "== the driver at the absolute paths the runtime falls back to (src/backends/cuda/cuda_driver.cpp)"
  for f in /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib64/libcuda.so.1 /usr/lib/wsl/lib/libcuda.so.1; do
    [[ -e $f ]] && echo "$f -> $(readlink -f "$f")"
  done
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  echo "== NVRTC in the folders the runtime searches (src/backends/cuda/nvrtc.hpp), in its order"
  echo "RUNTIME_NVRTC_LIB=${RUNTIME_NVRTC_LIB:-} CUDA_HOME=${CUDA_HOME:-} CUDA_PATH=${CUDA_PATH:-}"
  nvrtc_folders | awk '!seen[$0]++' | while read -r d; do
    ls "$d"/libnvrtc.so* "$d"/libnvrtc-builtins.so* 2>/dev/null | sed "s|^|  |"
  done
  echo "== toolkit"; command -v nvcc && nvcc --version | tail -n 2
  echo "== GoogleTest: $(gtest_choice | head -n 1)"
  echo "== tools"; cmake --version | head -n 1; command -v ninja && ninja --version; "$py" --version
  "$py" -c 'import numpy, nanobind, scikit_build_core; print("numpy", numpy.__version__, "nanobind", nanobind.__version__)' || true
  "$py" -c 'import pytest; print("pytest", pytest.__version__)' 2>&1 | tail -n 1
  "$py" -c 'import cupy; print("cupy", cupy.__version__)' 2>&1 | tail -n 1
  nproc; free -g | head -n 2
  if [[ $dry != 1 ]] && ! ls /dev/nvidiactl >/dev/null 2>&1; then echo "no /dev/nvidiactl: this is not a GPU machine"; return 1; fi
}
nvrtc_folders() { # the folders of nvrtc.hpp's search order (the loader's own path is shown by ldconfig above)
  local arch r p
  arch="$(uname -m)-linux"
  [[ $arch == aarch64-linux ]] && arch=sbsa-linux
  [[ -d ${RUNTIME_NVRTC_LIB:-} ]] && echo "$RUNTIME_NVRTC_LIB"
  for r in ${CUDA_HOME:-} ${CUDA_PATH:-} /usr/local/cuda; do printf '%s\n' "$r/lib64" "$r/lib" "$r/targets/$arch/lib"; done
  "$py" - <<'EOF' 2>/dev/null
import site, sys
for p in dict.fromkeys(sys.path + site.getsitepackages() + [site.getusersitepackages()]):
    for sub in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"):
        print(f"{p}/{sub}")
EOF
}
# Which GoogleTest to build the C++ tests with: prints "<what> <path>" on the first line and the CMake arguments on
# the second ("-DRUNTIME_BUILD_TESTS=OFF" when there is none).
gtest_choice() {
  local d
  if [[ -n ${RUNTIME_GTEST_SOURCE_DIR:-} ]]; then
    printf 'source tree (RUNTIME_GTEST_SOURCE_DIR) %s\n-DRUNTIME_GTEST_SOURCE_DIR=%s\n' "$RUNTIME_GTEST_SOURCE_DIR" "$RUNTIME_GTEST_SOURCE_DIR"
    return
  fi
  if [[ -n ${GTEST_ROOT:-} ]]; then printf 'installed prefix (GTEST_ROOT) %s\n-DGTest_ROOT=%s\n' "$GTEST_ROOT" "$GTEST_ROOT"; return; fi
  for d in /usr/lib/x86_64-linux-gnu/cmake/GTest /usr/lib64/cmake/GTest /usr/lib/cmake/GTest /usr/local/lib/cmake/GTest \
    /usr/local/lib64/cmake/GTest; do
    if [[ -f $d/GTestConfig.cmake ]]; then printf 'installed %s\n\n' "$d"; return; fi
  done
  for d in "$root/shared/googletest" "$root/../shared/googletest" /usr/src/googletest; do
    if [[ -f $d/CMakeLists.txt && -f $d/googletest/include/gtest/gtest.h ]]; then
      d="$(cd "$d" && pwd)"
      printf 'source tree %s\n-DRUNTIME_GTEST_SOURCE_DIR=%s\n' "$d" "$d"
      return
    fi
  done
  for d in "$root/shared/gtest-install" "$root/../shared/gtest-install"; do
    if compgen -G "$d/lib*/cmake/GTest/GTestConfig.cmake" >/dev/null; then
      d="$(cd "$d" && pwd)"
      printf 'prebuilt prefix %s\n-DGTest_ROOT=%s\n' "$d" "$d"
      return
    fi
  done
  printf 'none (C++ tests OFF; carry shared/googletest, or set RUNTIME_GTEST_SOURCE_DIR)\n-DRUNTIME_BUILD_TESTS=OFF\n'
}
configure() {
  local gen=() gtest
  command -v ninja >/dev/null && gen=(-G Ninja)
  gtest="$(gtest_choice | sed -n 2p)"
  echo "GoogleTest: $(gtest_choice | head -n 1)"
  # A generator change needs a fresh build folder.
  if [[ -f $build/CMakeCache.txt ]] && ! grep -q "CMAKE_GENERATOR:INTERNAL=${gen[1]:-Unix Makefiles}$" "$build/CMakeCache.txt"; then
    rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
  fi
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DRUNTIME_WITH_CUDA=ON -DRUNTIME_TEST_CUDA=ON \
    -DRUNTIME_BUILD_EXAMPLES=OFF ${gtest:+"$gtest"} ${GPU_CHECK_CMAKE_ARGS:-}
}
build_all() { cmake --build "$build" -j"$jobs"; }
# NVRTC as the runtime itself finds it: runtime-compile --backend cuda of a one-line kernel (no GPU needed).
nvrtc_compile() {
  local dir
  dir="$(mktemp -d)"
  echo 'RT_KERNEL void probe(float* p) { p[get_global_id(0)] = 1.0f; }' >"$dir/probe.cu"
  "$build/tools/runtime-compile" "$dir/probe.cu" -o "$dir/probe.cubin" --backend cuda && ls -l "$dir/probe.cubin"
}
python_package() {
  rm -rf "$pysite"
  # --no-build-isolation --no-deps --no-index: the machine's numpy, nanobind and scikit-build-core, no network.
  CMAKE_BUILD_PARALLEL_LEVEL="$jobs" RUNTIME_WITH_CUDA=ON "$py" -m pip install --no-build-isolation --no-deps --no-index \
    --target "$pysite" "$root" || return 1
  if ! "$py" -c 'import pytest' 2>/dev/null; then
    local wheels="${GPU_CHECK_WHEELS:-}"
    for d in "$root/shared/wheels" "$root/../shared/wheels"; do [[ -z $wheels && -d $d ]] && wheels="$d"; done
    if [[ -n $wheels ]]; then "$py" -m pip install --no-index --find-links "$wheels" --target "$pysite" pytest || return 1
    else echo "pytest is not installed and no wheels were carried (GPU_CHECK_WHEELS, shared/wheels): Python tests will skip"; fi
  fi
  PYTHONPATH="$pysite" "$py" -c 'import runtime; print("runtime", runtime.__file__)'
}

# Test-step environment: the dry run puts the fake driver behind every process (ctest passes it on to the tests).
test_env() {
  if [[ $dry == 1 ]]; then
    export RUNTIME_CUDA_DRIVER_LIB="$fake_driver"
    echo "dry run: RUNTIME_CUDA_DRIVER_LIB=$fake_driver"
  fi
  export PYTHONPATH="$pysite${PYTHONPATH:+:$PYTHONPATH}"
  [[ -f $fake_driver ]] && export RUNTIME_FAKE_CUDA_LIB="$fake_driver" # tests/python/test_fake_cuda.py etc.
  return 0
}
devices() { test_env; "$build/bench/runtime-bench-core" --list-devices; }
# The *_cuda reruns (label gpu, RESOURCE_LOCK gpu): one at a time, as free-memory checks see the whole device. Only
# they: every other C++ test is GPU-independent and runs in CI.
ctest_gpu() {
  test_env
  [[ -f $build/tests/CTestTestfile.cmake ]] || skip "no C++ tests in this build (GoogleTest was not found)"
  local exclude=()
  # The fake runs no kernel code: the files that check what kernels compute need a GPU.
  [[ $dry == 1 ]] && exclude=(-E '^test_(kernel_launch|module|cpp_api|kernel_groups)_cuda($|_)')
  (cd "$build" && ctest -L gpu -j1 --no-tests=error --output-on-failure --output-log "$logs/ctest-gpu.ctest.log" "${exclude[@]}")
}
bench_core() { test_env; "$build/bench/runtime-bench-core" --device cuda:0 --quick; }
# Executable graphs on the GPU: replays of the runtime's graphs (lowered to native CUDA graphs, cuda_graph.cpp) against
# native CUDA graphs of the same nodes built with the raw driver (issue 14: replay <= 1.1x native), then the graph
# suites' *_cuda reruns (the ctest-gpu step runs them too; here on their own, so this step's verdict is the graphs').
bench_graph() {
  test_env
  "$build/bench/runtime-bench-core" --device cuda:0 --quick --only graphs || return 1
  [[ -f $build/tests/CTestTestfile.cmake ]] || { echo "no C++ tests in this build: graph suites not run"; return 0; }
  (cd "$build" && ctest -L gpu -R '^test_graph_' -j1 --no-tests=error --output-on-failure)
}
pytest_ok() { "$py" -c 'import pytest' 2>/dev/null || skip "no pytest on this machine (carry wheels in shared/wheels)"; }
# Device-parametrized Python tests on cuda:0 (from /tmp: the installed package, not the source tree, is imported).
# (The dry run leaves out what checks kernel results: the fake driver runs no kernel code.)
pytest_devices() {
  test_env
  pytest_ok
  local sel=()
  [[ $dry == 1 ]] && sel=(-k 'not (test_jit_kernel and cuda)')
  (cd /tmp && "$py" -m pytest "$root/tests/python/test_devices.py" -q -rfEs -p no:cacheprovider "${sel[@]}")
}
# The rest with RUNTIME_BACKEND=cuda (the default device is the GPU).
pytest_cuda() {
  test_env
  pytest_ok
  local sel=(-k 'stream or event or memory or jit or module or device')
  [[ $dry == 1 ]] && sel=(-k '(stream or event or memory or device) and not jit')
  (cd /tmp && RUNTIME_BACKEND=cuda "$py" -m pytest "$root/tests/python" -q -rfEs -p no:cacheprovider \
    --ignore="$root/tests/python/test_bench.py" --ignore="$root/tests/python/test_bench_python.py" "${sel[@]}")
}
# NCCL on the GPUs (issue 15): runtime.comm all_reduce float32 sum over every cuda device (NCCL refuses two ranks of one
# communicator on one GPU), out of place then in place, checked exactly (small integers: any order sums exactly).
# SKIPPED without libnccl.so.2 (pip's nvidia-nccl-cu12) and in the dry run (the fake driver has no NCCL behind it).
nccl_check() {
  test_env
  [[ $dry == 1 ]] && skip "dry run: no NCCL behind the fake driver"
  (cd /tmp && "$py" - <<'PY'
import sys
import numpy as np
import runtime
import runtime.comm as comm
gpus = [d for d in range(runtime.get_device_count()) if runtime.get_device_properties(d).backend == "cuda"]
if not gpus:
    print("no cuda device"); sys.exit(1)
try:
    ranks = comm.init_all(gpus)
except runtime.NotSupportedError as e:
    print(e); sys.exit(77)
n, count = len(gpus), 1 << 20
xs = [((np.arange(count) + 3 * r) % 11).astype(np.float32) for r in range(n)]
def on(d, host):  # device memory of cuda device d holding `host` (copied with d current)
    with runtime.device(d):
        return runtime.to_device(host, device=d)
send = [on(d, x) for x, d in zip(xs, gpus)]
recv = [on(d, np.zeros(count, np.float32)) for d in gpus]
with comm.group():
    for c, s, r in zip(ranks, send, recv):
        c.all_reduce(s, r)
with comm.group():
    for c, r in zip(ranks, recv):
        c.all_reduce(r)
for d in gpus:
    runtime.Device(d).synchronize()
want = sum(xs)
for r, buf in enumerate(recv):
    with runtime.device(gpus[r]):
        wrong = int(np.count_nonzero(buf.numpy() != n * want))
    print(f"rank {r} on device {gpus[r]}: {wrong} wrong of {count}")
    if wrong:
        sys.exit(1)
print(f"NCCL all_reduce over {n} GPU(s): exact")
PY
  )
}
bench_python() {
  test_env
  "$py" -c 'import cupy' 2>/dev/null || skip "no CuPy: the cuda row of bench_python.py has no peer here"
  "$py" "$root/bench/bench_python.py" --quick --only cuda
}

# ---- the two commands
echo "gpu-check $mode: build $build, logs $logs$([[ $dry == 1 ]] && echo ', DRY RUN (fake driver)')"
if [[ $mode == build || $mode == all ]]; then
  step probes 20 probes
  step configure 40 configure
  step build 200 build_all
  step nvrtc-compile 20 nvrtc_compile
  step python-package 80 python_package
fi
if [[ $mode == test || $mode == all ]]; then
  step devices 20 devices
  step ctest-gpu 200 ctest_gpu
  step bench-core 45 bench_core
  step bench-graph 60 bench_graph
  step pytest-devices 25 pytest_devices
  step pytest-cuda 45 pytest_cuda
  step bench-python 25 bench_python
  step nccl 30 nccl_check
fi
echo
echo "=== gpu-check $mode summary (logs: $logs) ==="
printf '%s\n' "${results[@]}"
printf '%-16s %4ds  %s\n' total $((SECONDS - t_all)) "$([[ $status -eq 0 ]] && echo OK || echo FAILED)"
exit $status
