#include "gateway/policy/address_rule.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>

namespace vessel::gateway::policy {

namespace ip = boost::asio::ip;

namespace {

// Longest form: "[" + 45-byte IPv6 (embedded IPv4) + "/128" + "]:65535".
constexpr size_t kMaxRuleBytes = 64;

Error bad(std::string_view text, std::string_view why) {
  return Error(
      Code::kInvalidArgument,
      "address rule '" + std::string(text.substr(0, kMaxRuleBytes)) + "': " + std::string(why));
}

bool allOf(std::string_view s, std::string_view set) {
  return !s.empty() && s.find_first_not_of(set) == std::string_view::npos;
}

// Decimal without sign or leading zeros, at most `max`.
bool decimal(std::string_view s, int max, int& out) {
  if (s.empty() || s.size() > 5 || !allOf(s, "0123456789") || (s.size() > 1 && s[0] == '0'))
    return false;
  int v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  if (v > max) return false;
  out = v;
  return true;
}

// "address[/prefix]", the family fixed by the caller (brackets and port
// already removed).
Result<Cidr> parseRange(std::string_view whole, std::string_view s, bool v6) {
  size_t slash = s.find('/');
  std::string addr(s.substr(0, slash));
  Cidr c;
  if (v6) {
    // Hex, ':' and the dots of an embedded IPv4; never a zone id ("%eth0").
    if (!allOf(addr, "0123456789abcdefABCDEF:.") || addr.size() > 45)
      return bad(whole, "not an IPv6 address");
    std::array<unsigned char, 16> b{};
    if (::inet_pton(AF_INET6, addr.c_str(), b.data()) != 1)
      return bad(whole, "not an IPv6 address");
    c.address = ip::address_v6(b);
  } else {
    // glibc's inet_pton takes only four decimal parts without leading zeros.
    std::array<unsigned char, 4> b{};
    if (!allOf(addr, "0123456789.") || ::inet_pton(AF_INET, addr.c_str(), b.data()) != 1)
      return bad(whole, "not a dotted-quad IPv4 address");
    c.address = ip::address_v4(b);
  }
  int max = v6 ? 128 : 32;
  c.prefix = max;
  if (slash != std::string_view::npos && !decimal(s.substr(slash + 1), max, c.prefix))
    return bad(whole, "prefix must be 0 to " + std::to_string(max));
  return c;
}

}  // namespace

bool AddressRule::matchesPort(uint16_t port) const {
  return ports.empty() || std::find(ports.begin(), ports.end(), port) != ports.end();
}

bool looksLikeAddress(std::string_view text) {
  if (text.empty()) return false;
  if (text[0] == '[' || text.find('/') != std::string_view::npos) return true;
  if (std::count(text.begin(), text.end(), ':') >= 2) return true;
  return allOf(text.substr(0, text.find(':')), "0123456789.");
}

Result<AddressRule> parseAddressRule(std::string_view text) {
  if (text.size() > kMaxRuleBytes) return bad(text, "too long");
  AddressRule r;
  std::string_view range, port;
  bool v6 = false;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return bad(text, "no closing ']'");
    range = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return bad(text, "only ':port' may follow ']'");
      port = rest.substr(1);
      if (port.empty()) return bad(text, "empty port");
    }
    v6 = true;
  } else if (std::count(text.begin(), text.end(), ':') >= 2) {
    range = text;  // bare IPv6: a port needs brackets
    v6 = true;
  } else {
    size_t colon = text.find(':');
    range = text.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = text.substr(colon + 1);
      if (port.empty()) return bad(text, "empty port");
    }
  }
  VESSEL_ASSIGN_OR_RETURN(r.cidr, parseRange(text, range, v6));
  if (!port.empty()) {
    int p = 0;
    if (!decimal(port, 65535, p) || p == 0) return bad(text, "bad port");
    r.ports.push_back(static_cast<uint16_t>(p));
  }
  return r;
}

Result<AddressRule> parseAllowAddress(std::string_view text) {
  VESSEL_ASSIGN_OR_RETURN(AddressRule r, parseAddressRule(text));
  if (std::string why = AddressClassifier().builtinRangeReason(r.cidr); !why.empty())
    return bad(text, "the " + why + " range stays refused whatever a rule says");
  return r;
}

Result<Cidr> parseDenyRange(std::string_view text) {
  VESSEL_ASSIGN_OR_RETURN(AddressRule r, parseAddressRule(text));
  if (!r.ports.empty()) return bad(text, "a deny entry covers every port; it takes none");
  return r.cidr;
}

}  // namespace vessel::gateway::policy
