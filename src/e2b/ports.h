#pragma once
// E2B's sandbox ports (`sandbox.getHost(port)`): the routes the ingress
// proxy (src/ingress) takes to a sandbox's port, with the settings its
// create gave (allowPublicTraffic: the traffic token; maskRequestHost).
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "e2b/access_token.h"
#include "e2b/requests.h"
#include "ingress/proxy.h"
#include "ops/lifecycle.h"

namespace vessel::e2b {

// What the routes need besides the lifecycle, from memory (never a store
// scan per request): a live sandbox's state, and whether a token is a
// data-plane session of that sandbox (api::Sessions).
struct PortAccess {
  std::function<std::optional<store::SandboxState>(const std::string& id)> state_of;
  std::function<bool(const std::string& id, std::string_view token)> session_of;
};

// Who may reach a sandbox's ports, read once per guest connection. A
// sandbox whose settings say nothing (a native one, or one whose settings
// could not be read or written) is private: fail closed. E2B's create
// stores its settings always (public unless allowPublicTraffic: false).
Ingress portSettings(ops::Lifecycle& lifecycle, const std::string& id);

// Routes by sandbox id, whatever its tenant (ports are reached by name):
// a public sandbox's for anyone, a private one's with its traffic token or
// a data-plane session of it in e2b-traffic-access-token. A paused
// sandbox's route is marked paused; `wake` resumes it when it was created
// with auto-resume (ops::Lifecycle::wake).
ingress::Sandboxes portRoutes(ops::Lifecycle& lifecycle, const AccessTokens& tokens,
                              PortAccess access = {});

}  // namespace vessel::e2b
