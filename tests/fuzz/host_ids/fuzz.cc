// Fuzzes the reader of /etc/passwd, /etc/group, /etc/subuid and /etc/subgid
// (os/jail.h): any bytes, read either way, yield id ranges or an Error, and
// every range it yields is well-formed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "os/jail.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view in(reinterpret_cast<const char*>(data), size);
  for (bool sub : {false, true}) {
    auto r = vessel::os::parseIdFile(in, sub, "fuzz");
    if (!r.ok()) continue;
    for (const auto& c : *r)
      if (c.range.last < c.range.first || c.source.empty()) std::abort();
  }
  return 0;
}
