// IP and CIDR egress rules beside names (issue 25 item 6; E2B's allowOut and
// denyOut) against a real gateway, real nftables slots and the fake
// internet: a connection to an allowed IP literal needs no name, a denied
// range is refused for the address and for every name resolving into it,
// an allowed address wins over a denied range, and no rule opens an inward
// address. The guest is a network namespace behind the slot's veth, as in
// egress_test (egress_vm_test drives the same classes from a QEMU guest).
// Refusals wait for the gateway's own verdict, then read the attacker's log.
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/integration/egress/world.h"

namespace vessel::egress_test {
namespace {

namespace json = boost::json;

json::value policy(uint64_t generation, const char* mode, std::vector<std::string> allow,
                   std::vector<std::string> deny) {
  json::array a, d;
  for (auto& r : allow) a.emplace_back(r);
  for (auto& r : deny) d.emplace_back(r);
  return json::object{{"generation", generation}, {"mode", mode}, {"allow", a}, {"deny", d}};
}

class EgressIpRulesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    auto w = EgressWorld::create();
    if (!w.ok()) {
      setup_error_ = new std::string(w.error().message());
      return;
    }
    world_ = w->release();
    auto g = world_->addGuest("sb-ip", policy(1, "allowlist", {"a.test"}, {}));
    if (!g.ok()) {
      setup_error_ = new std::string(g.error().message());
      return;
    }
    guest_ = *g;
  }
  static void TearDownTestSuite() {
    delete world_;
    world_ = nullptr;
    delete setup_error_;
    setup_error_ = nullptr;
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    ASSERT_EQ(setup_error_, nullptr) << *setup_error_;
    ASSERT_NE(world_, nullptr);
  }
  void TearDown() override {
    if (HasFailure() && world_) {
      std::string log = world_->gatewayLog();
      std::cerr << "--- gateway log (tail) ---\n"
                << log.substr(log.size() > 4000 ? log.size() - 4000 : 0) << "\n";
    }
  }
  void set(const char* mode, std::vector<std::string> allow, std::vector<std::string> deny) {
    ASSERT_TRUE(world_->setPolicy(*guest_, policy(++generation_, mode, allow, deny)).ok());
    world_->clearLogs();
  }
  std::string tcp(const std::string& host, int port, const std::string& payload) {
    return world_->guestTool(*guest_, {"tcp", host, std::to_string(port), payload});
  }
  // Plain HTTP to `to`:80 with `host` as its Host (curl reads the whole reply).
  std::string get(const std::string& host, const std::string& path, const std::string& to) {
    return world_->curl(*guest_, {"-H", "Host: " + host, "http://" + to + path});
  }
  // Runs `attempt`, waits until the gateway counted verdict `counter`, then
  // requires the attacker's log to be empty; returns what the guest saw.
  std::string expectRefused(const std::string& counter,
                            const std::function<std::string()>& attempt) {
    int64_t base = world_->counter(counter);
    EXPECT_GE(base, 0) << "gateway not answering";
    std::string out = attempt();
    EXPECT_TRUE(world_->waitForCounter(counter, base))
        << "no " << counter << "; guest saw: " << out;
    EXPECT_EQ(world_->attackerLogNow(), "") << "guest saw: " << out;
    return out;
  }

  static EgressWorld* world_;
  static Guest* guest_;
  static std::string* setup_error_;
  static uint64_t generation_;
};

EgressWorld* EgressIpRulesTest::world_ = nullptr;
Guest* EgressIpRulesTest::guest_ = nullptr;
std::string* EgressIpRulesTest::setup_error_ = nullptr;
uint64_t EgressIpRulesTest::generation_ = 1;

TEST_F(EgressIpRulesTest, AConnectionToAnAllowedAddressNeedsNoName) {
  set("allowlist", {"a.test", "198.51.100.10"}, {});
  // Host is the IP literal itself: nothing names the flow.
  std::string o = world_->curl(*guest_, {"http://198.51.100.10/by-ip"});
  EXPECT_NE(o.find("hello from 198.51.100.10 (a)"), std::string::npos) << o;
  // TLS without SNI (curl sends none for an IP literal).
  o = world_->curl(*guest_, {"-k", "https://198.51.100.10/tls-by-ip"});
  EXPECT_NE(o.find("hello from 198.51.100.10 (a)"), std::string::npos) << o;
  // A name no rule allows, sent to the allowed address, goes to that address
  // and never to the name's own (X's).
  o = get("x.test", "/named", "198.51.100.10");
  EXPECT_NE(o.find("hello from x.test (a)"), std::string::npos) << o;
  // Without a port the rule covers every port: raw bytes reach A's :22.
  o = tcp("198.51.100.10", 22, "ip-rule-raw");
  EXPECT_NE(world_->attackerLog().find("198.51.100.10:22 ip-rule-raw"), std::string::npos) << o;
  world_->clearLogs();
  // Any other address stays closed, named or not.
  expectRefused("tcp_deny_unparseable", [&] { return tcp("203.0.113.66", 22, "x-raw"); });
  expectRefused("tcp_deny_bad-request",
                [&] { return get("203.0.113.66", "/x-ip", "203.0.113.66"); });
}

TEST_F(EgressIpRulesTest, ACidrWithAPortOpensThatPortOnly) {
  set("allowlist", {"198.51.100.0/24:8443"}, {});
  std::string o = world_->curl(*guest_, {"-k", "https://198.51.100.10:8443/cidr-port"});
  EXPECT_NE(o.find("hello from 198.51.100.10 (a)"), std::string::npos) << o;
  expectRefused("tcp_deny_unparseable", [&] { return tcp("198.51.100.10", 22, "other-port"); });
}

TEST_F(EgressIpRulesTest, ADeniedRangeIsRefusedForTheAddressAndEveryNameInIt) {
  // Control: full mode reaches X's address.
  set("full", {}, {});
  std::string o = tcp("203.0.113.66", 22, "control-x");
  EXPECT_NE(world_->attackerLog().find("control-x"), std::string::npos) << o;
  set("full", {}, {"203.0.113.0/24", "198.51.100.10"});
  expectRefused("tcp_deny_denied-address", [&] { return tcp("203.0.113.66", 22, "denied-x"); });
  // a.test resolves into the denied 198.51.100.10: refused by name, here
  // sent to A2's address (not denied), so only the name's answer decides.
  o = expectRefused("tcp_deny_denied-answer",
                    [&] { return get("a.test", "/denied-name", "198.51.100.20"); });
  EXPECT_EQ(o.find("hello from"), std::string::npos) << o;
  EXPECT_EQ(world_->apiLog().find("/denied-name"), std::string::npos) << world_->apiLog();
  // The guest's resolver refuses the name rather than hand out the address.
  o = expectRefused("dns_deny_denied-answer", [&] {
    return world_->guestTool(*guest_, {"dns", "172.16.0.1", "a.test"});
  });
  EXPECT_NE(o.find("rcode 5"), std::string::npos) << o;
  // Everything outside the ranges stays reachable.
  o = get("a2.test", "/not-denied", "198.51.100.20");
  EXPECT_NE(o.find("hello from a2.test (cdn)"), std::string::npos) << o;
}

TEST_F(EgressIpRulesTest, AnAllowedAddressWinsOverADeniedRange) {
  set("full", {"198.51.100.10:80"}, {"198.51.100.0/24"});
  std::string o = get("a.test", "/precedence", "198.51.100.10");
  EXPECT_NE(o.find("hello from a.test (a)"), std::string::npos) << o;
  // Only for that port; the rest of the range stays denied.
  o = expectRefused("tcp_deny_denied-answer",
                    [&] { return get("a2.test", "/still-denied", "198.51.100.20"); });
  EXPECT_EQ(o.find("hello from"), std::string::npos) << o;
}

TEST_F(EgressIpRulesTest, NoRuleOpensAnInwardAddress) {
  // The gateway reads these (the API's edge refuses them with 400).
  set("allowlist", {"0.0.0.0/0", "169.254.169.254", "10.0.0.0/8"}, {});
  expectRefused("tcp_deny_inward-destination",
                [&] { return get("169.254.169.254", "/latest/meta-data/", "169.254.169.254"); });
  expectRefused("tcp_deny_inward-destination", [&] { return tcp("10.1.2.3", 443, "inward"); });
  // The public rest of 0.0.0.0/0 is open (X is public: it sees this one).
  std::string o = tcp("203.0.113.66", 22, "public-rest");
  EXPECT_NE(world_->attackerLog().find("public-rest"), std::string::npos) << o;
}

}  // namespace
}  // namespace vessel::egress_test
