#include "gateway/policy/public_suffix.h"

#include <libpsl.h>

#include <string>

namespace vessel::gateway::policy {

namespace {

// Loaded once; libpsl's context is read-only afterwards.
const psl_ctx_t* list() {
  static const psl_ctx_t* ctx = [] {
    const psl_ctx_t* c = psl_latest(nullptr);
    return c ? c : psl_builtin();
  }();
  return ctx;
}

}  // namespace

bool isPublicSuffix(std::string_view normalized) {
  if (normalized.empty()) return true;
  std::string name(normalized);
  const psl_ctx_t* ctx = list();
  // Without a list at all, every name counts as public: refusing a wildcard
  // the operator may allow beats allowing one that spans a registry.
  if (!ctx) return true;
  return psl_is_public_suffix2(ctx, name.c_str(), PSL_TYPE_ANY) != 0;
}

}  // namespace vessel::gateway::policy
