#include "node/network/slot.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <filesystem>

#include "base/log.h"
#include "base/offload.h"
#include "os/command.h"

namespace vessel::node::network {

namespace {

constexpr uint32_t kMaxSlots = 16384;  // /30s in the transit /16

Result<std::string> transitAddress(const std::string& base, uint32_t index, uint32_t host) {
  in_addr a{};
  if (::inet_pton(AF_INET, base.c_str(), &a) != 1) {
    return Error(Code::kInvalidArgument, "bad transit base " + base);
  }
  uint32_t v = ntohl(a.s_addr) + index * 4 + host;
  a.s_addr = htonl(v);
  char out[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, out, sizeof out);
  return std::string(out);
}

Status ip(const std::string& netns, std::vector<std::string> args) {
  std::vector<std::string> argv{"ip"};
  if (!netns.empty()) argv.insert(argv.end(), {"-n", netns});
  argv.insert(argv.end(), args.begin(), args.end());
  VESSEL_TRY(os::runCommand(argv));
  return okStatus();
}

}  // namespace

std::string gatewayTableName(const NetworkLayout& l) { return "vessel_gw_" + l.prefix; }

std::string sandboxRuleset(const NetworkLayout& l, const SlotAddresses& a) {
  // Loaded with nft -f: atomic, so a slot has all of this or nothing.
  return fmt::format(
      R"(table netdev vessel_guest {{
  chain ingress {{
    type filter hook ingress device "{gif}" priority -500; policy drop;
    ether saddr != {gmac} drop
    ether type arp arp htype 1 arp ptype ip arp saddr ether {gmac} arp saddr ip {gip} accept
    ether type ip ip saddr {gip} ip frag-off & 0x3fff == 0 accept
  }}
}}
table ip vessel_slot {{
  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    iifname "{gif}" ip daddr {gw} meta l4proto {{ tcp, udp }} th dport 53 dnat to {gwside}:{dns}
    iifname "{gif}" ip daddr {gw} meta l4proto tcp dnat to {gwside}
  }}
  chain forward {{
    type filter hook forward priority filter; policy drop;
    # One guest cannot take the gateway from the others: bounded open TCP
    # connections, new connections and DNS packets per second (the gateway
    # enforces tighter per-sandbox budgets; these hold in the kernel first).
    iifname "{gif}" meta l4proto tcp ct state new ct count over {maxconn} drop
    iifname "{gif}" meta l4proto tcp ct state new limit rate over {tcprate}/second burst {tcpburst} packets drop
    iifname "{gif}" udp dport {dns} limit rate over {dnsrate}/second burst {dnsburst} packets drop
    iifname "{gif}" oifname "{tif}" ip saddr {gip} meta l4proto tcp accept
    iifname "{gif}" oifname "{tif}" ip saddr {gip} ip daddr {gwside} udp dport {dns} accept
    iifname "{tif}" oifname "{gif}" ct state established,related accept
  }}
  chain input {{
    type filter hook input priority filter; policy drop;
    iifname "lo" accept
  }}
  chain output {{
    type filter hook output priority filter; policy drop;
    oifname "lo" accept
    ct state established,related accept
  }}
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    oifname "{tif}" snat to {slot}
  }}
}}
)",
      fmt::arg("gif", a.guest_if), fmt::arg("tif", a.transit_if), fmt::arg("gmac", l.guest_mac),
      fmt::arg("gip", l.guest_ip), fmt::arg("gw", l.gateway_ip),
      fmt::arg("gwside", a.gateway_address), fmt::arg("dns", l.dns_port),
      fmt::arg("slot", a.slot_address), fmt::arg("maxconn", l.max_tcp_connections),
      fmt::arg("tcprate", l.new_tcp_per_second), fmt::arg("tcpburst", 2 * l.new_tcp_per_second),
      fmt::arg("dnsrate", l.dns_per_second), fmt::arg("dnsburst", 2 * l.dns_per_second));
}

std::string gatewayRuleset(const NetworkLayout& l) {
  // Declaring and deleting first makes the load replace a table an earlier
  // run left, in the same atomic transaction, instead of adding a second
  // copy of every rule to it.
  return fmt::format(R"(table ip {table}
delete table ip {table}
table ip {table} {{
  set slot_sources {{ type ifname . ipv4_addr; }}
  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    iifname "{p}h*" tcp dport {dns} fib daddr type local accept
    iifname "{p}h*" meta l4proto tcp redirect to :{proxy}
  }}
  chain input {{
    type filter hook input priority filter; policy accept;
    iifname "{p}h*" jump from_slot
  }}
  chain from_slot {{
    iifname . ip saddr != @slot_sources drop
    tcp dport {{ {proxy}, {dns} }} accept
    udp dport {dns} accept
    drop
  }}
  chain forward {{
    type filter hook forward priority filter; policy accept;
    iifname "{p}h*" drop
    oifname "{p}h*" drop
  }}
}}
)",
                     fmt::arg("table", gatewayTableName(l)), fmt::arg("p", l.prefix),
                     fmt::arg("dns", l.dns_port), fmt::arg("proxy", l.proxy_port));
}

namespace {

Result<SlotAddresses> slotAddresses(const NetworkLayout& l, uint32_t index, const GuestLink& link) {
  if (index >= kMaxSlots) return Error(Code::kResourceExhausted, "slot index out of range");
  SlotAddresses a;
  a.guest_if = link.kind == GuestLink::Kind::kTap ? "tap0" : "guest0";
  a.gateway_side_if = l.prefix + "h" + std::to_string(index);
  VESSEL_ASSIGN_OR_RETURN(a.gateway_address, transitAddress(l.transit_base, index, 1));
  VESSEL_ASSIGN_OR_RETURN(a.slot_address, transitAddress(l.transit_base, index, 2));
  return a;
}

std::string slotSourcesElement(const SlotAddresses& a) {
  return "{ \"" + a.gateway_side_if + "\" . " + a.slot_address + " }";
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

  auto ns = os::Netns::create(l.prefix + "-" + std::to_string(index));
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
  auto ns = os::Netns::adopt(l.prefix + "-" + std::to_string(index));
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

Result<std::unique_ptr<SlotPool>> SlotPool::create(NetworkLayout layout, size_t ready_target) {
  std::unique_ptr<SlotPool> p(new SlotPool());
  p->layout_ = std::move(layout);
  p->target_ = ready_target;
  const NetworkLayout& l = p->layout_;
  VESSEL_TRY_CTX(os::nftApply(l.gateway_netns, gatewayRuleset(l)), "gateway slot table");
  p->gateway_table_ = os::NftTable(l.gateway_netns, "ip", gatewayTableName(l));
  // Set aside before the refill, which must not pick their indices.
  p->leftovers_ = existingSlots(l.prefix);
  p->in_use_ = p->leftovers_;
  VESSEL_TRY(p->refill());
  return p;
}

SlotPool::~SlotPool() {
  *alive_ = false;
  makers_->join();  // a slot in the making finishes; its acquirer finds no pool
  if (filler_.joinable()) filler_.join();
  ready_.clear();  // slots first: they remove their elements from the table
  // Handed-over slots keep their element, so the table's filter still
  // applies to them until the next vesseld replaces it.
  if (handed_over_ > 0) gateway_table_.release();
}

std::set<uint32_t> existingSlots(const std::string& prefix) {
  std::set<uint32_t> out;
  std::string p = prefix + "-";
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind(p, 0) != 0 || n.size() == p.size() || n.size() > p.size() + 5) continue;
    if (n.find_first_not_of("0123456789", p.size()) != std::string::npos) continue;
    uint32_t i = static_cast<uint32_t>(std::stoul(n.substr(p.size())));
    if (i < kMaxSlots) out.insert(i);
  }
  return out;
}

void removeLeftovers(const std::string& prefix) {
  std::vector<std::string> names;
  for (uint32_t i : existingSlots(prefix)) names.push_back(prefix + "-" + std::to_string(i));
  names.push_back(prefix + "-gw");
  for (const auto& n : names) {
    auto ns = os::Netns::adopt(n);
    if (!ns.ok()) continue;
    Logger("network").warn("removing network namespace {} left by an earlier run", n);
    ns->destroy();
  }
}

Result<std::unique_ptr<Slot>> SlotPool::adopt(uint32_t index) {
  if (!leftovers_.erase(index))
    return Error(Code::kNotFound, "network slot " + std::to_string(index) +
                                      " was not left by an earlier run (its namespace is gone)");
  auto s = Slot::adopt(layout_, index);
  if (!s.ok()) in_use_.erase(index);
  return s;
}

void SlotPool::dropLeftovers() {
  for (uint32_t i : leftovers_) {
    auto ns = os::Netns::adopt(layout_.prefix + "-" + std::to_string(i));
    if (ns.ok()) {
      // Its veth pair goes with it (a link that outlives it for a while,
      // held by a dying VM's tap, is replaced by Slot::create).
      Logger("network").info("removing network slot {} left by an earlier run", i);
      ns->destroy();
    }
    in_use_.erase(i);
  }
  leftovers_.clear();
}

void SlotPool::handOver(std::unique_ptr<Slot> slot) {
  if (!slot) return;
  slot->handOver();
  ++handed_over_;
  in_use_.erase(slot->index());
}

void SlotPool::refillInBackground(boost::asio::io_context& io) {
  if (filling_ || ready_.size() >= target_) return;
  auto i = nextIndex();
  if (!i.ok()) {
    Logger("network").warn("slot pool refill: {}", i.error().message());
    return;
  }
  filling_ = true;
  if (filler_.joinable()) filler_.join();  // the previous one has posted its result
  uint32_t index = *i;
  filler_ = std::thread([this, &io, index, layout = layout_, alive = alive_] {
    auto s = Slot::create(layout, index);
    // The result goes back to the io thread, which owns the pool. If the
    // pool is gone by then, the slot is destroyed with the handler.
    auto done = std::make_shared<Result<std::unique_ptr<Slot>>>(std::move(s));
    boost::asio::post(io, [this, index, done, alive] {
      if (!*alive) return;
      filling_ = false;
      if (done->ok()) {
        ready_.push_back(std::move(**done));
      } else {
        in_use_.erase(index);
        Logger("network").warn("slot pool refill: {}", done->error().message());
      }
    });
  });
}

Result<uint32_t> SlotPool::nextIndex() {
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    if (in_use_.insert(i).second) return i;
  }
  return Error(Code::kResourceExhausted, "no free network slot");
}

Status SlotPool::refill() {
  while (ready_.size() < target_) {
    VESSEL_ASSIGN_OR_RETURN(uint32_t i, nextIndex());
    auto s = Slot::create(layout_, i);
    if (!s.ok()) {
      in_use_.erase(i);
      return std::move(s).error();
    }
    ready_.push_back(std::move(*s));
  }
  return okStatus();
}

Result<std::unique_ptr<Slot>> SlotPool::acquire(const GuestLink& link) {
  if (link.kind == GuestLink::Kind::kTap && !ready_.empty()) {
    auto s = std::move(ready_.back());
    ready_.pop_back();
    return s;
  }
  VESSEL_ASSIGN_OR_RETURN(uint32_t i, nextIndex());
  auto s = Slot::create(layout_, i, link);
  if (!s.ok()) in_use_.erase(i);
  return s;
}

boost::asio::awaitable<Result<std::unique_ptr<Slot>>> SlotPool::acquireAsync() {
  if (!ready_.empty()) co_return acquire();
  auto i = nextIndex();
  if (!i.ok()) co_return std::move(i).error();
  uint32_t index = *i;
  auto alive = alive_;
  // Named, not a temporary argument: g++ 12 destroys a prvalue argument of
  // a coroutine twice.
  auto make = [layout = layout_, index] { return Slot::create(layout, index); };
  auto s = co_await offload(*makers_, std::move(make));
  // The pool may be gone by now (vesseld stopping): the slot goes with it.
  if (!*alive) co_return Error(Code::kUnavailable, "network slot pool stopped");
  if (!s.ok()) in_use_.erase(index);
  co_return s;
}

void SlotPool::release(std::unique_ptr<Slot> slot) {
  if (!slot) return;
  uint32_t i = slot->index();
  slot.reset();
  in_use_.erase(i);
}

boost::asio::awaitable<void> SlotPool::releaseAsync(std::unique_ptr<Slot> slot) {
  if (!slot) co_return;
  uint32_t index = slot->index();
  auto alive = alive_;
  // Named, not a temporary argument: g++ 12 destroys a prvalue argument of
  // a coroutine twice.
  auto teardown = [s = std::move(slot)]() mutable {
    s.reset();
    return true;
  };
  (void)co_await offload(*makers_, std::move(teardown));
  if (*alive) in_use_.erase(index);
}

}  // namespace vessel::node::network
