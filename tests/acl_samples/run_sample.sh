#!/usr/bin/env bash
# run_sample.sh TOOLKIT_ROOT SAMPLE_DIR WORK_DIR — builds and runs one sample as its user would: source the toolkit's
# set_env.sh, point DDK_PATH and NPU_HOST_LIB at it, configure and build the sample's own CMakeLists.txt with plain
# cmake, run it from a scratch directory. A Python sample (main.py) runs with the python3 on PATH. The sample must
# exit 0 and print a line "PASS". SAMPLE_CXX / SAMPLE_FLAGS: the compiler and extra flags (sanitizer builds).
set -euo pipefail
root=$1 src=$2 work=$3
# shellcheck disable=SC1090,SC1091
. "$root/set_env.sh"
export DDK_PATH="$ASCEND_TOOLKIT_HOME"
export NPU_HOST_LIB="$DDK_PATH/runtime/lib64/stub"
rm -rf "$work"
mkdir -p "$work"

if [[ -f $src/CMakeLists.txt ]]; then
  export CXXFLAGS="${SAMPLE_FLAGS:-}" LDFLAGS="${SAMPLE_FLAGS:-}"
  compiler=()
  [[ -n ${SAMPLE_CXX:-} ]] && compiler=(-DCMAKE_CXX_COMPILER="$SAMPLE_CXX")
  if ! cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release "${compiler[@]}" >"$work/configure.log" 2>&1; then
    cat "$work/configure.log"
    echo "run_sample: configuring $src failed" >&2
    exit 1
  fi
  if ! cmake --build "$work/build" >"$work/build.log" 2>&1; then
    cat "$work/build.log"
    echo "run_sample: building $src failed" >&2
    exit 1
  fi
  run=("$work/build/main")
else
  run=(python3 "$src/main.py")
fi

cd "$work"
set +e
"${run[@]}" 2>&1 | tee "$work/output.log"
rc=${PIPESTATUS[0]}
set -e
[[ $rc -eq 0 ]] || { echo "run_sample: $(basename "$src") exited with $rc" >&2; exit 1; }
grep -qx PASS "$work/output.log" || { echo "run_sample: $(basename "$src") printed no PASS line" >&2; exit 1; }
