#include "gateway/policy/address_class.h"

#include <fmt/format.h>

namespace vessel::gateway::policy {

namespace ip = boost::asio::ip;

namespace {

bool prefixMatch(const unsigned char* a, const unsigned char* b, int prefix) {
  int full = prefix / 8, rest = prefix % 8;
  for (int i = 0; i < full; ++i) {
    if (a[i] != b[i]) return false;
  }
  if (rest == 0) return true;
  unsigned char mask = static_cast<unsigned char>(0xff << (8 - rest));
  return (a[full] & mask) == (b[full] & mask);
}

}  // namespace

bool Cidr::contains(const ip::address& a) const {
  if (a.is_v4() != address.is_v4()) return false;
  if (a.is_v4()) {
    auto x = a.to_v4().to_bytes(), y = address.to_v4().to_bytes();
    return prefixMatch(x.data(), y.data(), prefix);
  }
  auto x = a.to_v6().to_bytes(), y = address.to_v6().to_bytes();
  return prefixMatch(x.data(), y.data(), prefix);
}

std::string Cidr::str() const { return fmt::format("{}/{}", address.to_string(), prefix); }

Result<Cidr> parseCidr(std::string_view s) {
  Cidr c;
  size_t slash = s.find('/');
  boost::system::error_code ec;
  c.address = ip::make_address(std::string(s.substr(0, slash)), ec);
  if (ec) return Error(Code::kInvalidArgument, "bad address in cidr " + std::string(s));
  int max = c.address.is_v4() ? 32 : 128;
  c.prefix = max;
  if (slash != std::string_view::npos) {
    std::string p(s.substr(slash + 1));
    if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos) {
      return Error(Code::kInvalidArgument, "bad prefix in cidr " + std::string(s));
    }
    c.prefix = std::stoi(p);
    if (c.prefix > max) return Error(Code::kInvalidArgument, "prefix too long in " + p);
  }
  return c;
}

AddressClassifier::AddressClassifier() {
  const std::pair<const char*, const char*> table[] = {
      {"0.0.0.0/8", "unspecified"},
      {"10.0.0.0/8", "private"},
      {"100.64.0.0/10", "cgnat"},
      {"127.0.0.0/8", "loopback"},
      {"169.254.0.0/16", "link-local/metadata"},
      {"172.16.0.0/12", "private"},
      {"192.0.0.0/24", "ietf-protocol"},
      {"192.88.99.0/24", "6to4-relay"},
      {"192.168.0.0/16", "private"},
      {"198.18.0.0/15", "benchmarking"},
      {"224.0.0.0/4", "multicast"},
      {"240.0.0.0/4", "reserved"},
      {"::/128", "unspecified"},
      {"::1/128", "loopback"},
      {"fc00::/7", "unique-local"},
      {"fe80::/10", "link-local"},
      {"ff00::/8", "multicast"},
      {"fd00:ec2::254/128", "metadata"},
      {"100::/64", "discard"},
  };
  for (auto& [cidr, reason] : table) builtin_.push_back({*parseCidr(cidr), reason});
}

std::string AddressClassifier::refusalReason(const ip::address& a) const {
  if (a.is_v6()) {
    ip::address_v6 v6 = a.to_v6();
    auto b = v6.to_bytes();
    // IPv4 carried inside IPv6 is judged as the IPv4 it reaches.
    if (v6.is_v4_mapped()) return refusalReason(ip::make_address_v4(ip::v4_mapped, v6));
    auto embedded = [&](int at) {
      ip::address_v4::bytes_type v4{b[at], b[at + 1], b[at + 2], b[at + 3]};
      return ip::address_v4(v4);
    };
    static const Cidr kNat64 = *parseCidr("64:ff9b::/96");
    static const Cidr kNat64Local = *parseCidr("64:ff9b:1::/48");
    static const Cidr k6to4 = *parseCidr("2002::/16");
    static const Cidr kTeredo = *parseCidr("2001::/32");
    static const Cidr kCompat = *parseCidr("::/96");
    if (kNat64.contains(a) || kCompat.contains(a)) {
      std::string r = refusalReason(embedded(12));
      return r.empty() ? "" : "embedded-v4 " + r;
    }
    if (kNat64Local.contains(a)) return "nat64-local";
    if (k6to4.contains(a)) {
      std::string r = refusalReason(embedded(2));
      return r.empty() ? "" : "6to4 " + r;
    }
    if (kTeredo.contains(a)) return "teredo";
  }
  for (const Range& r : builtin_) {
    if (r.cidr.contains(a)) return r.reason;
  }
  for (const Cidr& c : extra_) {
    if (c.contains(a)) return "denied-range " + c.str();
  }
  for (const auto& h : host_) {
    if (h == a) return "host-address";
  }
  return "";
}

std::string AddressClassifier::builtinRangeReason(const Cidr& c) const {
  // A single address: judged as a destination (embedded IPv4 included).
  if (c.prefix == (c.address.is_v4() ? 32 : 128)) {
    std::string why = refusalReason(c.address);
    return why.rfind("denied-range", 0) == 0 || why == "host-address" ? "" : why;
  }
  for (const Range& r : builtin_) {
    if (r.cidr.prefix <= c.prefix && r.cidr.contains(c.address)) return r.reason;
  }
  return "";
}

}  // namespace vessel::gateway::policy
