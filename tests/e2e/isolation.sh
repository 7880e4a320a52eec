#!/usr/bin/env bash
# One tenant's faulting kernel must not disturb another: while out_of_bounds faults its context,
# a concurrent session runs vector_add repeatedly, and both must succeed; the server stays up.
#   isolation.sh BIN_DIR PROGRAMS_DIR   (run inside with_server.sh)
set -uo pipefail
bin=$1 programs=$2
( for _ in 1 2 3; do "$bin/rgpu" run -- "$programs/driver_vector_add" || exit 1; done ) &
good=$!
"$bin/rgpu" run -- "$programs/driver_out_of_bounds" || { echo "out_of_bounds failed"; exit 1; }
wait $good || { echo "the concurrent session failed"; exit 1; }
"$bin/rgpu" run -- "$programs/driver_vector_add" || { echo "server unusable after the fault"; exit 1; }
