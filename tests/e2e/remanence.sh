#!/usr/bin/env bash
# Remanence and isolation between two tenants, on any backend (RGPU_BACKEND; the real driver
# included): tenant alice fills memory with a pattern; bob allocates (MIB, or "most": nearly all
# the free memory) and must not find it, copies from alice's live address are refused and a
# kernel reading it gets nothing of hers; after alice frees her memory, and after she exits
# holding it, bob's fresh allocations still hold none of it (the server scrubs what it hands
# out). Starts its own server with the two tenants' tokens (over $scheme, tcp unless set).
#   remanence.sh BIN_DIR PROGRAMS_DIR [MIB|most]
set -uo pipefail
bin=$1 programs=$2 size=${3:-64}
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
server="" writer=""
trap 'exec 3>&- 2>/dev/null; kill $writer $server 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "remanence: $*"; cat "$work/server.log"; exit 1; }
cat >"$work/tokens" <<TOKENS
# token      tenant  quota  weight
tok-alice    alice   1T     1
tok-bob      bob     1T     1
TOKENS
start_server "$work/server.log" --tokens "$work/tokens"
[ -n "$url" ] || fail "the server did not start"
for ending in free exit; do
  mkfifo "$work/in.$ending"
  "$bin/rgpu" run --server "$url" --token tok-alice -- "$programs/driver_remanence" write 256 \
    <"$work/in.$ending" >"$work/writer.$ending" 2>&1 &
  writer=$!
  exec 3>"$work/in.$ending"
  for _ in $(seq 1200); do grep -q ready "$work/writer.$ending" && break; sleep 0.05; done
  grep -q ready "$work/writer.$ending" || fail "alice's program did not start: $(cat "$work/writer.$ending")"
  address=$(sed -n 's/^address //p' "$work/writer.$ending")
  "$bin/rgpu" run --server "$url" --token tok-bob -- "$programs/driver_remanence" read 64 \
    "$address" || fail "bob read alice's live memory ($ending)"
  echo "$ending" >&3
  exec 3>&-
  wait $writer || fail "alice's program failed: $(cat "$work/writer.$ending")"
  writer=""
  "$bin/rgpu" run --server "$url" --token tok-bob -- "$programs/driver_remanence" read "$size" ||
    fail "bob's fresh memory held alice's after her $ending"
done
echo "remanence: bob read nothing of alice's memory, live, freed or left at exit"
