#include "ops/quota.h"

#include <string>

namespace vessel::ops {

std::optional<Error> overQuota(const store::TenantLimits& lim, const store::TenantUsage& use,
                               const QuotaDefaults& defaults, const Demand& d) {
  int64_t max_n = lim.max_sandboxes.value_or(defaults.max_sandboxes);
  int64_t max_mem = lim.max_memory_mib.value_or(defaults.max_memory_mib);
  int64_t max_cpu = lim.max_vcpus.value_or(defaults.max_vcpus);
  int64_t max_disk = lim.max_disk_mib.value_or(defaults.max_disk_mib);
  auto n = [](auto v) { return std::to_string(v); };
  if (d.count_new > 0 && use.sandboxes + d.count_new > max_n)
    return Error(Code::kResourceExhausted,
                 "quota: the tenant has " + n(use.sandboxes) + " of at most " + n(max_n) +
                     " sandboxes (paused ones count); delete one or ask for a higher limit");
  if (use.memory_mib + static_cast<int64_t>(d.memory_mib) > max_mem)
    return Error(Code::kResourceExhausted, "quota: the tenant's running sandboxes use " +
                                               n(use.memory_mib) + " MiB of at most " + n(max_mem) +
                                               " MiB and this needs " + n(d.memory_mib) +
                                               " MiB; pause or delete one first");
  if (use.vcpus + static_cast<int64_t>(d.vcpus) > max_cpu)
    return Error(Code::kResourceExhausted, "quota: the tenant's running sandboxes use " +
                                               n(use.vcpus) + " of at most " + n(max_cpu) +
                                               " vCPUs and this needs " + n(d.vcpus) +
                                               "; pause or delete one first");
  if (use.disk_mib + static_cast<int64_t>(d.disk_mib) > max_disk)
    return Error(Code::kResourceExhausted,
                 "quota: the tenant's disks, pause snapshots and templates take " +
                     n(use.disk_mib) + " MiB of at most " + n(max_disk) + " MiB and this needs " +
                     n(d.disk_mib) +
                     " MiB more; delete a sandbox or template, or ask for less disk");
  return std::nullopt;
}

}  // namespace vessel::ops
