#!/usr/bin/env bash
# peers_bench.sh: rgpu over tcp and shm against every peer build.sh built, on the same softgpu,
# loopback and program binaries; prints the table and writes peers.json, table.md and
# ratios.png (see peers_bench.py and README.md).
#   bench/peers/build.sh SCRATCH                      # once: the peers, and softgpu's copy
#   bench/peers/peers_bench.sh SCRATCH [--out DIR] [--rounds N] [--systems rgpu-tcp,lupine,...]
#                              [--samples vectorAdd,...] [--quick] [--wait-idle PCT] [--delay-ms D]
# Builds its programs (peer_bench, chatty, startup) into SCRATCH/progs and the CUDA samples into
# SCRATCH/samples when missing or stale, and copies rgpu's binaries (rgpu, rgpu-server,
# driver_bench, lib/) into SCRATCH/rgpu first, so that a rebuild of rgpu during the run changes
# nothing (RGPU_SNAPSHOT=0: run rgpu's build folder itself). Env: RGPU_BUILD (rgpu's build folder;
# default the repository's build/), CUDA_HOME (/usr/local/cuda), RGPU_CORPUS (../shared/corpus),
# JOBS (2).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
[[ $# -ge 1 && "$1" != -* ]] || { sed -n '2,10p' "$0" >&2; exit 2; }
scratch=$(realpath "$1")
shift
cuda=${CUDA_HOME:-/usr/local/cuda}
[[ -e "$scratch/softgpu/libcuda.so.1" ]] || { echo "peers_bench.sh: run bench/peers/build.sh $scratch first" >&2; exit 2; }
progs=$scratch/progs
mkdir -p "$progs"

stale() { [[ ! -x "$progs/$1" || "$here/$2" -nt "$progs/$1" ]]; }
if stale peer_bench peer_bench.cc; then
  nice -n 10 g++ -O2 -std=c++17 -I"$cuda/include" -o "$progs/peer_bench" "$here/peer_bench.cc" \
    -L"$cuda/lib64/stubs" -lcuda
fi
for prog in chatty startup; do
  # nvcc's defaults, as the samples are built: static cudart, sm_75 SASS and compute_75 PTX.
  if stale "$prog" "$prog.cu"; then nice -n 10 "$cuda/bin/nvcc" -O2 -o "$progs/$prog" "$here/$prog.cu"; fi
done
rgpu_build=$(realpath "${RGPU_BUILD:-$here/../../build}")
if [[ "${RGPU_SNAPSHOT:-1}" != 0 ]]; then
  snap=$scratch/rgpu
  rm -rf "$snap.part" && mkdir -p "$snap.part/bin"
  cp "$rgpu_build"/bin/{rgpu,rgpu-server,driver_bench,latency_proxy} "$snap.part/bin/"
  cp -a "$rgpu_build/lib" "$snap.part/lib"
  git -C "$here" describe --always --dirty >"$snap.part/COMMIT" 2>/dev/null || echo unknown >"$snap.part/COMMIT"
  rm -rf "$snap" && mv "$snap.part" "$snap"
  rgpu_build=$snap
  # A copy taken in the middle of a rebuild would mix versions: check that it serves a program.
  RGPU_BUILD=$rgpu_build "$here/run_peer.sh" "$scratch" rgpu-tcp -- "$progs/startup" >/dev/null ||
    { echo "peers_bench.sh: rgpu's copy in $snap does not work (a rebuild in progress?); try again" >&2; exit 1; }
fi
RGPU_BUILD=$rgpu_build exec python3 "$here/peers_bench.py" "$scratch" "$@"
