#!/usr/bin/env bash
# Capacity over time through the real daemons (issue 19): rgpu-registry, softgpu rgpu-servers
# that registered with it, and CUDA programs placed by `rgpu run --registry`.
#  1. A server lends 30 minutes a day (--available) in a time zone set so that its window closes
#     about 20 s after the test starts (TZ with a seconds offset), with --notice-s 3. A program
#     placed inside the window is told when it closes; at the close the server logs the notice,
#     the program goes on for the notice, then its calls fail with a CUDA error (not a crash) and
#     the server logs why. The GPU is then `closed`, and a placement is refused saying when the
#     window opens again.
#  2. On a server that always lends, the price list lets priority 5 preempt with 3 s notice: a
#     priority-0 program holds the whole GPU; a priority-5 request is queued, told that the
#     lower-priority work was given notice, and placed once it has run out; the preempted
#     program fails with a CUDA error after the notice, and the server logs why.
#  3. `rgpu reserve`, `rgpu reservation list|cancel` against the real registry: a reservation
#     goes to the GPU that lends then, is refused a placement before its start and to another
#     tenant's cancel, and is cancelled by its own; a start in the past is refused.
#   capacity.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
registry="" windowed="" always="" prog="" high=""
trap 'kill -9 $prog $high 2>/dev/null; kill $registry $windowed $always 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "capacity: $*"
  for l in registry windowed always; do [ -f "$work/$l.log" ] && { echo "-- $l log"; tail -25 "$work/$l.log"; }; done
  for o in prog high; do [ -f "$work/$o.out" ] && { echo "-- $o output"; cat "$work/$o.out"; }; done
  exit 1
}
printf 'gpu 0.002 1 rgpu softgpu\npriority 5 1\npriority_cap 4\npreemption 5 3\n' >"$work/prices"
source "$(dirname "$0")/lib.sh"
start_registry
open_accounts
bob=$("$bin/rgpu" tenant create bob --json | json 'd["api_key"]') || fail "tenant create bob"
state_of() { "$bin/rgpu" gpus --json | json "[g['state'] for g in d if g['server'] == '$1'][0]"; }
wait_state() {
  for _ in $(seq 300); do [ "$(state_of "$1")" = "$2" ] && return 0; sleep 0.1; done
  fail "$1 is not $2: $("$bin/rgpu" gpus)"
}
# Seconds since the epoch, with fractions.
now() { date +%s.%N; }

# ---- 1. A lendable window closes ----
read -r close offset window described <<<"$(closing_window 20)"
described=${described//_/ }  # the availability as the registry describes it
export TZ="TST-0:00:$(printf %02d "$offset")"
"$bin/rgpu-server" --listen tcp://127.0.0.1:0 --backend softgpu --registry "$RGPU_REGISTRY" \
  --provider-key "$pkey" --name lender --port-file "$work/windowed.url" --available "$window" \
  --notice-s 3 2>"$work/windowed.log" &
windowed=$!
unset TZ
for _ in $(seq 200); do [ -s "$work/windowed.url" ] && break; sleep 0.05; done
[ -s "$work/windowed.url" ] || fail "the windowed server did not start"
wait_state lender available
"$bin/rgpu" gpus | grep -qF "lendable $described" ||
  fail "rgpu gpus does not show the window: $("$bin/rgpu" gpus)"
RGPU_LOG=error "$bin/rgpu" run --share 100 --memory 512M -- "$programs/driver_hold_memory" \
  >"$work/prog.out" 2>&1 &
prog=$!
for _ in $(seq 300); do grep -q ready "$work/prog.out" && break; sleep 0.1; done
grep -q ready "$work/prog.out" || fail "driver_hold_memory did not start"
grep -q "is lendable until .*; a session still running then ends 3 s later" "$work/prog.out" ||
  fail "the placement did not say when the window closes"
[ "$(python3 -c "import time; print(int(time.time() < $close))")" = 1 ] || fail "too slow: the window closed first"
wait "$prog"
rc=$?
ended=$(now)
prog=""
python3 -c "import sys; sys.exit(0 if $ended >= $close + 3 - 0.3 else 1)" ||
  fail "the program ended at $ended, before the notice after the close at $close ran out"
python3 -c "import sys; sys.exit(0 if $ended <= $close + 3 + 5 else 1)" ||
  fail "the program ended at $ended, long after the notice after the close at $close"
[ "$rc" = 1 ] || fail "the program exited $rc, not 1 (a failed CUDA call)"
grep -q "failed: [0-9]* (CUDA_ERROR_" "$work/prog.out" || fail "no CUDA error in the program's output"
grep "registry: lease .* ends at " "$work/windowed.log" |
  grep -qF "the provider's lendable window ($described) closed at" || fail "the server did not log the notice"
grep -q "its notice ran out" "$work/windowed.log" || fail "the server did not log the notice's end"
grep -q "stopping its work: its lease .* ended" "$work/windowed.log" || fail "the session was not stopped"
wait_state lender closed
out=$("$bin/rgpu" run --wait 0 -- true 2>&1) && fail "placed on a closed GPU"
echo "$out" | grep -q "lender/0 is outside its lendable window until" || fail "refusal without the window: $out"
echo "capacity: the window closed at $close; the program ended $(python3 -c "print('%.1f' % ($ended - $close))") s later with $(grep -o 'CUDA_ERROR_[A-Z_]*' "$work/prog.out" | head -1)"

# ---- 2. Preemption ----
start_server always "$work/always.url" "$work/always.log"
always=$launched
wait_state always available
RGPU_LOG=error "$bin/rgpu" run --share 100 --memory 512M --priority 0 -- "$programs/driver_hold_memory" \
  >"$work/prog.out" 2>&1 &
prog=$!
for _ in $(seq 300); do grep -q ready "$work/prog.out" && break; sleep 0.1; done
grep -q ready "$work/prog.out" || fail "driver_hold_memory did not start"
asked=$(now)
RGPU_API_KEY=$bob "$bin/rgpu" run --share 100 --memory 512M --priority 5 --wait 60 -- \
  sh -c 'echo "placed on $RGPU_SERVER"' >"$work/high.out" 2>&1 &
high=$!
for _ in $(seq 100); do grep -q "was given notice" "$work/high.out" && break; sleep 0.1; done
grep -q "no GPU free yet: queue position 1 of 1; lower-priority work on always/0 was given notice and ends at" \
  "$work/high.out" || fail "the waiting request was not told of the preemption"
"$bin/rgpu" lease list | grep -q "under notice: preempted by a priority-5 request of tenant bob (notice 3 s)" ||
  fail "rgpu lease list does not show the notice: $("$bin/rgpu" lease list)"
wait "$prog"
rc=$?
ended=$(now)
prog=""
python3 -c "import sys; sys.exit(0 if $ended >= $asked + 3 - 0.3 else 1)" ||
  fail "the preempted program ended before its notice ran out ($asked -> $ended)"
[ "$rc" = 1 ] || fail "the preempted program exited $rc, not 1 (a failed CUDA call)"
grep -q "failed: [0-9]* (CUDA_ERROR_" "$work/prog.out" || fail "no CUDA error in the preempted program's output"
wait "$high" || fail "the priority-5 request was not placed"
high=""
grep -q "placed on $(cat "$work/always.url")" "$work/high.out" || fail "the priority-5 request ran elsewhere"
grep -q "registry: lease .* ends at .*: preempted by a priority-5 request of tenant bob (notice 3 s)" \
  "$work/always.log" || fail "the server did not log the preemption"
grep -q "stopping its work: its lease .* ended" "$work/always.log" || fail "the preempted session was not stopped"
echo "capacity: preempted after $(python3 -c "print('%.1f' % ($ended - $asked))") s with $(grep -o 'CUDA_ERROR_[A-Z_]*' "$work/prog.out" | head -1); the priority-5 request was placed"

# ---- 3. Reservations through the CLI ----
start=$(($(date +%s) + 7200))
out=$("$bin/rgpu" reserve --start "$start" --duration 1h --share 25 --memory 256M --json 2>&1) ||
  fail "rgpu reserve: $out"
id=$(echo "$out" | json 'd["reservation"]')
[ "$(echo "$out" | json 'd["state"]')" = pending ] || fail "a new reservation is not pending: $out"
[ "$(echo "$out" | json 'd["gpus"]')" = "['always/0']" ] || fail "reserved elsewhere than the lending GPU: $out"
"$bin/rgpu" reservation list | grep -q "^$id .* pending" ||
  fail "rgpu reservation list: $("$bin/rgpu" reservation list)"
out=$("$bin/rgpu" run --reservation "$id" --wait 0 -- true 2>&1) && fail "placed under a reservation before its start"
echo "$out" | grep -q "reservation $id starts at" || fail "placement before the start: $out"
out=$(RGPU_API_KEY=$bob "$bin/rgpu" reservation cancel "$id" 2>&1) && fail "bob cancelled alice's reservation"
echo "$out" | grep -q "no reservation $id of tenant bob" || fail "bob's cancel: $out"
"$bin/rgpu" reservation cancel "$id" >/dev/null || fail "alice could not cancel her reservation"
[ "$("$bin/rgpu" reservation list --json | json "[r['state'] for r in d if r['reservation'] == '$id'][0]")" = cancelled ] ||
  fail "the reservation is not cancelled"
out=$("$bin/rgpu" reserve --start "$(($(date +%s) - 100))" --duration 1h 2>&1) && fail "a reservation in the past"
echo "$out" | grep -q "from now to 90 days ahead" || fail "a reservation in the past: $out"
"$bin/rgpu" reserve --start soon --duration 1h >/dev/null 2>&1
[ $? = 2 ] || fail "a start that is no time was not refused as bad input"
echo "capacity: reserved, listed, refused before its start and to another tenant, cancelled"
echo "capacity: OK"
