#pragma once
// What each stack of vesseld is built from, resolved from the Config by one
// function per stack: the node stack (VMs, templates, egress; --role=all
// and node) and the API stack (lifecycle policy, sessions, listeners;
// --role=all and api). Every role calls the same function for the stack it
// runs, so a flag means the same in every role; `vesseld --print-config`
// prints what a role resolved (settingsJson) and config_roles_test starts
// each role with the same flags and compares.
#include <boost/json/object.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "ops/lifecycle.h"
#include "vesseld/config.h"

namespace vessel::vesseld {

struct NodeSettings {
  std::string hypervisor;  // a name the binary's machines know (machine.h)
  std::string qemu_binary;
  node::AccelMode accel = node::AccelMode::kAuto;
  bool require_kvm = false;
  std::string kernel, minimal_image;
  std::string state_dir, cache_dir;
  std::string runtime_root;   // <state_dir>/runtime
  std::string template_root;  // <cache_dir>/templates
  std::string run_root;       // <state_dir>/run: probes, build scratch
  std::string slot_prefix;    // from the state dir: two vesselds never share a name
  // The VM jail (docs/threat-model.md).
  bool jail = true;
  std::string vm_uid_range, uid_lease_dir;
  uint64_t vm_memory_overhead_mib = 0;
  std::chrono::seconds agent_reply_timeout{30};
  std::map<std::string, size_t> warm_pools;  // template -> VMs
  WarmPoolBudget warm_pool_budgets;
  // Egress: the gateway and its slots.
  bool egress = true;
  std::string gateway_binary, gateway_netns, upstream_netns, resolver, ca_bundle;
  std::string default_network;
  bool allow_public_suffix_wildcards = false;
  // A cluster node's own token: its sandboxes' credentials are read as an
  // API replica sealed them for it (cluster/credential_share.h). "" on one
  // machine, whose store opens credentials with the API side's key.
  std::string credential_token;
  // Below this much free space on the state and cache disks, creates,
  // pauses, forks and template builds are refused.
  uint64_t min_free_disk_mib = 0;
  // from_image builds (images/converter.h).
  uint64_t max_image_mib = 4096;
  std::vector<std::string> insecure_registries;
  uint64_t build_cache_mib = 8192;  // the Dockerfile step cache's bound
  size_t max_concurrent_builds = 2;
  bool stop_vms_on_exit = false;
  // The data plane the node serves for its sandboxes.
  HostPort data_listen;
  std::string data_url;
  std::optional<HostPort> envd_listen;
  std::string log_level;
};
NodeSettings nodeSettings(const Config& cfg);

struct ApiSettings {
  // Over this machine's node (--role=all): the lifecycle recovers and
  // reaps alone, E2B access tokens are keyed in the state dir, envd reaches
  // the agents here. Else an API replica of a cluster.
  bool node_local = true;
  std::string state_dir;  // the dev tenant's key files; a replica keeps only these
  ops::Policy policy;     // lifetimes, quotas, disk limits
  HostPort listen;
  std::optional<HostPort> e2b_listen, envd_listen;
  std::string data_url;     // what sessions name when the node names none
  std::string console_dir;  // the web console's files ("": none)
  // Tenants whose keys are operators' (GET /v1/nodes).
  std::vector<std::string> operator_tenants;
  // A replica reads stored network settings with this default (the node
  // that runs the sandbox applies them).
  std::string default_network;
  std::string e2b_sandbox_domain;
  // The envd/traffic token key's file ("": <state_dir>/e2b-token-key) and,
  // on a replica, the nodes' tokens: an envd forward proof for a node's
  // sandbox is made with that node's token.
  std::string e2b_token_key_file;
  cluster::NodeTokens node_tokens;
  // API replicas: the CA file nodes' https:// listeners are verified with
  // ("": the system's trust store).
  std::string node_ca_file;
  // API replicas: a node or replica silent for this long is lost.
  std::chrono::seconds lost_after{15};
  // POST /v1/templates:dockerfile: the largest build context tar (MiB).
  uint64_t max_build_context_mib = 64;
  // Volumes: every volume of a tenant together, and one (MiB).
  int64_t tenant_max_volume_mib = 200 * 1024;
  uint64_t max_volume_mib = 64 * 1024;
  uint64_t e2b_volume_mib = 1024;  // a volume E2B's Volume API makes
  // One machine: the volume file servers' uids come from the VM range
  // (leases beside the VMs').
  std::string vm_uid_range, uid_lease_dir;
};
// `node_local`: the API runs over this machine's node (--role=all), so
// the lifecycle itself refuses creates while the state disk is short.
ApiSettings apiSettings(const Config& cfg, bool node_local);

// {"role", "node": {...} or null, "api": {...} or null}: what the role runs.
boost::json::object settingsJson(const Config& cfg);

}  // namespace vessel::vesseld
