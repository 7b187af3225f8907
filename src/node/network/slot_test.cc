#include "node/network/slot.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "os/command.h"

namespace vessel::node::network {
namespace {

class SlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    std::string id = std::to_string(::getpid());
    auto gw = os::Netns::create("vt-slot-gw-" + id);
    ASSERT_TRUE(gw.ok()) << gw.error().message();
    gw_ = std::move(*gw);
    layout_.gateway_netns = gw_.name();
    layout_.prefix = "vt" + id.substr(id.size() > 4 ? id.size() - 4 : 0);
  }
  bool netnsExists(const std::string& name) {
    auto r = os::runCommand({"ip", "netns", "list"});
    return r.ok() && r->out.find(name + " ") != std::string::npos;
  }
  std::string run(const os::Netns& ns, std::vector<std::string> argv) {
    auto r = os::runCommand(ns.wrap(std::move(argv)));
    return r.ok() ? r->out : "ERROR " + r.error().message();
  }
  os::Netns gw_;
  NetworkLayout layout_;
};

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

TEST_F(SlotTest, PoolMakesSlotsAndCleansUp) {
  std::string first_ns;
  {
    auto pool = SlotPool::create(layout_, 2);
    ASSERT_TRUE(pool.ok()) << pool.error().message();
    EXPECT_EQ((*pool)->ready(), 2u);
    auto slot = (*pool)->acquire();
    ASSERT_TRUE(slot.ok()) << slot.error().message();
    first_ns = (*slot)->netns().name();
    EXPECT_GE((*slot)->tapFd(), 0);
    EXPECT_NE(run((*slot)->netns(), {"nft", "list", "ruleset"}).find("vessel_slot"),
              std::string::npos);
    EXPECT_NE(run(gw_, {"nft", "list", "set", "ip", gatewayTableName(layout_), "slot_sources"})
                  .find((*slot)->sourceAddress()),
              std::string::npos);
    (*pool)->release(std::move(*slot));
    EXPECT_FALSE(netnsExists(first_ns));
    EXPECT_TRUE((*pool)->refill().ok());
  }
  EXPECT_EQ(run(gw_, {"nft", "list", "tables"}), "");
  EXPECT_EQ(run(gw_, {"ip", "-o", "link", "show", "type", "veth"}), "");
}

TEST_F(SlotTest, RuleFailureLeavesNoSlot) {
  auto pool = SlotPool::create(layout_, 0);
  ASSERT_TRUE(pool.ok()) << pool.error().message();
  NetworkLayout bad = layout_;
  bad.guest_mac = "not-a-mac";
  auto slot = Slot::create(bad, 7);
  ASSERT_FALSE(slot.ok());
  EXPECT_NE(slot.error().message().find("nftables"), std::string::npos);
  EXPECT_FALSE(netnsExists(bad.prefix + "-7"));
  EXPECT_EQ(run(gw_, {"ip", "-o", "link", "show", "type", "veth"}), "");
}

}  // namespace
}  // namespace vessel::node::network
