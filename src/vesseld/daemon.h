#pragma once
// vesseld's life: claim the state directory, open the store, choose the
// accelerator, serve the API until SIGINT/SIGTERM. main() only parses flags.
#include "base/config.h"
#include "base/result.h"

namespace vessel::vesseld {

Status runDaemon(Config cfg);

}  // namespace vessel::vesseld
