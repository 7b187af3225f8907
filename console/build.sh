#!/usr/bin/env bash
# The web console's files into OUT (run by CMake at `make build`): its own
# sources, and xterm.js's prebuilt script and stylesheet from
# node_modules (package-lock.json pins them; scripts/setup.sh runs `npm
# ci`). No bundler: the browser loads these as they are, all from
# vesseld (docs/console.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT}
xterm=$here/node_modules/@xterm/xterm
if [ ! -f "$xterm/lib/xterm.js" ]; then
  echo "console: $xterm is missing: run scripts/setup.sh (npm ci in console/)" >&2
  exit 1
fi
tmp=$out.tmp
rm -rf "$tmp"
mkdir -p "$tmp/vendor"
cp "$here"/src/*.html "$here"/src/*.js "$here"/src/*.css "$tmp/"
cp "$xterm/lib/xterm.js" "$xterm/css/xterm.css" "$tmp/vendor/"
cp "$xterm/LICENSE" "$tmp/vendor/xterm-LICENSE.txt"
rm -rf "$out"
mv "$tmp" "$out"
