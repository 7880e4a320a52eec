#!/usr/bin/env bash
# A kernel that waits for the host through managed memory (system-scope atomics on a flag the host
# sets while the kernel runs) cannot finish on rgpu's devices, which have no concurrent managed
# access: the host's write waits for the kernel. The server's --max-kernel-ms ends the kernel,
# the program stops at that write with a message that says why (never a wrong answer), and the
# server goes on serving.
#   managed_host_wait.sh BIN_DIR PROGRAMS_DIR   (inside with_server.sh, the server started with
#                                                --max-kernel-ms)
set -uo pipefail
bin=$1 programs=$2
ulimit -c 0
fail() { echo "managed_host_wait: $*"; echo "$out"; exit 1; }
out=$("$bin/rgpu" run -- "$programs/driver_managed_host_wait" 2>&1)
rc=$?
[ $rc -ne 0 ] || fail "the program exited 0"
echo "$out" | grep -q "concurrent managed access 0, host native atomics 0" ||
  fail "the device's attributes do not say there is no concurrent access"
echo "$out" | grep -q "launched" || fail "the kernel was not launched"
echo "$out" | grep -q "saw the host's write" && fail "the kernel finished"
echo "$out" | grep -q "CUDA_ERROR_LAUNCH_TIMEOUT.*cannot finish" || fail "no message saying why"
"$bin/rgpu" run -- "$programs/driver_vector_add" >/dev/null || fail "the server stopped serving"
echo "managed_host_wait: refused with a reason (exit $rc)"
