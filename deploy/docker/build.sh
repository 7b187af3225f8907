#!/usr/bin/env bash
# Builds the vessel-api and vessel-node images (TAG, default the project's
# version, which the chart's values name) from this tree: `make install`
# into a staging directory, which is the build context of both Dockerfiles.
# Needs docker (or DOCKER=podman; DOCKER_HOST as usual) and the base image
# debian:bookworm-slim. DOCKER_BUILD_FLAGS adds flags to both builds (e.g.
# "--network host" where the daemon has no bridge network).
set -euo pipefail
cd "$(dirname "$0")/../.."
docker=${DOCKER:-docker}
tag=${TAG:-$(sed -n 's/^project(vessel VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)}
stage=$PWD/build/docker-root
rm -rf "$stage"
make install DESTDIR="$stage" PREFIX=/usr/local
# shellcheck disable=SC2086
"$docker" build ${DOCKER_BUILD_FLAGS:-} -f deploy/docker/api.Dockerfile -t "vessel-api:$tag" "$stage"
# shellcheck disable=SC2086
"$docker" build ${DOCKER_BUILD_FLAGS:-} -f deploy/docker/node.Dockerfile -t "vessel-node:$tag" "$stage"
echo "built vessel-api:$tag vessel-node:$tag"
