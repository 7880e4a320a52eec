#!/usr/bin/env bash
# A driver-API program that posts work and exits without synchronizing (driver_exit_unsynced):
# the client sends its last batch from the library's unload path. With a batch delay far longer
# than the program's exit, the session must still close with every buffer already freed by the
# program (its posted frees arrived and ran); with the default delay, repeated runs race the
# delay thread against the exit and must all exit cleanly.
#   exit_unsynced.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
start_server "$work/server.log"
run_once() {
  "$bin/rgpu" run --server "$url" -- "$programs/driver_exit_unsynced" >"$work/out" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { echo "exit $rc:"; cat "$work/out"; exit 1; }
}
for delay_us in 2000000 200 50; do
  for i in $(seq 10); do
    RGPU_BATCH_US=$delay_us run_once
  done
done
for _ in $(seq 200); do
  [ "$(grep -c "closed after" "$work/server.log")" -ge 30 ] && break
  sleep 0.05
done
sessions=$(grep -c "closed after" "$work/server.log")
released=$(grep "closed after" "$work/server.log" | grep -vc "released 0 allocations")
# The frees ran after the launches before them: no kernel touched freed memory.
if grep -q "out-of-bounds" "$work/server.log"; then
  echo "a kernel ran after the free that followed it:"; cat "$work/server.log"; exit 1
fi
if [ "$sessions" -ne 30 ] || [ "$released" -ne 0 ]; then
  echo "expected 30 sessions that closed with nothing left to release; server log:"
  cat "$work/server.log"
  exit 1
fi
echo "exit_unsynced: 30 runs exited cleanly; every session's frees reached the server"
