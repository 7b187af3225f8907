#include "e2b/ports.h"

#include "agentclient/agent_client.h"
#include "e2b/requests.h"

namespace vessel::e2b {

ingress::Sandboxes portRoutes(ops::Lifecycle& lifecycle, store::Store& store,
                              const AccessTokens& tokens) {
  ingress::Sandboxes sb;
  sb.route = [&lifecycle, &store, &tokens](const std::string& id) -> Result<ingress::Route> {
    auto agent = lifecycle.agentOf(id);
    if (!agent || agent->failure()) {
      // Only the not-running path looks the state up.
      if (auto live = store.listLiveSandboxes(); live.ok())
        for (const auto& s : *live)
          if (s.id == id &&
              (s.state == store::SandboxState::kPaused || s.state == store::SandboxState::kPausing))
            return Error(Code::kFailedPrecondition, "sandbox " + id + " is paused");
      return Error(Code::kNotFound, "sandbox " + id + " is not running");
    }
    Ingress in = ingressFromJson(store.getSandboxIngress(id).value_or(""));
    return ingress::Route{std::move(agent),
                          in.public_traffic ? std::string() : tokens.trafficForSandbox(id),
                          in.mask_host};
  };
  return sb;
}

}  // namespace vessel::e2b
