#include "e2b/envd/multipart.h"

#include <algorithm>
#include <cctype>

namespace vessel::e2b::envd {
namespace {

std::string lower(std::string_view s) {
  std::string o(s);
  std::transform(o.begin(), o.end(), o.begin(), [](unsigned char c) { return std::tolower(c); });
  return o;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The value of parameter `key` in `a=b; key="v"; ...` (quoted or token).
// Quoted values may escape `"` and `\` with a backslash.
bool param(std::string_view header, std::string_view key, std::string* out) {
  size_t i = 0;
  while (i < header.size()) {
    size_t semi = header.find(';', i);
    if (semi == std::string_view::npos) return false;
    i = semi + 1;
    while (i < header.size() && (header[i] == ' ' || header[i] == '\t')) ++i;
    size_t eq = header.find('=', i);
    if (eq == std::string_view::npos) return false;
    std::string name = lower(trim(header.substr(i, eq - i)));
    size_t v = eq + 1;
    std::string value;
    if (v < header.size() && header[v] == '"') {
      ++v;
      bool closed = false;
      while (v < header.size()) {
        char c = header[v++];
        if (c == '\\' && v < header.size()) {
          value.push_back(header[v++]);
        } else if (c == '"') {
          closed = true;
          break;
        } else {
          value.push_back(c);
        }
      }
      if (!closed) return false;
    } else {
      size_t end = header.find(';', v);
      if (end == std::string_view::npos) end = header.size();
      value = std::string(trim(header.substr(v, end - v)));
      v = end;
    }
    i = v;
    if (name == key) {
      *out = std::move(value);
      return true;
    }
  }
  return false;
}

}  // namespace

Result<std::string> multipartBoundary(std::string_view content_type) {
  size_t semi = content_type.find(';');
  if (lower(trim(content_type.substr(0, semi))) != "multipart/form-data")
    return Error(Code::kInvalidArgument, "not multipart/form-data");
  std::string b;
  if (!param(content_type, "boundary", &b) || b.empty() || b.size() > 70)
    return Error(Code::kInvalidArgument, "multipart/form-data without a usable boundary");
  return b;
}

Result<std::vector<Part>> parseMultipart(std::string_view body, std::string_view boundary) {
  if (boundary.empty() || boundary.size() > 70)
    return Error(Code::kInvalidArgument, "multipart: bad boundary");
  const std::string delim = "--" + std::string(boundary);
  const std::string inner = "\r\n" + delim;
  // The preamble ends at the first delimiter, at the start or after a CRLF.
  size_t pos;
  if (body.substr(0, delim.size()) == delim) {
    pos = delim.size();
  } else {
    pos = body.find(inner);
    if (pos == std::string_view::npos)
      return Error(Code::kInvalidArgument, "multipart: no boundary");
    pos += inner.size();
  }
  std::vector<Part> parts;
  for (;;) {
    // After a delimiter: "--" closes the body; else transport padding, CRLF.
    if (body.substr(pos, 2) == "--") return parts;
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;
    if (body.substr(pos, 2) != "\r\n")
      return Error(Code::kInvalidArgument, "multipart: junk after a boundary");
    pos += 2;
    if (parts.size() == kMaxParts)
      return Error(Code::kInvalidArgument, "multipart: too many parts");
    size_t head_end = body.find("\r\n\r\n", pos);
    // A part with no headers has its blank line right away.
    size_t headers_len;
    if (body.substr(pos, 2) == "\r\n") {
      head_end = pos;
      headers_len = 0;
    } else {
      if (head_end == std::string_view::npos)
        return Error(Code::kInvalidArgument, "multipart: part headers never end");
      headers_len = head_end - pos + 2;  // keep the last header's CRLF
    }
    if (headers_len > kMaxPartHeaderBytes)
      return Error(Code::kInvalidArgument, "multipart: part headers too large");
    Part part;
    bool disposition = false;
    std::string_view headers = body.substr(pos, headers_len);
    while (!headers.empty()) {
      size_t eol = headers.find("\r\n");
      std::string_view line = headers.substr(0, eol);
      headers.remove_prefix(eol + 2);
      size_t colon = line.find(':');
      if (colon == std::string_view::npos || colon == 0)
        return Error(Code::kInvalidArgument, "multipart: malformed part header");
      std::string name = lower(trim(line.substr(0, colon)));
      std::string_view value = trim(line.substr(colon + 1));
      if (name == "content-disposition") {
        if (lower(trim(value.substr(0, value.find(';')))) != "form-data")
          return Error(Code::kInvalidArgument, "multipart: part is not form-data");
        disposition = true;
        (void)param(value, "name", &part.name);
        (void)param(value, "filename", &part.filename);
      } else if (name == "content-type") {
        part.content_type = std::string(value);
      }
    }
    if (!disposition)
      return Error(Code::kInvalidArgument, "multipart: part without Content-Disposition");
    pos = head_end + (headers_len == 0 ? 2 : 4);
    size_t end = body.find(inner, pos);
    if (end == std::string_view::npos)
      return Error(Code::kInvalidArgument, "multipart: part never ends (no closing boundary)");
    part.data = std::string(body.substr(pos, end - pos));
    parts.push_back(std::move(part));
    pos = end + inner.size();
  }
}

}  // namespace vessel::e2b::envd
