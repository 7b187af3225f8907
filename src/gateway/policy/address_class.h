#pragma once
// Which addresses the gateway will never connect to or hand to a guest, in
// any mode: loopback, private, link-local (and so cloud metadata), CGNAT,
// benchmarking, multicast, reserved, unspecified, IPv6 ULA/link-local, and
// IPv4 embedded in IPv6 (mapped, NAT64, 6to4, Teredo) judged by its IPv4
// part; plus operator-supplied ranges (the host's own addresses, the
// sandboxes' transit range). The documentation ranges 192.0.2.0/24,
// 198.51.100.0/24 and 203.0.113.0/24 are deliberately NOT refused: the test
// internet lives there.
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace vessel::gateway::policy {

struct Cidr {
  boost::asio::ip::address address;
  int prefix = 0;
  bool contains(const boost::asio::ip::address& a) const;
  std::string str() const;
};
Result<Cidr> parseCidr(std::string_view s);

class AddressClassifier {
 public:
  AddressClassifier();
  // Extra refused ranges (host addresses, transit range, --egress-deny-cidr).
  void addDenied(Cidr c) { extra_.push_back(std::move(c)); }
  // The host's own addresses, replaced whenever they change (the gateway
  // watches its upstream namespace's addresses over netlink).
  void setHostAddresses(std::vector<boost::asio::ip::address> a) { host_ = std::move(a); }

  // Empty if `a` may be dialled; otherwise the reason ("loopback", ...).
  std::string refusalReason(const boost::asio::ip::address& a) const;
  // Non-empty if every address of `c` is in one built-in refused range (an
  // allow rule for it could never open anything: "10.0.0.0/8",
  // "169.254.169.254"); the edge refuses such a rule instead of accepting
  // a promise the gateway will not keep.
  std::string builtinRangeReason(const Cidr& c) const;

 private:
  struct Range {
    Cidr cidr;
    const char* reason;
  };
  std::vector<Range> builtin_;
  std::vector<Cidr> extra_;
  std::vector<boost::asio::ip::address> host_;
};

}  // namespace vessel::gateway::policy
