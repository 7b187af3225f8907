// Fuzzes the multipart/form-data parser of envd's POST /files: the first
// line is a Content-Type value (its boundary), the rest the body.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "e2b/envd/multipart.h"

using namespace vessel::e2b::envd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto nl = in.find('\n');
  std::string_view ctype = in.substr(0, nl);
  std::string_view body = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  auto b = multipartBoundary(ctype);
  if (!b.ok()) return 0;
  auto parts = parseMultipart(body, *b);
  if (parts.ok()) {
    size_t total = 0;
    for (const auto& p : *parts) total += p.data.size();
    if (total > body.size() || parts->size() > kMaxParts) __builtin_trap();
  }
  return 0;
}
