#!/usr/bin/env bash
# Makes rgpu's packages from a built tree (scripts/setup.sh builds one) into OUTDIR:
#   rgpu-client_VERSION_amd64.deb, rgpu-server_..., rgpu-registry_...   (CPack's DEB generator;
#     dependencies on Debian's libraries from dpkg-shlibdeps)
#   rgpu-VERSION-linux-x86_64.tar.gz   a relocatable tree (bin/, lib/rgpu/) holding every binary
#     and every library they need that is not glibc's or libstdc++'s (UCX's transport modules
#     too), each found through $ORIGIN: it runs where none of Debian's packages are installed
#     (glibc 2.36 or newer). The RDMA stack (libibverbs, librdmacm, their providers and libnl) is the
#     host's, as it must match the host's kernel drivers: without it UCX leaves out its verbs
#     transports and uses TCP and shared memory.
#     When the build has the test programs, the tarball carries tests/ too: the real-GPU script
#     (tests/gpu/run_from_tarball.sh), the end-to-end scripts it runs, the driver and runtime
#     test programs, and the NVIDIA samples the suite built (build/corpus) with their folders:
#     a machine with a GPU and nothing else runs it from the tarball alone.
# Usage: scripts/package.sh OUTDIR [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "$1")
build=$(realpath "${2:-$root/build}")
mkdir -p "$out"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
cmake --build "$build" --target rgpu rgpu-server rgpu-registry rgpu-client rgpu-cuda rgpu-hip \
  rgpu-hip-runtime rgpu-nvml rgpu-local rgpu-cuda-local softgpu-cuda rgpu-backend-hip >/dev/null
# The Slurm plugin, where the tree has it (configured only with Slurm's spank.h); once configured
# it installs, so a failed build shows at the install below.
if grep -q '^RGPU_SPANK_INCLUDE:PATH=/' "$build/CMakeCache.txt"; then
  cmake --build "$build" --target spank_rgpu >/dev/null
fi

# Debian packages.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$build" && cpack -G DEB -B "$work/cpack" >"$work/cpack.log") ||
  { cat "$work/cpack.log"; exit 1; }
cp "$work"/cpack/*.deb "$out/"

# The relocatable tarball.
name=rgpu-$version-linux-x86_64
stage=$work/$name
cmake --install "$build" --prefix "$stage" --strip >/dev/null
lib=$stage/lib/rgpu
# Libraries every Linux machine has (glibc's, the C++ runtime's): never bundled.
system_library() {
  case "$(basename "$1")" in
    linux-vdso.so.*|ld-linux*.so.*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|\
    libresolv.so.*|libutil.so.*|libstdc++.so.*|libgcc_s.so.*) return 0 ;;
    libibverbs.so.*|librdmacm.so.*|libmlx[45].so.*|libefa.so.*|libnl-3.so.*|libnl-route-3.so.*)
      return 0 ;;  # the host's RDMA stack
  esac
  return 1
}
# bundle FILE: copies every library FILE needs (ldd: the whole closure) into lib/rgpu.
bundle() {
  ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r dep; do
    system_library "$dep" && continue
    case "$dep" in "$stage"/*) continue ;; esac
    target=$lib/$(basename "$dep")
    [ -e "$target" ] && continue
    cp -L "$dep" "$target"
    chmod u+w "$target"
    patchelf --set-rpath '$ORIGIN' "$target"
  done
}
# UCX finds its transport modules in ucx/ beside libucs: bring them, and what they need.
shopt -s nullglob
libucs=$(ldd "$lib/librgpu-client.so" | awk '$1 ~ /^libucs\.so/ {print $3; exit}')
ucx_modules=$(dirname "$libucs")/ucx
modules=("$ucx_modules"/*.so*)
if [ -z "$libucs" ] || [ ${#modules[@]} -eq 0 ]; then
  echo "package.sh: UCX's transport modules not found (libucs: '${libucs:-none}')" >&2
  exit 1
fi
mkdir -p "$lib/ucx"
for m in "${modules[@]}"; do
  cp -L "$m" "$lib/ucx/"
  chmod u+w "$lib/ucx/$(basename "$m")"
  patchelf --set-rpath '$ORIGIN:$ORIGIN/..' "$lib/ucx/$(basename "$m")"
done
for f in "$stage"/bin/* "$lib"/*.so* "$lib"/ucx/*.so*; do
  [ -L "$f" ] || bundle "$f"
done

# The test bundle.
programs=$build/tests/programs
if [ -x "$programs/driver_vector_add" ]; then
  t=$stage/tests
  mkdir -p "$t/gpu" "$t/e2e" "$t/programs/runtime" "$t/corpus"
  cp "$root/tests/gpu/run_from_tarball.sh" "$root/tests/gpu/torch_step.py" \
    "$root/tests/gpu/smi_sensors.sh" "$t/gpu/"
  cp "$root"/tests/e2e/{with_server.sh,lib.sh,isolation.sh,remanence.sh,kill_client.sh,migrate.sh,migrate_mapped.sh} \
    "$t/e2e/"
  cp "$programs"/driver_* "$programs"/kernels.fatbin "$programs"/kernels.ptx "$t/programs/"
  cp "$programs"/runtime/rt_*_static "$t/programs/runtime/"
  # The lanes benchmark: a real GPU says whether a thread's rounds beside another's long wait
  # stay within 1.2x of its solo rounds (docs/performance.md, "Lanes").
  [ -x "$build/bin/lanes_bench" ] && cp "$build/bin/lanes_bench" "$t/programs/"
  corpus=$build/corpus
  list=$root/../shared/corpus/samples.list
  if [ -d "$corpus/out" ] && [ -f "$list" ]; then
    # NAME|DIR|ARGS|SUCCESS for each sample built, its program placed in a copy of its folder
    # (some read data files or kernels built beside their sources).
    for d in "$corpus"/out/*/; do
      n=$(basename "$d")
      [ -x "$d/$n" ] || continue
      line=$(awk -F'|' -v n="$n" '$1 == n {print; exit}' "$list")
      IFS='|' read -r _ dir _ _ _ args success <<<"$line"
      [ -n "$dir" ] && [ -d "$corpus/src/Samples/$dir" ] || continue
      mkdir -p "$t/corpus/$n"
      cp -r "$corpus/src/Samples/$dir/." "$t/corpus/$n/"
      cp "$d/$n" "$t/corpus/$n/"
      echo "$n|$args|$success" >>"$t/corpus/samples.run"
    done
  fi
  # Without their symbols (the fat binaries stay): the tarball must also fit where it travels.
  find "$t" -type f -perm -u+x | while read -r f; do
    if head -c 4 "$f" | grep -q ELF; then strip --strip-unneeded "$f"; fi
  done
fi
tar -czf "$out/$name.tar.gz" -C "$work" "$name"
ls -1 "$out"
