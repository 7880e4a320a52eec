#!/usr/bin/env bash
# Live migration on a backend that cannot allocate at a chosen address (NVIDIA's driver; here the
# software GPU with --no-backend-extensions, docs/migration.md): the target maps the session's
# memory at its addresses and loads its modules where it can. A program that holds the address of
# a module variable (cudaMemcpyToSymbol) is refused the move and finishes exactly where it was;
# one whose kernels alone use the variable then moves as migrate.sh moves it (three moves, a
# refused one, the source killed, the exact result). With --session-processes on in
# RGPU_SERVER_ARGS the target restores each session in a process of its own.
#   migrate_mapped.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
export RGPU_STATE_DIR=$work/state
export RGPU_SERVER_ARGS="${RGPU_SERVER_ARGS:-} --no-backend-extensions"
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "migrate_mapped: $*"
  for f in "$work"/*.log; do echo "== $f"; tail -20 "$f"; done
  echo "== the program's output"; tail -20 "$work/out"
  exit 1
}

start_server "$work/a.log"; a_url=$url; pids+=($server)
start_server "$work/b.log"; b_url=$url; pids+=($server)
[ -n "$a_url" ] && [ -n "$b_url" ] || fail "servers did not start"
"$bin/rgpu" run --server "$a_url" -- "$programs/driver_migrate_loop" 600 4 20 >"$work/out" 2>&1 &
client=$!
pids+=($client)
wait_for_text "$work/out" "iteration 50" || fail "the program did not start"
session=$("$bin/rgpu" status --server "$a_url" --json | sed -n 's/.*"session": \([0-9]*\).*/\1/p')
[ -n "$session" ] || fail "no session on the first server"
if "$bin/rgpu" migrate --server "$a_url" --session "$session" --to "$b_url" >"$work/refused" 2>&1; then
  fail "a session holding a module variable's address moved to a backend that relocates it"
fi
grep -q "address of module variable total" "$work/refused" ||
  fail "the refusal does not say why: $(cat "$work/refused")"
echo "migrate_mapped: refused as expected: $(cat "$work/refused")"
wait $client || fail "the program exited $? after a refused move"
grep -q "^result ok" "$work/out" || fail "no exact result after a refused move"
grep -q "CUDA_ERROR" "$work/out" && fail "the program saw an error"
kill -9 "${pids[@]}" 2>/dev/null
wait 2>/dev/null

program_mode=kernels "$(dirname "$0")/migrate.sh" "$bin" "$programs"
