#!/usr/bin/env bash
# A server that goes away mid-run makes the program's calls fail with a CUDA error, not hang.
#   server_gone.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/rgpu-server" --listen tcp://127.0.0.1:0 --backend softgpu --port-file "$work/url" \
  2>"$work/server.log" &
server=$!
for _ in $(seq 200); do [ -s "$work/url" ] && break; sleep 0.05; done
"$bin/rgpu" run --server "$(cat "$work/url")" -- "$programs/driver_hold_memory" >"$work/out" 2>&1 &
client=$!
for _ in $(seq 400); do grep -q ready "$work/out" && break; sleep 0.025; done
kill -KILL $server
# The client's next call must fail and the program exit by itself within a bounded time.
for _ in $(seq 100); do kill -0 $client 2>/dev/null || break; sleep 0.1; done
if kill -0 $client 2>/dev/null; then
  echo "client still running 10 s after the server died"; kill -KILL $client; exit 1
fi
wait $client
rc=$?
grep -q "CUDA_ERROR" "$work/out" || { echo "no CUDA error reported:"; cat "$work/out"; exit 1; }
[ $rc -ne 0 ] || { echo "client exited 0 after losing its server"; exit 1; }
echo "server_gone: client failed with a CUDA error (exit $rc) as expected"
