#!/usr/bin/env bash
# Installs what Vessel needs from Debian 12's apt, and only what is missing:
# a second run does nothing and takes well under a second.
set -euo pipefail
VESSEL_APT_PACKAGES=(
  # build
  build-essential cmake ninja-build ccache pkg-config clang clang-format clang-tidy libclang-rt-14-dev
  # libraries
  libboost1.81-dev libboost-json1.81-dev libcli11-dev libspdlog-dev libfmt-dev libsqlite3-dev
  sqlite3 libssl-dev libgtest-dev libgmock-dev libbenchmark-dev libseccomp-dev libcap-ng-dev
  libyaml-cpp-dev zlib1g-dev
  # guests: hypervisor, kernel source and its build tools, image tools
  qemu-system-x86 qemu-utils linux-source-6.1 bc bison flex libelf-dev cpio xz-utils
  busybox-static e2fsprogs debootstrap
  # network isolation
  nftables iproute2
  # tools used by scripts and tests
  curl jq git
  # egress tests: test CA and fake internet (issue 6)
  openssl python3 procps
)
missing=()
for p in "${VESSEL_APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "setup: need root to install: ${missing[*]}" >&2; exit 1; }
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
