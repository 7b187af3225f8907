#!/usr/bin/env bash
# Runs every benchmark in bench/; each prints a table and writes JSON to
# bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${PRESET:-release}
set -a; . "build/$preset/artifacts.env"; set +a
mkdir -p bench/results
export VESSEL_BENCH_RESULTS=$PWD/bench/results
for b in build/$preset/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b"
done
# E2B's SDK beside the native API (bench/e2b; the SDK is the one tests/e2b pins).
if command -v node >/dev/null && [ -d tests/e2b/node_modules/e2b ]; then
  echo "== bench/e2b"
  VESSELD_PATH=build/$preset/cmd/vesseld/vesseld VESSEL_CLI_PATH=build/$preset/cmd/vessel/vessel \
    node bench/e2b/e2b.mjs
  # The sandbox-ports proxy (bench/ports); bench/compare.sh runs it for two builds.
  echo "== bench/ports"
  VESSELD_PATH=build/$preset/cmd/vesseld/vesseld VESSEL_CLI_PATH=build/$preset/cmd/vessel/vessel \
    node bench/ports/ports.mjs
fi
