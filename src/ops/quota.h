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
};

// kResourceExhausted saying which limit and how much is used, when
// `count_new` more sandboxes needing `memory_mib` between them do not fit
// (count_new 0: only memory comes back, a resume); nullopt when they do.
std::optional<Error> overQuota(const store::TenantLimits& limits, const store::TenantUsage& use,
                               const QuotaDefaults& defaults, uint64_t memory_mib, int count_new);

}  // namespace vessel::ops
