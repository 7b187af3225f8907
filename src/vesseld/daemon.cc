// vesseld --role=all: the API stack over this machine's node stack, with
// the node's data plane. The other roles: daemon_node.cc, daemon_api.cc.
#include "vesseld/daemon.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <random>

#include "api/data_plane.h"
#include "base/aead.h"
#include "base/log.h"
#include "base/run_blocking.h"
#include "http/server.h"
#include "vesseld/api_stack.h"
#include "vesseld/command_log.h"
#include "vesseld/daemon_internal.h"
#include "vesseld/node_stack.h"

namespace vessel::vesseld {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;

void runUntilStopped(asio::io_context& io, std::chrono::seconds bound, std::function<void()> close,
                     std::function<asio::awaitable<void>()> wind_down, ListenerTls* tls) {
  Logger log("vesseld");
  asio::signal_set signals(io, SIGINT, SIGTERM);
  // SIGHUP (whose default would end the process): the TLS pair again.
  asio::signal_set hup(io, SIGHUP);
  std::function<void()> on_hup = [&] {
    hup.async_wait([&](boost::system::error_code ec, int) {
      if (ec) return;
      if (tls) (void)tls->reload();
      on_hup();
    });
  };
  on_hup();
  asio::steady_timer deadline(io);
  signals.async_wait([&](auto, int sig) {
    log.info("signal {}: shutting down", sig);
    boost::system::error_code ec;
    hup.cancel(ec);
    close();
    deadline.expires_after(bound);
    deadline.async_wait([&](auto ec) {
      if (!ec) io.stop();
    });
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await wind_down();
          io.stop();
        },
        asio::detached);
  });
  io.run();
  log.info("stopped");
}

namespace {

// The state directory, made if missing, readable by root alone.
Status makeStateDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error(Code::kUnavailable, "create state dir " + dir + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  return okStatus();
}

}  // namespace

// One vesseld per state directory: a second one would adopt and reap the
// first one's machines. The lock dies with the process, even on kill -9.
Result<Fd> lockStateDir(const std::string& dir) {
  VESSEL_TRY(makeStateDir(dir));
  VESSEL_ASSIGN_OR_RETURN(Fd fd, Fd::open(dir + "/vesseld.lock", O_RDWR | O_CREAT, 0600));
  // A vesseld killed in the middle of a fork leaves a child that holds the
  // lock until it execs or dies (a moment): waited for, briefly, so a
  // restart right after a kill -9 is not refused by its own ghost.
  for (int tries = 0;; ++tries) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) break;
    if (errno != EWOULDBLOCK) return Error::fromErrno("lock state dir " + dir);
    if (tries == 30)
      return Error(Code::kAlreadyExists, "another vesseld is using state dir " + dir);
    ::usleep(100 * 1000);
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  (void)!::ftruncate(fd.get(), 0);
  (void)!::pwrite(fd.get(), pid.data(), pid.size(), 0);
  return fd;
}

std::string randomId() {
  std::random_device rd;
  std::string s;
  static const char* k = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) s.push_back(k[rd() & 15]);
  return s;
}

// The one place that names the concrete stores: everything else sees
// store::Store.
Result<std::unique_ptr<store::Store>> openStore(const Config& cfg) {
  std::unique_ptr<store::Store> store;
  if (cfg.store == "sqlite") {
    VESSEL_ASSIGN_OR_RETURN(store, store::openSqlite(cfg.state_dir + "/vessel.db"));
  } else {
    VESSEL_ASSIGN_OR_RETURN(store, store::openPostgres(cfg.store));
  }
  // Credential values are sealed at rest under a key only the API side
  // holds; a node has none (it reads what a replica sealed for it).
  if (cfg.role != Role::kNode) {
    std::string file = cfg.credential_key_file;
    if (file.empty()) {
      // The default key sits in the state directory, which an API
      // replica (no state-dir lock) may not have made yet.
      VESSEL_TRY(makeStateDir(cfg.state_dir));
      file = cfg.state_dir + "/credential-key";
    }
    VESSEL_ASSIGN_OR_RETURN(std::string key, aeadKeyFile(file));
    VESSEL_ASSIGN_OR_RETURN(int sealed, store->useCredentialKey(std::move(key)));
    if (sealed > 0)
      Logger("vesseld").info("sealed {} credential value(s) stored in plain text before", sealed);
  }
  return store;
}

Status runDaemon(Config cfg, const Machines& machines) {
  switch (cfg.role) {
    case Role::kNode: return runNode(std::move(cfg), machines);
    case Role::kApi: return runApi(std::move(cfg));
    case Role::kAll: break;
  }
  return runAll(std::move(cfg), machines);
}

namespace {

// This installation's id, made on its first start.
Result<std::string> instanceId(store::Store& store) {
  auto instance = store.getMeta("instance_id");
  if (!instance.ok()) return std::move(instance).error();
  if (!instance->has_value()) VESSEL_TRY(store.setMeta("instance_id", randomId()));
  return store.getMeta("instance_id")->value_or("");
}

// GET /healthz on one machine: the node's hypervisor, accelerator and
// isolation said plainly, and the gateway (a dead one that could not be
// restarted makes the node unhealthy: its sandboxes have no network).
std::pair<json::object, bool> allHealth(const Config& cfg, NodeStack& node, store::Store& store,
                                        const std::string& instance_id) {
  const Machine& m = node.machine();
  json::object o{
      {"status", "ok"},
      {"version", VESSEL_VERSION},
      {"instance_id", instance_id},
      {"hypervisor", m.name},
      {"hypervisor_version", m.version},
      {"accel", std::string(hypervisor::accelName(m.accel))},
      {"accel_requested", std::string(node::accelModeName(cfg.accel))},
      {"accel_reason", m.accel_reason},
      {"accel_fallback", cfg.accel == node::AccelMode::kAuto && m.accel == hypervisor::Accel::kTcg},
      {"isolation", node.isolation()},
      {"store", std::string(store.engine())},
      {"state_dir", cfg.state_dir},
      {"gateway", node.gatewayHealth()}};
  bool ok = node.gatewayHealthy();
  if (!ok) o["status"] = "unhealthy";
  return {std::move(o), ok};
}

}  // namespace

Status runAll(Config cfg, const Machines& machines) {
  Logger log("vesseld");
  VESSEL_ASSIGN_OR_RETURN(Fd lock, lockStateDir(cfg.state_dir));
  VESSEL_ASSIGN_OR_RETURN(auto store, openStore(cfg));
  VESSEL_ASSIGN_OR_RETURN(std::string instance_id, instanceId(*store));
  log.info("state dir {} (store {} {} schema v{}, instance {})", cfg.state_dir, store->engine(),
           cfg.store == "sqlite" ? cfg.state_dir + "/vessel.db" : store::redactUrl(cfg.store),
           store->schemaVersion(), instance_id);
  asio::io_context io;
  VESSEL_ASSIGN_OR_RETURN(auto node, NodeStack::build(io, nodeSettings(cfg), *store, machines));
  VESSEL_ASSIGN_OR_RETURN(auto api, ApiStack::build(io, apiSettings(cfg, true), *store,
                                                    node->local(), node->templates()));
  node->addMetrics(api->metrics());
  if (cfg.command_log) {
    node->local().setCommandLog([&slog = api->lifecycle().sandboxLog()](const std::string& id) {
      return commandLog(slog, id);
    });
  }
  node->logTo(api->lifecycle().sandboxLog().handle());
  // One machine is its only node, named as a cluster node would be.
  std::string node_name = cfg.node_name;
  if (char host[256] = {}; node_name.empty())
    node_name = ::gethostname(host, sizeof(host) - 1) == 0 && host[0] ? host : "local";
  api->control().setOperators(
      {cfg.operator_tenants.begin(), cfg.operator_tenants.end()},
      [n = node.get(), name = node_name] {
        store::NodeRecord r = n->describe();
        r.name = name;
        return Result<std::vector<store::NodeRecord>>(std::vector<store::NodeRecord>{r});
      });
  // Take over what an earlier vesseld left (running VMs, paused sandboxes,
  // operations in flight) before anyone can ask about it.
  runBlocking(io, api->lifecycle().recover());
  node->afterRecovery();
  api->lifecycle().reaper().start();
  node->startPools();

  api::DataPlane data(io, api->sessions(), api->control());
  http::HttpServer data_server(io);
  data_server.setMetrics(api->metrics(), "data");
  data.install(data_server);
  auto health = [&] { return allHealth(cfg, *node, *store, instance_id); };
  auto ready = [&](json::object& o) {
    bool store_ok = store->getMeta("instance_id").ok();
    o["store"] = store_ok;
    return store_ok;
  };
  // Declared last: destroyed first, its TLS threads stopped before the
  // servers and stacks their connections reach.
  VESSEL_ASSIGN_OR_RETURN(auto tls, ListenerTls::create(cfg));
  VESSEL_TRY(api->serve(
      health, ready, [&] { return node->refreshMetrics(); }, *tls));
  VESSEL_TRY(tls->serve(data_server, "data"));
  VESSEL_TRY(data_server.listen(cfg.data_listen_addr));
  log.info("data plane on {}://{}:{} (clients are told {})", tls->scheme("data"),
           cfg.data_listen_addr.host, data_server.port(), cfg.data_url);
  if (!tls->caPath().empty()) log.info("TLS CA certificate for clients: {}", tls->caPath());
  runUntilStopped(
      io, std::chrono::seconds(30),
      [&] {
        api->close();
        data_server.close();
      },
      [&]() -> asio::awaitable<void> {
        co_await api->lifecycle().shutdown(node->settings().stop_vms_on_exit);
        node->stopGateway();
      },
      tls.get());
  return okStatus();
}

}  // namespace vessel::vesseld
