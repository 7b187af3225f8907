#include "api/daemon.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/signal_set.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <random>

#include "api/http_server.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/run_blocking.h"
#include "hypervisor/qemu/qemu.h"
#include "node/accel.h"
#include "store/store.h"

namespace vessel::api {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

// One vesseld per state directory: a second one would adopt and reap the
// first one's machines. The lock dies with the process, even on kill -9.
Result<Fd> lockStateDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error(Code::kUnavailable, "create state dir " + dir + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  VESSEL_ASSIGN_OR_RETURN(Fd fd, Fd::open(dir + "/vesseld.lock", O_RDWR | O_CREAT, 0600));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      return Error(Code::kAlreadyExists, "another vesseld is using state dir " + dir);
    return Error::fromErrno("lock state dir " + dir);
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

}  // namespace

Status runDaemon(Config cfg) {
  Logger log("vesseld");
  VESSEL_ASSIGN_OR_RETURN(Fd lock, lockStateDir(cfg.state_dir));
  VESSEL_ASSIGN_OR_RETURN(auto store, store::openSqlite(cfg.state_dir + "/vessel.db"));
  auto instance = store->getMeta("instance_id");
  if (!instance.ok()) return std::move(instance).error();
  if (!instance->has_value()) VESSEL_TRY(store->setMeta("instance_id", randomId()));
  std::string instance_id = store->getMeta("instance_id")->value_or("");
  log.info("state dir {} (store {} schema v{}, instance {})", cfg.state_dir, store->engine(),
           store->schemaVersion(), instance_id);

  VESSEL_ASSIGN_OR_RETURN(std::string qemu_version, hypervisor::qemu::qemuVersion(cfg.qemu_binary));
  asio::io_context io;
  hypervisor::qemu::QemuHypervisor hv({cfg.qemu_binary});
  std::string run_root = cfg.state_dir + "/run";
  std::error_code ec;
  fs::create_directories(run_root, ec);
  // A probe left over from a crashed start must not block this one.
  fs::remove_all(run_root + "/accel-probe", ec);
  node::ProbeInputs probe{
      cfg.kernel,    cfg.minimal_image, "init=/sbin/vessel-agent", run_root + "/accel-probe",
      cfg.cache_dir, qemu_version};
  auto accel = runBlocking(io, node::chooseAccel(cfg.accel, hv, probe));
  if (!accel.ok()) return std::move(accel).error();
  log.info("hypervisor qemu ({}), acceleration {}: {}", qemu_version,
           hypervisor::accelName(accel->accel), accel->reason);

  HttpServer server(io);
  server.route(http::verb::get, "/healthz", [&](const Request& req) -> asio::awaitable<Response> {
    json::object o{{"status", "ok"},
                   {"version", VESSEL_VERSION},
                   {"instance_id", instance_id},
                   {"hypervisor", "qemu"},
                   {"hypervisor_version", qemu_version},
                   {"accel", std::string(hypervisor::accelName(accel->accel))},
                   {"accel_requested", std::string(accelModeName(cfg.accel))},
                   {"accel_reason", accel->reason},
                   {"accel_fallback",
                    cfg.accel == AccelMode::kAuto && accel->accel == hypervisor::Accel::kTcg},
                   {"store", std::string(store->engine())},
                   {"state_dir", cfg.state_dir}};
    co_return jsonResponse(req, http::status::ok, json::serialize(o));
  });
  VESSEL_TRY(server.listen(cfg.listen_addr));
  log.info("listening on http://{}:{}", cfg.listen_addr.host, server.port());

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](auto, int sig) {
    log.info("signal {}: shutting down", sig);
    server.close();
    io.stop();
  });
  io.run();
  log.info("stopped");
  return okStatus();
}

}  // namespace vessel::api
