#!/usr/bin/env bash
# src/e2b maps every call onto ops::Lifecycle: none of its files may reach a
# node/ or hypervisor/ header, directly or through another header (there is
# no second lifecycle). Fails naming the file and the header.
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${CXX:-c++}
bad=0
for f in src/e2b/*.cc src/e2b/*.h; do
  deps=$("$cxx" -std=c++20 -fcoroutines -DBOOST_ASIO_NO_DEPRECATED -Isrc -MM -x c++ "$f") || exit 1
  hits=$(tr ' \\' '\n\n' <<<"$deps" | grep -E '(^|/)src/(node|hypervisor)/' || true)
  if [ -n "$hits" ]; then echo "$f reaches: $hits"; bad=1; fi
done
[ "$bad" = 0 ] || exit 1
