#include "gateway/name.h"

namespace vessel::gateway {

namespace {

bool isLabelChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

bool allDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

Error bad(std::string_view raw, const char* why) {
  // The raw name is guest-supplied: cap what goes into logs.
  std::string shown(raw.substr(0, 64));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  return Error(Code::kInvalidArgument, "name \"" + shown + "\": " + why);
}

}  // namespace

Result<std::string> normalizeName(std::string_view raw) {
  if (!raw.empty() && raw.back() == '.') raw.remove_suffix(1);
  if (raw.empty()) return bad(raw, "empty");
  if (raw.size() > kMaxNameLength) return bad(raw, "too long");
  std::string out;
  out.reserve(raw.size());
  size_t label_len = 0;
  size_t last_label_start = 0;
  for (char c : raw) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c == '.') {
      if (label_len == 0) return bad(raw, "empty label");
      if (out.back() == '-') return bad(raw, "label ends with '-'");
      label_len = 0;
      out.push_back(c);
      last_label_start = out.size();
      continue;
    }
    if (!isLabelChar(c)) return bad(raw, "character not allowed in a host name");
    if (label_len == 0 && c == '-') return bad(raw, "label starts with '-'");
    if (++label_len > 63) return bad(raw, "label longer than 63");
    out.push_back(c);
  }
  if (label_len == 0) return bad(raw, "empty label");
  if (out.back() == '-') return bad(raw, "label ends with '-'");
  // inet_aton() accepts 127.1, 0x7f.1 and 2130706433: a numeric or hex last
  // label means some resolver or client treats it as an address.
  std::string_view last = std::string_view(out).substr(last_label_start);
  if (allDigits(last) || (last.size() > 2 && last.substr(0, 2) == "0x")) {
    return bad(raw, "IP literal");
  }
  return out;
}

Result<Authority> parseAuthority(std::string_view raw) {
  if (raw.empty()) return bad(raw, "empty authority");
  if (raw.front() == '[') return bad(raw, "IP literal");
  Authority a;
  std::string_view host = raw;
  size_t colon = raw.rfind(':');
  if (colon != std::string_view::npos) {
    std::string_view port = raw.substr(colon + 1);
    host = raw.substr(0, colon);
    if (!allDigits(port) || port.size() > 5) return bad(raw, "bad port");
    uint32_t p = 0;
    for (char c : port) p = p * 10 + static_cast<uint32_t>(c - '0');
    if (p == 0 || p > 65535) return bad(raw, "bad port");
    a.port = static_cast<uint16_t>(p);
  }
  VESSEL_ASSIGN_OR_RETURN(a.name, normalizeName(host));
  return a;
}

}  // namespace vessel::gateway
