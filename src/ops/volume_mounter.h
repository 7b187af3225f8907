#pragma once
// Volumes in sandboxes as the lifecycle sees them (docs/design.md,
// "Volumes"): the lifecycle records which volumes a sandbox mounts
// (store::VolumeMountRecord) and, once its VM runs, asks the mounter to
// mount them; at its delete, to let them go. The mounter (api/volume_mounts.h
// on a machine that keeps volumes) starts a confined file server per mount
// and relays it to the sandbox's agent. Called on the lifecycle's io thread.
#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"

namespace vessel::agentclient {
class AgentClient;
}

namespace vessel::ops {

// One volume of a sandbox create, resolved: the tenant's volume `volume_id`
// (named `name`) at `path` in the guest.
struct VolumeAttachment {
  std::string volume_id;
  std::string name;
  std::string path;
  bool read_only = false;
};

class VolumeMounter {
 public:
  virtual ~VolumeMounter() = default;
  // Mounts each of `v` into sandbox `id` through `agent` (null when the
  // node has none for it: an Error); on an Error, what it mounted of them
  // is let go again.
  virtual boost::asio::awaitable<Status> mount(std::string id,
                                               std::shared_ptr<agentclient::AgentClient> agent,
                                               std::vector<VolumeAttachment> v) = 0;
  // The sandbox is going (deleted, failed): its servers stop.
  virtual void release(const std::string& id) = 0;
};

}  // namespace vessel::ops
