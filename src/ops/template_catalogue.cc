#include "ops/template_catalogue.h"

#include <cctype>

#include "base/log.h"
#include "templates/naming.h"

namespace vessel::ops {

namespace {

Logger opsLog() { return Logger("ops"); }

bool plainName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

}  // namespace

Result<std::string> TemplateCatalogue::resolve(const std::string& tenant,
                                               const std::string& name) const {
  if (!plainName(name))
    return Error(Code::kInvalidArgument, "template name may hold letters, digits, - and _");
  // A stored name of some tenant's template is not a name anyone may use.
  if (!templates::builtinTemplateName(name))
    return Error(Code::kNotFound, "template '" + name + "' does not exist");
  std::string own = templates::tenantTemplateName(tenant, name);
  if (templates_.has(own)) return own;
  return name;
}

Result<TemplateCatalogue::Opened> TemplateCatalogue::open(const std::string& tenant,
                                                          const std::string& name,
                                                          const std::string& what) const {
  VESSEL_ASSIGN_OR_RETURN(std::string stored, resolve(tenant, name));
  auto t = templates_.open(stored);
  if (!t.ok()) {
    if (t.error().code() == Code::kNotFound)
      return Error(Code::kNotFound, what + " '" + name + "' does not exist");
    opsLog().error("open {} {}: {}", what, stored, t.error().message());
    return Error(Code::kUnavailable, what + " '" + name + "' is not usable");
  }
  return Opened{std::move(stored), std::move(*t)};
}

Status TemplateCatalogue::checkNewName(const std::string& name) const {
  if (!templates::builtinTemplateName(name))
    return Error(Code::kInvalidArgument, "template name '" + name + "' is reserved (t-<hex>-...)");
  for (const auto& m : templates_.list())
    if (m.name == name)
      return Error(Code::kAlreadyExists,
                   "template '" + name + "' is built in; choose another name");
  return okStatus();
}

Status TemplateCatalogue::remove(const std::string& tenant, const std::string& name) {
  if (!plainName(name))
    return Error(Code::kInvalidArgument, "template name may hold letters, digits, - and _");
  std::string stored = storedName(tenant, name);
  int removed = 0;
  for (const auto& m : templates_.list()) {
    if (m.name != stored) continue;
    VESSEL_TRY_CTX(templates_.remove(m.name, m.version), "delete template " + name);
    ++removed;
  }
  if (removed > 0) return okStatus();
  if (templates_.has(name) && templates::builtinTemplateName(name))
    return Error(Code::kPermissionDenied, "template '" + name + "' is built in");
  return Error(Code::kNotFound, "template '" + name + "' does not exist");
}

std::string TemplateCatalogue::storedName(const std::string& tenant, const std::string& name) {
  return templates::tenantTemplateName(tenant, name);
}

uint64_t TemplateCatalogue::tenantDiskMib(const std::string& tenant) const {
  return templates_.allocatedMib(templates::tenantTemplateName(tenant, ""));
}

void TemplateCatalogue::collect() {
  if (int n = templates_.collectGarbage(); n > 0)
    opsLog().info("removed {} template version(s) no sandbox uses (a newer one exists)", n);
}

}  // namespace vessel::ops
