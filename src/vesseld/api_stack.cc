#include "vesseld/api_stack.h"

#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>

#include "api/auth.h"
#include "base/log.h"
#include "e2b/ports.h"
#include "http/tls_client.h"
#include "vesseld/console.h"
#include "vesseld/e2b_volumes.h"

namespace vessel::vesseld {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;
using api::Request;
using api::Response;
using http::HttpServer;

namespace {

// Uploads arrive whole (multipart), hence the body cap of envd's listener.
http::ServerLimits envdLimits() {
  return http::ServerLimits{16 * 1024, 64u << 20, std::chrono::seconds(60)};
}

}  // namespace

// Long because it is the API stack's one assembly: each part built in the
// order the next needs it, read top to bottom as docs/design.md draws it.
Result<std::unique_ptr<ApiStack>> ApiStack::build(asio::io_context& io, ApiSettings s,
                                                  store::Store& store, ops::Node& node,
                                                  templates::TemplateStore& templates,
                                                  RemoteVolumes volumes) {
  std::unique_ptr<ApiStack> a(new ApiStack(io, std::move(s)));
  const ApiSettings& cfg = a->s_;
  std::error_code ec;
  fs::create_directories(cfg.state_dir, ec);
  VESSEL_ASSIGN_OR_RETURN(std::string dev_key, api::ensureDevTenant(store, cfg.state_dir));
  if (!dev_key.empty()) {
    // Shown once: only its hash is stored. The file keeps it for `make up`.
    if (cfg.node_local)
      std::printf(
          "vesseld: development tenant 'dev' created; API key (also in %s/dev-api-key, and in "
          "its E2B form in %s/dev-e2b-api-key):\n%s\n",
          cfg.state_dir.c_str(), cfg.state_dir.c_str(), dev_key.c_str());
    else
      std::printf(
          "vesseld: development tenant 'dev' created; API key (also in %s/dev-api-key):\n%s\n",
          cfg.state_dir.c_str(), dev_key.c_str());
    std::fflush(stdout);
  }
  a->lifecycle_ = std::make_unique<ops::Lifecycle>(io, store, node, templates);
  a->lifecycle_->setMetrics(a->metrics_);
  a->lifecycle_->setPolicy(cfg.policy);
  a->control_ = std::make_unique<api::ControlPlane>(io, store, *a->lifecycle_, templates);
  {
    // What a request left when the process died is no one's now.
    std::string uploads = cfg.state_dir + "/build-contexts";
    std::error_code ec;
    std::filesystem::remove_all(uploads, ec);
    a->control_->setBuildContexts(uploads, static_cast<uint64_t>(cfg.max_build_context_mib) << 20);
  }
  {
    // Volumes: this machine's (mounted again, or adopted, before the API
    // serves them), or on a replica the nodes' (volumes_ names them).
    api::VolumeLimits vl;
    vl.tenant_max_mib = cfg.tenant_max_volume_mib;
    vl.max_mib = cfg.max_volume_mib;
    ops::VolumeKeeper* keeper = volumes.keeper;
    ops::VolumeMounter* mounter = volumes.mounter;
    if (cfg.node_local) {
      VESSEL_ASSIGN_OR_RETURN(
          a->local_volumes_,
          VolumeStack::build({cfg.state_dir, cfg.vm_uid_range, cfg.uid_lease_dir, ""}, store));
      keeper = &a->local_volumes_->keeper();
      mounter = a->local_volumes_->mounts();
    }
    if (mounter) a->lifecycle_->setVolumeMounter(mounter);
    if (keeper) {
      a->lifecycle_->setVolumeKeeper(keeper, vl.tenant_max_mib);  // a fork's clones
      a->volumes_ = std::make_unique<api::VolumesApi>(store, *keeper, vl);
      a->control_->setVolumes(a->volumes_.get());
    }
  }
  api::SessionOptions so;
  so.data_url = cfg.data_url;
  if (!cfg.node_local)
    // A session names the data plane of its sandbox's node.
    so.data_url_of = [&store](const std::string& id) -> std::string {
      auto node = store.sandboxNode(id);
      if (!node.ok() || node->empty()) return "";
      auto all = store.listNodes();
      if (all.ok())
        for (const auto& n : *all)
          if (n.name == *node) return n.data_url;
      return "";
    };
  a->sessions_ = std::make_unique<api::Sessions>(store, so);
  a->control_->setSessions(a->sessions_.get());
  if (!s.node_local)  // one machine sets its own node list (daemon.cc)
    a->control_->setOperators({s.operator_tenants.begin(), s.operator_tenants.end()},
                              [&store] { return store.listNodes(); });

  // E2B access tokens: the key is the API side's alone (a file, the same on
  // every replica); nodes and the store never see it (access_token.h).
  {
    std::string key_file =
        cfg.e2b_token_key_file.empty() ? cfg.state_dir + "/e2b-token-key" : cfg.e2b_token_key_file;
    VESSEL_ASSIGN_OR_RETURN(auto t, e2b::AccessTokens::openFile(key_file));
    a->tokens_ = std::make_unique<e2b::AccessTokens>(std::move(t));
  }
  if (!cfg.node_local) {
    // A store from before issue 24 still holds the old shared key.
    VESSEL_TRY(e2b::AccessTokens::forgetStoredKey(store));
  }
  auto tenant_for_key = [&store](std::string_view key) { return api::tenantForKey(key, store); };
  a->e2b_rest_ =
      std::make_unique<e2b::RestApi>(*a->lifecycle_, tenant_for_key, templates, *a->tokens_);
  // The template builder's status reads the build's events from the store,
  // as the native API's event streams do; "" would be every operation's.
  a->e2b_rest_->setOperationEvents(
      [&store](const std::string& tenant, const std::string& op, int64_t after, int limit) {
        if (op.empty())
          return Result<std::vector<store::EventRecord>>(std::vector<store::EventRecord>{});
        return store.listEvents(tenant, op, after, limit);
      });
  // E2B's Volume API and volumeMounts, over the same volumes as /v1/volumes.
  if (a->volumes_)
    a->e2b_rest_->setVolumes(e2bVolumes(store, *a->volumes_,
                                        a->local_volumes_ ? &a->local_volumes_->keeper() : nullptr,
                                        cfg.e2b_volume_mib));

  // E2B envd (docs/e2b-envd.md): on one machine the lifecycle's agents;
  // on a replica none, every request forwarded to its sandbox's node.
  e2b::envd::Sandboxes agents;
  if (cfg.node_local) {
    agents.agent_of = [lc = a->lifecycle_.get()](const std::string& id) { return lc->agentOf(id); };
    // From memory (vesseld/live_index.h), never a store scan per request.
    a->live_.seed(store);
    a->live_hook_ = a->lifecycle_->operations().onSandboxState(
        [live = &a->live_](const std::string& tenant, const std::string& id,
                           store::SandboxState st) { live->set(tenant, id, st); });
    agents.live_ids = [live = &a->live_] { return live->running(); };
    agents.tenant_of = [live = &a->live_](const std::string& id) {
      auto e = live->find(id);
      return e ? e->tenant : std::string();
    };
  } else {
    agents.agent_of = [](const std::string&) { return nullptr; };
    agents.live_ids = [] { return std::vector<std::string>{}; };
    a->envd_forward_ =
        std::make_unique<EnvdForwarder>(store, *a->tokens_, cfg.node_tokens, cfg.lost_after);
    a->live_hook_ = a->lifecycle_->operations().onSandboxState(
        [fwd = a->envd_forward_.get()](const std::string&, const std::string& id,
                                       store::SandboxState) { fwd->forget(id); });
  }
  a->envd_ = std::make_unique<e2b::envd::Envd>(io, std::move(agents), *a->tokens_);
  if (cfg.node_local) {
    // A sandbox's watchers and processes go with it (a pause keeps them for
    // EnvdLimits::keep_detached).
    a->envd_frees_ = a->lifecycle_->operations().onSandboxState(
        [envd = a->envd_.get()](const std::string&, const std::string& id, store::SandboxState st) {
          if (st == store::SandboxState::kDeleting || st == store::SandboxState::kDeleted ||
              st == store::SandboxState::kFailed)
            envd->sandboxEnded(id);
        });
  }
  if (cfg.node_local) {
    // Sandbox ports (E2B's getHost): <port>-<id>.<domain> on the envd
    // listener, plain or TLS (docs/e2b.md).
    std::string domain =
        cfg.e2b_sandbox_domain.empty() ? std::string("vessel.localhost") : cfg.e2b_sandbox_domain;
    // Private ports are reached with the traffic token or a data-plane
    // session of the sandbox (e2b/ports.h).
    e2b::PortAccess access;
    access.state_of = [live =
                           &a->live_](const std::string& id) -> std::optional<store::SandboxState> {
      auto e = live->find(id);
      if (!e) return std::nullopt;
      return e->state;
    };
    access.session_of = [sessions = a->sessions_.get()](const std::string& id,
                                                        std::string_view token) {
      // Only what looks like one costs a store read (api/sessions.h).
      if (token.substr(0, 4) != "vst_") return false;
      auto bound = sessions->resolve(token);
      return bound.ok() && bound->sandbox_id == id;
    };
    a->ports_ = std::make_unique<ingress::Proxy>(
        domain, e2b::portRoutes(*a->lifecycle_, *a->tokens_, std::move(access)), 49983);
  }
  return a;
}

ApiStack::~ApiStack() = default;

Status ApiStack::forwardEnvd() {
  if (!envd_forward_) return okStatus();
  // Nodes advertising https:// envd listeners are verified with
  // --node-ca-file (http/tls_client.h).
  http::ForwardLimits limits;
  VESSEL_ASSIGN_OR_RETURN(limits.tls, http::clientContext(s_.node_ca_file));
  envd_server_->forwardWhen(
      [f = envd_forward_.get()](http::request_header<>& head) { return f->choose(head); },
      std::move(limits));
  return okStatus();
}

Status ApiStack::serve(Health health, ReadyCheck ready,
                       std::function<asio::awaitable<void>()> before_scrape, ListenerTls& tls) {
  Logger log("vesseld");
  const ApiSettings& cfg = s_;
  server_ = std::make_unique<HttpServer>(io_);
  server_->setMetrics(metrics_, "control");
  control_->install(*server_);
  // Unauthenticated like /healthz: aggregate numbers only (no ids, no
  // tenant names), on the control listener, which is loopback by default.
  server_->route(http::verb::get, "/metrics",
                 [this, before_scrape](const Request& req) -> asio::awaitable<Response> {
                   Response res{http::status::ok, req.version()};
                   res.set(http::field::content_type, metrics::kContentType);
                   res.keep_alive(req.keep_alive());
                   if (before_scrape) co_await before_scrape();
                   res.body() = metrics_.render();
                   res.prepare_payload();
                   co_return res;
                 });
  server_->route(
      http::verb::get, "/healthz", [health](const Request& req) -> asio::awaitable<Response> {
        auto [o, ok] = health();
        co_return http::jsonResponse(req, ok ? http::status::ok : http::status::service_unavailable,
                                     json::serialize(o));
      });
  installProbes(*server_, cfg.node_local ? "all" : "api", std::move(ready));
  VESSEL_TRY(installConsole(*server_, cfg.console_dir, *sessions_));
  VESSEL_TRY(tls.serve(*server_, "api"));
  VESSEL_TRY(server_->listen(cfg.listen));
  log.info("listening on {}://{}:{}", tls.scheme("api"), cfg.listen.host, server_->port());

  // The E2B-compatible REST API: E2B's SDKs with E2B_API_URL pointing here.
  e2b_server_ = std::make_unique<HttpServer>(io_);
  e2b_server_->setMetrics(metrics_, "e2b");
  e2b_rest_->setUrlScheme(tls.scheme("e2b"));  // the template builder's upload URLs
  e2b_rest_->install(*e2b_server_);
  if (cfg.e2b_listen) {
    VESSEL_TRY(tls.serve(*e2b_server_, "e2b"));
    VESSEL_TRY(e2b_server_->listen(*cfg.e2b_listen));
    log.info("E2B REST API on {}://{}:{} (E2B_API_URL; key in {}/dev-e2b-api-key)",
             tls.scheme("e2b"), cfg.e2b_listen->host, e2b_server_->port(), cfg.state_dir);
  }

  envd_server_ = std::make_unique<HttpServer>(io_, envdLimits());
  envd_server_->setMetrics(metrics_, "e2b-envd");
  envd_->install(*envd_server_);
  VESSEL_TRY(forwardEnvd());
  if (!cfg.envd_listen) return okStatus();
  if (!ports_) {
    VESSEL_TRY(tls.serve(*envd_server_, "envd"));
    VESSEL_TRY(envd_server_->listen(*cfg.envd_listen));
    log.info("E2B envd on {}://{}:{} (E2B_SANDBOX_URL; forwarded to the sandboxes' nodes)",
             tls.scheme("envd"), cfg.envd_listen->host, envd_server_->port());
    return okStatus();
  }
  std::string domain =
      cfg.e2b_sandbox_domain.empty() ? std::string("vessel.localhost") : cfg.e2b_sandbox_domain;
  ports_->install(*envd_server_);
  VESSEL_ASSIGN_OR_RETURN(ports_tls_, ingress::TlsFront::create(cfg.state_dir, domain));
  if (tls.enabled("envd")) {
    // TLS only: sandbox names get the ingress CA's leaves, any other name
    // (envd itself) the listener's certificate.
    VESSEL_TRY(tls.serve(*envd_server_, "envd",
                         [front = ports_tls_.get()](http::CertificateChooser other) {
                           return front->chooser(std::move(other));
                         }));
  } else {
    // Plain envd (http://) and the sandbox ports' https:// on one port.
    VESSEL_TRY(ports_tls_->install(*envd_server_, tls.threads()));
  }
  VESSEL_TRY(envd_server_->listen(*cfg.envd_listen));
  if (cfg.e2b_sandbox_domain.empty()) domain += ":" + std::to_string(envd_server_->port());
  e2b_rest_->setSandboxDomain(domain);
  log.info(
      "E2B envd on {}://{}:{} (E2B_SANDBOX_URL); sandbox ports at "
      "{}://<port>-<id>.{} (CA: {})",
      tls.scheme("envd"), cfg.envd_listen->host, envd_server_->port(),
      tls.enabled("envd") ? "https" : "http(s)", domain, ports_tls_->caPath());
  return okStatus();
}

void ApiStack::close() {
  for (auto* s : {server_.get(), e2b_server_.get(), envd_server_.get()})
    if (s) s->close();
}

}  // namespace vessel::vesseld
