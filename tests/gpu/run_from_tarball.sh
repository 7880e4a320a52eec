#!/usr/bin/env bash
# The real-GPU check, run from an unpacked rgpu tarball alone (scripts/package.sh makes it; no
# build, no packages, no network on the machine): the end-to-end programs over TCP and shared
# memory against rgpu-server --backend cuda, tenant isolation, remanence (a tenant never reads
# another's memory, live, freed or left at exit) and SIGKILLed clients, the CUDA runtime suite,
# the NVIDIA samples the suite carries, NVML's answers against CUDA's, the lanes benchmark (a
# thread's rounds beside another's long wait, with and without rgpu), and, where PyTorch is
# installed, a training step of a small transformer through `rgpu run` over shm against the
# same step without rgpu (the step-time ratio; target 1.05x). Everything is recorded in OUT_DIR
# (results.txt: one PASS/FAIL/SKIP line per check; a log per check), failures included. Meant to
# finish in under 8 minutes.
#   TREE/tests/gpu/run_from_tarball.sh [--backend cuda|softgpu] [OUT_DIR]
# --backend softgpu stands in for the driver on a machine without a GPU (PyTorch is skipped).
set -uo pipefail
tree=$(cd "$(dirname "$0")/../.." && pwd)
backend=cuda
if [ "${1:-}" = --backend ]; then
  backend=$2
  shift 2
fi
out=$(mkdir -p "${1:-$PWD/gpu-results}" && cd "${1:-$PWD/gpu-results}" && pwd)
bin=$tree/bin programs=$tree/tests/programs e2e=$tree/tests/e2e
export RGPU_BACKEND=$backend RGPU_KERNELS_DIR=$programs
unset LD_LIBRARY_PATH
: >"$out/results.txt"
rc=0
start=$SECONDS
record() { echo "$1" | tee -a "$out/results.txt"; }
# check NAME TIMEOUT COMMAND...: runs it, logs it, records PASS or FAIL.
check() {
  local name=$1 limit=$2
  shift 2
  if timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1; then
    record "PASS $name"
  else
    record "FAIL $name (exit $?, log $name.log)"
    rc=1
  fi
}
{
  echo "date: $(date -u)"
  echo "backend: $backend"
  echo "host: $(uname -srm); $(ldd --version 2>&1 | head -1)"
  command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
} >"$out/machine.txt"
cat "$out/machine.txt"

# A session's process confines itself (server/session_sandbox.h) before its tenant reaches it:
# its log line says what the kernel allowed. The same program without the confinement tells a
# driver that needs what the confinement refuses from anything else.
check session_host_confined 60 env "RGPU_SERVER_ARGS=--session-processes on" \
  "$e2e/with_server.sh" "$bin" tcp -- sh -c \
  '"$0" run -- "$1" && grep "session host confined" "$RGPU_SERVER_LOG"' \
  "$bin/rgpu" "$programs/driver_vector_add"
check session_host_unconfined 60 env "RGPU_SERVER_ARGS=--session-processes on --session-sandbox off" \
  "$e2e/with_server.sh" "$bin" tcp -- "$bin/rgpu" run -- "$programs/driver_vector_add"
# Where only the confined one failed, the rest runs unconfined, so that one refusal of the
# confinement does not hide everything else this machine can tell.
if grep -q "^FAIL session_host_confined" "$out/results.txt" &&
   grep -q "^PASS session_host_unconfined" "$out/results.txt"; then
  export RGPU_SERVER_ARGS="${RGPU_SERVER_ARGS:-} --session-sandbox off"
  record "NOTE the checks below ran with --session-sandbox off (see session_host_confined.log)"
fi

# The end-to-end programs (each against a fresh server), isolation, remanence, killed clients.
for scheme in tcp shm; do
  for name in vector_add saxpy_streams memset_copy device_global two_contexts out_of_bounds \
              bad_calls pipeline launch_ex graph_nodes graph_params jit_link vmm graph_memory \
              arrays stream_attributes ipc nvml_check lanes staged_copies library sync_memops \
              user_objects stream_memops; do
    check "e2e_${scheme}_$name" 120 "$e2e/with_server.sh" "$bin" "$scheme" -- \
      "$bin/rgpu" run -- "$programs/driver_$name"
  done
  check "e2e_${scheme}_isolation" 120 "$e2e/with_server.sh" "$bin" "$scheme" -- \
    "$e2e/isolation.sh" "$bin" "$programs"
  # Nearly all of the device's memory on a GPU; a few hundred MiB on the software one.
  check "e2e_${scheme}_remanence" 180 env scheme="$scheme" "$e2e/remanence.sh" "$bin" \
    "$programs" "$([ "$backend" = cuda ] && echo most || echo 256)"
  check "e2e_${scheme}_kill_client" 180 "$e2e/with_server.sh" "$bin" "$scheme" -- \
    "$e2e/kill_client.sh" "$bin" "$programs" 3
done
# Live migration between two servers of this machine's GPU: memory mapped at its addresses
# through VMM, module variables by name (docs/migration.md); a program holding a variable's
# address refused, one whose kernels alone use it moved three times and exact, each restored in a
# process of its own (the default on the real driver).
check e2e_tcp_migrate_mapped 300 env scheme=tcp "$e2e/migrate_mapped.sh" "$bin" "$programs"
echo "-- end to end: $((SECONDS - start)) s"

# The CUDA runtime suite (static cudart), all against one server; a program whose libraries
# (cuBLAS, cuDNN, NCCL) this machine lacks is skipped, saying so.
runtime_suite() {
  local failed=0 p name
  for p in "$programs"/runtime/rt_*_static; do
    name=$(basename "$p")
    if env -u LD_LIBRARY_PATH ldd "$p" | grep -q "not found"; then
      echo "SKIP $name: $(ldd "$p" | awk '/not found/ {print $1}' | paste -sd' ')"
      continue
    fi
    if timeout -k 5 120 "$bin/rgpu" run -- "$p" >"$out/runtime/$name.log" 2>&1; then
      echo "PASS $name"
    else
      echo "FAIL $name (exit $?)"
      failed=1
    fi
  done
  return $failed
}
mkdir -p "$out/runtime"
check runtime_suite 300 "$e2e/with_server.sh" "$bin" tcp -- bash -c \
  "$(declare -f runtime_suite); bin='$bin' programs='$programs' out='$out' runtime_suite"
grep -E "^(PASS|FAIL|SKIP)" "$out/runtime_suite.log" | sed 's/^/  runtime: /' >>"$out/results.txt"
echo "-- runtime suite: $((SECONDS - start)) s"

# NVIDIA's samples, each run in (a copy of) its own folder, passing on exit 0 and its own
# success line.
samples() {
  local failed=0 n args success
  while IFS='|' read -r n args success; do
    # shellcheck disable=SC2086
    if (cd "$tree/tests/corpus/$n" && timeout -k 5 120 "$bin/rgpu" run -- "./$n" $args) \
         </dev/null >"$out/samples/$n.log" 2>&1 &&
       { [ "$success" = - ] || [ -z "$success" ] || grep -Eq -- "$success" "$out/samples/$n.log"; }; then
      echo "PASS $n"
    else
      echo "FAIL $n"
      failed=1
    fi
  done <"$tree/tests/corpus/samples.run"
  return $failed
}
if [ -f "$tree/tests/corpus/samples.run" ]; then
  mkdir -p "$out/samples"
  check samples 360 "$e2e/with_server.sh" "$bin" tcp -- bash -c \
    "$(declare -f samples); bin='$bin' tree='$tree' out='$out' samples"
  grep -E "^(PASS|FAIL)" "$out/samples.log" | sed 's/^/  sample: /' >>"$out/results.txt"
else
  record "SKIP samples: the tarball carries none"
fi
echo "-- samples: $((SECONDS - start)) s"

# The GPUs' sensors as a tenant sees them (rgpu smi through the server's host NVML) beside
# nvidia-smi's own; on the real driver every device must have a temperature and a power reading.
check smi_sensors 60 "$e2e/with_server.sh" "$bin" tcp -- \
  "$tree/tests/gpu/smi_sensors.sh" "$bin" "$backend" "$out/smi.json"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,uuid,temperature.gpu,power.draw,power.limit,clocks.sm,pstate \
    --format=csv >"$out/nvidia_smi_sensors.csv" 2>&1
fi
[ -s "$out/smi.json" ] && record "  smi: $(tr -d '\n' <"$out/smi.json" | cut -c1-400)"

# Lanes: a thread's launch+synchronize rounds beside another thread's 1 s wait, through rgpu over
# shm, and (on the real driver) without rgpu, the floor; the figures are recorded, the target
# (within 1.2x of solo) is read from them, not asserted.
if [ -x "$programs/lanes_bench" ]; then
  check lanes_bench 120 "$e2e/with_server.sh" "$bin" shm -- "$bin/rgpu" run -- \
    "$programs/lanes_bench" 1
  figures=$(grep '^{' "$out/lanes_bench.log")
  [ -n "$figures" ] && record "  lanes (rgpu, shm): $figures"
  if [ "$backend" = cuda ]; then
    check lanes_bench_native 120 "$programs/lanes_bench" 1
    figures=$(grep '^{' "$out/lanes_bench_native.log")
    [ -n "$figures" ] && record "  lanes (no rgpu): $figures"
  fi
else
  record "SKIP lanes_bench: the tarball carries none"
fi
echo "-- lanes: $((SECONDS - start)) s"

# PyTorch: one training step of a small transformer, with and without rgpu.
if [ "$backend" != cuda ]; then
  record "SKIP pytorch: the $backend backend stands in for the driver"
elif ! python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
  record "SKIP pytorch: no PyTorch with CUDA on this machine"
else
  # Alternated, twice each (the GPU's clocks rise during the first runs); the server's log
  # shows the step ran through it (its calls counted).
  : >"$out/pytorch_native.log"
  : >"$out/pytorch_rgpu.log"
  for round in 1 2; do
    python3 "$tree/tests/gpu/torch_step.py" >>"$out/pytorch_native.log" 2>&1
    "$e2e/with_server.sh" "$bin" shm -- bash -c "'$bin/rgpu' run -- python3 \
      '$tree/tests/gpu/torch_step.py' && sleep 1 && grep 'closed after' \"\$RGPU_SERVER_LOG\"" \
      >>"$out/pytorch_rgpu.log" 2>&1
  done
  native=$(sed -n 's/^step_ms //p' "$out/pytorch_native.log" | sort -n | head -1)
  remote=$(sed -n 's/^step_ms //p' "$out/pytorch_rgpu.log" | sort -n | head -1)
  calls=$(sed -n 's/.*closed after \([0-9]*\) calls.*/\1/p' "$out/pytorch_rgpu.log" | tail -1)
  if [ -n "$native" ] && [ -n "$remote" ] && [ -n "$calls" ]; then
    ratio=$(python3 -c "print('%.3fx' % ($remote / $native))")
    all_remote=$(sed -n 's/^step_ms //p' "$out/pytorch_rgpu.log" | paste -sd' ')
    all_native=$(sed -n 's/^step_ms //p' "$out/pytorch_native.log" | paste -sd' ')
    record "PASS pytorch: best step $remote ms through rgpu (shm; $calls calls served), $native ms without: $ratio (target 1.05x); all: rgpu $all_remote, native $all_native"
  else
    record "FAIL pytorch (logs pytorch_native.log, pytorch_rgpu.log)"
    rc=1
  fi
fi
echo "-- total: $((SECONDS - start)) s" | tee -a "$out/results.txt"
exit $rc
