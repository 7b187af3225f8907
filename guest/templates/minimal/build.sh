#!/usr/bin/env bash
# Builds the `minimal` template's root filesystem: busybox-static as the
# userland and vessel-agent as /sbin/vessel-agent (PID 1, kernel parameter
# init=/sbin/vessel-agent). Output: an ext4 image at $1.
# Usage: build.sh OUT_IMAGE AGENT_BINARY
set -euo pipefail
out=$1 agent=$2
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,run,tmp,root,home/user,var/tmp,mnt}
chmod 1777 "$root/tmp" "$root/var/tmp"
chmod 0700 "$root/root"
cp /bin/busybox "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list-full); do
  [ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
done
install -m 0755 "$agent" "$root/sbin/vessel-agent"
cat > "$root/etc/passwd" <<'P'
root:x:0:0:root:/root:/bin/sh
user:x:1000:1000:user:/home/user:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
P
cat > "$root/etc/group" <<'G'
root:x:0:
tty:x:5:
user:x:1000:
nogroup:x:65534:
G
echo "root:*:19000:0:99999:7:::" > "$root/etc/shadow"; chmod 0640 "$root/etc/shadow"
echo "user:*:19000:0:99999:7:::" >> "$root/etc/shadow"
echo vessel > "$root/etc/hostname"
printf '127.0.0.1 localhost\n' > "$root/etc/hosts"
chown 1000:1000 "$root/home/user"
chmod 0755 "$root/home/user"
mkdir -p "$(dirname "$out")"
rm -f "$out.tmp"
# The image stays small: a sandbox's disk is grown to its disk_mib at
# create (the overlay's virtual size, then the mounted ext4 online). 4 KiB
# blocks and the default inode ratio (mke2fs picks 1 KiB blocks and more
# inodes for a "small" filesystem) are what a grown multi-GiB disk wants;
# the reserved group descriptors let it grow 1024-fold online.
mkfs.ext4 -q -F -L vessel-root -b 4096 -T default -E root_owner=0:0 -d "$root" "$out.tmp" 64M
mv "$out.tmp" "$out"
