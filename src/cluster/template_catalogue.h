#pragma once
// The template catalogue (templates/catalogue.h) in the shared store
// (store migration 9): what API replicas serve and validate creates from,
// and what a node checks a template it fetched against. Entries are
// parsed strictly when read (manifest and sizes): the store is shared by
// every node, and one node's bad row must not be taken on trust by another.
// Used from the io thread only (store calls).
#include "store/store.h"
#include "templates/catalogue.h"
#include "templates/store.h"

namespace vessel::cluster {

class StoreCatalogue final : public templates::Catalogue {
 public:
  explicit StoreCatalogue(store::Store& store) : store_(store) {}
  Result<std::vector<templates::CatalogueEntry>> list() override;
  Result<std::optional<templates::CatalogueEntry>> get(const std::string& name,
                                                       const std::string& version) override;
  Status put(const templates::CatalogueEntry& e, bool revive) override;
  Status remove(const std::string& name, const std::string& version) override;

  // Versions deleted from the catalogue, by stored name and version (a
  // node removes its files of them).
  Result<std::vector<std::pair<std::string, std::string>>> deleted();

 private:
  store::Store& store_;
};

// A store row as a catalogue entry: kInvalidArgument for a manifest or
// sizes that do not parse or do not agree with each other or the row.
Result<templates::CatalogueEntry> entryFromRecord(const store::TemplateRecord& r);

// Registers every template installed in `templates` (a node at start):
// built-in ones are revived (they are always wanted), a tenant's only if
// the catalogue does not have it deleted. Returns how many it registered;
// the failures are logged.
int registerInstalled(templates::TemplateStore& templates, templates::Catalogue& c);

}  // namespace vessel::cluster
