#!/usr/bin/env bash
# A client killed with SIGKILL while it holds memory and copies data leaves nothing behind.
#   kill_client.sh BIN_DIR PROGRAMS_DIR ROUNDS [managed]   (run inside with_server.sh)
# managed: the clients hold managed memory, killed while its pages travel.
set -uo pipefail
bin=$1 programs=$2 rounds=${3:-5} kind=${4:-}
# Free device memory before: all of it on the software GPU; on a real GPU, what is free now.
baseline=$("$bin/rgpu" run -- "$programs/driver_memory_is_free" 0 | sed -n 's/.*free \([0-9]*\) of.*/\1/p')
[ -n "$baseline" ] || { echo "cannot read free memory"; exit 1; }
for round in $(seq "$rounds"); do
  out=$(mktemp)
  "$bin/rgpu" run -- "$programs/driver_hold_memory" $kind >"$out" 2>&1 &
  pid=$!
  for _ in $(seq 400); do grep -q ready "$out" && break; sleep 0.025; done
  grep -q ready "$out" || { echo "round $round: client never got ready"; cat "$out"; exit 1; }
  sleep "0.0$((RANDOM % 10))"  # somewhere inside the copy loop
  kill -KILL $pid
  wait $pid 2>/dev/null
  rm -f "$out"
done
# The server notices each death and releases the session; poll until the memory is back.
for _ in $(seq 100); do
  "$bin/rgpu" run -- "$programs/driver_memory_is_free" "$baseline" >/dev/null 2>&1 && exit 0
  sleep 0.1
done
"$bin/rgpu" run -- "$programs/driver_memory_is_free" "$baseline"
echo "memory of killed clients was not released"
exit 1
