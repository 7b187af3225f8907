#pragma once
// The egress routes of the API (api/openapi.yaml, docs/gateway.md): a
// sandbox's network settings (GET and PUT /v1/sandboxes/{id}/network; at
// create they come with the sandbox) and the tenant's credentials
// (POST/GET /v1/credentials, DELETE /v1/credentials/{name}). Bodies are
// parsed here into typed requests for the lifecycle (ops::Lifecycle), which
// stores them and has the node register them with its gateway. Secrets go
// from the request to the store only: no response carries them.
#include <optional>
#include <string>
#include <vector>

#include "api/http_server.h"
#include "ops/lifecycle.h"

namespace vessel::api {

class NetworkApi {
 public:
  explicit NetworkApi(ops::Lifecycle& lifecycle) : lifecycle_(lifecycle) {}

  // Handles /v1/credentials[/name] and /v1/sandboxes/{id}/network (`seg`
  // is the split path, seg[0] == "v1"); nullopt when the path is not ours.
  asio::awaitable<std::optional<Response>> handle(const Request& req, const std::string& tenant,
                                                  const std::vector<std::string>& seg);

 private:
  // By value: a coroutine outlives its caller's temporaries.
  asio::awaitable<Response> putNetwork(const Request& req, std::string tenant, std::string id);
  Response getNetwork(const Request& req, const std::string& tenant, const std::string& id);
  Response createCredential(const Request& req, const std::string& tenant);
  Response listCredentials(const Request& req, const std::string& tenant);
  Response deleteCredential(const Request& req, const std::string& tenant, const std::string& name);

  ops::Lifecycle& lifecycle_;
};

}  // namespace vessel::api
