// vesseld --role=api: a stateless API replica. It serves the public API
// and the E2B REST API over the shared store, places sandboxes on nodes
// and reaches them over their node API (cluster/cluster_node.h). Replicas
// share state only through the store: events another replica stores wake
// this one's streams and waits by a short poll; each replica heartbeats
// into the store, and the unfinished operations of one whose heartbeat is
// too old are taken over by another (ops::Lifecycle::takeOver). The data
// plane is the nodes' own: a session names its sandbox's node's data URL.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>

#include "api/auth.h"
#include "api/control_plane.h"
#include "api/sessions.h"
#include "base/log.h"
#include "cluster/cluster_node.h"
#include "cluster/template_catalogue.h"
#include "e2b/access_token.h"
#include "e2b/envd/envd.h"
#include "e2b/rest.h"
#include "http/server.h"
#include "metrics/registry.h"
#include "ops/lifecycle.h"
#include "vesseld/daemon_internal.h"
#include "vesseld/egress_policies.h"
#include "vesseld/envd_forward.h"
#include "vesseld/probes.h"

namespace vessel::vesseld {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace vessel::api;

Status runApi(Config cfg) {
  Logger log("vesseld-api");
  // The state dir holds only this replica's files (dev key, E2B token key).
  std::error_code ec;
  fs::create_directories(cfg.state_dir, ec);
  VESSEL_ASSIGN_OR_RETURN(auto store, openStore(cfg));
  const std::string replica = "api-" + randomId();
  log.info("API replica {} (store {} schema v{})", replica, store::redactUrl(cfg.store),
           store->schemaVersion());
  VESSEL_ASSIGN_OR_RETURN(std::string dev_key, ensureDevTenant(*store, cfg.state_dir));
  if (!dev_key.empty()) {
    std::printf(
        "vesseld: development tenant 'dev' created; API key (also in %s/dev-api-key):\n%s\n",
        cfg.state_dir.c_str(), dev_key.c_str());
    std::fflush(stdout);
  }
  // Templates (shapes, sizes, defaults: for listings and admission) come
  // from the cluster's catalogue in the store, as the nodes registered
  // them: a replica has no template files, no QEMU and no guest kernel.
  cluster::StoreCatalogue catalogue(*store);
  templates::TemplateStore templates("", "", "");
  templates.useCatalogue(&catalogue);

  asio::io_context io;
  EgressPolicies network_reader(*store, nullptr, cfg.default_network);
  cluster::ClusterOptions co;
  co.token = cfg.node_token;
  co.lost_after = std::chrono::seconds(cfg.node_lost_after_s);
  co.network_of = [&](const std::string& id) { return network_reader.stored(id); };
  cluster::ClusterNode nodes(io, *store, co);
  ops::Lifecycle lifecycle(io, *store, nodes, templates);
  lifecycle.operations().setOwner(replica);
  ControlPlane control(io, *store, lifecycle, templates);
  metrics::Registry metrics;
  lifecycle.setMetrics(metrics);
  api::SessionOptions so;
  so.data_url = cfg.data_url;
  so.data_url_of = [&](const std::string& id) -> std::string {
    auto node = store->sandboxNode(id);
    if (!node.ok() || node->empty()) return "";
    auto all = store->listNodes();
    if (all.ok())
      for (const auto& n : *all)
        if (n.name == *node) return n.data_url;
    return "";
  };
  api::Sessions sessions(*store, so);
  control.setSessions(&sessions);

  ops::Policy policy = lifecyclePolicy(cfg);
  lifecycle.setPolicy(policy);
  nodes.start();

  // This replica's heartbeat, the poll that wakes streams for events other
  // replicas stored, and the take-over of replicas that went silent.
  asio::steady_timer tick(io);
  const int64_t lost_after_ms = cfg.node_lost_after_s * 1000;
  bool store_ok = store->heartbeatReplica(replica).ok();
  // The reaper runs on one replica only: the live one (heartbeat within
  // --node-lost-after) with the smallest id, so two never start deleting
  // the same expired sandbox. A replica begins only after two seconds of
  // heartbeats: every other replica re-reads the table each second, so the
  // one that reaped before it has seen it by then and stopped. When the
  // reaping replica dies, the next one takes over once its heartbeat is
  // older than the bound.
  bool reaping = false;
  const auto started = std::chrono::steady_clock::now();
  auto reapTurn = [&] {
    bool was = reaping;
    auto live = store->listLiveReplicas(store::nowMs() - lost_after_ms);
    reaping = store_ok && live.ok() && !live->empty() && live->front() == replica &&
              std::chrono::steady_clock::now() - started >= std::chrono::seconds(2);
    if (reaping && !was) log.info("this replica runs the reaper now");
    if (!reaping && was) log.info("this replica no longer runs the reaper");
    if (reaping) lifecycle.reapOnce();
  };
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0;; ++i) {
          tick.expires_after(std::chrono::milliseconds(250));
          boost::system::error_code wec;
          co_await tick.async_wait(asio::redirect_error(asio::use_awaitable, wec));
          if (wec) co_return;
          lifecycle.operations().wakeAll();
          if (i % 4 != 0) continue;
          store_ok = store->heartbeatReplica(replica).ok();
          reapTurn();
          auto stale = store->listStaleReplicas(store::nowMs() - lost_after_ms);
          if (!stale.ok()) continue;
          for (const auto& other : *stale) {
            if (other == replica) continue;
            auto ops = store->claimOperations(other, replica);
            if (!ops.ok()) continue;
            if (!ops->empty())
              log.warn("API replica {} went silent: taking over {} operation(s)", other,
                       ops->size());
            co_await lifecycle.takeOver(std::move(*ops));
            (void)store->deleteReplica(other);
          }
        }
      },
      asio::detached);

  HttpServer server(io);
  server.setMetrics(metrics, "control");
  control.install(server);
  server.route(http::verb::get, "/metrics", [&](const Request& req) -> asio::awaitable<Response> {
    Response res{http::status::ok, req.version()};
    res.set(http::field::content_type, metrics::kContentType);
    res.keep_alive(req.keep_alive());
    res.body() = metrics.render();
    res.prepare_payload();
    co_return res;
  });
  auto ready = [&](json::object& o) {
    auto all = store->listNodes();
    int64_t live = 0;
    if (all.ok())
      for (const auto& n : *all)
        live += !n.lost && n.heartbeat_ms >= store::nowMs() - lost_after_ms;
    o["store"] = all.ok();
    o["live_nodes"] = live;
    o["replica"] = replica;
    o["reaper"] = reaping;
    return all.ok() && store_ok;
  };
  server.route(http::verb::get, "/healthz", [&](const Request& req) -> asio::awaitable<Response> {
    json::object o{{"version", VESSEL_VERSION}, {"store", std::string(store->engine())}};
    bool ok = ready(o);
    o["status"] = ok ? "ok" : "unhealthy";
    co_return jsonResponse(req, ok ? http::status::ok : http::status::service_unavailable,
                           json::serialize(o));
  });
  installProbes(server, "api", ready);
  VESSEL_TRY(server.listen(cfg.listen_addr));
  log.info("listening on http://{}:{}", cfg.listen_addr.host, server.port());
  // The envd access tokens' key is the cluster's, in the store: a node
  // checks the tokens any replica hands out.
  VESSEL_ASSIGN_OR_RETURN(e2b::AccessTokens envd_tokens, e2b::AccessTokens::fromStore(*store));
  e2b::RestApi e2b_rest(
      lifecycle, [&store](std::string_view key) { return api::tenantForKey(key, *store); },
      templates, envd_tokens);
  HttpServer e2b_server(io);
  e2b_rest.install(e2b_server);
  if (cfg.e2b_listen_addr) {
    VESSEL_TRY(e2b_server.listen(*cfg.e2b_listen_addr));
    log.info("E2B REST API on http://{}:{}", cfg.e2b_listen_addr->host, e2b_server.port());
  }

  // E2B envd: each request forwarded to its sandbox's node (envd_forward.h).
  e2b::envd::Sandboxes no_agents;
  no_agents.agent_of = [](const std::string&) { return nullptr; };
  no_agents.live_ids = [] { return std::vector<std::string>{}; };
  e2b::envd::Envd envd_here(io, std::move(no_agents), envd_tokens);
  EnvdForwarder envd_forward(*store, envd_tokens, std::chrono::seconds(cfg.node_lost_after_s));
  HttpServer envd_server(io, ServerLimits{16 * 1024, 64u << 20, std::chrono::seconds(60)});
  envd_server.setMetrics(metrics, "e2b-envd");
  envd_here.install(envd_server);
  envd_server.forwardWhen(
      [&](const http::request_header<>& head) { return envd_forward.choose(head); });
  if (cfg.e2b_envd_listen_addr) {
    VESSEL_TRY(envd_server.listen(*cfg.e2b_envd_listen_addr));
    log.info("E2B envd on http://{}:{} (E2B_SANDBOX_URL; forwarded to the sandboxes' nodes)",
             cfg.e2b_envd_listen_addr->host, envd_server.port());
  }

  runUntilStopped(
      io, std::chrono::seconds(10),
      [&] {
        tick.cancel();
        server.close();
        e2b_server.close();
        envd_server.close();
      },
      [&]() -> asio::awaitable<void> { co_await lifecycle.shutdown(false); });
  return okStatus();
}

}  // namespace vessel::vesseld
