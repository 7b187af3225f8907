// A template build spec (POST /v1/templates, `vessel template build -f`):
// any bytes parse to a spec within its bounds or to an Error, and a spec
// that parses has a canonical text (its version hash) that is stable, and
// round-trips through specJson.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "templates/build_spec.h"
#include "templates/image_ref.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto s = vessel::templates::parseBuildSpec(in);
  if (!s.ok()) return 0;
  if (s->name.empty() || s->name.size() > 64 || s->vcpus < 1 || s->vcpus > 64 ||
      s->memory_mib < 64 || s->memory_mib > 65536)
    __builtin_trap();
  for (char c : s->name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') __builtin_trap();
  for (const auto& [path, content] : s->files)
    if (path.empty() || path[0] != '/') __builtin_trap();
  if (vessel::templates::canonicalSpec(*s) != vessel::templates::canonicalSpec(*s))
    __builtin_trap();
  // from_image is stored canonical: it parses again to itself.
  if (!s->from_image.empty()) {
    auto r = vessel::templates::parseImageRef(s->from_image);
    if (!r.ok() || r->canonical() != s->from_image) __builtin_trap();
  }
  // What an API replica sends its node reads back as the same spec.
  auto back = vessel::templates::parseBuildSpec(vessel::templates::specJson(*s));
  if (!back.ok() || vessel::templates::canonicalSpec(*back) != vessel::templates::canonicalSpec(*s))
    __builtin_trap();
  if (back->no_cache != s->no_cache) __builtin_trap();
  return 0;
}
