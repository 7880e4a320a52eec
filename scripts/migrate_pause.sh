#!/usr/bin/env bash
# The pause a live migration costs a running program (docs/migration.md, docs/performance.md):
# driver_migrate_loop with EXTRA MiB of device memory runs on one of two software-GPU servers on
# this host and is moved back and forth MOVES times; each move's pause (from the source stopping
# at the program's waited call to the program's client leaving it, resumed on the target), the
# time to take, send and restore the checkpoint, and the memory moved are printed, one line per
# move, then the median per size.
#   scripts/migrate_pause.sh [BUILD_DIR] [SCHEME] [MOVES] [SIZES_MIB...]   (RGPU_SERVER_ARGS: more server
#   options; program_mode=kernels: the program never asks for its module variable's address)
set -uo pipefail
build=${1:-build}
scheme=${2:-tcp}
moves=${3:-5}
shift 3 2>/dev/null || shift $#
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(0 64 256)
bin=$build/bin
programs=$build/tests/programs
work=$(mktemp -d)
export RGPU_STATE_DIR=$work/state
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
# start NAME: a server on loopback; sets $url.
start() {
  rm -f "$work/url"
  "$bin/rgpu-server" --listen "$scheme://127.0.0.1:0" --backend softgpu --port-file "$work/url" ${RGPU_SERVER_ARGS:-} \
    >/dev/null 2>>"$work/$1.log" &
  pids+=($!)
  for _ in $(seq 200); do [ -s "$work/url" ] && break; sleep 0.05; done
  url=$(cat "$work/url")
}
start a
a=$url
start b
b=$url
printf '%-10s %-6s %12s %12s %14s\n' memory move pause_ms transfer_ms moved_bytes
for mib in "${sizes[@]}"; do
  "$bin/rgpu" run --server "$a" -- "$programs/driver_migrate_loop" 1000000 "$mib" 20 ${program_mode:-} \
    >"$work/out" 2>&1 &
  client=$!
  for _ in $(seq 6000); do grep -q "iteration 20" "$work/out" && break; sleep 0.05; done
  session=$("$bin/rgpu" status --server "$a" --json | sed -n 's/.*"session": \([0-9]*\).*/\1/p')
  from=$a to=$b
  pauses=()
  for i in $(seq "$moves"); do
    report=$("$bin/rgpu" migrate --server "$from" --session "$session" --to "$to" --json) || {
      echo "move failed: $report"
      exit 1
    }
    session=$(sed -n 's/.*"session": \([0-9]*\).*/\1/p' <<<"$report")
    pause=$(sed -n 's/.*"pause_ms": \([0-9.]*\).*/\1/p' <<<"$report")
    transfer=$(sed -n 's/.*"transfer_ms": \([0-9.]*\).*/\1/p' <<<"$report")
    bytes=$(sed -n 's/.*"memory_bytes": \([0-9]*\).*/\1/p' <<<"$report")
    printf '%-10s %-6s %12s %12s %14s\n' "${mib}MiB" "$i" "$pause" "$transfer" "$bytes"
    pauses+=("$pause")
    tmp=$from from=$to to=$tmp
    sleep 0.5
  done
  kill -9 $client 2>/dev/null
  wait $client 2>/dev/null
  median=$(printf '%s\n' "${pauses[@]}" | sort -n | sed -n "$(((${#pauses[@]} + 1) / 2))p")
  echo "${mib} MiB: median pause ${median} ms over ${#pauses[@]} moves"
  sleep 1
done
