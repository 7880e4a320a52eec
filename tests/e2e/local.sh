#!/usr/bin/env bash
# The software GPU as the program's own libcuda.so.1, no server process: programs run with
# LD_LIBRARY_PATH=BUILD/lib/softgpu-local (the face whose default server is RGPU_SERVER=local,
# server/local_server.h) and with `rgpu run --server local`. NVIDIA's runtime (static and shared,
# with cuBLAS), a program that moves its environment after cuInit, one that closes the driver and
# calls on through its entry points, one with pthread keys of its own, managed memory, and
# Debian's hashcat
# (NVRTC, dlopen of libcuda.so.1) when installed.
#   local.sh BUILD_DIR RUNTIME_PROGRAMS_DIR GUEST_PROGRAMS_DIR
set -uo pipefail
build=$1 runtime=$2 guest=$3
unset RGPU_SERVER
fail=0
run() {  # NAME EXPECTED-OUTPUT COMMAND...
  local name=$1 expected=$2 out
  shift 2
  out=$(timeout 280 "$@" 2>&1)
  local rc=$?
  if [ $rc -ne 0 ] || ! grep -q "$expected" <<<"$out"; then
    echo "FAIL $name (exit $rc):"; echo "$out" | tail -20; fail=1
  else
    echo "ok   $name"
  fi
}
lib="LD_LIBRARY_PATH=$build/lib/softgpu-local"
run device_query_static "rt_device_query: OK" env "$lib" "$runtime/rt_device_query_static"
run cublas_shared "rt_cublas: OK" env "$lib" "$runtime/rt_cublas_shared"
run graph_capture_static "rt_graph_capture: OK" env "$lib" "$runtime/rt_graph_capture_static"
run setenv_after_init "setenv_after_init: OK" env "$lib" "$guest/guest_setenv_after_init"
run dlclose_driver "dlclose_driver: OK" env "$lib" "$guest/guest_dlclose_driver"
run pthread_keys "pthread_keys: OK" env "$lib" "$guest/guest_pthread_keys"
run rgpu_run_local "rt_errors: OK" "$build/bin/rgpu" run --server local -- "$runtime/rt_errors_shared"
# __managed__ variables: the client maps them at their device addresses in this same process,
# where the in-process server's softgpu must have left those addresses free.
run managed_local "rt_managed: OK" "$build/bin/rgpu" run --server local -- "$runtime/rt_managed_static"
run managed_ranges_local "rt_managed_ranges: OK" env "$lib" "$runtime/rt_managed_ranges_shared"
if command -v hashcat >/dev/null; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  hash=$(printf '%s' 4321 | md5sum | cut -d' ' -f1)
  # A session of its own: hashcat refuses to start beside another instance of the same session
  # (e2e_hashcat may be running at the same time).
  run hashcat "^Status\.*: Cracked" env HOME="$work" "$lib" hashcat -m 0 -a 3 "$hash" '?d?d?d?d' \
    --backend-ignore-opencl --potfile-path "$work/pot" --session "rgpu-local-$$"
fi
exit $fail
