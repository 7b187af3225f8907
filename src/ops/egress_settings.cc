#include "ops/egress_settings.h"

#include "ops/state_machine.h"

namespace vessel::ops {

asio::awaitable<Result<NetworkSpec>> EgressSettings::setNetwork(std::string tenant, std::string id,
                                                                NetworkSpec spec) {
  auto s = sandbox_of_(tenant, id);
  if (!s.ok()) co_return std::move(s).error();
  if (s->state == SandboxState::kDeleting || s->state == SandboxState::kFailed)
    co_return Error(Code::kFailedPrecondition, "sandbox " + id + " is " +
                                                   std::string(stateName(s->state)) +
                                                   "; its network cannot change");
  auto now = co_await node_.updateNetwork(tenant, id, std::move(spec));
  if (!now.ok()) co_return std::move(now).error();
  note_activity_(id);
  co_return std::move(*now);
}

Result<NetworkSpec> EgressSettings::network(const std::string& tenant, const std::string& id) {
  VESSEL_TRY(sandbox_of_(tenant, id));
  return node_.network(id);
}

asio::awaitable<Result<store::CredentialRecord>> EgressSettings::putCredential(std::string tenant,
                                                                               CredentialSpec c) {
  store::CredentialRecord r;
  r.tenant_id = tenant;
  r.name = c.name;
  r.hosts = c.hosts;
  r.header = c.header;
  r.value = c.value;
  r.created_ms = clock_.nowMs();
  VESSEL_CO_TRY(store_.putCredential(r));
  // Running sandboxes using it get the new value now; the gateway resets
  // their connections that carry the old one.
  co_await node_.credentialChanged(tenant, c.name);
  co_return r;
}

Result<std::vector<store::CredentialRecord>> EgressSettings::listCredentials(
    const std::string& tenant) {
  return store_.listCredentials(tenant);
}

asio::awaitable<Status> EgressSettings::deleteCredential(std::string tenant, std::string name) {
  auto c = store_.getCredential(tenant, name);
  if (!c.ok()) co_return std::move(c).error();
  if (!*c) co_return Error(Code::kNotFound, "credential '" + name + "' does not exist");
  VESSEL_CO_TRY(store_.deleteCredential(tenant, name));
  // Revocation reaches live sandboxes: their policy loses the credential and
  // the gateway resets connections that carried it before this returns.
  co_await node_.credentialChanged(tenant, name);
  co_return okStatus();
}

Result<std::optional<NetworkSpec>> EgressSettings::givenNetwork(const std::string& id) {
  return store_.getSandboxNetwork(id);
}

Result<std::optional<store::CredentialRecord>> EgressSettings::credential(const std::string& tenant,
                                                                          const std::string& name) {
  return store_.getCredential(tenant, name);
}

}  // namespace vessel::ops
