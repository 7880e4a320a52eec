#!/usr/bin/env bash
# The packages (issue 18): scripts/package.sh makes the three Debian packages and the relocatable
# tarball from the build; the packages install into a fresh root (dpkg --root, maintainer scripts
# run there: the registry's operator key is made at installation), nothing lands on the system's
# library path (no libcuda.so.1 or libnvidia-ml.so.1 outside /usr/lib/rgpu), lintian finds
# nothing but the remarks packaging/README.md explains, and the demo (registry, server on the
# software GPU, CUDA programs, the bill) and a Slurm job through the installed SPANK plugin run
# from the installed files; then the same demo runs
# from the unpacked tarball, every library of which that is not glibc's, libstdc++'s or the
# host's RDMA stack resolving inside the tarball.
#   packages.sh SOURCE_DIR BUILD_DIR PROGRAMS_DIR
set -uo pipefail
src=$1 build=$2 programs=$3
work=$(mktemp -d)
chmod 755 "$work"  # the Slurm job of an ordinary user runs the installed files
trap 'rm -rf "$work"' EXIT
fail() { echo "packages: $*"; exit 1; }

"$src/scripts/package.sh" "$work/out" "$build" >"$work/package.log" 2>&1 ||
  fail "package.sh: $(cat "$work/package.log")"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
for p in client server registry; do
  [ -f "$work/out/rgpu-${p}_${version}_amd64.deb" ] || fail "no rgpu-$p package: $(ls "$work/out")"
done
tarball=$work/out/rgpu-$version-linux-x86_64.tar.gz
[ -f "$tarball" ] || fail "no tarball"

# A fresh root: dpkg's database and nothing else.
root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
dpkg --root="$root" --force-script-chrootless --force-depends --force-not-root \
  -i "$work"/out/*.deb >"$work/dpkg.log" 2>&1 || fail "dpkg -i: $(cat "$work/dpkg.log")"
for f in usr/bin/rgpu usr/bin/rgpu-tool usr/bin/rgpu-server usr/bin/rgpu-registry usr/lib/rgpu/librgpu-cuda.so \
  usr/lib/rgpu/librgpu-client.so usr/lib/rgpu/librgpu-nvml.so usr/lib/rgpu/libsoftgpu-cuda.so \
  usr/lib/systemd/system/rgpu-server.service usr/lib/systemd/system/rgpu-registry.service \
  usr/share/rgpu/prices usr/lib/rgpu/slurm/spank_rgpu.so \
  usr/share/doc/rgpu-client/examples/plugstack-rgpu.conf; do
  [ -e "$root/$f" ] || fail "not installed: /$f"
done
key=$root/var/lib/rgpu-registry/registry.db.admin-key
[ -s "$key" ] && [ "$(stat -c %a "$key")" = 600 ] || fail "no operator key made at installation"
faces=$(cd "$root" && find . \( -name 'libcuda.so*' -o -name 'libnvidia-ml.so*' \) | grep -v '^./usr/lib/rgpu/')
[ -z "$faces" ] || fail "a face on the system's library path: $faces"

# lintian: every remark not explained in packaging/README.md fails.
lintian --fail-on warning --suppress-tags no-manual-page,maintscript-calls-ldconfig \
  "$work"/out/*.deb >"$work/lintian.log" 2>&1 || fail "lintian: $(cat "$work/lintian.log")"

RGPU_BIN=$root/usr/bin RGPU_PROGRAMS=$programs "$src/scripts/demo.sh" >"$work/demo.log" 2>&1 &&
  grep -q "^TOTAL" "$work/demo.log" && grep -q "vector_add: 100000 elements OK" "$work/demo.log" ||
  fail "the demo from the installed packages: $(cat "$work/demo.log")"

# The installed Slurm plugin, which finds the installed rgpu and faces beside itself, under a real
# Slurm (skipped only where Slurm cannot start).
"$src/tests/slurm/srun_rgpu.sh" "$root/usr/bin" "$programs" "$root/usr/lib/rgpu/slurm/spank_rgpu.so" \
  >"$work/slurm.log" 2>&1
rc=$?
[ $rc = 0 ] || [ $rc = 77 ] || fail "Slurm with the installed plugin: $(cat "$work/slurm.log")"
[ $rc = 77 ] && echo "packages: Slurm part skipped: $(tail -1 "$work/slurm.log")"

# The tarball: everything but glibc and the C++ runtime inside it.
mkdir "$work/t"
tar -xzf "$tarball" -C "$work/t"
tree=$work/t/rgpu-$version-linux-x86_64
for f in "$tree"/bin/* "$tree"/lib/rgpu/*.so* "$tree"/lib/rgpu/ucx/*.so*; do
  [ -L "$f" ] && continue
  outside=$(env -u LD_LIBRARY_PATH ldd "$f" | awk '$2 == "=>" {print $3}' |
    grep -v "^$tree/" |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so' |
    grep -Ev '/(libibverbs|librdmacm|libmlx[45]|libefa|libnl-3|libnl-route-3)\.so')
  [ -z "$outside" ] || fail "$(basename "$f") needs libraries outside the tarball: $outside"
done
env -u LD_LIBRARY_PATH RGPU_BIN=$tree/bin RGPU_PROGRAMS=$programs "$src/scripts/demo.sh" \
  >"$work/demo-tarball.log" 2>&1 && grep -q "^TOTAL" "$work/demo-tarball.log" ||
  fail "the demo from the tarball: $(cat "$work/demo-tarball.log")"
echo "packages: three packages install into a fresh root and run the demo; lintian clean but" \
  "for the explained remarks; the tarball is self-contained and runs it too"
