#!/usr/bin/env bash
# A lease follows its session through a checkpoint file (docs/migration.md, "Metering"): a
# program placed by the registry on provider acme's host-a is checkpointed into a file (it waits,
# parked); `rgpu restore` on provider bolt's host-b has host-a hand the lease over there first,
# and host-b restores the file under that hand-over, with no token of the tenant's of its own.
# The program finishes with the exact result, no record is refused, each server is billed the
# calls it served, and the session's end on host-b frees the lease. The file restored again is
# refused: its session has left host-a. RGPU_SERVER_ARGS: more options for the servers;
# program_mode=kernels: the program never asks for its module variable's address.
#   checkpoint_lease.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
registry="" a="" b="" client=""
trap 'kill -9 $client 2>/dev/null; kill $registry $a $b 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "checkpoint_lease: $*"
  for f in "$work"/*.log "$work/out"; do echo "-- $f"; tail -25 "$f"; done
  exit 1
}
printf 'gpu 0.002 1 rgpu softgpu\n' >"$work/prices"
export RGPU_STATE_DIR=$work/state  # one operator key for the servers and the CLI
source "$(dirname "$0")/lib.sh"
start_registry
open_accounts
start_server host-a "$work/a.url" "$work/a.log"
a=$launched a_url=$(cat "$work/a.url")

"$bin/rgpu" run --memory 256M -- "$programs/driver_migrate_loop" 4000 48 30 ${program_mode:-} >"$work/out" 2>&1 &
client=$!
await_started "$work/out"
pkey=$("$bin/rgpu" provider create bolt --json | json 'd["provider_key"]') || fail "provider create"
start_server host-b "$work/b.url" "$work/b.log"
b=$launched b_url=$(cat "$work/b.url")
for _ in $(seq 300); do [ "$("$bin/rgpu" gpus --json | json 'len(d)')" = 2 ] && break; sleep 0.1; done

session=$("$bin/rgpu" status --server "$a_url" --json | sed -n 's/.*"session": \([0-9]*\).*/\1/p')
[ -n "$session" ] || fail "no session on host-a"
"$bin/rgpu" checkpoint --server "$a_url" --session "$session" --file "$work/ckpt" >"$work/ckpt.out" 2>&1 ||
  fail "checkpoint failed: $(cat "$work/ckpt.out")"
"$bin/rgpu" restore --server "$b_url" --file "$work/ckpt" --from "$a_url" --session "$session" \
  --json >"$work/restored" 2>&1 || fail "restore failed: $(cat "$work/restored")"
echo "checkpoint_lease: restored: $(cat "$work/restored")"
b_session=$(json 'd["session"]' <"$work/restored")
grep -q "lease .*: the registry hands it to host-b" "$work/a.log" || fail "host-a did not hand the lease over"
wait $client || fail "the program exited $?"
client=""
grep -q "^result ok" "$work/out" || fail "no exact result"
grep -q "CUDA_ERROR" "$work/out" && fail "the program saw an error"
# Restored again: its session is no longer on host-a to hand its lease over.
if "$bin/rgpu" restore --server "$b_url" --file "$work/ckpt" --from "$a_url" --session "$session" \
  >"$work/again" 2>&1; then
  fail "the checkpoint file was restored twice"
fi
echo "checkpoint_lease: restored again: refused: $(cat "$work/again")"

# The session's end on host-b frees the lease: no GPU holds one.
for _ in $(seq 300); do
  [ "$("$bin/rgpu" gpus --json | json 'sum(g["leases"] for g in d)')" = 0 ] && break
  sleep 0.1
done
[ "$("$bin/rgpu" gpus --json | json 'sum(g["leases"] for g in d)')" = 0 ] ||
  fail "the lease was not freed: $("$bin/rgpu" gpus --json)"
grep -h "refused usage record\|did not take usage record" "$work/a.log" "$work/b.log" &&
  fail "the registry refused records"
closed_calls() { sed -n "s/.*session $2: closed after \([0-9]*\) calls.*/\1/p" "$1" | tail -1; }
a_calls=$(closed_calls "$work/a.log" "$session")
b_calls=$(closed_calls "$work/b.log" "$b_session")
[ -n "$a_calls" ] && [ -n "$b_calls" ] || fail "no close lines ($a_calls, $b_calls)"
for _ in $(seq 100); do
  "$bin/rgpu" usage --json >"$work/usage.json" || fail "usage"
  [ "$(json 'len(d)' <"$work/usage.json")" = 2 ] && break
  sleep 0.1
done
python3 - "$work/usage.json" "$session" "$a_calls" "$b_session" "$b_calls" <<'PY' ||
import json, sys
usage = json.load(open(sys.argv[1]))
want = {("acme", "host-a", int(sys.argv[2])): int(sys.argv[3]),
        ("bolt", "host-b", int(sys.argv[4])): int(sys.argv[5])}
got = {(u["provider"], u["server"], u["session"]): u["calls"] for u in usage}
assert got == want, (got, want)
print("checkpoint_lease: billed %s" % got)
PY
  fail "usage is not each server's calls: $(cat "$work/usage.json")"
echo "checkpoint_lease: the lease followed its session through a checkpoint file; each provider billed for its part"
