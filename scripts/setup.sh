#!/usr/bin/env bash
# scripts/setup.sh — installs what a fresh Debian 12 machine needs to build and test the runtime; idempotent, fast when all is present.
set -euo pipefail

# Build tools, GoogleTest, OpenCL on PoCL (the benchmark's peer), oneTBB (the graph rows' flow_graph peer),
# Python for the package and its tests, setarch (util-linux) for ThreadSanitizer on kernels with high ASLR
# entropy, clang and its runtime libraries (libclang-rt-dev: libFuzzer and the sanitizers; Debian 12's is
# clang 14's) for the fuzzer; libjpeg-turbo's TurboJPEG and libpng for DVPP's codecs; Open MPI 4.1 (mpirun, and
# the headers for test_comm_mpi; libruntime dlopens libmpi) for collectives across processes.
packages=(
  cmake make g++ gcc pkg-config
  libgtest-dev
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers
  libtbb-dev
  python3 python3-pip python3-dev python3-venv
  util-linux
  clang libclang-rt-dev
  libturbojpeg0-dev libpng-dev
  libopenmpi-dev openmpi-bin
)

missing=()
for p in "${packages[@]}"; do
  # dpkg-query (what dpkg -s reads) is a local lookup (no network): only what is missing goes to apt-get.
  if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true) != "install ok installed" ]]; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update
"${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
echo "setup: done"
