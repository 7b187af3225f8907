// Egress settings and credentials: stored through the node (which owns the
// gateway registrations) and the store, every change reaching the running
// sandboxes it concerns at once.
#include <boost/json.hpp>

#include "ops/lifecycle.h"

namespace vessel::ops {

namespace json = boost::json;

asio::awaitable<Result<NetworkSpec>> Lifecycle::setNetwork(std::string tenant, std::string id,
                                                           NetworkSpec spec) {
  auto s = get(tenant, id);
  if (!s.ok()) co_return std::move(s).error();
  if (s->state == SandboxState::kDeleting || s->state == SandboxState::kFailed)
    co_return Error(Code::kFailedPrecondition, "sandbox " + id + " is " +
                                                   std::string(stateName(s->state)) +
                                                   "; its network cannot change");
  auto now = co_await node_.updateNetwork(tenant, id, std::move(spec));
  if (!now.ok()) co_return std::move(now).error();
  noteActivity(id);
  co_return std::move(*now);
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
