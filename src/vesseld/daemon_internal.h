#pragma once
// What vesseld's roles (daemon.cc: all; daemon_node.cc; daemon_api.cc)
// share of the composition root.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/config.h"
#include "base/fd.h"
#include "base/result.h"
#include "hypervisor/qemu/qemu.h"
#include "node/network/egress.h"
#include "ops/lifecycle.h"
#include "store/store.h"

namespace vessel::vesseld {

// One vesseld per state directory (flock, released even on kill -9).
Result<Fd> lockStateDir(const std::string& dir);
std::string randomId();
std::string gatewayBinary(const Config& cfg);
Result<std::optional<hypervisor::qemu::JailOptions>> jailOptions(const Config& cfg,
                                                                 const std::string& prefix);
Result<std::unique_ptr<store::Store>> openStore(const Config& cfg);
// The egress gateway and its slots as --egress-* configure them, under
// `slot_prefix` (derived from the state dir, so two vesselds on one host
// never share a namespace). Only when cfg.egress.
Result<std::unique_ptr<node::network::Egress>> startEgress(boost::asio::io_context& io,
                                                           const Config& cfg,
                                                           const std::string& slot_prefix);
// Lifetimes and tenant quotas as configured: what every role that runs a
// Lifecycle sets (the node-local disk checks are the caller's to add).
ops::Policy lifecyclePolicy(const Config& cfg);

// Runs `io` until SIGINT or SIGTERM, then: `close` (stop taking requests),
// then `wind_down` (a coroutine: stop or leave the VMs, the gateway), then
// the io context stops. The whole shutdown is bounded by `bound`, after which
// the io context stops whatever is still running.
void runUntilStopped(boost::asio::io_context& io, std::chrono::seconds bound,
                     std::function<void()> close,
                     std::function<boost::asio::awaitable<void>()> wind_down);

// The roles of many machines (docs/design.md, "Many machines").
Status runNode(Config cfg);
Status runApi(Config cfg);

}  // namespace vessel::vesseld
