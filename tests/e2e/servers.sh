#!/usr/bin/env bash
# One program, devices of two servers (issue 17): server A with two software GPUs and server B
# with one, RGPU_SERVER=A,B (rgpu run --server A --server B), over $scheme (tcp unless set):
#   - driver_servers check 001: work on each device, peer answers, copies both ways and event
#     waits across servers (and between A's own two devices), a kernel given B's pointer on A;
#     the copies between servers go server to server (seen in the client's debug log), and the
#     check passes with them through the client too (RGPU_PEER_COPIES=0);
#   - CUDA_VISIBLE_DEVICES reorders and selects the three devices by index and by UUID prefix;
#   - the same with both servers made to start their device addresses at the same place: the
#     client refuses the addresses that collide (cuMemAlloc asks again) and the check still holds;
#   - driver_servers survive: server B killed mid-run, its device fails with a CUDA error, A's go on;
#   - a token for each server (--token twice), and a token list of the wrong length refused;
#   - a server that refuses the token fails cuInit and the sessions the others opened end at once.
#   servers.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
a_pid= b_pid=
trap 'kill -KILL $a_pid $b_pid 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "servers: $*"; echo "---- server A ----"; cat "$work/a.log"; echo "---- server B ----"; cat "$work/b.log"; exit 1; }

# launch NAME DEVICES [ENV...]: a softgpu server with DEVICES devices ($NAME_ARGS more options);
# sets $launched (its pid) once its URL is in $work/NAME.url.
launch() {
  local name=$1 devices=$2 args_var="${1^^}_ARGS"
  shift 2
  rm -f "$work/$name.url"
  # shellcheck disable=SC2086
  env RGPU_SOFTGPU_DEVICES="$devices" "$@" "$bin/rgpu-server" --listen "${scheme:-tcp}://127.0.0.1:0" \
    --backend softgpu --port-file "$work/$name.url" ${!args_var:-} 2>>"$work/$name.log" &
  launched=$!
  for _ in $(seq 200); do [ -s "$work/$name.url" ] && return 0; sleep 0.05; done
  fail "server $name did not start"
}

# start_pair [A_ENV] [B_ENV]: servers A (two devices) and B (one), with extra environment each;
# sets $a_url, $b_url, $a_pid, $b_pid.
start_pair() {
  kill -TERM $a_pid $b_pid 2>/dev/null; wait $a_pid $b_pid 2>/dev/null
  # shellcheck disable=SC2086
  launch a 2 ${1:-}; a_pid=$launched
  # shellcheck disable=SC2086
  launch b 1 ${2:-}; b_pid=$launched
  a_url=$(cat "$work/a.url") b_url=$(cat "$work/b.url")
}
: >"$work/a.log"; : >"$work/b.log"

start_pair
"$bin/rgpu" run --server "$a_url" --server "$b_url" -- "$programs/driver_servers" check 001 \
  >"$work/out" 2>&1 || { cat "$work/out"; fail "check over two servers failed"; }
cat "$work/out"
# The bytes went server to server (the client only asked for the copies), and the same check
# passes with the copies made through the client instead (RGPU_PEER_COPIES=0).
RGPU_LOG=debug "$bin/rgpu" run --server "$a_url" --server "$b_url" -- \
  "$programs/driver_servers" check 001 >"$work/out" 2>&1 || { cat "$work/out"; fail "check (debug)"; }
grep -q "between servers: server 1 fetches from server 0" "$work/out" &&
  grep -q "between servers: server 0 sends to server 1" "$work/out" &&
  grep -q "between servers: server 0 fetches from server 1" "$work/out" ||
  fail "copies between the servers did not go server to server"
RGPU_PEER_COPIES=0 "$bin/rgpu" run --server "$a_url" --server "$b_url" -- \
  "$programs/driver_servers" check 001 >"$work/out" 2>&1 ||
  { cat "$work/out"; fail "check with copies through the client failed"; }
echo "servers: copies between the servers go server to server (and through the client when asked)"

# CUDA_VISIBLE_DEVICES on top of the servers' devices: by index, and by UUID prefix.
RGPU_SERVER="$a_url,$b_url" "$bin/rgpu" run -- "$programs/driver_servers" uuids >"$work/uuids" ||
  fail "uuids failed"
mapfile -t uuid <"$work/uuids"
[ ${#uuid[@]} -eq 3 ] || fail "expected 3 devices, got: $(cat "$work/uuids")"
got=$(CUDA_VISIBLE_DEVICES=2,0 RGPU_SERVER="$a_url,$b_url" "$bin/rgpu" run -- \
  "$programs/driver_servers" uuids | tr '\n' ' ')
[ "$got" = "${uuid[2]} ${uuid[0]} " ] || fail "CUDA_VISIBLE_DEVICES=2,0 gave: $got"
got=$(CUDA_VISIBLE_DEVICES="${uuid[1]:0:40},2" RGPU_SERVER="$a_url,$b_url" "$bin/rgpu" run -- \
  "$programs/driver_servers" uuids | tr '\n' ' ')
[ "$got" = "${uuid[1]} ${uuid[2]} " ] || fail "CUDA_VISIBLE_DEVICES by UUID gave: $got"
got=$(CUDA_VISIBLE_DEVICES=1,7,0 RGPU_SERVER="$a_url,$b_url" "$bin/rgpu" run -- \
  "$programs/driver_servers" uuids | tr '\n' ' ')
[ "$got" = "${uuid[1]} " ] || fail "CUDA_VISIBLE_DEVICES=1,7,0 (ends at 7) gave: $got"
# Reordered, the check runs with B's device first (layout 100).
CUDA_VISIBLE_DEVICES=2,0,1 "$bin/rgpu" run --server "$a_url" --server "$b_url" -- \
  "$programs/driver_servers" check 100 >"$work/out" 2>&1 ||
  { cat "$work/out"; fail "check with CUDA_VISIBLE_DEVICES=2,0,1 failed"; }
echo "servers: CUDA_VISIBLE_DEVICES selects and orders the devices of both servers"

# Both servers' device addresses start at one place: every collision is refused by the client,
# which asks again for cuMemAlloc; the check (disjoint addresses, each pointer its device's) holds.
# (The two servers' devices numbered 0 then have one UUID, as both instances are one number:
# A's device 1 and B's device 0 are used.)
start_pair RGPU_SOFTGPU_ADDRESS_BASE=0x410000000000 RGPU_SOFTGPU_ADDRESS_BASE=0x410000000000
RGPU_LOG=warn CUDA_VISIBLE_DEVICES=1,2 "$bin/rgpu" run --server "$a_url" --server "$b_url" -- \
  "$programs/driver_servers" check 01 >"$work/out" 2>&1 ||
  { cat "$work/out"; fail "check with colliding device addresses failed"; }
grep -q "overlaps memory of server" "$work/out" ||
  { cat "$work/out"; fail "no collision happened (the test does not test what it says)"; }
echo "servers: colliding device addresses of two servers refused and allocated again"

# Server B dies mid-run: only its device fails.
start_pair
rm -f "$work/ready" "$work/go"
"$bin/rgpu" run --server "$a_url" --server "$b_url" -- "$programs/driver_servers" survive \
  "$work/ready" "$work/go" >"$work/out" 2>&1 &
client=$!
for _ in $(seq 600); do [ -e "$work/ready" ] && break; sleep 0.05; done
[ -e "$work/ready" ] || { kill -KILL $client; cat "$work/out"; fail "the program did not get ready"; }
kill -KILL $b_pid
wait $b_pid 2>/dev/null
touch "$work/go"
wait $client || { cat "$work/out"; fail "the program did not survive the loss of server B"; }
cat "$work/out"
kill -0 $a_pid || fail "server A died"

# Tokens: one per server, in order; a list of the wrong length is refused with the reason.
printf 'alpha-secret alice 1G 1\n' >"$work/a.tokens"
printf 'beta-secret alice 1G 1\n' >"$work/b.tokens"
A_ARGS="--tokens $work/a.tokens" B_ARGS="--tokens $work/b.tokens" start_pair
"$bin/rgpu" run --server "$a_url" --server "$b_url" --token alpha-secret --token beta-secret -- \
  "$programs/driver_servers" uuids >"$work/out" 2>&1 || { cat "$work/out"; fail "two tokens refused"; }
[ "$(wc -l <"$work/out")" -eq 3 ] || { cat "$work/out"; fail "two tokens: not 3 devices"; }
if "$bin/rgpu" run --server "$a_url" --server "$b_url" --token beta-secret --token alpha-secret -- \
  "$programs/driver_servers" uuids >"$work/out" 2>&1; then
  fail "tokens given in the wrong order were accepted"
fi
if RGPU_TOKEN=alpha-secret,beta-secret,gamma "$bin/rgpu" run --server "$a_url" \
  --server "$b_url" -- "$programs/driver_servers" uuids >"$work/out" 2>&1; then
  fail "three tokens for two servers were accepted"
fi
grep -q "3 tokens for 2 servers" "$work/out" || { cat "$work/out"; fail "no reason given"; }
# A server that refuses (B, given A's token) fails cuInit, and the session A had already opened
# ends then, not when the program exits: nothing stays open (or billed) on a server for a program
# that cannot start.
ended_before=$(grep -Ec "session [0-9]+: (ended by its client|client gone)" "$work/a.log")
rm -f "$work/ready" "$work/go"
"$bin/rgpu" run --server "$a_url" --server "$b_url" --token alpha-secret --token alpha-secret -- \
  "$programs/driver_servers" refused "$work/ready" "$work/go" >"$work/out" 2>&1 &
client=$!
for _ in $(seq 600); do [ -e "$work/ready" ] && break; sleep 0.05; done
[ -e "$work/ready" ] || { kill -KILL $client; cat "$work/out"; fail "refused: the program did not get ready"; }
ended=$ended_before
for _ in $(seq 100); do
  ended=$(grep -Ec "session [0-9]+: (ended by its client|client gone)" "$work/a.log")
  [ "$ended" -gt "$ended_before" ] && break
  sleep 0.05
done
touch "$work/go"
wait $client || { cat "$work/out"; fail "refused: the program failed"; }
[ "$ended" -gt "$ended_before" ] ||
  { cat "$work/out"; fail "server A kept the session of a program whose cuInit failed on server B"; }
grep -q "cuInit answered CUDA_ERROR_NOT_PERMITTED" "$work/out" || { cat "$work/out"; fail "refused: cuInit"; }
echo "servers: a refusing server fails cuInit and ends the sessions the others opened"
kill -TERM $a_pid $b_pid; wait $a_pid $b_pid 2>/dev/null
# The program's own options after "--" stay the program's, with --server given twice.
out=$("$bin/rgpu" run --server "$a_url" --server "$b_url" -- /bin/echo -hA=256 --foo) ||
  fail "rgpu run with two --server and program options"
[ "$out" = "-hA=256 --foo" ] || fail "the program's options were taken by rgpu run: $out"
echo "servers: OK"
