#!/usr/bin/env bash
# Two builds side by side in one run: each benchmark runs the "before"
# build's binaries, then the "after" build's, alternating ROUNDS times, so
# the machine's noise falls on both alike. Each build runs its own
# benchmark binaries (bench/ changed little between them: compare the two
# bench sources first when it did).
#
#   bench/compare.sh BEFORE_BUILD_DIR [AFTER_BUILD_DIR]   (default build/release)
#   VESSEL_COMPARE="create-b2b api-b2b cluster ports e2b"  which ones (default all)
#   VESSEL_COMPARE_ROUNDS=2
# A build dir for "before": `git worktree add /tmp/base <commit>`, then
# `cmake --preset release && cmake --build build/release --target vesseld
# vessel vessel-gateway vessel-agent vessel_memfile_shim vesseld-fake bench_create bench_api
# bench_cluster` there. Tables go to stdout; JSON to bench/results/compare/<label>-<round>/.
set -euo pipefail
cd "$(dirname "$0")/.."
before=$(realpath "${1:?usage: bench/compare.sh BEFORE_BUILD_DIR [AFTER_BUILD_DIR]}")
after=$(realpath "${2:-build/${PRESET:-release}}")
rounds=${VESSEL_COMPARE_ROUNDS:-2}
which=${VESSEL_COMPARE:-create-b2b api-b2b cluster ports e2b}
set -a; . "$after/artifacts.env"; set +a
out=bench/results/compare
mkdir -p "$out"

run() { # label build bench
  local label=$1 b=$2 what=$3 dir
  dir=$PWD/$out/$label-$what-$round
  mkdir -p "$dir"
  echo "== $what, $label (round $round/$rounds)"
  case $what in
    create-b2b) VESSEL_BENCH_RESULTS=$dir "$b/bench/bench_create" --b2b ;;
    api-b2b) VESSEL_BENCH_RESULTS=$dir VESSEL_BENCH_B2B_ONLY=1 "$b/bench/bench_api" ;;
    cluster) VESSEL_BENCH_RESULTS=$dir "$b/bench/bench_cluster" ;;
    e2b)
      VESSEL_BENCH_RESULTS=$dir VESSELD_PATH=$b/cmd/vesseld/vesseld VESSEL_CLI_PATH=$b/cmd/vessel/vessel \
        node bench/e2b/e2b.mjs ;;
    *) echo "compare: unknown benchmark $what" >&2; return 1 ;;
  esac | grep -E '^\||^==|written' || true
}

for what in $which; do
  if [ "$what" = ports ]; then
    # bench/ports alternates the builds itself, in one vesseld at a time.
    round=all
    echo "== ports, before and after"
    VESSEL_BENCH_RESULTS=$PWD/$out VESSEL_BENCH_PORTS_ROUNDS=$rounds \
      VESSELD_PATHS="before=$before/cmd/vesseld/vesseld,after=$after/cmd/vesseld/vesseld" \
      VESSEL_CLI_PATH=$after/cmd/vessel/vessel node bench/ports/ports.mjs | grep -E '^\||written'
    continue
  fi
  for round in $(seq "$rounds"); do
    run before "$before" "$what"
    run after "$after" "$what"
  done
done
