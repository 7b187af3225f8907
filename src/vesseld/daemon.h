#pragma once
// vesseld's life: claim the state directory, open the store, build the
// node stack, the API stack or both (--role), serve until SIGINT/SIGTERM.
// main() only parses flags (vesseld/cli.h).
#include "base/result.h"
#include "vesseld/config.h"
#include "vesseld/machine.h"

namespace vessel::vesseld {

// `machines`: the hypervisors this binary may run VMs on, by name.
Status runDaemon(Config cfg, const Machines& machines);

}  // namespace vessel::vesseld
