// vesseld --role=node: runs sandboxes on this host for the API replicas.
// The node stack (node_stack.h) as in --role=all; around it, the node's
// own duties: it registers in the store and heartbeats its capacity there
// every two seconds, serves the ops::Node calls of its LocalNode over the
// node API (cluster/node_server.h, bearer token), and serves the data
// plane and envd for the sandboxes it runs (session and access tokens are
// checked against the shared store). Its supervision (ops/node_supervision.h)
// takes over what the store places here at start, fails lost sandboxes,
// and after a heartbeat gap destroys what the store no longer places here,
// all through the operation log.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <fstream>
#include <thread>

#include "api/data_plane.h"
#include "api/sessions.h"
#include "base/log.h"
#include "base/run_blocking.h"
#include "cluster/node_server.h"
#include "cluster/node_tokens.h"
#include "cluster/template_catalogue.h"
#include "cluster/template_node.h"
#include "cluster/template_transfer.h"
#include "e2b/access_token.h"
#include "e2b/envd/envd.h"
#include "http/server.h"
#include "http/tls_client.h"
#include "ops/node_supervision.h"
#include "ops/sandbox_log.h"
#include "vesseld/command_log.h"
#include "vesseld/daemon_internal.h"
#include "vesseld/node_stack.h"
#include "vesseld/probes.h"
#include "vesseld/volume_stack.h"

namespace vessel::vesseld {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// The data plane here reaches only this node's sandboxes; using one
// restarts its idle clock in the store.
class NodeSandboxes final : public api::LiveSandboxes {
 public:
  NodeSandboxes(LocalNode& node, store::Store& store) : node_(node), store_(store) {}
  std::shared_ptr<agentclient::AgentClient> agentOf(const std::string& id) override {
    auto a = node_.agent(id);
    if (a) (void)store_.touchSandbox(id, store::nowMs());
    return a;
  }

 private:
  LocalNode& node_;
  store::Store& store_;
};

// The node's heartbeats: its capacity into the store every two seconds;
// after a gap (heartbeats failed, or one call hung on a dead link until it
// got through) the API replicas may have declared this node lost, so the
// supervisor resyncs then, and every 10 s anyway, since the store may
// change its mind about a sandbox while the node beats.
class Heartbeats {
 public:
  Heartbeats(asio::io_context& io, const Config& cfg, store::Store& store, NodeStack& node,
             VolumeStack& volumes, ops::NodeSupervisor& sup, cluster::StoreCatalogue& catalogue,
             cluster::TemplateNode& served)
      : cfg_(cfg),
        store_(store),
        node_(node),
        volumes_(volumes),
        sup_(sup),
        catalogue_(catalogue),
        served_(served),
        timer_(io) {
    registered_ = beat();
  }
  bool registered() const { return registered_; }
  void start(asio::io_context& io) { asio::co_spawn(io, loop(), asio::detached); }
  void cancel() { timer_.cancel(); }

 private:
  bool beat() {
    store::NodeRecord n = node_.describe();
    n.name = cfg_.node_name;
    n.advertise_url = cfg_.node_advertise;
    n.data_url = cfg_.data_url;
    if (cfg_.e2b_envd_listen_addr) n.envd_url = cfg_.e2b_envd_advertise;
    n.volume_free_mib = volumes_.freeMib();  // where replicas place new volumes
    auto s = store_.heartbeatNode(n);
    if (!s.ok()) Logger("vesseld-node").warn("heartbeat: {}", s.error().message());
    return s.ok();
  }
  asio::awaitable<void> loop() {
    auto last_ok = std::chrono::steady_clock::now();
    for (int n = 1;; ++n) {
      timer_.expires_after(std::chrono::seconds(2));
      boost::system::error_code ec;
      co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      bool was = registered_;
      registered_ = beat();
      if (!registered_) continue;
      auto now = std::chrono::steady_clock::now();
      bool gap = !was || now - last_ok > std::chrono::seconds(4);
      last_ok = now;
      if (gap) Logger("vesseld-node").info("heartbeats get through again: reconciling");
      if (gap || n % 5 == 0) co_await sup_.resync(node_.local().load().ids);
      if (n % 5 == 0)
        if (auto gone = catalogue_.deleted(); gone.ok()) served_.dropDeleted(*gone);
    }
  }

  const Config& cfg_;
  store::Store& store_;
  NodeStack& node_;
  VolumeStack& volumes_;
  ops::NodeSupervisor& sup_;
  cluster::StoreCatalogue& catalogue_;
  cluster::TemplateNode& served_;
  asio::steady_timer timer_;
  bool registered_ = false;
};

// /metrics on the node API's listener: aggregate numbers only, as on the
// control listener of --role=all.
void installMetrics(http::HttpServer& server, metrics::Registry& metrics, NodeStack& node) {
  server.route(http::verb::get, "/metrics",
               [&](const api::Request& req) -> asio::awaitable<api::Response> {
                 api::Response res{http::status::ok, req.version()};
                 res.set(http::field::content_type, metrics::kContentType);
                 res.keep_alive(req.keep_alive());
                 co_await node.refreshMetrics();
                 res.body() = metrics.render();
                 res.prepare_payload();
                 co_return res;
               });
}

// What the node serves: the node API (with /metrics and the probes), the
// data plane and E2B envd for the sandboxes it runs. Session tokens are
// checked against the shared store; envd requests only with a replica's
// forward proof (the node holds no token key).
class NodeListeners {
 public:
  NodeListeners(asio::io_context& io, const Config& cfg, store::Store& store, NodeStack& node,
                VolumeStack& volumes, cluster::TemplateNode& served, metrics::Registry& metrics,
                Heartbeats& beats)
      : io_(io),
        cfg_(cfg),
        store_(store),
        node_(node),
        metrics_(metrics),
        beats_(beats),
        node_api_(served, cfg.node_token),
        node_server_(io, cluster::nodeServerLimits()),
        // Other nodes copy templates with their own tokens (per-node
        // tokens), which this node checks against the hashes they published.
        template_files_(node.templates(), cfg.node_token,
                        cluster::peerTokenCheck(store, cfg.node_name)),
        sessions_(store, api::SessionOptions{.data_url = cfg.data_url}),
        live_(node.local(), store),
        data_(io, sessions_, live_),
        data_server_(io),
        // Uploads arrive whole (multipart), hence the body cap, as in --role=all.
        envd_server_(io, http::ServerLimits{16 * 1024, 64u << 20, std::chrono::seconds(60)}) {
    // The replicas' volume calls: this node's volumes and their mounts.
    node_api_.setVolumes(&volumes.keeper(), volumes.mounts());
  }

  // TLS (`tls`, per listener when enabled) on all three: clients reach
  // the data plane, API replicas the node API and envd (verifying them
  // with their --node-ca-file), other nodes the node API's template files.
  Status listen(ListenerTls& tls) {
    Logger log("vesseld-node");
    auto ready = [this](json::object& o) {
      o["node"] = cfg_.node_name;
      o["registered"] = beats_.registered();
      o["gateway"] = node_.gatewayHealthy();
      return beats_.registered() && node_.gatewayHealthy();
    };
    node_server_.setMetrics(metrics_, "node");
    // Before the node API's own prefix route, which would take these paths.
    template_files_.install(node_server_);
    installMetrics(node_server_, metrics_, node_);
    node_api_.install(node_server_);
    installProbes(node_server_, "node", ready);
    VESSEL_TRY(tls.serve(node_server_, "node"));
    VESSEL_TRY(node_server_.listen(cfg_.node_listen_addr));
    log.info("node API on {}://{}:{} (advertised {})", tls.scheme("node"),
             cfg_.node_listen_addr.host, node_server_.port(), cfg_.node_advertise);

    data_server_.setMetrics(metrics_, "data");
    data_.install(data_server_);
    installProbes(data_server_, "node", ready);
    VESSEL_TRY(tls.serve(data_server_, "data"));
    VESSEL_TRY(data_server_.listen(cfg_.data_listen_addr));
    log.info("data plane on {}://{}:{} (clients are told {})", tls.scheme("data"),
             cfg_.data_listen_addr.host, data_server_.port(), cfg_.data_url);

    // API replicas' envd listeners forward to this one (envd_forward.h).
    // No token key here: each request is vouched for by the replica that
    // checked its token (access_token.h).
    envd_tokens_ =
        std::make_unique<e2b::AccessTokens>(e2b::AccessTokens::nodeSide(cfg_.node_token));
    e2b::envd::Sandboxes agents;
    agents.agent_of = [this](const std::string& id) { return live_.agentOf(id); };
    agents.live_ids = [this] { return node_.local().load().ids; };
    // No lifecycle here to say a sandbox ended: envd frees what it kept for
    // one once it has been gone from this node for EnvdLimits::keep_detached.
    agents.tenant_of = [this](const std::string& id) {
      auto sb = store_.findSandbox(id);
      return sb.ok() && *sb ? (*sb)->tenant_id : std::string();
    };
    envd_ = std::make_unique<e2b::envd::Envd>(io_, std::move(agents), *envd_tokens_);
    envd_server_.setMetrics(metrics_, "e2b-envd");
    envd_->install(envd_server_);
    if (!cfg_.e2b_envd_listen_addr) return okStatus();
    VESSEL_TRY(tls.serve(envd_server_, "envd"));
    VESSEL_TRY(envd_server_.listen(*cfg_.e2b_envd_listen_addr));
    log.info("E2B envd on {}://{}:{} (API replicas forward to {})", tls.scheme("envd"),
             cfg_.e2b_envd_listen_addr->host, envd_server_.port(), cfg_.e2b_envd_advertise);
    return okStatus();
  }
  void close() {
    node_server_.close();
    data_server_.close();
    envd_server_.close();
  }

 private:
  asio::io_context& io_;
  const Config& cfg_;
  store::Store& store_;
  NodeStack& node_;
  metrics::Registry& metrics_;
  Heartbeats& beats_;
  cluster::NodeServer node_api_;
  http::HttpServer node_server_;
  cluster::TemplateFileServer template_files_;
  api::Sessions sessions_;
  NodeSandboxes live_;
  api::DataPlane data_;
  http::HttpServer data_server_;
  std::unique_ptr<e2b::AccessTokens> envd_tokens_;
  std::unique_ptr<e2b::envd::Envd> envd_;
  http::HttpServer envd_server_;
};

}  // namespace

Status runNode(Config cfg, const Machines& machines) {
  Logger log("vesseld-node");
  VESSEL_ASSIGN_OR_RETURN(Fd lock, lockStateDir(cfg.state_dir));
  VESSEL_ASSIGN_OR_RETURN(auto store, openStore(cfg));
  log.info("node {} (store {} schema v{}), node API on {} (advertised {})", cfg.node_name,
           store::redactUrl(cfg.store), store->schemaVersion(), cfg.node_listen,
           cfg.node_advertise);
  asio::io_context io;
  VESSEL_ASSIGN_OR_RETURN(auto node, NodeStack::build(io, nodeSettings(cfg), *store, machines));
  // The cluster's template catalogue: what this node has is registered;
  // what it lacks is copied from another node on first use and checked.
  cluster::StoreCatalogue catalogue(*store);
  log.info("template catalogue: {} template(s) here registered",
           cluster::registerInstalled(node->templates(), catalogue));
  // What other nodes check this node's token against when it copies a
  // template from them: its hash, never the token (node_tokens.h).
  VESSEL_TRY(store->setMeta(cluster::nodeTokenMetaKey(cfg.node_name),
                            cluster::nodeTokenHash(cfg.node_token)));
  cluster::FetchOptions fo{.self = cfg.node_name, .token = cfg.node_token};
  // Other nodes advertising https:// are verified with --node-ca-file.
  VESSEL_ASSIGN_OR_RETURN(fo.tls, http::clientContext(cfg.node_ca_file));
  std::optional<cluster::CatalogueVerifier> verifier;
  if (!cfg.catalogue_public_key_file.empty()) {
    VESSEL_ASSIGN_OR_RETURN(auto v,
                            cluster::CatalogueVerifier::openFile(cfg.catalogue_public_key_file));
    verifier = std::move(v);
    fo.verifier = &*verifier;
  } else {
    log.warn(
        "no --catalogue-public-key-file: templates copied from other nodes are checked "
        "against catalogue entries any node can write");
  }
  cluster::TemplateFetcher fetcher(io, node->templates(), catalogue, *store, fo);
  cluster::TemplateNode served(node->local(), node->templates(), catalogue, *store, fetcher,
                               cfg.node_name);
  // The volumes placed on this node: mounted again before the node API
  // serves them to the replicas.
  VESSEL_ASSIGN_OR_RETURN(auto volumes,
                          VolumeStack::build({cfg.state_dir, node->settings().vm_uid_range,
                                              node->settings().uid_lease_dir, cfg.node_name},
                                             *store));
  LocalNode& local = node->local();
  // The commands run here go to their sandboxes' logs in the store, where
  // the API replicas read them.
  ops::SandboxLog sandbox_log(*store, systemWallClock());
  sandbox_log.setLimits({cfg.log_max_entries, std::chrono::seconds(cfg.log_retention_s)});
  if (cfg.command_log) {
    local.setCommandLog(
        [&sandbox_log](const std::string& id) { return commandLog(sandbox_log, id); });
  }
  node->logTo(sandbox_log.handle());
  ops::NodeSupervisor supervisor(
      *store, local, [&local](const std::string& id) { return local.busy(id); }, cfg.node_name);
  metrics::Registry metrics;
  supervisor.setMetrics(metrics);
  node->addMetrics(metrics);
  runBlocking(io, supervisor.start());
  node->afterRecovery();
  node->startPools();
  Heartbeats beats(io, cfg, *store, *node, *volumes, supervisor, catalogue, served);
  beats.start(io);

  NodeListeners listeners(io, cfg, *store, *node, *volumes, served, metrics, beats);
  // After the listeners: destroyed first, its TLS threads stopped before
  // the servers their connections reach.
  VESSEL_ASSIGN_OR_RETURN(auto tls, ListenerTls::create(cfg));
  VESSEL_TRY(listeners.listen(*tls));
  runUntilStopped(
      io, std::chrono::seconds(30),
      [&] {
        beats.cancel();
        listeners.close();
      },
      [&]() -> asio::awaitable<void> {
        (void)co_await supervisor.shutdown(node->settings().stop_vms_on_exit);
        node->stopGateway();
      },
      tls.get());
  return okStatus();
}

}  // namespace vessel::vesseld
