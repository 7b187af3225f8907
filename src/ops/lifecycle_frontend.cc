// What front ends keep beside a sandbox, read and written through the
// lifecycle (lifecycle.h): src/e2b reads nothing from the store itself.
#include "ops/lifecycle.h"

namespace vessel::ops {

Result<std::optional<IngressSpec>> Lifecycle::ingress(const std::string& id) {
  VESSEL_ASSIGN_OR_RETURN(auto sb, store_.findSandbox(id));
  if (!sb || sb->state == SandboxState::kDeleted)
    return Error(Code::kNotFound, "sandbox " + id + " does not exist");
  return sb->ingress;
}

Result<std::optional<store::SandboxRecord>> Lifecycle::liveSandbox(const std::string& id) {
  VESSEL_ASSIGN_OR_RETURN(auto live, store_.listLiveSandboxes());
  for (auto& s : live)
    if (s.id == id) return std::optional<store::SandboxRecord>(std::move(s));
  return std::optional<store::SandboxRecord>();
}

}  // namespace vessel::ops
