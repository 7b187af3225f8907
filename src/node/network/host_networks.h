#pragma once
// The networks this node's interfaces are on (e.g. 203.0.113.0/24 for an
// address 203.0.113.7/24 on eth0): vesseld passes them to the gateway as
// refused destination ranges, so a sandbox cannot reach the node's
// neighbours on its own segment even when they have public addresses.
#include <cstdint>
#include <string>
#include <vector>

namespace vessel::node::network {

// "a.b.c.d/len" or "x::/len" of the network `address` (16 or 4 bytes, in
// network order) is on with prefix length `prefix`; host bits cleared.
std::string networkOf(const uint8_t* address, size_t size, int prefix);

// Every non-loopback interface address's network in this process's
// namespace (link-local IPv6 left out: never a gateway destination anyway).
std::vector<std::string> hostNetworks();

}  // namespace vessel::node::network
