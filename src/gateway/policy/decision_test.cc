// IP and CIDR rules beside names (issue 25 item 6), row by row: what the
// gateway decides for a flow given its name (or none) and where the guest
// sent it, and what it refuses among its own answers for a name.
#include "gateway/policy/decision.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace vessel::gateway::policy {
namespace {

namespace ip = boost::asio::ip;
namespace json = boost::json;

Policy make(const char* mode, std::vector<const char*> allow, std::vector<const char*> deny = {}) {
  json::array a, d;
  for (const char* r : allow) a.emplace_back(r);
  for (const char* r : deny) d.emplace_back(r);
  auto p =
      Policy::fromJson(json::object{{"generation", 1}, {"mode", mode}, {"allow", a}, {"deny", d}});
  EXPECT_TRUE(p.ok()) << p.error().message();
  return p.ok() ? *p : Policy{};
}

ip::address addr(const char* a) { return ip::make_address(a); }

struct Row {
  const char* name;  // "" = the flow has no name (no SNI, unparseable, raw TCP)
  const char* destination;
  uint16_t port;
  Route route;
  const char* reason;
};

void expectRows(const Policy& p, const std::vector<Row>& rows) {
  AddressClassifier c;
  c.setHostAddresses({addr("198.51.100.1")});
  for (const Row& r : rows) {
    Decision d = decide(p, c, r.name, addr(r.destination), r.port);
    EXPECT_EQ(static_cast<int>(d.route), static_cast<int>(r.route))
        << r.name << " -> " << r.destination << ":" << r.port << " (" << d.reason << ")";
    EXPECT_EQ(d.reason, r.reason) << r.name << " -> " << r.destination << ":" << r.port;
  }
}

TEST(DecisionTest, AnAllowedAddressNeedsNoName) {
  Policy p = make("allowlist", {"a.test", "203.0.113.7", "198.51.100.0/24:5432"});
  expectRows(p, {
                    // No name at all, every port of an address rule without one.
                    {"", "203.0.113.7", 443, Route::kByAddress, ""},
                    {"", "203.0.113.7", 22, Route::kByAddress, ""},
                    {"", "203.0.113.8", 443, Route::kRefuse, ""},
                    // A CIDR with a port: that port only.
                    {"", "198.51.100.77", 5432, Route::kByAddress, ""},
                    {"", "198.51.100.77", 443, Route::kRefuse, ""},
                    // A name no rule allows, sent to an allowed address, goes there.
                    {"x.test", "203.0.113.7", 443, Route::kByAddress, ""},
                    {"x.test", "203.0.113.9", 443, Route::kRefuse, "policy"},
                    // An allowed name goes by the gateway's own resolution.
                    {"a.test", "203.0.113.9", 443, Route::kByName, ""},
                    // The host's own address, even inside an allowed range.
                    {"", "198.51.100.1", 5432, Route::kRefuse, "inward-destination:host-address"},
                });
}

TEST(DecisionTest, InwardRangesStayRefusedWhateverARuleSays) {
  Policy p = make("allowlist", {"0.0.0.0/0", "10.0.0.0/8", "169.254.169.254", "127.0.0.1:8080",
                                "::/0", "fe80::/10", "[fd00:ec2::254]:80"});
  expectRows(
      p, {
             {"", "10.1.2.3", 443, Route::kRefuse, "inward-destination:private"},
             {"", "169.254.169.254", 80, Route::kRefuse, "inward-destination:link-local/metadata"},
             {"", "127.0.0.1", 8080, Route::kRefuse, "inward-destination:loopback"},
             {"", "192.168.1.1", 22, Route::kRefuse, "inward-destination:private"},
             {"", "fe80::1", 443, Route::kRefuse, "inward-destination:link-local"},
             {"", "fd00:ec2::254", 80, Route::kRefuse, "inward-destination:unique-local"},
             {"", "::ffff:169.254.169.254", 80, Route::kRefuse,
              "inward-destination:link-local/metadata"},
             {"", "::1", 80, Route::kRefuse, "inward-destination:embedded-v4 unspecified"},
             {"", "198.51.100.1", 80, Route::kRefuse, "inward-destination:host-address"},
             // The public rest of 0.0.0.0/0 and ::/0 is allowed.
             {"", "203.0.113.66", 80, Route::kByAddress, ""},
             {"", "2606:4700::1111", 443, Route::kByAddress, ""},
         });
  // And by name: an allowed name resolving inward is refused.
  AddressClassifier c;
  Policy names = make("allowlist", {"a.test", "10.0.0.0/8"});
  EXPECT_EQ(refuseAnswer(names, c, addr("10.1.2.3"), 443), "inward-answer:private");
}

TEST(DecisionTest, ADeniedRangeRefusesEveryNameResolvingIntoIt) {
  AddressClassifier c;
  // Full mode with a deny range: every name is allowed, but not into the range.
  Policy full = make("full", {}, {"203.0.113.0/24", "2001:db8::/32"});
  expectRows(full, {
                       {"", "203.0.113.66", 22, Route::kRefuse, "denied-address"},
                       {"", "203.0.114.1", 22, Route::kByAddress, ""},
                       {"x.test", "198.51.100.10", 443, Route::kByName, ""},
                       {"", "2001:db8::5", 443, Route::kRefuse, "denied-address"},
                   });
  EXPECT_EQ(refuseAnswer(full, c, addr("203.0.113.66"), 443), "denied-answer");
  EXPECT_EQ(refuseAnswer(full, c, addr("203.0.113.66"), std::nullopt), "denied-answer");
  EXPECT_EQ(refuseAnswer(full, c, addr("198.51.100.10"), 443), "");
  EXPECT_EQ(refuseAnswer(full, c, addr("2001:db8:1::1"), 443), "denied-answer");
  // An allowlist name rule does not open a denied range either.
  Policy names = make("allowlist", {"x.test"}, {"203.0.113.66"});
  EXPECT_EQ(refuseAnswer(names, c, addr("203.0.113.66"), 443), "denied-answer");
  EXPECT_EQ(refuseAnswer(names, c, addr("203.0.113.67"), 443), "");
}

TEST(DecisionTest, AnAllowedAddressTakesPrecedenceOverADeniedRange) {
  // E2B: "Allowed entries always take precedence over denied entries".
  AddressClassifier c;
  Policy p = make("full", {"8.8.8.8", "1.1.1.1:443"}, {"8.8.8.0/24", "1.1.1.0/24"});
  expectRows(p, {
                    {"", "8.8.8.8", 443, Route::kByAddress, ""},
                    {"", "8.8.8.9", 443, Route::kRefuse, "denied-address"},
                    {"", "1.1.1.1", 443, Route::kByAddress, ""},
                    {"", "1.1.1.1", 80, Route::kRefuse, "denied-address"},
                });
  EXPECT_EQ(refuseAnswer(p, c, addr("8.8.8.8"), 443), "");
  EXPECT_EQ(refuseAnswer(p, c, addr("8.8.8.4"), 443), "denied-answer");
  // A DNS answer (no port yet) is kept when some allowed port reaches it.
  EXPECT_EQ(refuseAnswer(p, c, addr("1.1.1.1"), std::nullopt), "");
}

TEST(DecisionTest, ModeNoneRefusesEverything) {
  Policy p = make("none", {});
  expectRows(p, {{"", "203.0.113.7", 443, Route::kRefuse, "mode-none"},
                 {"a.test", "203.0.113.7", 443, Route::kRefuse, "mode-none"}});
}

TEST(DecisionTest, OpenFlowsAreRecheckedAgainstANewPolicy) {
  Policy before = make("allowlist", {"a.test", "203.0.113.7"});
  EXPECT_TRUE(permits(before, "", addr("203.0.113.7"), 22, true));
  EXPECT_TRUE(permits(before, "a.test", addr("198.51.100.10"), 443, false));
  Policy after = make("full", {}, {"203.0.113.0/24", "198.51.100.10"});
  EXPECT_FALSE(permits(after, "", addr("203.0.113.7"), 22, true));
  EXPECT_FALSE(permits(after, "a.test", addr("198.51.100.10"), 443, false));
  EXPECT_TRUE(permits(after, "a.test", addr("198.51.100.11"), 443, false));
  Policy names_only = make("allowlist", {"a.test"});
  EXPECT_FALSE(permits(names_only, "", addr("203.0.113.7"), 22, true));
}

TEST(AddressRuleTest, Forms) {
  struct {
    const char* text;
    const char* cidr;
    int port;  // 0: every port
  } ok[] = {
      {"203.0.113.7", "203.0.113.7/32", 0},
      {"203.0.113.0/24", "203.0.113.0/24", 0},
      {"203.0.113.7:5432", "203.0.113.7/32", 5432},
      {"203.0.113.0/24:443", "203.0.113.0/24", 443},
      {"0.0.0.0/0", "0.0.0.0/0", 0},
      {"2001:db8::1", "2001:db8::1/128", 0},
      {"2001:DB8::/32", "2001:db8::/32", 0},
      {"[2001:db8::1]:443", "2001:db8::1/128", 443},
      {"[2001:db8::1]", "2001:db8::1/128", 0},
      {"[2001:db8::/48]:8443", "2001:db8::/48", 8443},
      {"::ffff:203.0.113.7", "::ffff:203.0.113.7/128", 0},
      {"::/0", "::/0", 0},
  };
  for (const auto& row : ok) {
    EXPECT_TRUE(looksLikeAddress(row.text)) << row.text;
    auto r = parseAddressRule(row.text);
    ASSERT_TRUE(r.ok()) << row.text << ": " << r.error().message();
    EXPECT_EQ(r->cidr.str(), row.cidr) << row.text;
    EXPECT_EQ(r->ports.empty() ? 0 : r->ports[0], row.port) << row.text;
  }
}

TEST(AddressRuleTest, BadFormsAreRefused) {
  for (const char* bad : {"203.0.113.7/33",   "203.0.113.7/",
                          "203.0.113.7/024",  "203.0.113.7/-1",
                          "203.0.113",        "127.1",
                          "0177.0.0.1",       "203.0.113.256",
                          "203.0.113.7:0",    "203.0.113.7:65536",
                          "203.0.113.7:",     "203.0.113.7:08",
                          "2001:db8::/129",   "fe80::1%eth0",
                          "[2001:db8::1]443", "[2001:db8::1",
                          "2001:db8::1:443x", "[203.0.113.7]:80",
                          "1.2.3.4 ",         "::ffff:1.2.3",
                          "1.2.3.4/8/8",      ""}) {
    EXPECT_FALSE(parseAddressRule(bad).ok() && looksLikeAddress(bad)) << bad;
  }
  // A deny entry covers every port.
  EXPECT_FALSE(parseDenyRange("203.0.113.7:443").ok());
  EXPECT_TRUE(parseDenyRange("203.0.113.0/24").ok());
  // Names are not addresses, even with digits in front.
  for (const char* n : {"1password.com", "a.test", "*.a.test:8443", "x1.2.3.4.test"})
    EXPECT_FALSE(looksLikeAddress(n)) << n;
}

TEST(AddressRuleTest, TheEdgeRefusesRulesThatCouldOpenNothing) {
  for (const char* r :
       {"10.0.0.1", "10.0.0.0/8", "10.1.0.0/16:22", "169.254.169.254", "127.0.0.1:8080",
        "192.168.0.0/24", "fe80::/64", "[fd00:ec2::254]:80", "::ffff:169.254.169.254", "::1"}) {
    EXPECT_TRUE(parseAddressRule(r).ok()) << r;  // the gateway reads it (and refuses inward)
    EXPECT_FALSE(parseAllowAddress(r).ok()) << r;
  }
  // Ranges with public addresses in them are kept: only their inward part
  // is refused, at the gateway.
  for (const char* r : {"0.0.0.0/0", "10.0.0.0/7", "203.0.113.7", "::/0", "2001:db8::/32"})
    EXPECT_TRUE(parseAllowAddress(r).ok()) << r;
}

TEST(AddressRuleTest, PolicyJsonCarriesAddressesAndDenies) {
  auto p = Policy::fromJson(json::parse(
      R"({"generation":1,"mode":"allowlist","allow":["a.test","203.0.113.7"],
          "deny":["198.51.100.0/24"]})"));
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->rules.size(), 1u);
  EXPECT_EQ(p->addresses.size(), 1u);
  EXPECT_EQ(p->deny.size(), 1u);
  // A name in deny, a malformed address in allow: refused, not read as names.
  for (const char* bad : {R"({"generation":1,"mode":"full","deny":["x.test"]})",
                          R"({"generation":1,"mode":"full","deny":["1.2.3.4:80"]})",
                          R"({"generation":1,"mode":"allowlist","allow":["1.2.3.4/40"]})",
                          R"({"generation":1,"mode":"allowlist","allow":["127.1"]})"})
    EXPECT_FALSE(Policy::fromJson(json::parse(bad)).ok()) << bad;
}

}  // namespace
}  // namespace vessel::gateway::policy
