# Shared start-up of the registry end-to-end scripts (gpus.sh, run_program.sh), sourced after
# `bin`, `work` and `fail` are set and "$work/prices" is written:
#   json EXPR              prints EXPR of the JSON document on stdin (`d`)
#   start_registry         rgpu-registry on a free loopback port (SQLite in $work, heartbeats every
#                          500 ms); sets $registry (its pid), exports RGPU_REGISTRY and
#                          RGPU_ADMIN_KEY_FILE (the operator key the registry makes at first start)
#   open_accounts          provider acme (its key in $pkey) and tenant alice (RGPU_API_KEY)
#   start_server NAME URL_FILE LOG   a softgpu rgpu-server registered as NAME (RGPU_SERVER_ARGS adds
#                                    options); sets $launched
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

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
