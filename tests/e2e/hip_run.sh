#!/usr/bin/env bash
# Runs one HIP test program under `rgpu run` (RGPU_SERVER set by with_server.sh) and checks how
# it ended:
#   hip_run.sh BIN_DIR EXPECT PROGRAM ARGS...
# EXPECT: pass      the program succeeds (exit 0) and rgpu prints nothing into its output;
#         rejected  the program reaches a kernel and the server's device refuses its code object:
#                   exit 3 with hipErrorNoBinaryForGpu, and the server's log says why;
#         quiet     the program (not a HIP program) succeeds, prints exactly "quiet", and the
#                   server saw no session;
#         no_runtime  with the HIP runtime library missing (RGPU_HIP_RUNTIME_LIBRARY names no
#                   file), the program fails cleanly (exit 1, no crash) and stderr says why;
#         logged    the program succeeds, and with RGPU_LOG=warn the entry point rgpu does not
#                   implement (hipExtStreamCreateWithCUMask) is named on stderr.
set -uo pipefail
bin=$1 expect=$2
shift 2
lib=$bin/../lib
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# `rgpu run` preloads the CUDA face and the HIP face (which carries the SONAME libamdhip64.so.5,
# so hipcc programs bind to it).
run() { "$bin/rgpu" run -- "$@"; }
case $expect in
  pass)
    run "$@" >"$out" 2>&1; rc=$?
    cat "$out"
    [ $rc -eq 0 ] || { echo "hip_run: $1 exited $rc, expected 0"; exit 1; }
    # A guest is quiet unless asked (RGPU_LOG).
    if [ -z "${RGPU_LOG:-}" ] && grep -Eq '^(rgpu|\[rgpu)' "$out"; then
      echo "hip_run: rgpu printed into the program's output without RGPU_LOG"; exit 1
    fi ;;
  logged)
    RGPU_LOG=warn run "$@" >"$out" 2>&1; rc=$?
    cat "$out"
    [ $rc -eq 0 ] || { echo "hip_run: $1 exited $rc, expected 0"; exit 1; }
    grep -q "hipExtStreamCreateWithCUMask is not supported" "$out" ||
      { echo "hip_run: the unsupported entry point was not named"; exit 1; } ;;
  quiet)
    run "$@" >"$out" 2>&1; rc=$?
    cat "$out"
    [ $rc -eq 0 ] && [ "$(cat "$out")" = "quiet" ] ||
      { echo "hip_run: a process that never calls HIP was disturbed"; exit 1; }
    if [ -n "${RGPU_SERVER_LOG:-}" ] && grep -q "connected" "$RGPU_SERVER_LOG"; then
      echo "hip_run: a process that never calls HIP connected to the server"; exit 1
    fi ;;
  no_runtime)
    RGPU_HIP_RUNTIME_LIBRARY=/nonexistent/librgpu-hip-runtime.so run "$@" >"$out" 2>&1; rc=$?
    cat "$out"
    [ $rc -eq 1 ] || { echo "hip_run: $1 exited $rc, expected 1 (a clean failure)"; exit 1; }
    grep -q "rgpu: cannot load the HIP runtime /nonexistent/librgpu-hip-runtime.so" "$out" ||
      { echo "hip_run: nothing said the HIP runtime is missing"; exit 1; } ;;
  rejected)
    run "$@" >"$out" 2>&1; rc=$?
    cat "$out"
    [ $rc -eq 3 ] || { echo "hip_run: $1 exited $rc, expected 3 (kernel refused)"; exit 1; }
    grep -q "hipErrorNoBinaryForGpu" "$out" ||
      { echo "hip_run: no hipErrorNoBinaryForGpu in the program's output"; exit 1; }
    if [ -n "${RGPU_SERVER_LOG:-}" ]; then
      grep -Eiq "AMDGPU|code object|no PTX" "$RGPU_SERVER_LOG" ||
        { echo "hip_run: the server's log does not say why it refused the code"; exit 1; }
    fi ;;
  *) echo "hip_run: unknown expectation $expect"; exit 2 ;;
esac
