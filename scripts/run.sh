#!/usr/bin/env bash
# scripts/run.sh — the main command: set up the machine, build, run the seed's pipeline (C++ and Python) and print the performance table.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="${JOBS:-$(nproc)}"

bash scripts/setup.sh

# The C++ face: the seed's data flow (H2D → event → kernel on a second stream → D2H → one synchronize).
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs" --target runtime-seed-pipeline
echo
echo "=== runtime-seed-pipeline (C++ API) ==="
./build/examples/runtime-seed-pipeline

# The Python face: the package (libruntime + nanobind module + runtime-bench), the seed's pipeline in
# Python with @runtime.jit, then the seed's performance table measured here, beside PoCL, memcpy and numpy.
python3 -m pip install --quiet numpy nanobind scikit-build-core matplotlib
CMAKE_BUILD_PARALLEL_LEVEL="$jobs" python3 -m pip install --quiet --no-build-isolation .
echo
echo "=== examples/seed_pipeline.py (Python, @runtime.jit) ==="
python3 examples/seed_pipeline.py
echo
echo "=== runtime-bench --quick (the seed's table on this machine, with the peers) ==="
python3 -m runtime.bench --quick --device cpu:0
