#!/usr/bin/env bash
# Sessions in processes of their own over tls:// (server/session_host.h): a host never holds the
# server's TLS key. The server's key file and certificate are not on a host's command line; each
# host proves a key of its own, whose pin the server sends its client over the connection that
# proved the server's key; the client follows the redirect to that key only. So a client that
# pins the server's key at a host's port is refused by TLS (the host cannot prove it), and a
# session still runs end to end, also with a client that checks a CA's certificate, not a pin.
#   tls_session_hosts.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
server="" holder=""
trap 'exec 3>&- 2>/dev/null; kill $holder $server 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "tls_session_hosts: $*"; cat "$work/server.log"; exit 1; }
command -v openssl >/dev/null || fail "openssl (the command) is needed to make the test's keys"
cat >"$work/tokens" <<TOKENS
# token      tenant  quota  weight
tok-alice    alice   256M   1
tok-bob      bob     64M    1
TOKENS
# The server's key, certified by a CA of the test's for 127.0.0.1.
make_ca ca && make_server_certificate ca || fail "cannot make the test's keys"
scheme=tls start_server "$work/server.log" --tokens "$work/tokens" --session-processes on \
  --tls-key "$work/server.key" --tls-certificate "$work/server.pem"
[ -n "$url" ] || fail "the server did not start"
server_pin=${url##*#}

# Bob's session runs in a process of its own, reached through the redirect over tls://.
hold_memory "$url" bob || fail "bob's program did not start: $(cat "$work/bob.out")"
bob_host=$(sed -n 's/.*of tenant bob from .* runs in process \([0-9]*\)$/\1/p' "$work/server.log")
[ -n "$bob_host" ] || fail "no process of bob's session in the server's log"
bob_url=$(sed -n 's/.*session host for session [0-9]* of tenant bob on \(.*\)$/\1/p' "$work/server.log")
[ -n "$bob_url" ] && [ "${bob_url%%#*}" != "${url%%#*}" ] || fail "no URL of bob's session's process"

# The host has neither the key's nor the certificate's path, and proves another key.
tr '\0' ' ' <"/proc/$bob_host/cmdline" | grep -q -e "$work/server.key" -e "$work/server.pem" &&
  fail "bob's session's process was given the server's key: $(tr '\0' ' ' <"/proc/$bob_host/cmdline")"
host_pin=${bob_url##*#}
[ -n "$host_pin" ] && [ "$host_pin" != "$bob_url" ] || fail "bob's host URL has no pin: $bob_url"
[ "$host_pin" != "$server_pin" ] || fail "bob's session's process proves the server's key"
# A client that requires the server's key at the host's port is refused by TLS itself.
out=$("$bin/rgpu" run --server "${bob_url%%#*}#$server_pin" --token tok-bob -- \
  "$programs/driver_vector_add" 2>&1) && fail "a host proved the server's key"
echo "$out" | grep -q "not the one pinned" || fail "the host's key: no clear refusal: $out"

# Bob's session goes on, answered by its process.
free_memory bob ||
  fail "bob's session failed, or its free was not answered: $(cat "$work/bob.out")"

# A client that checks the server's certificate against the CA (no pin in its URL) follows the
# redirect to the host's own key too.
RGPU_TLS_CA=$work/ca.pem "$bin/rgpu" run --server "${url%%#*}" --token tok-alice -- \
  "$programs/driver_vector_add" >"$work/alice.out" 2>&1 ||
  fail "a client checking the CA did not reach its session's process: $(cat "$work/alice.out")"
grep -q "of tenant alice from .* runs in process" "$work/server.log" ||
  fail "alice's session did not run in a process of its own"
echo "tls_session_hosts: hosts prove keys of their own, never the server's; sessions run through them"
