#!/usr/bin/env bash
# Starts vesseld in the foreground with the artifacts the build produced.
# State dir: $VESSEL_STATE_DIR or /var/lib/vessel; more flags: $VESSEL_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${PRESET:-release}
set -a; . "build/$preset/artifacts.env"; set +a
# shellcheck disable=SC2086
exec "build/$preset/cmd/vesseld/vesseld" ${VESSEL_ARGS:-}
