#!/usr/bin/env bash
# The GPUs' sensors through rgpu's NVML face: a server reads the host's NVML (--host-nvml) and a
# tenant's `rgpu smi` shows exactly those readings for the devices NVML knows (matched by UUID),
# and none (NOT_SUPPORTED: null in the JSON) for the others or where a reading is missing; without
# an NVML every reading is absent. The host NVML here is tests/e2e/fake_host_nvml.cc (no GPU
# host), which names one of the server's two software GPUs.
#   host_nvml.sh BIN_DIR FAKE_NVML_LIBRARY
set -uo pipefail
bin=$1 fake=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "host_nvml: $*"; cat "$work/server.log"; exit 1; }
# The same device addresses, so the same UUIDs, in every server started here.
export RGPU_SOFTGPU_DEVICES=2 RGPU_SOFTGPU_ADDRESS_BASE=0x440000000000

# No NVML on this host: no readings at all.
start_server "$work/server.log"
"$bin/rgpu" smi --server "$url" --json >"$work/none.json" || fail "rgpu smi without NVML"
kill $server; wait $server
grep -q "no sensor readings" "$work/server.log" || fail "the server did not say why it has none"
uuid1=$(python3 - "$work/none.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["driver_version"] is None, s
for g in s["gpus"]:
    for k in ("temperature_c", "power_mw", "power_limit_mw", "fan_percent", "performance_state"):
        assert g[k] is None, (k, g)
print(s["gpus"][1]["uuid"])
PY
) || fail "readings without an NVML: $(cat "$work/none.json")"

# The host's NVML knows device 1 only.
FAKE_NVML_UUIDS=$uuid1 start_server "$work/server.log" --host-nvml "$fake"
"$bin/rgpu" smi --server "$url" --json >"$work/some.json" || fail "rgpu smi with NVML"
"$bin/rgpu" smi --server "$url" >"$work/table" || fail "rgpu smi's table"
python3 - "$work/some.json" <<'PY' || fail "readings: $(cat "$work/some.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["driver_version"] == "570.00.fake", s
g0, g1 = s["gpus"]
for k in ("temperature_c", "power_mw", "power_limit_mw", "fan_percent", "performance_state"):
    assert g0[k] is None, (k, g0)
assert g1["temperature_c"] == 40 and g1["power_mw"] == 100000, g1
assert g1["power_limit_mw"] == 700000 and g1["performance_state"] == 2, g1
assert g1["fan_percent"] is None, g1  # the host NVML has no fan reading
PY
grep -q "Driver Version: 570.00.fake" "$work/table" && grep -q "40C" "$work/table" &&
  grep -q "100W/700W" "$work/table" || fail "rgpu smi's table: $(cat "$work/table")"
grep -q "NVML: 1 of 2 device(s) have sensor readings" "$work/server.log" ||
  fail "the server did not say which devices have readings"
echo "host_nvml: OK"
