#pragma once
// The egress routes of the API (api/openapi.yaml, docs/gateway.md): a
// sandbox's network settings (GET and PUT /v1/sandboxes/{id}/network; at
// create they come with the sandbox) and the tenant's credentials
// (POST/GET /v1/credentials, DELETE /v1/credentials/{name}). Bodies are
// parsed here into typed requests for the lifecycle (ops::Lifecycle), which
// stores them and has the node register them with its gateway. Secrets go
// from the request to the store only: no response carries them.
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/http_names.h"
#include "http/server.h"
#include "ops/lifecycle.h"

namespace vessel::api {

// A handler of (request, parameters, tenant); an Authenticated wraps one as
// a route that first finds the tenant of the request's key.
using TenantHandler =
    std::function<boost::asio::awaitable<Response>(const Request&, const Params&, std::string)>;
using Authenticated = std::function<RouteHandler(TenantHandler)>;

class NetworkApi {
 public:
  explicit NetworkApi(ops::Lifecycle& lifecycle) : lifecycle_(lifecycle) {}

  // Adds /v1/credentials[/{name}] and /v1/sandboxes/{id}/network to `r`,
  // each behind `authed`. A PUT of settings or a credential change waits
  // for the node's gateway without holding the io thread.
  void install(Router& r, const Authenticated& authed);

 private:
  boost::asio::awaitable<Response> putNetwork(const Request& req, std::string tenant,
                                              std::string id);
  Response getNetwork(const Request& req, const std::string& tenant, const std::string& id);
  boost::asio::awaitable<Response> createCredential(const Request& req, std::string tenant);
  Response listCredentials(const Request& req, const std::string& tenant);
  boost::asio::awaitable<Response> deleteCredential(const Request& req, std::string tenant,
                                                    std::string name);

  ops::Lifecycle& lifecycle_;
};

}  // namespace vessel::api
