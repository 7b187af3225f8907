#!/usr/bin/env bash
# Bounded fuzz run of every libFuzzer target under ASan and UBSan (the `fuzz`
# CMake preset: clang, -fsanitize=fuzzer,address,undefined, every finding
# aborts). Builds only the fuzz targets and the libraries they link.
#
#   scripts/fuzz.sh [TARGET...]      default: every target in tests/fuzz
#   FUZZ_SECONDS=25                  wall time per target
#   FUZZ_JOBS=2                      targets fuzzed at once
#   FUZZ_OUT=build/fuzz/findings     crashes, leaks, timeouts and logs land here
#
# Each target starts from its checked-in seed corpus (tests/fuzz/<t>/corpus,
# read only) plus what earlier runs on this machine found
# ($FUZZ_OUT/<t>/corpus). A crash fails the run and leaves its input as
# $FUZZ_OUT/<t>/crash-*; reproduce with build/fuzz/tests/fuzz/fuzz_<t> FILE,
# then add the input to the seed corpus as a regression seed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-25}
jobs=${FUZZ_JOBS:-2}
out=${FUZZ_OUT:-build/fuzz/findings}

[ -f build/fuzz/build.ninja ] || cmake --preset fuzz >/dev/null
cmake --build build/fuzz -j "${BUILD_JOBS:-2}" --target fuzz_targets

if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(find tests/fuzz -mindepth 2 -maxdepth 2 -name fuzz.cc -printf '%h\n' \
    | xargs -n1 basename | sort)
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# One target: -max_total_time bounds it; -timeout turns a hang into a
# finding; -rss_limit_mb a runaway allocation. Exit status is libFuzzer's.
fuzz_one() {
  local t=$1 bin dir
  bin=build/fuzz/tests/fuzz/fuzz_$t
  dir=$out/$t
  mkdir -p "$dir/corpus"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$dir/" -print_final_stats=1 \
      "$dir/corpus" "tests/fuzz/$t/corpus" >"$dir/log" 2>&1
}

declare -A pid_of
failed=()
wait_one() {
  local done_pid=$1 t=$2 rc=$3
  local execs
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$t/log" | grep -o '[0-9]*$' || true)
  if [ "$rc" -eq 0 ]; then
    printf 'fuzz: %-22s ok   %s execs in %ss\n' "$t" "${execs:-?}" "$seconds"
  else
    printf 'fuzz: %-22s FAIL (exit %s), see %s\n' "$t" "$rc" "$out/$t" >&2
    grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error' "$out/$t/log" >&2 || true
    failed+=("$t")
  fi
}

running=()
for t in "${targets[@]}"; do
  [ -x "build/fuzz/tests/fuzz/fuzz_$t" ] || { echo "fuzz: no target $t" >&2; exit 2; }
  while [ "${#running[@]}" -ge "$jobs" ]; do
    wait -n -p done_pid "${running[@]}" && rc=0 || rc=$?
    wait_one "$done_pid" "${pid_of[$done_pid]}" "$rc"
    running=("${running[@]/$done_pid}"); running=(${running[@]})
  done
  fuzz_one "$t" & pid_of[$!]=$t; running+=("$!")
done
while [ "${#running[@]}" -gt 0 ]; do
  wait -n -p done_pid "${running[@]}" && rc=0 || rc=$?
  wait_one "$done_pid" "${pid_of[$done_pid]}" "$rc"
  running=("${running[@]/$done_pid}"); running=(${running[@]})
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: ${#failed[@]} target(s) found a bug: ${failed[*]} (inputs and logs under $out)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets clean, ${seconds}s each; logs under $out"
