#!/usr/bin/env bash
# The registry with the real daemons and CLI, no GPU program needed: TLS and the admin key,
# plaintext refused off loopback, the operator key file, a softgpu rgpu-server registering and
# proving it answers at its URL (and refused when incompatible, with a bad key, or at a URL where
# it does not answer), three missed heartbeats marking it offline and its return making it
# available, revocation, and clear errors for bad input.
#   system.sh BIN_DIR
set -uo pipefail
bin=$1
work=$(mktemp -d)
registry="" server=""
trap 'kill -CONT $server 2>/dev/null; kill $registry $server 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "system: $*"; echo "-- registry log"; tail -20 "$work/registry.log"; echo "-- server log"; tail -20 "$work/server.log" 2>/dev/null; exit 1; }
expect_error() {  # PATTERN COMMAND...: the command fails and says PATTERN
  local pattern=$1; shift
  local out
  out=$("$@" 2>&1) && fail "expected failure from: $* (got: $out)"
  echo "$out" | grep -q -- "$pattern" || fail "expected '$pattern' from: $* (got: $out)"
}
wait_state() {  # STATE: poll rgpu gpus until host1/0 is in STATE (gives up after 60 s)
  for _ in $(seq 600); do
    "$bin/rgpu" gpus --json | grep -q "\"gpu\": \"host1/0\".*\"state\": \"$1\"" && return 0
    sleep 0.1
  done
  "$bin/rgpu" gpus
  fail "host1/0 never became $1"
}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -keyout "$work/tls.key" -out "$work/tls.crt" -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null || fail "openssl"
printf 'gpu 0.002 1 rgpu softgpu\n' >"$work/prices"
"$bin/rgpu-registry" --listen 127.0.0.1:0 --db "$work/registry.db" --signing-key "$work/key.pem" \
  --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" --admin-key sesame-0123456789abcdef --heartbeat-ms 300 \
  --prices "$work/prices" --port-file "$work/port" 2>"$work/registry.log" &
registry=$!
for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(cat "$work/port" | cut -d: -f2)
export RGPU_REGISTRY=localhost:$port
# TLS: a client that does not trust the certificate cannot talk to it.
expect_error "unreachable" "$bin/rgpu" tenant list --admin-key sesame-0123456789abcdef
export RGPU_TLS_CA=$work/tls.crt
tls=(--tls-ca "$work/tls.crt")
expect_error "operator key" "$bin/rgpu" tenant create alice "${tls[@]}"
export RGPU_ADMIN_KEY=sesame-0123456789abcdef
"$bin/rgpu" tenant create alice "${tls[@]}" | grep -q "tenant alice created" || fail "tenant create"
expect_error "already exists" "$bin/rgpu" tenant create alice "${tls[@]}"
expect_error "1-64 characters" "$bin/rgpu" tenant create "no spaces" "${tls[@]}"
pkey=$("$bin/rgpu" provider create acme --json "${tls[@]}" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["provider_key"])') || fail "provider create"

# Plaintext is for loopback only: elsewhere TLS, or the explicit --insecure-plaintext.
expect_error "not a loopback address" "$bin/rgpu-registry" --listen 0.0.0.0:0 \
  --db "$work/open.db" --signing-key "$work/key.pem"
"$bin/rgpu-registry" --listen 0.0.0.0:0 --insecure-plaintext --db "$work/open.db" \
  --signing-key "$work/key.pem" --port-file "$work/open-port" 2>"$work/open.log" &
open=$!
for _ in $(seq 200); do [ -s "$work/open-port" ] && break; sleep 0.05; done
kill "$open"; wait "$open" 2>/dev/null
grep -q "INSECURE plaintext" "$work/open.log" || fail "no warning for --insecure-plaintext"

# A server with a wrong key is refused and says why.
expect_error "unknown provider key" "$bin/rgpu-server" --listen tcp://127.0.0.1:0 --backend softgpu \
  --registry "$RGPU_REGISTRY" --registry-ca "$work/tls.crt" --provider-key wrong --name host1
"$bin/rgpu-server" --listen tcp://127.0.0.1:0 --backend softgpu --registry "$RGPU_REGISTRY" \
  --registry-ca "$work/tls.crt" --provider-key "$pkey" --name host1 --port-file "$work/url" \
  2>"$work/server.log" &
server=$!
for _ in $(seq 200); do [ -s "$work/url" ] && break; sleep 0.05; done
[ -s "$work/url" ] || fail "server did not start"
wait_state available  # it proved it answers at its URL
grep -q "server host1 proved it answers at $(cat "$work/url")" "$work/registry.log" ||
  fail "the registry did not probe the server's URL"
"$bin/rgpu" gpus "${tls[@]}" | grep -q "rgpu softgpu" || fail "gpus table"
"$bin/rgpu" provider list "${tls[@]}" | grep -q "acme .*active .*1" || fail "provider list"

# Three missed heartbeats: offline; back: available.
kill -STOP "$server"
wait_state offline
kill -CONT "$server"
wait_state available

# Revoking the provider: revoked at once, and its heartbeats are refused.
"$bin/rgpu" provider revoke acme "${tls[@]}" | grep -q revoked || fail "revoke"
wait_state revoked
for _ in $(seq 100); do grep -q "revoked" "$work/server.log" && break; sleep 0.1; done
grep -q "revoked" "$work/server.log" || fail "server was not told it is revoked"

# Bad input: clear errors, no crash.
expect_error "no tenant named nobody" "$bin/rgpu" bill --tenant nobody "${tls[@]}"
expect_error "bad --from" "$bin/rgpu" bill --tenant alice --from yesterday "${tls[@]}"
expect_error "no provider named" "$bin/rgpu" earnings --provider nobody "${tls[@]}"
expect_error "no registry" env -u RGPU_REGISTRY "$bin/rgpu" gpus
printf 'gpu cheap\n' >"$work/bad-prices"
expect_error "line 1" "$bin/rgpu-registry" --db "$work/other.db" --signing-key "$work/key.pem" \
  --prices "$work/bad-prices"
"$bin/rgpu" bill --tenant alice "${tls[@]}" | grep -q "TOTAL" || fail "empty bill"

# Without --admin-key the registry makes its operator key at first start, in a file only its
# owner can read, and every operator command needs it.
kill "$registry"; wait "$registry" 2>/dev/null
env -u RGPU_ADMIN_KEY "$bin/rgpu-registry" --listen 127.0.0.1:0 --db "$work/strict.db" \
  --signing-key "$work/key.pem" --min-driver-version 99000 --port-file "$work/port2" \
  --heartbeat-ms 300 2>>"$work/registry.log" &
registry=$!
for _ in $(seq 200); do [ -s "$work/port2" ] && break; sleep 0.05; done
strict=$(cat "$work/port2")
[ "$(stat -c %a "$work/strict.db.admin-key")" = 600 ] || fail "operator key file is not mode 0600"
unset RGPU_ADMIN_KEY RGPU_TLS_CA
expect_error "operator key" "$bin/rgpu" provider create other --registry "$strict"
expect_error "operator key" "$bin/rgpu" tenant list --registry "$strict" --admin-key wrong
key2=$("$bin/rgpu" provider create other --registry "$strict" --json \
  --admin-key-file "$work/strict.db.admin-key" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["provider_key"])') || fail "key file"

# An incompatible GPU is refused with the reason.
expect_error "older than the minimum 99000" "$bin/rgpu-server" --listen tcp://127.0.0.1:0 \
  --backend softgpu --registry "$strict" --provider-key "$key2" --name host2

# A server that does not answer at the URL it registers takes no placements, and is told why.
kill "$registry"; wait "$registry" 2>/dev/null
export RGPU_ADMIN_KEY_FILE=$work/strict.db.admin-key
"$bin/rgpu-registry" --listen "$strict" --db "$work/strict.db" --signing-key "$work/key.pem" \
  --heartbeat-ms 300 2>>"$work/registry.log" &
registry=$!
for _ in $(seq 200); do "$bin/rgpu" tenant list --registry "$strict" >/dev/null 2>&1 && break; sleep 0.05; done
"$bin/rgpu-server" --listen tcp://127.0.0.1:0 --backend softgpu --registry "$strict" \
  --provider-key "$key2" --name host3 --advertise tcp://127.0.0.1:1 2>"$work/server3.log" &
server3=$!
for _ in $(seq 600); do
  "$bin/rgpu" gpus --registry "$strict" --json | grep -q '"gpu": "host3/0".*"state": "unreachable"' && break
  sleep 0.1
done
"$bin/rgpu" gpus --registry "$strict" --json | grep -q '"gpu": "host3/0".*"state": "unreachable"' ||
  { kill $server3; fail "a server at a wrong URL was not refused"; }
for _ in $(seq 100); do grep -q "takes no placements" "$work/server3.log" && break; sleep 0.1; done
kill $server3; wait $server3 2>/dev/null
grep -q "takes no placements.*tcp://127.0.0.1:1" "$work/server3.log" ||
  fail "the server was not told it is unreachable: $(tail -3 "$work/server3.log")"
echo "system: TLS, operator key, registration and reachability, heartbeats, revocation and bad input all behave"
