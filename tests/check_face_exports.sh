#!/usr/bin/env bash
# A face must export exactly what the library it stands in for exports. The reference is that
# library (for the CUDA face, the toolkit's stub lib64/stubs/libcuda.so) or, where none ships,
# a list of names, one per line, '#' comments (interpose/nvml/exports.txt). Prints the
# differences and fails on any.
#   tests/check_face_exports.sh FACE REFERENCE
set -euo pipefail
symbols() { nm -D --defined-only "$1" | awk '$2 ~ /^[TtWiV]$/ {print $3}' | sed 's/@.*//' | sort -u; }
face=$(symbols "$1")
case "$2" in
  *.txt) reference=$(grep -v '^#' "$2" | sed '/^$/d' | sort -u) ;;
  *) reference=$(symbols "$2") ;;
esac
missing=$(comm -13 <(echo "$face") <(echo "$reference"))
extra=$(comm -23 <(echo "$face") <(echo "$reference"))
[ -z "$missing" ] || echo "in $2 but not exported by $1:" $missing
[ -z "$extra" ] || echo "exported by $1 but not in $2:" $extra
[ -z "$missing$extra" ] && echo "$(echo "$face" | wc -l) symbols, the same as $(basename "$2")'s"
[ -z "$missing$extra" ]
