#!/usr/bin/env bash
# scripts/test.sh — the test command: setup, Release build + ctest, install check (examples/consumer), ThreadSanitizer and AddressSanitizer runs; prints each phase's time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="${JOBS:-$(nproc)}"             # compile jobs
ctest_jobs="${CTEST_JOBS:-$(nproc)}" # test processes at once

# ---- phase bookkeeping: the summary is printed on success and on failure
summary=()
current=""
phase_start=0
t_all=$SECONDS
print_summary() {
  local rc=$?
  if [[ -n $current ]]; then summary+=("$(printf '%-22s %5ds  FAILED' "$current" $((SECONDS - phase_start)))"); fi
  echo
  echo "=== test.sh summary (2 dev = every C++ test file also runs with RUNTIME_CPU_DEVICES=2) ==="
  printf '%s\n' "${summary[@]}"
  printf '%-22s %5ds  %s\n' "total" $((SECONDS - t_all)) "$([[ $rc -eq 0 ]] && echo OK || echo "FAILED (exit $rc)")"
}
trap print_summary EXIT
phase() { # phase NAME FUNCTION: runs FUNCTION, records its wall time; any failure ends the script
  current=$1
  phase_start=$SECONDS
  echo
  echo "=== [$1] ==="
  "$2"
  summary+=("$(printf '%-22s %5ds  ok' "$1" $((SECONDS - phase_start)))")
  current=""
}

# ---- phases
setup() { bash scripts/setup.sh; }

# The cuda backend needs only the CUDA headers (cuda.h, nvrtc.h) to build; CI has the toolkit but no GPU, so the
# backend is built and its GPU-free tests run (the shim without a driver, NVRTC compiles, no CUDA DT_NEEDED).
# Without the headers the option stays AUTO (the backend is left out) and nothing fails.
cuda_option=()
for inc in "${CUDA_HOME:-/usr/local/cuda}/include" /usr/local/cuda/include /usr/include; do
  if [[ -f $inc/cuda.h && -f $inc/nvrtc.h ]]; then cuda_option=(-DRUNTIME_WITH_CUDA=ON); break; fi
done
build_release() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cuda_option[@]}"
  cmake --build build -j"$jobs"
}
# The test registration (tests/CMakeLists.txt) already adds a RUNTIME_CPU_DEVICES=2 run of every
# C++ test file (the *_2dev tests), so one ctest covers one and two devices.
test_release() { (cd build && ctest --output-on-failure -j"$ctest_jobs"); }

# Install into a scratch prefix and build examples/consumer against it alone: proves the package
# config (find_package(runtime CONFIG) → runtime::runtime), installed headers and the C ABI.
install_check() {
  local prefix
  prefix="$(mktemp -d "${TMPDIR:-/tmp}/runtime-install.XXXXXX")"
  cmake --install build --prefix "$prefix"
  cmake -S examples/consumer -B "$prefix/_consumer-build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
  cmake --build "$prefix/_consumer-build" -j"$jobs"
  "$prefix/_consumer-build/consumer_c"
  "$prefix/_consumer-build/app"
  rm -rf "$prefix"
}

# -O1 -g1: line tables are enough for sanitizer stack traces and compile much faster than -O2 -g on
# 2 cores; asserts stay on (no NDEBUG).
sanitizer_build() { # DIR SANITIZER [TARGET...]: tests only (no bench/examples); all targets if none named
  local dir=$1 sanitizer=$2
  shift 2
  cmake -S . -B "$dir" -DRUNTIME_SANITIZER="$sanitizer" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cuda_option[@]}" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DRUNTIME_BUILD_BENCH=OFF -DRUNTIME_BUILD_EXAMPLES=OFF
  if (($#)); then cmake --build "$dir" -j"$jobs" --target "$@"; else cmake --build "$dir" -j"$jobs"; fi
}
# TSan: the library and the test files that exercise threads (the others add build time, not race
# coverage: every thread of the cpu backend is behind streams, events, copies, launches and the pool).
tsan_targets=(test_concurrency_stress test_sound_core test_stream test_event test_memcpy test_host_func test_stream_ordering
              test_kernel_launch test_kernel_staging test_memory_pool test_executor_idle test_cpp_api test_cuda_shim test_cuda_fake
              test_module_unload test_kernel_groups test_graph_capture test_graph_cpu test_graph_exec test_graph_cuda_fake
              test_dvpp_codec test_trace test_trace_cuda_fake test_usage test_log test_comm test_ipc test_mem_pool_objects
              test_acl_rt test_acl_callback test_hccl fake_cuda)
build_tsan() { sanitizer_build build-tsan thread "${tsan_targets[@]}"; }
build_asan() { sanitizer_build build-asan address; }

# TSan cannot start on some kernels (high ASLR entropy: "unexpected memory mapping"); there the
# tests run under `setarch <arch> -R` (ASLR off for that process tree, ctest's children included).
tsan_launcher=()
detect_tsan() {
  local probe out
  probe="$(find build-tsan/tests -maxdepth 1 -type f -name 'test_*' -perm -u+x -print -quit)"
  [[ -n $probe ]] || { echo "test.sh: no test executable in build-tsan/tests" >&2; return 1; }
  out="$("$probe" --gtest_list_tests 2>&1 || true)"
  if grep -qE 'unexpected memory mapping|FATAL: ThreadSanitizer' <<<"$out"; then
    echo "test.sh: ThreadSanitizer cannot start here; rerunning under setarch $(uname -m) -R"
    tsan_launcher=(setarch "$(uname -m)" -R)
    out="$("${tsan_launcher[@]}" "$probe" --gtest_list_tests 2>&1 || true)"
    if grep -qE 'unexpected memory mapping|FATAL: ThreadSanitizer' <<<"$out"; then
      echo "$out" >&2
      echo "test.sh: ThreadSanitizer cannot start even with ASLR off" >&2
      return 1
    fi
  fi
}
# The thread-heavy files (the concurrency stress tests, streams, events, copies, launches, the pool, graphs, the
# trace, ...) each in one process with two devices (the *_2dev entries: every case, device-parameterised ones on
# both devices; cheaper under TSan than one process per case).
test_tsan() {
  detect_tsan
  export TSAN_OPTIONS="${TSAN_OPTIONS:-second_deadlock_stack=1}"
  (cd build-tsan &&
    "${tsan_launcher[@]}" ctest --output-on-failure -j"$ctest_jobs" \
      -R '^test_(concurrency_stress|sound_core|stream|event|memcpy|host_func|stream_ordering|kernel_launch|memory_pool|executor_idle|cpp_api|cuda_shim|cuda_fake|graph_cuda_fake|module_unload|kernel_groups|graph_capture|graph_cpu|graph_exec|dvpp_codec|trace|trace_cuda_fake|usage|log|comm|ipc|mem_pool_objects|acl_rt|acl_callback|hccl)_2dev$')
}
# intercept_tls_get_addr=0: up to GCC 13 and LLVM 16 the sanitizers' __tls_get_addr interceptor takes a dynamic TLS
# block whose address is 16 past a page boundary for one with a pre-2.25 glibc header and reads the words before it;
# when a malloc'd block lands there by chance, LeakSanitizer's tracer segfaults at exit ("Tracer caught signal 11", a
# test that passed fails). Without the interceptor the blocks are plain heap chunks reachable from the thread's DTV.
asan_options="detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0"
test_asan() {
  export ASAN_OPTIONS="${ASAN_OPTIONS:-$asan_options}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  # Less the two exhaustive NVRTC compiles (every kernel source of the suite, every DVPP family: NVRTC's work, which
  # the sanitizer does not instrument: ~40 of the phase's ~300 CPU seconds), and of the runs under mpirun the -np 4
  # and RUNTIME_COMM_SHM=0 repeats (the same code as their -np 2 / shared-segment twins, which stay: ~50 CPU seconds);
  # all of them run in ctest-release. Each C++ case runs once, in its file's two-device process (the *_2dev entries;
  # label 1dev: the one-case-per-process entries of those files, which would run every case a second time under the
  # sanitizer, each in a process of its own).
  (cd build-asan && ctest --output-on-failure -j"$ctest_jobs" -LE 1dev -E '^CudaCompiler\.Every|^test_comm_mpi_.*(np4|_noshm)$')
}

# The fuzzers (fuzz/fuzz_capi.cpp, the C API; fuzz/fuzz_graph_file.cpp, the saved-graph loader;
# fuzz/fuzz_dvpp_decode.cpp, DVPP's JPEG and PNG decoders): libFuzzer needs clang; only the library and the fuzzers
# are built (-O1 -g1, ASan + UBSan + coverage), then each runs for a bounded time from its committed seeds. Any crash,
# hang (-timeout) or sanitizer report fails the phase and leaves the input under build-fuzz/fuzz/artifacts/.
build_fuzz() {
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRUNTIME_BUILD_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cuda_option[@]}" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DRUNTIME_BUILD_TESTS=OFF -DRUNTIME_BUILD_BENCH=OFF -DRUNTIME_BUILD_EXAMPLES=OFF
  cmake --build build-fuzz -j"$jobs" --target fuzz_capi fuzz_graph_file fuzz_dvpp_decode
}
run_fuzz() {
  local work cache
  work="$root/build-fuzz/fuzz"
  cache="$(mktemp -d "${TMPDIR:-/tmp}/runtime-fuzz-cache.XXXXXX")"
  mkdir -p "$work/corpus" "$work/corpus_graph_file" "$work/corpus_dvpp" "$work/artifacts"
  (cd "$work" &&
    export RUNTIME_CACHE_DIR="$cache" ASAN_OPTIONS="${ASAN_OPTIONS:-$asan_options}" \
      UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" &&
    ./fuzz_capi -max_total_time="${FUZZ_SECONDS:-20}" -timeout=20 -artifact_prefix=artifacts/ \
      corpus "$root/fuzz/corpus" &&
    ./fuzz_graph_file -max_total_time="${FUZZ_GRAPH_FILE_SECONDS:-12}" -timeout=20 -artifact_prefix=artifacts/ \
      corpus_graph_file "$root/fuzz/corpus_graph_file" &&
    ./fuzz_dvpp_decode -max_total_time="${FUZZ_DVPP_SECONDS:-10}" -timeout=20 -artifact_prefix=artifacts/ \
      corpus_dvpp "$root/fuzz/corpus_dvpp")
  rm -rf "$cache"
}

# The Python package: built and installed by pip (scikit-build-core builds libruntime and the nanobind
# module), then pytest over tests/python (the seed's snippets, @runtime.jit, runtime-bench --quick).
# ml_dtypes: bfloat16 arrays (tests of rt_bfloat16 from Python); OpenCV, Pillow, scikit-image (its photographs) and
# simplejpeg: DVPP's references in the tests and peers in its benchmark. pytest-xdist: the tests run in one worker per
# cpu (`-n`), each a process of its own; a test that needs a private directory or cache makes it (tmp_path).
# mpi4py: runtime.comm.from_mpi under mpirun (tests/python/test_comm_mpi.py; built against setup.sh's Open MPI).
# pytest-timeout: a test that hangs fails after --timeout seconds (its worker's stacks are printed and the worker
# restarted) instead of holding the whole run until CI's limit, as a deadlocked test once did.
python_packages=(numpy nanobind scikit-build-core pytest pytest-xdist pytest-timeout matplotlib ml_dtypes opencv-python-headless Pillow scikit-image
                 simplejpeg mpi4py)
# The wheel is built in build-release's tree (build/: its generator, its cache, the tests, bench and examples kept
# on), so libruntime is not compiled a second time: only the extension module is.
build_python() {
  python3 -m pip install --quiet "${python_packages[@]}"
  local generator
  generator="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' build/CMakeCache.txt)"
  CMAKE_GENERATOR="$generator" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" python3 -m pip install --quiet --no-build-isolation \
    --config-settings=build-dir=build --config-settings=cmake.define.RUNTIME_BUILD_TESTS=ON \
    --config-settings=cmake.define.RUNTIME_BUILD_BENCH=ON --config-settings=cmake.define.RUNTIME_BUILD_EXAMPLES=ON .
}
test_python() {
  # A scratch kernel cache: tests never depend on (or pollute) the user's ~/.cache/runtime.
  RUNTIME_CACHE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/runtime-cache.XXXXXX")" python3 -m pytest tests/python -q -rs -n "$ctest_jobs" \
    --timeout="${PYTEST_TIMEOUT:-240}" --timeout-method=thread
}

phase setup setup
phase build-release build_release
phase ctest-release test_release
phase install-check install_check
phase build-python build_python
phase pytest test_python
phase build-tsan build_tsan
phase ctest-tsan test_tsan
phase build-asan build_asan
phase ctest-asan test_asan
phase build-fuzz build_fuzz
phase fuzz run_fuzz
