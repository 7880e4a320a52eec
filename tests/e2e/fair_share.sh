#!/usr/bin/env bash
# Fair sharing: tenants competing for one GPU under `rgpu-server --fair-share` receive GPU time in
# proportion to their weights (within 10%), as the server's metering measures it. Checked for
# weights 1:1 and 3:7.
#   fair_share.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
seconds=${FAIR_SHARE_SECONDS:-4}
iters=${FAIR_SHARE_ITERS:-40000}

check() {  # WEIGHT_A WEIGHT_B
  printf 'tok-a a 1G %s\ntok-b b 1G %s\n' "$1" "$2" >"$work/tokens"
  : >"$work/server.log"
  start_server "$work/server.log" --tokens "$work/tokens" --fair-share
  "$bin/rgpu" run --server "$url" --token tok-a -- "$programs/driver_fair_share_load" "$seconds" \
    "$iters" >"$work/a.out" 2>&1 &
  a=$!
  "$bin/rgpu" run --server "$url" --token tok-b -- "$programs/driver_fair_share_load" "$seconds" \
    "$iters" >"$work/b.out" 2>&1 &
  b=$!
  wait $a || { cat "$work/a.out"; exit 1; }
  wait $b || { cat "$work/b.out"; exit 1; }
  sleep 0.3
  kill -TERM $server
  wait $server
  busy_a=$(sed -n 's/.*tenant a gpu_busy_ms \([0-9.]*\).*/\1/p' "$work/server.log")
  busy_b=$(sed -n 's/.*tenant b gpu_busy_ms \([0-9.]*\).*/\1/p' "$work/server.log")
  [ -n "$busy_a" ] && [ -n "$busy_b" ] || { echo "no metering in the log"; cat "$work/server.log"; exit 1; }
  python3 - "$1" "$2" "$busy_a" "$busy_b" <<'PY' || exit 1
import sys
wa, wb, a, b = map(float, sys.argv[1:5])
share, want = a / (a + b), wa / (wa + wb)
print("weights %g:%g -> GPU time %.0f ms : %.0f ms, share of a %.3f (want %.3f)" % (wa, wb, a, b, share, want))
sys.exit(0 if abs(share - want) <= 0.1 * want else 1)
PY
}
check 1 1 || { echo "fair_share: 1:1 shares off by more than 10%"; exit 1; }
check 3 7 || { echo "fair_share: 3:7 shares off by more than 10%"; exit 1; }
