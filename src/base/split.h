#pragma once
// Text cut at a separator, every field kept (empty ones and the one after
// a trailing separator included), as /etc/passwd's fields and a file's
// lines are read. The views point into `s`.
#include <string_view>
#include <vector>

namespace vessel {

inline std::vector<std::string_view> splitView(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t p = 0; p <= s.size();) {
    size_t c = s.find(sep, p);
    if (c == std::string_view::npos) c = s.size();
    out.push_back(s.substr(p, c - p));
    p = c + 1;
  }
  return out;
}

}  // namespace vessel
