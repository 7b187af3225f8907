#!/usr/bin/env bash
# Checks the images deploy/docker/build.sh built, on this machine's docker,
# without Kubernetes: the api image's binaries load; the node image builds
# the minimal template (its init container's job) and runs vesseld (the
# one-machine role, on the host's network, jailed, with egress), which
# creates a sandbox that runs a command and is deleted; vesseld then stops
# cleanly. Needs root and docker; not part of `make test` (minutes, and the
# project's machines have no docker). Everything it makes is removed.
#
# DOCKER_RUN_FLAGS: how the node container gets its privileges; default
# --privileged. Where the docker host refuses privileged containers (a
# sandbox without CAP_SYS_RESOURCE), e.g.:
#   DOCKER_RUN_FLAGS="--cap-add ALL --cap-drop SYS_RESOURCE --security-opt seccomp=unconfined
#     --security-opt apparmor=unconfined --security-opt systempaths=unconfined
#     --device /dev/net/tun -v /sys/fs/cgroup:/sys/fs/cgroup:rw"
set -euo pipefail
cd "$(dirname "$0")/../.."
docker=${DOCKER:-docker}
tag=${TAG:-$(sed -n 's/^project(vessel VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)}
run_flags=${DOCKER_RUN_FLAGS:---privileged}
port=${PORT:-18480}
cli=${VESSEL_CLI:-build/${PRESET:-release}/cmd/vessel/vessel}
tmp=$(mktemp -d)
name=vessel-node-check-$$
cleanup() {
  "$docker" rm -f "$name" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "api image: binaries load"
help=$("$docker" run --rm "vessel-api:$tag" --help)
echo "${help%%$'\n'*}"
help=$("$docker" run --rm --entrypoint /usr/local/bin/vessel "vessel-api:$tag" --help)
echo "${help%%$'\n'*}"
[ "$("$docker" run --rm --entrypoint id "vessel-api:$tag" -u)" = 10001 ]

echo "node image: the minimal template"
mkdir -p "$tmp/cache" "$tmp/state"
# shellcheck disable=SC2086
"$docker" run --rm $run_flags --network host -e VESSEL_TEMPLATES=minimal \
  -v "$tmp/cache:/var/cache/vessel" "vessel-node:$tag" /usr/local/lib/vessel/vessel-templates

echo "node image: vesseld"
# A state directory of its own: its network namespace and nft names derive
# from it, so they never meet a vesseld of the host's.
# shellcheck disable=SC2086
"$docker" run -d --name "$name" $run_flags --network host \
  -v "$tmp/cache:/var/cache/vessel" -v "$tmp/state:/var/lib/vessel-check" "vessel-node:$tag" \
  /usr/local/bin/vesseld --state-dir /var/lib/vessel-check --listen "127.0.0.1:$port" \
  --data-listen "127.0.0.1:$((port + 1))" --e2b-listen "" --e2b-envd-listen "" --warm-pool none \
  --stop-vms-on-exit >/dev/null
up=0
for _ in $(seq 300); do
  if curl -sf "127.0.0.1:$port/healthz" >"$tmp/health"; then up=1; break; fi
  [ "$("$docker" inspect -f '{{.State.Running}}' "$name")" = true ] || break
  sleep 1
done
[ "$up" = 1 ] || { "$docker" logs "$name" | tail -20; echo "FAIL: vesseld did not come up" >&2; exit 1; }
jq -c '{status, accel, jail: .isolation.jail, gateway: .gateway.running}' "$tmp/health"
export VESSEL_API_URL=http://127.0.0.1:$port VESSEL_API_KEY
VESSEL_API_KEY=$(cat "$tmp/state/dev-api-key")
id=$("$cli" sandbox create --template minimal 2>/dev/null | tail -1)
out=$("$cli" exec "$id" -- uname -s 2>/dev/null)
[ "$out" = Linux ] || { echo "FAIL: exec said '$out'" >&2; exit 1; }
"$cli" sandbox delete "$id" >/dev/null 2>&1
"$docker" stop -t 45 "$name" >/dev/null
code=$("$docker" inspect -f '{{.State.ExitCode}}' "$name")
[ "$code" = 0 ] || { "$docker" logs "$name" | tail -20; echo "FAIL: vesseld exited $code" >&2; exit 1; }
echo "images OK: vessel-api:$tag, vessel-node:$tag (sandbox $id ran uname, vesseld stopped cleanly)"
