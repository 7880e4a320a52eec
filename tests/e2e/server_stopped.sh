#!/usr/bin/env bash
# Keepalives in both directions.
#  1. A server that is stopped (SIGSTOP: its sockets stay open, nothing answers) makes the
#     tenant's pending call fail with a CUDA error once RGPU_SERVER_TIMEOUT_MS passes: no hang.
#  2. A server started with --client-timeout-ms closes the session of a stopped tenant, releases
#     what it held, and says why in its log.
#   server_stopped.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
pids=()
trap 'kill -KILL "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT

# 1. The server stops.
start_server "$work/one.log"
pids+=($server)
RGPU_LOG=error RGPU_SERVER_TIMEOUT_MS=2000 "$bin/rgpu" run --server "$url" -- \
  "$programs/driver_hold_memory" >"$work/out1" 2>&1 &
client=$!
pids+=($client)
wait_for_text "$work/out1" ready
kill -STOP $server
for _ in $(seq 300); do kill -0 $client 2>/dev/null || break; sleep 0.1; done
if kill -0 $client 2>/dev/null; then
  echo "client still waiting 30 s after its server stopped (timeout was 2 s)"; exit 1
fi
wait $client
rc=$?
kill -CONT $server
grep -q "CUDA_ERROR" "$work/out1" || { echo "no CUDA error reported:"; cat "$work/out1"; exit 1; }
grep -q "keepalives" "$work/out1" || { echo "the reason was not given:"; cat "$work/out1"; exit 1; }
[ $rc -ne 0 ] || { echo "client exited 0 after its server stopped"; exit 1; }
echo "stopped server: client failed (exit $rc): $(grep -m1 keepalives "$work/out1")"

# 2. The tenant stops.
start_server "$work/two.log" --client-timeout-ms 1500
pids+=($server)
"$bin/rgpu" run --server "$url" -- "$programs/driver_hold_memory" >"$work/out2" 2>&1 &
client=$!
pids+=($client)
wait_for_text "$work/out2" ready
kill -STOP $client
for _ in $(seq 300); do grep -q "closed after" "$work/two.log" && break; sleep 0.1; done
grep -q "client sent no keepalive" "$work/two.log" || {
  echo "the server did not close the silent tenant's session:"; cat "$work/two.log"; exit 1; }
grep "closed after" "$work/two.log" | grep -q "released 4 allocations" || {
  echo "the session's memory was not released:"; cat "$work/two.log"; exit 1; }
sessions=$("$bin/rgpu" status --server "$url" --json | python3 -c \
  'import json,sys; print(len(json.load(sys.stdin).get("sessions", [])))')
[ "$sessions" = 0 ] || { echo "status still lists $sessions session(s)"; exit 1; }
echo "silent tenant: $(grep -m1 'client sent no keepalive' "$work/two.log" | sed 's/.*closing: //')"
