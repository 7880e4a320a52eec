#!/usr/bin/env bash
# run_peer.sh: starts one system's server on softgpu on loopback, runs a command under that
# system's client, and stops the server. Systems: rgpu-tcp, rgpu-shm and rgpu-sock (rgpu-server
# --backend softgpu on that transport, programs under `rgpu run --server URL --`), rgpu-tcp-staged (rgpu-tcp on a softgpu
# without softgpuMemDirectAccess: bulk copies staged as on NVIDIA's driver), local (rgpu's server
# inside the program on softgpu, no server process: the in-process baseline), and each peer
# build.sh built: lupine
# (lupine_driver_server with softgpu as its libcuda.so.1, programs with LUPINE_SERVER set and
# LUPINE's libcuda.so.1 in LD_PRELOAD, as its README says), cricket (cricket-rpc-server, programs
# with REMOTE_GPU_ADDRESS and cricket-client.so in LD_PRELOAD).
#   bench/peers/run_peer.sh SCRATCH SYSTEM [--outer] -- COMMAND [ARGS...]
# COMMAND runs under the client; with --outer it runs as it is, with RGPU_PEERS_CLIENT naming a
# script that runs its arguments under the client (to run many programs against one server) and
# RGPU_PEERS_SERVER_PID the server's process. Exits with COMMAND's status.
# Every server dlopens SCRATCH/softgpu/libcuda.so.1 (build.sh's copy of softgpu's bare driver);
# a peer's server also gets SCRATCH/PEER/libsoftgpu-compat.so in LD_PRELOAD (softgpu_compat.c).
# Files: SCRATCH/run/SYSTEM/{server.log,client}. Env: RGPU_BUILD (rgpu's build folder; default
# the repository's build/); RGPU_PEERS_DELAY_MS: puts rgpu's latency_proxy between client and
# server, adding that many milliseconds each way (rgpu-sock and lupine only: their clients reach
# the server through the one address given; UCX's data connections and Cricket's rpcbind lookup
# go around a relay, so those systems are refused, exit 4).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
[[ $# -ge 4 ]] || { sed -n '2,15p' "$0" >&2; exit 2; }
scratch=$(realpath "$1")
system=$2
shift 2
outer=0
[[ "${1:-}" == --outer ]] && { outer=1; shift; }
[[ "${1:-}" == -- ]] || { echo "run_peer.sh: expected -- before the command" >&2; exit 2; }
shift
rgpu_build=$(realpath "${RGPU_BUILD:-$here/../../build}")
softgpu=$scratch/softgpu
[[ -e "$softgpu/libcuda.so.1" ]] || { echo "run_peer.sh: no $softgpu/libcuda.so.1: run build.sh first" >&2; exit 2; }
run=$scratch/run/$system
mkdir -p "$run"
log=$run/server.log
client=$run/client
server_pid=""
proxy_pid=""
delay=${RGPU_PEERS_DELAY_MS:-0}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_listening() {  # wait_listening PORT: until something accepts on 127.0.0.1:PORT (10 s)
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "run_peer.sh: $system's server did not start (see $log)" >&2
  tail -n 5 "$log" >&2
  return 1
}

stop_server() {
  [[ -n "$proxy_pid" ]] && { kill -TERM "$proxy_pid" 2>/dev/null || true; wait "$proxy_pid" 2>/dev/null || true; }
  proxy_pid=""
  [[ -n "$server_pid" ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
trap stop_server EXIT

peer_ready() {  # peer_ready PEER: build.sh built it
  [[ "$(head -n 1 "$scratch/$1/STATUS" 2>/dev/null)" == OK ]] ||
    { echo "run_peer.sh: $1 is not built: $(head -n 1 "$scratch/$1/STATUS" 2>/dev/null || echo 'run build.sh')" >&2; exit 3; }
}

# through PORT: sets reach_port to the port to reach 127.0.0.1:PORT at (the delay proxy's when
# there is a delay, started here).
through() {
  reach_port=$1
  [[ "$delay" == 0 ]] && return 0
  rm -f "$run/proxy"
  "$rgpu_build/bin/latency_proxy" --to "127.0.0.1:$1" --delay-ms "$delay" --port-file "$run/proxy" \
    >"$run/proxy.log" 2>&1 &
  proxy_pid=$!
  for _ in $(seq 100); do [[ -s "$run/proxy" ]] && break; sleep 0.05; done
  [[ -s "$run/proxy" ]] || { echo "run_peer.sh: latency_proxy did not start" >&2; exit 1; }
  reach_port=$(sed 's/.*://' "$run/proxy")
}
if [[ "$delay" != 0 && "$system" != rgpu-sock && "$system" != lupine ]]; then
  echo "run_peer.sh: $system cannot run behind the delay proxy (rgpu-sock and lupine can)" >&2
  exit 4
fi

case "$system" in
  rgpu-tcp | rgpu-shm | rgpu-sock | rgpu-tcp-staged)
    rm -f "$run/url"
    transport=${system#rgpu-} library=$softgpu/libcuda.so.1
    if [[ "$system" == rgpu-tcp-staged ]]; then transport=tcp library=$scratch/softgpu-staged/libcuda.so.1; fi
    "$rgpu_build/bin/rgpu-server" --listen "$transport://127.0.0.1:0" --backend softgpu \
      --cuda-library "$library" --operator-key-file none --port-file "$run/url" \
      >"$log" 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do [[ -s "$run/url" ]] && break; sleep 0.1; done
    [[ -s "$run/url" ]] || { echo "run_peer.sh: rgpu-server did not start (see $log)" >&2; exit 1; }
    url=$(cat "$run/url")
    through "${url##*:}"
    url=${url%:*}:$reach_port
    printf '#!/bin/sh\nexec %q run --server %q -- "$@"\n' "$rgpu_build/bin/rgpu" "$url" >"$client"
    ;;
  local)
    # No server process and no network: rgpu's softgpu-local libcuda.so.1 runs the server inside
    # the program over an in-process transport, on softgpu (softgpu's bare driver alone lacks what
    # cudart asks of a driver). The in-process baseline remote figures are compared against.
    # RGPU_SERVER=local: a server named in the caller's environment must not stand in for it.
    printf '#!/bin/sh\nRGPU_SERVER=local LD_LIBRARY_PATH=%q${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec "$@"\n' \
      "$rgpu_build/lib/softgpu-local" >"$client"
    ;;
  lupine)
    peer_ready lupine
    port=$(free_port)
    # LUPINE's server binds every interface (INADDR_ANY, not configurable); clients use loopback.
    LUPINE_PORT=$port LD_LIBRARY_PATH="$softgpu" LD_PRELOAD="$scratch/lupine/libsoftgpu-compat.so" \
      "$scratch/lupine/lupine_driver_server" >"$log" 2>&1 &
    server_pid=$!
    wait_listening "$port"
    through "$port"
    port=$reach_port
    printf '#!/bin/sh\nLUPINE_SERVER=127.0.0.1:%s LD_PRELOAD=%q${LD_PRELOAD:+:$LD_PRELOAD} exec "$@"\n' \
      "$port" "$scratch/lupine/libcuda.so.1" >"$client"
    ;;
  cricket)
    peer_ready cricket
    # Cricket's server registers with rpcbind under its RPC id; its client looks it up there.
    LD_LIBRARY_PATH="$softgpu" LD_PRELOAD="$scratch/cricket/libsoftgpu-compat.so" \
      "$scratch/cricket/cricket-rpc-server" >"$log" 2>&1 &
    server_pid=$!
    sleep 1
    kill -0 "$server_pid" 2>/dev/null || { echo "run_peer.sh: cricket's server exited (see $log)" >&2; exit 1; }
    printf '#!/bin/sh\nREMOTE_GPU_ADDRESS=127.0.0.1 LD_PRELOAD=%q${LD_PRELOAD:+:$LD_PRELOAD} exec "$@"\n' \
      "$scratch/cricket/cricket-client.so" >"$client"
    ;;
  *)
    echo "run_peer.sh: unknown system $system (rgpu-tcp, rgpu-shm, rgpu-sock, rgpu-tcp-staged, local, lupine, cricket)" >&2
    exit 2
    ;;
esac
chmod +x "$client"

rc=0
if [[ $outer -eq 1 ]]; then
  RGPU_PEERS_CLIENT=$client RGPU_PEERS_SERVER_PID=$server_pid "$@" || rc=$?
else
  "$client" "$@" || rc=$?
fi
exit $rc
