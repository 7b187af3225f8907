#include "e2b/ports.h"

#include "agentclient/agent_client.h"
#include "e2b/requests.h"

namespace vessel::e2b {

namespace {
// How long a request to a paused sandbox may wait for its resume.
constexpr std::chrono::seconds kWakeLimit{60};
}  // namespace

ingress::Sandboxes portRoutes(ops::Lifecycle& lifecycle, const AccessTokens& tokens) {
  ingress::Sandboxes sb;
  sb.route = [&lifecycle, &tokens](const std::string& id) -> Result<ingress::Route> {
    auto agent = lifecycle.agentOf(id);
    bool paused = false;
    if (!agent || agent->failure()) {
      // Only the not-running path looks the state up.
      if (auto live = lifecycle.liveSandbox(id); live.ok() && *live)
        paused = (*live)->state == store::SandboxState::kPaused ||
                 (*live)->state == store::SandboxState::kPausing;
      if (!paused) return Error(Code::kNotFound, "sandbox " + id + " is not running");
      agent = nullptr;
    }
    Ingress in = ingressFromJson(lifecycle.ingress(id).value_or(""));
    return ingress::Route{std::move(agent),
                          in.public_traffic ? std::string() : tokens.trafficForSandbox(id),
                          in.mask_host, paused};
  };
  // Traffic to a paused sandbox created with auto-resume resumes it (E2B's
  // lifecycle.autoResume); the lifecycle refuses the others.
  sb.wake = [&lifecycle](const std::string& id) -> boost::asio::awaitable<Status> {
    return lifecycle.wake(id, std::chrono::steady_clock::now() + kWakeLimit);
  };
  return sb;
}

}  // namespace vessel::e2b
