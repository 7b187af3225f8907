#include "vesseld/testing/fake_machine.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace vessel::vesseld::testing {
namespace {

// Moved from config_test with the check it tests (--hypervisor=fake is no
// longer a Config matter: only test binaries know it).
TEST(FakeMachineTest, TheFakeHypervisorNeverRunsASingleMachine) {
  Config all;
  all.kernel = all.minimal_image = "/etc/hostname";
  all.state_dir = "/tmp/x";
  all.hypervisor = "fake";
  all.jail = all.egress = false;
  ASSERT_TRUE(all.validate().ok()) << all.validate().error().message();
  EXPECT_FALSE(checkFakeConfig(all, "/etc/hostname").ok());
}

TEST(FakeMachineTest, ANodeNeedsNoJailNoEgressAndItsAgent) {
  ::setenv("VESSEL_NODE_TOKEN", "0123456789abcdef-secret", 1);
  Config node;
  node.role = Role::kNode;
  node.kernel = node.minimal_image = "/etc/hostname";
  node.state_dir = "/tmp/x";
  node.store = "postgres://vessel@db/vessel";
  node.node_name = "n1";
  node.hypervisor = "fake";
  ASSERT_TRUE(node.validate().ok()) << node.validate().error().message();
  // Jailed and with egress by default: refused.
  auto s = checkFakeConfig(node, "/etc/hostname");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("--no-jail and --no-egress"), std::string::npos);
  node.jail = node.egress = false;
  EXPECT_TRUE(checkFakeConfig(node, "/etc/hostname").ok());
  auto missing = checkFakeConfig(node, "/nonexistent/vessel-agent");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("fake agent /nonexistent/vessel-agent"),
            std::string::npos);
  EXPECT_FALSE(checkFakeConfig(node, "").ok());
  // An API replica runs no VM: no agent needed.
  node.role = Role::kApi;
  EXPECT_TRUE(checkFakeConfig(node, "").ok());
  ::unsetenv("VESSEL_NODE_TOKEN");
}

}  // namespace
}  // namespace vessel::vesseld::testing
