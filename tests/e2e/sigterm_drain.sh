#!/usr/bin/env bash
# SIGTERM drains the server: a connected tenant gets a clear CUDA error (not a hang), everything
# it held is released, and the server exits 0.
#   sigterm_drain.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
trap 'rm -rf "$work"' EXIT
start_server "$work/server.log"
"$bin/rgpu" run --server "$url" -- "$programs/driver_hold_memory" >"$work/out" 2>&1 &
client=$!
wait_for_text "$work/out" ready
kill -TERM $server
wait $server
rc=$?
[ $rc -eq 0 ] || { echo "server exited $rc on SIGTERM"; cat "$work/server.log"; exit 1; }
for _ in $(seq 100); do kill -0 $client 2>/dev/null || break; sleep 0.1; done
if kill -0 $client 2>/dev/null; then echo "tenant still running after the drain"; kill -9 $client; exit 1; fi
wait $client && { echo "tenant exited 0 after its server drained"; exit 1; }
grep -q "CUDA_ERROR" "$work/out" || { echo "tenant got no CUDA error:"; cat "$work/out"; exit 1; }
grep -q "released 4 allocations" "$work/server.log" || { echo "no release logged:"; cat "$work/server.log"; exit 1; }
echo "sigterm_drain: tenant failed cleanly, resources released, server exited 0"
