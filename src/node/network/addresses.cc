#include "node/network/addresses.h"

#include <arpa/inet.h>

namespace vessel::node::network {

Result<std::string> transitAddress(const std::string& base, uint32_t index, uint32_t host) {
  in_addr a{};
  if (::inet_pton(AF_INET, base.c_str(), &a) != 1) {
    return Error(Code::kInvalidArgument, "bad transit base " + base);
  }
  if (index >= kMaxSlots || host > 3) {
    return Error(Code::kInvalidArgument, "transit address of slot " + std::to_string(index) +
                                             " host " + std::to_string(host) +
                                             " is outside the /16");
  }
  uint32_t v = ntohl(a.s_addr) + index * 4 + host;
  a.s_addr = htonl(v);
  char out[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, out, sizeof out);
  return std::string(out);
}

Result<SlotAddresses> slotAddresses(const NetworkLayout& l, uint32_t index, const GuestLink& link) {
  if (index >= kMaxSlots) return Error(Code::kResourceExhausted, "slot index out of range");
  SlotAddresses a;
  a.guest_if = link.kind == GuestLink::Kind::kTap ? "tap0" : "guest0";
  a.gateway_side_if = l.prefix + "h" + std::to_string(index);
  VESSEL_ASSIGN_OR_RETURN(a.gateway_address, transitAddress(l.transit_base, index, 1));
  VESSEL_ASSIGN_OR_RETURN(a.slot_address, transitAddress(l.transit_base, index, 2));
  return a;
}

std::string slotNetnsName(const NetworkLayout& l, uint32_t index) {
  return l.prefix + "-" + std::to_string(index);
}

std::optional<uint32_t> slotIndexOf(std::string_view prefix, std::string_view n) {
  if (n.size() <= prefix.size() + 1 || n.size() > prefix.size() + 6) return std::nullopt;
  if (n.substr(0, prefix.size()) != prefix || n[prefix.size()] != '-') return std::nullopt;
  std::string_view digits = n.substr(prefix.size() + 1);
  uint32_t i = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    i = i * 10 + static_cast<uint32_t>(c - '0');
  }
  if (i >= kMaxSlots) return std::nullopt;
  return i;
}

}  // namespace vessel::node::network
