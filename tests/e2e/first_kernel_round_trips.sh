#!/usr/bin/env bash
# A cudart program's first kernel costs at most 3 round trips that it waits for (issue 21): runs
# rt_vector_add (six cudaMallocs, four copies in, a memset, two launches, cudaDeviceSynchronize,
# copies out) under `rgpu run` against the server in RGPU_SERVER (with_server.sh), with the
# client's round trips traced (RGPU_LOG=debug), and checks that the synchronize that ends its
# first kernels is round trip 3 or earlier: the context, the launches, the copies in and the
# memset are posted; what is left is the slab the allocations are carved from, the module and
# the synchronize itself.
#   first_kernel_round_trips.sh BIN_DIR PROGRAM
set -uo pipefail
bin=$1 program=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
RGPU_LOG=debug "$bin/rgpu" run -- "$program" >"$out" 2>&1
rc=$?
if [ $rc -ne 0 ]; then echo "$program failed ($rc):"; grep -v 'round trip' "$out" | tail -n 20; exit 1; fi
first=$(grep -m1 -o 'round trip [0-9]*: CtxSynchronize' "$out" | grep -o '[0-9]*' | head -1)
grep 'round trip' "$out" | head -n 5 | sed 's/.*round trip/round trip/'
if [ -z "$first" ] || [ "$first" -gt 3 ]; then
  echo "first_kernel_round_trips: the first synchronize was round trip ${first:-none}, not 3 or earlier"
  exit 1
fi
echo "first_kernel_round_trips: the first kernels ended at round trip $first"
