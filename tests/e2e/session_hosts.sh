#!/usr/bin/env bash
# Sessions in processes of their own (rgpu-server --session-processes on, server/session_host.h):
# each admitted session is served by its own process; when one tenant's process dies (here
# SIGSEGV, as a driver crash would) the server and the other tenant's live session go on, the
# dead session's quota is released (its tenant can hold its whole quota again), and the server
# says how that process ended. A host admits only the client it was made for: a connection to
# its port with another credential is refused. The server's status shows a session from its
# process's figures; a checkpoint its client gives no chance to is refused, and it goes on. Hosts
# are confined (server/session_sandbox.h).
#   session_hosts.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
server="" holder=""
trap 'exec 3>&- 2>/dev/null; kill $holder $server 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "session_hosts: $*"; cat "$work/server.log"; exit 1; }
cat >"$work/tokens" <<TOKENS
# token      tenant  quota  weight
tok-alice    alice   256M   1
tok-bob      bob     64M    1
TOKENS
# The provider's key, given both ways, must not reach a host (it never speaks to the registry).
RGPU_PROVIDER_KEY=provider-secret-env start_server "$work/server.log" --tokens "$work/tokens" \
  --session-processes on --provider-key provider-secret-argv
[ -n "$url" ] || fail "the server did not start"

# Bob holds 32 MiB and waits for a word on stdin.
hold_memory "$url" bob || fail "bob's program did not start: $(cat "$work/bob.out")"

# Alice holds 256 MiB (her whole quota) in a process of her own, which then dies.
"$bin/rgpu" run --server "$url" --token tok-alice -- "$programs/driver_hold_memory" \
  >"$work/alice.out" 2>&1 &
alice=$!
wait_for_text "$work/alice.out" ready || fail "alice's program did not start: $(cat "$work/alice.out")"
host=$(sed -n 's/.*of tenant alice from .* runs in process \([0-9]*\)$/\1/p' "$work/server.log")
[ -n "$host" ] || fail "no process of alice's session in the server's log"
bob_host=$(sed -n 's/.*of tenant bob from .* runs in process \([0-9]*\)$/\1/p' "$work/server.log")
[ -n "$bob_host" ] && [ "$bob_host" != "$host" ] || fail "bob's session is not in a process of its own"
# Each host confined itself before its tenant reached it (server/session_sandbox.h): every thread
# of bob's runs under the system-call filter, with no new privileges and no capabilities.
for status in /proc/"$bob_host"/task/*/status; do
  grep -q "^Seccomp:[[:space:]]*2" "$status" && grep -q "^NoNewPrivs:[[:space:]]*1" "$status" &&
    grep -q "^CapEff:[[:space:]]*0*$" "$status" ||
    fail "a thread of bob's session's process is not confined: $(cat "$status")"
done
grep -q "session host confined" "$work/server.log" || fail "no host said it was confined"
# ... and holds no provider key, is in a session of its own (no signal to the server's process
# group reaches the server from it) and does not read the operator's terminal.
tr '\0' '\n' <"/proc/$bob_host/environ" | grep -q provider-secret &&
  fail "bob's session's process has the provider's key in its environment"
tr '\0' ' ' <"/proc/$bob_host/cmdline" | grep -q provider-secret &&
  fail "bob's session's process has the provider's key on its command line"
[ "$(ps -o sid= -p "$bob_host" | tr -d ' ')" = "$bob_host" ] ||
  fail "bob's session's process is not in a session of its own"
[ "$(readlink "/proc/$bob_host/fd/0")" = /dev/null ] || fail "bob's host reads the server's stdin"
kill -SEGV "$host"
wait $alice && fail "alice's program went on without its session's process"
wait_for_text "$work/server.log" "its process $host killed by signal 11" ||
  fail "the server did not say how alice's session's process ended"
kill -0 "$server" 2>/dev/null || fail "the server died with alice's session's process"

# A host admits only its own client: another credential at the port of bob's host is refused.
bob_url=$(sed -n 's/.*session host for session [0-9]* of tenant bob on \(.*\)$/\1/p' "$work/server.log")
[ -n "$bob_url" ] && [ "$bob_url" != "$url" ] || fail "no URL of bob's session's process"
out=$("$bin/rgpu" run --server "$bob_url" --token tok-alice -- "$programs/driver_vector_add" 2>&1) &&
  fail "a session's process admitted a client it was not made for"
echo "$out" | grep -q "unknown token" || fail "a foreign client at a host: no clear reason: $out"

# The server reports bob's session from its process's figures, and refuses to move it (not
# supported across processes yet) rather than move an empty shell.
bob_session=$(sed -n 's/.*session \([0-9]*\): .* of tenant bob from .* runs in process.*/\1/p' \
  "$work/server.log")
[ -n "$bob_session" ] || fail "no id of bob's session in the server's log"
for _ in $(seq 40); do
  "$bin/rgpu" status --server "$url" --json >"$work/status" 2>&1
  grep -q '"memory_bytes": 33554432' "$work/status" && break
  sleep 0.1
done
grep -q '"memory_bytes": 33554432' "$work/status" ||
  fail "status does not show the 32 MiB bob's process holds: $(cat "$work/status")"
# Its host carries out an operator's checkpoint (e2e_checkpoint_restore_session_processes); bob
# waits on stdin, making no call, so it is refused after the timeout and his session stays.
out=$("$bin/rgpu" checkpoint --server "$url" --session "$bob_session" --file "$work/bob.ckpt" \
  --timeout-ms 500 2>&1) && fail "a session that made no call was checkpointed: $out"
echo "$out" | grep -q "stays where it was" || fail "checkpoint: no clear reason: $out"

# Bob's session is untouched: it frees its memory (a call answered by its process) and exits.
free_memory bob ||
  fail "bob's session did not survive alice's, or its free was not answered: $(cat "$work/bob.out")"

# Alice's quota was released with her dead process: she can hold all of it again.
"$bin/rgpu" run --server "$url" --token tok-alice -- "$programs/driver_quota_check" 268435456 ||
  fail "alice's quota was not released when her session's process died"

echo "session_hosts: a dead session's process ends only its session; quota released; hosts admit only their client"
