#include "vesseld/daemon.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <random>

#include "api/auth.h"
#include "api/control_plane.h"
#include "api/data_plane.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/run_blocking.h"
#include "base/sha256.h"
#include "e2b/access_token.h"
#include "e2b/envd/envd.h"
#include "e2b/ports.h"
#include "e2b/rest.h"
#include "http/server.h"
#include "hypervisor/qemu/qemu.h"
#include "ingress/proxy.h"
#include "ingress/tls.h"
#include "metrics/registry.h"
#include "node/accel.h"
#include "node/network/egress.h"
#include "node/network/host_networks.h"
#include "node/runtime.h"
#include "node/template_builder.h"
#include "node/template_worker.h"
#include "ops/lifecycle.h"
#include "os/jail.h"
#include "store/store.h"
#include "vesseld/daemon_internal.h"
#include "vesseld/egress_policies.h"
#include "vesseld/gateway_stats.h"
#include "vesseld/local_node.h"
#include "vesseld/probes.h"

namespace vessel::vesseld {

using namespace vessel::api;

namespace fs = std::filesystem;
namespace json = boost::json;

// One vesseld per state directory: a second one would adopt and reap the
// first one's machines. The lock dies with the process, even on kill -9.
void runUntilStopped(asio::io_context& io, std::chrono::seconds bound, std::function<void()> close,
                     std::function<asio::awaitable<void>()> wind_down) {
  Logger log("vesseld");
  asio::signal_set signals(io, SIGINT, SIGTERM);
  asio::steady_timer deadline(io);
  signals.async_wait([&](auto, int sig) {
    log.info("signal {}: shutting down", sig);
    close();
    deadline.expires_after(bound);
    deadline.async_wait([&](auto ec) {
      if (!ec) io.stop();
    });
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await wind_down();
          io.stop();
        },
        asio::detached);
  });
  io.run();
  log.info("stopped");
}

Result<std::unique_ptr<node::network::Egress>> startEgress(asio::io_context& io, const Config& cfg,
                                                           const std::string& slot_prefix) {
  node::network::EgressOptions eo;
  eo.gateway_binary = gatewayBinary(cfg);
  eo.state_dir = cfg.state_dir + "/gateway";
  eo.gateway_netns = cfg.egress_gateway_netns;
  eo.upstream_netns = cfg.egress_upstream_netns;
  eo.resolver = cfg.egress_resolver;
  eo.ca_bundle = cfg.egress_ca_bundle;
  eo.log_level = cfg.log_level;
  eo.layout.prefix = slot_prefix;
  // The node's own networks are never a sandbox's destination: its
  // neighbours on the segment may have public addresses.
  eo.deny_cidrs = node::network::hostNetworks();
  if (!eo.deny_cidrs.empty())
    Logger("vesseld").info("egress refuses this node's networks: {}",
                           fmt::join(eo.deny_cidrs, ", "));
  auto e = node::network::Egress::start(io, eo);
  if (!e.ok()) return std::move(e).error().withContext("egress");
  return std::move(*e);
}

ops::Policy lifecyclePolicy(const Config& cfg) {
  ops::Policy policy;
  policy.default_idle_timeout_s = cfg.default_idle_timeout_s;
  policy.default_lifetime_s = cfg.default_lifetime_s;
  policy.max_lifetime_s = cfg.max_lifetime_s;
  policy.quota.max_sandboxes = cfg.tenant_max_sandboxes;
  policy.quota.max_memory_mib = cfg.tenant_max_memory_mib;
  policy.quota.max_vcpus = cfg.tenant_max_vcpus;
  policy.quota.max_disk_mib = cfg.tenant_max_disk_mib;
  policy.max_disk_mib = static_cast<uint64_t>(cfg.max_disk_mib);
  return policy;
}

Result<Fd> lockStateDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error(Code::kUnavailable, "create state dir " + dir + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  VESSEL_ASSIGN_OR_RETURN(Fd fd, Fd::open(dir + "/vesseld.lock", O_RDWR | O_CREAT, 0600));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      return Error(Code::kAlreadyExists, "another vesseld is using state dir " + dir);
    return Error::fromErrno("lock state dir " + dir);
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  (void)!::ftruncate(fd.get(), 0);
  (void)!::pwrite(fd.get(), pid.data(), pid.size(), 0);
  return fd;
}

std::string randomId() {
  std::random_device rd;
  std::string s;
  static const char* k = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) s.push_back(k[rd() & 15]);
  return s;
}

// vessel-gateway: the flag, else next to vesseld (installed or in the build
// tree), else PATH.
std::string gatewayBinary(const Config& cfg) {
  if (!cfg.gateway_binary.empty()) return cfg.gateway_binary;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (auto p : {self.parent_path() / "vessel-gateway",
                   self.parent_path().parent_path() / "vessel-gateway" / "vessel-gateway"})
      if (fs::exists(p, ec)) return p.string();
  }
  return "vessel-gateway";
}

// The jail's LD_PRELOAD library (memfile_shim.c): next to vesseld in the
// build tree, <prefix>/lib/vessel/ when installed (docs/operations.md,
// "Layout": a shared object does not belong in bin/).
std::string memfileShim() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (auto p : {self.parent_path() / "vessel-memfile-shim.so",
                 self.parent_path().parent_path() / "lib/vessel/vessel-memfile-shim.so"})
    if (fs::exists(p, ec)) return p.string();
  return "";
}

// How each QEMU is confined; unset with --no-jail.
Result<std::optional<hypervisor::qemu::JailOptions>> jailOptions(const Config& cfg,
                                                                 const std::string& prefix) {
  if (!cfg.jail) return std::optional<hypervisor::qemu::JailOptions>();
  if (::geteuid() != 0)
    return Error(Code::kFailedPrecondition,
                 "the VM jail needs root (uids, mounts, cgroups); run as root or pass --no-jail");
  auto range = os::parseUidRange(cfg.vm_uid_range);
  if (!range.ok()) return std::move(range).error().withContext("--vm-uid-range");
  VESSEL_ASSIGN_OR_RETURN(auto uids, os::UidPool::open(*range, cfg.uid_lease_dir, cfg.state_dir));
  VESSEL_ASSIGN_OR_RETURN(auto cgroups, os::detectCgroups());
  hypervisor::qemu::JailOptions jo;
  jo.jailer = {uids, cgroups, cfg.state_dir + "/jail", prefix + "-"};
  jo.memfile_shim = memfileShim();
  if (jo.memfile_shim.empty())
    return Error(Code::kFailedPrecondition,
                 "vessel-memfile-shim.so is neither next to vesseld nor in <prefix>/lib/vessel");
  jo.memory_overhead_mib = cfg.vm_memory_overhead_mib;
  // Templates and images: the only files a qcow2 overlay may be backed by.
  jo.backing_roots = {cfg.cache_dir};
  std::error_code ec;
  fs::create_directories(jo.jailer.jail_root, ec);
  ::chmod(jo.jailer.jail_root.c_str(), 0700);
  return std::optional<hypervisor::qemu::JailOptions>(std::move(jo));
}

// The one place that names the concrete stores: everything else sees
// store::Store.
Result<std::unique_ptr<store::Store>> openStore(const Config& cfg) {
  if (cfg.store == "sqlite") return store::openSqlite(cfg.state_dir + "/vessel.db");
  return store::openPostgres(cfg.store);
}

Status runDaemon(Config cfg) {
  if (cfg.role == Role::kNode) return runNode(std::move(cfg));
  if (cfg.role == Role::kApi) return runApi(std::move(cfg));
  Logger log("vesseld");
  VESSEL_ASSIGN_OR_RETURN(Fd lock, lockStateDir(cfg.state_dir));
  VESSEL_ASSIGN_OR_RETURN(auto store, openStore(cfg));
  auto instance = store->getMeta("instance_id");
  if (!instance.ok()) return std::move(instance).error();
  if (!instance->has_value()) VESSEL_TRY(store->setMeta("instance_id", randomId()));
  std::string instance_id = store->getMeta("instance_id")->value_or("");
  log.info("state dir {} (store {} {} schema v{}, instance {})", cfg.state_dir, store->engine(),
           cfg.store == "sqlite" ? cfg.state_dir + "/vessel.db" : store::redactUrl(cfg.store),
           store->schemaVersion(), instance_id);
  VESSEL_ASSIGN_OR_RETURN(std::string dev_key, ensureDevTenant(*store, cfg.state_dir));
  if (!dev_key.empty()) {
    // Shown once: only its hash is stored. The file keeps it for `make up`.
    std::printf(
        "vesseld: development tenant 'dev' created; API key (also in %s/dev-api-key, and in "
        "its E2B form in %s/dev-e2b-api-key):\n%s\n",
        cfg.state_dir.c_str(), cfg.state_dir.c_str(), dev_key.c_str());
    std::fflush(stdout);
  }
  VESSEL_ASSIGN_OR_RETURN(std::string qemu_version, hypervisor::qemu::qemuVersion(cfg.qemu_binary));
  asio::io_context io;
  // Names derive from the state dir so two vesselds on one host never
  // share a namespace, cgroup or jail.
  const std::string slot_prefix = "v" + sha256Hex(cfg.state_dir).substr(0, 4);
  VESSEL_ASSIGN_OR_RETURN(auto jail, jailOptions(cfg, slot_prefix));
  hypervisor::qemu::QemuHypervisor hv({cfg.qemu_binary, jail});
  if (jail)
    log.info("VM jail: uids {}, cgroup {} ({}), QEMU memory overhead {} MiB", cfg.vm_uid_range,
             jail->jailer.cgroups.fs_root + "/.../" + jail->jailer.cgroups.parent,
             jail->jailer.cgroups.unified ? "v2" : "v1", jail->memory_overhead_mib);
  else
    log.warn("VM jail disabled (--no-jail): QEMU runs as vesseld's own user");
  std::string run_root = cfg.state_dir + "/run";
  std::error_code ec;
  fs::create_directories(run_root, ec);
  // A probe left over from a crashed start must not block this one.
  fs::remove_all(run_root + "/accel-probe", ec);
  node::ProbeInputs probe{
      cfg.kernel,    cfg.minimal_image, "init=/sbin/vessel-agent", run_root + "/accel-probe",
      cfg.cache_dir, qemu_version};
  auto accel = runBlocking(io, node::chooseAccel(cfg.accel, hv, probe));
  if (!accel.ok()) return std::move(accel).error();
  log.info("hypervisor qemu ({}), acceleration {}: {}", qemu_version,
           hypervisor::accelName(accel->accel), accel->reason);
  if (accel->accel != hypervisor::Accel::kKvm) {
    if (cfg.require_kvm)
      return Error(Code::kFailedPrecondition, "--require-kvm: KVM is not usable (" + accel->reason +
                                                  "); refusing to run sandboxes under TCG");
    log.warn(
        "sandboxes run under TCG: QEMU's emulator is not an isolation boundary; do not run "
        "untrusted code on this node in production (--require-kvm enforces KVM)");
  }

  // The `minimal` template, built once per (image, kernel, QEMU) and cached.
  VESSEL_ASSIGN_OR_RETURN(std::string kernel_sha, sha256File(cfg.kernel));
  std::string template_root = cfg.cache_dir + "/templates";
  fs::create_directories(template_root, ec);
  templates::TemplateStore templates(template_root, qemu_version, kernel_sha);
  templates.setMinFreeMib(static_cast<uint64_t>(cfg.min_free_disk_mib));
  templates::BuildSpec spec;
  spec.name = "minimal";
  node::BuildInputs in{cfg.minimal_image, cfg.kernel,   kernel_sha,
                       qemu_version,      accel->accel, run_root + "/template-build"};
  fs::remove_all(in.work_dir, ec);
  fs::create_directories(in.work_dir, ec);
  auto built = runBlocking(io, node::buildTemplate(hv, templates, spec, in));
  if (!built.ok()) return std::move(built).error().withContext("build template minimal");
  log.info("template {} ready", (*built)->id());

  std::unique_ptr<node::network::Egress> egress;
  if (cfg.egress) {
    VESSEL_ASSIGN_OR_RETURN(egress, startEgress(io, cfg, slot_prefix));
  } else {
    log.warn("egress disabled (--no-egress): sandboxes have no network");
  }
  EgressPolicies network(*store, egress.get(), cfg.default_network);
  network.allowPublicSuffixWildcards(cfg.allow_public_suffix_wildcards);

  node::RuntimeOptions ro;
  ro.root = cfg.state_dir + "/runtime";
  ro.kernel = cfg.kernel;
  ro.accel = accel->accel;
  ro.pool_size = 0;  // only the templates --warm-pool names
  ro.agent_reply_timeout = std::chrono::seconds(cfg.agent_reply_timeout_s);
  if (egress) {
    ro.slots = &egress->slots();
    // Most sandboxes have egress: warm VMs get its route and CA ahead of time.
    ro.warm_network = node::GuestNetwork{true, egress->caPem()};
  }
  node::Runtime runtime(io, hv, templates, ro);
  for (const auto& [name, n] : cfg.warm_pool_sizes) {
    runtime.setPoolSize(name, n);
    runtime.setPoolBudget(name, cfg.warm_pool_budgets.forTemplate(name));
  }
  LocalNode local_node(io, runtime, &network);
  ops::Lifecycle lifecycle(io, *store, local_node, templates);
  ControlPlane control(io, *store, lifecycle, templates);
  node::TemplateBuildEnv build_env;
  // Build VMs run tenant code: jailed like every other VM.
  build_env.hypervisor = [opts = hypervisor::qemu::QemuOptions{cfg.qemu_binary, jail}] {
    return std::make_unique<hypervisor::qemu::QemuHypervisor>(opts);
  };
  build_env.qemu_version = qemu_version;
  build_env.kernel = cfg.kernel;
  build_env.kernel_sha256 = kernel_sha;
  build_env.accel = accel->accel;
  build_env.template_root = template_root;
  build_env.work_dir = run_root + "/tb";
  build_env.min_free_mib = static_cast<uint64_t>(cfg.min_free_disk_mib);
  local_node.enableTemplateBuilds(std::move(build_env));
  metrics::Registry metrics;
  lifecycle.setMetrics(metrics);
  SessionOptions session_opts;
  session_opts.data_url = cfg.data_url;
  Sessions sessions(*store, session_opts);
  control.setSessions(&sessions);
  DataPlane data(io, sessions, control);
  HttpServer data_server(io);
  data.install(data_server);
  // The gateway's counters, read off the io thread when /metrics is scraped.
  std::unique_ptr<GatewayStats> gateway_stats;
  if (egress) {
    gateway_stats = std::make_unique<GatewayStats>(
        io, GatewayStats::Options{.control_socket = egress->controlSocket()});
    metrics.addCollector(
        [&](metrics::SampleWriter& w) { gateway_stats->write(w, egress->healthy()); });
  }
  // Take over what an earlier vesseld left (running VMs, paused sandboxes,
  // operations in flight) before anyone can ask about it.
  runBlocking(io, lifecycle.recover());
  // Jails of VMs that died while no vesseld watched them.
  hv.sweepJails();
  // Slots of VMs that did not survive the restart (and of pooled VMs,
  // which never do) go now.
  if (egress)
    egress->slots().dropLeftovers();
  else
    node::network::removeLeftovers(slot_prefix);
  ops::Policy policy = lifecyclePolicy(cfg);
  policy.state_dir = cfg.state_dir;
  policy.min_free_disk_mib = static_cast<uint64_t>(cfg.min_free_disk_mib);
  lifecycle.setPolicy(policy);
  lifecycle.startReaper();
  metrics.addCollector([&](metrics::SampleWriter& w) {
    std::map<std::string, node::WarmPool::Stats> st;
    for (const auto& [name, n] : cfg.warm_pool_sizes) st[name] = runtime.poolStats(name);
    auto family = [&](const char* metric, const char* help, const char* type, auto value) {
      w.family(metric, help, type);
      for (const auto& [name, s] : st)
        w.sample(metric, {"template"}, {name}, static_cast<double>(value(s)));
    };
    using S = node::WarmPool::Stats;
    family("vessel_warm_pool_vms", "VMs restored and waiting for a create, per template", "gauge",
           [](const S& s) { return s.pooled; });
    family("vessel_warm_pool_target_vms",
           "VMs the warm pool sizes itself to from demand (within --warm-pool-budget)", "gauge",
           [](const S& s) { return s.target; });
    family("vessel_warm_pool_hits_total", "Creates that found a VM in the warm pool", "counter",
           [](const S& s) { return s.hits; });
    family("vessel_warm_pool_misses_total", "Creates that found the warm pool empty", "counter",
           [](const S& s) { return s.misses; });
    family("vessel_warm_pool_vm_pss_mib",
           "Memory (PSS) one pooled VM holds, measured; what the budget is counted in", "gauge",
           [](const S& s) { return s.vm_cost_mib; });
  });
  // Warm pools fill in the background; creates work (slower) meanwhile.
  for (const auto& [name, n] : cfg.warm_pool_sizes)
    if (n > 0) {
      log.info("warm pool: {} VM(s) of {}", n, name);
      runtime.keepPoolFull(name);
    }

  HttpServer server(io);
  server.setMetrics(metrics, "control");
  data_server.setMetrics(metrics, "data");
  control.install(server);
  // Unauthenticated like /healthz: aggregate numbers only (no ids, no
  // tenant names), on the control listener, which is loopback by default.
  server.route(http::verb::get, "/metrics", [&](const Request& req) -> asio::awaitable<Response> {
    Response res{http::status::ok, req.version()};
    res.set(http::field::content_type, metrics::kContentType);
    res.keep_alive(req.keep_alive());
    if (gateway_stats) co_await gateway_stats->refresh();
    res.body() = metrics.render();
    res.prepare_payload();
    co_return res;
  });
  // What stands between a guest and this host, said plainly (TCG is not an
  // isolation boundary by QEMU's own security policy).
  json::object isolation{
      {"boundary", accel->accel == hypervisor::Accel::kKvm},
      {"jail", jail.has_value()},
  };
  if (accel->accel != hypervisor::Accel::kKvm)
    isolation["warning"] =
        "sandboxes run under TCG (no KVM): QEMU's emulator is not an isolation boundary; "
        "do not run untrusted code on this node in production";
  else if (!jail)
    isolation["warning"] = "VM jail disabled (--no-jail): QEMU runs as vesseld's own user";
  server.route(http::verb::get, "/healthz", [&](const Request& req) -> asio::awaitable<Response> {
    json::object o{{"status", "ok"},
                   {"version", VESSEL_VERSION},
                   {"instance_id", instance_id},
                   {"hypervisor", "qemu"},
                   {"hypervisor_version", qemu_version},
                   {"accel", std::string(hypervisor::accelName(accel->accel))},
                   {"accel_requested", std::string(accelModeName(cfg.accel))},
                   {"accel_reason", accel->reason},
                   {"accel_fallback",
                    cfg.accel == AccelMode::kAuto && accel->accel == hypervisor::Accel::kTcg},
                   {"isolation", isolation},
                   {"store", std::string(store->engine())},
                   {"state_dir", cfg.state_dir}};
    // A dead gateway that could not be restarted makes the node unhealthy:
    // its sandboxes have no network.
    bool ok = true;
    if (egress) {
      o["gateway"] = egress->health();
      ok = egress->healthy();
    } else {
      o["gateway"] = json::object{{"enabled", false}};
    }
    if (!ok) o["status"] = "unhealthy";
    co_return jsonResponse(req, ok ? http::status::ok : http::status::service_unavailable,
                           json::serialize(o));
  });
  installProbes(server, "all", [&](json::object& o) {
    bool store_ok = store->getMeta("instance_id").ok();
    o["store"] = store_ok;
    return store_ok;
  });
  VESSEL_TRY(server.listen(cfg.listen_addr));
  log.info("listening on http://{}:{}", cfg.listen_addr.host, server.port());
  VESSEL_TRY(data_server.listen(cfg.data_listen_addr));
  log.info("data plane on http://{}:{} (clients are told {})", cfg.data_listen_addr.host,
           data_server.port(), cfg.data_url);
  // The E2B-compatible REST API: E2B's SDKs with E2B_API_URL pointing here.
  VESSEL_ASSIGN_OR_RETURN(e2b::AccessTokens envd_tokens, e2b::AccessTokens::open(cfg.state_dir));
  e2b::RestApi e2b_rest(
      lifecycle, [&store](std::string_view key) { return api::tenantForKey(key, *store); },
      templates, envd_tokens);
  HttpServer e2b_server(io);
  e2b_server.setMetrics(metrics, "e2b");
  e2b_rest.install(e2b_server);
  if (cfg.e2b_listen_addr) {
    VESSEL_TRY(e2b_server.listen(*cfg.e2b_listen_addr));
    log.info("E2B REST API on http://{}:{} (E2B_API_URL; key in {}/dev-e2b-api-key)",
             cfg.e2b_listen_addr->host, e2b_server.port(), cfg.state_dir);
  }

  // E2B envd (docs/e2b-envd.md): the SDKs' sandbox port, mapped onto the
  // lifecycle's agents; uploads arrive whole (multipart), hence the body cap.
  // The same tokens as the REST API hands out.
  e2b::envd::Sandboxes envd_sandboxes;
  envd_sandboxes.agent_of = [&](const std::string& id) { return lifecycle.agentOf(id); };
  envd_sandboxes.live_ids = [&] {
    std::vector<std::string> ids;
    if (auto live = store->listLiveSandboxes(); live.ok())
      for (const auto& sb : *live)
        if (sb.state == store::SandboxState::kRunning) ids.push_back(sb.id);
    return ids;
  };
  envd_sandboxes.tenant_of = [&](const std::string& id) {
    auto sb = store->findSandbox(id);
    return sb.ok() && *sb ? (*sb)->tenant_id : std::string();
  };
  e2b::envd::Envd envd(io, std::move(envd_sandboxes), envd_tokens);
  // A sandbox's watchers and processes go with it (a pause keeps them for
  // EnvdLimits::keep_detached).
  auto envd_frees = lifecycle.operations().onSandboxState(
      [&envd](const std::string&, const std::string& id, store::SandboxState st) {
        if (st == store::SandboxState::kDeleting || st == store::SandboxState::kDeleted ||
            st == store::SandboxState::kFailed)
          envd.sandboxEnded(id);
      });
  HttpServer envd_server(io, ServerLimits{16 * 1024, 64u << 20, std::chrono::seconds(60)});
  envd_server.setMetrics(metrics, "e2b-envd");
  envd.install(envd_server);
  // Sandbox ports (E2B's getHost): <port>-<id>.<domain> on the same
  // listener, plain or TLS (docs/e2b.md).
  std::string domain =
      cfg.e2b_sandbox_domain.empty() ? std::string("vessel.localhost") : cfg.e2b_sandbox_domain;
  ingress::Proxy ports(domain, e2b::portRoutes(lifecycle, envd_tokens), 49983);
  std::unique_ptr<ingress::TlsFront> ports_tls;
  if (cfg.e2b_envd_listen_addr) {
    ports.install(envd_server);
    VESSEL_ASSIGN_OR_RETURN(ports_tls, ingress::TlsFront::create(io, cfg.state_dir, domain));
    ports_tls->install(envd_server);
    VESSEL_TRY(envd_server.listen(*cfg.e2b_envd_listen_addr));
    if (cfg.e2b_sandbox_domain.empty()) domain += ":" + std::to_string(envd_server.port());
    e2b_rest.setSandboxDomain(domain);
    log.info(
        "E2B envd on http://{}:{} (E2B_SANDBOX_URL); sandbox ports at "
        "http(s)://<port>-<id>.{} (CA: {})",
        cfg.e2b_envd_listen_addr->host, envd_server.port(), domain, ports_tls->caPath());
  }

  runUntilStopped(
      io, std::chrono::seconds(30),
      [&] {
        server.close();
        data_server.close();
        e2b_server.close();
        envd_server.close();
      },
      [&]() -> asio::awaitable<void> {
        co_await lifecycle.shutdown(cfg.stop_vms_on_exit);
        if (egress) egress->stop();
      });
  return okStatus();
}

}  // namespace vessel::vesseld
