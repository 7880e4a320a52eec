#!/usr/bin/env bash
# Checks librgpu-hip.so's face: its SONAME is libamdhip64.so.5, it needs only libc, and it exports
# exactly the entry points of hip_api.def, each under the version node listed there.
#   hip_exports.sh LIBRARY HIP_API_DEF
set -euo pipefail
lib=$1 def=$2
fail() { echo "hip_exports: $*"; exit 1; }
[ -f "$lib" ] || fail "no library at $lib"
readelf -d "$lib" | grep -q 'SONAME.*\[libamdhip64.so.5\]' || fail "SONAME is not libamdhip64.so.5"
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
[ "$needed" = "libc.so.6 " ] || fail "needs more than libc: $needed"
expected=$(sed -n 's/^HIP_ENTRY(\([0-9]*\)_\([0-9]*\), *\([A-Za-z0-9_]*\),.*/\3 hip_\1.\2/p' "$def" | sort)
actual=$(readelf --dyn-syms -W "$lib" | awk '$7 != "UND" && $4 == "FUNC" {print $8}' |
         sed 's/@@*/ /' | sort)
if [ "$expected" != "$actual" ]; then
  diff <(echo "$expected") <(echo "$actual") | head -20
  fail "exported functions differ from hip_api.def (< expected, > exported)"
fi
echo "hip_exports: $(echo "$actual" | wc -l) entry points, libc only"
