#!/usr/bin/env bash
# Durability: servers (meter_load, through the real RegistryAgent) stream metering while the
# registry is killed with SIGKILL and restarted, three times. Afterwards every record the
# registry acknowledged is stored exactly once, usage equals what the servers measured, and each
# tenant's bill equals the servers' GPU time at the listed price.
#   durability.sh BIN_DIR sqlite|postgres     (postgres: under with_postgres.sh)
set -uo pipefail
bin=$1 engine=$2
work=$(mktemp -d)
registry="" load=""
trap 'kill -9 $registry $load 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "durability: $*"; tail -20 "$work"/registry.log; exit 1; }
store=(--db "$work/registry.db")
if [ "$engine" = postgres ]; then
  [ -n "${RGPU_TEST_POSTGRES:-}" ] || fail "RGPU_TEST_POSTGRES not set (run under with_postgres.sh)"
  store=(--postgres "$RGPU_TEST_POSTGRES")
fi
# Holds (placement to first record) are left out of the bill here: it compares the bill with
# the GPU time the servers measured.
printf 'default_gpu 0.001 1\nhold_fraction 0\n' >"$work/prices"
start_registry() {  # LISTEN
  "$bin/rgpu-registry" --listen "$1" "${store[@]}" --signing-key "$work/key.pem" \
    --prices "$work/prices" --port-file "$work/port" --heartbeat-ms 200 2>>"$work/registry.log" &
  registry=$!
  for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
  [ -s "$work/port" ] || fail "registry did not start"
}
start_registry 127.0.0.1:0
addr=$(cat "$work/port")
export RGPU_REGISTRY=$addr
# The operator's key: the file the registry created beside its database (SQLite) or its signing
# key (PostgreSQL) at first start.
if [ "$engine" = postgres ]; then
  export RGPU_ADMIN_KEY_FILE=$work/key.pem.admin-key
else
  export RGPU_ADMIN_KEY_FILE=$work/registry.db.admin-key
fi
json_key() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
key=$("$bin/rgpu" provider create loadco --json | json_key provider_key) || fail "provider create"
t0=$("$bin/rgpu" tenant create tenant-0 --json | json_key api_key) &&
  t1=$("$bin/rgpu" tenant create tenant-1 --json | json_key api_key) || fail "tenant create"
"$bin/meter_load" --registry "$addr" --provider-key "$key" --api-key "tenant-0=$t0" \
  --api-key "tenant-1=$t1" --servers 4 --sessions 3 --seconds 8 \
  --out "$work/measured.json" 2>"$work/load.log" &
load=$!
for round in 1 2 3; do
  sleep 1.5
  kill -9 "$registry"
  wait "$registry" 2>/dev/null
  echo "durability: registry killed (round $round)"
  sleep 0.5
  rm -f "$work/port"
  start_registry "$addr"
done
wait "$load" || { cat "$work/load.log"; fail "meter_load did not deliver everything"; }
"$bin/rgpu" usage --json >"$work/usage.json" || fail "rgpu usage"
"$bin/rgpu" bill --tenant tenant-0 --json >"$work/bill0.json" || fail "rgpu bill"
"$bin/rgpu" bill --tenant tenant-1 --json >"$work/bill1.json" || fail "rgpu bill"
python3 - "$work" <<'PY' || fail "registry and servers disagree"
import json, sys
w = sys.argv[1]
m = json.load(open(w + "/measured.json"))
usage = [u for u in json.load(open(w + "/usage.json")) if u["server"].startswith("load-")]
bills = [json.load(open(w + "/bill%d.json" % i)) for i in (0, 1)]
stored = {
    "records": sum(u["records"] for u in usage),
    "calls": sum(u["calls"] for u in usage),
    "bytes": sum(u["bytes_in"] + u["bytes_out"] for u in usage),
    "gpu_ms": sum(u["gpu_ms"] for u in usage),
}
print("servers measured:", m)
print("registry stored: ", stored)
ok = True
def check(what, a, b):
    global ok
    if a != b:
        print("MISMATCH %s: %s != %s" % (what, a, b)); ok = False
check("records acknowledged vs stored", m["acked_records"], stored["records"])
check("calls measured vs stored", m["measured_calls"], stored["calls"])
check("calls acknowledged vs stored", m["acked_calls"], stored["calls"])
check("bytes measured vs stored", m["measured_bytes"], stored["bytes"])
check("GPU ms acknowledged vs stored", m["acked_gpu_ms"], stored["gpu_ms"])
check("sessions", len(usage), 12)
billed = sum(b["total"] for b in bills)
expected = m["acked_gpu_ms"] * 0.001
if abs(billed - expected) > 1e-9 * max(1.0, expected):
    print("MISMATCH bill: %r != %r" % (billed, expected)); ok = False
print("billed %.6f for %.0f GPU ms" % (billed, m["acked_gpu_ms"]))
sys.exit(0 if ok else 1)
PY
echo "durability: 3 SIGKILLs; every acknowledged record stored once; usage and bills match"
