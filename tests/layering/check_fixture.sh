#!/usr/bin/env bash
# The layering check must fail on each kind of break (the fixture holds one
# of each) and name it; a checker that passes everything fails this test.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$("$here/../../scripts/check-layering.sh" "$here/fixture" 2>&1)
rc=$?
echo "$out"
fail=0
[ "$rc" != 0 ] || { echo "FAIL: the check passed a broken tree"; fail=1; }
for want in \
  'src/low/up.cc:2: low may not include "high/high.h" (high)' \
  'src/orphan/orphan.cc: its folder orphan has no rule' \
  'src/high/stray.cc:2: includes "nowhere/x.h", whose folder nowhere has no rule' \
  'lets high reach secret'; do
  grep -qF -- "$want" <<<"$out" || { echo "FAIL: not reported: $want"; fail=1; }
done
exit $fail
