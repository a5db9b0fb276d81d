#!/usr/bin/env bash
# scripts/run.sh — the main command: set up the machine, build Release into build/, run the seed pipeline, then the benchmark table.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="${JOBS:-$(nproc)}"

bash scripts/setup.sh

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
# Only what this command runs (the test executables are scripts/test.sh's business).
cmake --build build -j"$jobs" --target runtime-seed-pipeline
# (help captured first: `grep -q` closing the pipe early would fail the pipeline under pipefail)
targets="$(cmake --build build --target help)"
if grep -qw runtime-bench-core <<<"$targets"; then
  cmake --build build -j"$jobs" --target runtime-bench-core
fi

echo
echo "=== runtime-seed-pipeline ==="
./build/examples/runtime-seed-pipeline

bench=build/bench/runtime-bench-core
if [[ ! -x $bench ]]; then
  echo "run.sh: ERROR: $bench is missing after the build (bench/CMakeLists.txt must define target runtime-bench-core)" >&2
  exit 1
fi
echo
echo "=== runtime-bench-core --quick ==="
"$bench" --quick
