// The volume routes' tenant input (issue 27): a create or copy body, and a
// path in a volume. A body parses to a name that can sit in a route and a
// path (no '/', no ':', no "..") with a size in range, or to an Error; a
// path becomes a relative one that names no parent and no root, or an Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/volume_requests.h"
#include "volumes/files.h"

using namespace vessel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view in(reinterpret_cast<const char*>(data), size);
  for (bool with_size : {true, false}) {
    auto r = api::parseVolumeRequest(in, with_size, 16, 65536);
    if (!r.ok()) continue;
    const std::string& n = r->name;
    if (!api::validVolumeName(n) || n.find_first_of("/:") != std::string::npos || n == "." ||
        n == ".." || n.size() > 63)
      __builtin_trap();
    if (with_size ? (r->size_mib < 16 || r->size_mib > 65536) : r->size_mib != 0) __builtin_trap();
  }
  auto p = volumes::relativePath(in);
  if (!p.ok()) return 0;
  const std::string& rel = *p;
  if (rel.empty() || rel[0] == '/' || rel.back() == '/' || rel.size() > 4096) __builtin_trap();
  if (rel == ".") return 0;
  size_t i = 0;
  while (i <= rel.size()) {
    size_t j = rel.find('/', i);
    if (j == std::string::npos) j = rel.size();
    std::string_view c(rel.data() + i, j - i);
    if (c.empty() || c == "." || c == ".." || c.find('\0') != std::string_view::npos)
      __builtin_trap();
    i = j + 1;
  }
  return 0;
}
