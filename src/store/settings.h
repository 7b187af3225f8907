#pragma once
// A sandbox's attributes beside its record, typed: its egress (network)
// settings and its ports' ingress settings. The lifecycle carries them as
// ops::NetworkSpec and ops::IngressSpec (the same types); the store keeps
// them as JSON in tables of their own, and that JSON, like the node API's
// (cluster/node_protocol.cc), is written and read by the one codec below.
#include <boost/json/fwd.hpp>
#include <boost/json/object.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace vessel::store {

struct NetworkSettings {
  std::string mode;                      // none | allowlist | full; "" = the node's default
  std::vector<std::string> allow;        // "name", "*.name", optional ":port"
  std::vector<std::string> credentials;  // credential names
  std::vector<std::string> inspect;      // names (as in allow) whose TLS the gateway terminates
  // IP/CIDR ranges refused on every port and for every name resolving into
  // them; IP/CIDR entries of `allow` take precedence.
  std::vector<std::string> deny;
  bool operator==(const NetworkSettings&) const = default;
};

// Who may reach a sandbox's ports and what Host they see (E2B's
// network.allowPublicTraffic and network.maskRequestHost; docs/e2b.md).
struct IngressSettings {
  bool public_traffic = true;  // false: requests need the sandbox's traffic token
  std::string mask_host;       // "": the Host as sent; else it, ${PORT} replaced
  bool operator==(const IngressSettings&) const = default;
};

// The codec. A decode checks the shape and bounds every field (lists of at most
// 512 names of at most 512 bytes, above what the APIs accept) and
// refuses anything else with kInvalidArgument; the store reports a row it
// cannot decode as corrupt.
boost::json::object encodeNetwork(const NetworkSettings& n);
Result<NetworkSettings> decodeNetwork(const boost::json::value& v);
boost::json::object encodeIngress(const IngressSettings& i);
Result<IngressSettings> decodeIngress(const boost::json::value& v);

}  // namespace vessel::store
