#!/usr/bin/env bash
# install_layout_check: `make install`'s installer (scripts/install.sh, which
# the target runs after the build) into temporary directories, then the
# layout of docs/operations.md checked file by file:
#   1. DESTDIR=<tmp> PREFIX=/usr/local: every file where the layout says,
#      executables executable, nothing outside the prefix, no missing shared
#      library, the guest artifacts identical to the build's;
#   2. PREFIX=/opt/vessel: the units and scripts name the new prefix, none
#      names /usr/local;
#   3. PREFIX=<tmp>/real (paths that exist): `systemd-analyze verify` on
#      every unit (syntax, known directives, ExecStart= executables);
#   4. the container images (deploy/docker/*.Dockerfile, whose build context
#      is such a staged install; docker itself cannot run here): every COPY
#      source and ENV path exists in the staged tree, and the apt-get list
#      names the package of every shared library the copied binaries link
#      and of every program vesseld runs.
# Usage: install_check.sh BUILD_DIR (build/<preset>, with artifacts.env).
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
install_to() {  # DESTDIR PREFIX
  DESTDIR=$1 PREFIX=$2 PRESET=$(basename "$build") "$src/scripts/install.sh" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; echo "FAIL: install into $1$2" >&2; exit 1; }
  # scripts/install.sh installs build/$PRESET of its own tree: that must be this build.
  [ "$build" = "$src/build/$(basename "$build")" ] || { echo "FAIL: $build is not under $src/build" >&2; exit 1; }
}
set -a; . "$build/artifacts.env"; set +a

# 1. The layout under DESTDIR.
root=$tmp/root
install_to "$root" /usr/local
p=$root/usr/local
for f in bin/vessel bin/vesseld bin/vessel-gateway lib/vessel/vessel-templates lib/vessel/node-entrypoint \
  lib/vessel/vessel-volume-server; do
  [ -f "$p/$f" ] && [ -x "$p/$f" ] || fail "$f: missing or not executable"
done
expected=(
  lib/vessel/vessel-memfile-shim.so
  lib/systemd/system/vesseld.service lib/systemd/system/vessel-api.service
  lib/systemd/system/vessel-node.service
  share/vessel/kernel/vmlinux share/vessel/images/minimal.ext4 share/vessel/images/debian.ext4
  share/vessel/templates/minimal/template.json share/vessel/templates/debian/template.json
  share/vessel/templates/base/template.json
  share/vessel/config/vesseld.env share/vessel/config/api.env share/vessel/config/node.env
  share/vessel/console/index.html share/vessel/console/app.js share/vessel/console/vendor/xterm.js
)
for f in "${expected[@]}"; do [ -f "$p/$f" ] || fail "$f: missing"; done
outside=$(cd "$root" && find . -mindepth 1 \( -path ./usr -o -path ./usr/local -o -path './usr/local/*' \) -prune -o -print)
[ -z "$outside" ] || fail "installed outside the prefix: $outside"
[ "$(cd "$root/usr" && ls)" = local ] || fail "installed under /usr but outside /usr/local"
# Only what the layout lists: a stray file (a test binary, a build leftover) fails.
# The console's directory is the build's console/ as it is (its own files).
extra=$(cd "$p" && find . -type f | sed 's|^\./||' | grep -v '^share/vessel/console/' | sort |
  grep -vxF -f <(printf '%s\n' bin/vessel bin/vesseld bin/vessel-gateway lib/vessel/vessel-templates \
    lib/vessel/node-entrypoint lib/vessel/vessel-volume-server "${expected[@]}") || true)
[ -z "$extra" ] || fail "installed but not in the layout: $extra"
cmp -s "$VESSEL_KERNEL" "$p/share/vessel/kernel/vmlinux" || fail "kernel differs from $VESSEL_KERNEL"
cmp -s "$VESSEL_MINIMAL_IMAGE" "$p/share/vessel/images/minimal.ext4" || fail "minimal image differs"
cmp -s "$VESSEL_DEBIAN_IMAGE" "$p/share/vessel/images/debian.ext4" || fail "debian image differs"
for b in bin/vessel bin/vesseld bin/vessel-gateway lib/vessel/vessel-volume-server; do
  missing=$(ldd "$p/$b" | grep "not found" || true)
  [ -z "$missing" ] || fail "$b: $missing"
done
# vesseld finds the gateway and the jail's preload library from where it is
# installed (daemon.cc: next to itself, then <prefix>/lib/vessel/).
for u in vesseld vessel-api vessel-node; do
  grep -q "^ExecStart=/usr/local/bin/vesseld" "$p/lib/systemd/system/$u.service" ||
    fail "$u.service: ExecStart is not /usr/local/bin/vesseld"
done

# 2. Another prefix: every path in the units and the script follows it.
install_to "$tmp/opt" /opt/vessel
o=$tmp/opt/opt/vessel
for f in lib/systemd/system/vesseld.service lib/systemd/system/vessel-api.service \
  lib/systemd/system/vessel-node.service lib/vessel/vessel-templates; do
  ! grep -n "/usr/local" "$o/$f" || fail "$f still names /usr/local under --prefix /opt/vessel"
done
grep -q "^ExecStart=/opt/vessel/bin/vesseld --role=node" "$o/lib/systemd/system/vessel-node.service" ||
  fail "vessel-node.service: ExecStart not under /opt/vessel"
grep -q "^ExecStartPre=/opt/vessel/lib/vessel/vessel-templates" "$o/lib/systemd/system/vesseld.service" ||
  fail "vesseld.service: ExecStartPre not under /opt/vessel"
grep -q "^prefix=/opt/vessel$" "$o/lib/vessel/vessel-templates" || fail "vessel-templates: prefix not /opt/vessel"

# 3. systemd-analyze verify, on an install whose paths exist on this machine.
if command -v systemd-analyze >/dev/null; then
  real=$tmp/real
  install_to "" "$real"
  # The environment files and the token the units read at start (verify
  # does not open them, but keep the check honest if a later systemd does).
  out=$(cd "$real/lib/systemd/system" &&
    SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no ./vesseld.service ./vessel-api.service \
      ./vessel-node.service 2>&1) || fail "systemd-analyze verify: $out"
  # verify exits 0 on some findings it only prints (unknown keys, bad values).
  bad=$(grep -vE "^$|Failed to prepare filename|Cannot add dependency job" <<<"$out" || true)
  [ -z "$bad" ] || fail "systemd-analyze verify reported: $bad"
  echo "systemd-analyze verify: 3 units clean"
else
  fail "systemd-analyze not found (systemd)"
fi

# 4. The images.
pkg_of() {  # FILE -> its Debian package (usrmerge: /lib and /usr/lib both tried)
  local f
  f=$(realpath "$1")
  dpkg -S "$f" 2>/dev/null | cut -d: -f1 | head -1 && return
  dpkg -S "${f#/usr}" 2>/dev/null | cut -d: -f1 | head -1
}
needed_pkgs() {  # BINARY... -> packages of the libraries they link directly
  local b so path
  for b in "$@"; do
    for so in $(readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      path=$(ldd "$b" | awk -v s="$so" '$1 == s { print $3 }')
      [ -n "$path" ] || { fail "$b: $so not resolved"; continue; }
      realpath "$path"
    done
  done | sort -u >"$tmp/libs"
  # One dpkg -S for all (each call reads dpkg's whole file list).
  { dpkg -S $(cat "$tmp/libs") 2>/dev/null; dpkg -S $(sed 's|^/usr||' "$tmp/libs") 2>/dev/null; } |
    cut -d: -f1 | sort -u
}
for df in api node; do
  file=$src/deploy/docker/$df.Dockerfile
  [ -f "$file" ] || { fail "$file missing"; continue; }
  # The apt-get install list: the words of the RUN apt-get line and its continuations.
  apt_list=" $(sed -n '/apt-get install/,/rm -rf/p' "$file" | tr -s ' \\\n' ' ') "
  copied=()
  while read -r line; do
    set -- $line
    shift
    while [ $# -gt 1 ]; do
      [ -e "$root/${1%/}" ] || fail "$df.Dockerfile: COPY $1: not in the staged install"
      copied+=("$root/${1%/}")
      shift
    done
  done < <(grep '^COPY ' "$file")
  bins=()
  for c in "${copied[@]}"; do
    if [ -d "$c" ]; then
      while read -r f; do readelf -h "$f" >/dev/null 2>&1 && bins+=("$f"); done < <(find "$c" -type f)
    elif readelf -h "$c" >/dev/null 2>&1; then bins+=("$c"); fi
  done
  [ ${#bins[@]} -gt 0 ] || fail "$df.Dockerfile copies no binary"
  for pkg in $(needed_pkgs "${bins[@]}"); do
    [ "$pkg" = libc6 ] && continue  # in every Debian image
    [[ $apt_list == *" $pkg "* ]] || fail "$df.Dockerfile: apt-get install lacks $pkg (a library its binaries link)"
  done
  for e in $(grep -oE '/usr/local/[^ "\\]+' "$file" | sort -u); do
    [ -e "$root$e" ] || fail "$df.Dockerfile names $e, which is not in the staged install"
  done
done
# The programs vesseld runs (src/: "qemu-system-x86_64", "qemu-img", "nft",
# "ip", "sysctl"; coreutils' cp is in every image) and QEMU's microvm firmware.
node_list=" $(sed -n '/apt-get install/,/rm -rf/p' "$src/deploy/docker/node.Dockerfile" | tr -s ' \\\n' ' ') "
for prog in qemu-system-x86_64 qemu-img nft ip sysctl; do
  path=$(command -v "$prog") || { fail "$prog: not installed here"; continue; }
  pkg=$(pkg_of "$path")
  [[ $node_list == *" $pkg "* ]] || fail "node.Dockerfile: apt-get install lacks $pkg (for $prog)"
done
echo "images: COPY sources, ENV paths and apt-get packages match the staged install"

if [ "$fails" -gt 0 ]; then
  echo "install_layout_check: $fails failure(s)" >&2
  exit 1
fi
echo "install_layout_check: layout, prefixes and units OK"
