#pragma once
// Per-tenant quotas: a pure check of what a request would add against the
// tenant's limits (its own, else the deployment's defaults) and usage.
#include <cstdint>
#include <optional>

#include "base/result.h"
#include "store/store.h"

namespace vessel::ops {

struct QuotaDefaults {
  int64_t max_sandboxes = 20;
  int64_t max_memory_mib = 16384;
  int64_t max_vcpus = 32;
  // Disk on the node: live sandboxes' disk sizes, pause snapshots, fork
  // copies, the tenant's templates and its template builds in flight.
  int64_t max_disk_mib = 200 * 1024;
};

// What a request would add: `count_new` more sandboxes (0: a resume, a
// template) running with `memory_mib` and `vcpus` between them, holding
// `disk_mib` more of the node's disk.
struct Demand {
  int count_new = 0;
  uint64_t memory_mib = 0;
  uint64_t vcpus = 0;
  uint64_t disk_mib = 0;
};

// kResourceExhausted saying which limit and how much is used, when `d`
// does not fit; nullopt when it does.
std::optional<Error> overQuota(const store::TenantLimits& limits, const store::TenantUsage& use,
                               const QuotaDefaults& defaults, const Demand& d);

}  // namespace vessel::ops
