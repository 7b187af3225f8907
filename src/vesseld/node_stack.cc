#include "vesseld/node_stack.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/log.h"
#include "cluster/credential_share.h"
#include "node/network/host_networks.h"
#include "node/network/slot.h"
#include "node/template_worker.h"

namespace vessel::vesseld {

namespace fs = std::filesystem;
namespace json = boost::json;
namespace asio = boost::asio;

namespace {

// vessel-gateway: the flag, else next to vesseld (installed or in the build
// tree), else PATH.
std::string gatewayBinary(const NodeSettings& s) {
  if (!s.gateway_binary.empty()) return s.gateway_binary;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (auto p : {self.parent_path() / "vessel-gateway",
                   self.parent_path().parent_path() / "vessel-gateway" / "vessel-gateway"})
      if (fs::exists(p, ec)) return p.string();
  }
  return "vessel-gateway";
}

// The egress gateway and its slots as --egress-* configure them, under
// the slot prefix (derived from the state dir, so two vesselds on one host
// never share a namespace).
Result<std::unique_ptr<node::network::Egress>> startEgress(asio::io_context& io,
                                                           const NodeSettings& s) {
  node::network::EgressOptions eo;
  eo.gateway_binary = gatewayBinary(s);
  eo.state_dir = s.state_dir + "/gateway";
  eo.gateway_netns = s.gateway_netns;
  eo.upstream_netns = s.upstream_netns;
  eo.resolver = s.resolver;
  eo.ca_bundle = s.ca_bundle;
  eo.log_level = s.log_level;
  eo.layout.prefix = s.slot_prefix;
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

}  // namespace

namespace {

std::unique_ptr<EgressPolicies> egressPolicies(store::Store& store, node::network::Egress* egress,
                                               const NodeSettings& cfg) {
  auto p = std::make_unique<EgressPolicies>(store, egress, cfg.default_network);
  p->allowPublicSuffixWildcards(cfg.allow_public_suffix_wildcards);
  // A cluster node holds no credential key: it reads what a replica sealed
  // for it, for the sandboxes it runs.
  if (!cfg.credential_token.empty()) {
    p->readCredentialsWith(
        [&store, key = cluster::nodeCredentialKey(cfg.credential_token)](
            const std::string& tenant, const std::string& sandbox_id, const std::string& name) {
          return cluster::sharedCredential(store, key, tenant, sandbox_id, name);
        });
  }
  return p;
}

}  // namespace

Result<std::unique_ptr<NodeStack>> NodeStack::build(asio::io_context& io, NodeSettings s,
                                                    store::Store& store, const Machines& machines) {
  Logger log("vesseld");
  auto factory = machines.find(s.hypervisor);
  if (factory == machines.end()) {
    std::string known;
    for (const auto& [name, f] : machines) known += (known.empty() ? "" : ", ") + name;
    return Error(Code::kInvalidArgument,
                 "hypervisor '" + s.hypervisor +
                     "' is not supported by this vesseld (supported: " + known + ")");
  }
  std::error_code ec;
  fs::create_directories(s.run_root, ec);
  fs::create_directories(s.template_root, ec);
  VESSEL_ASSIGN_OR_RETURN(Machine m, factory->second(io, s));
  std::unique_ptr<NodeStack> n(new NodeStack(std::move(s), std::move(m)));
  n->io_ = &io;
  const NodeSettings& cfg = n->s_;
  Machine& machine = n->machine_;

  // The `minimal` template, built once per (image, kernel, hypervisor) and cached.
  n->templates_ = std::make_unique<templates::TemplateStore>(cfg.template_root, machine.version,
                                                             machine.kernel_sha);
  n->templates_->setMinFreeMib(cfg.min_free_disk_mib);
  VESSEL_TRY(machine.install_minimal(io, *n->templates_));

  if (cfg.egress) {
    VESSEL_ASSIGN_OR_RETURN(n->egress_, startEgress(io, cfg));
  } else {
    log.warn("egress disabled (--no-egress): sandboxes have no network");
  }
  n->network_ = egressPolicies(store, n->egress_.get(), cfg);

  node::RuntimeOptions ro;
  ro.root = cfg.runtime_root;
  ro.kernel = cfg.kernel;
  ro.accel = machine.accel;
  ro.pool_size = 0;  // only the templates --warm-pool names
  ro.grow_disks = machine.grow_disks;
  ro.agent_reply_timeout = cfg.agent_reply_timeout;
  if (n->egress_) {
    ro.slots = &n->egress_->slots();
    // Most sandboxes have egress: warm VMs get its route and CA ahead of time.
    ro.warm_network = node::GuestNetwork{true, n->egress_->caPem()};
  }
  n->runtime_ = std::make_unique<node::Runtime>(io, *machine.hv, *n->templates_, ro);
  if (machine.warm_pools)
    for (const auto& [name, count] : cfg.warm_pools) {
      n->runtime_->setPoolSize(name, count);
      n->runtime_->setPoolBudget(name, cfg.warm_pool_budgets.forTemplate(name));
    }
  n->local_ = std::make_unique<LocalNode>(io, *n->runtime_, n->network_.get());
  node::TemplateBuildEnv env;
  env.hypervisor = machine.build_hv;
  env.qemu_version = machine.version;
  env.kernel = cfg.kernel;
  env.kernel_sha256 = machine.kernel_sha;
  env.accel = machine.accel;
  env.template_root = cfg.template_root;
  env.work_dir = cfg.run_root + "/tb";
  env.min_free_mib = cfg.min_free_disk_mib;
  // from_image builds: converted bases cached beside the templates, the
  // agent read out of the minimal image (the one this vesseld boots).
  env.images.cache_dir = cfg.cache_dir + "/images/oci";
  env.images.agent_image = cfg.minimal_image;
  env.images.max_image_mib = cfg.max_image_mib;
  env.images.insecure_registries = cfg.insecure_registries;
  if (cfg.build_cache_mib > 0) env.step_cache_dir = cfg.cache_dir + "/build-steps";
  env.step_cache_max_mib = cfg.build_cache_mib;
  env.concurrency = cfg.max_concurrent_builds;
  n->local_->enableTemplateBuilds(std::move(env));
  if (n->egress_)
    n->gateway_stats_ = std::make_unique<GatewayStats>(
        io, GatewayStats::Options{.control_socket = n->egress_->controlSocket()});
  return n;
}

NodeStack::~NodeStack() = default;

void NodeStack::logTo(std::shared_ptr<ops::SandboxLog*> log) {
  local_->setConsoleLog(log);
  if (egress_) {
    egress_log_ = std::make_unique<EgressLog>(
        *io_, EgressLog::Options{.control_socket = egress_->controlSocket()}, std::move(log));
  }
}

void NodeStack::afterRecovery() {
  if (machine_.sweep) machine_.sweep();
  // Slots of VMs that did not survive the restart (and of pooled VMs,
  // which never do) go now.
  if (egress_)
    egress_->slots().dropLeftovers();
  else
    node::network::removeLeftovers(s_.slot_prefix);
}

void NodeStack::startPools() {
  if (!machine_.warm_pools) return;
  for (const auto& [name, count] : s_.warm_pools)
    if (count > 0) {
      Logger("vesseld").info("warm pool: {} VM(s) of {}", count, name);
      runtime_->keepPoolFull(name);
    }
}

void NodeStack::addMetrics(metrics::Registry& r) {
  if (gateway_stats_)
    r.addCollector(
        [this](metrics::SampleWriter& w) { gateway_stats_->write(w, gatewayHealthy()); });
  if (!machine_.warm_pools) return;
  r.addCollector([this](metrics::SampleWriter& w) {
    std::map<std::string, node::WarmPool::Stats> st;
    for (const auto& [name, count] : s_.warm_pools) st[name] = runtime_->poolStats(name);
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
}

asio::awaitable<void> NodeStack::refreshMetrics() {
  if (gateway_stats_) co_await gateway_stats_->refresh();
}

json::object NodeStack::gatewayHealth() const {
  if (egress_) return egress_->health();
  return json::object{{"enabled", false}};
}

json::object NodeStack::isolation() const {
  // TCG is not an isolation boundary by QEMU's own security policy.
  const bool kvm = machine_.accel == hypervisor::Accel::kKvm;
  json::object o{{"boundary", kvm}, {"jail", machine_.jailed}};
  if (!kvm)
    o["warning"] =
        "sandboxes run under TCG (no KVM): QEMU's emulator is not an isolation boundary; "
        "do not run untrusted code on this node in production";
  else if (!machine_.jailed)
    o["warning"] = "VM jail disabled (--no-jail): QEMU runs as vesseld's own user";
  return o;
}

store::NodeRecord NodeStack::describe() {
  auto l = local().load();
  store::NodeRecord n;
  uint64_t total = 0;
  {
    std::ifstream in("/proc/meminfo");
    std::string key;
    uint64_t kib = 0;
    while (in >> key >> kib) {
      if (key == "MemTotal:") {
        total = kib / 1024;
        break;
      }
      in.ignore(256, '\n');
    }
  }
  n.memory_mib = total;
  n.memory_free_mib = total > l.memory_mib ? total - l.memory_mib : 0;
  n.vcpus = std::max(1u, std::thread::hardware_concurrency());
  n.sandboxes = static_cast<int64_t>(l.ids.size());
  for (const auto& m : templates().list()) n.templates.push_back(m.name);
  n.accel = std::string(hypervisor::accelName(machine().accel));
  return n;
}

}  // namespace vessel::vesseld
