#!/usr/bin/env bash
# Debian's hashcat, unmodified, cracks an MD5 under `rgpu run` through its CUDA backend: it loads
# libcuda.so.1 with dlopen, compiles its kernels with NVRTC and loads them with the driver API.
# Usage: hashcat.sh BIN (inside with_server.sh). Skipped (77) when hashcat is not installed.
set -euo pipefail
bin=$1
command -v hashcat >/dev/null || { echo "hashcat not installed: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME=$work  # its kernel cache; the potfile too is fresh, so nothing is cracked already
secret=4321
hash=$(printf '%s' "$secret" | md5sum | cut -d' ' -f1)
out=$work/out.txt
"$bin/rgpu" run -- hashcat -m 0 -a 3 "$hash" '?d?d?d?d' --backend-ignore-opencl \
  --potfile-path "$work/hashcat.potfile" --session "rgpu-e2e-$$" >"$out" 2>&1 ||
  true  # hashcat exits 0 when cracked, 1 when exhausted; the output says which
if grep -q "CUDA API" "$out" && grep -q "$hash:$secret" "$out" &&
   grep -q "^Status\.*: Cracked" "$out"; then
  echo "hashcat cracked $hash through rgpu"
  exit 0
fi
echo "hashcat did not crack $hash through rgpu:"
cat "$out"
exit 1
