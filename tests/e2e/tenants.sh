#!/usr/bin/env bash
# Authentication and quotas: a server started with --tokens refuses programs without a token or
# with an unknown one (before anything is allocated for them), enforces each tenant's memory
# quota, and --max-sessions refuses sessions beyond the limit.
#   tenants.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
cat >"$work/tokens" <<TOKENS
# token      tenant  quota  weight
tok-alice    alice   64M    1
tok-bob      bob     32M    3
TOKENS
start() {
  start_server "$work/server.log" "$@"
}
fail() { echo "tenants: $*"; cat "$work/server.log"; exit 1; }

start --tokens "$work/tokens"
out=$("$bin/rgpu" run --server "$url" -- "$programs/driver_vector_add" 2>&1) &&
  fail "a program without a token was admitted"
echo "$out" | grep -q CUDA_ERROR_NOT_PERMITTED || fail "no token: expected CUDA_ERROR_NOT_PERMITTED: $out"
out=$("$bin/rgpu" run --server "$url" --token nope -- "$programs/driver_vector_add" 2>&1) &&
  fail "an unknown token was admitted"
echo "$out" | grep -q "unknown token" || fail "unknown token: no clear reason: $out"
"$bin/rgpu" run --server "$url" --token tok-alice -- "$programs/driver_quota_check" 67108864 ||
  fail "alice's quota"
"$bin/rgpu" run --server "$url" --token tok-bob -- "$programs/driver_quota_check" 33554432 ||
  fail "bob's quota"
"$bin/rgpu" run --server "$url" --token tok-alice -- "$programs/driver_vector_add" >/dev/null ||
  fail "alice's vector_add"
kill $server; wait $server

start --max-sessions 1
"$bin/rgpu" run --server "$url" -- "$programs/driver_hold_memory" >"$work/holder" 2>&1 &
holder=$!
for _ in $(seq 400); do grep -q ready "$work/holder" && break; sleep 0.025; done
out=$("$bin/rgpu" run --server "$url" -- "$programs/driver_vector_add" 2>&1) &&
  fail "a session beyond --max-sessions was admitted"
echo "$out" | grep -q "server is full" || fail "full server: no clear reason: $out"
kill -KILL $holder; wait $holder 2>/dev/null
for _ in $(seq 100); do
  "$bin/rgpu" run --server "$url" -- "$programs/driver_vector_add" >/dev/null 2>&1 && {
    echo "tenants: tokens, quotas and the session limit hold"; exit 0; }
  sleep 0.1
done
fail "the slot of a killed session was not freed"
