#!/usr/bin/env bash
# A server that goes away mid-run makes the program's calls fail with a CUDA error, not hang:
# once in the middle of a large transfer (driver_hold_memory) and once in the middle of a batch
# of posted launches (driver_launch_loop, which checks at every synchronization that no launch
# was lost or run twice; it exits 2 if one was), over TCP and over shared memory (where only the
# bootstrap socket can notice the death).
#   server_gone.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
trap 'rm -rf "$work"' EXIT
for scheme in tcp shm; do
  for program in driver_hold_memory driver_launch_loop; do
    rm -f "$work/out"
    start_server "$work/server.log"
    "$bin/rgpu" run --server "$url" -- "$programs/$program" >"$work/out" 2>&1 &
    client=$!
    wait_for_text "$work/out" ready
    sleep 0.2
    kill -KILL $server
    wait $server 2>/dev/null
    # The client's next call must fail and the program exit by itself within a bounded time.
    for _ in $(seq 100); do kill -0 $client 2>/dev/null || break; sleep 0.1; done
    if kill -0 $client 2>/dev/null; then
      echo "$program: still running 10 s after the server died"; kill -KILL $client; exit 1
    fi
    wait $client
    rc=$?
    grep -q "CUDA_ERROR" "$work/out" || { echo "$program: no CUDA error reported:"; cat "$work/out"; exit 1; }
    [ $rc -eq 1 ] || { echo "$program: exit $rc after losing its server:"; cat "$work/out"; exit 1; }
    echo "server_gone ($scheme): $program failed with a CUDA error as expected: $(grep -m1 CUDA_ERROR "$work/out")"
  done
done
