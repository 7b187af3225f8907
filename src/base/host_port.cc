#include "base/host_port.h"

#include <arpa/inet.h>

#include <charconv>

namespace vessel {

Result<HostPort> parseHostPort(std::string_view s) {
  auto colon = s.rfind(':');
  if (colon == std::string_view::npos)
    return Error(Code::kInvalidArgument, "address '" + std::string(s) + "' lacks :port");
  HostPort hp;
  hp.host = std::string(s.substr(0, colon));
  in_addr a{};
  if (::inet_pton(AF_INET, hp.host.c_str(), &a) != 1)
    return Error(Code::kInvalidArgument, "address '" + std::string(s) + "': host is not IPv4");
  auto port = s.substr(colon + 1);
  unsigned v = 0;
  auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
  if (ec != std::errc() || p != port.data() + port.size() || v > 65535)
    return Error(Code::kInvalidArgument, "address '" + std::string(s) + "': bad port");
  hp.port = static_cast<uint16_t>(v);
  return hp;
}

}  // namespace vessel
