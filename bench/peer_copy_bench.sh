#!/usr/bin/env bash
# peer_copy_bench with its two devices on two softgpu rgpu-servers on loopback, in one run: the
# copies server to server (rgpu's default) and through the client (RGPU_PEER_COPIES=0); each run
# also times the copy out to the host and back in (the tenant's link: the floor). Prints each
# table and JSON line.
#   bench/peer_copy_bench.sh [BUILD_DIR] [tcp|shm] [MiB] [copies]
set -euo pipefail
build=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
scheme=${2:-tcp}
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
for name in a b; do
  "$build/bin/rgpu-server" --listen "$scheme://127.0.0.1:0" --backend softgpu \
    --port-file "$work/$name.url" 2>"$work/$name.log" &
  pids+=($!)
  for _ in $(seq 200); do [ -s "$work/$name.url" ] && break; sleep 0.05; done
done
servers=(--server "$(cat "$work/a.url")" --server "$(cat "$work/b.url")")
echo "== rgpu, server to server ($scheme)"
"$build/bin/rgpu" run "${servers[@]}" -- "$build/bin/peer_copy_bench" "${3:-64}" "${4:-8}"
echo "== rgpu, through the client: RGPU_PEER_COPIES=0 ($scheme)"
RGPU_PEER_COPIES=0 "$build/bin/rgpu" run "${servers[@]}" -- "$build/bin/peer_copy_bench" \
  "${3:-64}" "${4:-8}"
