#!/usr/bin/env bash
# The session handshake as a program sees it (its first driver call, cuInit), on a server with
# no tokens, with a token file (HMAC proof over the server's nonce) and with signed tokens
# (holder signature), and with a token file and each session in a process of its own
# (--session-processes on: the redirect to a host started ahead), over TCP on loopback. Prints a table and JSON (median and p90 of RUNS runs).
#   bench/handshake_bench.sh BUILD_DIR [RUNS] [PROBE]
# PROBE defaults to BUILD_DIR/bin/handshake_probe; give another build's probe to compare builds
# (the probe uses only the driver API).
set -euo pipefail
build=$(cd "$1" && pwd)
runs=${2:-40}
probe=${3:-$build/bin/handshake_probe}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
echo "secret-token-of-the-bench bench 1G 1" >"$work/tokens.txt"
"$build/bin/rgpu" token keygen --private "$work/key.pem" --public "$work/key.pub" >/dev/null
signed=$("$build/bin/rgpu" token sign --key "$work/key.pem" --tenant bench --memory 1G \
  --server bench-host --ttl 3600)

# start NAME ARGS...: a server; sets URL.
start() {
  local name=$1
  shift
  rm -f "$work/$name.url"
  "$build/bin/rgpu-server" --listen tcp://127.0.0.1:0 --backend softgpu --name bench-host \
    --port-file "$work/$name.url" "$@" 2>"$work/$name.log" &
  for _ in $(seq 200); do [ -s "$work/$name.url" ] && break; sleep 0.05; done
  URL=$(cat "$work/$name.url")
}

# measure TOKEN: prints "median p90" in µs.
measure() {
  local token=$1
  for _ in $(seq "$runs"); do
    RGPU_SERVER=$URL RGPU_TOKEN=$token LD_PRELOAD=$build/lib/librgpu-cuda.so "$probe"
  done | sort -n | awk '{v[NR]=$1} END {printf "%.0f %.0f\n", v[int((NR+1)/2)], v[int(NR*0.9+0.5)]}'
}

# Builds from before the operator key have no such option.
extra=()
if "$build/bin/rgpu-server" --help | grep -q -- --operator-key-file; then
  extra=(--operator-key-file none)
fi
start open "${extra[@]}"
read -r open_med open_p90 < <(measure "")
start file --tokens "$work/tokens.txt" "${extra[@]}"
read -r file_med file_p90 < <(measure "secret-token-of-the-bench")
start signed --token-public-key "$work/key.pub" "${extra[@]}"
read -r signed_med signed_p90 < <(measure "$signed")
hosted_med=- hosted_p90=-
if "$build/bin/rgpu-server" --help | grep -q -- --session-processes; then
  start hosted --tokens "$work/tokens.txt" --session-processes on "${extra[@]}"
  read -r hosted_med hosted_p90 < <(measure "secret-token-of-the-bench")
fi

printf "%-28s %12s %12s\n" "handshake (cuInit), tcp" "median µs" "p90 µs"
printf "%-28s %12s %12s\n" "no token" "$open_med" "$open_p90"
printf "%-28s %12s %12s\n" "token file (HMAC proof)" "$file_med" "$file_p90"
printf "%-28s %12s %12s\n" "signed token (Ed25519)" "$signed_med" "$signed_p90"
printf "%-28s %12s %12s\n" "token file, own process" "$hosted_med" "$hosted_p90"
printf '{"runs": %d, "open_us": %s, "open_p90_us": %s, "file_token_us": %s, "file_token_p90_us": %s, "signed_token_us": %s, "signed_token_p90_us": %s, "session_process_us": "%s", "session_process_p90_us": "%s"}\n' \
  "$runs" "$open_med" "$open_p90" "$file_med" "$file_p90" "$signed_med" "$signed_p90" \
  "$hosted_med" "$hosted_p90"
