#!/usr/bin/env bash
# A lease moves whole (docs/migration.md, "Moved by the registry"): two programs under one lease
# (`rgpu place`, as a batch job's tasks share one) run on provider acme's host-a. `rgpu migrate`
# or `rgpu checkpoint` of one of them alone is refused, saying why, and both go on; stopped,
# host-a drains both to provider bolt's host-b under one hand-over of the lease (--drain-to).
# Both finish with the exact result, no record is refused, and each is billed on both servers.
#   drain_lease_sessions.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
registry="" a="" b="" client="" client2=""
trap 'kill -9 $client $client2 2>/dev/null; kill $registry $a $b 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "drain_lease_sessions: $*"
  for f in "$work"/*.log "$work"/out*; do echo "-- $f"; tail -25 "$f"; done
  exit 1
}
printf 'gpu 0.002 1 rgpu softgpu\n' >"$work/prices"
export RGPU_STATE_DIR=$work/state  # one operator key for the servers and rgpu migrate
source "$(dirname "$0")/lib.sh"
start_registry
open_accounts
# host-b listens later on a port chosen now, so that host-a can be told to drain there.
b_port=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
b_url=tcp://127.0.0.1:$b_port
RGPU_SERVER_ARGS="--drain-to $b_url" start_server host-a "$work/a.url" "$work/a.log"
a=$launched a_url=$(cat "$work/a.url")
for _ in $(seq 300); do "$bin/rgpu" gpus | grep -q "available" && break; sleep 0.1; done

take_placement 512M
"$bin/rgpu" run -- "$programs/driver_migrate_loop" 4000 48 30 >"$work/out" 2>&1 &
client=$!
"$bin/rgpu" run -- "$programs/driver_migrate_loop" 4000 48 30 >"$work/out2" 2>&1 &
client2=$!
await_started "$work/out" "$work/out2"
pkey=$("$bin/rgpu" provider create bolt --json | json 'd["provider_key"]') || fail "provider create"
"$bin/rgpu-server" --listen "$b_url" --backend softgpu --registry "$RGPU_REGISTRY" \
  --provider-key "$pkey" --name host-b --port-file "$work/b.url" 2>"$work/b.log" &
b=$!
for _ in $(seq 200); do [ -s "$work/b.url" ] && break; sleep 0.05; done
[ -s "$work/b.url" ] || fail "host-b did not start"
for _ in $(seq 300); do [ "$("$bin/rgpu" gpus --json | json 'len(d)')" = 2 ] && break; sleep 0.1; done

# One of the lease's two sessions alone: refused, and it goes on where it was.
session=$("$bin/rgpu" status --server "$a_url" --json | sed -n 's/.*"session": \([0-9]*\).*/\1/p' | head -1)
[ -n "$session" ] || fail "no session on host-a"
if "$bin/rgpu" migrate --server "$a_url" --session "$session" --to "$b_url" >"$work/refused" 2>&1; then
  fail "one session of a two-session lease moved alone"
fi
grep -q "moves whole" "$work/refused" || fail "the refusal does not say why: $(cat "$work/refused")"
echo "drain_lease_sessions: refused as expected: $(cat "$work/refused")"
# Nor into a checkpoint file alone (it would park there, its lease unable to follow it).
if "$bin/rgpu" checkpoint --server "$a_url" --session "$session" --file "$work/ckpt" >"$work/refused" 2>&1; then
  fail "one session of a two-session lease was checkpointed alone"
fi
grep -q "moves whole" "$work/refused" || fail "the checkpoint's refusal does not say why: $(cat "$work/refused")"
before=$(grep -c '^iteration' "$work/out")
for _ in $(seq 400); do [ "$(grep -c '^iteration' "$work/out")" -gt $((before + 20)) ] && break; sleep 0.025; done
[ "$(grep -c '^iteration' "$work/out")" -gt $((before + 20)) ] || fail "the program stopped after the refusal"

# Stopped, host-a drains both to host-b, together.
kill -TERM $a
wait $a
a=""
grep -q "moved 2 of 2 session(s) to $b_url" "$work/a.log" || fail "host-a did not drain both sessions"
[ "$(grep -c "restored; waiting for its client" "$work/b.log")" = 2 ] || fail "not both restored on host-b"
for pid in $client $client2; do wait $pid || fail "a program exited $?"; done
for out in "$work/out" "$work/out2"; do
  grep -q "^result ok" "$out" || fail "no exact result in $out"
  grep -q "CUDA_ERROR" "$out" && fail "a program saw an error"
done
"$bin/rgpu" lease release "$RGPU_LEASE" >/dev/null || fail "lease release"
for _ in $(seq 300); do
  [ "$("$bin/rgpu" gpus --json | json 'sum(g["leases"] for g in d)')" = 0 ] && break
  sleep 0.1
done
grep -h "refused usage record\|did not take usage record" "$work/a.log" "$work/b.log" &&
  fail "the registry refused records"
"$bin/rgpu" usage --json >"$work/usage.json" || fail "usage"
python3 - "$work/usage.json" <<'PY' || fail "usage is not each session's on both servers: $(cat "$work/usage.json")"
import json, sys
usage = json.load(open(sys.argv[1]))
for provider, server in (("acme", "host-a"), ("bolt", "host-b")):
    n = len({u["session"] for u in usage if u["provider"] == provider and u["server"] == server and u["calls"] > 0})
    assert n == 2, (server, n)
PY
echo "drain_lease_sessions: both sessions of the lease drained together; each billed on both servers"
