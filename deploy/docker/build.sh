#!/usr/bin/env bash
# Builds the vessel-api and vessel-node images (TAG, default the project's
# version, which the chart's values name) from this tree: `make install`
# into a staging directory, which is the build context of both Dockerfiles.
# Needs docker (or DOCKER=podman) and the base image debian:bookworm-slim.
set -euo pipefail
cd "$(dirname "$0")/../.."
docker=${DOCKER:-docker}
tag=${TAG:-$(sed -n 's/^project(vessel VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)}
stage=$PWD/build/docker-root
rm -rf "$stage"
make install DESTDIR="$stage" PREFIX=/usr/local
"$docker" build -f deploy/docker/api.Dockerfile -t "vessel-api:$tag" "$stage"
"$docker" build -f deploy/docker/node.Dockerfile -t "vessel-node:$tag" "$stage"
echo "built vessel-api:$tag vessel-node:$tag"
