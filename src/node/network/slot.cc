#include "node/network/slot.h"

#include "base/log.h"
#include "node/network/rulesets.h"
#include "os/command.h"

namespace vessel::node::network {

namespace {

Status ip(const std::string& netns, std::vector<std::string> args) {
  std::vector<std::string> argv{"ip"};
  if (!netns.empty()) argv.insert(argv.end(), {"-n", netns});
  argv.insert(argv.end(), args.begin(), args.end());
  VESSEL_TRY(os::runCommand(argv));
  return okStatus();
}

}  // namespace

Result<std::unique_ptr<Slot>> Slot::create(const NetworkLayout& l, uint32_t index,
                                           const GuestLink& link) {
  std::unique_ptr<Slot> s(new Slot());
  s->index_ = index;
  s->layout_ = l;
  VESSEL_ASSIGN_OR_RETURN(s->addr_, slotAddresses(l, index, link));
  const SlotAddresses& a = s->addr_;
  std::string what = "network slot " + std::to_string(index);

  auto ns = os::Netns::create(slotNetnsName(l, index));
  if (!ns.ok()) return std::move(ns).error().withContext(what);
  s->netns_ = std::move(*ns);
  const std::string& n = s->netns_.name();
  // Nothing is up yet; the rules go in before any link carries a packet.
  for (const char* key : {"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6",
                          "net.ipv4.ip_forward"}) {
    VESSEL_TRY_CTX(s->netns_.sysctl(key, "1"), what);
  }
  if (link.kind == GuestLink::Kind::kTap) {
    auto tap = os::openTap(s->netns_.path(), a.guest_if);
    if (!tap.ok()) return std::move(tap).error().withContext(what);
    s->tap_ = std::move(*tap);
  } else {
    auto v = os::createVeth(n, a.guest_if, link.veth_peer_netns, link.veth_peer_name);
    if (!v.ok()) return std::move(v).error().withContext(what);
    v->release();  // both ends go with the slot namespace
  }
  auto transit = os::createVeth(l.gateway_netns, a.gateway_side_if, n, a.transit_if);
  if (!transit.ok() && ip(l.gateway_netns, {"link", "show", "dev", a.gateway_side_if}).ok()) {
    // A gateway side of this name is stale: its slot namespace is gone from
    // /run/netns but still alive, kept by a VM that is being stopped (a tap
    // descriptor holds its namespace). Its link goes, so this one can be made.
    Logger("network").warn("{}: removing the stale link {}", what, a.gateway_side_if);
    (void)ip(l.gateway_netns, {"link", "delete", a.gateway_side_if});
    transit = os::createVeth(l.gateway_netns, a.gateway_side_if, n, a.transit_if);
  }
  if (!transit.ok()) return std::move(transit).error().withContext(what);
  s->gateway_side_ = std::move(*transit);

  VESSEL_TRY_CTX(os::nftApply(n, sandboxRuleset(l, a)), what);
  VESSEL_TRY_CTX(s->addGatewayElement(), what);

  VESSEL_TRY_CTX(ip(n, {"link", "set", a.guest_if, "address", l.gateway_mac}), what);
  VESSEL_TRY_CTX(ip(n, {"addr", "add", l.gateway_ip + "/30", "dev", a.guest_if}), what);
  VESSEL_TRY_CTX(ip(n, {"link", "set", a.guest_if, "up"}), what);
  // A permanent neighbour entry: guest ARP cannot move the guest's address.
  VESSEL_TRY_CTX(ip(n, {"neigh", "replace", l.guest_ip, "lladdr", l.guest_mac, "dev", a.guest_if,
                        "nud", "permanent"}),
                 what);
  VESSEL_TRY_CTX(ip(n, {"addr", "add", a.slot_address + "/30", "dev", a.transit_if}), what);
  VESSEL_TRY_CTX(ip(n, {"link", "set", a.transit_if, "up"}), what);
  VESSEL_TRY_CTX(ip(n, {"route", "add", "default", "via", a.gateway_address}), what);
  VESSEL_TRY_CTX(
      ip(l.gateway_netns, {"addr", "add", a.gateway_address + "/30", "dev", a.gateway_side_if}),
      what);
  VESSEL_TRY_CTX(ip(l.gateway_netns, {"link", "set", a.gateway_side_if, "up"}), what);
  return s;
}

Status Slot::addGatewayElement() {
  VESSEL_TRY_CTX(
      os::runCommand(os::inNetns(layout_.gateway_netns,
                                 {"nft", "add", "element", "ip", gatewayTableName(layout_),
                                  "slot_sources", slotSourcesElement(addr_)})),
      "register with gateway table");
  element_added_ = true;
  return okStatus();
}

Result<std::unique_ptr<Slot>> Slot::adopt(const NetworkLayout& l, uint32_t index) {
  std::unique_ptr<Slot> s(new Slot());
  s->index_ = index;
  s->layout_ = l;
  VESSEL_ASSIGN_OR_RETURN(s->addr_, slotAddresses(l, index, GuestLink{}));
  const SlotAddresses& a = s->addr_;
  std::string what = "take over network slot " + std::to_string(index);
  auto ns = os::Netns::adopt(slotNetnsName(l, index));
  if (!ns.ok()) return std::move(ns).error().withContext(what);
  s->netns_ = std::move(*ns);
  // From here the slot owns what exists: a failure below removes it.
  s->gateway_side_ = os::Link(l.gateway_netns, a.gateway_side_if);
  const std::string& n = s->netns_.name();
  // All of it must be there: a slot missing its rules would be a VM with
  // an unpoliced link, one missing a link a VM without network.
  VESSEL_TRY_CTX(ip(n, {"link", "show", "dev", a.guest_if}), what + ": its tap");
  VESSEL_TRY_CTX(ip(n, {"link", "show", "dev", a.transit_if}), what + ": its transit link");
  VESSEL_TRY_CTX(ip(l.gateway_netns, {"link", "show", "dev", a.gateway_side_if}),
                 what + ": its gateway side");
  VESSEL_TRY_CTX(s->netns_.run({"nft", "list", "table", "netdev", "vessel_guest"}),
                 what + ": its guest filter");
  VESSEL_TRY_CTX(s->netns_.run({"nft", "list", "table", "ip", "vessel_slot"}),
                 what + ": its slot rules");
  VESSEL_TRY_CTX(s->addGatewayElement(), what);
  return s;
}

void Slot::handOver() {
  element_added_ = false;
  gateway_side_.release();
  netns_.release();
  tap_.reset();  // the VM holds its own descriptor: the tap lives on with it
}

Slot::~Slot() {
  if (element_added_) {
    auto r = os::runCommand(os::inNetns(
        layout_.gateway_netns, {"nft", "delete", "element", "ip", gatewayTableName(layout_),
                                "slot_sources", slotSourcesElement(addr_)}));
    if (!r.ok()) Logger("network").warn("slot {}: {}", index_, r.error().message());
  }
  // Members: gateway_side_ (the veth pair), tap_, then the namespace.
}

}  // namespace vessel::node::network
