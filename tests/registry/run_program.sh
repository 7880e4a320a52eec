#!/usr/bin/env bash
# End to end: a CUDA program run through `rgpu run --registry` on a softgpu rgpu-server that
# registered with the registry. The registry places it and signs its token, the server verifies
# the token offline, the program runs; the server's metering reaches the registry, the session's
# end frees its lease, and the bill prices what was measured. The registry is SIGKILLed in the
# middle of a streaming session and counts exactly the server's calls. Then: a full GPU answers with a
# queue position, a waiting request is placed once a lease expires, the time the unused lease
# held the GPU is billed, and revocation stops placements.
#   run_program.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
registry="" server=""
hold=""
trap 'kill -9 $hold 2>/dev/null; kill $registry $server 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "run_program: $*"; echo "-- registry log"; tail -20 "$work/registry.log"; echo "-- server log"; tail -20 "$work/server.log"; exit 1; }
printf 'gpu 0.002 1 rgpu softgpu\nburst_premium_per_gb 0.5\n' >"$work/prices"
source "$(dirname "$0")/lib.sh"
start_registry
open_accounts
start_server host1 "$work/url" "$work/server.log"
server=$launched

"$bin/rgpu" run --memory 256M -- "$programs/driver_vector_add" || fail "program through the registry"
# Ending a lease that is not the tenant's (or no longer active): refused, saying so.
out=$("$bin/rgpu" lease release lease-0000 2>&1) && fail "a lease that does not exist was released"
echo "$out" | grep -q "no active lease lease-0000 of tenant alice" || fail "lease release: $out"
# The session's end reaches the registry and frees its lease.
for _ in $(seq 300); do
  [ "$("$bin/rgpu" gpus --json | json 'd[0]["leases"]')" = 0 ] && break
  sleep 0.1
done
[ "$("$bin/rgpu" gpus --json | json 'd[0]["leases"]')" = 0 ] || fail "lease not freed at session end"
"$bin/rgpu" usage --json >"$work/usage.json"
calls=$(json 'sum(u["calls"] for u in d)' <"$work/usage.json")
moved=$(json 'sum(u["bytes_in"] + u["bytes_out"] for u in d)' <"$work/usage.json")
[ "$calls" -gt 0 ] && [ "$moved" -gt 0 ] || fail "no usage metered: $(cat "$work/usage.json")"
# Calls are metered by kind too, and the kinds add up to the calls.
by_kind=$(json 'sum(sum(u["calls_by_kind"].values()) for u in d)' <"$work/usage.json")
launches=$(json 'sum(n for u in d for k, n in u["calls_by_kind"].items() if k.startswith("LaunchKernel"))' \
  <"$work/usage.json")
[ "$by_kind" = "$calls" ] && [ "$launches" -gt 0 ] ||
  fail "calls by kind ($by_kind, $launches launches) do not add up to $calls calls"
"$bin/rgpu" bill --tenant alice --json >"$work/bill.json" || fail "bill"
python3 - "$work" <<'PY' || fail "bill does not price the usage"
import calendar, json, sys, time
w = sys.argv[1]
usage = json.load(open(w + "/usage.json"))
bill = json.load(open(w + "/bill.json"))
# Without --from the bill covers the current (monthly, by default) billing period.
now = time.gmtime()
assert bill["period"] == "monthly", bill["period"]
assert bill["from_unix"] == calendar.timegm((now.tm_year, now.tm_mon, 1, 0, 0, 0)), bill["from_unix"]
gpu_ms = sum(u["gpu_ms"] for u in usage)
assert gpu_ms > 0, usage
base = gpu_ms * 0.002
assert abs(bill["base_fee"] - base) < 1e-9 * max(1, base), (bill["base_fee"], base)
assert abs(bill["total"] - (bill["base_fee"] + bill["burst_premium"] + bill["priority_surcharge"] +
                           bill["hold_fee"])) < 1e-9
# The lease's hold (placement to session start), if the clock saw one, is a line of its own.
holds = [l for l in bill["lines"] if l["lease"]]
assert len(holds) <= 1 and all(l["held_ms"] > 0 and l["session"] == 0 for l in holds), holds
print("run_program: %d session(s), %.0f GPU ms, billed %.6f %s" % (len(usage), gpu_ms, bill["total"], bill["currency"]))
PY
"$bin/rgpu" bill --tenant alice >"$work/bill.txt" || fail "bill table"
grep -q "^TOTAL" "$work/bill.txt" && grep -q "the current monthly billing period" "$work/bill.txt" ||
  fail "bill table: $(cat "$work/bill.txt")"

# The registry is SIGKILLed and restarted while a session streams data: the server's agent keeps
# its records until the restarted registry acknowledges them, the lease survives the restart, the
# session's end frees it, and the registry counts exactly the calls the server counted.
"$bin/rgpu" run --memory 512M -- "$programs/driver_hold_memory" >"$work/hold.out" 2>&1 &
hold=$!
for _ in $(seq 300); do grep -q ready "$work/hold.out" && break; sleep 0.1; done
grep -q ready "$work/hold.out" || fail "driver_hold_memory did not start: $(cat "$work/hold.out")"
sleep 1.5
kill -9 "$registry"
wait "$registry" 2>/dev/null
sleep 1
"$bin/rgpu-registry" --listen "$RGPU_REGISTRY" --db "$work/registry.db" --signing-key "$work/key.pem" \
  --prices "$work/prices" --heartbeat-ms 500 2>>"$work/registry.log" &
registry=$!
for _ in $(seq 300); do
  "$bin/rgpu" gpus --json 2>/dev/null | grep -q '"state": "available"' && break
  sleep 0.1
done
sleep 1.5
kill -9 "$hold"
wait "$hold" 2>/dev/null
for _ in $(seq 300); do
  [ "$("$bin/rgpu" gpus --json | json 'd[0]["leases"]')" = 0 ] && break
  sleep 0.1
done
[ "$("$bin/rgpu" gpus --json | json 'd[0]["leases"]')" = 0 ] || fail "lease not freed after the restart"
session=$(grep "driver_hold_memory" "$work/server.log" | sed -n 's/.*session \([0-9]*\):.*/\1/p' | tail -1)
server_calls=$(sed -n "s/.*session $session: closed after \([0-9]*\) calls.*/\1/p" "$work/server.log")
[ -n "$server_calls" ] || fail "no close line for session $session"
registry_calls=$("$bin/rgpu" usage --json | json "sum(u['calls'] for u in d if u['session'] == $session)")
[ "$server_calls" = "$registry_calls" ] ||
  fail "session $session: server counted $server_calls calls, registry $registry_calls"
echo "run_program: registry SIGKILLed mid-session; $server_calls calls counted once on both sides"

# A lease that takes the whole GPU and is never used (the program does not touch the GPU) holds
# it until it expires; meanwhile a request that cannot wait gets its queue position, and one
# that waits is placed when the lease expires.
"$bin/rgpu" run --share 100 --ttl 15 -- true || fail "whole-GPU placement"
out=$("$bin/rgpu" run --share 50 --wait 0 -- true 2>&1) && fail "placed on a full GPU"
echo "$out" | grep -q "no GPU free: queue position 1 of 1" || fail "expected a queue position: $out"
out=$("$bin/rgpu" run --share 50 --wait 120 -- sh -c 'echo "placed on $RGPU_SERVER"' 2>&1) ||
  fail "waiting request not placed: $out"
echo "$out" | grep -q "queue position 1 of 1" || fail "no queue position while waiting: $out"
echo "$out" | grep -q "placed on $(cat "$work/url")" || fail "not run against the server: $out"
# The whole-GPU lease was never used: its 15 s hold is billed (hold_fraction 1: 15,000 ms x 0.002).
"$bin/rgpu" bill --tenant alice --json >"$work/bill2.json" || fail "bill"
python3 - "$work/bill2.json" <<'PY' || fail "the unused lease's hold is not billed"
import json, sys
bill = json.load(open(sys.argv[1]))
held = [l for l in bill["lines"] if l["lease"] and l["held_ms"] == 15000]
assert len(held) == 1, bill["lines"]
assert abs(held[0]["hold_fee"] - 30.0) < 1e-9 and abs(held[0]["total"] - 30.0) < 1e-9, held
print("run_program: the unused lease's 15 s hold billed %.2f" % held[0]["hold_fee"])
PY

# Revoked: no new placements.
"$bin/rgpu" provider revoke acme >/dev/null || fail "revoke"
out=$("$bin/rgpu" run --wait 0 -- true 2>&1) && fail "placed on a revoked provider's GPU"
echo "$out" | grep -q "no GPU free" || fail "expected a refusal: $out"
echo "run_program: placed, verified, metered, billed; queue, expiry and revocation behave"
