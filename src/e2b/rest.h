#pragma once
// The E2B REST API (E2B_API_URL; vesseld --e2b-listen, 127.0.0.1:3000): the
// routes E2B's SDKs call, v1 (SDK <= 2.45) and v2 (2.46+), mapped onto the
// one lifecycle service (ops::Lifecycle) and the tenant's credentials. No
// second lifecycle and nothing of node/ or hypervisor/: a create is the
// lifecycle's create, awaited, because E2B answers synchronously (201 once
// the sandbox runs). The key comes in `X-API-Key` (either form,
// api::tenantForKey, which vesseld hands in); errors are E2B's `{"code": <HTTP status>,
// "message"}`, which the SDKs branch on. docs/e2b.md lists the mapping and what is refused.
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "e2b/access_token.h"
#include "e2b/requests.h"
#include "e2b/volumes.h"
#include "http/server.h"
#include "ops/lifecycle.h"
#include "templates/store.h"

namespace vessel::e2b {

namespace asio = boost::asio;
using http::Request;
using http::Response;

// The envd version sandboxes report (`envdVersion`): the SDKs enable
// features by it, so it must match what Vessel's envd front end serves.
inline constexpr const char* kEnvdVersion = "0.6.4";

// The largest archive of one COPY the template builder takes (its upload URL).
inline constexpr uint64_t kMaxUploadBytes = 32 << 20;

struct RestOptions {
  // How long a synchronous answer waits for its operation (TCG restores are slow).
  std::chrono::seconds await_limit{600};
};

// The tenant an API key belongs to, or kUnauthenticated (api::tenantForKey
// in vesseld: keys are the native API's, and src/e2b reads no store).
using TenantForKey = std::function<Result<std::string>(std::string_view key)>;

// A build operation's stored events after a sequence number, oldest first
// (store::Store::listEvents of the tenant and operation): the template
// builder's status renders them as E2B's log, as the native API's SSE
// streams read the same log.
using OperationEvents = std::function<Result<std::vector<store::EventRecord>>(
    const std::string& tenant, const std::string& op_id, int64_t after_seq, int limit)>;

class RestApi {
 public:
  RestApi(ops::Lifecycle& lifecycle, TenantForKey tenant_for_key,
          templates::TemplateStore& templates, const AccessTokens& tokens, RestOptions opts = {})
      : lifecycle_(lifecycle),
        tenant_for_key_(std::move(tenant_for_key)),
        templates_(templates),
        tokens_(tokens),
        opts_(opts) {}
  // E2B's route table on `server` (a listener of its own; rest.cc).
  void install(http::HttpServer& server);
  // The `domain` sandboxes are given (`<port>-<id>.<domain>` reaches their
  // ports, ingress/proxy.h); "" (envd off): none.
  void setSandboxDomain(std::string domain) { domain_ = std::move(domain); }
  // The scheme of the upload URLs the template builder hands out ("https"
  // when the listener speaks TLS); before install().
  void setUrlScheme(std::string scheme) { scheme_ = std::move(scheme); }
  // Where build status reads its events (unset: builds show no log).
  void setOperationEvents(OperationEvents f) { events_ = std::move(f); }
  // E2B's Volume API and volumeMounts (unset: they answer 503, as on an
  // API replica, which keeps no volumes); before install().
  void setVolumes(Volumes v) { volumes_ = std::move(v); }

 private:
  // The tenant of the request's key (X-API-Key or a bearer token).
  Result<std::string> tenantOf(const Request& req);
  // Sandboxes (rest_sandboxes.cc).
  asio::awaitable<Response> create(const Request& req, std::string tenant, bool v2);
  Response list(const Request& req, const std::string& tenant, bool v2);
  asio::awaitable<Response> kill(const Request& req, std::string tenant, std::string id);
  asio::awaitable<Response> pause(const Request& req, std::string tenant, std::string id);
  asio::awaitable<Response> connect(const Request& req, std::string tenant, std::string id, bool v2,
                                    bool resume_only);
  Response setTimeout(const Request& req, const std::string& tenant, const std::string& id);
  Response refresh(const Request& req, const std::string& tenant, const std::string& id);
  asio::awaitable<Response> updateNetwork(const Request& req, std::string tenant, std::string id);
  asio::awaitable<Response> fork(const Request& req, std::string tenant, std::string id);
  asio::awaitable<Response> metrics(const Request& req, std::string tenant, std::string id);
  // The sandbox's log, in v1's or v2's shape (rest_logs.cc).
  Response logs(const Request& req, const std::string& tenant, const std::string& id, bool v2);
  // Snapshots, templates and secrets (rest_templates.cc).
  asio::awaitable<Response> createSnapshot(const Request& req, std::string tenant, std::string id);
  Response listSnapshots(const Request& req, const std::string& tenant);
  Response deleteTemplate(const Request& req, const std::string& tenant, const std::string& id);
  Response listTemplates(const Request& req, const std::string& tenant);
  Response templateAlias(const Request& req, const std::string& tenant, const std::string& alias);
  // E2B's template builder (rest_builds.cc): builds requested, their
  // uploaded files, their status and log from the build's operation, tags.
  asio::awaitable<Response> requestBuild(const Request& req, std::string tenant);
  Response fileUploadLink(const Request& req, const std::string& tenant, const std::string& id,
                          const std::string& hash);
  asio::awaitable<Response> uploadFiles(const Request& req, const http::Params& p,
                                        http::BodyReader& body);
  Response startBuild(const Request& req, const std::string& tenant, const std::string& id,
                      const std::string& build);
  Response buildStatus(const Request& req, const std::string& tenant, const std::string& id,
                       const std::string& build, bool logs_route);
  Response tags(const Request& req, const std::string& tenant, const std::string& id);
  Response assignTags(const Request& req, const std::string& tenant, bool assign);
  Response listSecrets(const Request& req, const std::string& tenant);
  asio::awaitable<Response> createSecret(const Request& req, std::string tenant);
  asio::awaitable<Response> secret(const Request& req, std::string tenant, std::string name);

  // E2B's Volume API (rest_volumes.cc): /volumes behind the tenant's key,
  // /volumecontent behind the volume's token (rest_volume_files.cc).
  void installVolumes(http::Router& r);
  asio::awaitable<Response> createVolume(const Request& req, std::string tenant);
  Response listVolumes(const Request& req, const std::string& tenant);
  Response getVolume(const Request& req, const std::string& tenant, const std::string& id);
  asio::awaitable<Response> deleteVolume(const Request& req, std::string tenant, std::string id);
  // The tenant's volume of this id, or kNotFound.
  Result<store::VolumeRecord> volumeById(const std::string& tenant, const std::string& id);
  // The volume a /volumecontent request's token is for and its files;
  // kUnauthenticated for no token or another volume's.
  Result<volumes::VolumeFiles> contentFiles(const Request& req, const std::string& id);
  void installVolumeFiles(http::Router& r);
  asio::awaitable<Response> listDir(const Request& req, std::string id);
  asio::awaitable<Response> makeDir(const Request& req, std::string id);
  asio::awaitable<Response> pathInfo(const Request& req, std::string id, http::verb method);
  asio::awaitable<std::optional<Response>> readVolumeFile(const Request& req,
                                                          boost::beast::tcp_stream& stream,
                                                          std::string id);
  asio::awaitable<Response> writeVolumeFile(const Request& req, http::BodyReader& body,
                                            std::string id);
  // volumeMounts of the tenant's sandboxes (empty without volumes here).
  std::map<std::string, std::vector<VolumeMount>> mountsOf(const std::string& tenant);

  // The operation's end: ok, or the error it failed with.
  asio::awaitable<Status> finish(const std::string& tenant, const store::OperationRecord& op);
  // The E2B egress settings as the lifecycle's, with a credential made for
  // every header rule (named e2b-rule-<hex>; see docs/e2b.md).
  // Awaitable: each credential reaches the node's gateway through the
  // lifecycle before the sandbox is created or changed.
  asio::awaitable<Result<ops::NetworkSpec>> egressSpec(std::string tenant, const Egress& e);
  // A credential per header rule, added to spec.credentials as made.
  asio::awaitable<Status> makeRuleCredentials(std::string tenant, const Egress& e,
                                              ops::NetworkSpec& spec);
  // The credentials made for a sandbox's header rules (e2b-rule-*), and
  // their deletion through the lifecycle; other names are left alone.
  std::vector<std::string> ruleCredentials(const std::string& tenant, const std::string& id);
  // Deletes the rule credentials among `names` that no live sandbox of the
  // tenant other than `ending` still names (a fork's copies share them).
  asio::awaitable<void> dropRuleCredentials(std::string tenant, std::vector<std::string> names,
                                            std::string ending = "");
  Result<std::set<std::string>> rulesHeldBy(const std::string& tenant, const std::string& except);
  // Sandbox and SandboxDetail / ListedSandbox objects.
  boost::json::object sandboxJson(const store::SandboxRecord& s) const;
  boost::json::object listedJson(const store::SandboxRecord& s, bool detail) const;

  ops::Lifecycle& lifecycle_;
  TenantForKey tenant_for_key_;
  templates::TemplateStore& templates_;
  const AccessTokens& tokens_;
  RestOptions opts_;
  std::string domain_;
  std::string scheme_ = "http";
  OperationEvents events_;
  Volumes volumes_;
  struct Builds;  // rest_builds.cc
  static std::shared_ptr<Builds> makeBuilds();
  std::shared_ptr<Builds> builds_;
};

// E2B's error body, `{"code": <status>, "message": ...}`, with the status the
// Vessel error code maps to (http::statusForCode).
Response errorJson(const Request& req, const Error& e);
Response jsonBody(const Request& req, http::status status, const boost::json::value& v);
Response noContent(const Request& req);
// SandboxVolumeMount objects.
boost::json::array volumeMountsJson(const std::vector<VolumeMount>& mounts);
// A template name as E2B clients give it ("name", "name:default",
// "team/name:tag"): the name, or kInvalidArgument.
Result<std::string> templateName(std::string_view id);

}  // namespace vessel::e2b
