#!/usr/bin/env bash
# Installs the build (preset $PRESET) under $PREFIX (default /usr/local),
# staged under $DESTDIR when set (a package root, an image's root). The
# layout is in docs/operations.md ("Layout"). It neither reloads systemd nor
# enables or starts anything: see "Install" there.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${PRESET:-release}
cmake --install "build/$preset" --prefix "${PREFIX:-/usr/local}"
