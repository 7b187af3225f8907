#!/usr/bin/env bash
# Builds the `debian` template's root filesystem: Debian 12 (bookworm) from
# debootstrap with python3 (and `python`), curl, git, ca-certificates, sudo
# and tput (ncurses-bin), an unprivileged `user` (uid 1000, /home/user, bash),
# and vessel-agent as /sbin/vessel-agent. Output: an ext4 image at $1. The
# `debian` and `base` templates (guest/templates/*/template.json) boot it.
# The slow debootstrap (minutes) is cached as a tarball keyed by this script
# and the debootstrap version, so a new agent only costs the image assembly.
# The mirror is the one this machine's apt uses.
# Usage: build.sh OUT_IMAGE AGENT_BINARY
set -euo pipefail
out=$1 agent=$2
cache=${VESSEL_CACHE_DIR:-/var/cache/vessel}
mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
key=$( { sed -n '/^# ---- debootstrap/,/^# ---- end/p' "$0"; dpkg-query -W -f='${Version}' debootstrap; } \
  | sha256sum | cut -c1-16)
tarball=$cache/debian-rootfs/$key.tar
root=$(mktemp -d /var/tmp/vessel-debian.XXXXXX)
trap 'rm -rf "$root"' EXIT
if [ ! -f "$tarball" ]; then
# ---- debootstrap
  echo "debian: debootstrap bookworm from $mirror (a few minutes)" >&2
  debootstrap --variant=minbase --include=python3,python-is-python3,curl,git,ca-certificates,procps,iproute2,sudo,ncurses-bin \
    bookworm "$root" "$mirror" >&2
  chroot "$root" useradd -m -u 1000 -s /bin/bash user
  echo vessel > "$root/etc/hostname"
  printf '127.0.0.1 localhost\n' > "$root/etc/hosts"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
# ---- end
  mkdir -p "$(dirname "$tarball")"
  tar -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
else
  tar -C "$root" -xf "$tarball"
fi
install -m 0755 "$agent" "$root/sbin/vessel-agent"
mkdir -p "$(dirname "$out")"
rm -f "$out.tmp"
mkfs.ext4 -q -F -L vessel-root -E root_owner=0:0 -d "$root" "$out.tmp" 1G
mv "$out.tmp" "$out"
