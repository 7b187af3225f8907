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
  std::string node;  // the node keeping the volume ("" on one machine)
};

class VolumeMounter {
 public:
  virtual ~VolumeMounter() = default;
  // Mounts each of `v` into sandbox `id` through `agent` (null when the
  // node has none for it: an Error); on an Error, what it mounted of them
  // is let go again. At a create, and whenever the VM runs again (resumed,
  // a fork's copy, vesseld restarted): a mount whose server was held
  // (quiesce) carries its session on, open files included; any other
  // replaces what the guest still had at that path.
  virtual boost::asio::awaitable<Status> mount(std::string id,
                                               std::shared_ptr<agentclient::AgentClient> agent,
                                               std::vector<VolumeAttachment> v) = 0;
  // Before the VM's memory is saved (a pause with memory, a fork): every
  // mount stops taking requests, and none is left outstanding. `hold`:
  // the servers outlive the VM's agent connection, for mount() to carry
  // their sessions on. Never fails the action: a mount that could not be
  // quieted is mounted anew later (its open files in the guest lost).
  virtual boost::asio::awaitable<void> quiesce(std::string id,
                                               std::shared_ptr<agentclient::AgentClient> agent,
                                               bool hold) = 0;
  // The save is over and this VM runs on (a fork's parent, a failed
  // pause): its mounts take requests again, nothing held.
  virtual boost::asio::awaitable<void> unquiesce(
      std::string id, std::shared_ptr<agentclient::AgentClient> agent) = 0;
  // The sandbox is going (deleted, failed) or its VM is (a pause without
  // memory): its servers stop.
  virtual void release(const std::string& id) = 0;
};

}  // namespace vessel::ops
