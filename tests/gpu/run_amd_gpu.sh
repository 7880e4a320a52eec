#!/usr/bin/env bash
# Runs the HIP suite against rgpu-server with its HIP backend on a machine with an AMD GPU
# (ROCm's libamdhip64.so.5 installed, /dev/kfd present), where every HIP test program, kernels
# included, must pass end to end. Writes a summary to OUT_DIR (default ./amd-gpu-results).
#   tests/gpu/run_amd_gpu.sh [OUT_DIR]
# The programs are built for the GPU's own architecture (rocm_agent_enumerator), or for
# RGPU_HIP_ARCHS when set (;-separated, e.g. "gfx90a").
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$PWD/amd-gpu-results}
build=${RGPU_BUILD_DIR:-$root/build-amd}
mkdir -p "$out"
[ -e /dev/kfd ] || { echo "run_amd_gpu: no /dev/kfd: this machine has no AMD GPU driver"; exit 1; }
command -v hipcc >/dev/null || { echo "run_amd_gpu: hipcc not found (apt install hipcc)"; exit 1; }
archs=${RGPU_HIP_ARCHS:-$(rocm_agent_enumerator 2>/dev/null | grep -v '^gfx000$' | sort -u |
                          paste -sd';')}
[ -n "$archs" ] || { echo "run_amd_gpu: cannot tell the GPU's architecture; set RGPU_HIP_ARCHS"; exit 1; }
{
  echo "date: $(date -u)"
  echo "architectures: $archs"
  rocm-smi --showproductname 2>&1 || true
} >"$out/machine.txt"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DRGPU_HIP_ARCHS=$archs" \
  >"$out/build.log" 2>&1 &&
  cmake --build "$build" --target rgpu-server rgpu rgpu-hip rgpu-hip-runtime rgpu-backend-hip \
    hip_test_programs >>"$out/build.log" 2>&1 ||
  { echo "run_amd_gpu: build failed"; tail -50 "$out/build.log"; exit 1; }
bin=$build/bin lib=$build/lib programs=$build/tests/programs/hip
e2e=$root/tests/e2e
export RGPU_BACKEND=cuda RGPU_SERVER_ARGS="--cuda-library $lib/librgpu-backend-hip.so"
rc=0
: >"$out/results.txt"
for program in hip_device_query hip_memcpy_kinds hip_memset hip_streams_async hip_events \
               hip_host_memory hip_mem_info hip_pitch_2d hip_errors hip_pointer_info hip_threads hip_device_reset hip_graph_capture hip_per_thread_stream hip_memcpy_3d hip_vector_add \
               hip_saxpy_streams hip_symbols hip_module_launch hip_mem_pool hip_graph_nodes \
               hip_cooperative; do
  if "$e2e/with_server.sh" "$bin" tcp -- "$e2e/hip_run.sh" "$bin" pass "$programs/$program" \
       >"$out/$program.log" 2>&1; then
    echo "PASS $program" | tee -a "$out/results.txt"
  else
    echo "FAIL $program (log: $out/$program.log)" | tee -a "$out/results.txt"
    rc=1
  fi
done
# hipModuleLoad of a bare code object (the build's first architecture, the GPU's own).
bare=$(ls "$programs"/module_kernels_*.hsaco 2>/dev/null | head -1)
if [ -n "$bare" ] && "$e2e/with_server.sh" "$bin" tcp -- "$e2e/hip_run.sh" "$bin" pass \
     "$programs/hip_module_launch" "$bare" >"$out/hip_module_launch_bare.log" 2>&1; then
  echo "PASS hip_module_launch (bare code object)" | tee -a "$out/results.txt"
else
  echo "FAIL hip_module_launch (bare code object; log: $out/hip_module_launch_bare.log)" |
    tee -a "$out/results.txt"
  rc=1
fi
exit $rc
