#include "cluster/template_catalogue.h"

#include "base/log.h"
#include "templates/naming.h"

namespace vessel::cluster {

Result<templates::CatalogueEntry> entryFromRecord(const store::TemplateRecord& r) {
  const std::string what = "catalogue entry " + r.name + "@" + r.version;
  auto m = templates::parseManifest(r.manifest_json);
  if (!m.ok()) return std::move(m).error().withContext(what);
  auto sizes = templates::parseSizes(r.sizes_json);
  if (!sizes.ok()) return std::move(sizes).error().withContext(what);
  if (m->name != r.name || m->version != r.version)
    return Error(Code::kInvalidArgument, what + ": its manifest names another template");
  VESSEL_TRY(templates::checkSizes(*m, *sizes));
  templates::CatalogueEntry e;
  e.manifest = std::move(*m);
  e.sizes = std::move(*sizes);
  e.owner = r.tenant_id;
  return e;
}

Result<std::vector<templates::CatalogueEntry>> StoreCatalogue::list() {
  VESSEL_ASSIGN_OR_RETURN(auto rows, store_.listTemplates(false));
  std::vector<templates::CatalogueEntry> out;
  for (const auto& r : rows) {
    auto e = entryFromRecord(r);
    if (!e.ok()) {
      Logger("catalogue").warn("{}", e.error().message());
      continue;
    }
    out.push_back(std::move(*e));
  }
  return out;
}

Result<std::optional<templates::CatalogueEntry>> StoreCatalogue::get(const std::string& name,
                                                                     const std::string& version) {
  VESSEL_ASSIGN_OR_RETURN(auto row, store_.getTemplate(name, version));
  if (!row) return std::optional<templates::CatalogueEntry>();
  VESSEL_ASSIGN_OR_RETURN(auto e, entryFromRecord(*row));
  return std::optional<templates::CatalogueEntry>(std::move(e));
}

Status StoreCatalogue::put(const templates::CatalogueEntry& e, bool revive) {
  VESSEL_TRY(templates::checkSizes(e.manifest, e.sizes));
  store::TemplateRecord r;
  r.name = e.manifest.name;
  r.version = e.manifest.version;
  r.tenant_id = e.owner;
  r.manifest_json = templates::toJson(e.manifest);
  r.sizes_json = templates::sizesJson(e.sizes);
  r.created_at = e.manifest.created_at;
  return store_.putTemplate(r, revive);
}

Status StoreCatalogue::remove(const std::string& name, const std::string& version) {
  return store_.deleteTemplate(name, version);
}

Result<std::vector<std::pair<std::string, std::string>>> StoreCatalogue::deleted() {
  VESSEL_ASSIGN_OR_RETURN(auto rows, store_.listTemplates(true));
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& r : rows)
    if (r.deleted) out.emplace_back(r.name, r.version);
  return out;
}

int registerInstalled(templates::TemplateStore& templates, templates::Catalogue& c) {
  Logger log("catalogue");
  int n = 0;
  for (const auto& m : templates.list()) {
    auto t = templates.open(m.name, m.version);
    if (!t.ok()) {
      log.warn("not registering template {}@{}: {}", m.name, m.version, t.error().message());
      continue;
    }
    auto e = templates::TemplateStore::entryOf(**t, "");
    if (!e.ok()) {
      log.warn("not registering template {}@{}: {}", m.name, m.version, e.error().message());
      continue;
    }
    if (auto s = c.put(*e, templates::builtinTemplateName(m.name)); !s.ok()) {
      log.warn("register template {}@{}: {}", m.name, m.version, s.error().message());
      continue;
    }
    ++n;
  }
  return n;
}

}  // namespace vessel::cluster
