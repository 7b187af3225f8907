#pragma once
// An API replica's volumes (docs/design.md, "Volumes"): each volume lives
// on one node, recorded in the store (volumes.node). ClusterVolumes is the
// replica's ops::VolumeKeeper: a new volume goes to the node with the most
// space for it (rankVolumeNodes), and every call on a volume (its image,
// its files, read and written as streams) goes to that node over the node
// API (volume_* calls, cluster/node_server.h), where the node's own keeper
// (api/local_volumes.h) runs it: the replica keeps no copy of the volume
// logic. ClusterVolumeMounter is the replica's ops::VolumeMounter: a
// sandbox's mounts are made by the node it runs on (the lifecycle places
// it on its volumes' node), with that node's agent and file servers.
//
// A node that is down takes its volumes with it: their calls fail with
// kUnavailable (503) naming the node, until it is back. Used from the io
// thread only.
#include "cluster/cluster_node.h"
#include "ops/volume_keeper.h"
#include "ops/volume_mounter.h"

namespace vessel::cluster {

class ClusterVolumes final : public ops::VolumeKeeper {
 public:
  explicit ClusterVolumes(ClusterNode& nodes) : nodes_(nodes) {}

  Result<std::string> place(uint64_t size_mib) override;
  asio::awaitable<Status> create(store::VolumeRecord v) override;
  asio::awaitable<Status> copy(store::VolumeRecord from, store::VolumeRecord to) override;
  Status reachable(const store::VolumeRecord& v) override;
  asio::awaitable<Status> remove(store::VolumeRecord v) override;
  asio::awaitable<Result<ops::VolumeUsage>> usage(store::VolumeRecord v) override;
  asio::awaitable<Result<std::vector<ops::VolumeFileInfo>>> list(store::VolumeRecord v,
                                                                 std::string path) override;
  asio::awaitable<Status> mkdir(store::VolumeRecord v, std::string path, uint32_t mode,
                                bool parents) override;
  asio::awaitable<Status> removePath(store::VolumeRecord v, std::string path,
                                     bool recursive) override;
  asio::awaitable<Result<std::unique_ptr<ops::VolumeReader>>> read(store::VolumeRecord v,
                                                                   std::string path) override;
  asio::awaitable<Result<std::unique_ptr<ops::VolumeWriter>>> write(store::VolumeRecord v,
                                                                    std::string path,
                                                                    uint32_t mode) override;

 private:
  // The volume's node's client; kUnavailable naming the volume and its
  // node when that node is down.
  Result<RemoteNode*> nodeFor(const store::VolumeRecord& v);
  // `call` for volume `v` on its node: the node's answer when it did the
  // call, its failure (or the node's being unreachable) otherwise.
  asio::awaitable<Result<NodeReply>> call(store::VolumeRecord v, std::string call, NodeCall c,
                                          std::chrono::milliseconds timeout,
                                          size_t max_reply = 1 << 20);
  static NodeCall callOf(const store::VolumeRecord& v);

  ClusterNode& nodes_;
};

class ClusterVolumeMounter final : public ops::VolumeMounter {
 public:
  explicit ClusterVolumeMounter(ClusterNode& nodes) : nodes_(nodes) {}

  // `agent` is null here: the sandbox's node has it.
  asio::awaitable<Status> mount(std::string id, std::shared_ptr<agentclient::AgentClient> agent,
                                std::vector<ops::VolumeAttachment> v) override;
  asio::awaitable<void> quiesce(std::string id, std::shared_ptr<agentclient::AgentClient> agent,
                                bool hold) override;
  asio::awaitable<void> unquiesce(std::string id,
                                  std::shared_ptr<agentclient::AgentClient> agent) override;
  // Sent without waiting (as an abort is): the node's servers stop.
  void release(const std::string& id) override;

 private:
  asio::awaitable<Result<NodeReply>> callFor(std::string id, std::string call, NodeCall c,
                                             std::chrono::milliseconds timeout);

  ClusterNode& nodes_;
};

}  // namespace vessel::cluster
