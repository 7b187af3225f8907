#include "vesseld/settings.h"

#include <algorithm>
#include <boost/json.hpp>

#include "base/sha256.h"
#include "vesseld/console.h"

namespace vessel::vesseld {

namespace json = boost::json;

NodeSettings nodeSettings(const Config& cfg) {
  NodeSettings s;
  s.hypervisor = cfg.hypervisor;
  s.qemu_binary = cfg.qemu_binary;
  s.accel = cfg.accel;
  s.require_kvm = cfg.require_kvm;
  s.kernel = cfg.kernel;
  s.minimal_image = cfg.minimal_image;
  s.state_dir = cfg.state_dir;
  s.cache_dir = cfg.cache_dir;
  s.runtime_root = cfg.state_dir + "/runtime";
  s.template_root = cfg.cache_dir + "/templates";
  s.run_root = cfg.state_dir + "/run";
  s.slot_prefix = "v" + sha256Hex(cfg.state_dir).substr(0, 4);
  s.jail = cfg.jail;
  s.vm_uid_range = cfg.vm_uid_range;
  s.uid_lease_dir = cfg.uid_lease_dir;
  s.vm_memory_overhead_mib = cfg.vm_memory_overhead_mib;
  s.agent_reply_timeout = std::chrono::seconds(cfg.agent_reply_timeout_s);
  s.warm_pools = cfg.warm_pool_sizes;
  s.warm_pool_budgets = cfg.warm_pool_budgets;
  s.egress = cfg.egress;
  s.gateway_binary = cfg.gateway_binary;
  s.gateway_netns = cfg.egress_gateway_netns;
  s.upstream_netns = cfg.egress_upstream_netns;
  s.resolver = cfg.egress_resolver;
  s.ca_bundle = cfg.egress_ca_bundle;
  s.default_network = cfg.default_network;
  s.allow_public_suffix_wildcards = cfg.allow_public_suffix_wildcards;
  if (cfg.role == Role::kNode) s.credential_token = cfg.node_token;
  s.min_free_disk_mib = static_cast<uint64_t>(cfg.min_free_disk_mib);
  s.max_image_mib = static_cast<uint64_t>(cfg.max_image_mib);
  s.build_cache_mib = static_cast<uint64_t>(cfg.build_cache_mib);
  s.max_concurrent_builds = static_cast<size_t>(cfg.max_concurrent_builds);
  s.insecure_registries = cfg.insecure_registries;
  s.stop_vms_on_exit = cfg.stop_vms_on_exit;
  s.data_listen = cfg.data_listen_addr;
  s.data_url = cfg.data_url;
  s.envd_listen = cfg.e2b_envd_listen_addr;
  s.log_level = cfg.log_level;
  return s;
}

ApiSettings apiSettings(const Config& cfg, bool node_local) {
  ApiSettings s;
  s.node_local = node_local;
  s.state_dir = cfg.state_dir;
  s.policy.default_idle_timeout_s = cfg.default_idle_timeout_s;
  s.policy.default_lifetime_s = cfg.default_lifetime_s;
  s.policy.max_lifetime_s = cfg.max_lifetime_s;
  s.policy.log_max_entries = cfg.log_max_entries;
  s.policy.log_retention_s = cfg.log_retention_s;
  s.policy.quota.max_sandboxes = cfg.tenant_max_sandboxes;
  s.policy.quota.max_memory_mib = cfg.tenant_max_memory_mib;
  s.policy.quota.max_vcpus = cfg.tenant_max_vcpus;
  s.policy.quota.max_disk_mib = cfg.tenant_max_disk_mib;
  s.policy.max_disk_mib = static_cast<uint64_t>(cfg.max_disk_mib);
  s.max_build_context_mib = static_cast<uint64_t>(cfg.max_build_context_mib);
  s.tenant_max_volume_mib = cfg.tenant_max_volume_mib;
  s.max_volume_mib = static_cast<uint64_t>(cfg.max_volume_mib);
  // Unset (0): 1024, within a deployment's smaller --max-volume-mib.
  s.e2b_volume_mib = static_cast<uint64_t>(
      cfg.e2b_volume_mib ? cfg.e2b_volume_mib : std::min<int64_t>(1024, cfg.max_volume_mib));
  if (node_local) {
    s.policy.state_dir = cfg.state_dir;
    s.policy.min_free_disk_mib = static_cast<uint64_t>(cfg.min_free_disk_mib);
    s.vm_uid_range = cfg.vm_uid_range;
    s.uid_lease_dir = cfg.uid_lease_dir;
  }
  s.listen = cfg.listen_addr;
  s.e2b_listen = cfg.e2b_listen_addr;
  s.envd_listen = cfg.e2b_envd_listen_addr;
  s.data_url = cfg.data_url;
  s.console_dir = consoleDir(cfg.console_dir);
  s.operator_tenants = cfg.operator_tenants;
  s.default_network = cfg.default_network;
  s.e2b_sandbox_domain = cfg.e2b_sandbox_domain;
  s.e2b_token_key_file = cfg.e2b_token_key_file;
  s.node_tokens = cfg.node_tokens;
  s.node_ca_file = cfg.node_ca_file;
  s.lost_after = std::chrono::seconds(cfg.node_lost_after_s);
  return s;
}

namespace {

json::value addr(const std::optional<HostPort>& hp) {
  if (!hp) return nullptr;
  return json::value(hp->host + ":" + std::to_string(hp->port));
}

json::object nodeJson(const NodeSettings& s) {
  json::array insecure;
  for (const auto& r : s.insecure_registries) insecure.push_back(json::string(r));
  json::object pools, budgets;
  for (const auto& [name, n] : s.warm_pools) {
    pools[name] = n;
    budgets[name] = s.warm_pool_budgets.forTemplate(name);
  }
  return {
      {"hypervisor", s.hypervisor},
      {"qemu", s.qemu_binary},
      {"accel", std::string(node::accelModeName(s.accel))},
      {"require_kvm", s.require_kvm},
      {"kernel", s.kernel},
      {"minimal_image", s.minimal_image},
      {"state_dir", s.state_dir},
      {"cache_dir", s.cache_dir},
      {"runtime_root", s.runtime_root},
      {"template_root", s.template_root},
      {"slot_prefix", s.slot_prefix},
      {"jail", s.jail},
      {"vm_uid_range", s.vm_uid_range},
      {"uid_lease_dir", s.uid_lease_dir},
      {"vm_memory_overhead_mib", s.vm_memory_overhead_mib},
      {"agent_reply_timeout_s", s.agent_reply_timeout.count()},
      {"warm_pools", pools},
      {"warm_pool_budget_mib", budgets},
      {"egress", s.egress},
      {"gateway_binary", s.gateway_binary},
      {"egress_gateway_netns", s.gateway_netns},
      {"egress_upstream_netns", s.upstream_netns},
      {"egress_resolver", s.resolver},
      {"egress_ca_bundle", s.ca_bundle},
      {"default_network", s.default_network},
      {"allow_public_suffix_wildcards", s.allow_public_suffix_wildcards},
      {"min_free_disk_mib", s.min_free_disk_mib},
      {"max_image_mib", s.max_image_mib},
      {"build_cache_mib", s.build_cache_mib},
      {"max_concurrent_builds", s.max_concurrent_builds},
      {"insecure_registries", insecure},
      {"stop_vms_on_exit", s.stop_vms_on_exit},
      {"data_listen", addr(s.data_listen)},
      {"data_url", s.data_url},
      {"e2b_envd_listen", addr(s.envd_listen)},
      {"log_level", s.log_level},
  };
}

json::object apiJson(const ApiSettings& s) {
  const auto& p = s.policy;
  json::array operators;
  for (const auto& t : s.operator_tenants) operators.push_back(json::string(t));
  return {
      {"state_dir", s.state_dir},
      {"default_idle_timeout_s", p.default_idle_timeout_s},
      {"default_lifetime_s", p.default_lifetime_s},
      {"max_lifetime_s", p.max_lifetime_s},
      {"log_max_entries", p.log_max_entries},
      {"log_retention_s", p.log_retention_s},
      {"tenant_max_sandboxes", p.quota.max_sandboxes},
      {"tenant_max_memory_mib", p.quota.max_memory_mib},
      {"tenant_max_vcpus", p.quota.max_vcpus},
      {"tenant_max_disk_mib", p.quota.max_disk_mib},
      {"max_disk_mib", p.max_disk_mib},
      {"max_build_context_mib", s.max_build_context_mib},
      {"tenant_max_volume_mib", s.tenant_max_volume_mib},
      {"max_volume_mib", s.max_volume_mib},
      {"e2b_volume_mib", s.e2b_volume_mib},
      {"listen", addr(s.listen)},
      {"e2b_listen", addr(s.e2b_listen)},
      {"e2b_envd_listen", addr(s.envd_listen)},
      {"e2b_sandbox_domain", s.e2b_sandbox_domain},
      {"data_url", s.data_url},
      {"console_dir", s.console_dir},
      {"operator_tenants", operators},
      {"default_network", s.default_network},
      {"node_lost_after_s", s.lost_after.count()},
  };
}

}  // namespace

json::object settingsJson(const Config& cfg) {
  json::object o{{"role", std::string(roleName(cfg.role))}, {"node", nullptr}, {"api", nullptr}};
  if (cfg.role != Role::kApi) o["node"] = nodeJson(nodeSettings(cfg));
  if (cfg.role != Role::kNode) {
    ApiSettings a = apiSettings(cfg, cfg.role == Role::kAll);
    json::object api = apiJson(a);
    // Where the lifecycle itself checks the state disk (one machine); on
    // a cluster the node refuses (its template store and runtime).
    api["lifecycle_min_free_disk_mib"] = a.policy.min_free_disk_mib;
    o["api"] = std::move(api);
  }
  if (cfg.role != Role::kAll)
    o["cluster"] = json::object{
        {"node_name", cfg.node_name},           {"node_listen", addr(cfg.node_listen_addr)},
        {"node_advertise", cfg.node_advertise}, {"e2b_envd_advertise", cfg.e2b_envd_advertise},
        {"node_ca_file", cfg.node_ca_file},     {"node_lost_after_s", cfg.node_lost_after_s}};
  return o;
}

}  // namespace vessel::vesseld
