#!/usr/bin/env bash
# Runs every test through ctest with the guest artifacts exported.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${PRESET:-release}
set -a; . "build/$preset/artifacts.env"; set +a
cd "build/$preset"
ctest --output-on-failure --timeout 900 -j "${VESSEL_TEST_JOBS:-2}" ${CTEST_ARGS:-}
