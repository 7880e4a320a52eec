#!/usr/bin/env bash
# Installs what rgpu needs from Debian's packages (when missing) and builds it into build/.
# Usage: scripts/setup.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}

packages=(build-essential cmake ninja-build pkg-config python3 libucx-dev ucx-utils
          libprotobuf-dev protobuf-compiler libzstd-dev liblz4-dev libseccomp-dev libgtest-dev libgmock-dev
          libcli11-dev libssl-dev openssl nettle-dev gnuplot-nox sockperf iperf3
          prometheus-cpp-dev clang-16 libclang-rt-16-dev
          libgrpc++-dev protobuf-compiler-grpc libsqlite3-dev libpq-dev postgresql hipcc hashcat
          patchelf lintian slurmctld slurmd slurm-client munge libslurm-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The CUDA toolkit (nvcc and headers) is the ABI reference and builds the test programs.
if [ -z "${RGPU_CUDA_ROOT:-}" ]; then
  RGPU_CUDA_ROOT=/usr/local/cuda
fi
if [ ! -f "$RGPU_CUDA_ROOT/include/cuda.h" ]; then
  echo "setup: no CUDA toolkit at $RGPU_CUDA_ROOT (set RGPU_CUDA_ROOT); it is required" >&2
  exit 1
fi
export PATH="$RGPU_CUDA_ROOT/bin:$PATH"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRGPU_CUDA_ROOT="$RGPU_CUDA_ROOT" >/dev/null
cmake --build "$build" -j "$(nproc)"
