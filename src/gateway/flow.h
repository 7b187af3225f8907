#pragma once
// What the gateway knows about one guest flow, as it logs it.
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <string>

namespace vessel::gateway {

struct Flow {
  std::string sandbox;
  std::string name;           // pinned, normalized; empty for full-mode IP flows
  std::string address;        // the address the gateway dialled (its own answer)
  std::string guest_address;  // where the guest sent it: logged, never used
  uint16_t port = 0;
};

// Closes with RST so neither side mistakes a reset flow for a clean end.
void resetSocket(boost::asio::ip::tcp::socket& s);

}  // namespace vessel::gateway
