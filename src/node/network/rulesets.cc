#include "node/network/rulesets.h"

#include <fmt/format.h>

namespace vessel::node::network {

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

std::string slotSourcesElement(const SlotAddresses& a) {
  return "{ \"" + a.gateway_side_if + "\" . " + a.slot_address + " }";
}

}  // namespace vessel::node::network
