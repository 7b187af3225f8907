#!/usr/bin/env bash
# Fails listing every C++ file whose formatting differs from .clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cc' '*.h' 2>/dev/null || find src cmd tests bench -name '*.cc' -o -name '*.h')
[ -n "$files" ] || exit 0
bad=0
for f in $files; do
  [ -f "$f" ] || continue
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then echo "needs clang-format: $f"; bad=1; fi
done
[ "$bad" = 0 ] || { echo "run: make fmt"; exit 1; }
