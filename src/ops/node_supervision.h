#pragma once
// A cluster node's side of sandboxes that change without a request
// (vesseld --role=node): at start it takes over what the store places on
// it, a VM it loses fails its sandbox, after a heartbeat gap it destroys
// the VMs the store no longer places on it, and a clean stop that stops
// VMs fails their sandboxes. What happens to each sandbox is decided by
// decideNodeStep, a pure function tested row by row
// (node_supervision_test.cc), and carried out through the operation log
// (a sandbox.state event with every stored change), as Lifecycle does on
// one machine (ops/recovery.h).
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "metrics/registry.h"
#include "ops/node.h"
#include "ops/operation_log.h"
#include "ops/state_machine.h"
#include "store/store.h"

namespace vessel::ops {

// Why the node looks at a sandbox.
enum class NodeEvent {
  kStart,    // the node started and adopted what it could
  kResync,   // heartbeats got through again after a gap, or the periodic check
  kLost,     // its VM exited or its agent failed without anyone asking
  kStopped,  // a clean stop (--stop-vms-on-exit) stopped its VM
};

struct NodeStep {
  enum class Kind {
    kNothing,  // leave it: the store and the node agree, or a call in flight decides
    kKeep,     // the node keeps what it holds (its files survive discardOrphans)
    kFail,     // the sandbox is failed with `why`
    kDestroy,  // the node destroys what it holds of it
  };
  Kind kind = Kind::kNothing;
  std::string why;
  bool operator==(const NodeStep&) const = default;
};

// `placed`: the stored state when the store places the sandbox on this
// node and it is neither failed nor deleted (for kLost: any live stored
// state); nullopt otherwise. `holding`: what the node holds of it now.
// `busy`: a node call for it (create, pause, resume, fork, destroy) is in
// flight, whose caller settles it. `node`: this node's name, `reason`:
// why it was lost (kLost).
NodeStep decideNodeStep(NodeEvent ev, std::optional<SandboxState> placed, Holding holding,
                        bool busy, std::string_view node, std::string_view reason = "");

class NodeSupervisor {
 public:
  // `busy(id)`: a call for the sandbox (create, pause, resume, fork,
  // destroy, adopt) is in flight on the node, whose caller settles it.
  using Busy = std::function<bool(const std::string& id)>;
  NodeSupervisor(store::Store& store, Node& node, Busy busy, std::string node_name,
                 const WallClock& clock = systemWallClock());
  ~NodeSupervisor();
  NodeSupervisor(const NodeSupervisor&) = delete;
  NodeSupervisor& operator=(const NodeSupervisor&) = delete;

  // vessel_sandboxes_lost_total and the operation log's metrics go to `r`.
  void setMetrics(metrics::Registry& r);

  // At start: adopts what the store places here, fails what it could not
  // take over, and removes leftovers no kept sandbox owns. Returns how many
  // it took over.
  asio::awaitable<int> start();
  // After a heartbeat gap (and now and then): of the sandboxes the node
  // holds (`held`, by id), destroys those the store no longer places here.
  // Returns how many it destroyed.
  asio::awaitable<int> resync(std::vector<std::string> held);
  // A clean stop: the node leaves its VMs for the next vesseld, or stops
  // them (`stop_vms`), failing their sandboxes; returns how many it failed.
  asio::awaitable<int> shutdown(bool stop_vms);

 private:
  void lost(const std::string& tenant, const std::string& id, const std::string& reason);
  std::optional<SandboxState> liveState(const std::string& tenant, const std::string& id);

  store::Store& store_;
  Node& node_;
  Busy busy_;
  std::string name_;
  OperationLog log_;
  metrics::Family<metrics::Counter>* lost_ = nullptr;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace vessel::ops
