#include "vesseld/cli.h"

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <cstdio>

#include "base/log.h"
#include "vesseld/daemon.h"
#include "vesseld/settings.h"

namespace vessel::vesseld {

namespace {

// Every flag, bound to `cfg` (--accel and --role to strings parsed after).
// Over 80 lines: one statement per flag, kept together so the help text
// reads as one table.
void addFlags(CLI::App& app, Config& cfg, std::string& accel, std::string& role) {
  app.add_option("--role", role,
                 "all (one machine: API and node, SQLite by default), api (a stateless API "
                 "replica) or node (runs sandboxes for the API replicas); api and node need "
                 "--store=postgres://...")
      ->envname("VESSEL_ROLE")
      ->capture_default_str();
  app.add_option("--node-listen", cfg.node_listen,
                 "node role: the node API's listener (IPv4:port; bearer token)")
      ->envname("VESSEL_NODE_LISTEN")
      ->capture_default_str();
  app.add_option("--node-name", cfg.node_name, "node role: its name (default: the host name)")
      ->envname("VESSEL_NODE_NAME");
  app.add_option("--node-advertise", cfg.node_advertise,
                 "node role: the node API's URL as API replicas reach it "
                 "(default http://<node-listen>, https:// with TLS on)")
      ->envname("VESSEL_NODE_ADVERTISE");
  app.add_option("--node-ca-file", cfg.node_ca_file,
                 "api and node roles: PEM CA certificate(s) a node's certificate must chain to "
                 "when it advertises https:// (default: the system's trust store)")
      ->envname("VESSEL_NODE_CA_FILE");
  app.add_option("--node-token-file", cfg.node_token_file,
                 "node role: file holding this node's token (else VESSEL_NODE_TOKEN); api "
                 "role without --node-tokens-file: the one token every node shares")
      ->envname("VESSEL_NODE_TOKEN_FILE");
  app.add_option("--node-tokens-file", cfg.node_tokens_file,
                 "api role: file of every node's token, lines \"NAME TOKEN\" (vessel node "
                 "token NAME makes one); each node then accepts only its own")
      ->envname("VESSEL_NODE_TOKENS_FILE");
  app.add_option("--catalogue-key-file", cfg.catalogue_key_file,
                 "api role: the Ed25519 key (64 hex digits, mode 0600; vessel catalogue key "
                 "FILE makes one) that signs the templates nodes build or fork")
      ->envname("VESSEL_CATALOGUE_KEY_FILE");
  app.add_option("--catalogue-public-key-file", cfg.catalogue_public_key_file,
                 "node role: its public key (64 hex digits); the node then copies only "
                 "template catalogue entries the API replicas signed")
      ->envname("VESSEL_CATALOGUE_PUBLIC_KEY_FILE");
  app.add_option("--node-lost-after", cfg.node_lost_after_s,
                 "api role: seconds without a heartbeat after which a node is lost and its "
                 "sandboxes fail")
      ->capture_default_str();
  app.add_option("--listen", cfg.listen, "API listener (IPv4:port)")->capture_default_str();
  app.add_option("--data-listen", cfg.data_listen,
                 "data plane listener (IPv4:port; session tokens only)")
      ->capture_default_str();
  app.add_option("--data-url", cfg.data_url,
                 "data plane URL handed to clients (default http://<data-listen>)");
  app.add_option("--console-dir", cfg.console_dir,
                 "the web console's files, served at /console on the API listener (default: "
                 "the build's or installed ones next to vesseld; \"off\" serves none)");
  app.add_option("--e2b-listen", cfg.e2b_listen,
                 "E2B-compatible REST API listener (IPv4:port; \"\" turns it off)")
      ->envname("VESSEL_E2B_LISTEN")
      ->capture_default_str();
  app.add_option("--e2b-envd-listen", cfg.e2b_envd_listen,
                 "E2B envd listener, the SDKs' E2B_SANDBOX_URL (IPv4:port; \"\" = off)")
      ->capture_default_str();
  app.add_option("--e2b-envd-advertise", cfg.e2b_envd_advertise,
                 "node role: the envd listener's URL as API replicas reach it, to forward "
                 "the envd traffic of this node's sandboxes (default http://<e2b-envd-listen>, "
                 "https:// with TLS on)")
      ->envname("VESSEL_E2B_ENVD_ADVERTISE");
  app.add_option("--e2b-token-key-file", cfg.e2b_token_key_file,
                 "api role: the key of E2B envd and traffic access tokens, the same file on "
                 "every replica; made when missing (default <state-dir>/e2b-token-key)")
      ->envname("VESSEL_E2B_TOKEN_KEY_FILE");
  app.add_option("--credential-key-file", cfg.credential_key_file,
                 "api role: the key credential values are encrypted under in the store, the "
                 "same file on every replica; made when missing (default "
                 "<state-dir>/credential-key)")
      ->envname("VESSEL_CREDENTIAL_KEY_FILE");
  app.add_option("--e2b-sandbox-domain", cfg.e2b_sandbox_domain,
                 "domain of E2B sandbox ports, <port>-<id>.<domain> on the envd listener "
                 "(default vessel.localhost:<envd port>; must resolve to this host)");
  app.add_option("--state-dir", cfg.state_dir, "state directory (store, sandboxes, sockets)")
      ->envname("VESSEL_STATE_DIR")
      ->capture_default_str();
  app.add_option("--store", cfg.store,
                 "the store: sqlite (embedded, <state-dir>/vessel.db; one vesseld) or a "
                 "PostgreSQL URL, postgres://USER:PASSWORD@HOST:PORT/DB (shared by several "
                 "vesseld; pass it in VESSEL_STORE or --config to keep the password out of ps)")
      ->envname("VESSEL_STORE")
      ->capture_default_str();
  app.add_option("--cache-dir", cfg.cache_dir, "cache of kernels, images and probe verdicts")
      ->envname("VESSEL_CACHE_DIR")
      ->capture_default_str();
  app.add_option("--accel", accel, "acceleration: auto, kvm or tcg")->capture_default_str();
  app.add_option("--hypervisor", cfg.hypervisor, "hypervisor backend (qemu)")
      ->capture_default_str();
  app.add_option("--qemu", cfg.qemu_binary, "QEMU binary")->capture_default_str();
  app.add_option("--kernel", cfg.kernel, "guest kernel (vmlinux)")->envname("VESSEL_KERNEL");
  app.add_option("--minimal-image", cfg.minimal_image, "root filesystem of the minimal template")
      ->envname("VESSEL_MINIMAL_IMAGE");
  app.add_option("--log-level", cfg.log_level, "debug, info, warn or error")->capture_default_str();
  app.add_option("--log-format", cfg.log_format,
                 "vesseld's own log lines: text, or json (one object per line)")
      ->capture_default_str();
  app.add_option("--log-retention", cfg.log_retention_s,
                 "seconds a sandbox's log is kept after the sandbox ends")
      ->capture_default_str();
  app.add_option("--log-max-entries", cfg.log_max_entries,
                 "entries kept in each sandbox's log (the oldest go)")
      ->capture_default_str();
  app.add_flag("--command-log,!--no-command-log", cfg.command_log,
               "log each command, file operation and port connection of the front ends in its "
               "sandbox's log (default on)");
  app.add_option("--operator-tenant", cfg.operator_tenants,
                 "a tenant id whose API keys are operators' (GET /v1/nodes); repeatable");
  app.add_flag("--egress,!--no-egress", cfg.egress,
               "run vessel-gateway and give sandboxes network slots (default on)");
  app.add_option("--gateway-binary", cfg.gateway_binary,
                 "vessel-gateway (default: next to vesseld)")
      ->envname("VESSEL_GATEWAY_BINARY");
  app.add_option("--egress-gateway-netns", cfg.egress_gateway_netns,
                 "namespace the gateway listens in (default: a private one)")
      ->envname("VESSEL_EGRESS_GATEWAY_NETNS");
  app.add_option("--egress-upstream-netns", cfg.egress_upstream_netns,
                 "network namespace (name or path) the gateway resolves and connects from")
      ->envname("VESSEL_EGRESS_UPSTREAM_NETNS");
  app.add_option("--egress-resolver", cfg.egress_resolver, "trusted upstream resolver IP[:PORT]")
      ->envname("VESSEL_EGRESS_RESOLVER");
  app.add_option("--egress-ca-bundle", cfg.egress_ca_bundle,
                 "CA bundle the gateway verifies upstreams against")
      ->envname("VESSEL_EGRESS_CA_BUNDLE");
  app.add_option("--default-network", cfg.default_network,
                 "network mode of a sandbox created without one: none or full")
      ->capture_default_str()
      ->envname("VESSEL_DEFAULT_NETWORK");
  app.add_flag("--allow-public-suffix-wildcards", cfg.allow_public_suffix_wildcards,
               "accept wildcard rules on public suffixes (*.co.uk, *.github.io), refused by "
               "default");
  app.add_flag("--stop-vms-on-exit", cfg.stop_vms_on_exit,
               "stop running VMs on SIGTERM/SIGINT instead of leaving them for the next vesseld");
  app.add_option("--default-idle-timeout", cfg.default_idle_timeout_s,
                 "seconds without activity before a running sandbox ends (0: never)")
      ->capture_default_str();
  app.add_option("--default-lifetime", cfg.default_lifetime_s,
                 "seconds a sandbox lives when its create names no lifetime")
      ->capture_default_str();
  app.add_option("--max-lifetime", cfg.max_lifetime_s, "most seconds a sandbox may live")
      ->capture_default_str();
  app.add_option("--tenant-max-sandboxes", cfg.tenant_max_sandboxes,
                 "live sandboxes per tenant unless the tenant has its own limit")
      ->capture_default_str();
  app.add_option("--tenant-max-memory", cfg.tenant_max_memory_mib,
                 "MiB of running sandboxes per tenant unless the tenant has its own limit")
      ->capture_default_str();
  app.add_option("--tenant-max-vcpus", cfg.tenant_max_vcpus,
                 "vCPUs of running sandboxes per tenant unless the tenant has its own limit")
      ->capture_default_str();
  app.add_option("--tenant-max-disk", cfg.tenant_max_disk_mib,
                 "MiB of this node's disk per tenant (sandbox disks, pause snapshots, fork "
                 "copies, templates, builds) unless the tenant has its own limit")
      ->capture_default_str();
  app.add_option("--max-disk-mib", cfg.max_disk_mib,
                 "the largest root disk a create may ask for (disk_mib), MiB")
      ->capture_default_str();
  app.add_option("--tenant-max-volume-mib", cfg.tenant_max_volume_mib,
                 "MiB of volumes per tenant (the sum of their sizes)")
      ->capture_default_str();
  app.add_option("--max-volume-mib", cfg.max_volume_mib,
                 "the largest volume a create may ask for (size_mib), MiB")
      ->capture_default_str();
  app.add_option("--e2b-volume-mib", cfg.e2b_volume_mib,
                 "the size of a volume E2B's Volume API makes (it gives none), MiB; 0: 1024, "
                 "or --max-volume-mib if that is smaller")
      ->capture_default_str();
  app.add_option("--min-free-disk-mib", cfg.min_free_disk_mib,
                 "refuse creates, pauses, forks and builds while the state directory's "
                 "filesystem has less free space than this, MiB (0: never)")
      ->capture_default_str();
  app.add_option("--max-image-mib", cfg.max_image_mib,
                 "template builds from images (from_image): refuse images larger than this, "
                 "MiB (in the registry and unpacked)")
      ->capture_default_str();
  app.add_option("--max-build-context-mib", cfg.max_build_context_mib,
                 "Dockerfile builds through the API: refuse a build context (its tar) larger "
                 "than this, MiB")
      ->capture_default_str();
  app.add_option("--build-cache-mib", cfg.build_cache_mib,
                 "Dockerfile builds: keep each instruction's disk, at most this much in all "
                 "(MiB; the least recently used go first; 0: rebuild every step)")
      ->capture_default_str();
  app.add_option("--max-concurrent-builds", cfg.max_concurrent_builds,
                 "template builds running at once on this node (1-8; more wait in its queue)")
      ->capture_default_str();
  app.add_option("--insecure-registry", cfg.insecure_registries,
                 "HOST:PORT of a registry images may be pulled from over plain HTTP "
                 "(loopback registries may anyway); repeatable");
  app.add_option("--warm-pool", cfg.warm_pool,
                 "TEMPLATE=N[,...]: VMs kept restored and warmed up per template (\"\": none)")
      ->envname("VESSEL_WARM_POOL")
      ->capture_default_str();
  app.add_option("--warm-pool-budget", cfg.warm_pool_budget,
                 "MIB or TEMPLATE=MIB[,...]: memory each warm pool may grow to with demand "
                 "(0: fixed at its --warm-pool N)")
      ->envname("VESSEL_WARM_POOL_BUDGET")
      ->capture_default_str();
  app.add_flag("--jail,!--no-jail", cfg.jail,
               "run every QEMU jailed: own uid, no capabilities, private mounts, own cgroup "
               "(default on; needs root)");
  app.add_option("--vm-uid-range", cfg.vm_uid_range, "FIRST-LAST: uids (and gids) leased to VMs")
      ->capture_default_str();
  app.add_option("--uid-lease-dir", cfg.uid_lease_dir,
                 "host-wide directory of uid leases, shared by every vesseld on the host")
      ->capture_default_str();
  app.add_option("--vm-memory-overhead", cfg.vm_memory_overhead_mib,
                 "MiB a VM's cgroup may use above its guest RAM (QEMU itself)")
      ->capture_default_str();
  app.add_option("--agent-reply-timeout", cfg.agent_reply_timeout_s,
                 "seconds a guest's agent has to begin answering an exec, file or process call "
                 "before the call fails (0: wait forever)")
      ->capture_default_str();
  app.add_flag("--require-kvm", cfg.require_kvm,
               "refuse to start unless sandboxes run under KVM (TCG is not an isolation "
               "boundary)");
  app.add_option("--tls-cert", cfg.tls_cert,
                 "TLS on every listener: PEM certificate (chain) file, re-read on SIGHUP")
      ->envname("VESSEL_TLS_CERT");
  app.add_option("--tls-key", cfg.tls_key, "the PEM private key of --tls-cert")
      ->envname("VESSEL_TLS_KEY");
  app.add_flag("--tls-self-signed", cfg.tls_self_signed,
               "TLS on every listener with vesseld's own CA (made once in <state-dir>/tls-ca/, "
               "name-constrained to the --tls-name names) and a certificate for those names");
  app.add_option("--tls-name", cfg.tls_names,
                 "--tls-self-signed: a DNS name or IP address clients reach vesseld at "
                 "(repeatable; default: the host name, localhost, 127.0.0.1, ::1)");
  app.add_option("--tls-ca-out", cfg.tls_ca_out,
                 "--tls-self-signed: where the CA certificate clients trust is written "
                 "(default <state-dir>/tls-ca.pem)");
  app.add_option("--tls-pair", cfg.tls_pairs,
                 "LISTENER=CERT,KEY: this listener (api, data, e2b, envd or node) presents its "
                 "own PEM certificate and key instead (repeatable; re-read on SIGHUP)");
  app.add_flag("--allow-plain-http", cfg.allow_plain_http,
               "let listeners off loopback speak plain HTTP (behind a TLS-terminating proxy or "
               "on a private network); refused by default");
  // Every long option above may also come from a TOML/INI file
  // (`egress-resolver = "192.0.2.53"`); flags win over the file.
  app.set_config("--config", "", "configuration file (TOML or INI)")->envname("VESSEL_CONFIG");
}

}  // namespace

int vesseldMain(int argc, char** argv, Binary binary) {
  Config cfg;
  std::string accel = "auto";
  std::string role = "all";
  bool print_config = false;
  CLI::App app{"vesseld: runs Vessel sandboxes and serves the Vessel API"};
  addFlags(app, cfg, accel, role);
  app.add_flag("--print-config", print_config,
               "print the settings this role resolved from the flags (JSON) and exit");
  if (binary.add_flags) binary.add_flags(app);
  CLI11_PARSE(app, argc, argv);

  auto mode = node::parseAccelMode(accel);
  if (!mode.ok()) {
    std::fprintf(stderr, "vesseld: --accel: %s\n", mode.error().message().c_str());
    return 2;
  }
  cfg.accel = *mode;
  auto r = parseRole(role);
  if (!r.ok()) {
    std::fprintf(stderr, "vesseld: %s\n", r.error().message().c_str());
    return 2;
  }
  cfg.role = *r;
  if (auto s = cfg.validate(); !s.ok()) {
    std::fprintf(stderr, "vesseld: %s\n", s.error().message().c_str());
    return 2;
  }
  if (!binary.machines.count(cfg.hypervisor)) {
    std::string known;
    for (const auto& [name, f] : binary.machines) known += (known.empty() ? "" : ", ") + name;
    std::fprintf(stderr, "vesseld: hypervisor '%s' is not supported (supported: %s)\n",
                 cfg.hypervisor.c_str(), known.c_str());
    return 2;
  }
  if (binary.check)
    if (auto s = binary.check(cfg); !s.ok()) {
      std::fprintf(stderr, "vesseld: %s\n", s.error().message().c_str());
      return 2;
    }
  if (print_config) {
    std::printf("%s\n", boost::json::serialize(settingsJson(cfg)).c_str());
    return 0;
  }
  initLogging(cfg.log_level, cfg.log_format == "json" ? LogFormat::kJson : LogFormat::kText);
  if (auto s = runDaemon(std::move(cfg), binary.machines); !s.ok()) {
    std::fprintf(stderr, "vesseld: %s\n", s.error().message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace vessel::vesseld
