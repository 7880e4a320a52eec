#!/usr/bin/env bash
# The CUDA face must export exactly what NVIDIA's libcuda.so.1 exports: the toolkit's stub
# (lib64/stubs/libcuda.so) is the reference. Prints the differences and fails on any.
#   tests/check_face_exports.sh FACE STUB
set -euo pipefail
symbols() { nm -D --defined-only "$1" | awk '$2 ~ /^[TtWiV]$/ {print $3}' | sed 's/@.*//' | sort -u; }
face=$(symbols "$1")
stub=$(symbols "$2")
missing=$(comm -13 <(echo "$face") <(echo "$stub"))
extra=$(comm -23 <(echo "$face") <(echo "$stub"))
[ -z "$missing" ] || echo "exported by libcuda.so.1 but not by $1:" $missing
[ -z "$extra" ] || echo "exported by $1 but not by libcuda.so.1:" $extra
[ -z "$missing$extra" ] && echo "$(echo "$face" | wc -l) symbols, the same as the stub's"
[ -z "$missing$extra" ]
