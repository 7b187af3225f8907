#pragma once
// A sandbox's egress policy as the gateway enforces it. Policies arrive over
// the control socket with a generation number; the gateway keeps the newest
// and re-checks open connections against it.
#include <boost/asio/ip/address.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gateway/policy/address_rule.h"

namespace vessel::gateway::policy {

enum class Mode { kNone, kAllowlist, kFull };
std::string_view modeName(Mode m);

// "a.test" (exact) or "*.a.test" (one or more whole labels in front of
// a.test, never a.test itself). No ports means 80 and 443.
struct Rule {
  std::string name;  // normalized, without the "*." of a wildcard
  bool wildcard = false;
  std::vector<uint16_t> ports;
  bool matchesName(std::string_view normalized) const;
  bool matchesPort(uint16_t port) const;
};
// "pattern", "pattern:port"; the pattern is normalized here.
Result<Rule> parseRule(std::string_view text);

// A secret injected as a header on TLS connections to `hosts` (exact names).
struct Credential {
  std::string name;
  std::vector<std::string> hosts;
  std::string header;  // lowercase header name, e.g. "authorization"
  std::string value;   // full header value, e.g. "Bearer s3cr3t"
};

struct Policy {
  uint64_t generation = 0;
  Mode mode = Mode::kNone;
  std::vector<Rule> rules;
  std::vector<Credential> credentials;
  // Names (and ports, as in `rules`: none named means 80 and 443) whose TLS
  // the gateway terminates even without a credential, so every request's
  // Host is checked (defeats fronting to CDN co-tenants; the guest must
  // trust the deployment CA).
  std::vector<Rule> inspect;
  // IP and CIDR entries of `allow`: destinations a flow may reach without a
  // name (allowlist mode), and exceptions to `deny` (any mode).
  std::vector<AddressRule> addresses;
  // Ranges refused on every port, whether the guest names the address or a
  // name resolves into it; an address rule covering the destination wins.
  std::vector<Cidr> deny;

  // May the guest resolve `name` at all (DNS)? Any port of a rule counts.
  bool allowsName(std::string_view name) const;
  // May the guest open a connection to name:port?
  bool allows(std::string_view name, uint16_t port) const;
  const Credential* credentialFor(std::string_view name) const;
  bool inspects(std::string_view name, uint16_t port) const;
  // May a flow go to a:port, where the guest sent it, with no name to
  // decide by? Allowlist: an address rule covers it; full: no deny range
  // refuses it; none: never. The inward ranges (AddressClassifier) are
  // refused on top of this, whatever a rule says.
  bool allowsAddress(const boost::asio::ip::address& a, uint16_t port) const;
  // Is `a` in a deny range and not covered by an address rule (for `port`;
  // nullopt, a DNS answer: on any port)?
  bool deniesAddress(const boost::asio::ip::address& a, std::optional<uint16_t> port) const;

  // {"generation":N,"mode":"allowlist","allow":["a.test","*.b.test:8443"],
  //  "credentials":[{"name":"gh","hosts":["api.a.test"],
  //                  "header":"Authorization","value":"Bearer x"}],
  //  "inspect":["a2.test","*.b.test:8443"],
  //  "deny":["203.0.113.0/24"]}        (allow may hold address rules too)
  static Result<Policy> fromJson(const boost::json::value& v);
};

}  // namespace vessel::gateway::policy
