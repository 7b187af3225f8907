#include "os/netns.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "os/command.h"

namespace vessel::os {
namespace {

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    prefix_ = "vt-os-" + std::to_string(::getpid());
  }
  bool exists(const std::string& name) {
    auto r = runCommand({"ip", "netns", "list"});
    return r.ok() && r->out.find(name) != std::string::npos;
  }
  std::string prefix_;
};

TEST_F(NetnsTest, CreatedAndDeletedWithItsLinks) {
  std::string name = prefix_ + "-a";
  {
    auto ns = Netns::create(name);
    ASSERT_TRUE(ns.ok()) << ns.error().message();
    EXPECT_TRUE(exists(name));
    auto peer = Netns::create(prefix_ + "-b");
    ASSERT_TRUE(peer.ok()) << peer.error().message();
    auto veth = createVeth(name, "va", prefix_ + "-b", "vb");
    ASSERT_TRUE(veth.ok()) << veth.error().message();
    EXPECT_TRUE(ns->run({"ip", "link", "show", "va"}).ok());
    EXPECT_TRUE(peer->run({"ip", "link", "show", "vb"}).ok());
    // A name that exists is refused, not adopted.
    EXPECT_FALSE(Netns::create(name).ok());
  }
  EXPECT_FALSE(exists(name));
  EXPECT_FALSE(exists(prefix_ + "-b"));
}

TEST_F(NetnsTest, NftRulesetIsAllOrNothing) {
  auto ns = Netns::create(prefix_ + "-n");
  ASSERT_TRUE(ns.ok()) << ns.error().message();
  Status bad = nftApply(ns->name(),
                        "table ip t { chain c { type filter hook input priority 0; "
                        "policy drop; } }\nthis is not nft\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("nftables"), std::string::npos);
  auto list = runCommand(ns->wrap({"nft", "list", "tables"}));
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->out, "");  // nothing of the failed ruleset was loaded
  {
    ASSERT_TRUE(nftApply(ns->name(), "table ip t { }\n").ok());
    NftTable t(ns->name(), "ip", "t");
    EXPECT_NE(runCommand(ns->wrap({"nft", "list", "tables"}))->out, "");
  }
  EXPECT_EQ(runCommand(ns->wrap({"nft", "list", "tables"}))->out, "");
}

TEST_F(NetnsTest, TapLivesInItsNamespaceWhileTheFdIsOpen) {
  auto ns = Netns::create(prefix_ + "-t");
  ASSERT_TRUE(ns.ok()) << ns.error().message();
  {
    auto tap = openTap(ns->path(), "tap0");
    ASSERT_TRUE(tap.ok()) << tap.error().message();
    EXPECT_TRUE(ns->run({"ip", "link", "show", "tap0"}).ok());
    EXPECT_FALSE(runCommand({"ip", "link", "show", "tap0"}).ok());  // not in ours
  }
  EXPECT_FALSE(ns->run({"ip", "link", "show", "tap0"}).ok());
}

}  // namespace
}  // namespace vessel::os
