#!/usr/bin/env bash
# The size check must refuse a file over 600 lines and a long function with
# no reason given, and accept a long function that says why; a checker that
# passes everything (or refuses everything) fails this test. The fixture is
# generated, so that the tree itself holds no oversized file.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
check="$here/../../scripts/check-sizes.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/src/x"
body() { for i in $(seq "$1"); do echo "  total += $i;"; done; }
{ echo "int big() {"; echo "  int total = 0;"; body 700; echo "  return total;"; echo "}"; } >"$dir/src/x/big.cc"
{ echo "// Adds."; echo "int unexplained() {"; echo "  int total = 0;"; body 90; echo "  return total;"; echo "}"; } \
  >"$dir/src/x/unexplained.cc"
{ echo "// Adds; long because it is one table."; echo "int explained() {"; echo "  int total = 0;"; body 90
  echo "  return total;"; echo "}"; echo "int shortOne() { return 1; }"; } >"$dir/src/x/explained.cc"
fail=0
out=$(cd "$dir" && "$check" src/x/big.cc src/x/unexplained.cc src/x/explained.cc 2>&1)
rc=$?
echo "$out"
[ "$rc" != 0 ] || { echo "FAIL: the check passed oversized code"; fail=1; }
for want in 'src/x/big.cc: 704 lines' 'src/x/unexplained.cc:2: unexplained is 94 lines'; do
  grep -qF -- "$want" <<<"$out" || { echo "FAIL: not reported: $want"; fail=1; }
done
grep -q 'explained.cc:2: explained' <<<"$out" && { echo "FAIL: refused a long function that says why"; fail=1; }
out=$(cd "$dir" && "$check" src/x/explained.cc 2>&1) || { echo "$out"; echo "FAIL: refused a file within the rules"; fail=1; }
exit $fail
