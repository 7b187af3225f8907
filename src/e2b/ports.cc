#include "e2b/ports.h"

#include "agentclient/agent_client.h"
#include "e2b/requests.h"

namespace vessel::e2b {

namespace {
// How long a request to a paused sandbox may wait for its resume.
constexpr std::chrono::seconds kWakeLimit{60};
}  // namespace

// The one place the proxy reads a sandbox's port settings (the merge point
// with the settings moving into ops' create request).
// None stored (a native create that asked for nothing) and unreadable
// settings are private: ports fail closed. E2B's creates always store theirs.
Ingress portSettings(ops::Lifecycle& lifecycle, const std::string& id) {
  auto stored = lifecycle.ingress(id);
  if (!stored.ok() || !stored->has_value()) return Ingress{false, ""};
  return **stored;
}

ingress::Sandboxes portRoutes(ops::Lifecycle& lifecycle, const AccessTokens& tokens,
                              PortAccess access) {
  ingress::Sandboxes sb;
  sb.route = [&lifecycle, &tokens, access](const std::string& id) -> Result<ingress::Route> {
    auto agent = lifecycle.agentOf(id);
    bool paused = false;
    if (!agent || agent->failure()) {
      // Only the not-running path looks the state up, in memory.
      if (access.state_of) {
        auto st = access.state_of(id);
        paused =
            st && (*st == store::SandboxState::kPaused || *st == store::SandboxState::kPausing);
      }
      if (!paused) return Error(Code::kNotFound, "sandbox " + id + " is not running");
      agent = nullptr;
    }
    Ingress in = portSettings(lifecycle, id);
    ingress::Route r{std::move(agent),
                     in.public_traffic ? std::string() : tokens.trafficForSandbox(id), in.mask_host,
                     paused};
    if (!in.public_traffic && access.session_of)
      r.accepts = [session_of = access.session_of, id](std::string_view token) {
        return session_of(id, token);
      };
    return r;
  };
  // Traffic to a paused sandbox created with auto-resume resumes it (E2B's
  // lifecycle.autoResume); the lifecycle refuses the others.
  sb.wake = [&lifecycle](const std::string& id) -> boost::asio::awaitable<Status> {
    return lifecycle.wake(id, std::chrono::steady_clock::now() + kWakeLimit);
  };
  return sb;
}

}  // namespace vessel::e2b
