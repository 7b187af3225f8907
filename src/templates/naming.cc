#include "templates/naming.h"

#include "base/sha256.h"

namespace vessel::templates {

namespace {

constexpr size_t kTenantHashChars = 12;
// "t-" + hash + "-"
constexpr size_t kTenantPrefixChars = 2 + kTenantHashChars + 1;

std::string tenantPrefix(const std::string& tenant) {
  return "t-" + sha256Hex(tenant).substr(0, kTenantHashChars) + "-";
}

}  // namespace

std::string tenantTemplateName(const std::string& tenant, const std::string& name) {
  return tenantPrefix(tenant) + name;
}

bool builtinTemplateName(const std::string& stored) {
  if (stored.size() <= kTenantPrefixChars || stored.compare(0, 2, "t-") != 0 ||
      stored[kTenantPrefixChars - 1] != '-')
    return true;
  for (size_t i = 2; i < 2 + kTenantHashChars; ++i)
    if (!((stored[i] >= '0' && stored[i] <= '9') || (stored[i] >= 'a' && stored[i] <= 'f')))
      return true;
  return false;
}

std::string templateOwner(const std::string& stored) {
  return builtinTemplateName(stored) ? "" : stored.substr(0, kTenantPrefixChars);
}

std::optional<std::string> visibleTemplateName(const std::string& tenant,
                                               const std::string& stored) {
  if (builtinTemplateName(stored)) return stored;
  std::string prefix = tenantPrefix(tenant);
  if (stored.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  return stored.substr(prefix.size());
}

}  // namespace vessel::templates
