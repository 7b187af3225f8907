#!/usr/bin/env bash
# Starts vesseld in the foreground with the artifacts the build produced.
# State dir: $VESSEL_STATE_DIR or /var/lib/vessel; more flags: $VESSEL_ARGS.
# Egress (docs/gateway.md) reads its settings from the environment too, so
# they pass straight through: VESSEL_EGRESS_UPSTREAM_NETNS, VESSEL_EGRESS_RESOLVER,
# VESSEL_EGRESS_CA_BUNDLE, VESSEL_EGRESS_GATEWAY_NETNS; so does the warm pool,
# VESSEL_WARM_POOL (default minimal=2,base=1; "none" for no pool); a file with VESSEL_CONFIG.
# The E2B REST API listens on 127.0.0.1:3000 (--e2b-listen; "" turns it off).
# E2B envd listens on 127.0.0.1:49983 (--e2b-envd-listen; "" turns it off).
# The development tenant is an operator (docs/console.md): its key lists nodes.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${PRESET:-release}
set -a; . "build/$preset/artifacts.env"; set +a
# shellcheck disable=SC2086
exec "build/$preset/cmd/vesseld/vesseld" --operator-tenant=dev ${VESSEL_ARGS:-}
