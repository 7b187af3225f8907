// Egress settings and credentials: stored through the node (which owns the
// gateway registrations) and the store, every change reaching the running
// sandboxes it concerns at once.
#include <boost/json.hpp>

#include "ops/lifecycle.h"

namespace vessel::ops {

namespace json = boost::json;

Result<NetworkSpec> Lifecycle::setNetwork(const std::string& tenant, const std::string& id,
                                          const NetworkSpec& spec) {
  VESSEL_ASSIGN_OR_RETURN(auto s, get(tenant, id));
  if (s.state == SandboxState::kDeleting || s.state == SandboxState::kFailed)
    return Error(
        Code::kFailedPrecondition,
        "sandbox " + id + " is " + std::string(stateName(s.state)) + "; its network cannot change");
  VESSEL_ASSIGN_OR_RETURN(auto now, node_.updateNetwork(tenant, id, spec));
  noteActivity(id);
  return now;
}

Result<NetworkSpec> Lifecycle::network(const std::string& tenant, const std::string& id) {
  VESSEL_TRY(get(tenant, id));
  return node_.network(id);
}

Result<store::CredentialRecord> Lifecycle::putCredential(const std::string& tenant,
                                                         const CredentialSpec& c) {
  store::CredentialRecord r;
  r.tenant_id = tenant;
  r.name = c.name;
  json::array hosts;
  for (const auto& h : c.hosts) hosts.emplace_back(h);
  r.hosts_json = json::serialize(hosts);
  r.header = c.header;
  r.value = c.value;
  r.created_ms = clock_.nowMs();
  VESSEL_TRY(store_.putCredential(r));
  // Running sandboxes using it get the new value now; the gateway resets
  // their connections that carry the old one.
  node_.credentialChanged(tenant, c.name);
  return r;
}

Result<std::vector<store::CredentialRecord>> Lifecycle::listCredentials(const std::string& tenant) {
  return store_.listCredentials(tenant);
}

Status Lifecycle::deleteCredential(const std::string& tenant, const std::string& name) {
  VESSEL_ASSIGN_OR_RETURN(auto c, store_.getCredential(tenant, name));
  if (!c) return Error(Code::kNotFound, "credential '" + name + "' does not exist");
  VESSEL_TRY(store_.deleteCredential(tenant, name));
  // Revocation reaches live sandboxes: their policy loses the credential and
  // the gateway resets connections that carried it before this returns.
  node_.credentialChanged(tenant, name);
  return okStatus();
}

}  // namespace vessel::ops
