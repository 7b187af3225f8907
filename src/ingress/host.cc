#include "ingress/host.h"

namespace vessel::ingress {

std::string hostName(std::string_view host) {
  if (host.size() > 255) host = host.substr(0, 256);  // longer than any name: never matches
  if (!host.empty() && host.front() == '[') {
    auto close = host.find(']');
    host = close == std::string_view::npos ? host : host.substr(0, close + 1);
  } else if (auto colon = host.rfind(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  std::string out(host);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::optional<SandboxHost> parseSandboxHost(std::string_view host, std::string_view domain) {
  std::string name = hostName(host);
  std::string dom = hostName(domain);
  if (dom.empty() || name.size() <= dom.size() + 1) return std::nullopt;
  if (name.compare(name.size() - dom.size(), dom.size(), dom) != 0 ||
      name[name.size() - dom.size() - 1] != '.')
    return std::nullopt;
  std::string_view label(name.data(), name.size() - dom.size() - 1);
  // One label: <port>-<id>, nothing between it and the domain.
  if (label.find('.') != std::string_view::npos) return std::nullopt;
  auto dash = label.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 5) return std::nullopt;
  std::string_view digits = label.substr(0, dash), id = label.substr(dash + 1);
  if (digits[0] == '0') return std::nullopt;
  uint32_t port = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port == 0 || port > 65535) return std::nullopt;
  if (id.empty() || id.size() > 64) return std::nullopt;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return std::nullopt;
  return SandboxHost{static_cast<uint16_t>(port), std::string(id)};
}

}  // namespace vessel::ingress
