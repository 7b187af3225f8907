#pragma once
// What the data plane needs of the node: the agent of a sandbox that is
// running here now. The control plane owns the VMs and implements this; the
// data plane never reaches into its internals.
#include <memory>
#include <string>

#include "agentclient/agent_client.h"

namespace vessel::api {

class LiveSandboxes {
 public:
  virtual ~LiveSandboxes() = default;
  // The agent of a running sandbox, or null when it has no VM on this node.
  virtual std::shared_ptr<agentclient::AgentClient> agentOf(const std::string& sandbox_id) = 0;
};

}  // namespace vessel::api
