// vesseld --role=node: runs sandboxes on this host for the API replicas.
// It registers in the store and heartbeats its capacity there every two
// seconds, serves the ops::Node calls of its LocalNode over the node API
// (cluster/node_server.h, bearer token), and serves the data plane for
// the sandboxes it runs (session tokens are checked against the shared
// store). It reconciles with the store at start and whenever its
// heartbeats get through again after failing: VMs the store no longer
// places here (failed while the node was lost, deleted) are destroyed; the
// ones the store still wants are kept.
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "api/data_plane.h"
#include "api/sessions.h"
#include "base/log.h"
#include "base/run_blocking.h"
#include "base/sha256.h"
#include "cluster/node_server.h"
#include "cluster/template_catalogue.h"
#include "cluster/template_node.h"
#include "cluster/template_transfer.h"
#include "e2b/access_token.h"
#include "e2b/envd/envd.h"
#include "http/server.h"
#include "hypervisor/testing/fake_hypervisor.h"
#include "node/accel.h"
#include "node/runtime.h"
#include "node/template_builder.h"
#include "node/template_worker.h"
#include "ops/operation_log.h"
#include "vesseld/daemon_internal.h"
#include "vesseld/egress_policies.h"
#include "vesseld/local_node.h"
#include "vesseld/probes.h"

namespace vessel::vesseld {

namespace fs = std::filesystem;
namespace json = boost::json;
using store::SandboxState;

namespace {

Logger nodeLog() { return Logger("vesseld-node"); }

uint64_t hostMemoryMib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib / 1024;
    in.ignore(256, '\n');
  }
  return 0;
}

// The data plane here reaches only this node's sandboxes; using one
// restarts its idle clock in the store.
class NodeSandboxes final : public api::LiveSandboxes {
 public:
  NodeSandboxes(LocalNode& node, store::Store& store) : node_(node), store_(store) {}
  std::shared_ptr<agentclient::AgentClient> agentOf(const std::string& id) override {
    auto a = node_.agent(id);
    if (a) (void)store_.touchSandbox(id, store::nowMs());
    return a;
  }

 private:
  LocalNode& node_;
  store::Store& store_;
};

}  // namespace

Status runNode(Config cfg) {
  Logger log = nodeLog();
  VESSEL_ASSIGN_OR_RETURN(Fd lock, lockStateDir(cfg.state_dir));
  VESSEL_ASSIGN_OR_RETURN(auto store, openStore(cfg));
  log.info("node {} (store {} schema v{}), node API on {} (advertised {})", cfg.node_name,
           store::redactUrl(cfg.store), store->schemaVersion(), cfg.node_listen,
           cfg.node_advertise);
  asio::io_context io;
  const bool fake = cfg.hypervisor == "fake";
  const std::string slot_prefix = "v" + sha256Hex(cfg.state_dir).substr(0, 4);
  std::string run_root = cfg.state_dir + "/run";
  std::error_code ec;
  fs::create_directories(run_root, ec);
  std::string template_root = cfg.cache_dir + "/templates";
  fs::create_directories(template_root, ec);

  // The hypervisor: QEMU as in --role=all, or the test-only fake.
  std::unique_ptr<hypervisor::Hypervisor> hv;
  hypervisor::qemu::QemuHypervisor* qemu = nullptr;
  std::string qemu_version = "fake", kernel_sha = "k";  // what installFakeTemplate writes
  hypervisor::Accel accel = hypervisor::Accel::kTcg;
  std::optional<hypervisor::qemu::JailOptions> jail;
  if (fake) {
    log.warn("--hypervisor=fake: sandboxes are host processes (tests only)");
    hv = std::make_unique<hypervisor::testing::FakeHypervisor>(
        hypervisor::testing::FakeOptions{cfg.fake_agent});
  } else {
    VESSEL_ASSIGN_OR_RETURN(qemu_version, hypervisor::qemu::qemuVersion(cfg.qemu_binary));
    VESSEL_ASSIGN_OR_RETURN(jail, jailOptions(cfg, slot_prefix));
    auto q = std::make_unique<hypervisor::qemu::QemuHypervisor>(
        hypervisor::qemu::QemuOptions{cfg.qemu_binary, jail});
    qemu = q.get();
    hv = std::move(q);
    fs::remove_all(run_root + "/accel-probe", ec);
    node::ProbeInputs probe{
        cfg.kernel,    cfg.minimal_image, "init=/sbin/vessel-agent", run_root + "/accel-probe",
        cfg.cache_dir, qemu_version};
    auto a = runBlocking(io, node::chooseAccel(cfg.accel, *hv, probe));
    if (!a.ok()) return std::move(a).error();
    accel = a->accel;
    if (accel != hypervisor::Accel::kKvm && cfg.require_kvm)
      return Error(Code::kFailedPrecondition,
                   "--require-kvm: KVM is not usable (" + a->reason + ")");
    VESSEL_ASSIGN_OR_RETURN(kernel_sha, sha256File(cfg.kernel));
  }
  templates::TemplateStore templates(template_root, qemu_version, kernel_sha);
  templates.setMinFreeMib(static_cast<uint64_t>(cfg.min_free_disk_mib));
  if (fake) {
    if (!templates.open("minimal").ok())
      VESSEL_TRY_CTX(
          hypervisor::testing::installFakeTemplate(templates, run_root + "/tb-fake", "minimal"),
          "install the fake minimal template");
  } else {
    templates::BuildSpec spec;
    spec.name = "minimal";
    node::BuildInputs in{cfg.minimal_image, cfg.kernel, kernel_sha,
                         qemu_version,      accel,      run_root + "/template-build"};
    fs::remove_all(in.work_dir, ec);
    fs::create_directories(in.work_dir, ec);
    auto built = runBlocking(io, node::buildTemplate(*hv, templates, spec, in));
    if (!built.ok()) return std::move(built).error().withContext("build template minimal");
  }

  std::unique_ptr<node::network::Egress> egress;
  if (cfg.egress) {
    VESSEL_ASSIGN_OR_RETURN(egress, startEgress(io, cfg, slot_prefix));
  }
  EgressPolicies network(*store, egress.get(), cfg.default_network);
  network.allowPublicSuffixWildcards(cfg.allow_public_suffix_wildcards);
  node::RuntimeOptions ro;
  ro.root = cfg.state_dir + "/runtime";
  ro.kernel = cfg.kernel;
  ro.accel = accel;
  ro.pool_size = 0;
  ro.grow_disks = !fake;  // the fake's host-run agent has no disk to grow
  if (egress) {
    ro.slots = &egress->slots();
    ro.warm_network = node::GuestNetwork{true, egress->caPem()};
  }
  node::Runtime runtime(io, *hv, templates, ro);
  if (!fake)
    for (const auto& [name, n] : cfg.warm_pool_sizes) {
      runtime.setPoolSize(name, n);
      runtime.setPoolBudget(name, cfg.warm_pool_budgets.forTemplate(name));
    }
  LocalNode local(io, runtime, &network);
  // Template builds for the API replicas, on the worker's own hypervisor.
  {
    node::TemplateBuildEnv env;
    if (fake)
      env.hypervisor = [agent = cfg.fake_agent] {
        return std::make_unique<hypervisor::testing::FakeHypervisor>(
            hypervisor::testing::FakeOptions{agent});
      };
    else
      env.hypervisor = [opts = hypervisor::qemu::QemuOptions{cfg.qemu_binary, jail}] {
        return std::make_unique<hypervisor::qemu::QemuHypervisor>(opts);
      };
    env.qemu_version = qemu_version;
    env.kernel = cfg.kernel;
    env.kernel_sha256 = kernel_sha;
    env.accel = accel;
    env.template_root = template_root;
    env.work_dir = run_root + "/tb";
    env.min_free_mib = static_cast<uint64_t>(cfg.min_free_disk_mib);
    local.enableTemplateBuilds(std::move(env));
  }
  // The cluster's template catalogue: what this node has is registered;
  // what it lacks is copied from another node on first use and checked.
  cluster::StoreCatalogue catalogue(*store);
  log.info("template catalogue: {} template(s) here registered",
           cluster::registerInstalled(templates, catalogue));
  cluster::FetchOptions fo;
  fo.self = cfg.node_name;
  fo.token = cfg.node_token;
  cluster::TemplateFetcher fetcher(io, templates, catalogue, *store, fo);
  cluster::TemplateNode served(local, templates, catalogue, *store, fetcher, cfg.node_name);
  ops::OperationLog oplog(*store, systemWallClock());
  // A VM lost here (it exited, its agent failed) fails its sandbox in the
  // store, with an event, as the lifecycle does on one machine.
  local.onLost([&](const std::string& tenant, const std::string& id, const std::string& why) {
    auto sb = store->getSandbox(tenant, id);
    if (!sb.ok() || !*sb || (*sb)->state == SandboxState::kFailed ||
        (*sb)->state == SandboxState::kDeleted)
      return;
    log.warn("sandbox {} lost: {}", id, why);
    oplog.setSandbox(tenant, "", id, SandboxState::kFailed, why);
  });

  // Reconcile: keep what the store places here and this node still holds.
  auto reconcile = [&](bool at_start) -> asio::awaitable<void> {
    auto want = store->listNodeSandboxes(cfg.node_name);
    if (!want.ok()) {
      log.warn("reconcile: {}", want.error().message());
      co_return;
    }
    std::set<std::string> keep;
    for (const auto& sb : *want) keep.insert(sb.id);
    if (at_start) {
      std::set<std::string> kept;
      for (const auto& sb : *want) {
        auto h = co_await local.adopt(sb.tenant_id, sb.id);
        if (h.ok() && *h != ops::Holding::kNothing) {
          kept.insert(sb.id);
          continue;
        }
        if (sb.state == SandboxState::kRunning || sb.state == SandboxState::kPaused)
          oplog.setSandbox(sb.tenant_id, "", sb.id, SandboxState::kFailed,
                           "node " + cfg.node_name + " restarted and could not take it over");
      }
      int n = co_await local.discardOrphans(kept);
      log.info("reconciled at start: {} sandbox(es) taken over, {} leftover(s) removed",
               kept.size(), n);
      co_return;
    }
    for (const auto& id : local.load().ids)
      if (!keep.count(id)) {
        log.info("reconcile: sandbox {} is no longer placed here; destroying it", id);
        (void)co_await local.destroy(id);
      }
  };
  runBlocking(io, [&]() -> asio::awaitable<bool> {
    co_await reconcile(true);
    co_return true;
  }());
  if (qemu) qemu->sweepJails();
  if (egress) egress->slots().dropLeftovers();

  // Heartbeats: capacity into the store; after a gap, reconcile.
  bool registered = false;
  const uint64_t mem_total = hostMemoryMib();
  auto heartbeat = [&]() -> bool {
    auto l = local.load();
    store::NodeRecord n;
    n.name = cfg.node_name;
    n.advertise_url = cfg.node_advertise;
    n.data_url = cfg.data_url;
    if (cfg.e2b_envd_listen_addr) n.envd_url = cfg.e2b_envd_advertise;
    n.memory_mib = mem_total;
    n.memory_free_mib = mem_total > l.memory_mib ? mem_total - l.memory_mib : 0;
    n.vcpus = std::max(1u, std::thread::hardware_concurrency());
    n.sandboxes = static_cast<int64_t>(l.ids.size());
    json::array names;
    for (const auto& m : templates.list()) names.emplace_back(m.name);
    n.templates_json = json::serialize(names);
    n.accel = std::string(hypervisor::accelName(accel));
    auto s = store->heartbeatNode(n);
    if (!s.ok()) log.warn("heartbeat: {}", s.error().message());
    return s.ok();
  };
  registered = heartbeat();
  asio::steady_timer beat(io);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto last_ok = std::chrono::steady_clock::now();
        for (int n = 1;; ++n) {
          beat.expires_after(std::chrono::seconds(2));
          boost::system::error_code wec;
          co_await beat.async_wait(asio::redirect_error(asio::use_awaitable, wec));
          if (wec) co_return;
          bool was = registered;
          registered = heartbeat();
          if (!registered) continue;
          // After a gap (heartbeats failed, or one call hung on a dead
          // link until it got through) the API replicas may have declared
          // this node lost: reconcile now. And every 10 s anyway, since
          // the store may change its mind about a sandbox while we beat.
          auto now = std::chrono::steady_clock::now();
          bool gap = !was || now - last_ok > std::chrono::seconds(4);
          last_ok = now;
          if (gap) log.info("heartbeats get through again: reconciling with the store");
          if (gap || n % 5 == 0) co_await reconcile(false);
          if (n % 5 == 0)
            if (auto gone = catalogue.deleted(); gone.ok()) served.dropDeleted(*gone);
        }
      },
      asio::detached);

  cluster::NodeServer node_api(served, cfg.node_token);
  http::HttpServer node_server(io, cluster::nodeServerLimits());
  // Before the node API's own prefix route, which would take these paths.
  cluster::TemplateFileServer template_files(templates, cfg.node_token);
  template_files.install(node_server);
  node_api.install(node_server);
  auto ready = [&](json::object& o) {
    o["node"] = cfg.node_name;
    o["registered"] = registered;
    bool gw = !egress || egress->healthy();
    o["gateway"] = gw;
    return registered && gw;
  };
  installProbes(node_server, "node", ready);
  VESSEL_TRY(node_server.listen(cfg.node_listen_addr));
  log.info("node API on http://{}:{}", cfg.node_listen_addr.host, node_server.port());

  api::SessionOptions so;
  so.data_url = cfg.data_url;
  api::Sessions sessions(*store, so);
  NodeSandboxes live(local, *store);
  api::DataPlane data(io, sessions, live);
  http::HttpServer data_server(io);
  data.install(data_server);
  installProbes(data_server, "node", ready);
  VESSEL_TRY(data_server.listen(cfg.data_listen_addr));
  log.info("data plane on http://{}:{} (clients are told {})", cfg.data_listen_addr.host,
           data_server.port(), cfg.data_url);

  // E2B envd for the sandboxes this node runs: API replicas' envd listeners
  // forward to it (envd_forward.h), with the cluster's access tokens.
  VESSEL_ASSIGN_OR_RETURN(e2b::AccessTokens envd_tokens, e2b::AccessTokens::fromStore(*store));
  e2b::envd::Sandboxes envd_sandboxes;
  envd_sandboxes.agent_of = [&](const std::string& id) { return live.agentOf(id); };
  envd_sandboxes.live_ids = [&] { return local.load().ids; };
  // No lifecycle here to say a sandbox ended: envd frees what it kept for
  // one once it has been gone from this node for EnvdLimits::keep_detached.
  envd_sandboxes.tenant_of = [&](const std::string& id) {
    auto sb = store->findSandbox(id);
    return sb.ok() && *sb ? (*sb)->tenant_id : std::string();
  };
  e2b::envd::Envd envd(io, std::move(envd_sandboxes), envd_tokens);
  // Uploads arrive whole (multipart), hence the body cap, as in --role=all.
  http::HttpServer envd_server(io,
                               http::ServerLimits{16 * 1024, 64u << 20, std::chrono::seconds(60)});
  envd.install(envd_server);
  if (cfg.e2b_envd_listen_addr) {
    VESSEL_TRY(envd_server.listen(*cfg.e2b_envd_listen_addr));
    log.info("E2B envd on http://{}:{} (API replicas forward to {})",
             cfg.e2b_envd_listen_addr->host, envd_server.port(), cfg.e2b_envd_advertise);
  }

  runUntilStopped(
      io, std::chrono::seconds(30),
      [&] {
        beat.cancel();
        node_server.close();
        data_server.close();
        envd_server.close();
      },
      [&]() -> asio::awaitable<void> {
        auto stopped = co_await local.shutdown(cfg.stop_vms_on_exit);
        for (const auto& id : stopped)
          (void)store->setSandboxState(id, SandboxState::kFailed,
                                       "node " + cfg.node_name + " stopped; the VM was stopped");
        if (egress) egress->stop();
      });
  return okStatus();
}

}  // namespace vessel::vesseld
