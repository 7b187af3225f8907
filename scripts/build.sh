#!/usr/bin/env bash
# Builds Vessel (CMake preset $PRESET, default release), then the guest
# kernel, the `minimal` and `debian` images and the built-in templates
# (minimal, debian, base). Slow artifacts are cached under
# $VESSEL_CACHE_DIR (default /var/cache/vessel) keyed by a hash of their
# inputs; their paths are written to build/$PRESET/artifacts.env.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${PRESET:-release}
cache=${VESSEL_CACHE_DIR:-/var/cache/vessel}
export VESSEL_CACHE_DIR=$cache
[ -f "build/$preset/build.ninja" ] || cmake --preset "$preset" >/dev/null
cmake --build "build/$preset"

kernel=$(guest/kernel/build.sh)

agent=build/$preset/src/agent/vessel-agent
key=$( { cat guest/templates/minimal/build.sh "$agent"; dpkg-query -W -f='${Version}' busybox-static; } \
  | sha256sum | cut -c1-16)
image=$cache/images/minimal/$key/rootfs.ext4
if [ ! -f "$image" ]; then
  echo "build: minimal template image (key $key)" >&2
  guest/templates/minimal/build.sh "$image" "$agent"
fi

deb_key=$( { cat guest/templates/debian/build.sh "$agent"; } | sha256sum | cut -c1-16)
debian=$cache/images/debian/$deb_key/rootfs.ext4
if [ ! -f "$debian" ]; then
  echo "build: debian template image (key $deb_key)" >&2
  guest/templates/debian/build.sh "$debian" "$agent"
fi

# The built-in templates (snapshots), cached by their spec's hash.
VESSEL_KERNEL=$kernel VESSEL_MINIMAL_IMAGE=$image \
  "build/$preset/cmd/vessel/vessel" template build --local -f guest/templates/minimal/template.json \
  --store "$cache/templates" >/dev/null
VESSEL_KERNEL=$kernel VESSEL_MINIMAL_IMAGE=$image VESSEL_DEBIAN_IMAGE=$debian \
  "build/$preset/cmd/vessel/vessel" template build --local -f guest/templates/debian/template.json \
  --store "$cache/templates" >/dev/null
# `base`, E2B's default template: the debian image with passwordless sudo for `user`.
VESSEL_KERNEL=$kernel VESSEL_MINIMAL_IMAGE=$image VESSEL_DEBIAN_IMAGE=$debian \
  "build/$preset/cmd/vessel/vessel" template build --local -f guest/templates/base/template.json \
  --store "$cache/templates" >/dev/null

cat > "build/$preset/artifacts.env" <<ENV
VESSEL_KERNEL=$kernel
VESSEL_MINIMAL_IMAGE=$image
VESSEL_DEBIAN_IMAGE=$debian
VESSEL_CACHE_DIR=$cache
VESSEL_TEMPLATE_STORE=$cache/templates
ENV
echo "build: kernel $kernel" >&2
echo "build: minimal image $image" >&2
