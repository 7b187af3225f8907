#pragma once
// What a process (a VM's QEMU) uses, read from /proc: CPU time and resident
// memory. The kernel's text is parsed once here, bounded.
#include <sys/types.h>

#include <cstdint>
#include <string_view>

#include "base/result.h"

namespace vessel::os {

struct ProcUsage {
  uint64_t cpu_ticks = 0;    // utime + stime, in clock ticks (sysconf(_SC_CLK_TCK))
  uint64_t start_ticks = 0;  // when it started, in clock ticks after boot
  uint64_t rss_bytes = 0;    // VmRSS
};

Result<ProcUsage> procUsage(pid_t pid);
// The parsers behind it, for tests: /proc/<pid>/stat (the comm field may hold
// spaces and parentheses) and the VmRSS line of /proc/<pid>/status.
struct StatTicks {
  uint64_t cpu = 0, start = 0;
};
Result<StatTicks> parseStatTicks(std::string_view stat);
// Clock ticks since boot (/proc/uptime).
Result<uint64_t> uptimeTicks();
Result<uint64_t> parseStatusRssBytes(std::string_view status);

}  // namespace vessel::os
