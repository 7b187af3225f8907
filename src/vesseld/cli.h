#pragma once
// vesseld's command line: flags (and VESSEL_* variables, and --config
// files) -> Config -> validate -> runDaemon. One function for every vesseld
// binary: the production one (cmd/vesseld) knows QEMU only; test binaries
// (vesseld-fake) add the fake hypervisor and its flag.
#include <functional>

#include "base/result.h"
#include "vesseld/config.h"
#include "vesseld/machine.h"

namespace CLI {
class App;
}

namespace vessel::vesseld {

struct Binary {
  Machines machines;  // by --hypervisor name
  // Flags of this binary only (hidden ones for tests).
  std::function<void(CLI::App&)> add_flags;
  // Checks the validated Config against those flags.
  std::function<Status(const Config&)> check;
};

// Exit status: 0, 1 (the daemon failed) or 2 (bad flags). --print-config
// prints what the role resolved (settingsJson) and exits 0 without
// starting anything.
int vesseldMain(int argc, char** argv, Binary binary);

}  // namespace vessel::vesseld
