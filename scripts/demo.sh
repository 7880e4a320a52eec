#!/usr/bin/env bash
# The main job, end to end on one machine: set up and build rgpu, start rgpu-server on the
# software GPU, and run a real CUDA program (built with nvcc, unmodified) through it remotely.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
bin=$root/build/bin
work=$(mktemp -d)
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT

echo "== starting rgpu-server (software GPU) on a loopback port"
"$bin/rgpu-server" --listen tcp://127.0.0.1:0 --backend softgpu --port-file "$work/url" \
  2>"$work/server.log" &
server=$!
for _ in $(seq 200); do [ -s "$work/url" ] && break; sleep 0.05; done
url=$(cat "$work/url")
echo "   server at $url"

for program in driver_vector_add driver_saxpy_streams driver_device_global; do
  echo "== rgpu run --server $url -- $program"
  start=$(date +%s%N)
  "$bin/rgpu" run --server "$url" -- "$root/build/tests/programs/$program"
  end=$(date +%s%N)
  echo "   wall time $(( (end - start) / 1000000 )) ms"
done
echo "== server log"
sed 's/^/   /' "$work/server.log"
