#pragma once
// E2B's sandbox ports (`sandbox.getHost(port)`): the routes the ingress
// proxy (src/ingress) takes to a sandbox's port, with the settings its
// create gave (allowPublicTraffic: the traffic token; maskRequestHost).
#include "e2b/access_token.h"
#include "ingress/proxy.h"
#include "ops/lifecycle.h"

namespace vessel::e2b {

// Routes by sandbox id, whatever its tenant (E2B's ports are reached by
// name, guarded only by the traffic token when the sandbox asks for one).
// A paused sandbox's route is marked paused; `wake` resumes it when it was
// created with auto-resume (ops::Lifecycle::wake).
ingress::Sandboxes portRoutes(ops::Lifecycle& lifecycle, const AccessTokens& tokens);

}  // namespace vessel::e2b
