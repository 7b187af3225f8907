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
