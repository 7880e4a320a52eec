#!/usr/bin/env bash
# Builds NVIDIA's CUDA samples named in tests/corpus/samples.txt from ../shared/corpus (never copied
# into the repo: read from beside the checkout) and runs each under `rgpu run` against a fresh
# rgpu-server on the software GPU, over SCHEME (tcp or shm). A sample passes when it exits 0 and
# prints its own success line (the SUCCESS column of the corpus's samples.list; "-": exit 0 only).
#   run_samples.sh build BIN_DIR WORK_DIR        builds them (idempotent)
#   run_samples.sh run BIN_DIR WORK_DIR SCHEME   runs them
# Exits 77 (skipped) when ../shared/corpus is not there.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
corpus=$(cd "$here/../../../shared/corpus" 2>/dev/null && pwd) || {
  echo "no ../shared/corpus beside the checkout: skipped"; exit 77; }
mode=$1 bin=$2 work=$3
mkdir -p "$work"
names=$(grep -v '^#' "$here/samples.txt" | grep -v '^$')
src=$work/src
if [ ! -d "$src/Samples" ]; then
  rm -rf "$src.tmp" && cp -r "$corpus/cuda-samples" "$src.tmp" && mv "$src.tmp" "$src"
fi
if [ "$mode" = build ]; then
  # shellcheck disable=SC2086
  SAMPLES_SRC=$src "$corpus/build.sh" "$work/out" $names >"$work/build.log" 2>&1
  failed=0
  for n in $names; do
    [ -x "$work/out/$n/$n" ] || { echo "$n did not build:"; tail -5 "$work/out/$n/build.log"; failed=1; }
  done
  exit $failed
fi
scheme=$4
log=$work/$scheme
mkdir -p "$log"
rm -f "$log/url"
"$bin/rgpu-server" --listen "$scheme://127.0.0.1:0" --backend softgpu --port-file "$log/url" \
  2>"$log/server.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 200); do [ -s "$log/url" ] && break; sleep 0.05; done
url=$(cat "$log/url")
passed=0 failed=""
for n in $names; do
  line=$(grep -v '^[[:space:]]*#' "$corpus/samples.list" | grep "^$n|" | head -1)
  IFS='|' read -r _ dir _ _ _ args success <<<"$line"
  # shellcheck disable=SC2086
  (cd "$src/Samples/$dir" && timeout -k 10 120 "$bin/rgpu" run --server "$url" -- \
    "$work/out/$n/$n" $args) </dev/null >"$log/$n.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && { [ "$success" = - ] || grep -Eq -- "$success" "$log/$n.log"; }; then
    passed=$((passed + 1))
  else
    failed="$failed $n"
    echo "--- $n (exit $rc):"; tail -8 "$log/$n.log"
  fi
done
echo "$scheme: $passed passed${failed:+, failed:$failed}"
[ -z "$failed" ]
