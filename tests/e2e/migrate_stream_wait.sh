#!/usr/bin/env bash
# A session whose stream waits on a word of memory (cuStreamWaitValue32) that the program writes
# only later cannot be quiesced for a move: the write is a call the client has not sent, and the
# session's thread would wait for the stream forever while holding that call back. The move is
# refused within seconds, saying why, and the program goes on where it was to its exact result.
#   migrate_stream_wait.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
export RGPU_STATE_DIR=$work/state
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "migrate_stream_wait: $*"
  for f in "$work"/*.log; do echo "== $f"; tail -20 "$f"; done
  echo "== the program's output"; tail -20 "$work/out"
  exit 1
}

start_server "$work/a.log"; a_url=$url; pids+=($server)
start_server "$work/b.log"; b_url=$url; pids+=($server)
[ -n "$a_url" ] && [ -n "$b_url" ] || fail "servers did not start"
"$bin/rgpu" run --server "$a_url" -- "$programs/driver_stream_memops" hold 8 >"$work/out" 2>&1 &
client=$!
pids+=($client)
wait_for_text "$work/out" "waiting" || fail "the program did not start"
session=$("$bin/rgpu" status --server "$a_url" --json | sed -n 's/.*"session": \([0-9]*\).*/\1/p')
[ -n "$session" ] || fail "no session on the first server"
if timeout 6 "$bin/rgpu" migrate --server "$a_url" --session "$session" --to "$b_url" \
  >"$work/refused" 2>&1; then
  fail "a session whose stream waits on memory the program has yet to write moved"
fi
grep -q "waits on memory (cuStreamWaitValue)" "$work/refused" ||
  fail "the move was not refused for its waiting stream (or took too long): $(cat "$work/refused")"
echo "migrate_stream_wait: refused as expected: $(cat "$work/refused")"
wait $client || fail "the program exited $? after a refused move"
grep -q "^result ok" "$work/out" || fail "no exact result after a refused move"
echo "migrate_stream_wait: the program finished where it was"
