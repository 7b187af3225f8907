#!/usr/bin/env bash
# Builds the Vessel guest kernel from Debian's linux-source-6.1 and prints the
# path of the resulting vmlinux. The result is cached outside the clone under
# $VESSEL_CACHE_DIR/kernel/<key>/, where <key> hashes this script, the config
# fragment and the exact linux-source package version: a second run is instant.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${VESSEL_CACHE_DIR:-/var/cache/vessel}
src_tar=/usr/src/linux-source-6.1.tar.xz
[ -f "$src_tar" ] || { echo "kernel: $src_tar missing (apt-get install linux-source-6.1)" >&2; exit 1; }
src_ver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
key=$( { cat "$here/build.sh" "$here/vessel.config"; echo "$src_ver"; } | sha256sum | cut -c1-16)
out="$cache/kernel/$key"
if [ -f "$out/vmlinux" ]; then echo "$out/vmlinux"; exit 0; fi

work="$cache/kernel/build-$key"
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
echo "kernel: unpacking linux-source $src_ver (key $key)" >&2
tar -C "$work" -xf "$src_tar"
cd "$work"/linux-source-6.1
echo "kernel: configuring (tinyconfig + guest/kernel/vessel.config)" >&2
make -s tinyconfig >/dev/null
scripts/kconfig/merge_config.sh -m .config "$here/vessel.config" >/dev/null
make -s olddefconfig >/dev/null
# Every option the fragment asks for must have survived dependency resolution.
missing=0
while read -r line; do
  case "$line" in CONFIG_*=*) grep -qx "$line" .config || { echo "kernel: $line did not take" >&2; missing=1; } ;; esac
done < "$here/vessel.config"
[ "$missing" = 0 ] || exit 1
echo "kernel: building vmlinux with $(nproc) jobs (about 5 minutes on 2 cores)" >&2
make -s -j"$(nproc)" vmlinux >&2
mkdir -p "$out.tmp"
cp vmlinux "$out.tmp/vmlinux"
cp .config "$out.tmp/config"
rm -rf "$out"; mv "$out.tmp" "$out"
echo "$out/vmlinux"
