#include "base/env_var.h"

namespace vessel {

bool portableEnvName(std::string_view name, size_t max) {
  if (name.empty() || name.size() > max || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  return true;
}

bool envEntry(std::string_view entry) {
  auto eq = entry.find('=');
  return eq != std::string_view::npos && eq > 0 && envValue(entry);
}

}  // namespace vessel
