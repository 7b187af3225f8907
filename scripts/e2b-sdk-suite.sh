#!/usr/bin/env bash
# Runs E2B's own JS SDK test suite (packages/js-sdk/tests of e2b-dev/E2B at
# the e2b@2.45.0 release), unmodified, against a running Vessel (`make up`).
# Not part of `make test`: it needs E2B's repository (a local mirror or
# GitHub) and the suite's dev dependencies from npm. See docs/e2b.md.
#
#   scripts/e2b-sdk-suite.sh [GROUP...]     # default: sandbox commands files pty api
#
# Groups: sandbox (tests/sandbox/*.test.ts), commands, files, pty, git
# (tests/sandbox/<group>/), api (tests/api/), secret (tests/secret/).
#
# Environment:
#   E2B_SUITE_DIR    where the suite is extracted and its dependencies
#                    installed (default /tmp/e2b-sdk-suite; kept between runs)
#   E2B_REPO         a git directory of e2b-dev/E2B holding the tag; default:
#                    a shallow clone of https://github.com/e2b-dev/E2B
#   E2B_SUITE_TAG    default e2b@2.45.0
#   E2B_API_URL      default http://127.0.0.1:3000
#   E2B_SANDBOX_URL  unset by default: the SDK reaches each sandbox's envd at
#                    https://49983-<id>.<domain>, the domain the API answers
#                    (vessel.localhost:49983), trusting Vessel's ingress CA
#                    ($VESSEL_INGRESS_CA, default $VESSEL_STATE_DIR/
#                    ingress-ca.pem) through NODE_EXTRA_CA_CERTS (a bundle
#                    of it and any file that variable already names). Set it to send every
#                    envd call to one URL instead; signed file URLs then name
#                    no sandbox, and Vessel refuses them (docs/e2b.md).
#   E2B_API_KEY      default the contents of $VESSEL_STATE_DIR/dev-e2b-api-key
#                    (VESSEL_STATE_DIR default /var/lib/vessel)
#   VITEST_ARGS      more vitest flags (e.g. --maxWorkers=1, -t 'name')
#
# Prints one line per group, `GROUP: N passed, N failed, N skipped`, and
# leaves vitest's JSON report in $E2B_SUITE_DIR/results/GROUP.json. Exits 1
# when a test failed or was skipped.
set -euo pipefail

tag=${E2B_SUITE_TAG:-e2b@2.45.0}
dir=${E2B_SUITE_DIR:-/tmp/e2b-sdk-suite}
sdk=$dir/packages/js-sdk
groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(sandbox commands files pty api)

mkdir -p "$dir"
if [ ! -f "$sdk/.extracted-$tag" ]; then
  rm -rf "$dir/packages"
  repo=${E2B_REPO:-}
  if [ -z "$repo" ]; then
    repo=$dir/E2B.git
    [ -d "$repo" ] || git clone --bare --depth 1 --branch "$tag" \
      https://github.com/e2b-dev/E2B "$repo"
  fi
  git --git-dir="$repo" archive "$tag" packages/js-sdk | tar -x -C "$dir"
  touch "$sdk/.extracted-$tag"
fi

# The SDK's runtime dependencies and the few dev dependencies its node tests
# import (vitest and its config's imports, msw, dotenv), at the versions of
# the release's pnpm lockfile, installed one directory above the SDK so that
# both ../src and vitest.config.mts resolve them without touching the
# extracted tree. Browser, Cloudflare and build tooling are left out.
stamp=$dir/node_modules/.e2b-suite-$tag-2
if [ ! -f "$stamp" ]; then
  cat >"$dir/package.json" <<'EOF'
{
  "private": true,
  "name": "e2b-sdk-suite-runner",
  "dependencies": {
    "@bufbuild/protobuf": "2.12.1",
    "@connectrpc/connect": "2.1.2",
    "@connectrpc/connect-web": "2.1.2",
    "chalk": "5.3.0",
    "compare-versions": "6.1.1",
    "dockerfile-ast": "0.7.1",
    "glob": "13.0.6",
    "openapi-fetch": "0.14.1",
    "platform": "1.3.6",
    "tar": "7.5.21",
    "undici": "7.29.0",
    "undici8": "npm:undici@8.10.0",
    "vitest": "4.1.10",
    "vite": "6.4.3",
    "@vitest/browser": "4.1.10",
    "@vitest/browser-playwright": "4.1.10",
    "playwright": "1.55.1",
    "dotenv": "16.4.5",
    "error-stack-parser-es": "2.0.1",
    "msw": "2.12.14",
    "@types/node": "20.19.43"
  }
}
EOF
  (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund)
  touch "$stamp"
fi

state=${VESSEL_STATE_DIR:-/var/lib/vessel}
export E2B_API_URL=${E2B_API_URL:-http://127.0.0.1:3000}
if [ -z "${E2B_SANDBOX_URL:-}" ]; then
  unset E2B_SANDBOX_URL
  ca=${VESSEL_INGRESS_CA:-$state/ingress-ca.pem}
  [ -r "$ca" ] || {
    echo "e2b-sdk-suite: no ingress CA at $ca (set VESSEL_STATE_DIR or VESSEL_INGRESS_CA)" >&2
    exit 2
  }
  # Node reads one extra CA file: a bundle already named there (some
  # machines set the system's) is kept, with the ingress CA added.
  bundle=$dir/extra-ca.pem
  { if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r "$NODE_EXTRA_CA_CERTS" ] &&
    [ "$NODE_EXTRA_CA_CERTS" != "$bundle" ]; then cat "$NODE_EXTRA_CA_CERTS"; fi
    cat "$ca"; } >"$bundle.tmp"
  mv "$bundle.tmp" "$bundle"
  export NODE_EXTRA_CA_CERTS=$bundle
fi
export E2B_API_KEY=${E2B_API_KEY:-$(cat "$state/dev-e2b-api-key")}
unset E2B_DEBUG E2B_DOMAIN E2B_ACCESS_TOKEN

mkdir -p "$dir/results"
failed=0
for g in "${groups[@]}"; do
  case $g in
    sandbox) mapfile -t paths < <(cd "$sdk" && ls tests/sandbox/*.test.ts) ;;
    commands | files | pty | git) paths=("tests/sandbox/$g") ;;
    api | secret) paths=("tests/$g") ;;
    *)
      echo "unknown group $g" >&2
      exit 2
      ;;
  esac
  # Files that only ever use the placeholder key (TEST_API_KEY) and no
  # sandbox fixture test the client alone: they mock the API (msw) at the
  # default domain or check URLs the SDK derives from it, so they run with
  # none of E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY set, as they expect.
  # Every other file runs against Vessel.
  live=() offline=()
  for p in "${paths[@]}"; do
    while IFS= read -r f; do
      if grep -q TEST_API_KEY "$sdk/$f" && ! grep -q sandboxTest "$sdk/$f"; then
        offline+=("$f")
      else
        live+=("$f")
      fi
    done < <(cd "$sdk" && find "$p" -name '*.test.ts' | sort)
  done
  out=$dir/results/$g.json
  rm -f "$out" "$out.offline"
  run() { # REPORT FILE...
    local report=$1
    shift
    # shellcheck disable=SC2086
    (cd "$sdk" && node "$dir/node_modules/vitest/vitest.mjs" run --project unit \
      --reporter=default --reporter=json --outputFile.json="$report" ${VITEST_ARGS:-} "$@") || true
  }
  [ ${#live[@]} -eq 0 ] || run "$out" "${live[@]}"
  if [ ${#offline[@]} -gt 0 ]; then
    (unset E2B_API_URL E2B_SANDBOX_URL E2B_API_KEY && run "$out.offline" "${offline[@]}")
  fi
  if [ ! -f "$out" ] && [ ! -f "$out.offline" ]; then
    echo "$g: vitest wrote no report" >&2
    failed=1
    continue
  fi
  # shellcheck disable=SC2016 # JavaScript, not shell
  line=$(node -e '
    const fs = require("fs")
    const rs = process.argv.slice(1).filter((f) => fs.existsSync(f))
      .map((f) => JSON.parse(fs.readFileSync(f, "utf8")))
    const sum = (k) => rs.reduce((n, r) => n + r[k], 0)
    const skipped = sum("numPendingTests") + sum("numTodoTests")
    const broken = sum("numFailedTestSuites") ? `, ${sum("numFailedTestSuites")} file(s) failed` : ""
    console.log(`${sum("numPassedTests")} passed, ${sum("numFailedTests")} failed, ${skipped} skipped${broken}`)
    const bad = sum("numFailedTests") + skipped > 0 || rs.some((r) => !r.success) || sum("numTotalTests") === 0
    process.exit(bad ? 1 : 0)' "$out" "$out.offline") || failed=1
  echo "$g: $line" | tee -a "$dir/results/summary.txt"
done
exit $failed
