#!/usr/bin/env bash
# Runs the end-to-end suite against the real CUDA driver (rgpu-server --backend cuda) on a
# machine with an NVIDIA GPU, and writes a summary to OUT_DIR (default ./gpu-results).
#   tests/gpu/run_real_gpu.sh [OUT_DIR]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$PWD/gpu-results}
mkdir -p "$out"
{
  echo "date: $(date -u)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
} >"$out/machine.txt"
"$root/scripts/setup.sh" >"$out/build.log" 2>&1 || { echo "build failed"; tail -50 "$out/build.log"; exit 1; }
cd "$root/build"
RGPU_BACKEND=cuda ctest -L 'e2e|runtime' -j 4 --output-on-failure >"$out/ctest.log" 2>&1
rc=$?
# Isolation on the real driver: fresh allocations hold no other tenant's data, hostile sizes are
# refused (raw protocol peers against rgpu-server --backend cuda).
for t in server_scrub_test server_sizes_test; do
  RGPU_TEST_BACKEND=cuda "$root/build/bin/$t" >"$out/$t.log" 2>&1 || rc=1
  tail -3 "$out/$t.log"
done
tail -40 "$out/ctest.log"
exit $rc
