#!/usr/bin/env bash
# lanes_bench three ways, in one run: through rgpu with lanes (a softgpu rgpu-server on loopback),
# through rgpu with RGPU_LANES=0 (every wait on the session's one connection), and on softgpu
# directly (build/lib/softgpu-direct: no rgpu at all, the floor). Prints each table and JSON line.
#   bench/lanes_bench.sh [BUILD_DIR] [tcp|shm] [SECONDS]
set -euo pipefail
build=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
scheme=${2:-tcp}
seconds=${3:-2}
work=$(mktemp -d)
"$build/bin/rgpu-server" --listen "$scheme://127.0.0.1:0" --backend softgpu \
  --port-file "$work/url" 2>"$work/server.log" &
server=$!
trap 'kill $server 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 200); do [ -s "$work/url" ] && break; sleep 0.05; done
url=$(cat "$work/url")
echo "== rgpu, lanes ($scheme)"
"$build/bin/rgpu" run --server "$url" -- "$build/bin/lanes_bench" "$seconds"
echo "== rgpu, RGPU_LANES=0 ($scheme)"
RGPU_LANES=0 "$build/bin/rgpu" run --server "$url" -- "$build/bin/lanes_bench" "$seconds"
echo "== softgpu directly (no rgpu)"
LD_LIBRARY_PATH=$build/lib/softgpu-direct "$build/bin/lanes_bench" "$seconds"
