#pragma once
// ops::Node for an API replica (vesseld --role=api): many nodes behind the
// one interface the lifecycle knows. A create is placed on a node (by free
// memory, preferring nodes that have the template) and the node is
// recorded on the sandbox before it is asked; every other call goes to the
// sandbox's recorded node through its node API (cluster/remote_node.h).
//
// Loss: nodes heartbeat into the store (vesseld's node role). A sweeper
// here, every second, finds nodes whose last heartbeat is older than
// `lost_after`: their calls in flight from this replica are failed at once,
// creates go elsewhere, and the replica that marks the node lost in the
// store (one does) reports each of its sandboxes lost to the lifecycle
// ("node <name> lost"), which fails them. The node reconciles itself when
// it returns (vesseld's node role destroys what the store no longer wants).
//
// Usage and changing a sandbox's network go to its node (the node measures
// and owns the gateway registration). Templates: a build goes to a node
// placed as a create is, a fork into a template to the sandbox's node
// (cluster_node_templates.cc). The data plane and envd are the node's own
// (sessions hand out the node's data URL, the envd listener forwards), so
// agent() is null here.
// Used from the io thread only.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/catalogue_signature.h"
#include "cluster/node_tokens.h"
#include "cluster/remote_node.h"
#include "ops/node.h"
#include "store/store.h"

namespace vessel::cluster {

struct ClusterOptions {
  NodeTokens tokens;  // each node's token (or the one shared token)
  // Nodes advertised at https:// URLs are verified with this client context
  // (vesseld --node-ca-file; http/tls_client.h).
  std::shared_ptr<asio::ssl::context> tls;
  // Signs the catalogue entry of each template a node builds or forks into
  // for this replica (catalogue_signature.h); null: entries stay unsigned.
  const CatalogueSigner* signer = nullptr;
  std::chrono::milliseconds lost_after{15000};
  std::chrono::milliseconds sweep_every{1000};
  // Calls that wait on a guest (create, resume, fork, pause) and the others.
  std::chrono::milliseconds long_call{180000};
  std::chrono::milliseconds short_call{15000};
  // A sandbox's stored network settings (read from the store; no gateway here).
  std::function<Result<ops::NetworkSpec>(const std::string& id)> network_of;
};

// The order in which a create of `template_name` (needing `memory_mib`)
// tries the nodes: live ones only (not lost, heartbeat newer than
// `lost_after` at `now_ms`), those that have the template first, then the
// most free memory (minus `placed`: memory this replica placed on a node
// that its heartbeat does not count yet), then the fewest sandboxes, then
// by name.
// Nodes without room for `memory_mib` come last.
std::vector<std::string> rankNodes(const std::vector<store::NodeRecord>& nodes,
                                   const std::string& template_name, uint64_t memory_mib,
                                   int64_t now_ms, std::chrono::milliseconds lost_after,
                                   const std::map<std::string, uint64_t>& placed);

// The order in which a new volume of `size_mib` tries the nodes: live ones
// that keep volumes (volume_free_mib > 0), those with `size_mib` free
// first, then the most free, then the fewest sandboxes, then by name.
std::vector<std::string> rankVolumeNodes(const std::vector<store::NodeRecord>& nodes,
                                         uint64_t size_mib, int64_t now_ms,
                                         std::chrono::milliseconds lost_after);

class ClusterNode final : public ops::Node {
 public:
  ClusterNode(asio::io_context& io, store::Store& store, ClusterOptions o)
      : io_(io), store_(store), opts_(std::move(o)) {}
  ~ClusterNode() override;

  // Starts the sweeper (node loss); stopped by shutdown().
  void start();

  // What lives on a node besides sandboxes (its volumes,
  // cluster_volumes.h): the client of node `name` while it is live;
  // kUnavailable naming it when it is lost or unknown.
  Result<RemoteNode*> liveNode(const std::string& name);
  // The client of the node sandbox `id` runs on (route()).
  Result<RemoteNode*> nodeOf(const std::string& id) { return route(id); }
  // The node a new volume of `size_mib` goes to (rankVolumeNodes, among
  // those this replica holds a token for).
  Result<std::string> placeVolume(uint64_t size_mib);
  const ClusterOptions& options() const { return opts_; }
  asio::io_context& ioContext() { return io_; }
  // One sweep (tests): returns the nodes this call marked lost.
  std::vector<std::string> sweepOnce();

  void onLost(LostHandler h) override { lost_ = std::move(h); }
  Status prepareNetwork(const std::string& tenant, const std::string& id,
                        const std::optional<ops::NetworkSpec>& spec) override;
  Status inheritNetwork(const std::string& parent, const std::string& child) override;
  asio::awaitable<Result<ops::NetworkSpec>> updateNetwork(std::string tenant, std::string id,
                                                          ops::NetworkSpec spec) override;
  Result<ops::NetworkSpec> network(const std::string& id) override;
  asio::awaitable<void> credentialChanged(std::string tenant, std::string name) override;
  asio::awaitable<Status> create(ops::NodeCreate c) override;
  asio::awaitable<Status> pause(std::string id, bool keep_memory) override;
  asio::awaitable<Status> resume(std::string tenant, std::string id) override;
  asio::awaitable<Result<std::vector<Status>>> fork(std::string tenant, std::string id,
                                                    std::vector<std::string> copies) override;
  asio::awaitable<Result<templates::Manifest>> forkToTemplate(std::string id,
                                                              std::string stored_name) override;
  Status build(ops::BuildRequest req, ops::BuildCallbacks cb) override;
  asio::awaitable<Status> destroy(std::string id) override;
  void abort(const std::string& id) override;
  ops::Holding holding(const std::string& id) const override;
  asio::awaitable<Result<ops::Usage>> usage(std::string id) override;
  std::shared_ptr<agentclient::AgentClient> agent(const std::string&) override { return nullptr; }
  asio::awaitable<Result<ops::Holding>> adopt(std::string tenant, std::string id) override;
  asio::awaitable<int> discardOrphans(std::set<std::string>) override { co_return 0; }
  asio::awaitable<std::vector<std::string>> shutdown(bool stop_vms) override;

 private:
  // The node's client, made or updated from its registry record.
  RemoteNode& remote(const store::NodeRecord& n);
  // The answered manifest, once its catalogue entry is signed (with a signer).
  Result<templates::Manifest> signedManifest(const NodeReply& r, const std::string& node,
                                             const std::string& tenant);
  // `order` without the nodes this replica has no token for.
  std::vector<std::string> withToken(std::vector<std::string> order) const;
  // The sandbox's node and its client; kUnavailable when it is lost or
  // unknown, kNotFound when the sandbox has no node.
  Result<RemoteNode*> route(const std::string& id);
  // Runs `call` on the sandbox's node and remembers what it holds after.
  asio::awaitable<Result<NodeReply>> callFor(const std::string& id, std::string call, NodeCall c,
                                             std::chrono::milliseconds timeout);
  // Seals the sandbox's credentials `names` for `node` before that node is
  // asked to run it (credential_share.h).
  Status share(const std::string& tenant, const std::string& id, const std::string& node,
               const std::vector<std::string>& names);
  // The credential names the sandbox's stored settings carry.
  std::vector<std::string> credentialsOf(const std::string& id);
  asio::awaitable<void> sweepLoop();
  bool stale(const store::NodeRecord& n, int64_t now_ms) const;

  asio::io_context& io_;
  store::Store& store_;
  ClusterOptions opts_;
  LostHandler lost_;
  std::map<std::string, std::unique_ptr<RemoteNode>> remotes_;  // by node name
  std::map<std::string, store::NodeRecord> nodes_;              // as last read
  std::map<std::string, std::string> node_of_;                  // sandbox -> node
  std::map<std::string, ops::Holding> holding_;                 // as last answered
  std::map<std::string, std::optional<ops::NetworkSpec>> pending_net_;
  // Creates placed on each node that its heartbeat may not count yet, so a
  // burst of creates spreads before the nodes report them: one in flight
  // (answered_ms 0) or answered after the node's last heartbeat was taken.
  // A heartbeat taken after the answer counts the sandbox itself; one
  // taken while the create ran does not, so a heartbeat alone never
  // clears a placement (that let two creates of a burst land on one node).
  // The two times come from two clocks: a node whose clock runs behind
  // the replica's keeps its entries longer (over-counted, never lost).
  struct Placement {
    uint64_t memory_mib = 0;
    int64_t answered_ms = 0;
  };
  std::map<std::string, std::map<std::string, Placement>> placements_;  // node -> sandbox
  // Drops what `nodes`' heartbeats count; memory still placed per node.
  std::map<std::string, uint64_t> placedSinceHeartbeat(const std::vector<store::NodeRecord>& nodes);
  void unplace(const std::string& node, const std::string& id) { placements_[node].erase(id); }
  std::shared_ptr<asio::steady_timer> timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace vessel::cluster
