#!/usr/bin/env bash
# `rgpu run --registry --gpus N`: N placements on N distinct GPUs, here of two softgpu servers that
# registered with the registry (one GPU each), given to one program as devices 0..N-1
# (driver_servers check 01: work on each, copies both ways between the servers); each placement's
# session is metered and billed; --gpus 3 on two GPUs is refused at once and gives back what it
# had taken; --gpus without --registry is refused.
#   gpus.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
registry="" a="" b=""
trap 'kill $registry $a $b 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "gpus: $*"; for l in registry a b; do echo "-- $l log"; tail -20 "$work/$l.log"; done; exit 1; }
printf 'gpu 0.002 1 rgpu softgpu\n' >"$work/prices"
source "$(dirname "$0")/lib.sh"
start_registry
open_accounts
for host in a b; do
  start_server "host-$host" "$work/$host.url" "$work/$host.log"
  eval "$host=$launched"
done
# Both servers' GPUs placeable (their URLs proven).
for _ in $(seq 300); do
  [ "$("$bin/rgpu" gpus --json | json 'sum(1 for g in d if g["state"] == "available")')" = 2 ] && break
  sleep 0.1
done

"$bin/rgpu" run --memory 256M --gpus 2 -- "$programs/driver_servers" check 01 >"$work/out" 2>&1 ||
  { cat "$work/out"; fail "a program on two placed GPUs"; }
cat "$work/out"
# Both leases end with their sessions; each session is metered, on its own GPU.
for _ in $(seq 300); do
  [ "$("$bin/rgpu" gpus --json | json 'sum(g["leases"] for g in d)')" = 0 ] && break
  sleep 0.1
done
[ "$("$bin/rgpu" gpus --json | json 'sum(g["leases"] for g in d)')" = 0 ] || fail "leases not freed"
"$bin/rgpu" usage --json >"$work/usage.json"
python3 - "$work/usage.json" <<'PY' || fail "usage: $(cat "$work/usage.json")"
import json, sys
usage = json.load(open(sys.argv[1]))
assert len(usage) == 2, usage
assert len({(u["server"], u["gpu_index"]) for u in usage}) == 2, usage
assert all(u["calls"] > 0 and u["gpu_ms"] > 0 for u in usage), usage
PY
# Three GPUs of two: refused at once, and the two placements taken first are given back.
if "$bin/rgpu" run --memory 256M --gpus 3 --wait 30 -- "$programs/driver_servers" uuids \
  >"$work/out" 2>&1; then
  fail "--gpus 3 on two GPUs ran"
fi
grep -q "no registered GPU" "$work/out" || { cat "$work/out"; fail "--gpus 3: no reason"; }
[ "$("$bin/rgpu" gpus --json | json 'sum(g["leases"] for g in d)')" = 0 ] ||
  fail "--gpus 3 kept the leases it had taken"
"$bin/rgpu" run --server "$(cat "$work/a.url")" --gpus 2 -- true 2>"$work/out" &&
  fail "--gpus without --registry was accepted"
grep -q "needs --registry" "$work/out" || fail "--gpus without --registry: $(cat "$work/out")"
echo "gpus: OK"
