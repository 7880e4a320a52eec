#!/usr/bin/env bash
# Checkpoint to a file and restore later (docs/migration.md): driver_migrate_loop's session goes
# into a file (`rgpu checkpoint`); the program waits, parked, holding no device memory; a server
# started afterwards takes the file up (`rgpu restore`) and the program finishes there with the
# exact result. A checkpoint file altered by one byte is refused by the restore, and the session
# waits on.
#   checkpoint.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
export RGPU_STATE_DIR=$work/state
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; wait 2>/dev/null; [ -n "${RGPU_KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
fail() {
  echo "checkpoint: $*"
  for f in "$work"/*.log; do echo "== $f"; tail -30 "$f"; done
  echo "== the program's output"; grep -v '^iteration' "$work/out" | tail -20
  exit 1
}
progress() { grep -c '^iteration' "$work/out"; }

start_server "$work/a.log"; a_url=$url; pids+=($server)
"$bin/rgpu" run --server "$a_url" -- "$programs/driver_migrate_loop" 1500 16 20 ${program_mode:-} >"$work/out" 2>&1 &
client=$!
pids+=($client)
wait_for_text "$work/out" "iteration 100" || fail "the program did not start"
session=$("$bin/rgpu" status --server "$a_url" --json | sed -n 's/.*"session": \([0-9]*\).*/\1/p')
"$bin/rgpu" checkpoint --server "$a_url" --session "$session" --file "$work/session.ckpt" \
  >"$work/checkpointed" 2>&1 || fail "checkpoint failed: $(cat "$work/checkpointed")"
echo "checkpoint: $(cat "$work/checkpointed")"
[ -s "$work/session.ckpt" ] || fail "no checkpoint file"
status=$("$bin/rgpu" status --server "$a_url" --json)
grep -q '"state": "parked"' <<<"$status" || fail "the session is not parked: $status"
grep -q '"memory_bytes": 0,' <<<"$status" || fail "a parked session holds device memory: $status"
# The program waits, stopped in its call.
stopped_at=$(progress)
sleep 1
[ "$(progress)" -eq "$stopped_at" ] || fail "the program went on while its session was in a file"
kill -0 $client 2>/dev/null || fail "the program ended while parked"

# Later, a fresh server.
start_server "$work/b.log"; b_url=$url; pids+=($server)
# A file altered by one byte (in its device memory) is refused; the session waits on.
cp "$work/session.ckpt" "$work/altered.ckpt"
size=$(stat -c %s "$work/altered.ckpt")
printf '\x5a' | dd of="$work/altered.ckpt" bs=1 seek=$((size - 4096)) conv=notrunc 2>/dev/null
if "$bin/rgpu" restore --server "$b_url" --file "$work/altered.ckpt" --from "$a_url" \
  --session "$session" >"$work/altered" 2>&1; then
  fail "an altered checkpoint was restored"
fi
grep -q "digest" "$work/altered" || fail "the refusal does not say why: $(cat "$work/altered")"
echo "checkpoint: altered file refused: $(cat "$work/altered")"
"$bin/rgpu" restore --server "$b_url" --file "$work/session.ckpt" --from "$a_url" \
  --session "$session" >"$work/restored" 2>&1 || fail "restore failed: $(cat "$work/restored")"
echo "checkpoint: $(cat "$work/restored")"
# A session restored in a process of its own: that process admits nobody but the session's own
# program, which resumes there (a stranger who found its port was admitted, with no credential, into
# the tenant's process, and ended it on leaving).
host_url=$(sed -n 's/.*session host for session [0-9]* of .* on \([a-z]*:\/\/[^ ]*\).*/\1/p' "$work/b.log" | tail -1)
if [[ " ${RGPU_SERVER_ARGS:-} " == *" --session-processes on "* &&
      " ${RGPU_SERVER_ARGS:-} " == *" --no-backend-extensions "* ]]; then
  [ -n "$host_url" ] || fail "B's log names no process for the restored session"
fi
if [ -n "$host_url" ]; then
  if "$bin/rgpu" run --server "$host_url" -- "$bin/handshake_probe" >"$work/intruder" 2>&1; then
    fail "a stranger was admitted into the restored session's process: $(cat "$work/intruder")"
  fi
  grep -q "admits no other" "$work/intruder" ||
    fail "the stranger was not refused by the host: $(cat "$work/intruder")"
  echo "checkpoint: a stranger at $host_url refused: $(grep -m1 'admits no other' "$work/intruder")"
fi
wait $client
rc=$?
[ $rc -eq 0 ] || fail "the program exited $rc"
grep -q "^result ok" "$work/out" || fail "no exact result"
echo "checkpoint: $(grep '^result' "$work/out") after its session went through a file"
# Where only processes keep tenants apart, the restored session ran in a process of its own.
if [[ " ${RGPU_SERVER_ARGS:-} " == *" --session-processes on "* &&
      " ${RGPU_SERVER_ARGS:-} " == *" --no-backend-extensions "* ]]; then
  grep -q "restored in a process of its own" "$work/b.log" ||
    fail "B restored the session in its own process"
fi
