#pragma once
// What a network slot is made of, as names and numbers: the node-wide
// layout, the guest's link kind, and the per-slot interface names and
// transit addresses derived from a slot index. Pure (no kernel object is
// touched here), so the arithmetic that gives each slot its identity at the
// gateway is unit-tested on its own (addresses_test.cc).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::node::network {

// Slots per layout: the /30s in the transit /16.
inline constexpr uint32_t kMaxSlots = 16384;

struct NetworkLayout {
  std::string gateway_netns;  // where vessel-gateway listens; "" = this namespace
  std::string prefix = "vs";  // netns "<prefix>-<i>", gateway-side veth "<prefix>h<i>"
  std::string transit_base = "10.200.0.0";  // a /16, one /30 per slot
  uint16_t proxy_port = 15001;
  uint16_t dns_port = 15053;
  // What the guest sees, identical in every slot.
  std::string guest_ip = "172.16.0.2";
  std::string gateway_ip = "172.16.0.1";  // the guest's default route and resolver
  std::string guest_mac = "06:00:ac:10:00:02";
  std::string gateway_mac = "06:00:ac:10:00:01";
  // Per-slot kernel limits (docs/gateway.md, "Fair share"): open TCP
  // connections, new TCP connections and DNS packets per second (bursts of
  // twice the rate).
  uint32_t max_tcp_connections = 4096;
  uint32_t new_tcp_per_second = 400;
  uint32_t dns_per_second = 400;
};

// The guest's side of the slot: a tap for a VM, or (tests without a VM) a
// veth whose peer is placed in another namespace that plays the guest.
struct GuestLink {
  enum class Kind { kTap, kVeth } kind = Kind::kTap;
  std::string veth_peer_netns;          // kVeth: the "guest" namespace
  std::string veth_peer_name = "eth0";  // kVeth: the guest's interface name
};

struct SlotAddresses {
  std::string guest_if;  // "tap0" or "guest0"
  std::string transit_if = "transit0";
  std::string gateway_side_if;  // in the gateway namespace
  std::string slot_address;     // transit, slot side: the flows' source
  std::string gateway_address;  // transit, gateway side
};

// Host `host` (0-3) of slot `index`'s transit /30 above the IPv4 `base`.
// Refuses a base that is not an IPv4 address and an index or host outside
// the /16, so two slots can never share an address.
Result<std::string> transitAddress(const std::string& base, uint32_t index, uint32_t host);
// Slot `index`'s names and transit addresses: .1 of its /30 is the gateway
// side, .2 the slot side (its flows' source at the gateway).
Result<SlotAddresses> slotAddresses(const NetworkLayout& l, uint32_t index, const GuestLink& link);
// "<prefix>-<index>"
std::string slotNetnsName(const NetworkLayout& l, uint32_t index);
// The slot index a namespace name "<prefix>-<i>" stands for, or nullopt for
// any other name (other prefixes, "<prefix>-gw", leading signs or spaces,
// indices of more than five digits or past kMaxSlots).
std::optional<uint32_t> slotIndexOf(std::string_view prefix, std::string_view netns_name);

}  // namespace vessel::node::network
