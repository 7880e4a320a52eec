#!/usr/bin/env bash
# The server's HIP backend where no AMD GPU is: rgpu-server loaded with librgpu-backend-hip.so
# must refuse to start with a line saying why, both when the HIP runtime cannot be loaded and
# when it finds no device (the latter only checked on machines without /dev/kfd).
#   hip_backend.sh BIN_DIR LIB_DIR
set -uo pipefail
bin=$1 lib=$2
backend=$lib/librgpu-backend-hip.so
[ -f "$backend" ] || { echo "hip_backend: no $backend"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start() {  # start [ENV=VALUE...]: runs the server to its exit; output in $work/log
  env "$@" timeout 30 "$bin/rgpu-server" --listen tcp://127.0.0.1:0 --backend hip \
    --port-file "$work/url" >"$work/log" 2>&1
}
start RGPU_HIP_LIBRARY=/nonexistent/libamdhip64.so.5
rc=$?
cat "$work/log"
[ $rc -ne 0 ] && [ ! -s "$work/url" ] || { echo "hip_backend: started without a HIP runtime"; exit 1; }
grep -q "hip backend: cannot load the HIP runtime /nonexistent/libamdhip64.so.5" "$work/log" ||
  { echo "hip_backend: no line saying the HIP runtime is missing"; exit 1; }
if [ -e /dev/kfd ]; then
  echo "hip_backend: /dev/kfd exists; the no-device case is left to tests/gpu/run_amd_gpu.sh"
  exit 0
fi
if ! ls /usr/lib/x86_64-linux-gnu/libamdhip64.so.5 /opt/rocm/lib/libamdhip64.so.5 >/dev/null 2>&1 &&
   [ -z "${RGPU_HIP_LIBRARY:-}" ]; then
  echo "hip_backend: no libamdhip64.so.5 installed; the no-device case is not checked"
  exit 0
fi
start
rc=$?
cat "$work/log"
[ $rc -ne 0 ] && [ ! -s "$work/url" ] || { echo "hip_backend: started with no AMD GPU"; exit 1; }
grep -q "hip backend: no HIP device" "$work/log" ||
  { echo "hip_backend: no line saying there is no HIP device"; exit 1; }
echo "hip_backend: refuses to start, and says why"
