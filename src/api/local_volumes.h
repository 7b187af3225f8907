#pragma once
// This machine's volumes (ops::VolumeKeeper): the images of
// volumes::VolumeHost and their files (volumes::VolumeFiles), on worker
// threads, never the io thread: mkfs, copies and unmounts on one disk
// worker (one at a time), file calls on a pool of two. vesseld --role=all
// serves its volumes API with it, and a node (--role=node) the node API's
// volume calls of the API replicas (cluster/node_server.h): the same code
// either way.
#include <boost/asio/thread_pool.hpp>
#include <memory>
#include <string>

#include "api/volume_mounts.h"
#include "ops/volume_keeper.h"
#include "store/store.h"
#include "volumes/files.h"
#include "volumes/volume_host.h"

namespace vessel::api {

// volumes::FileInfo as the keeper interface carries it.
ops::VolumeFileInfo toVolumeFileInfo(const volumes::FileInfo& f);

class LocalVolumes final : public ops::VolumeKeeper {
 public:
  // `node`: this machine's name in the store ("" on one machine), where
  // its volumes are recorded.
  LocalVolumes(volumes::VolumeHost& host, std::string node);
  ~LocalVolumes() override;

  // The mounts in sandboxes (null: none here): a forced delete ends them.
  void setMounts(VolumeMounts* m) { mounts_ = m; }
  // Mounts every volume the store places on this node, adopting mounts a
  // killed vesseld left, and sets aside (VolumeHost::setAside) images the
  // store does not name. Before serving.
  Status restore(store::Store& store);
  // MiB free where the images are (a node's heartbeat).
  Result<uint64_t> freeMib() const;

  Result<std::string> place(uint64_t) override { return node_; }
  asio::awaitable<Status> create(store::VolumeRecord v) override;
  asio::awaitable<Status> copy(store::VolumeRecord from, store::VolumeRecord to) override;
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

  // The volume's files directly (E2B's Volume API, which needs calls the
  // keeper interface has not: stat, chmod and chown, listings to a depth),
  // and the pool their blocking calls run on.
  Result<volumes::VolumeFiles> filesOf(const store::VolumeRecord& v) const;
  asio::thread_pool& filePool() { return *files_; }

 private:
  volumes::VolumeHost& host_;
  std::string node_;
  VolumeMounts* mounts_ = nullptr;
  std::unique_ptr<asio::thread_pool> disk_;   // mkfs, copies, unmounts: one at a time
  std::unique_ptr<asio::thread_pool> files_;  // file calls
};

}  // namespace vessel::api
