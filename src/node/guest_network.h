#pragma once
#include <string>

namespace vessel::node {

// How a sandbox's guest reaches the network, set up on its slot after every
// restore (one exec as root).
struct GuestNetwork {
  bool route = false;  // eth0 up with the slot's guest address, default route and DNS
  std::string ca_pem;  // the egress CA, added to the guest's trust store (+ env variables)
  bool operator==(const GuestNetwork&) const = default;
};

}  // namespace vessel::node
