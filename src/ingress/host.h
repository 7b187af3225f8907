#pragma once
// Sandbox port hosts: `<port>-<sandbox id>.<domain>[:listener port]`, the
// name E2B's SDKs build with `sandbox.getHost(port)` from the `domain` the
// REST API hands out (docs/e2b.md, Sandbox ports). Parsed once, at the
// edge, from the untrusted Host header or TLS server name.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vessel::ingress {

struct SandboxHost {
  uint16_t port = 0;
  std::string sandbox_id;
  bool operator==(const SandboxHost&) const = default;
};

// The host name without a trailing `:port` (an IPv6 literal keeps its
// brackets), lowercased, without a trailing dot.
std::string hostName(std::string_view host);

// `host` (a Host header value or a server name) as a sandbox port under
// `domain` (compared by host name: the listener's port, if either names
// one, does not matter). Nullopt when it is not one: another domain, no
// `<port>-` label, a port outside 1..65535 or with leading zeros, an id
// that is not [a-z0-9-]{1,64}.
std::optional<SandboxHost> parseSandboxHost(std::string_view host, std::string_view domain);

}  // namespace vessel::ingress
