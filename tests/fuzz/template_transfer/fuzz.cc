// Templates between nodes (cluster/template_transfer.h): the path of a
// template file's GET (a request target at a node's edge) and the sizes a
// catalogue entry carries (read from the shared store by every node). Any
// bytes parse within their bounds or to an Error; what parses round-trips.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cluster/template_transfer.h"
#include "templates/catalogue.h"

using namespace vessel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto r = cluster::parseTemplateFilePath(in); r.ok()) {
    for (const auto* part : {&r->name, &r->version, &r->file})
      if (part->empty() || part->size() > 64 || (*part)[0] == '.' ||
          part->find('/') != std::string::npos)
        __builtin_trap();
    if (cluster::templateFilePath(*r) != in) __builtin_trap();
  }
  if (auto s = templates::parseSizes(in); s.ok()) {
    if (s->size() > 16) __builtin_trap();
    auto again = templates::parseSizes(templates::sizesJson(*s));
    if (!again.ok() || *again != *s) __builtin_trap();
  }
  return 0;
}
