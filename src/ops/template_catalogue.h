#pragma once
// Templates as tenants name them: a tenant's own template `name` is stored
// as templates::tenantTemplateName(tenant, name) and hides a built-in one
// of the same name; a stored name of some tenant's template is never a name
// anyone may give. The lifecycle resolves every create, fork into a
// template and build through this, and counts a tenant's templates in its
// disk quota. Used from one io thread.
#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "templates/store.h"

namespace vessel::ops {

class TemplateCatalogue {
 public:
  explicit TemplateCatalogue(templates::TemplateStore& templates) : templates_(templates) {}

  // The stored name of the template the tenant calls `name`: its own
  // first, else a built-in one. kInvalidArgument for a name no template
  // may have, kNotFound for a stored name of a tenant's template.
  Result<std::string> resolve(const std::string& tenant, const std::string& name) const;
  // resolve(), then the template opened; `what` ("template", "base
  // template") names it in the errors, in the tenant's names: kNotFound
  // when there is none, kUnavailable when it cannot be used.
  struct Opened {
    std::string stored;
    std::shared_ptr<const templates::Template> tmpl;
  };
  Result<Opened> open(const std::string& tenant, const std::string& name,
                      const std::string& what = "template") const;
  // Refuses a name a new template cannot have (reserved, built in).
  Status checkNewName(const std::string& name) const;
  // The stored name the tenant's new template `name` gets.
  static std::string storedName(const std::string& tenant, const std::string& name);
  // What the tenant's templates hold on this node's disk (MiB).
  uint64_t tenantDiskMib(const std::string& tenant) const;
  // Deletes template versions nothing holds and a newer one replaces.
  void collect();
  // Deletes every version of the tenant's own template `name`; a version
  // its sandboxes still use is retired (TemplateStore::remove): they run,
  // pause, resume and fork on, and no new sandbox starts from it.
  // kNotFound when the tenant has none; a built-in template is not the
  // tenant's to delete (kPermissionDenied).
  Status remove(const std::string& tenant, const std::string& name);

 private:
  templates::TemplateStore& templates_;
};

}  // namespace vessel::ops
