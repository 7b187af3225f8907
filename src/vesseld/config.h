#pragma once
// vesseld's typed configuration. Flags, environment and (later) a config
// file fill a Config (vesseld/cli.h); validate() checks it once at start-up,
// and nothing downstream re-parses strings: settings.h resolves it into
// what each stack is built from. What other binaries share with it lives
// below: a listener's address in base/host_port.h, the accelerator mode in
// node/accel.h, the VM uid range's default in os/jail.h.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/host_port.h"
#include "base/result.h"
#include "cluster/node_tokens.h"
#include "node/accel.h"
#include "os/jail.h"

namespace vessel::vesseld {

// "minimal=2,debian=1" -> {minimal: 2, debian: 1}; "" or "none" -> no pools.
Result<std::map<std::string, size_t>> parseWarmPool(std::string_view s);

// --warm-pool-budget: MiB of pooled VMs per template.
struct WarmPoolBudget {
  uint64_t every_mib = 0;                   // templates not named
  std::map<std::string, uint64_t> per_mib;  // template name -> MiB
  uint64_t forTemplate(const std::string& name) const {
    auto it = per_mib.find(name);
    return it == per_mib.end() ? every_mib : it->second;
  }
};
Result<WarmPoolBudget> parseWarmPoolBudget(std::string_view s);

// What one vesseld process is (docs/design.md, "Many machines").
enum class Role {
  kAll,   // API and node in one process, SQLite by default: one machine
  kApi,   // a stateless API replica: places sandboxes on nodes over their node API
  kNode,  // runs sandboxes on this host for the API replicas; heartbeats into the store
};
Result<Role> parseRole(std::string_view s);
std::string_view roleName(Role r);

struct Config {
  Role role = Role::kAll;
  // Node role: the node API's listener (HTTP or, with TLS on, HTTPS;
  // bearer token), its name in the registry (default: the host name) and
  // the URL API replicas reach it at (default http(s)://<node_listen>).
  std::string node_listen = "127.0.0.1:8091";
  std::string node_name;
  std::string node_advertise;
  // A node's own token (node role): from this file, else VESSEL_NODE_TOKEN.
  // Filled by validate() into node_token. On an API replica it is the one
  // token every node shares, unless node_tokens_file names each node's
  // (cluster/node_tokens.h); validate() fills node_tokens either way.
  std::string node_token_file;
  std::string node_token;
  std::string node_tokens_file;
  cluster::NodeTokens node_tokens;
  // Template catalogue signatures (cluster/catalogue_signature.h): the API
  // replicas' private key, and the public key a node checks entries with
  // before it copies one ("": entries are not checked).
  std::string catalogue_key_file;
  std::string catalogue_public_key_file;
  // API role: a node silent (no heartbeat) for this long is lost.
  int64_t node_lost_after_s = 15;
  // API and node roles: the PEM CA certificate(s) a node's certificate must
  // chain to when it advertises https:// URLs (its node API and envd
  // listener, for the replicas; its template copies, for other nodes).
  // "": the system's trust store.
  std::string node_ca_file;
  // --hypervisor=fake (hidden, tests): the agent binary its "VMs" run.
  std::string fake_agent;
  std::string listen = "127.0.0.1:8080";
  // The data plane (session tokens only: exec, files, watch).
  std::string data_listen = "127.0.0.1:8081";
  // The data plane's URL as clients reach it; empty: http://<data_listen>.
  std::string data_url;
  // The web console's files (console.h): empty, the build's or installed
  // ones next to vesseld; "off", none.
  std::string console_dir;
  // The E2B-compatible REST API (E2B_API_URL); empty: not served.
  std::string e2b_listen = "127.0.0.1:3000";
  std::string state_dir = "/var/lib/vessel";
  // The store: "sqlite" (embedded, <state_dir>/vessel.db, one vesseld) or a
  // PostgreSQL URL, postgres://user:password@host:port/db (shared by
  // several vesseld processes).
  std::string store = "sqlite";
  std::string cache_dir = "/var/cache/vessel";
  std::string hypervisor = "qemu";
  std::string qemu_binary = "qemu-system-x86_64";
  node::AccelMode accel = node::AccelMode::kAuto;
  std::string kernel;         // guest vmlinux
  std::string minimal_image;  // root filesystem of the `minimal` template
  std::string log_level = "info";
  std::string log_format = "text";  // vesseld's own log lines: text or json (base/log.h)
  // Sandbox logs (docs/logs.md): entries kept per sandbox, and seconds
  // its log stays after it ends.
  int log_max_entries = 1000;
  int64_t log_retention_s = 7 * 24 * 3600;
  // The front ends' commands, file operations and port connections in
  // their sandboxes' logs (vesseld/command_log.h); off: only the lifecycle
  // and the console (bench/api measures what it costs).
  bool command_log = true;
  // Tenant ids whose API keys are operators' (GET /v1/nodes, the console's
  // Operator page): docs/console.md.
  std::vector<std::string> operator_tenants;
  // On SIGTERM/SIGINT: stop running VMs (true) or leave them for the next
  // vesseld to re-adopt (false, the default).
  bool stop_vms_on_exit = false;
  // Sandbox lifetimes in seconds: the idle timeout and hard lifetime a
  // create gets when it names none, and the most a create or extend may ask.
  int64_t default_idle_timeout_s = 600;
  int64_t default_lifetime_s = 24 * 3600;
  int64_t max_lifetime_s = 7 * 24 * 3600;
  // Per-tenant quotas for tenants with no limits of their own in the store.
  int64_t tenant_max_sandboxes = 20;
  int64_t tenant_max_memory_mib = 16384;
  int64_t tenant_max_vcpus = 32;
  // Disk on this node: live sandboxes' disks, pause snapshots, fork
  // copies, the tenant's templates and builds in flight.
  int64_t tenant_max_disk_mib = 200 * 1024;
  // The largest root disk a create may ask for (disk_mib).
  int64_t max_disk_mib = 64 * 1024;
  // Volumes (docs/volumes.md): a tenant's volumes' sizes together, and the
  // largest one volume may be (MiB).
  int64_t tenant_max_volume_mib = 200 * 1024;
  int64_t max_volume_mib = 64 * 1024;
  // The size of a volume made through E2B's Volume API, which gives none (MiB).
  int64_t e2b_volume_mib = 0;  // 0: 1024, or max_volume_mib if smaller
  // Creates, pauses, forks and template builds are refused while the state
  // directory's filesystem has less free space than this (MiB).
  int64_t min_free_disk_mib = 1024;
  // Template builds from OCI images (from_image): images larger than this
  // (MiB, compressed in the registry and unpacked) are refused, and these
  // registries (HOST:PORT) may speak plain HTTP besides loopback ones.
  int64_t max_image_mib = 4096;
  std::vector<std::string> insecure_registries;
  // Dockerfile builds through POST /v1/templates:dockerfile: the build
  // context's tar (MiB) this API takes; a larger body is refused with 413
  // as it arrives. It is kept under <state_dir>/build-contexts while the
  // request runs.
  int64_t max_build_context_mib = 64;
  // Dockerfile builds keep each instruction's disk (node/build_cache.h)
  // under <cache-dir>/build-steps, at most this much (MiB allocated; 0: no
  // step cache).
  int64_t build_cache_mib = 8192;
  // Template builds running at once on a node (each boots a VM); more wait
  // in its queue (8 in all).
  int64_t max_concurrent_builds = 2;
  // Warm pools: "NAME=N,..." keeps N VMs of built-in or node-wide template
  // NAME restored, running and warmed up, so a create only gives one its
  // identity. Every pooled VM holds its memory and a network slot.
  // `base` is E2B's default template (docs/e2b.md): an E2B create is warm too.
  std::string warm_pool = "minimal=2,base=1";
  // Each pool above grows from demand (bursts, creates faster than it
  // refills) and shrinks back to its N when idle, within this memory per
  // template: "MIB" for every pool, "NAME=MIB,..." per template (mixable:
  // "1024,debian=4096"); 0 for fixed pools of N.
  std::string warm_pool_budget = "1024";

  // Confinement (docs/threat-model.md): every QEMU in a jail of its own,
  // under a uid and gid leased from vm_uid_range. Needs root.
  bool jail = true;
  // Checked against the host's files at start (os::checkUidRangeFree).
  std::string vm_uid_range{os::kDefaultVmUidRange};
  // Host-wide: every vesseld on the host leases from here.
  std::string uid_lease_dir = "/run/vessel/uids";
  // Added to each VM's guest RAM for its cgroup's memory limit.
  uint64_t vm_memory_overhead_mib = 256;
  // Seconds a guest's agent has to begin answering a call (exec, files,
  // processes) before it fails with kDeadlineExceeded; 0: no deadline. A
  // stopped or starved agent must not hold a tenant's request forever.
  int64_t agent_reply_timeout_s = 30;
  // Refuse to start without KVM: TCG is not an isolation boundary.
  bool require_kvm = false;

  // Egress (docs/gateway.md): vesseld runs vessel-gateway and gives every
  // sandbox a network slot. Off: sandboxes have a NIC connected to nothing.
  bool egress = true;
  std::string gateway_binary;         // "" = next to vesseld, else PATH
  std::string egress_gateway_netns;   // "" = a private namespace vesseld makes
  std::string egress_upstream_netns;  // "" = vesseld's own namespace
  std::string egress_resolver;        // IP[:PORT]; "" = first nameserver of /etc/resolv.conf
  std::string egress_ca_bundle;       // "" = the gateway's default system bundle
  // The network mode of a sandbox whose create names none: "none" (fail
  // closed, the default) or "full".
  std::string default_network = "none";
  // Wildcard rules on public suffixes (`*.co.uk`): refused unless set.
  bool allow_public_suffix_wildcards = false;

  // E2B envd (docs/e2b-envd.md): the SDKs' sandbox port; "" turns it off.
  std::string e2b_envd_listen = "127.0.0.1:49983";
  // Node role: that listener's URL as API replicas reach it (their envd
  // listeners forward each sandbox's requests to its node); empty:
  // http(s)://<e2b_envd_listen>, or none when that is off.
  std::string e2b_envd_advertise;
  // The domain E2B sandboxes are given: `<port>-<id>.<domain>` on the envd
  // listener reaches a sandbox's port (docs/e2b.md). "": vessel.localhost
  // with the envd listener's port, which resolves to loopback locally.
  std::string e2b_sandbox_domain;
  // API role (and all): the key every envd and traffic access token is an
  // HMAC under; created with 32 random bytes when missing. "":
  // <state_dir>/e2b-token-key. Every API replica of a cluster is given the
  // same file; nodes and the store never hold it (docs/threat-model.md).
  std::string e2b_token_key_file;
  // API role (and all): the key credential values are sealed under in the
  // store (store.h, useCredentialKey); made with 32 random bytes when
  // missing. "": <state_dir>/credential-key. The same file on every API
  // replica; a node never holds it and reads only what a replica sealed
  // for it, for the sandboxes it runs (cluster/credential_share.h).
  std::string credential_key_file;

  // TLS on every listener (docs/operations.md, "TLS"): one PEM
  // certificate (chain) and key for all of them, re-read on SIGHUP; or
  // vesseld's own CA (<state_dir>/tls-ca/, made once and reused,
  // name-constrained to tls_names) serving one leaf for tls_names, its
  // certificate written to tls_ca_out ("": <state_dir>/tls-ca.pem) for
  // clients to trust. A listener named in tls_pairs ("LISTENER=CERT,KEY",
  // LISTENER one of kTlsListeners) presents its own pair instead, re-read
  // on SIGHUP too. Without TLS a listener off loopback is refused unless
  // allow_plain_http (a TLS-terminating proxy in front, or a private
  // network).
  std::string tls_cert, tls_key;
  bool tls_self_signed = false;
  std::vector<std::string> tls_names;  // default: the host name, localhost, 127.0.0.1, ::1
  std::string tls_ca_out;
  std::vector<std::string> tls_pairs;
  bool allow_plain_http = false;
  // The listeners' names, as --tls-pair and logs call them: --listen,
  // --data-listen, --e2b-listen, --e2b-envd-listen, --node-listen.
  static constexpr const char* kTlsListeners[] = {"api", "data", "e2b", "envd", "node"};
  struct TlsPair {
    std::string cert, key;
  };
  std::map<std::string, TlsPair> tls_pair_of;  // filled by validate(): by listener
  // Whether every listener without a pair of its own speaks TLS.
  bool tls() const { return !tls_cert.empty() || tls_self_signed; }
  // Whether `listener` (one of kTlsListeners) speaks TLS.
  bool tlsOn(const std::string& listener) const { return tls() || tls_pair_of.count(listener); }

  // Filled by validate(): the parsed listener.
  HostPort listen_addr;
  HostPort data_listen_addr;
  std::optional<HostPort> e2b_listen_addr;        // unset: --e2b-listen ""
  std::map<std::string, size_t> warm_pool_sizes;  // template name -> VMs
  WarmPoolBudget warm_pool_budgets;
  std::optional<HostPort> e2b_envd_listen_addr;  // unset: --e2b-envd-listen ""
  HostPort node_listen_addr;

  // Checks every field (paths exist, enums known, listener parses).
  Status validate();

 private:
  // The api and node roles' flags; reads the node token.
  Status validateRole();
  Status readNodeTokens(const std::string& flag);
  // The TLS flags, the pairs loaded once, and no plain HTTP off loopback
  // unless allowed.
  Status validateTls();
  // --tls-pair into tls_pair_of, each pair loaded once.
  Status validateTlsPairs();
};

}  // namespace vessel::vesseld
