#!/usr/bin/env bash
# Proves the real-GPU script here: makes the tarball (scripts/package.sh), unpacks it elsewhere
# and runs tests/gpu/run_from_tarball.sh from it with the software GPU standing in for the
# driver, with nothing of the build on its paths; every check must pass (PyTorch is skipped).
#   prove_from_tarball.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$src/scripts/package.sh" "$work/out" "$build" >"$work/package.log" 2>&1 ||
  { echo "package.sh failed:"; cat "$work/package.log"; exit 1; }
mkdir "$work/unpacked"
tar -xzf "$work"/out/rgpu-*-linux-x86_64.tar.gz -C "$work/unpacked"
tree=$(ls -d "$work"/unpacked/rgpu-*)
env -u LD_LIBRARY_PATH -u RGPU_SERVER "$tree/tests/gpu/run_from_tarball.sh" --backend softgpu \
  "$work/results" >"$work/run.log" 2>&1
rc=$?
cat "$work/results/results.txt"
[ $rc -eq 0 ] || { echo "run_from_tarball.sh failed (exit $rc):"; tail -40 "$work/run.log"; exit 1; }
grep -q "^FAIL" "$work/results/results.txt" && { echo "a check failed"; exit 1; }
wants="e2e_tcp_vector_add e2e_shm_remanence e2e_tcp_isolation runtime_suite e2e_tcp_lanes lanes_bench"
# The samples travel when the build has them (corpus_build, from ../shared/corpus).
[ -f "$tree/tests/corpus/samples.run" ] && wants="$wants samples"
for want in $wants; do
  grep -q "^PASS $want" "$work/results/results.txt" || { echo "no PASS for $want"; exit 1; }
done
echo "run_from_tarball.sh passes from the tarball alone (software GPU)"
