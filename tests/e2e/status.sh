#!/usr/bin/env bash
# Visibility: `rgpu status` lists a live session with the memory it holds, and the server's
# Prometheus endpoint reports the same figures.
#   status.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
trap 'kill $client $server 2>/dev/null; rm -rf "$work"' EXIT
port=$((20000 + RANDOM % 20000))
start_server "$work/server.log" --metrics-port $port
"$bin/rgpu" run --server "$url" -- "$programs/driver_hold_memory" >"$work/out" 2>&1 &
client=$!
for _ in $(seq 400); do grep -q ready "$work/out" && break; sleep 0.025; done
"$bin/rgpu" status --server "$url"
json=$("$bin/rgpu" status --server "$url" --json) || { echo "rgpu status failed"; exit 1; }
echo "$json" | grep -q '"memory_bytes": 268435456' || { echo "status lacks the session's 256 MiB: $json"; exit 1; }
[ "$(echo "$json" | grep -o '"session":' | wc -l)" -eq 1 ] || { echo "status: expected one session: $json"; exit 1; }
metrics=$(python3 -c "import urllib.request,sys; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics', timeout=5).read().decode())") ||
  { echo "no metrics endpoint"; cat "$work/server.log"; exit 1; }
echo "$metrics" | grep -E '^rgpu_session_memory_bytes\{.*\} 268435456' >/dev/null ||
  { echo "metrics lack the session's memory:"; echo "$metrics" | grep rgpu_; exit 1; }
echo "$metrics" | grep -q '^rgpu_sessions 1' || { echo "metrics: wrong session count"; exit 1; }
echo "status: rgpu status and /metrics report the live session"
