#!/usr/bin/env bash
# Runs a command against a fresh rgpu-server on the software GPU.
#   with_server.sh BIN_DIR SCHEME -- COMMAND ARGS...
# Starts `rgpu-server` on an ephemeral loopback port with SCHEME (tcp, shm or sock), exports RGPU_SERVER
# for COMMAND, and fails if COMMAND fails or the server died meanwhile. The server's log is
# printed when anything fails. RGPU_BACKEND picks the backend (softgpu, the default, or cuda);
# RGPU_SERVER_ARGS adds server options.
set -uo pipefail
bin=$1 scheme=$2
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2086
"$bin/rgpu-server" --listen "$scheme://127.0.0.1:0" --backend "${RGPU_BACKEND:-softgpu}" \
  --port-file "$work/url" ${RGPU_SERVER_ARGS:-} 2>"$work/server.log" &
server=$!
for _ in $(seq 200); do
  [ -s "$work/url" ] && break
  if ! kill -0 $server 2>/dev/null; then
    echo "rgpu-server failed to start:"; cat "$work/server.log"; exit 1
  fi
  sleep 0.05
done
[ -s "$work/url" ] || { echo "rgpu-server did not start"; cat "$work/server.log"; exit 1; }
RGPU_SERVER=$(cat "$work/url")
export RGPU_SERVER RGPU_SERVER_LOG="$work/server.log"
"$@"
rc=$?
if ! kill -0 $server 2>/dev/null; then
  echo "rgpu-server died during the test"; rc=1
else
  kill -TERM $server
  wait $server || { echo "rgpu-server exited with an error on SIGTERM"; rc=1; }
fi
if [ $rc -ne 0 ]; then echo "---- server log ----"; cat "$work/server.log"; fi
exit $rc
