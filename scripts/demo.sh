#!/usr/bin/env bash
# The main job, end to end on one machine: set up and build rgpu, start the registry and an
# rgpu-server on the software GPU that registers its GPU with it, create a tenant, run real CUDA
# programs (built with nvcc, unmodified) through `rgpu run --registry`, and print the bill.
# RGPU_BIN=DIR runs installed binaries instead (a package's /usr/bin, a tarball's bin/) without
# building; RGPU_PROGRAMS=DIR names where the CUDA programs are (default build/tests/programs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${RGPU_BIN:-}" ]; then
  bin=$RGPU_BIN
else
  "$root/scripts/setup.sh"
  bin=$root/build/bin
fi
programs=${RGPU_PROGRAMS:-$root/build/tests/programs}
work=$(mktemp -d)
registry="" server=""
trap 'kill $server $registry 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
key() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

echo "== starting rgpu-registry (SQLite store, prices per GPU millisecond)"
cat >"$work/prices" <<'PRICES'
currency USD
gpu 0.000001 1 rgpu softgpu
burst_premium_per_gb 0.01
provider_share 0.8
PRICES
"$bin/rgpu-registry" --listen 127.0.0.1:0 --db "$work/registry.db" --signing-key "$work/registry.pem" \
  --prices "$work/prices" --port-file "$work/registry-port" 2>"$work/registry.log" &
registry=$!
for _ in $(seq 200); do [ -s "$work/registry-port" ] && break; sleep 0.05; done
export RGPU_REGISTRY=$(cat "$work/registry-port")
# The operator's key: made by the registry at first start, readable by its owner only.
export RGPU_ADMIN_KEY_FILE=$work/registry.db.admin-key
echo "   registry at $RGPU_REGISTRY (operator key in $RGPU_ADMIN_KEY_FILE)"

echo "== rgpu provider create demo-provider; rgpu-server (software GPU) registers with the registry"
provider_key=$("$bin/rgpu" provider create demo-provider --json | key provider_key)
"$bin/rgpu-server" --listen tcp://127.0.0.1:0 --backend softgpu --name demo-host \
  --registry "$RGPU_REGISTRY" --provider-key "$provider_key" --port-file "$work/url" \
  2>"$work/server.log" &
server=$!
for _ in $(seq 200); do [ -s "$work/url" ] && break; sleep 0.05; done
"$bin/rgpu" gpus

echo "== rgpu tenant create demo-tenant"
export RGPU_API_KEY=$("$bin/rgpu" tenant create demo-tenant --json | key api_key)
echo "   API key ${RGPU_API_KEY:0:12}..."

for program in driver_vector_add driver_saxpy_streams driver_device_global; do
  echo "== rgpu run --registry $RGPU_REGISTRY --memory 256M -- $program"
  start=$(date +%s%N)
  "$bin/rgpu" run --registry "$RGPU_REGISTRY" --memory 256M -- "$programs/$program"
  end=$(date +%s%N)
  echo "   wall time $(( (end - start) / 1000000 )) ms"
done

# Each session's last usage record reaches the registry as it ends; wait until all are in.
for _ in $(seq 100); do
  [ "$("$bin/rgpu" gpus --json | python3 -c 'import json,sys; print(sum(g["leases"] for g in json.load(sys.stdin)))')" = 0 ] && break
  sleep 0.1
done
echo "== rgpu usage"
"$bin/rgpu" usage
echo "== rgpu bill --tenant demo-tenant"
"$bin/rgpu" bill --tenant demo-tenant
echo "== rgpu earnings --provider demo-provider"
"$bin/rgpu" earnings --provider demo-provider
echo "== server log"
sed 's/^/   /' "$work/server.log"
