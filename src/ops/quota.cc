#include "ops/quota.h"

#include <string>

namespace vessel::ops {

std::optional<Error> overQuota(const store::TenantLimits& lim, const store::TenantUsage& use,
                               const QuotaDefaults& defaults, uint64_t memory_mib, int count_new) {
  int64_t max_n = lim.max_sandboxes.value_or(defaults.max_sandboxes);
  int64_t max_mem = lim.max_memory_mib.value_or(defaults.max_memory_mib);
  if (count_new > 0 && use.sandboxes + count_new > max_n)
    return Error(Code::kResourceExhausted,
                 "quota: the tenant has " + std::to_string(use.sandboxes) + " of at most " +
                     std::to_string(max_n) +
                     " sandboxes (paused ones count); delete one or ask for a higher limit");
  if (use.memory_mib + static_cast<int64_t>(memory_mib) > max_mem)
    return Error(Code::kResourceExhausted,
                 "quota: the tenant's running sandboxes use " + std::to_string(use.memory_mib) +
                     " MiB of at most " + std::to_string(max_mem) + " MiB and this one needs " +
                     std::to_string(memory_mib) + " MiB; pause or delete one first");
  return std::nullopt;
}

}  // namespace vessel::ops
