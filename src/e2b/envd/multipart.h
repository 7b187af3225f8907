#pragma once
// multipart/form-data (RFC 7578) as the E2B SDKs upload files to POST /files:
// one part per file, named `file`, whose `filename` is the file's path (a
// multi-file write has no `path` query parameter). Parses a whole body held
// in memory (the route caps its size), once, into parts; anything malformed
// is an Error. Fuzzed in tests/fuzz/multipart.
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace vessel::e2b::envd {

struct Part {
  std::string name;      // Content-Disposition name
  std::string filename;  // Content-Disposition filename, "" if absent
  std::string content_type;
  std::string data;
};

inline constexpr size_t kMaxParts = 1000;
inline constexpr size_t kMaxPartHeaderBytes = 8192;

// The boundary parameter of a `multipart/form-data; boundary=...` value.
Result<std::string> multipartBoundary(std::string_view content_type);
Result<std::vector<Part>> parseMultipart(std::string_view body, std::string_view boundary);

}  // namespace vessel::e2b::envd
