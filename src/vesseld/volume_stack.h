#pragma once
// This machine's volumes (docs/design.md, "Volumes"): their images
// (volumes::VolumeHost under <state-dir>/volumes), the mounts in sandboxes
// (api::VolumeMounts: a confined vessel-volume-server per mount, when
// vesseld is root and has the server and a uid range) and the keeper over
// both (api::LocalVolumes), mounted again from the store before anything
// is served. Built by one function for --role=all (under the API stack)
// and --role=node (served to the API replicas over the node API).
#include <memory>
#include <string>

#include "api/local_volumes.h"
#include "api/volume_mounts.h"
#include "base/result.h"
#include "store/store.h"
#include "volumes/volume_host.h"

namespace vessel::vesseld {

struct VolumeStackSettings {
  std::string state_dir;
  std::string vm_uid_range, uid_lease_dir;  // the file servers' uids
  std::string node;                         // this node's name ("" on one machine)
};

class VolumeStack {
 public:
  static Result<std::unique_ptr<VolumeStack>> build(const VolumeStackSettings& s,
                                                    store::Store& store);
  ~VolumeStack();

  api::LocalVolumes& keeper() { return *keeper_; }
  // Null: volumes cannot be mounted in sandboxes here (the log says why).
  api::VolumeMounts* mounts() { return mounts_.get(); }
  // MiB free for new volumes (a node's heartbeat): 0 when none can be
  // mounted here, so that no replica places one on it.
  uint64_t freeMib() const;

 private:
  VolumeStack() = default;
  // Destroyed keeper first (its workers may hold the host's volumes), host last.
  std::unique_ptr<volumes::VolumeHost> host_;
  std::unique_ptr<api::VolumeMounts> mounts_;
  std::unique_ptr<api::LocalVolumes> keeper_;
};

}  // namespace vessel::vesseld
