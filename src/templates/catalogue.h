#pragma once
// The template catalogue of a cluster (docs/design.md, "Many machines"):
// every template version some node has, as its manifest (machine shape,
// defaults, every file's sha256) plus its files' sizes and its owner. It
// lives in the shared store (cluster/template_catalogue.h), so an API
// replica lists, validates and sizes templates without holding any file,
// and a node that fetches a template from another checks every byte it got
// against it. The interface is here so that TemplateStore can serve it to
// code that knows only templates (ops, the API).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "templates/manifest.h"

namespace vessel::templates {

struct CatalogueEntry {
  Manifest manifest;
  std::map<std::string, uint64_t> sizes;  // file name -> bytes, for every file of the manifest
  std::string owner;                      // the tenant; "" for a built-in template
  uint64_t totalBytes() const;
};

// {"file": bytes}: the sizes' JSON, and its strict parser (at most 16
// files, names as a manifest allows them, sizes below 1 TiB). Fuzzed.
std::string sizesJson(const std::map<std::string, uint64_t>& sizes);
Result<std::map<std::string, uint64_t>> parseSizes(std::string_view json);
// A manifest and its sizes agree: one size for every file, no other.
Status checkSizes(const Manifest& m, const std::map<std::string, uint64_t>& sizes);

class Catalogue {
 public:
  virtual ~Catalogue() = default;
  // Every live version, by name then creation time.
  virtual Result<std::vector<CatalogueEntry>> list() = 0;
  // One version, or the newest of `name` when `version` is empty.
  virtual Result<std::optional<CatalogueEntry>> get(const std::string& name,
                                                    const std::string& version) = 0;
  // Registers a version a node has; `revive`: it was just made (a build, a
  // fork), so it replaces what is there and undoes a deletion.
  virtual Status put(const CatalogueEntry& e, bool revive) = 0;
  // Deletes a version (nodes remove their files when they next reconcile).
  virtual Status remove(const std::string& name, const std::string& version) = 0;
};

}  // namespace vessel::templates
