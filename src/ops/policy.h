#pragma once
// The deployment's lifetimes, quotas and disk floor (vesseld's flags), as
// the lifecycle, its admission and its reaper read them.
#include <chrono>
#include <cstdint>
#include <string>

#include "ops/quota.h"

namespace vessel::ops {

// Lifetimes and quotas (vesseld's flags); a tenant's own limits in the
// store win over the quota defaults.
struct Policy {
  int64_t default_idle_timeout_s = 600;
  int64_t default_lifetime_s = 24 * 3600;
  int64_t max_lifetime_s = 7 * 24 * 3600;
  QuotaDefaults quota;
  // The largest disk a create may ask for (MiB).
  uint64_t max_disk_mib = 64 * 1024;
  // Creates, pauses and forks are refused while the filesystem holding
  // state_dir has less than this free (MiB; 0 or no dir: never).
  std::string state_dir;
  uint64_t min_free_disk_mib = 0;
  std::chrono::milliseconds reap_interval{1000};
  // Sandbox logs (ops/sandbox_log.h): entries kept per sandbox, and how
  // long its log stays after it ends (--log-retention).
  int log_max_entries = 1000;
  int64_t log_retention_s = 7 * 24 * 3600;
};

}  // namespace vessel::ops
