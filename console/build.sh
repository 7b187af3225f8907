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
tmp=$out.tmp
rm -rf "$tmp"
mkdir -p "$tmp/vendor"
cp "$here"/src/*.html "$here"/src/*.js "$here"/src/*.css "$tmp/"
if [ -f "$xterm/lib/xterm.js" ]; then
  cp "$xterm/lib/xterm.js" "$xterm/css/xterm.css" "$tmp/vendor/"
  cp "$xterm/LICENSE" "$tmp/vendor/xterm-LICENSE.txt"
else
  # A build without `npm ci` (scripts/setup.sh) still has a console, without
  # its terminal (the page says so); console_test fails on it.
  echo "console: $xterm is missing (scripts/setup.sh runs npm ci in console/): no terminal" >&2
fi
rm -rf "$out"
mv "$tmp" "$out"
