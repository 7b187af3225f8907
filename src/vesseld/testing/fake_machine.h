#pragma once
// --hypervisor=fake, for test binaries only (vesseld-fake): the "VMs" are
// vessel-agent run as host processes (hypervisor/testing), no jail, no
// gateway, no disk to grow, no warm pools. The production vesseld does
// not link this.
#include <string>

#include "vesseld/config.h"
#include "vesseld/machine.h"

namespace vessel::vesseld::testing {

// What --hypervisor=fake needs of the rest of the flags: a cluster role
// (the fake never runs a single machine), --no-jail, --no-egress and, for
// a node, the agent binary its VMs run.
Status checkFakeConfig(const Config& cfg, const std::string& agent);

// `agent`: vessel-agent, which every fake VM runs; read when the machine
// is made (after the flags are parsed), so it must outlive the factory.
MachineFactory fakeMachine(const std::string& agent);

}  // namespace vessel::vesseld::testing
