#!/usr/bin/env bash
# A lease follows its session (docs/migration.md, "Metering"): a program placed by the registry on
# provider acme's server moves, while it runs, to provider bolt's server with `rgpu migrate`. The
# source has the registry hand the lease over, the target restores the session under it, the
# program finishes with the exact result, and the registry bills each server exactly the calls it
# served under the one lease (no record refused), paying each provider for its part. Stopped,
# the target drains the session back (--drain-to): the lease comes back with it, and the
# session's end there frees it. A move to a server registered nowhere is
# refused before anything is torn down: the lease could not follow.
#   migrate.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
registry="" a="" b="" loose="" client=""
trap 'kill -9 $client 2>/dev/null; kill $registry $a $b $loose 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "registry_migrate: $*"
  for f in "$work"/*.log "$work/out"; do echo "-- $f"; tail -25 "$f"; done
  exit 1
}
printf 'gpu 0.002 1 rgpu softgpu\n' >"$work/prices"
export RGPU_STATE_DIR=$work/state  # one operator key for the servers and rgpu migrate
source "$(dirname "$0")/lib.sh"
start_registry
open_accounts
start_server host-a "$work/a.url" "$work/a.log"
a=$launched a_url=$(cat "$work/a.url")

"$bin/rgpu" run --memory 256M -- "$programs/driver_migrate_loop" 4000 48 30 >"$work/out" 2>&1 &
client=$!
await_started "$work/out"
# The target belongs to another provider, and registers once the program runs on host-a; on
# SIGTERM it drains its sessions back to host-a.
pkey=$("$bin/rgpu" provider create bolt --json | json 'd["provider_key"]') || fail "provider create"
RGPU_SERVER_ARGS="--drain-to $a_url" start_server host-b "$work/b.url" "$work/b.log"
b=$launched b_url=$(cat "$work/b.url")
# And a server registered with no registry: the lease cannot follow the session there.
"$bin/rgpu-server" --listen tcp://127.0.0.1:0 --backend softgpu --port-file "$work/loose.url" \
  2>"$work/loose.log" &
loose=$!
for _ in $(seq 200); do [ -s "$work/loose.url" ] && break; sleep 0.05; done

session=$("$bin/rgpu" status --server "$a_url" --json | sed -n 's/.*"session": \([0-9]*\).*/\1/p')
[ -n "$session" ] || fail "no session on host-a"
if "$bin/rgpu" migrate --server "$a_url" --session "$session" --to "$(cat "$work/loose.url")" \
  >"$work/refused" 2>&1; then
  fail "a session under a lease moved to a server without the registry"
fi
grep -q "lease" "$work/refused" || fail "the refusal does not say why: $(cat "$work/refused")"
echo "registry_migrate: refused as expected: $(cat "$work/refused")"
"$bin/rgpu" migrate --server "$a_url" --session "$session" --to "$b_url" --json >"$work/move" 2>&1 ||
  fail "migration failed: $(cat "$work/move")"
echo "registry_migrate: moved: $(cat "$work/move")"
b_session=$(json 'd["session"]' <"$work/move")
# Stopped, host-b drains the session back to host-a: the lease comes back too.
moved_at=$(grep -c '^iteration' "$work/out")
for _ in $(seq 400); do [ "$(grep -c '^iteration' "$work/out")" -gt $((moved_at + 20)) ] && break; sleep 0.025; done
kill -TERM $b
wait $b
b=""
grep -q "moved 1 of 1 session(s) to $a_url" "$work/b.log" || fail "host-b did not drain its session to host-a"
wait $client || fail "the program exited $?"
grep -q "^result ok" "$work/out" || fail "no exact result"

# The session's end on host-b frees the lease: no GPU holds one.
for _ in $(seq 300); do
  [ "$("$bin/rgpu" gpus --json | json 'sum(g["leases"] for g in d)')" = 0 ] && break
  sleep 0.1
done
[ "$("$bin/rgpu" gpus --json | json 'sum(g["leases"] for g in d)')" = 0 ] ||
  fail "the lease was not freed: $("$bin/rgpu" gpus --json)"
grep -h "refused usage record\|did not take usage record" "$work/a.log" "$work/b.log" &&
  fail "the registry refused records"
# Each server's part is billed to its provider, exactly the calls it served: host-a before and
# after, host-b between.
closed_calls() { sed -n "s/.*session $2: closed after \([0-9]*\) calls.*/\1/p" "$1" | tail -1; }
back=$(sed -n 's/.*session \([0-9]*\): restored; waiting for its client.*/\1/p' "$work/a.log" | tail -1)
a_calls=$(closed_calls "$work/a.log" "$session")
b_calls=$(closed_calls "$work/b.log" "$b_session")
back_calls=$(closed_calls "$work/a.log" "$back")
[ -n "$a_calls" ] && [ -n "$b_calls" ] && [ -n "$back_calls" ] ||
  fail "no close lines ($a_calls, $b_calls, $back_calls)"
# A server reports a session's last usage when it ends, on its own thread: the registry may
# take it a moment after the close line is written, so the check is repeated for a while.
billed() {
  "$bin/rgpu" usage --json >"$work/usage.json" || return 1
  python3 - "$work/usage.json" "$session" "$a_calls" "$b_session" "$b_calls" "$back" "$back_calls" <<'PY'
import json, sys
usage = json.load(open(sys.argv[1]))
want = {("acme", "host-a", int(sys.argv[2])): int(sys.argv[3]),
        ("bolt", "host-b", int(sys.argv[4])): int(sys.argv[5]),
        ("acme", "host-a", int(sys.argv[6])): int(sys.argv[7])}
got = {(u["provider"], u["server"], u["session"]): u["calls"] for u in usage}
assert got == want, (got, want)
print("registry_migrate: billed %s" % got)
PY
}
for _ in $(seq 50); do billed 2>/dev/null && break; sleep 0.2; done
billed || fail "usage is not each server's calls: $(cat "$work/usage.json")"
"$bin/rgpu" bill --tenant alice --json >"$work/bill.json" || fail "bill"
python3 - "$work/bill.json" <<'PY' || fail "the bill does not pay both providers"
import json, sys
bill = json.load(open(sys.argv[1]))
paid = {l["provider"] for l in bill["lines"] if l["session"] and l["total"] > 0}
assert paid == {"acme", "bolt"}, bill["lines"]
PY
echo "registry_migrate: the lease followed its session there and back (--drain-to); each provider billed for its part"
