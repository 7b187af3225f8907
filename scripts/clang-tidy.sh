#!/usr/bin/env bash
# clang-tidy (14, .clang-tidy) over the sources that parse untrusted bytes:
# agent frames, the gateway's TLS/HTTP/DNS/policy parsers and scrubber, the
# API's and E2B's request parsers, QMP, the template manifest and build
# spec, a Dockerfile and its context, a volume's file server and relay,
# and the fuzz targets. Any finding
# fails (ctest clang_tidy_check).
#
#   scripts/clang-tidy.sh [BUILD_DIR]   default build/${PRESET:-release}
#   TIDY_CHECKS='clang-analyzer-*'      checks added to .clang-tidy's, for a run
# Needs BUILD_DIR/compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/${PRESET:-release}}
tidy=$(command -v clang-tidy-14 || command -v clang-tidy) || {
  echo "clang-tidy: not installed (scripts/setup.sh installs it)" >&2
  exit 1
}
[ -f "$build/compile_commands.json" ] || { echo "clang-tidy: no $build/compile_commands.json" >&2; exit 1; }

files=(
  src/agentproto/frame.cc src/agentproto/messages.cc
  src/gateway/name.cc src/gateway/tls/client_hello.cc src/gateway/http/request_head.cc
  src/gateway/http/response_head.cc src/gateway/dns/message.cc src/gateway/policy/policy.cc
  src/gateway/credentials/scrubber.cc
  src/http/json_fields.cc src/http/relay.cc src/http/router.cc src/http/asset_path.cc
  src/api/network_settings.cc
  src/api/resources.cc
  src/api/data_plane_requests.cc
  src/api/volume_requests.cc
  src/e2b/requests.cc src/e2b/template_build.cc src/e2b/template_spec.cc src/e2b/envd/connect.cc src/e2b/envd/multipart.cc src/e2b/envd/signature.cc
  src/e2b/envd/route.cc
  src/hypervisor/qemu/qmp.cc
  src/templates/manifest.cc src/templates/build_spec.cc src/templates/image_ref.cc
  src/templates/dockerfile.cc src/templates/dockerfile_words.cc src/templates/build_context.cc
  src/images/image_config.cc
  src/cluster/node_protocol.cc src/cluster/template_transfer.cc src/templates/catalogue.cc
  src/ingress/host.cc
  src/volumes/files.cc src/volumes/fuse_fs.cc src/volumes/fuse_fs_io.cc src/volumes/fuse_server.cc
  src/agentclient/agent_client_volumes.cc
)
mapfile -t -O "${#files[@]}" files < <(ls tests/fuzz/*/fuzz.cc)

# A g++ build's commands hold GCC-only flags clang does not parse; drop them
# in a copy of the database rather than in the build.
db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
sed -e 's/ -fcoroutines\b//g' "$build/compile_commands.json" >"$db/compile_commands.json"

# Two at a time (the machine's cores); -quiet keeps the log to findings.
rc=0
printf '%s\n' "${files[@]}" | xargs -P "${TIDY_JOBS:-2}" -n 2 \
  "$tidy" -p "$db" -quiet --warnings-as-errors='*' ${TIDY_CHECKS:+"--checks=$TIDY_CHECKS"} \
  >"$db/log" 2>&1 || rc=$?
grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^$' \
  "$db/log" || true
if [ "$rc" -ne 0 ]; then
  echo "clang-tidy: findings above (fix them, or NOLINT(check) with the reason)" >&2
  exit 1
fi
echo "clang-tidy: ${#files[@]} files clean"
