#include "ops/node_supervision.h"

#include <map>
#include <set>
#include <vector>

#include "base/log.h"

namespace vessel::ops {

namespace {

Logger nodeLog() { return Logger("node-supervision"); }

NodeStep nothing() { return {NodeStep::Kind::kNothing, ""}; }
NodeStep keep() { return {NodeStep::Kind::kKeep, ""}; }
NodeStep fail(std::string why) { return {NodeStep::Kind::kFail, std::move(why)}; }
NodeStep destroy(std::string why) { return {NodeStep::Kind::kDestroy, std::move(why)}; }

}  // namespace

NodeStep decideNodeStep(NodeEvent ev, std::optional<SandboxState> placed, Holding holding,
                        bool busy, std::string_view node, std::string_view reason) {
  const std::string name(node);
  switch (ev) {
    case NodeEvent::kStart:
      if (!placed) return holding == Holding::kNothing ? nothing() : destroy("not placed here");
      if (holding != Holding::kNothing) return keep();
      // A sandbox between states (creating, pausing, deleting) is its
      // operation's: the API replica running it settles it when the call
      // to this node fails.
      if (*placed == SandboxState::kRunning || *placed == SandboxState::kPaused)
        return fail("node " + name + " restarted and could not take it over");
      return nothing();
    case NodeEvent::kResync:
      if (holding == Holding::kNothing || busy) return nothing();
      if (!placed) return destroy("no longer placed on node " + name);
      return keep();
    case NodeEvent::kLost:
      // An operation in flight settles the sandbox itself when it ends.
      if (busy || !placed) return nothing();
      return fail(std::string(reason));
    case NodeEvent::kStopped:
      if (!placed) return nothing();
      return fail("node " + name + " stopped; the VM was stopped");
  }
  return nothing();
}

NodeSupervisor::NodeSupervisor(store::Store& store, Node& node, Busy busy, std::string node_name,
                               const WallClock& clock)
    : store_(store),
      node_(node),
      busy_(std::move(busy)),
      name_(std::move(node_name)),
      log_(store, clock) {
  node_.onLost([this, alive = std::weak_ptr<bool>(alive_)](
                   const std::string& tenant, const std::string& id, const std::string& why) {
    if (!alive.expired()) lost(tenant, id, why);
  });
}

NodeSupervisor::~NodeSupervisor() {
  alive_.reset();
  node_.onLost(nullptr);
}

void NodeSupervisor::setMetrics(metrics::Registry& r) {
  log_.setMetrics(r);
  // The same counter as Lifecycle's (--role=all): a dashboard reads one name.
  lost_ = &r.counter("vessel_sandboxes_lost_total",
                     "Running sandboxes failed because their VM exited or their agent channel "
                     "failed without anyone asking",
                     {});
}

std::optional<SandboxState> NodeSupervisor::liveState(const std::string& tenant,
                                                      const std::string& id) {
  auto sb = store_.getSandbox(tenant, id);
  if (!sb.ok() || !*sb) return std::nullopt;
  auto st = (*sb)->state;
  if (st == SandboxState::kFailed || st == SandboxState::kDeleted) return std::nullopt;
  return st;
}

void NodeSupervisor::lost(const std::string& tenant, const std::string& id,
                          const std::string& reason) {
  NodeStep step = decideNodeStep(NodeEvent::kLost, liveState(tenant, id), Holding::kNothing,
                                 busy_(id), name_, reason);
  if (step.kind != NodeStep::Kind::kFail) return;
  nodeLog().warn("sandbox {} lost: {}", id, reason);
  if (lost_) lost_->with({}).inc();
  log_.setSandbox(tenant, "", id, SandboxState::kFailed, step.why);
}

asio::awaitable<int> NodeSupervisor::start() {
  auto want = store_.listNodeSandboxes(name_);
  if (!want.ok()) {
    // Nothing is kept or removed: the next vesseld start (or a resync)
    // decides with a store that answers.
    nodeLog().warn("start: cannot read the store: {}", want.error().message());
    co_return 0;
  }
  std::set<std::string> kept;
  for (const auto& sb : *want) {
    auto h = co_await node_.adopt(sb.tenant_id, sb.id);
    Holding holding = h.ok() ? *h : Holding::kNothing;
    NodeStep step = decideNodeStep(NodeEvent::kStart, sb.state, holding, busy_(sb.id), name_);
    if (step.kind == NodeStep::Kind::kKeep) kept.insert(sb.id);
    if (step.kind == NodeStep::Kind::kFail)
      log_.setSandbox(sb.tenant_id, "", sb.id, SandboxState::kFailed, step.why);
  }
  int n = co_await node_.discardOrphans(kept);
  nodeLog().info("reconciled at start: {} sandbox(es) taken over, {} leftover(s) removed",
                 kept.size(), n);
  co_return static_cast<int>(kept.size());
}

asio::awaitable<int> NodeSupervisor::resync(std::vector<std::string> held) {
  auto want = store_.listNodeSandboxes(name_);
  if (!want.ok()) {
    nodeLog().warn("reconcile: {}", want.error().message());
    co_return 0;
  }
  std::map<std::string, SandboxState> placed;
  for (const auto& sb : *want) placed[sb.id] = sb.state;
  int destroyed = 0;
  for (const auto& id : held) {
    auto it = placed.find(id);
    std::optional<SandboxState> st;
    if (it != placed.end()) st = it->second;
    NodeStep step = decideNodeStep(NodeEvent::kResync, st, node_.holding(id), busy_(id), name_);
    if (step.kind != NodeStep::Kind::kDestroy) continue;
    nodeLog().info("reconcile: sandbox {}: {}; destroying it", id, step.why);
    if (auto s = co_await node_.destroy(id); !s.ok())
      nodeLog().warn("reconcile: destroy {}: {}", id, s.error().message());
    else
      ++destroyed;
  }
  co_return destroyed;
}

asio::awaitable<int> NodeSupervisor::shutdown(bool stop_vms) {
  auto stopped = co_await node_.shutdown(stop_vms);
  int failed = 0;
  if (stopped.empty()) co_return failed;
  auto want = store_.listNodeSandboxes(name_);
  std::map<std::string, store::SandboxRecord> placed;
  if (want.ok())
    for (auto& sb : *want) placed[sb.id] = sb;
  for (const auto& id : stopped) {
    auto it = placed.find(id);
    std::optional<SandboxState> st;
    if (it != placed.end()) st = it->second.state;
    NodeStep step = decideNodeStep(NodeEvent::kStopped, st, Holding::kNothing, false, name_);
    if (step.kind != NodeStep::Kind::kFail) continue;
    log_.setSandbox(it->second.tenant_id, "", id, SandboxState::kFailed, step.why);
    ++failed;
  }
  co_return failed;
}

}  // namespace vessel::ops
