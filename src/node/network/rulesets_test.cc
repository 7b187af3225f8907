// The egress rulesets as text. The golden tables below are the rules a
// slot and the gateway namespace load; each rule is annotated with the
// threat class (../shared/egress-threats.md) it answers, so a change to one
// is a change someone has to argue for here. slot_test.cc loads the same
// text into real namespaces.
#include "node/network/rulesets.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace vessel::node::network {
namespace {

using Lines = std::vector<std::string>;
// Block path ("" for the top level, "table ip t", "table ip t/chain c") to
// its rule lines, comments and blank lines left out.
using Blocks = std::map<std::string, Lines>;

Blocks blocksOf(const std::string& ruleset) {
  Blocks out;
  std::vector<std::string> path;
  std::istringstream in(ruleset);
  std::string line;
  auto key = [&] {
    std::string k;
    for (const auto& p : path) k += (k.empty() ? "" : "/") + p;
    return k;
  };
  while (std::getline(in, line)) {
    size_t b = line.find_first_not_of(' ');
    if (b == std::string::npos || line[b] == '#') continue;
    line = line.substr(b);
    if (line == "}") {
      EXPECT_FALSE(path.empty()) << "unbalanced } in\n" << ruleset;
      if (!path.empty()) path.pop_back();
    } else if (line.size() > 2 && line.ends_with(" {")) {
      path.push_back(line.substr(0, line.size() - 2));
      out[key()];  // an empty block still counts
    } else {
      out[key()].push_back(line);
    }
  }
  EXPECT_TRUE(path.empty()) << "unclosed block in\n" << ruleset;
  return out;
}

// Not the defaults, so a value that does not come from the layout shows.
NetworkLayout testLayout() {
  NetworkLayout l;
  l.prefix = "vq";
  l.proxy_port = 16001;
  l.dns_port = 16053;
  l.max_tcp_connections = 100;
  l.new_tcp_per_second = 50;
  l.dns_per_second = 20;
  return l;
}
const SlotAddresses kSlot3{"tap0", "transit0", "vqh3", "10.200.0.14", "10.200.0.13"};

TEST(SlotRulesTest, RulesetNamesEveryBoundary) {
  NetworkLayout l;
  SlotAddresses a{"tap0", "transit0", "vsh3", "10.200.0.14", "10.200.0.13"};
  std::string r = sandboxRuleset(l, a);
  EXPECT_NE(r.find("ether saddr != 06:00:ac:10:00:02 drop"), std::string::npos);
  EXPECT_NE(r.find("hook ingress device \"tap0\""), std::string::npos);
  EXPECT_NE(r.find("th dport 53 dnat to 10.200.0.13:15053"), std::string::npos);
  EXPECT_NE(r.find("snat to 10.200.0.14"), std::string::npos);
  EXPECT_NE(r.find("policy drop"), std::string::npos);
  EXPECT_NE(gatewayRuleset(l).find("redirect to :15001"), std::string::npos);
}

TEST(SlotRulesTest, TheSlotRulesetIsExactlyThis) {
  Blocks got = blocksOf(sandboxRuleset(testLayout(), kSlot3));
  const Blocks want{
      {"table netdev vessel_guest", {}},
      // On the tap, before anything is routed (E. layer 2/3 identity).
      {"table netdev vessel_guest/chain ingress",
       {
           "type filter hook ingress device \"tap0\" priority -500; policy drop;",
           // 38: a frame from any other MAC.
           "ether saddr != 06:00:ac:10:00:02 drop",
           // 38: ARP only as the guest's own MAC and address (no claiming
           // the gateway's).
           "ether type arp arp htype 1 arp ptype ip arp saddr ether 06:00:ac:10:00:02 arp saddr "
           "ip 172.16.0.2 accept",
           // 37: IPv4 only from the assigned address; 30: no fragments.
           // Nothing else is accepted: 28 (IPv6), 29 (other ethertypes).
           "ether type ip ip saddr 172.16.0.2 ip frag-off & 0x3fff == 0 accept",
       }},
      {"table ip vessel_slot", {}},
      // Everything addressed to the gateway goes to the gateway namespace:
      // DNS to its resolver (31-33), other TCP to its proxy (2).
      {"table ip vessel_slot/chain prerouting",
       {
           "type nat hook prerouting priority dstnat; policy accept;",
           "iifname \"tap0\" ip daddr 172.16.0.1 meta l4proto { tcp, udp } th dport 53 dnat to "
           "10.200.0.13:16053",
           "iifname \"tap0\" ip daddr 172.16.0.1 meta l4proto tcp dnat to 10.200.0.13",
       }},
      {"table ip vessel_slot/chain forward",
       {
           "type filter hook forward priority filter; policy drop;",
           // Fair share: one guest cannot exhaust the gateway.
           "iifname \"tap0\" meta l4proto tcp ct state new ct count over 100 drop",
           "iifname \"tap0\" meta l4proto tcp ct state new limit rate over 50/second burst 100 "
           "packets drop",
           "iifname \"tap0\" udp dport 16053 limit rate over 20/second burst 40 packets drop",
           // Out: TCP (to the proxy, by the dnat above) ...
           "iifname \"tap0\" oifname \"transit0\" ip saddr 172.16.0.2 meta l4proto tcp accept",
           // ... and UDP only to the gateway's resolver (27, 33: no QUIC, no
           // other resolver).
           "iifname \"tap0\" oifname \"transit0\" ip saddr 172.16.0.2 ip daddr 10.200.0.13 udp "
           "dport 16053 accept",
           // In: replies only.
           "iifname \"transit0\" oifname \"tap0\" ct state established,related accept",
       }},
      // 42: nothing from the guest ends in the slot namespace itself.
      {"table ip vessel_slot/chain input",
       {"type filter hook input priority filter; policy drop;", "iifname \"lo\" accept"}},
      {"table ip vessel_slot/chain output",
       {"type filter hook output priority filter; policy drop;", "oifname \"lo\" accept",
        "ct state established,related accept"}},
      // 39: the slot's identity at the gateway is this address, not the
      // guest's.
      {"table ip vessel_slot/chain postrouting",
       {"type nat hook postrouting priority srcnat; policy accept;",
        "oifname \"transit0\" snat to 10.200.0.14"}},
  };
  EXPECT_EQ(got, want) << sandboxRuleset(testLayout(), kSlot3);
}

TEST(SlotRulesTest, TheGatewayRulesetIsExactlyThis) {
  Blocks got = blocksOf(gatewayRuleset(testLayout()));
  const Blocks want{
      // Replaces a table an earlier run left in the same transaction
      // (declare, delete, define), never adds a second copy of its rules.
      {"", {"table ip vessel_gw_vq", "delete table ip vessel_gw_vq"}},
      {"table ip vessel_gw_vq", {"set slot_sources { type ifname . ipv4_addr; }"}},
      {"table ip vessel_gw_vq/chain prerouting",
       {
           "type nat hook prerouting priority dstnat; policy accept;",
           "iifname \"vqh*\" tcp dport 16053 fib daddr type local accept",
           // 2: every TCP flow of every slot ends at the proxy.
           "iifname \"vqh*\" meta l4proto tcp redirect to :16001",
       }},
      {"table ip vessel_gw_vq/chain input",
       {"type filter hook input priority filter; policy accept;",
        "iifname \"vqh*\" jump from_slot"}},
      {"table ip vessel_gw_vq/chain from_slot",
       {
           // 37, 39: only a registered (link, slot address) pair.
           "iifname . ip saddr != @slot_sources drop",
           // 42: of the gateway's own services, the proxy and DNS only.
           "tcp dport { 16001, 16053 } accept",
           "udp dport 16053 accept",
           "drop",
       }},
      // 45: no routing past the gateway and no hairpin between slots.
      {"table ip vessel_gw_vq/chain forward",
       {"type filter hook forward priority filter; policy accept;", "iifname \"vqh*\" drop",
        "oifname \"vqh*\" drop"}},
  };
  EXPECT_EQ(got, want) << gatewayRuleset(testLayout());
  EXPECT_EQ(gatewayTableName(testLayout()), "vessel_gw_vq");
}

TEST(SlotRulesTest, EverySlotFilterChainDropsByDefault) {
  for (const auto& [path, lines] : blocksOf(sandboxRuleset(testLayout(), kSlot3))) {
    if (path.find("/chain ") == std::string::npos) continue;
    ASSERT_FALSE(lines.empty()) << path;
    if (lines[0].starts_with("type filter")) {
      EXPECT_TRUE(lines[0].ends_with("policy drop;")) << path << ": " << lines[0];
    }
  }
}

TEST(SlotRulesTest, TheGuestForwardsOnlyFromItsAddressAndUdpOnlyToTheResolver) {
  // Holds for any rule added later too: an accept from the tap names the
  // guest's address, and one that lets UDP through names the resolver.
  Blocks slot = blocksOf(sandboxRuleset(testLayout(), kSlot3));
  const Lines& fwd = slot["table ip vessel_slot/chain forward"];
  int accepts = 0;
  for (const std::string& r : fwd) {
    if (!r.starts_with("iifname \"tap0\"") || !r.ends_with(" accept")) continue;
    ++accepts;
    EXPECT_NE(r.find("ip saddr 172.16.0.2 "), std::string::npos) << r;
    if (r.find("udp") != std::string::npos || r.find("meta l4proto tcp") == std::string::npos) {
      EXPECT_NE(r.find("ip daddr 10.200.0.13 udp dport 16053 accept"), std::string::npos) << r;
    }
  }
  EXPECT_EQ(accepts, 2);
}

TEST(SlotRulesTest, ThereIsNoIpv6Path) {
  std::string r = sandboxRuleset(testLayout(), kSlot3) + gatewayRuleset(testLayout());
  for (const char* v6 : {"ip6", "inet ", "icmpv6", "nd-"})
    EXPECT_EQ(r.find(v6), std::string::npos) << v6 << " in\n" << r;
}

TEST(SlotRulesTest, EachSlotGetsItsOwnAddressesInTheRules) {
  NetworkLayout l = testLayout();
  auto a = slotAddresses(l, 9, GuestLink{GuestLink::Kind::kVeth, "ns", "eth0"});
  ASSERT_TRUE(a.ok());
  std::string r = sandboxRuleset(l, *a);
  EXPECT_NE(r.find("device \"guest0\""), std::string::npos) << r;
  EXPECT_NE(r.find("dnat to 10.200.0.37:16053"), std::string::npos) << r;
  EXPECT_NE(r.find("snat to 10.200.0.38"), std::string::npos) << r;
  EXPECT_EQ(r.find("10.200.0.13"), std::string::npos) << "slot 3's address in slot 9's rules";
  EXPECT_EQ(slotSourcesElement(*a), "{ \"vqh9\" . 10.200.0.38 }");
  EXPECT_EQ(slotSourcesElement(kSlot3), "{ \"vqh3\" . 10.200.0.14 }");
}

}  // namespace
}  // namespace vessel::node::network
