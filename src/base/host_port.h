#pragma once
// An IPv4 listener or peer address as flags spell it ("127.0.0.1:8080"):
// parsed once where a flag is read, so servers take a typed address.
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
