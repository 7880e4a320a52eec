#!/usr/bin/env bash
# Load: 32 tenant processes at once, each doing mixed work (allocations, copies, launches, frees,
# expected errors) with checked results; all must succeed and the server must end with nothing
# allocated.
#   load.sh BIN_DIR PROGRAMS_DIR [TENANTS]   (run inside with_server.sh)
set -uo pipefail
bin=$1 programs=$2 tenants=${3:-32}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pids=()
for t in $(seq "$tenants"); do
  "$bin/rgpu" run -- "$programs/driver_mixed_load" "$t" >"$work/$t.out" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { failed=1; echo "tenant $((i + 1)) failed:"; cat "$work/$((i + 1)).out"; }
done
[ $failed -eq 0 ] || exit 1
"$bin/rgpu" run -- "$programs/driver_memory_is_free" || { echo "memory left allocated"; exit 1; }
echo "load: $tenants tenants, every result correct, nothing left allocated"
