// Volumes on many machines (cluster_volumes.h): placement of a new volume
// by free space, and each call on a volume or a sandbox's mounts sent to
// the node that holds them.
#include "cluster/cluster_volumes.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "base/log.h"

namespace vessel::cluster {

namespace {

Logger volumesLog() { return Logger("cluster"); }

// A listing of up to volumes::kMaxListEntries with long names.
constexpr size_t kMaxListReply = 64u << 20;

}  // namespace

std::vector<std::string> rankVolumeNodes(const std::vector<store::NodeRecord>& nodes,
                                         uint64_t size_mib, int64_t now_ms,
                                         std::chrono::milliseconds lost_after) {
  struct Key {
    bool no_room;
    int64_t neg_free, sandboxes;
    std::string name;
    auto tie() const { return std::tie(no_room, neg_free, sandboxes, name); }
  };
  std::vector<Key> keys;
  for (const auto& n : nodes) {
    if (n.lost || n.heartbeat_ms < now_ms - lost_after.count() || n.volume_free_mib == 0) continue;
    auto free = static_cast<int64_t>(n.volume_free_mib);
    keys.push_back({n.volume_free_mib < size_mib, -free, n.sandboxes, n.name});
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) { return a.tie() < b.tie(); });
  std::vector<std::string> out;
  for (const auto& k : keys) out.push_back(k.name);
  return out;
}

Result<RemoteNode*> ClusterNode::liveNode(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    VESSEL_ASSIGN_OR_RETURN(auto nodes, store_.listNodes());
    for (const auto& n : nodes) nodes_[n.name] = n;
    it = nodes_.find(name);
    if (it == nodes_.end()) return Error(Code::kUnavailable, "node " + name + " is not registered");
  }
  if (stale(it->second, store::nowMs())) return Error(Code::kUnavailable, "node " + name + " lost");
  if (opts_.tokens.forNode(name).empty())
    return Error(Code::kUnavailable, "this API replica holds no token for node " + name);
  return &remote(it->second);
}

Result<std::string> ClusterNode::placeVolume(uint64_t size_mib) {
  VESSEL_ASSIGN_OR_RETURN(auto nodes, store_.listNodes());
  for (const auto& n : nodes) nodes_[n.name] = n;
  auto order = withToken(rankVolumeNodes(nodes, size_mib, store::nowMs(), opts_.lost_after));
  if (order.empty())
    return Error(Code::kUnavailable,
                 "no live node keeps volumes (a node keeps them when it can mount them in "
                 "sandboxes: root, with vessel-volume-server)");
  return order.front();
}

Result<std::string> ClusterVolumes::place(uint64_t size_mib) {
  return nodes_.placeVolume(size_mib);
}

Result<RemoteNode*> ClusterVolumes::nodeFor(const store::VolumeRecord& v) {
  if (v.node.empty())
    return Error(Code::kUnavailable,
                 "volume " + v.name + " was made by a single-machine vesseld and is on no node");
  auto r = nodes_.liveNode(v.node);
  if (!r.ok())
    return Error(Code::kUnavailable, "volume " + v.name + " is on node " + v.node +
                                         ", which is down (" + r.error().message() +
                                         "); its volumes are back when it is");
  return r;
}

Status ClusterVolumes::reachable(const store::VolumeRecord& v) {
  auto node = nodeFor(v);
  return node.ok() ? okStatus() : Status(std::move(node).error());
}

NodeCall ClusterVolumes::callOf(const store::VolumeRecord& v) {
  NodeCall c;
  c.volume = v.id;
  c.read_only = v.read_only;
  return c;
}

asio::awaitable<Result<NodeReply>> ClusterVolumes::call(store::VolumeRecord v, std::string call,
                                                        NodeCall c,
                                                        std::chrono::milliseconds timeout,
                                                        size_t max_reply) {
  auto node = nodeFor(v);
  if (!node.ok()) co_return std::move(node).error();
  auto r = co_await (*node)->call(std::move(call), std::move(c), timeout, nullptr, max_reply);
  if (!r.ok())
    co_return std::move(r).error().withContext("volume " + v.name + " is on node " + v.node +
                                               ", which did not answer");
  if (!r->status.ok()) co_return std::move(r->status).error();
  co_return r;
}

asio::awaitable<Status> ClusterVolumes::create(store::VolumeRecord v) {
  NodeCall c = callOf(v);
  c.size_mib = v.size_mib;
  auto r = co_await call(std::move(v), "volume_create", std::move(c), nodes_.options().long_call);
  co_return r.ok() ? okStatus() : Status(std::move(r).error());
}

asio::awaitable<Status> ClusterVolumes::copy(store::VolumeRecord from, store::VolumeRecord to) {
  NodeCall c = callOf(from);
  c.volume_to = to.id;
  c.read_only = to.read_only;  // the copy's: a snapshot
  auto r = co_await call(std::move(from), "volume_copy", std::move(c), nodes_.options().long_call);
  co_return r.ok() ? okStatus() : Status(std::move(r).error());
}

asio::awaitable<Status> ClusterVolumes::remove(store::VolumeRecord v) {
  NodeCall c = callOf(v);
  auto r = co_await call(std::move(v), "volume_remove", std::move(c), nodes_.options().long_call);
  co_return r.ok() ? okStatus() : Status(std::move(r).error());
}

asio::awaitable<Result<ops::VolumeUsage>> ClusterVolumes::usage(store::VolumeRecord v) {
  NodeCall c = callOf(v);
  auto r = co_await call(std::move(v), "volume_usage", std::move(c), nodes_.options().short_call);
  if (!r.ok()) co_return std::move(r).error();
  if (!r->volume_usage) co_return Error(Code::kProtocol, "node reply: no volume_usage");
  co_return *r->volume_usage;
}

asio::awaitable<Result<std::vector<ops::VolumeFileInfo>>> ClusterVolumes::list(
    store::VolumeRecord v, std::string path) {
  NodeCall c = callOf(v);
  c.path = std::move(path);
  auto r = co_await call(std::move(v), "volume_list", std::move(c), nodes_.options().long_call,
                         kMaxListReply);
  if (!r.ok()) co_return std::move(r).error();
  co_return std::move(r->entries);
}

asio::awaitable<Status> ClusterVolumes::mkdir(store::VolumeRecord v, std::string path,
                                              uint32_t mode, bool parents) {
  NodeCall c = callOf(v);
  c.path = std::move(path);
  c.mode = mode;
  c.parents = parents;
  auto r = co_await call(std::move(v), "volume_mkdir", std::move(c), nodes_.options().short_call);
  co_return r.ok() ? okStatus() : Status(std::move(r).error());
}

asio::awaitable<Status> ClusterVolumes::removePath(store::VolumeRecord v, std::string path,
                                                   bool recursive) {
  NodeCall c = callOf(v);
  c.path = std::move(path);
  c.recursive = recursive;
  auto r =
      co_await call(std::move(v), "volume_remove_path", std::move(c), nodes_.options().long_call);
  co_return r.ok() ? okStatus() : Status(std::move(r).error());
}

asio::awaitable<Result<std::unique_ptr<ops::VolumeReader>>> ClusterVolumes::read(
    store::VolumeRecord v, std::string path) {
  auto node = nodeFor(v);
  if (!node.ok()) co_return std::move(node).error();
  NodeCall c = callOf(v);
  c.path = std::move(path);
  auto r = co_await (*node)->readVolume(std::move(c), nodes_.options().short_call);
  if (!r.ok()) co_return std::move(r).error().withContext("volume " + v.name);
  co_return r;
}

asio::awaitable<Result<std::unique_ptr<ops::VolumeWriter>>> ClusterVolumes::write(
    store::VolumeRecord v, std::string path, uint32_t mode) {
  auto node = nodeFor(v);
  if (!node.ok()) co_return std::move(node).error();
  NodeCall c = callOf(v);
  c.path = std::move(path);
  c.mode = mode;
  auto w = co_await (*node)->writeVolume(std::move(c), nodes_.options().short_call);
  if (!w.ok()) co_return std::move(w).error().withContext("volume " + v.name);
  co_return w;
}

asio::awaitable<Result<NodeReply>> ClusterVolumeMounter::callFor(
    std::string id, std::string call, NodeCall c, std::chrono::milliseconds timeout) {
  auto node = nodes_.nodeOf(id);
  if (!node.ok()) co_return std::move(node).error().withContext("volumes of sandbox " + id);
  c.id = id;
  auto r = co_await (*node)->call(std::move(call), std::move(c), timeout);
  if (!r.ok()) co_return std::move(r).error();
  if (!r->status.ok()) co_return std::move(r->status).error();
  co_return r;
}

asio::awaitable<Status> ClusterVolumeMounter::mount(std::string id,
                                                    std::shared_ptr<agentclient::AgentClient>,
                                                    std::vector<ops::VolumeAttachment> v) {
  NodeCall c;
  c.mounts = std::move(v);
  auto r = co_await callFor(id, "volume_mount", std::move(c), nodes_.options().long_call);
  co_return r.ok() ? okStatus() : Status(std::move(r).error());
}

asio::awaitable<void> ClusterVolumeMounter::quiesce(std::string id,
                                                    std::shared_ptr<agentclient::AgentClient>,
                                                    bool hold) {
  NodeCall c;
  c.hold = hold;
  auto r = co_await callFor(id, "volume_quiesce", std::move(c), nodes_.options().long_call);
  // Never fails the action (ops/volume_mounter.h): logged.
  if (!r.ok()) volumesLog().warn("sandbox {}: quiesce its volumes: {}", id, r.error().message());
}

asio::awaitable<void> ClusterVolumeMounter::unquiesce(std::string id,
                                                      std::shared_ptr<agentclient::AgentClient>) {
  NodeCall c;
  auto r = co_await callFor(id, "volume_unquiesce", std::move(c), nodes_.options().long_call);
  if (!r.ok()) volumesLog().warn("sandbox {}: unquiesce its volumes: {}", id, r.error().message());
}

void ClusterVolumeMounter::release(const std::string& id) {
  auto node = nodes_.nodeOf(id);
  if (!node.ok()) return;  // on no node, or a lost one: it ends its mounts with the sandbox
  NodeCall c;
  c.id = id;
  asio::co_spawn(
      nodes_.ioContext(),
      [r = *node, c, t = nodes_.options().short_call]() -> asio::awaitable<void> {
        auto res = co_await r->call("volume_release", c, t);
        if (!res.ok()) volumesLog().warn("volume_release: {}", res.error().message());
      },
      asio::detached);
}

}  // namespace vessel::cluster
