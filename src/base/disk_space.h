#pragma once
// Free space on the state disk: vesseld refuses work that would write a lot
// (creates, pauses, forks, template builds) while the filesystem holding
// its state has less than a threshold free, rather than filling it (a full
// disk breaks every sandbox's writes, the store and the logs at once).
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel {

// MiB available to an unprivileged writer on the filesystem holding `dir`.
Result<uint64_t> freeDiskMib(const std::string& dir);

// kResourceExhausted naming `dir`, its free space and the threshold when
// less than `min_mib` is free ("<what> refused: ..."); ok when min_mib is 0.
Status checkFreeDisk(const std::string& dir, uint64_t min_mib, std::string_view what);

}  // namespace vessel
