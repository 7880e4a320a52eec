# Shared start-up of the registry end-to-end scripts (gpus.sh, run_program.sh, capacity.sh,
# migrate.sh, move_on_notice.sh, checkpoint_lease.sh, drain_lease_sessions.sh), sourced after
# `bin`, `work` and `fail` are set and "$work/prices" is written:
#   json EXPR              prints EXPR of the JSON document on stdin (`d`)
#   start_registry         rgpu-registry on a free loopback port (SQLite in $work, heartbeats every
#                          500 ms); sets $registry (its pid), exports RGPU_REGISTRY and
#                          RGPU_ADMIN_KEY_FILE (the operator key the registry makes at first start)
#   open_accounts          provider acme (its key in $pkey) and tenant alice (RGPU_API_KEY)
#   start_server NAME URL_FILE LOG   a softgpu rgpu-server registered as NAME (RGPU_SERVER_ARGS adds
#                                    options); sets $launched
#   closing_window SECONDS  prints "CLOSE OFFSET WINDOW DESCRIBED": a lendable window that closes
#                           at unix time CLOSE, a whole second SECONDS from now, for a server run
#                           with TZ="TST-0:00:OFFSET" (its zone ahead of UTC by 0-59 s, so that the
#                           close falls on a minute of its local time); DESCRIBED is the
#                           availability as the registry writes it with --notice-s 3, with '_'
#                           for spaces
#   take_placement MEMORY  `rgpu place --memory MEMORY` (the placement a batch job's prolog takes),
#                          exported as RGPU_SERVER, RGPU_TOKEN and RGPU_LEASE for programs to share
#   await_started OUT...   waits until each program whose output is OUT printed "iteration 100"
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

take_placement() {
  local placement
  placement=$("$bin/rgpu" place --memory "$1") || fail "rgpu place: $placement"
  eval "export $(echo "$placement" | grep -E '^RGPU_(SERVER|TOKEN|LEASE)=' | tr '\n' ' ')"
}

await_started() {
  local out
  for out in "$@"; do
    for _ in $(seq 400); do grep -q "^iteration 100" "$out" && break; sleep 0.025; done
    grep -q "^iteration 100" "$out" || fail "a program did not start ($out)"
  done
}

start_registry() {
  "$bin/rgpu-registry" --listen 127.0.0.1:0 --db "$work/registry.db" --signing-key "$work/key.pem" \
    --prices "$work/prices" --port-file "$work/port" --heartbeat-ms 500 2>"$work/registry.log" &
  registry=$!
  for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
  [ -s "$work/port" ] || fail "registry did not start"
  RGPU_REGISTRY=$(cat "$work/port")
  export RGPU_REGISTRY RGPU_ADMIN_KEY_FILE=$work/registry.db.admin-key
}

open_accounts() {
  pkey=$("$bin/rgpu" provider create acme --json | json 'd["provider_key"]') || fail "provider create"
  RGPU_API_KEY=$("$bin/rgpu" tenant create alice --json | json 'd["api_key"]') || fail "tenant create"
  export RGPU_API_KEY
}

start_server() {
  local name=$1 url_file=$2 log=$3
  "$bin/rgpu-server" --listen tcp://127.0.0.1:0 --backend softgpu --registry "$RGPU_REGISTRY" \
    --provider-key "$pkey" --name "$name" --port-file "$url_file" ${RGPU_SERVER_ARGS:-} 2>"$log" &
  launched=$!
  for _ in $(seq 200); do [ -s "$url_file" ] && break; sleep 0.05; done
  [ -s "$url_file" ] || fail "server $name did not start"
}

closing_window() {
  python3 - "$1" <<'PY'
import math, sys, time
close = math.ceil(time.time()) + int(sys.argv[1])
offset = (-close) % 60
local_minute = ((close + offset) // 60) % 1440
start = (local_minute - 30) % 1440
window = "%02d:%02d-%02d:%02d" % (start // 60, start % 60, local_minute // 60, local_minute % 60)
if window.endswith("-00:00"):
    window = window[:-5] + "24:00"  # how the registry writes a window that ends at midnight
zone = "UTC+00:00" + (":%02d" % offset if offset else "")
print(close, offset, window, "%s_%s_(TST),_notice_3_s" % (window, zone))
PY
}
