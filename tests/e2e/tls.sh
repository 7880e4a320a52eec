#!/usr/bin/env bash
# tls:// as a stranger on the network sees it (transport/tls, docs/security.md): a program's
# session runs through a relay that records both directions. Over sock:// (the control) its
# module's kernel names cross in the clear; over tls:// nothing of them does. A URL pinning
# another key is refused before anything is sent; a relay that changes one byte of the client's
# stream after the handshake ends the session (the record fails its authentication) rather than
# handing the server an altered call; an unreachable server fails cuInit cleanly on both socket
# transports (it crashed the program when the connection could not be made).
#   tls.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
source "$here/lib.sh"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; [ -n "${RGPU_KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
fail() {
  echo "tls: $*"
  for f in "$work"/*.log "$work"/*.out; do [ -f "$f" ] && { echo "== $f"; tail -20 "$f"; }; done
  exit 1
}
program=$programs/driver_vector_add

# relay NAME PORT [FLIP_AT]: a recording relay to 127.0.0.1:PORT; sets $relay_port.
relay() {
  rm -f "$work/$1.port"
  python3 "$here/tap_relay.py" 127.0.0.1 "$2" "$work/$1.port" "$work/$1.record" ${3:-} &
  pids+=($!)
  for _ in $(seq 200); do [ -s "$work/$1.port" ] && break; sleep 0.05; done
  relay_port=$(cat "$work/$1.port")
}
port_of() { local rest=${1#*://}; rest=${rest%%#*}; echo "${rest##*:}"; }

# The control: over sock:// an observer reads the kernels' names.
scheme=sock start_server "$work/sock.log"; pids+=($server)
relay plain "$(port_of "$url")"
"$bin/rgpu" run --server "sock://127.0.0.1:$relay_port" -- "$program" >"$work/plain.out" 2>&1 ||
  fail "the program failed over sock://"
grep -aq vec_add "$work/plain.record" || fail "the control sees no kernel name over sock://"

scheme=tls start_server "$work/tls.log"; pids+=($server)
[[ $url == tls://127.0.0.1:*#* ]] || fail "the server's URL pins no key: $url"
pin=${url##*#}
[[ $pin =~ ^[0-9a-f]{64}$ ]] || fail "not a SHA-256 pin: $pin"
relay sealed "$(port_of "$url")"
"$bin/rgpu" run --server "tls://127.0.0.1:$relay_port#$pin" -- "$program" >"$work/sealed.out" 2>&1 ||
  fail "the program failed over tls://"
grep -q "elements OK" "$work/sealed.out" || fail "no result over tls://"
[ -s "$work/sealed.record" ] || fail "nothing went through the relay"
if grep -aq vec_add "$work/sealed.record"; then fail "an observer reads kernel names over tls://"; fi
echo "tls: $(wc -c <"$work/sealed.record") bytes crossed the relay, none of them readable"

# Another key pinned: refused before anything is sent.
other=$(printf '%064d' 7)
"$bin/rgpu" run --server "tls://127.0.0.1:$(port_of "$url")#$other" -- "$program" >"$work/pinned.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "a server of another key: the program exited $rc"
grep -q "not the one pinned" "$work/pinned.out" || fail "the refusal does not say why"
echo "tls: a server whose key is not the pinned one is refused"

# One byte changed on the way after the handshake: the session ends, no altered call is served.
relay tampered "$(port_of "$url")" 4000
"$bin/rgpu" run --server "tls://127.0.0.1:$relay_port#$pin" -- "$program" >"$work/tampered.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "a changed byte: the program exited $rc"
if grep -q "elements OK" "$work/tampered.out"; then fail "a changed stream still gave a result"; fi
wait_for_text "$work/tls.log" "TLS: .*\(bad record mac\|decrypt\)" ||
  fail "the server did not find the record altered"
echo "tls: a changed byte ended the session: $(grep -o 'TLS: [^)]*' "$work/tls.log" | tail -1)"

# A server with a certificate of a CA (--tls-key, --tls-certificate): a client that trusts the CA
# (RGPU_TLS_CA) reaches it by a URL without a pin; one that trusts another CA is refused. The
# pin follows the key: the same key file, the same pin at every start.
command -v openssl >/dev/null || fail "openssl (the command) is needed to make the test's CA"
make_ca test-ca && make_ca other-ca || fail "cannot make the test CAs"
make_server_certificate test-ca || fail "cannot sign the server's certificate"
scheme=tls start_server "$work/ca.log" --tls-key "$work/server.key" \
  --tls-certificate "$work/server.pem"
pids+=($server)
plain_url=${url%%#*}
RGPU_TLS_CA=$work/test-ca.pem "$bin/rgpu" run --server "$plain_url" -- "$program" \
  >"$work/ca.out" 2>&1 || fail "a client trusting the server's CA was refused"
RGPU_TLS_CA=$work/other-ca.pem "$bin/rgpu" run --server "$plain_url" -- "$program" \
  >"$work/other.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "a client trusting another CA: the program exited $rc"
grep -q "not trusted" "$work/other.out" || fail "the refusal does not say why: $(cat "$work/other.out")"
first_pin=${url##*#}
scheme=tls start_server "$work/again.log" --tls-key "$work/server.key"
pids+=($server)
[ "${url##*#}" = "$first_pin" ] || fail "the same key gave another pin"
echo "tls: a CA's certificate checked, another CA's refused, the pin kept with the key"

# Nobody listening: cuInit fails, the program is not killed.
for s in sock tls; do
  RGPU_SERVER=$s://127.0.0.1:1 LD_PRELOAD=$bin/../lib/librgpu-cuda.so "$program" >"$work/none_$s.out" 2>&1
  rc=$?
  [ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "no server over $s://: the program exited $rc"
  grep -q "cuInit" "$work/none_$s.out" || fail "no server over $s://: no CUDA error"
done
echo "tls: ok"
