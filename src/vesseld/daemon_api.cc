// vesseld --role=api: a stateless API replica. The API stack (api_stack.h)
// as in --role=all, over the cluster's nodes (cluster/cluster_node.h)
// instead of this machine's. Replicas share state only through the store:
// events another replica stores wake this one's streams and waits by a
// short poll; each replica heartbeats into the store, and the unfinished
// operations of one whose heartbeat is too old are taken over by another
// (ops::Lifecycle::takeOver). The data plane is the nodes' own: a session
// names its sandbox's node's data URL. Volumes are the nodes' too: each on
// one node, its calls sent there (cluster/cluster_volumes.h).
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "base/log.h"
#include "cluster/cluster_node.h"
#include "cluster/cluster_volumes.h"
#include "cluster/template_catalogue.h"
#include "http/tls_client.h"
#include "vesseld/api_stack.h"
#include "vesseld/daemon_internal.h"
#include "vesseld/egress_policies.h"

namespace vessel::vesseld {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// A replica's duties among the others: its heartbeat, the poll that wakes
// streams for events other replicas stored, the take-over of replicas that
// went silent, and the reaper, which runs on one replica only: the live
// one (heartbeat within --node-lost-after) with the smallest id, so two
// never start deleting the same expired sandbox. A replica begins only
// after two seconds of heartbeats: every other replica re-reads the table
// each second, so the one that reaped before it has seen it by then and
// stopped. When the reaping replica dies, the next one takes over once its
// heartbeat is older than the bound.
class ReplicaDuty {
 public:
  ReplicaDuty(asio::io_context& io, store::Store& store, ops::Lifecycle& lifecycle, std::string id,
              std::chrono::seconds lost_after)
      : store_(store),
        lifecycle_(lifecycle),
        id_(std::move(id)),
        lost_after_ms_(lost_after.count() * 1000),
        tick_(io) {
    lifecycle_.operations().setOwner(id_);
    store_ok_ = store_.heartbeatReplica(id_).ok();
  }
  void start(asio::io_context& io) { asio::co_spawn(io, loop(), asio::detached); }
  void cancel() { tick_.cancel(); }
  const std::string& id() const { return id_; }
  bool storeOk() const { return store_ok_; }
  bool reaping() const { return reaping_; }
  int64_t lostAfterMs() const { return lost_after_ms_; }

 private:
  void reapTurn() {
    Logger log("vesseld-api");
    bool was = reaping_;
    auto live = store_.listLiveReplicas(store::nowMs() - lost_after_ms_);
    reaping_ = store_ok_ && live.ok() && !live->empty() && live->front() == id_ &&
               std::chrono::steady_clock::now() - started_ >= std::chrono::seconds(2);
    if (reaping_ && !was) log.info("this replica runs the reaper now");
    if (!reaping_ && was) log.info("this replica no longer runs the reaper");
    if (reaping_) lifecycle_.reaper().reapOnce();
  }
  asio::awaitable<void> loop() {
    for (int i = 0;; ++i) {
      tick_.expires_after(std::chrono::milliseconds(250));
      boost::system::error_code ec;
      co_await tick_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      lifecycle_.operations().wakeAll();
      if (i % 4 != 0) continue;
      store_ok_ = store_.heartbeatReplica(id_).ok();
      reapTurn();
      auto stale = store_.listStaleReplicas(store::nowMs() - lost_after_ms_);
      if (!stale.ok()) continue;
      for (const auto& other : *stale) {
        if (other == id_) continue;
        auto ops = store_.claimOperations(other, id_);
        if (!ops.ok()) continue;
        if (!ops->empty())
          Logger("vesseld-api")
              .warn("API replica {} went silent: taking over {} operation(s)", other, ops->size());
        co_await lifecycle_.takeOver(std::move(*ops));
        (void)store_.deleteReplica(other);
      }
    }
  }

  store::Store& store_;
  ops::Lifecycle& lifecycle_;
  const std::string id_;
  const int64_t lost_after_ms_;
  asio::steady_timer tick_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  bool store_ok_ = false;
  bool reaping_ = false;
};

}  // namespace

Status runApi(Config cfg) {
  Logger log("vesseld-api");
  VESSEL_ASSIGN_OR_RETURN(auto store, openStore(cfg));
  const std::string replica = "api-" + randomId();
  log.info("API replica {} (store {} schema v{})", replica, store::redactUrl(cfg.store),
           store->schemaVersion());
  // Templates (shapes, sizes, defaults: for listings and admission) come
  // from the cluster's catalogue in the store, as the nodes registered
  // them: a replica has no template files, no QEMU and no guest kernel.
  cluster::StoreCatalogue catalogue(*store);
  templates::TemplateStore templates("", "", "");
  templates.useCatalogue(&catalogue);

  asio::io_context io;
  ApiSettings settings = apiSettings(cfg, false);
  EgressPolicies network_reader(*store, nullptr, settings.default_network);
  cluster::ClusterOptions co;
  co.tokens = cfg.node_tokens;
  // Nodes advertising https:// are verified with --node-ca-file.
  VESSEL_ASSIGN_OR_RETURN(co.tls, http::clientContext(cfg.node_ca_file));
  std::optional<cluster::CatalogueSigner> signer;
  if (!cfg.catalogue_key_file.empty()) {
    VESSEL_ASSIGN_OR_RETURN(auto s, cluster::CatalogueSigner::openFile(cfg.catalogue_key_file));
    log.info("template catalogue entries signed (public key {})", s.publicKeyHex());
    signer = std::move(s);
    co.signer = &*signer;
  }
  co.lost_after = settings.lost_after;
  co.network_of = [&](const std::string& id) { return network_reader.stored(id); };
  cluster::ClusterNode nodes(io, *store, co);
  // Volumes live on the nodes: kept and mounted there, reached through them.
  cluster::ClusterVolumes volumes(nodes);
  cluster::ClusterVolumeMounter mounts(nodes);
  VESSEL_ASSIGN_OR_RETURN(auto api, ApiStack::build(io, std::move(settings), *store, nodes,
                                                    templates, {&volumes, &mounts}));
  ReplicaDuty duty(io, *store, api->lifecycle(), replica, api->settings().lost_after);
  nodes.start();
  duty.start(io);

  auto ready = [&](json::object& o) {
    auto all = store->listNodes();
    int64_t live = 0;
    if (all.ok())
      for (const auto& n : *all)
        live += !n.lost && n.heartbeat_ms >= store::nowMs() - duty.lostAfterMs();
    o["store"] = all.ok();
    o["live_nodes"] = live;
    o["replica"] = duty.id();
    o["reaper"] = duty.reaping();
    return all.ok() && duty.storeOk();
  };
  auto health = [&] {
    json::object o{{"version", VESSEL_VERSION}, {"store", std::string(store->engine())}};
    bool ok = ready(o);
    o["status"] = ok ? "ok" : "unhealthy";
    return std::pair<json::object, bool>{std::move(o), ok};
  };
  VESSEL_ASSIGN_OR_RETURN(auto tls, ListenerTls::create(cfg));
  VESSEL_TRY(api->serve(health, ready, nullptr, *tls));
  if (!tls->caPath().empty()) log.info("TLS CA certificate for clients: {}", tls->caPath());
  runUntilStopped(
      io, std::chrono::seconds(10),
      [&] {
        duty.cancel();
        api->close();
      },
      [&]() -> asio::awaitable<void> { co_await api->lifecycle().shutdown(false); }, tls.get());
  return okStatus();
}

}  // namespace vessel::vesseld
