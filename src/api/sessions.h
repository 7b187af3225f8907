#pragma once
// Data-plane sessions (api/openapi.yaml, POST /v1/sandboxes/{id}/sessions):
// a short-lived random bearer token bound to one running sandbox of one
// tenant. The store keeps only its SHA-256; a session dies when it expires
// or when its sandbox ends (revoked by the control plane, and refused by the
// data plane whenever the sandbox is not running).
#include <chrono>
#include <functional>
#include <string>

#include "api/http_names.h"
#include "base/clock.h"
#include "http/server.h"
#include "store/store.h"

namespace vessel::api {

struct SessionOptions {
  std::string data_url;  // what clients are told to connect to
  // Many machines: the data plane of the node the sandbox runs on ("":
  // data_url). Unset on one machine.
  std::function<std::string(const std::string& sandbox_id)> data_url_of;
  std::chrono::seconds default_ttl{900};
  std::chrono::seconds max_ttl{24 * 3600};
};

// The optional request body: {"ttl_seconds": N}.
struct SessionRequest {
  std::chrono::seconds ttl{0};  // 0: the default
};
Result<SessionRequest> parseSessionRequest(std::string_view body, const SessionOptions& opts);

// A fresh token, "vst_" + 64 hex digits (32 random bytes).
Result<std::string> newSessionToken();

// A session issued: the token (shown once; only its hash is stored).
struct SessionGrant {
  std::string token, sandbox_id, data_url;
  int64_t expires_ms = 0;
};

class Sessions {
 public:
  Sessions(store::Store& store, SessionOptions opts, const WallClock& clock = systemWallClock())
      : store_(store), opts_(std::move(opts)), clock_(clock) {}
  const SessionOptions& options() const { return opts_; }

  // Typed, for every front end: a new session on the tenant's running
  // sandbox (ttl 0: the default). kNotFound for a sandbox the tenant does
  // not have; kFailedPrecondition (its state in `state`) unless running.
  Result<SessionGrant> issue(const std::string& tenant, const std::string& sandbox_id,
                             std::chrono::seconds ttl, std::string* state = nullptr);
  struct Bound {
    std::string tenant_id, sandbox_id;
    // Names the session in logs: "ses-" and the first 12 hex digits of
    // the token's SHA-256, never the token.
    std::string session_id;
  };
  // The live session `token` names: kUnauthenticated for an unknown,
  // revoked or expired token, kFailedPrecondition (with the state in
  // `state`) when its sandbox is not running.
  Result<Bound> resolve(std::string_view token, std::string* state = nullptr);

  // POST /v1/sandboxes/{id}/sessions for an authenticated tenant: 201
  // {data_url, token, expires_at}; 404 for a sandbox the tenant does not
  // have; 409 (details.state) unless it is running.
  Response create(const Request& req, const std::string& tenant, const std::string& sandbox_id);

  // resolve() of a data-plane request's bearer token (401 when missing).
  Result<Bound> authenticate(const Request& req, std::string* state = nullptr);

 private:
  store::Store& store_;
  SessionOptions opts_;
  const WallClock& clock_;
};

}  // namespace vessel::api
