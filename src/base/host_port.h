#pragma once
// A listener's or a peer's IPv4 address and port, as every binary's flags
// give them ("127.0.0.1:8080").
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel {

struct HostPort {
  std::string host;
  uint16_t port = 0;
};
// "127.0.0.1:8080" -> {127.0.0.1, 8080}; the host must be an IPv4 literal.
Result<HostPort> parseHostPort(std::string_view s);

}  // namespace vessel
