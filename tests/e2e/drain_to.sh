#!/usr/bin/env bash
# rgpu-server --drain-to (docs/migration.md): on SIGTERM the server first moves its sessions to
# another server; a running driver_migrate_loop finishes there with the exact result, and the
# stopped server exits 0 having moved it.
#   drain_to.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
export RGPU_STATE_DIR=$work/state
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "drain_to: $*"
  for f in "$work"/*.log; do echo "== $f"; tail -30 "$f"; done
  echo "== the program's output"; grep -v '^iteration' "$work/out" | tail -20
  exit 1
}
start_server "$work/b.log"; b_url=$url; pids+=($server)
start_server "$work/a.log" --drain-to "$b_url"; a=$server a_url=$url; pids+=($a)
"$bin/rgpu" run --server "$a_url" -- "$programs/driver_migrate_loop" 1500 8 20 >"$work/out" 2>&1 &
client=$!
pids+=($client)
wait_for_text "$work/out" "iteration 100" || fail "the program did not start"
kill -TERM $a
wait $a
rc=$?
[ $rc -eq 0 ] || fail "the draining server exited $rc"
grep -q "moved 1 of 1 session(s)" "$work/a.log" || fail "the server did not move its session"
wait $client
rc=$?
[ $rc -eq 0 ] || fail "the program exited $rc"
grep -q "^result ok" "$work/out" || fail "no exact result"
echo "drain_to: $(grep '^result' "$work/out") after its server drained to another on SIGTERM"
