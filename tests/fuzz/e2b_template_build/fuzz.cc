// E2B's template builder bodies (POST /v3/templates, POST
// /v2/templates/{id}/builds/{buildID}, the tag routes): any body parses to
// a bounded request or an Error, and a parsed build becomes a spec that
// Vessel's own spec parser accepts, or an Error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "e2b/template_build.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);  // SAFETY: read-only bytes
  if (auto r = vessel::e2b::parseBuildRequest(body); r.ok()) {
    if (r->name.empty() || r->name.size() > 64 || r->tags.size() > 17) __builtin_trap();
  }
  for (bool assign : {false, true})
    if (auto t = vessel::e2b::parseTagsRequest(body, assign); t.ok() && t->tags.empty())
      __builtin_trap();
  auto b = vessel::e2b::parseTemplateBuild(body);
  if (!b.ok()) return 0;
  if (b->from_image.empty() == b->from_template.empty() || b->steps.size() > 1000) __builtin_trap();
  vessel::e2b::BuildRequest req;
  req.name = "fuzz";
  std::string archive = "x";
  auto spec = vessel::e2b::toBuildSpec(*b, req, [&](const std::string&) { return &archive; });
  if (spec.ok() && spec->name != "fuzz") __builtin_trap();
  return 0;
}
