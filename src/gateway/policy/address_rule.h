#pragma once
// IP and CIDR rules beside the name rules (E2B's `allowOut`/`denyOut`, the
// API's `allow`/`deny`): "198.51.100.7", "198.51.100.0/24", "2001:db8::1",
// "2001:db8::/32", each optionally with a port ("198.51.100.7:5432",
// "[2001:db8::1]:443", "[2001:db8::/32]:443"). Parsed strictly here: dotted
// quads only (no "127.1", octal or hex forms), no IPv6 zone ids, prefixes of
// at most 32 or 128 bits written without leading zeros.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gateway/policy/address_class.h"

namespace vessel::gateway::policy {

// An allowed destination range. Without a port it covers every TCP port,
// as a firewall rule does (a name rule without one means 80 and 443).
struct AddressRule {
  Cidr cidr;
  std::vector<uint16_t> ports;  // empty: every port
  bool matchesPort(uint16_t port) const;
  bool matches(const boost::asio::ip::address& a, uint16_t port) const {
    return cidr.contains(a) && matchesPort(port);
  }
};

// True when `text` is written as an address rule (so it is parsed as one and
// refused if malformed) rather than as a name: it starts with '[', holds a
// '/' or two ':', or its host part is only digits and dots.
bool looksLikeAddress(std::string_view text);
Result<AddressRule> parseAddressRule(std::string_view text);
// As parseAddressRule, and refuses a rule whose whole range the gateway
// refuses anyway (private, loopback, link-local/metadata, ...): the API's
// and E2B's edges answer 400 rather than accept a rule that opens nothing.
Result<AddressRule> parseAllowAddress(std::string_view text);
// A deny entry: an address or CIDR, no port (a denied range is denied on
// every port, for every name that resolves into it).
Result<Cidr> parseDenyRange(std::string_view text);

}  // namespace vessel::gateway::policy
