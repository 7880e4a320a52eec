#!/usr/bin/env bash
# Remanence and isolation across tenants' sessions, on any backend (the real driver included):
# tenant A fills memory with a pattern; B allocates as much and must not find it, and copies from
# A's live address are refused; after A frees its memory, and after A exits holding it, B's fresh
# allocations still hold none of it (the server scrubs what it hands out).
#   remanence.sh BIN_DIR PROGRAMS_DIR [MIB]   (run inside with_server.sh)
set -uo pipefail
bin=$1 programs=$2 mib=${3:-64}
work=$(mktemp -d)
trap 'exec 3>&-; kill $writer 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "remanence: $*"; exit 1; }
for ending in free exit; do
  mkfifo "$work/in.$ending"
  "$bin/rgpu" run -- "$programs/driver_remanence" write "$mib" <"$work/in.$ending" \
    >"$work/writer.$ending" 2>&1 &
  writer=$!
  exec 3>"$work/in.$ending"
  for _ in $(seq 400); do grep -q ready "$work/writer.$ending" && break; sleep 0.025; done
  grep -q ready "$work/writer.$ending" || fail "the writer did not start: $(cat "$work/writer.$ending")"
  address=$(sed -n 's/^address //p' "$work/writer.$ending")
  "$bin/rgpu" run -- "$programs/driver_remanence" read "$mib" "$address" ||
    fail "B read A's live memory ($ending)"
  echo "$ending" >&3
  exec 3>&-
  wait $writer || fail "the writer failed: $(cat "$work/writer.$ending")"
  "$bin/rgpu" run -- "$programs/driver_remanence" read "$mib" ||
    fail "B's fresh memory held A's after A's $ending"
done
echo "remanence: no session read another's memory, live, freed or left at exit"
