#!/usr/bin/env bash
# Live migration (docs/migration.md): driver_migrate_loop (kernels accumulating state in device
# memory, a module global, two streams ordered by events, a captured graph) moves between two
# software-GPU servers several times while it runs and must finish with the exact result. The
# source of the last move is SIGKILLed right after it (nothing may be lost); a move to a server
# without room for the session's memory is refused and the session goes on where it was.
#   migrate.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
export RGPU_STATE_DIR=$work/state  # one operator key for the servers of the test
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; wait 2>/dev/null; [ -n "${RGPU_KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
fail() {
  echo "migrate: $*"
  for f in "$work"/*.log; do echo "== $f"; tail -30 "$f"; done
  echo "== the program's output"; grep -v '^iteration' "$work/out" | tail -20
  exit 1
}

start_server "$work/a.log"; a=$server a_url=$url; pids+=($a)
start_server "$work/b.log"; b=$server b_url=$url; pids+=($b)
[ -n "$a_url" ] && [ -n "$b_url" ] || fail "servers did not start"
# 32 MiB of device memory: too little for the program's 48 MiB (the software GPU only: a GPU's
# memory is what it is).
small_url=
if [ "${RGPU_BACKEND:-softgpu}" = softgpu ]; then
  RGPU_SOFTGPU_MEMORY_MB=32 start_server "$work/small.log"; small_url=$url; pids+=($server)
  [ -n "$small_url" ] || fail "the small server did not start"
fi

"$bin/rgpu" run --server "$a_url" -- "$programs/driver_migrate_loop" 3000 48 30 ${program_mode:-} >"$work/out" 2>&1 &
client=$!
pids+=($client)
wait_for_text "$work/out" "iteration 100" || fail "the program did not start"
session=$("$bin/rgpu" status --server "$a_url" --json | sed -n 's/.*"session": \([0-9]*\).*/\1/p')
[ -n "$session" ] || fail "no session on the first server"

# Iterations printed so far.
progress() { grep -c '^iteration' "$work/out"; }
# migrate FROM TO: moves the session, prints the move's report, sets $session to its new id.
migrate() {
  local before
  before=$(progress)
  "$bin/rgpu" migrate --server "$1" --session "$session" --to "$2" --json >"$work/move" 2>&1 ||
    fail "migration from $1 to $2 failed: $(cat "$work/move")"
  session=$(sed -n 's/.*"session": \([0-9]*\).*/\1/p' "$work/move")
  echo "migrate: moved to $2: $(cat "$work/move")"
  # The program goes on there.
  for _ in $(seq 400); do [ "$(progress)" -gt $((before + 2)) ] && return 0; sleep 0.025; done
  fail "the program made no progress after moving to $2"
}

# Refused for lack of memory: nothing torn down, the program goes on on A (with
# --session-processes on, in the process of its own that A started for it).
refused_for_memory() {
  before=$(progress)
  if "$bin/rgpu" migrate --server "$a_url" --session "$session" --to "$small_url" >"$work/refused" 2>&1; then
    fail "a move to a server too small for the session succeeded"
  fi
  grep -q "memory" "$work/refused" || fail "the refusal does not say why: $(cat "$work/refused")"
  echo "migrate: refused as expected: $(cat "$work/refused")"
  for _ in $(seq 400); do [ "$(progress)" -gt $((before + 2)) ] && break; sleep 0.025; done
  [ "$(progress)" -gt $((before + 2)) ] || fail "the program stopped after a refused move"
  status=$("$bin/rgpu" status --server "$a_url" --json)
  grep -q "\"session\": $session," <<<"$status" || fail "the session ($session) left A after a refused move: $status"
}
if [ -n "$small_url" ]; then refused_for_memory; else echo "migrate: no server small enough here"; fi

migrate "$a_url" "$b_url"
migrate "$b_url" "$a_url"
migrate "$a_url" "$b_url"
# The source of the last move dies at once: the session lives on B, nothing of it on A.
kill -KILL $a
wait $client
rc=$?
[ $rc -eq 0 ] || fail "the program exited $rc"
grep -q "^result ok" "$work/out" || fail "no exact result"
grep -q "CUDA_ERROR" "$work/out" && fail "the program saw an error"
grep -q "session .*: moved; its client left" "$work/b.log" || fail "B did not log its move"
# Where only processes keep tenants apart, a restored session runs in a process of its own.
if [[ " ${RGPU_SERVER_ARGS:-} " == *" --session-processes on "* &&
      " ${RGPU_SERVER_ARGS:-} " == *" --no-backend-extensions "* ]]; then
  grep -q "restored in a process of its own" "$work/b.log" ||
    fail "B restored the session in its own process"
fi
echo "migrate: $(grep '^result' "$work/out") after 3 moves${small_url:+, a refused one} and the source killed"
