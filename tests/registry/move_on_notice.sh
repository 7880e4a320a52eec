#!/usr/bin/env bash
# The registry moves what a closing window would end (docs/migration.md, "Moved by the
# registry"): a program placed on a server whose lendable window closes 20 s later (notice 15 s)
# is moved, when the window closes, to another provider's server that always lends: the registry
# hands its lease over there and tells the closing server in its heartbeat; that server moves the
# session at its next waited call. The program finishes long after the notice would have ended
# it, with the exact result and no CUDA error, and each server's part is billed to its provider
# under the one lease. With SESSIONS 2, two programs share one lease (`rgpu place`, as a batch
# job's tasks do) and move together: both finish exactly and no record of either is refused.
# RGPU_SERVER_ARGS: more options for the servers (--session-processes on); program_mode=kernels:
# the programs never ask for their module variable's address (servers without fixed addresses).
#   move_on_notice.sh BIN_DIR PROGRAMS_DIR [SESSIONS]
set -uo pipefail
bin=$1 programs=$2 sessions=${3:-1}
work=$(mktemp -d)
registry="" lender="" always="" client="" client2=""
trap 'kill -9 $client $client2 2>/dev/null; kill $registry $lender $always 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "move_on_notice: $*"
  for f in "$work"/*.log "$work/out"; do echo "-- $f"; tail -25 "$f"; done
  exit 1
}
printf 'gpu 0.002 1 rgpu softgpu\n' >"$work/prices"
source "$(dirname "$0")/lib.sh"
start_registry
open_accounts
read -r close offset window _ <<<"$(closing_window 20)"
TZ="TST-0:00:$(printf %02d "$offset")" "$bin/rgpu-server" --listen tcp://127.0.0.1:0 \
  --backend softgpu --registry "$RGPU_REGISTRY" --provider-key "$pkey" --name lender \
  --port-file "$work/lender.url" --available "$window" --notice-s 15 ${RGPU_SERVER_ARGS:-} \
  2>"$work/lender.log" &
lender=$!
for _ in $(seq 200); do [ -s "$work/lender.url" ] && break; sleep 0.05; done
[ -s "$work/lender.url" ] || fail "the windowed server did not start"
for _ in $(seq 300); do "$bin/rgpu" gpus | grep -q "available" && break; sleep 0.1; done

# About 40 s of work: it outlives the window's close (20 s) and its notice (15 s more).
if [ "$sessions" = 2 ]; then
  # One lease, two programs: the placement a batch job's prolog takes, then its tasks.
  take_placement 512M
  "$bin/rgpu" run -- "$programs/driver_migrate_loop" 8000 48 50 ${program_mode:-} >"$work/out2" 2>&1 &
  client2=$!
  "$bin/rgpu" run -- "$programs/driver_migrate_loop" 8000 48 50 ${program_mode:-} >"$work/out" 2>&1 &
else
  "$bin/rgpu" run --memory 256M -- "$programs/driver_migrate_loop" 8000 48 50 ${program_mode:-} >"$work/out" 2>&1 &
fi
client=$!
await_started "$work/out" ${client2:+"$work/out2"}
pkey=$("$bin/rgpu" provider create bolt --json | json 'd["provider_key"]') || fail "provider create"
start_server always "$work/always.url" "$work/always.log"
always=$launched
[ "$(python3 -c "import time; print(int(time.time() < $close))")" = 1 ] || fail "too slow: the window closed first"

for pid in $client $client2; do
  wait $pid || fail "a program exited $? ($(python3 -c "import time; print('%.1f' % (time.time() - $close))") s after the close)"
done
ended=$(date +%s.%N)
for out in "$work/out" ${client2:+"$work/out2"}; do
  grep -q "^result ok" "$out" || fail "no exact result in $out"
  grep -q "CUDA_ERROR" "$out" && fail "a program saw an error"
done
python3 -c "import sys; sys.exit(0 if $ended > $close + 15 else 1)" ||
  fail "the program ended before the notice would have ended it; nothing was tested"
grep -q "is to move to $(cat "$work/always.url") before its notice runs out" "$work/lender.log" ||
  fail "the registry did not ask the lender to move the session"
grep -q "moving to .*, as the registry asks" "$work/lender.log" || fail "the lender did not move it"
[ "$(grep -c "restored; waiting for its client" "$work/always.log")" = "$sessions" ] ||
  fail "not $sessions session(s) restored"
[ -n "$client2" ] && { grep -q "2 of its 2 session(s) moved" "$work/lender.log" || fail "the lease's sessions did not move together"; }
# A lease taken with `rgpu place` lasts until released.
[ -n "$client2" ] && { "$bin/rgpu" lease release "$RGPU_LEASE" >/dev/null || fail "lease release"; }

for _ in $(seq 300); do
  [ "$("$bin/rgpu" gpus --json | json 'sum(g["leases"] for g in d)')" = 0 ] && break
  sleep 0.1
done
[ "$("$bin/rgpu" gpus --json | json 'sum(g["leases"] for g in d)')" = 0 ] || fail "the lease was not freed"
grep -h "refused usage record" "$work/lender.log" "$work/always.log" && fail "the registry refused records"
"$bin/rgpu" usage --json >"$work/usage.json" || fail "usage"
python3 - "$work/usage.json" "$sessions" <<'PY' || fail "usage is not split between the servers: $(cat "$work/usage.json")"
import json, sys
usage = json.load(open(sys.argv[1]))
servers = {(u["provider"], u["server"]) for u in usage if u["calls"] > 0}
assert servers == {("acme", "lender"), ("bolt", "always")}, servers
# Each program's session was billed on each server.
for server in ("lender", "always"):
    n = len({u["session"] for u in usage if u["server"] == server and u["calls"] > 0})
    assert n == int(sys.argv[2]), (server, n)
PY
echo "move_on_notice: the window closed at $close; $sessions program(s) moved and ended $(python3 -c "print('%.1f' % ($ended - $close))") s later with the exact result"
