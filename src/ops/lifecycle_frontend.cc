// What front ends keep beside a sandbox, read and written through the
// lifecycle (lifecycle.h): src/e2b reads nothing from the store itself.
#include "ops/lifecycle.h"

namespace vessel::ops {

Result<std::string> Lifecycle::givenNetwork(const std::string& id) {
  return store_.getSandboxNetwork(id);
}

Result<std::string> Lifecycle::ingress(const std::string& id) {
  return store_.getSandboxIngress(id);
}

Status Lifecycle::setIngress(const std::string& id, const std::string& json) {
  return store_.setSandboxIngress(id, json);
}

Result<std::optional<store::CredentialRecord>> Lifecycle::credential(const std::string& tenant,
                                                                     const std::string& name) {
  return store_.getCredential(tenant, name);
}

Result<std::optional<store::SandboxRecord>> Lifecycle::liveSandbox(const std::string& id) {
  VESSEL_ASSIGN_OR_RETURN(auto live, store_.listLiveSandboxes());
  for (auto& s : live)
    if (s.id == id) return std::optional<store::SandboxRecord>(std::move(s));
  return std::optional<store::SandboxRecord>();
}

}  // namespace vessel::ops
