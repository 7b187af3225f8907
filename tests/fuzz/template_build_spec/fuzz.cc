// A template build spec (POST /v1/templates, `vessel template build -f`):
// any bytes parse to a spec within its bounds or to an Error, and a spec
// that parses has a canonical text (its version hash) that is stable.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "templates/build_spec.h"

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
  return 0;
}
