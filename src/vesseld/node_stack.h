#pragma once
// The node stack: everything that runs sandboxes on this host — the
// machine (hypervisor, accelerator, the minimal template), the template
// store, the egress gateway and its slots, the runtime with its warm pools,
// and the LocalNode over them (ops::Node). Built by one function for
// --role=all and --role=node alike, from nodeSettings(cfg).
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/object.hpp>
#include <memory>

#include "base/result.h"
#include "metrics/registry.h"
#include "node/network/egress.h"
#include "node/runtime.h"
#include "store/store.h"
#include "templates/store.h"
#include "vesseld/egress_log.h"
#include "vesseld/egress_policies.h"
#include "vesseld/gateway_stats.h"
#include "vesseld/local_node.h"
#include "vesseld/machine.h"
#include "vesseld/settings.h"

namespace vessel::vesseld {

class NodeStack {
 public:
  // The machine named by s.hypervisor in `machines` (unknown: an error
  // naming the ones this binary has).
  static Result<std::unique_ptr<NodeStack>> build(boost::asio::io_context& io, NodeSettings s,
                                                  store::Store& store, const Machines& machines);
  ~NodeStack();

  LocalNode& local() { return *local_; }
  templates::TemplateStore& templates() { return *templates_; }
  node::Runtime& runtime() { return *runtime_; }
  node::network::Egress* egress() { return egress_.get(); }
  const Machine& machine() const { return machine_; }
  const NodeSettings& settings() const { return s_; }
  // This node's capacity and load as a node reports itself: the host's
  // memory and what its VMs hold, vCPUs, sandboxes, templates and
  // accelerator (a cluster node's heartbeat; GET /v1/nodes on one
  // machine). Names and URLs are the caller's.
  store::NodeRecord describe();

  // After the sandboxes an earlier vesseld left were taken over: the jails
  // of VMs that died unwatched go, and the network slots no survivor holds.
  void afterRecovery();
  // Warm pools fill in the background; creates work (slower) meanwhile.
  void startPools();
  // Warm pool and gateway metrics into `r` (which outlives this stack).
  void addMetrics(metrics::Registry& r);
  // Before a scrape: the gateway's counters, read off the io thread.
  boost::asio::awaitable<void> refreshMetrics();
  // The gateway's health; false when a dead gateway could not be restarted.
  bool gatewayHealthy() const { return !egress_ || egress_->healthy(); }
  boost::json::object gatewayHealth() const;
  // What stands between a guest and this host (/healthz "isolation").
  boost::json::object isolation() const;
  // The sandboxes' logs: their consoles (LocalNode) and the gateway's
  // decisions for them (EgressLog), while `log` lives.
  void logTo(std::shared_ptr<ops::SandboxLog*> log);
  // A clean stop's last step (after the VMs were stopped or left).
  void stopGateway() {
    if (egress_) egress_->stop();
  }

 private:
  NodeStack(NodeSettings s, Machine m) : s_(std::move(s)), machine_(std::move(m)) {}

  NodeSettings s_;
  Machine machine_;
  boost::asio::io_context* io_ = nullptr;
  std::unique_ptr<templates::TemplateStore> templates_;
  std::unique_ptr<node::network::Egress> egress_;
  std::unique_ptr<EgressPolicies> network_;
  std::unique_ptr<node::Runtime> runtime_;
  std::unique_ptr<LocalNode> local_;
  std::unique_ptr<GatewayStats> gateway_stats_;
  std::unique_ptr<EgressLog> egress_log_;
};

}  // namespace vessel::vesseld
