#pragma once
// Templates live in one store on the node. A tenant's own templates are
// stored under a name private to it, "t-<12 hex of sha256(tenant)>-<name>";
// every other name is built in and visible to all. A tenant names its
// templates without the prefix and can never name another tenant's.
#include <optional>
#include <string>

namespace vessel::templates {

std::string tenantTemplateName(const std::string& tenant, const std::string& name);
// The name `tenant` sees for a stored template, or nullopt when the stored
// template belongs to another tenant.
std::optional<std::string> visibleTemplateName(const std::string& tenant,
                                               const std::string& stored);
// Whether a stored name is a built-in template's.
bool builtinTemplateName(const std::string& stored);

// Whose a stored name is: its tenant prefix ("t-<hash>-"), or "" for a
// built-in template. What keys a tenant's build cache apart from others'.
std::string templateOwner(const std::string& stored);

}  // namespace vessel::templates
