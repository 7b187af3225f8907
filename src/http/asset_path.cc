#include "http/asset_path.h"

#include <string>
#include <utility>

namespace vessel::http {

namespace {

bool assetChar(char c, bool first) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  if (c == '_' || c == '-') return true;
  return c == '.' && !first;
}

}  // namespace

Status checkAssetPath(std::string_view rel, size_t max_depth) {
  Error no(Code::kNotFound, "no such file: " + std::string(rel.substr(0, 128)));
  if (rel.empty() || rel.size() > 255) return no;
  size_t depth = 0;
  size_t i = 0;
  while (i <= rel.size()) {
    size_t j = rel.find('/', i);
    if (j == std::string_view::npos) j = rel.size();
    std::string_view seg = rel.substr(i, j - i);
    if (seg.empty() || ++depth > max_depth) return no;
    for (size_t k = 0; k < seg.size(); ++k)
      if (!assetChar(seg[k], k == 0)) return no;
    i = j + 1;
  }
  return okStatus();
}

std::string_view contentTypeFor(std::string_view name) {
  static const std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
  };
  for (const auto& [ext, type] : kTypes)
    if (name.size() > ext.size() && name.substr(name.size() - ext.size()) == ext) return type;
  return "application/octet-stream";
}

}  // namespace vessel::http
