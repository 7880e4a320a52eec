#!/usr/bin/env bash
# Visibility: `rgpu status` lists a live session with the memory it holds, and the server's
# Prometheus endpoint reports the same figures; sessions that ended read differently by how they
# ended: a program that exited (its client said goodbye) and one killed (the connection lost),
# in the server's log, in `rgpu status` and in the metrics.
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
# How sessions end: the holder above killed (lost), then a program that runs to its end (exited).
kill -KILL $client
wait $client 2>/dev/null
"$bin/rgpu" run --server "$url" -- "$programs/driver_vector_add" >/dev/null || { echo "vector_add failed"; exit 1; }
ended=""
for _ in $(seq 200); do
  json=$("$bin/rgpu" status --server "$url" --json)
  ended=$(echo "$json" | grep -o '"ended": \[.*\]')
  echo "$ended" | grep -q '"exited": 1, "lost": 1, "closed": 0' && break
  sleep 0.05
done
echo "$ended" | grep -q '"exited": 1, "lost": 1, "closed": 0' ||
  { echo "status: expected one exited and one lost session: $json"; cat "$work/server.log"; exit 1; }
grep -q "ended by its client (the program is exiting)" "$work/server.log" ||
  { echo "the server's log does not say the program ended its session"; cat "$work/server.log"; exit 1; }
[ "$(grep -c 'client gone' "$work/server.log")" -le 1 ] ||
  { echo "the server's log calls a session gone that ended normally"; cat "$work/server.log"; exit 1; }
"$bin/rgpu" status --server "$url" | grep -q "1 exited, 1 lost" || { echo "rgpu status: no ended line"; exit 1; }
metrics=$(python3 -c "import urllib.request,sys; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics', timeout=5).read().decode())")
for reason in exited lost; do
  echo "$metrics" | grep -E "^rgpu_sessions_ended_total\{.*reason=\"$reason\".*\} 1" >/dev/null ||
    { echo "metrics lack the $reason session:"; echo "$metrics" | grep rgpu_sessions_ended; exit 1; }
done
echo "status: rgpu status and /metrics report the live session, and how ended ones ended"
