#pragma once
// Public suffixes (co.uk, github.io, s3.amazonaws.com): names under which
// unrelated parties register. A wildcard rule on one (`*.co.uk`) would let a
// sandbox reach every customer of that registry or provider, so the API
// refuses it unless the operator says otherwise. The list is the system's
// (Debian's `publicsuffix`, read through libpsl, newest of it and libpsl's
// built-in copy).
#include <string_view>

namespace vessel::gateway::policy {

// Whether `normalized` (lowercase, no trailing dot) is a public suffix,
// including every single-label name (the list's implicit "*" rule: `test`,
// `internal`). Thread-safe.
bool isPublicSuffix(std::string_view normalized);

}  // namespace vessel::gateway::policy
