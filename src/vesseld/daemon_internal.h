#pragma once
// What vesseld's roles (daemon.cc: all; daemon_node.cc; daemon_api.cc)
// share of the composition root.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/fd.h"
#include "base/result.h"
#include "store/store.h"
#include "vesseld/config.h"
#include "vesseld/listener_tls.h"
#include "vesseld/machine.h"

namespace vessel::vesseld {

// One vesseld per state directory (flock, released even on kill -9).
Result<Fd> lockStateDir(const std::string& dir);
std::string randomId();
Result<std::unique_ptr<store::Store>> openStore(const Config& cfg);

// Runs `io` until SIGINT or SIGTERM, then: `close` (stop taking requests),
// then `wind_down` (a coroutine: stop or leave the VMs, the gateway), then
// the io context stops. The whole shutdown is bounded by `bound`, after which
// the io context stops whatever is still running. SIGHUP re-reads the TLS
// certificate (`tls`, may be null) and goes on.
void runUntilStopped(boost::asio::io_context& io, std::chrono::seconds bound,
                     std::function<void()> close,
                     std::function<boost::asio::awaitable<void>()> wind_down, ListenerTls* tls);

// The roles (docs/design.md, "Many machines").
Status runAll(Config cfg, const Machines& machines);
Status runNode(Config cfg, const Machines& machines);
Status runApi(Config cfg);

}  // namespace vessel::vesseld
