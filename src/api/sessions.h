#pragma once
// Data-plane sessions (api/openapi.yaml, POST /v1/sandboxes/{id}/sessions):
// a short-lived random bearer token bound to one running sandbox of one
// tenant. The store keeps only its SHA-256; a session dies when it expires
// or when its sandbox ends (revoked by the control plane, and refused by the
// data plane whenever the sandbox is not running).
#include <chrono>
#include <string>

#include "api/http_server.h"
#include "store/store.h"

namespace vessel::api {

struct SessionOptions {
  std::string data_url;  // what clients are told to connect to
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

class Sessions {
 public:
  Sessions(store::Store& store, SessionOptions opts) : store_(store), opts_(std::move(opts)) {}
  const SessionOptions& options() const { return opts_; }

  // POST /v1/sandboxes/{id}/sessions for an authenticated tenant: 201
  // {data_url, token, expires_at}; 404 for a sandbox the tenant does not
  // have; 409 (details.state) unless it is running.
  Response create(const Request& req, const std::string& tenant, const std::string& sandbox_id);

  // The live session a data-plane request's bearer token names: 401 for a
  // missing, unknown, revoked or expired token, 409 (with the state) when
  // its sandbox is not running. `state` receives the sandbox's state when
  // that is the reason.
  struct Bound {
    std::string tenant_id, sandbox_id;
  };
  Result<Bound> authenticate(const Request& req, std::string* state = nullptr);

 private:
  store::Store& store_;
  SessionOptions opts_;
};

}  // namespace vessel::api
