#!/usr/bin/env bash
# Posted copies out (MemcpyDtoHPosted): runs driver_posted_reads (its own checks of the bytes,
# however the program learns a copy is done) under `rgpu run` against the server in RGPU_SERVER
# (with_server.sh), with the client's round trips traced (RGPU_LOG=debug), and checks that its
# 100 rounds of launch, copy out into pinned memory and synchronize took one round trip each,
# not two: the copies were posted (the default; RGPU_POSTED_READS=0 turns it off).
#   posted_reads.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
RGPU_LOG=debug "$bin/rgpu" run -- "$programs/driver_posted_reads" >"$out" 2>&1
rc=$?
if [ $rc -ne 0 ]; then echo "driver_posted_reads failed ($rc):"; tail -n 30 "$out"; exit 1; fi
trips=$(awk '/posted reads: begin/ {on = 1} /posted reads: end/ {on = 0} on && /round trip [0-9]+:/ {n++}
             END {print n + 0}' "$out")
echo "posted_reads: 100 rounds took $trips round trips"
if [ "$trips" -gt 105 ]; then
  echo "posted_reads: more than one round trip a round: the copies out were not posted"
  grep -m 10 'round trip' "$out"
  exit 1
fi
grep -q 'posted reads: .* OK' "$out" || { echo "no OK line"; tail -n 20 "$out"; exit 1; }
