#!/usr/bin/env bash
# NVML through rgpu's face: the NVML test program (every answer checked against CUDA's) on a
# server of two software GPUs and, as a tenant with a quota, on a metered one (--fair-share);
# `rgpu smi` (table and JSON) answering the same; one session for a program's NVML and CUDA
# calls; and a tenant never shown another's processes or memory (bob holds 256 MiB while alice
# asks).
#   nvml.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
holder=
trap 'kill $server $holder 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "nvml: $*"; cat "$work/server.log"; exit 1; }

RGPU_SOFTGPU_DEVICES=2 start_server "$work/server.log"
"$bin/rgpu" run --server "$url" -- "$programs/driver_nvml_check" || fail "nvml_check, 2 devices"
# NVML and CUDA share one runtime in the program: one session, not one per face.
[ "$(grep -c ' connected' "$work/server.log")" -eq 1 ] || fail "nvml_check opened several sessions"
"$bin/rgpu" smi --server "$url" >"$work/table" || fail "rgpu smi"
grep -q "rgpu softgpu" "$work/table" && grep -Eq "[0-9A-F]{8}:11:00.0" "$work/table" &&
  grep -q "No running processes found" "$work/table" || fail "rgpu smi's table: $(cat "$work/table")"
"$bin/rgpu" smi --server "$url" --json >"$work/smi.json" || fail "rgpu smi --json"
python3 - "$work/smi.json" <<'PY' || fail "rgpu smi --json: $(cat "$work/smi.json")"
import json, sys
s = json.load(open(sys.argv[1]))
gpus = s["gpus"]
assert len(gpus) == 2, gpus
for i, g in enumerate(gpus):
    assert g["index"] == i and g["name"] == "rgpu softgpu", g
    assert g["uuid"].startswith("GPU-") and len(g["uuid"]) == 40, g
    assert g["memory"]["total"] == 4096 << 20 and g["memory"]["used"] == 0, g
    assert g["utilization"] is None and g["mig"] is False and g["processes"] == [], g
assert gpus[0]["uuid"] != gpus[1]["uuid"]
PY
kill $server; wait $server

cat >"$work/tokens" <<TOKENS
# token      tenant  quota  weight
tok-alice    alice   512M   1
tok-bob      bob     512M   1
TOKENS
start_server "$work/server.log" --tokens "$work/tokens" --fair-share
"$bin/rgpu" run --server "$url" --token tok-alice -- "$programs/driver_nvml_check" metered ||
  fail "nvml_check as a tenant, metered"
"$bin/rgpu" run --server "$url" --token tok-bob -- "$programs/driver_hold_memory" >"$work/holder" 2>&1 &
holder=$!
wait_for_text "$work/holder" ready || fail "bob's program did not start: $(cat "$work/holder")"
"$bin/rgpu" smi --server "$url" --token tok-alice --json >"$work/alice.json" || fail "alice's smi"
"$bin/rgpu" smi --server "$url" --token tok-bob --json >"$work/bob.json" || fail "bob's smi"
python3 - "$work/alice.json" "$work/bob.json" "$holder" <<'PY' || fail "tenants' views"
import json, sys
alice, bob = (json.load(open(p))["gpus"][0] for p in sys.argv[1:3])
holder = int(sys.argv[3])
# Quota as total; alice holds nothing and sees no process; bob sees his own 256 MiB and himself.
assert alice["memory"] == {"total": 512 << 20, "used": 0, "free": 512 << 20}, alice
assert alice["processes"] == [], alice
assert bob["memory"]["total"] == 512 << 20 and bob["memory"]["used"] >= 256 << 20, bob
pids = [p["pid"] for p in bob["processes"]]
assert len(pids) == 1 and bob["processes"][0]["used_memory"] >= 256 << 20, bob
assert alice["utilization"] is not None, alice
PY
echo "nvml: NVML's answers match CUDA's; rgpu smi; tenants see only their own"
