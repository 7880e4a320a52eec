#!/usr/bin/env bash
# driver_entry_points under `rgpu run` with RGPU_LOG=warn: the program checks the entry points
# themselves; here its stderr must name the missing entry point it called twice exactly once.
#   entry_points.sh BIN_DIR PROGRAMS_DIR   (RGPU_SERVER set, as with_server.sh does)
set -uo pipefail
bin=$1 programs=$2
err=$(mktemp)
trap 'rm -f "$err"' EXIT
RGPU_LOG=warn "$bin/rgpu" run -- "$programs/driver_entry_points" 2>"$err" || {
  cat "$err"; exit 1
}
named=$(grep -c "cuGraphicsUnregisterResource" "$err")
if [ "$named" != 1 ]; then
  echo "expected cuGraphicsUnregisterResource named once at warn level, got $named:"; cat "$err"
  exit 1
fi
echo "entry_points: the missing entry point was named once"
