#pragma once
// The control plane of the public API (api/openapi.yaml): routes under /v1/,
// each request authenticated to a tenant, its JSON parsed at the edge into
// a typed request for the lifecycle service (ops::Lifecycle), and the typed
// answer rendered back. Nothing here runs a sandbox: every change is the
// lifecycle's operation. Also the SSE streams of operations and events,
// and templates (builds are the lifecycle's operations too).
#include <boost/asio/thread_pool.hpp>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "api/http_names.h"
#include "api/live_sandboxes.h"
#include "api/network_api.h"
#include "api/sessions.h"
#include "api/volumes_api.h"
#include "http/server.h"
#include "ops/lifecycle.h"
#include "store/store.h"
#include "templates/store.h"

namespace vessel::api {

class ControlPlane : public LiveSandboxes {
 public:
  ControlPlane(asio::io_context& io, store::Store& store, ops::Lifecycle& lifecycle,
               templates::TemplateStore& templates);
  ~ControlPlane() override;
  // Serves POST /v1/sandboxes/{id}/sessions through `sessions`.
  void setSessions(Sessions* sessions) { sessions_ = sessions; }
  std::shared_ptr<agentclient::AgentClient> agentOf(const std::string& sandbox_id) override {
    return lifecycle_.agentOf(sandbox_id);
  }
  // Dockerfile builds with their context as a tar (POST
  // /v1/templates:dockerfile): the body is kept under `dir` while the
  // request runs, and refused past `max_bytes`. Before install().
  void setBuildContexts(std::string dir, uint64_t max_bytes) {
    uploads_dir_ = std::move(dir);
    max_context_ = max_bytes;
  }
  // Serves /v1/volumes through `volumes` (docs/volumes.md). Before install().
  void setVolumes(VolumesApi* volumes) { volumes_ = volumes; }
  // Adds the route table of /v1/ to the server's router.
  void install(HttpServer& server);
  // Operator keys (docs/console.md): the tenants whose keys may read
  // GET /v1/nodes, and the nodes it lists (a cluster's from the store; one
  // machine's, itself). Without it, every key is refused there.
  using NodeList = std::function<Result<std::vector<store::NodeRecord>>()>;
  void setOperators(std::set<std::string> tenants, NodeList nodes) {
    operators_ = std::move(tenants);
    nodes_ = std::move(nodes);
  }

 private:
  Response createSandbox(const Request& req, const std::string& tenant);
  Response listSandboxes(const Request& req, const std::string& tenant);
  Response forkSandbox(const Request& req, const std::string& tenant, const std::string& id);
  Response extendSandbox(const Request& req, const std::string& tenant, const std::string& id);
  // The 202 of an accepted change, or the refusal (409 with details.state).
  Response answer(const Request& req, const std::string& tenant, const std::string& id,
                  const Result<ops::Accepted>& r);
  Response refusal(const Request& req, const std::string& tenant, const std::string& id,
                   const Error& e);
  asio::awaitable<std::optional<Response>> streamEvents(const Request& req,
                                                        boost::beast::tcp_stream& stream,
                                                        std::string tenant, std::string op_id);
  // The sandbox's log, as JSON lines or followed as SSE (logs_api.cc).
  asio::awaitable<std::optional<Response>> sandboxLogs(const Request& req,
                                                       boost::beast::tcp_stream& stream,
                                                       std::string tenant, std::string id);
  // GET /v1/nodes and GET /v1/sandboxes/{id}/metrics (operator_api.cc).
  void installReads(Router& r, const Authenticated& authed);
  // Templates (templates_api.cc).
  Response buildTemplate(const Request& req, const std::string& tenant);
  Response listTemplates(const Request& req, const std::string& tenant);
  // templates_dockerfile.cc
  asio::awaitable<Response> buildFromDockerfile(const Request& req, http::BodyReader& body);
  Response contextTooLarge(const Request& req) const;

  asio::io_context& io_;
  store::Store& store_;
  ops::Lifecycle& lifecycle_;
  templates::TemplateStore& templates_;
  NetworkApi network_;  // the egress routes (/v1/credentials, /v1/sandboxes/{id}/network)
  Sessions* sessions_ = nullptr;
  VolumesApi* volumes_ = nullptr;
  std::set<std::string> operators_;
  NodeList nodes_;
  std::string uploads_dir_ = "/var/lib/vessel/build-contexts";
  uint64_t max_context_ = uint64_t{64} << 20;
  // Unpacking and reading build contexts, off the event loop.
  std::unique_ptr<asio::thread_pool> workers_;
};

}  // namespace vessel::api
